/*
 * tablefile.c -- tables read from files (remat.h, "tables read from
 * files"; README, "The table format", gives the format): JSON
 * through Jansson, checked, turned into a table of constant bytes
 * (src/table/custom.c) and a profile of the file's times.
 *
 * What the numbers become.  With x a block's output (the chain's input, the
 * gradient between blocks), E and C its expensive and cheap saved bytes,
 * P and H what the ops before and after the chain keep:
 *   - the head entry holds P + H: kept outside the chain, it is live when
 *     the forward ends, as the framework holds it;
 *   - kept bytes = stored + P + H - (x if the chain's input is not among
 *     the kept bytes, "kept": false: a sample input, allocated before the
 *     step) - (x if the head does not keep the last block's output): the
 *     simulator keeps both, whatever the plan, so it is one constant
 *     (outside_bytes);
 *   - the head's scratch R = E + C + 2x is more than any moment of a
 *     block's forward or backward adds to what the end of the forward
 *     holds (a block's saved tensors, recomputed, with its input, output and
 *     gradient), so that moment is the highest of a step and the simulated
 *     peak is kept bytes + R + those two x's (reserve_bytes) -- unless a
 *     segment of blocks re-run together holds more, which the simulator then
 *     counts as it does any peak.  A budget on kept bytes is a budget on
 *     activations of that much more.
 * Times: a block's forward on its saved entries (custom.c), its backward on
 * its output's; the median of the blocks' (their structure must agree; their
 * times are measurements, and differ).
 *
 * Version 2 (remat.h gives it) is read into the same structure, a chain at
 * a time: one chain at the top level, as version 1, or "chains".  Its
 * blocks may differ, and a version-2 chain is checked for what version 1
 * checks but sameness.  A uniform file -- one chain, its blocks the same,
 * its input a block's output -- becomes exactly the table version 1 makes.
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "../table/tensors.h"
#include "../planner/planner.h"
#include "io.h"
#include "weights.h"

#define TF_MAX_JSON ((size_t)256 << 20)
#define TF_MAX_BYTES (1ULL << 48)      /* one number of bytes, and one block's sum (256 TiB) */
#define TF_MAX_MS 1e9
#define TF_MAX_SAVED 1000000           /* saved tensors of one block */
#define TF_MAX_CONTEXTS 4096           /* version 3's contexts */

/* keys of an object that are not among known[] */
static remat_status unknown_keys(const remat_jobj *h, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)h->o, key, v) {
        int ok = 0;
        for (int i = 0; known[i] && !ok; i++) ok = !strcmp(key, known[i]);
        if (!ok) return remat_fail(REMAT_ERR_FORMAT, "%s: unknown key '%s%.64s'", h->src, h->where, key);
    }
    return REMAT_OK;
}

static remat_status bytes_of(const remat_jobj *h, const char *key, int required, long long dflt, uint64_t *out)
{
    long long v;
    if (required && !remat_jobj_val(h, key)) return remat_jobj_bad(h, key, "given (a number of bytes)", NULL);
    remat_status st = remat_jobj_ll(h, key, dflt, 0, (long long)TF_MAX_BYTES, &v);
    if (!st) *out = (uint64_t)v;
    return st;
}

static remat_status ms_of(const remat_jobj *h, const char *key, double *out)
{
    return remat_jobj_range(h, key, 0, 0, TF_MAX_MS, out);
}

/* a string of at most REMAT_TABLE_NAME_MAX bytes, copied (NULL when absent) */
static remat_status str_of(const remat_jobj *h, const char *key, char **out)
{
    const char *v;
    char want[48];
    remat_status st = remat_jobj_str(h, key, NULL, &v);
    if (st || !v) return st;
    snprintf(want, sizeof want, "a string of at most %d bytes", REMAT_TABLE_NAME_MAX);
    if (strlen(v) > REMAT_TABLE_NAME_MAX) return remat_jobj_bad(h, key, want, remat_jobj_val(h, key));
    if (!(*out = remat_strdup(v))) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", h->src);
    return REMAT_OK;
}

/* the object at key (required), as h */
static remat_status object_of(const remat_jobj *top, const char *key, const char *where, remat_jobj *h)
{
    const json_t *v = remat_jobj_val(top, key);
    if (!json_is_object(v)) return remat_jobj_bad(top, key, "an object", v);
    *h = (remat_jobj){ v, top->src, where };
    return REMAT_OK;
}

/* key (work_bytes, ...: version 3's measured bytes) of h into *out, *given set when it is there */
static remat_status measured_of(const remat_jobj *h, const char *key, int version, uint64_t *out, int *given)
{
    if (version < 3) return REMAT_OK;
    if (remat_jobj_val(h, key)) *given = 1;
    return bytes_of(h, key, 0, 0, out);
}

static remat_status work_of(const remat_jobj *h, int version, uint64_t *out, int *given)
{
    return measured_of(h, "work_bytes", version, out, given);
}

/* block object v, named where ("blocks[3]." or "chains[1].blocks[3].") */
static remat_status block_of(const remat_jobj *top, const json_t *v, const char *where, int version, int *work,
                             remat_tabfile_block *b)
{
    static const char *const keys[] = { "saved", "output_bytes", "forward_ms", "backward_ms", "cheap_forward_ms",
                                        NULL };
    static const char *const keys3[] = { "saved", "output_bytes", "forward_ms", "backward_ms", "cheap_forward_ms",
                                         "work_bytes", NULL };
    remat_status st;
    if (!json_is_object(v))
        return remat_fail(REMAT_ERR_FORMAT, "%s: %.*s must be an object", top->src, (int)strlen(where) - 1, where);
    remat_jobj h = { v, top->src, where };
    if ((st = unknown_keys(&h, version >= 3 ? keys3 : keys)) ||
        (st = bytes_of(&h, "output_bytes", 1, 0, &b->output_bytes)) ||
        (st = ms_of(&h, "forward_ms", &b->forward_ms)) || (st = ms_of(&h, "backward_ms", &b->backward_ms)) ||
        (st = ms_of(&h, "cheap_forward_ms", &b->cheap_forward_ms)) || (st = work_of(&h, version, &b->work_bytes, work)))
        return st;
    if (!b->output_bytes) return remat_jobj_bad(&h, "output_bytes", "at least 1", remat_jobj_val(&h, "output_bytes"));
    if (b->cheap_forward_ms > b->forward_ms)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %scheap_forward_ms %g is more than its forward_ms %g", top->src, where,
                          b->cheap_forward_ms, b->forward_ms);
    const json_t *sv = remat_jobj_val(&h, "saved");
    if (!json_is_array(sv)) return remat_jobj_bad(&h, "saved", "an array of {\"bytes\", \"cheap\"}", sv);
    size_t n = json_array_size(sv);
    if (n > TF_MAX_SAVED) return remat_fail(REMAT_ERR_FORMAT, "%s: %ssaved has %zu tensors (at most %d)", top->src,
                                            where, n, TF_MAX_SAVED);
    if (n && !(b->saved = remat_calloc(n, sizeof *b->saved)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", top->src);
    b->nsaved = n;
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        static const char *const skeys[] = { "bytes", "cheap", NULL };
        char w2[96];
        snprintf(w2, sizeof w2, "%ssaved[%zu].", where, k);
        const json_t *e = json_array_get(sv, k);
        if (!json_is_object(e)) return remat_fail(REMAT_ERR_FORMAT, "%s: %ssaved[%zu] must be an object", top->src, where, k);
        remat_jobj eh = { e, top->src, w2 };
        if ((st = unknown_keys(&eh, skeys)) || (st = bytes_of(&eh, "bytes", 1, 0, &b->saved[k].bytes)) ||
            (st = remat_jobj_bool(&eh, "cheap", 0, &b->saved[k].cheap)))
            return st;
        sum += b->saved[k].bytes;
        if (sum > TF_MAX_BYTES)
            return remat_fail(REMAT_ERR_FORMAT, "%s: %ssaved holds more than %llu bytes", top->src, where,
                              (unsigned long long)TF_MAX_BYTES);
    }
    return REMAT_OK;
}

/* The first way block b differs from block a (0): "" when it does not. */
static void block_diff(const remat_tabfile_block *a, const remat_tabfile_block *b, char *why, size_t n)
{
    why[0] = 0;
    if (a->output_bytes != b->output_bytes)
        snprintf(why, n, "its output has %llu bytes, block 0's %llu", (unsigned long long)b->output_bytes,
                 (unsigned long long)a->output_bytes);
    else if (a->nsaved != b->nsaved)
        snprintf(why, n, "it saves %zu tensors, block 0 %zu", b->nsaved, a->nsaved);
    else
        for (size_t k = 0; k < a->nsaved && !why[0]; k++)
            if (a->saved[k].bytes != b->saved[k].bytes || a->saved[k].cheap != b->saved[k].cheap)
                snprintf(why, n, "its saved tensor %zu has %llu bytes%s, block 0's %llu%s", k,
                         (unsigned long long)b->saved[k].bytes, b->saved[k].cheap ? " (cheap)" : "",
                         (unsigned long long)a->saved[k].bytes, a->saved[k].cheap ? " (cheap)" : "");
}

/* 0 when chain c is uniform; else the first difference in why (its block, or its input) */
static int chain_diff(const remat_tabfile_chain *c, char *why, size_t n)
{
    char w[160];
    for (int i = 1; i < c->nblock; i++) {
        block_diff(&c->block[0], &c->block[i], w, sizeof w);
        if (w[0]) { snprintf(why, n, "block %d differs from block 0: %s", i, w); return 1; }
    }
    if (c->input_bytes != c->block[0].output_bytes) {
        snprintf(why, n, "the chain's input has %llu bytes, a block's output %llu", (unsigned long long)c->input_bytes,
                 (unsigned long long)c->block[0].output_bytes);
        return 1;
    }
    why[0] = 0;
    return 0;
}

int remat_tabfile_uniform(const remat_tabfile *t, char *why, size_t n)
{
    if (t->nchain > 1) {
        snprintf(why, n, "it has %d chains", t->nchain);
        return 0;
    }
    return !chain_diff(&t->chain[0], why, n);
}

void remat_tabfile_clear(remat_tabfile *t)
{
    if (!t) return;
    for (int c = 0; t->chain && c < t->nchain; c++) {
        remat_tabfile_chain *ch = &t->chain[c];
        for (int i = 0; ch->block && i < ch->nblock; i++) free(ch->block[i].saved);
        free(ch->block);
        free(ch->name);
        free(ch->reads);
    }
    free(t->chain);
    for (int k = 0; t->ctx && k < t->nctx; k++) free(t->ctx[k].blocks);
    free(t->ctx);
    free(t->name);
    free(t->source);
    free(t->device);
    memset(t, 0, sizeof *t);
}

/* One chain's "input", "blocks" and "head" from object h (the top level or
 * chains[i]; pre "" or "chains[i]."); blocks at most `room` */
static remat_status chain_of(const remat_jobj *h, int version, const char *pre, int room, int *work,
                             remat_tabfile_chain *ch)
{
    static const char *const ikeys[] = { "bytes", "kept", "saved_bytes", "forward_ms", "backward_ms", NULL };
    static const char *const ikeys3[] = { "bytes", "kept", "saved_bytes", "forward_ms", "backward_ms", "work_bytes",
                                          "grad_live_bytes", NULL };
    static const char *const hkeys1[] = { "saved_bytes", "keeps_input", "forward_ms", "backward_ms", NULL };
    static const char *const hkeys2[] = { "saved_bytes", "keeps_input", "forward_ms", "backward_ms", "output_bytes",
                                          NULL };
    static const char *const hkeys3[] = { "saved_bytes", "keeps_input", "forward_ms", "backward_ms", "output_bytes",
                                          "work_bytes", NULL };
    remat_status st;
    char iw[48], hw[48], where[64];
    remat_jobj in, hd;
    snprintf(iw, sizeof iw, "%sinput.", pre);
    snprintf(hw, sizeof hw, "%shead.", pre);
    if ((st = object_of(h, "input", iw, &in)) || (st = unknown_keys(&in, version >= 3 ? ikeys3 : ikeys)) ||
        (st = bytes_of(&in, "bytes", 1, 0, &ch->input_bytes)) || (st = remat_jobj_bool(&in, "kept", 1, &ch->input_kept)) ||
        (st = bytes_of(&in, "saved_bytes", 0, 0, &ch->input_saved)) || (st = ms_of(&in, "forward_ms", &ch->input_fwd)) ||
        (st = ms_of(&in, "backward_ms", &ch->input_bwd)) || (st = work_of(&in, version, &ch->input_work, work)) ||
        (st = measured_of(&in, "grad_live_bytes", version, &ch->input_live, work)))
        return st;
    if (version >= 2 && !ch->input_bytes) return remat_jobj_bad(&in, "bytes", "at least 1", remat_jobj_val(&in, "bytes"));
    if ((st = object_of(h, "head", hw, &hd)) ||
        (st = unknown_keys(&hd, version >= 3 ? hkeys3 : version == 2 ? hkeys2 : hkeys1)) ||
        (st = bytes_of(&hd, "saved_bytes", 0, 0, &ch->head_saved)) ||
        (st = remat_jobj_bool(&hd, "keeps_input", 1, &ch->head_keeps_input)) ||
        (st = ms_of(&hd, "forward_ms", &ch->head_fwd)) || (st = ms_of(&hd, "backward_ms", &ch->head_bwd)) ||
        (st = bytes_of(&hd, "output_bytes", 0, 0, &ch->head_output)) ||
        (st = work_of(&hd, version, &ch->head_work, work)))
        return st;
    if (remat_jobj_val(&hd, "output_bytes") && !ch->head_output)
        return remat_jobj_bad(&hd, "output_bytes", "at least 1", remat_jobj_val(&hd, "output_bytes"));
    const json_t *bl = remat_jobj_val(h, "blocks");
    if (!json_is_array(bl) || json_array_size(bl) < 1 || json_array_size(bl) > (size_t)room) {
        char want[64];
        snprintf(want, sizeof want, "an array of 1 to %d blocks", room);
        return remat_jobj_bad(h, "blocks", want, bl);
    }
    int nb = (int)json_array_size(bl);
    if (!(ch->block = remat_calloc((size_t)nb, sizeof *ch->block)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", h->src);
    ch->nblock = nb;
    for (int i = 0; i < nb; i++) {
        snprintf(where, sizeof where, "%sblocks[%d].", pre, i);
        if ((st = block_of(h, json_array_get(bl, (size_t)i), where, version, work, &ch->block[i]))) return st;
    }
    char why[200];
    if (version == 1 && chain_diff(ch, why, sizeof why)) {
        if (!strncmp(why, "block ", 6))
            return remat_fail(REMAT_ERR_FORMAT, "%s: %s (a version 1 table is a chain of identical blocks; name the "
                              "blocks that repeat, or write version 2)", h->src, why);
        return remat_fail(REMAT_ERR_FORMAT, "%s: %s (each block's input is the one before's output)", h->src, why);
    }
    if (ch->input_saved + ch->head_saved > TF_MAX_BYTES)
        return remat_fail(REMAT_ERR_FORMAT, "%s: the ops outside the chain keep more than %llu bytes (%sinput.saved_bytes "
                          "+ %shead.saved_bytes)", h->src, (unsigned long long)TF_MAX_BYTES, pre, pre);
    return REMAT_OK;
}

/* "chains": [...] of a version-2 file */
static remat_status chains_of(const remat_jobj *top, remat_tabfile *t)
{
    static const char *const keys[] = { "name", "reads", "input", "blocks", "head", NULL };
    const json_t *cl = remat_jobj_val(top, "chains");
    remat_status st;
    if (!json_is_array(cl) || json_array_size(cl) < 1 || json_array_size(cl) > REMAT_TABLE_MAX_CHAINS) {
        char want[64];
        snprintf(want, sizeof want, "an array of 1 to %d chains", REMAT_TABLE_MAX_CHAINS);
        return remat_jobj_bad(top, "chains", want, cl);
    }
    int nc = (int)json_array_size(cl), room = REMAT_MAX_LAYERS;
    if (!(t->chain = remat_calloc((size_t)nc, sizeof *t->chain)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", top->src);
    t->nchain = nc;
    for (int c = 0; c < nc; c++) {
        remat_tabfile_chain *ch = &t->chain[c];
        char pre[32];
        snprintf(pre, sizeof pre, "chains[%d].", c);
        const json_t *v = json_array_get(cl, (size_t)c);
        if (!json_is_object(v)) return remat_fail(REMAT_ERR_FORMAT, "%s: chains[%d] must be an object", top->src, c);
        remat_jobj h = { v, top->src, pre };
        if ((st = unknown_keys(&h, keys))) return st;
        if (!remat_jobj_val(&h, "name")) return remat_jobj_bad(&h, "name", "given (a chain's name)", NULL);
        if ((st = str_of(&h, "name", &ch->name))) return st;
        if (!ch->name[0]) return remat_jobj_bad(&h, "name", "a string of at least 1 byte", remat_jobj_val(&h, "name"));
        for (int e = 0; e < c; e++)
            if (!strcmp(t->chain[e].name, ch->name))
                return remat_fail(REMAT_ERR_FORMAT, "%s: chains[%d] and chains[%d] are both named '%.64s'", top->src, e,
                                  c, ch->name);
        const json_t *rd = remat_jobj_val(&h, "reads");
        if (rd && !json_is_array(rd)) return remat_jobj_bad(&h, "reads", "an array of earlier chains' names", rd);
        size_t nr = rd ? json_array_size(rd) : 0;
        if (nr && !(ch->reads = remat_calloc(nr, sizeof *ch->reads)))
            return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", top->src);
        for (size_t k = 0; k < nr; k++) {
            const char *nm = json_string_value(json_array_get(rd, k));
            int e = 0;
            if (!nm) return remat_fail(REMAT_ERR_FORMAT, "%s: %sreads[%zu] must be a string", top->src, pre, k);
            while (e < c && strcmp(t->chain[e].name, nm)) e++;
            if (e == c)
                return remat_fail(REMAT_ERR_FORMAT, "%s: %sreads[%zu] '%.64s' is not the name of an earlier chain",
                                  top->src, pre, k, nm);
            for (int q = 0; q < ch->nreads; q++)
                if (ch->reads[q] == e)
                    return remat_fail(REMAT_ERR_FORMAT, "%s: %sreads names '%.64s' twice", top->src, pre, nm);
            ch->reads[ch->nreads++] = e;
        }
        if ((st = chain_of(&h, t->version, pre, room, &t->has_work, ch))) return st;
        room -= ch->nblock;
        if (room < 1 && c + 1 < nc)
            return remat_fail(REMAT_ERR_FORMAT, "%s: the chains hold more than %d blocks", top->src, REMAT_MAX_LAYERS);
    }
    for (int c = 0; c + 1 < nc; c++) {
        int read = 0;
        for (int r = c + 1; r < nc && !read; r++)
            for (int q = 0; q < t->chain[r].nreads; q++) read |= t->chain[r].reads[q] == c;
        if (!read)
            return remat_fail(REMAT_ERR_FORMAT, "%s: chain '%.64s' is read by no later chain (only the last chain's "
                              "head ends with the loss)", top->src, t->chain[c].name);
    }
    return REMAT_OK;
}

/* the plan's number of block i of chain c: the chains' blocks one after another, a junction between two */
static int plan_block(const remat_tabfile *t, int c, int i)
{
    int l = 0;
    for (int e = 0; e < c; e++) l += t->chain[e].nblock + 1;
    return l + i;
}

/* "contexts": [{"bytes", "made_by", "blocks"}] of a version-3 file, numbered as plans number the blocks */
static remat_status contexts_of(const remat_jobj *top, remat_tabfile *t)
{
    static const char *const keys[] = { "bytes", "made_by", "blocks", NULL };
    const json_t *cl = remat_jobj_val(top, "contexts");
    remat_status st;
    if (!cl) return REMAT_OK;
    int L = plan_block(t, t->nchain - 1, t->chain[t->nchain - 1].nblock);
    if (!json_is_array(cl) || json_array_size(cl) > TF_MAX_CONTEXTS) {
        char want[64];
        snprintf(want, sizeof want, "an array of at most %d contexts", TF_MAX_CONTEXTS);
        return remat_jobj_bad(top, "contexts", want, cl);
    }
    int n = (int)json_array_size(cl);
    if (n && !(t->ctx = remat_calloc((size_t)n, sizeof *t->ctx)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", top->src);
    t->nctx = n;
    for (int k = 0; k < n; k++) {
        remat_tabfile_context *x = &t->ctx[k];
        char where[48];
        long long made;
        snprintf(where, sizeof where, "contexts[%d].", k);
        const json_t *v = json_array_get(cl, (size_t)k);
        if (!json_is_object(v)) return remat_fail(REMAT_ERR_FORMAT, "%s: contexts[%d] must be an object", top->src, k);
        remat_jobj h = { v, top->src, where };
        if ((st = unknown_keys(&h, keys)) || (st = bytes_of(&h, "bytes", 1, 0, &x->bytes)) ||
            (st = remat_jobj_ll(&h, "made_by", -1, -1, L - 1, &made)))
            return st;
        if (!x->bytes) return remat_jobj_bad(&h, "bytes", "at least 1", remat_jobj_val(&h, "bytes"));
        x->made_by = (int)made;
        const json_t *bl = remat_jobj_val(&h, "blocks");
        if (!json_is_array(bl) || json_array_size(bl) < 1 || json_array_size(bl) > (size_t)L) {
            char want[64];
            snprintf(want, sizeof want, "an array of 1 to %d blocks", L);
            return remat_jobj_bad(&h, "blocks", want, bl);
        }
        x->nblocks = (int)json_array_size(bl);
        if (!(x->blocks = remat_calloc((size_t)x->nblocks, sizeof *x->blocks)))
            return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", top->src);
        for (int q = 0; q < x->nblocks; q++) {
            const json_t *e = json_array_get(bl, (size_t)q);
            json_int_t b = json_is_integer(e) ? json_integer_value(e) : -2;
            int prev = q ? x->blocks[q - 1] : x->made_by;
            if (b <= prev || b >= L)
                return remat_fail(REMAT_ERR_FORMAT, "%s: %sblocks[%d] must be a block number in [%d, %d], above the "
                                  "one before it and made_by", top->src, where, q, prev + 1, L - 1);
            for (int c = 0; c + 1 < t->nchain; c++)
                if (b == plan_block(t, c, t->chain[c].nblock))
                    return remat_fail(REMAT_ERR_FORMAT, "%s: %sblocks[%d] is %d, the junction of two chains (no "
                                      "block of theirs: it takes nothing)", top->src, where, q, (int)b);
            x->blocks[q] = (int)b;
        }
    }
    return REMAT_OK;
}

static remat_status parse(const json_t *root, const char *src, remat_tabfile *t)
{
    static const char *const keys1[] = { "format", "version", "name", "source", "device", "selective", "input",
                                         "blocks", "head", "params_bytes", "grads_bytes", "optimizer_bytes",
                                         "optimizer_ms", "checkpoint", NULL };
    static const char *const keys2[] = { "format", "version", "name", "source", "device", "selective", "input",
                                         "blocks", "head", "params_bytes", "grads_bytes", "optimizer_bytes",
                                         "optimizer_ms", "checkpoint", "chains", NULL };
    static const char *const keys3[] = { "format", "version", "name", "source", "device", "selective", "input",
                                         "blocks", "head", "params_bytes", "grads_bytes", "optimizer_bytes",
                                         "optimizer_ms", "checkpoint", "chains", "optimizer_work_bytes", "contexts",
                                         "inputs_bytes", NULL };
    remat_status st;
    if (!json_is_object(root)) return remat_fail(REMAT_ERR_FORMAT, "%s: not a JSON object", src);
    remat_jobj h = { root, src, "" };
    const char *fmt;
    int version;
    if ((st = remat_jobj_str(&h, "format", NULL, &fmt))) return st;
    if (!fmt || strcmp(fmt, "remat-table"))
        return remat_fail(REMAT_ERR_FORMAT, "%s: not a remat table (\"format\": \"remat-table\" is missing)", src);
    if (!remat_jobj_val(&h, "version")) return remat_jobj_bad(&h, "version", "given", NULL);
    if ((st = remat_jobj_int(&h, "version", 0, 0, INT32_MAX, &version))) return st;
    if (version < 1 || version > 3)
        return remat_fail(REMAT_ERR_FORMAT, "%s: table format version %d; this remat reads versions 1 to 3", src,
                          version);
    t->version = version;
    if ((st = unknown_keys(&h, version == 1 ? keys1 : version == 2 ? keys2 : keys3)) ||
        (st = str_of(&h, "name", &t->name)) ||
        (st = str_of(&h, "source", &t->source)) ||
        (st = str_of(&h, "device", &t->device)) || (st = remat_jobj_bool(&h, "selective", 0, &t->selective)) ||
        (st = bytes_of(&h, "params_bytes", 0, 0, &t->params_bytes)) ||
        (st = bytes_of(&h, "grads_bytes", 0, 0, &t->grads_bytes)) ||
        (st = bytes_of(&h, "optimizer_bytes", 0, 0, &t->optimizer_bytes)) ||
        (st = ms_of(&h, "optimizer_ms", &t->optimizer_ms)) ||
        (st = measured_of(&h, "optimizer_work_bytes", version, &t->optimizer_work, &t->has_work)) ||
        (st = measured_of(&h, "inputs_bytes", version, &t->inputs_bytes, &t->has_work)))
        return st;
    if (remat_jobj_val(&h, "checkpoint")) {
        static const char *const ckeys[] = { "context_bytes", "call_bytes", NULL };
        remat_jobj ck;
        if ((st = object_of(&h, "checkpoint", "checkpoint.", &ck)) || (st = unknown_keys(&ck, ckeys)) ||
            (st = bytes_of(&ck, "context_bytes", 0, 0, &t->context_bytes)) ||
            (st = bytes_of(&ck, "call_bytes", 0, 0, &t->call_bytes)))
            return st;
    }
    if (remat_jobj_val(&h, "chains")) {
        static const char *const one[] = { "input", "blocks", "head" };
        for (int i = 0; i < 3; i++)
            if (remat_jobj_val(&h, one[i]))
                return remat_fail(REMAT_ERR_FORMAT, "%s: both \"chains\" and a top-level \"%s\" (give one chain at the "
                                  "top level, or every chain in \"chains\")", src, one[i]);
        t->chains_key = 1;
        if ((st = chains_of(&h, t))) return st;
    } else {
        if (!(t->chain = remat_calloc(1, sizeof *t->chain)))
            return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", src);
        t->nchain = 1;
        if ((st = chain_of(&h, version, "", REMAT_MAX_LAYERS, &t->has_work, &t->chain[0]))) return st;
    }
    if ((st = contexts_of(&h, t))) return st;
    /* at most TF_MAX_BYTES, as one block's saved tensors: each term is, so the sum cannot wrap */
    if (t->params_bytes + t->grads_bytes + t->optimizer_bytes + t->inputs_bytes > TF_MAX_BYTES)
        return remat_fail(REMAT_ERR_FORMAT, "%s: params_bytes + grads_bytes + optimizer_bytes + inputs_bytes is more "
                          "than %llu bytes", src, (unsigned long long)TF_MAX_BYTES);
    return REMAT_OK;
}

remat_status remat_tabfile_parse(const void *buf, size_t n, const char *src, remat_tabfile *out)
{
    json_error_t je;
    memset(out, 0, sizeof *out);
    json_t *root = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return remat_json_fail(src, "table", &je);
    remat_status st = parse(root, src, out);
    json_decref(root);
    if (st) remat_tabfile_clear(out);
    return st;
}

/* ---- writing (the fuzz target's round trip) --------------------------------------- */

/* o[key] = v, taking v (released when an earlier step failed) */
typedef struct tw { int ok; } tw;
static void tput(tw *w, json_t *o, const char *key, json_t *v)
{
    if (!w->ok) { json_decref(v); return; }
    w->ok = v && !json_object_set_new(o, key, v);
}

/* chain ch's "input", "blocks" and "head" into o */
static void dump_chain(tw *w, const remat_tabfile *t, const remat_tabfile_chain *ch, json_t *o)
{
    json_t *in = json_object(), *hd = json_object(), *bl = json_array();
    if (!in || !hd || !bl) w->ok = 0;
    tput(w, in, "bytes", json_integer((json_int_t)ch->input_bytes));
    tput(w, in, "kept", json_boolean(ch->input_kept));
    tput(w, in, "saved_bytes", json_integer((json_int_t)ch->input_saved));
    tput(w, in, "forward_ms", json_real(ch->input_fwd));
    tput(w, in, "backward_ms", json_real(ch->input_bwd));
    if (t->has_work) tput(w, in, "work_bytes", json_integer((json_int_t)ch->input_work));
    if (t->has_work) tput(w, in, "grad_live_bytes", json_integer((json_int_t)ch->input_live));
    for (int i = 0; i < ch->nblock && w->ok; i++) {
        const remat_tabfile_block *b = &ch->block[i];
        json_t *bo = json_object(), *sv = json_array();
        if (!bo || !sv) { json_decref(bo); json_decref(sv); w->ok = 0; break; }
        if (json_array_append_new(bl, bo)) { json_decref(sv); w->ok = 0; break; }
        for (size_t k = 0; k < b->nsaved && w->ok; k++) {
            json_t *e = json_object();
            w->ok = e && !json_array_append_new(sv, e);
            tput(w, e, "bytes", json_integer((json_int_t)b->saved[k].bytes));
            tput(w, e, "cheap", json_boolean(b->saved[k].cheap));
        }
        tput(w, bo, "saved", sv);
        tput(w, bo, "output_bytes", json_integer((json_int_t)b->output_bytes));
        tput(w, bo, "forward_ms", json_real(b->forward_ms));
        tput(w, bo, "backward_ms", json_real(b->backward_ms));
        tput(w, bo, "cheap_forward_ms", json_real(b->cheap_forward_ms));
        if (t->has_work) tput(w, bo, "work_bytes", json_integer((json_int_t)b->work_bytes));
    }
    tput(w, hd, "saved_bytes", json_integer((json_int_t)ch->head_saved));
    tput(w, hd, "keeps_input", json_boolean(ch->head_keeps_input));
    tput(w, hd, "forward_ms", json_real(ch->head_fwd));
    tput(w, hd, "backward_ms", json_real(ch->head_bwd));
    if (ch->head_output) tput(w, hd, "output_bytes", json_integer((json_int_t)ch->head_output));
    if (t->has_work) tput(w, hd, "work_bytes", json_integer((json_int_t)ch->head_work));
    if (ch->name) tput(w, o, "name", json_string(ch->name));
    if (ch->nreads) {
        json_t *rd = json_array();
        for (int q = 0; q < ch->nreads && rd && w->ok; q++)
            w->ok = !json_array_append_new(rd, json_string(t->chain[ch->reads[q]].name));
        tput(w, o, "reads", rd);
    }
    tput(w, o, "input", in);
    tput(w, o, "blocks", bl);
    tput(w, o, "head", hd);
}

remat_status remat_tabfile_dump(const remat_tabfile *t, char **text)
{
    tw w = { 1 };
    *text = NULL;
    json_t *o = json_object(), *cl = NULL;
    if (!o) w.ok = 0;
    if (w.ok) {
        tput(&w, o, "format", json_string("remat-table"));
        tput(&w, o, "version", json_integer(t->version));
        if (t->name) tput(&w, o, "name", json_string(t->name));
        if (t->source) tput(&w, o, "source", json_string(t->source));
        if (t->device) tput(&w, o, "device", json_string(t->device));
        tput(&w, o, "selective", json_boolean(t->selective));
        if (t->chains_key) {
            if (!(cl = json_array())) w.ok = 0;
            for (int c = 0; c < t->nchain && w.ok; c++) {
                json_t *co = json_object();
                w.ok = co && !json_array_append_new(cl, co);
                if (w.ok) dump_chain(&w, t, &t->chain[c], co);
            }
        } else {
            dump_chain(&w, t, &t->chain[0], o);
        }
        tput(&w, o, "params_bytes", json_integer((json_int_t)t->params_bytes));
        tput(&w, o, "grads_bytes", json_integer((json_int_t)t->grads_bytes));
        tput(&w, o, "optimizer_bytes", json_integer((json_int_t)t->optimizer_bytes));
        tput(&w, o, "optimizer_ms", json_real(t->optimizer_ms));
        json_t *ck = json_object();
        tput(&w, ck, "context_bytes", json_integer((json_int_t)t->context_bytes));
        tput(&w, ck, "call_bytes", json_integer((json_int_t)t->call_bytes));
        tput(&w, o, "checkpoint", ck);
        if (cl) tput(&w, o, "chains", cl);
        if (t->has_work) tput(&w, o, "optimizer_work_bytes", json_integer((json_int_t)t->optimizer_work));
        if (t->has_work) tput(&w, o, "inputs_bytes", json_integer((json_int_t)t->inputs_bytes));
        if (t->nctx) {
            json_t *xl = json_array();
            for (int k = 0; k < t->nctx && xl && w.ok; k++) {
                json_t *xo = json_object(), *bl = json_array();
                if (!xo || !bl || json_array_append_new(xl, xo)) {
                    json_decref(xo);
                    json_decref(bl);
                    w.ok = 0;
                    break;
                }
                tput(&w, xo, "bytes", json_integer((json_int_t)t->ctx[k].bytes));
                tput(&w, xo, "made_by", json_integer(t->ctx[k].made_by));
                for (int q = 0; q < t->ctx[k].nblocks && w.ok; q++)
                    w.ok = !json_array_append_new(bl, json_integer(t->ctx[k].blocks[q]));
                tput(&w, xo, "blocks", bl);
            }
            if (!xl) w.ok = 0;
            tput(&w, o, "contexts", xl);
        }
    }
    /* every double at the precision that reads it back */
    char *s = w.ok ? json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (!s) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing a table");
    *text = remat_strdup(s);
    free(s);
    return *text ? REMAT_OK : remat_fail(REMAT_ERR_NOMEM, "out of memory writing a table");
}

/* ---- the table ------------------------------------------------------------------ */

/* the median over chain ch's blocks of the field at off of remat_tabfile_block; NAN when out of memory */
static double block_median(const remat_tabfile_chain *ch, size_t off)
{
    double *v = remat_malloc(sizeof(double) * (size_t)ch->nblock);
    if (!v) return NAN;
    for (int i = 0; i < ch->nblock; i++) v[i] = *(const double *)((const char *)&ch->block[i] + off);
    double m = remat_median(v, (size_t)ch->nblock);
    free(v);
    return m;
}

/* block b's saved bytes into *e (expensive; all of them unless selective) and *c (cheap) */
static void saved_split(const remat_tabfile *tf, const remat_tabfile_block *b, uint64_t *e, uint64_t *c)
{
    *e = *c = 0;
    for (size_t k = 0; k < b->nsaved; k++) {
        if (tf->selective && b->saved[k].cheap) *c += b->saved[k].bytes;
        else *e += b->saved[k].bytes;
    }
}

/* the bytes of chain c's result that later chains read */
static uint64_t result_bytes(const remat_tabfile_chain *c)
{
    return c->head_output ? c->head_output : c->block[c->nblock - 1].output_bytes;
}

/* Several chains (or one whose blocks differ) as one chain of blocks with
 * their own numbers, into s->per (malloc'd) and its totals.  Between chain
 * c and c + 1 goes their junction: a block that is c's head and c + 1's
 * input -- it saves what those keep and c's result R, its output is c+1's
 * input, its times are theirs -- kept whole and in no segment (pinned), so
 * that R is live from c's head forward to c's head backward.  d_output is
 * the largest boundary plus every R: the gradients of the results ride on
 * the gradient buffer for the whole backward. */
static remat_status flatten(const remat_tabfile *tf, remat_table_spec *s, uint64_t *adj)
{
    int L = 0;
    for (int c = 0; c < tf->nchain; c++) L += tf->chain[c].nblock + (c + 1 < tf->nchain);
    if (L > REMAT_MAX_LAYERS)
        return remat_fail(REMAT_ERR_FORMAT, "table: the chains and their junctions make %d blocks (at most %d)", L,
                          REMAT_MAX_LAYERS);
    remat_table_spec_block *per = remat_calloc((size_t)L, sizeof *per);
    if (!per) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading a table");
    uint64_t most = 0, results = 0;
    int l = 0;
    s->input = s->dout = tf->chain[0].input_bytes;
    s->expensive = s->cheap = s->output = 0;
    *adj = tf->chain[0].input_kept ? 0 : tf->chain[0].input_bytes;
    for (int c = 0; c < tf->nchain; c++) {
        const remat_tabfile_chain *ch = &tf->chain[c];
        for (int i = 0; i < ch->nblock; i++, l++) {
            const remat_tabfile_block *bi = &ch->block[i];
            saved_split(tf, bi, &per[l].expensive, &per[l].cheap);
            per[l].output = bi->output_bytes;
            per[l].fwd_ms = bi->forward_ms;
            per[l].cheap_fwd_ms = tf->selective ? bi->cheap_forward_ms : 0;
            per[l].bwd_ms = bi->backward_ms;
            per[l].chain = c;
            uint64_t m = per[l].expensive + per[l].cheap + per[l].output;
            if (m > most) most = m;      /* what a re-run of it adds (junctions are never re-run) */
        }
        if (c + 1 == tf->nchain) break;
        const remat_tabfile_chain *nx = &tf->chain[c + 1];
        remat_table_spec_block *j = &per[l++];
        j->expensive = ch->head_saved + nx->input_saved + result_bytes(ch);
        j->output = nx->input_bytes;
        j->fwd_ms = ch->head_fwd + nx->input_fwd;
        j->bwd_ms = nx->input_bwd + ch->head_bwd;
        j->pinned = 1;
        j->chain = c;
        results += result_bytes(ch);
        *adj += (ch->head_keeps_input ? 0 : ch->block[ch->nblock - 1].output_bytes) +
                (nx->input_kept ? 0 : nx->input_bytes);
    }
    for (l = 0; l < L; l++) {
        if (per[l].expensive > s->expensive) s->expensive = per[l].expensive;
        if (per[l].cheap > s->cheap) s->cheap = per[l].cheap;
        if (per[l].output > s->output) s->output = per[l].output;
        if (per[l].output > s->dout) s->dout = per[l].output;
    }
    const remat_tabfile_chain *last = &tf->chain[tf->nchain - 1];
    *adj += last->head_keeps_input ? 0 : last->block[last->nblock - 1].output_bytes;
    s->dout += results;
    s->reserve = most + s->dout;
    s->blocks = L;
    s->per = per;
    return REMAT_OK;
}

/* the chains' names, each ended by a NUL, into s (malloc'd) */
static remat_status chain_names(const remat_tabfile *tf, remat_table_spec *s)
{
    size_t n = 0;
    for (int c = 0; c < tf->nchain; c++) n += strlen(tf->chain[c].name) + 1;
    char *b = remat_malloc(n);
    if (!b) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading a table");
    for (size_t k = 0, c = 0; c < (size_t)tf->nchain; c++) {
        size_t m = strlen(tf->chain[c].name) + 1;
        memcpy(b + k, tf->chain[c].name, m);
        k += m;
    }
    s->chain_names = b;
    s->names_len = n;
    s->nchains = tf->nchain;
    return REMAT_OK;
}

void remat_tabfile_spec_clear(remat_table_spec *s)
{
    free((void *)s->per);
    free((void *)s->chain_names);
    free((void *)s->work);
    free((void *)s->ctx);
    free((void *)s->ctx_blocks);
    s->per = NULL;
    s->chain_names = NULL;
    s->work = NULL;
    s->ctx = NULL;
    s->ctx_blocks = NULL;
}

/* version 3's working sets and contexts into s (malloc'd), the blocks numbered as plans number them */
static remat_status spec_v3(const remat_tabfile *tf, remat_table_spec *s)
{
    int L = plan_block(tf, tf->nchain - 1, tf->chain[tf->nchain - 1].nblock);
    s->input_saved = tf->chain[0].input_saved;
    if (tf->has_work) {
        uint64_t *w = remat_calloc((size_t)L, sizeof *w);
        if (!w) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading a table");
        for (int c = 0, l = 0; c < tf->nchain; c++) {
            for (int i = 0; i < tf->chain[c].nblock; i++) w[l++] = tf->chain[c].block[i].work_bytes;
            if (c + 1 < tf->nchain) w[l++] = tf->chain[c].head_work + tf->chain[c + 1].input_work;
        }
        s->has_work = 1;
        s->work = w;
        /* what the backward holds from the head's backward to the input's, beyond the input's gradient
         * and what the ops before the chain keep: a tied embedding's gradient, waiting in autograd's
         * buffer for the embedding's own (the step's live bytes when the input gets its gradient) */
        const remat_tabfile_chain *c0 = &tf->chain[0];
        s->held = c0->input_live > c0->input_bytes + c0->input_saved ? c0->input_live - c0->input_bytes - c0->input_saved
                                                                      : 0;
        s->head_work = tf->chain[tf->nchain - 1].head_work;
        s->input_work = tf->chain[0].input_work;
        s->optimizer_work = tf->optimizer_work;
    }
    if (tf->nctx) {
        int nb = 0;
        for (int k = 0; k < tf->nctx; k++) nb += tf->ctx[k].nblocks;
        remat_table_spec_context *x = remat_calloc((size_t)tf->nctx, sizeof *x);
        int *b = remat_calloc((size_t)nb, sizeof *b);
        if (!x || !b) {
            free(x);
            free(b);
            return remat_fail(REMAT_ERR_NOMEM, "out of memory reading a table");
        }
        for (int k = 0, q = 0; k < tf->nctx; k++) {
            x[k] = (remat_table_spec_context){ tf->ctx[k].bytes, tf->ctx[k].made_by, q, tf->ctx[k].nblocks };
            for (int i = 0; i < tf->ctx[k].nblocks; i++) b[q++] = tf->ctx[k].blocks[i];
        }
        s->ctx = x;
        s->nctx = tf->nctx;
        s->ctx_blocks = b;
        s->nctx_blocks = nb;
    }
    return REMAT_OK;
}

remat_status remat_tabfile_spec(const remat_tabfile *tf, remat_table_spec *s)
{
    const remat_tabfile_chain *t = &tf->chain[0], *last = &tf->chain[tf->nchain - 1];
    const remat_tabfile_block *b = &t->block[0];
    char why[200];
    remat_status st;
    memset(s, 0, sizeof *s);
    s->name = tf->name ? tf->name : "table";
    s->selective = tf->selective;
    saved_split(tf, b, &s->expensive, &s->cheap);
    uint64_t x = b->output_bytes;
    uint64_t adj = (t->input_kept ? 0 : x) + (t->head_keeps_input ? 0 : x);
    s->output = x;
    s->head = t->input_saved + last->head_saved;
    s->reserve = s->expensive + s->cheap + 2 * x;
    s->static_bytes = tf->params_bytes + tf->grads_bytes + tf->optimizer_bytes + tf->inputs_bytes;
    s->blocks = t->nblock;
    s->context = tf->context_bytes;
    s->call = tf->call_bytes;
    if ((!remat_tabfile_uniform(tf, why, sizeof why) &&
         ((st = flatten(tf, s, &adj)) || (tf->nchain > 1 && (st = chain_names(tf, s))))) ||
        (st = spec_v3(tf, s)))
        goto fail;
    s->outside = (int64_t)s->head - (int64_t)adj;
    s->block_fwd_ms = block_median(t, offsetof(remat_tabfile_block, forward_ms));
    s->block_bwd_ms = block_median(t, offsetof(remat_tabfile_block, backward_ms));
    s->cheap_fwd_ms = tf->selective ? block_median(t, offsetof(remat_tabfile_block, cheap_forward_ms)) : 0;
    if (isnan(s->block_fwd_ms) || isnan(s->block_bwd_ms) || isnan(s->cheap_fwd_ms)) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading a table");
        goto fail;
    }
    if (s->cheap_fwd_ms > s->block_fwd_ms) s->cheap_fwd_ms = s->block_fwd_ms;   /* medians of two lists */
    s->input_fwd_ms = t->input_fwd;
    s->input_bwd_ms = t->input_bwd;
    s->head_fwd_ms = last->head_fwd;
    s->head_bwd_ms = last->head_bwd;
    s->update_ms = tf->optimizer_ms;
    return REMAT_OK;
fail:
    remat_tabfile_spec_clear(s);
    return st;
}

/* ---- the public face --------------------------------------------------------------- */

static remat_status read_table(const void *json, size_t n, const char *src, remat_config *cfg, remat_profile **prof)
{
    remat_tabfile t;
    remat_table_spec s;
    remat_config c;
    remat_profile *p = NULL;
    int id = 0;
    if (prof) *prof = NULL;
    if (!cfg || (!json && n)) return remat_fail(REMAT_ERR_INVALID, "remat_table_read: NULL argument");
    remat_status st = remat_tabfile_parse(json, n, src, &t);
    if (st) return st;
    memset(&s, 0, sizeof s);
    if ((st = remat_tabfile_spec(&t, &s)) || (st = remat_table_custom_add(&s, remat_hash_bytes(json, n), &id))) goto out;
    remat_config_default(&c);
    c.n_layer = s.blocks;
    c.framework = REMAT_FRAMEWORK_TABLE;
    c.table = id;
    if ((st = remat_config_check(&c))) goto out;
    if (prof) {
        double fwd[RT_MAXT], bwd[RT_MAXT];
        if (!(p = remat_malloc(sizeof *p))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading a table"); goto out; }
        remat_table_custom_times(id, fwd, bwd);
        remat_profile_fill_times(p, &c, fwd, bwd, s.update_ms, t.device ? t.device : "an unnamed device");
        *prof = p;
    }
    *cfg = c;
out:
    if (st) remat_table_custom_release(id);
    remat_tabfile_spec_clear(&s);     /* custom.c keeps its copy */
    remat_tabfile_clear(&t);
    return st;
}

remat_status remat_table_read(const void *json, size_t n, remat_config *cfg, remat_profile **prof)
{
    return read_table(json, n, "table", cfg, prof);
}

remat_status remat_table_load(const char *path, remat_config *cfg, remat_profile **prof)
{
    char *buf = NULL;
    size_t n = 0;
    if (prof) *prof = NULL;
    if (!path || !cfg) return remat_fail(REMAT_ERR_INVALID, "remat_table_load: NULL argument");
    remat_status st = remat_read_file(path, TF_MAX_JSON, &buf, &n);
    if (!st) st = read_table(buf, n, path, cfg, prof);
    free(buf);
    return st;
}

remat_status remat_table_get_info(const remat_config *cfg, remat_table_info *out)
{
    if (!cfg || !out) return remat_fail(REMAT_ERR_INVALID, "remat_table_get_info: NULL argument");
    memset(out, 0, sizeof *out);
    const remat_table_spec *s = cfg->framework == REMAT_FRAMEWORK_TABLE ? remat_table_custom_spec(cfg->table) : NULL;
    if (!s) return remat_fail(REMAT_ERR_INVALID, "the config is not of a loaded table (framework table, id %d)", cfg->table);
    out->name = s->name;
    out->blocks = s->blocks;
    out->selective = s->selective;
    out->block_saved_bytes = s->expensive + s->cheap;
    out->output_bytes = s->output;
    out->outside_bytes = s->outside;
    out->reserve_bytes = (uint64_t)((int64_t)s->head + (int64_t)s->reserve - s->outside);
    out->static_bytes = s->static_bytes;
    out->context_bytes = s->context;
    out->call_bytes = s->call;
    return REMAT_OK;
}

int remat_table_block_kinds(const remat_config *cfg)
{
    int n = 0;
    if (cfg && cfg->framework == REMAT_FRAMEWORK_TABLE) remat_table_custom_kinds(cfg->table, &n);
    return n;
}

void remat_table_unload(const remat_config *cfg)
{
    if (cfg && cfg->framework == REMAT_FRAMEWORK_TABLE) remat_table_custom_release(cfg->table);
}
