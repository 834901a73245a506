/*
 * custom.c -- tensor tables built at run time from numbers (tensors.h,
 * "tables built at run time"): the tables of files that describe another
 * framework's chain of blocks (src/io/tablefile.c reads them), registered
 * under an id that a config names.
 *
 * Such a table is the same data as remat's own (tensors.c) with constant
 * shapes -- every entry's elements a constant term in bytes (RT_P_BYTE) --
 * and no kernels (RK_NONE): it is planned, never run.  Its op times are not
 * in it: they come with the profile the reader builds from the file.  One
 * block is
 *   saved      (selective: expensive, then cheap, read from expensive)  read from the block input
 *   output     the next block's input, read from the saved tensors; its backward is the
 *              block's whole backward, reading what the block saved
 * so that keeping all of them is no checkpoint, keeping none is
 * torch.utils.checkpoint of the block (whose re-run recomputes both saved
 * entries: the whole block, as the framework re-runs it), and keeping only
 * expensive (or only cheap) is a selective checkpoint.  The chain's input,
 * the head (what the ops before and after the chain keep, and scratch that
 * keeps the end of the forward the highest moment of a step: see
 * tablefile.c) and the gradient between blocks are the globals.
 *
 * Tables live in REMAT_TABLES_MAX slots of an array; adding, releasing and
 * every lookup take one lock, so that a lookup never reads a table that a
 * release is freeing (an id whose last load ended names nothing: its
 * lookup is NULL, and a config of it is refused).  What a lookup returns
 * stays valid while the caller holds a load of it (remat.h: unload last).
 * A lookup is on every tensor's byte count; the lock is uncontended but
 * while another thread loads or unloads.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensors.h"
#include "../core/core.h"

typedef struct custom {
    remat_table tb;
    remat_tensor_def defs[6];
    remat_table_spec spec;
    remat_table_spec_block *per;            /* spec.per's copy (NULL: uniform) */
    int *kind, nkinds;                      /* per block its kind: blocks of the same bytes, by first appearance */
    char *names;                            /* spec.chain_names's copy */
    uint64_t *work;                         /* spec.work's copy (NULL: no working sets) */
    remat_table_spec_context *ctx;          /* spec.ctx's and spec.ctx_blocks's copies */
    int *ctx_blocks;
    char name[REMAT_TABLE_NAME_MAX + 1];   /* the whole name: the reader takes at most this many bytes */
    uint64_t key;
    int refs;
    int id;
} custom;

static custom *slots[REMAT_TABLES_MAX];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* An id is its slot + 1 + REMAT_TABLES_MAX times a count of loads, so that
 * the id of an unloaded table names nothing, even once its slot is reused. */
static int loads;
#define SLOT(id) (((id) - 1) % REMAT_TABLES_MAX)

#define N_ RT_NONE
#define K(b) RX(RX_T((int64_t)(b)))

/* an entry of constant bytes, no op of remat's */
static remat_tensor_def entry(const char *name, const char *op, int cls, uint64_t bytes)
{
    remat_tensor_def d;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.op = op;
    d.cls = (uint8_t)cls;
    d.shape = (remat_expr)K(bytes);
    d.shape_text = "(bytes)";
    d.prec = RT_P_BYTE;
    d.kernel = RK_NONE;
    d.opc = RO_POINTWISE;
    d.w = d.b = -1;
    d.gout = d.gin = N_;
    memset(d.fwd_in, N_, sizeof d.fwd_in);
    memset(d.bwd_in, N_, sizeof d.bwd_in);
    memset(d.g_need, N_, sizeof d.g_need);
    memset(d.g_alloc, N_, sizeof d.g_alloc);
    memset(d.g_free, N_, sizeof d.g_free);
    return d;
}

/* the table of s into c */
static void build(custom *c, const remat_table_spec *s)
{
    int nb = s->selective ? 3 : 2;             /* per-block entries */
    int out = nb - 1, in = nb, head = nb + 1, dres = nb + 2;
    remat_tensor_def *d = c->defs;
    if (s->selective) {
        d[0] = entry("expensive", "the block's saved tensors that are costly to recompute", RT_CLASS_BLOCK, s->expensive);
        d[0].fwd_in[0] = RT_X;
        d[1] = entry("cheap", "the block's saved tensors that are cheap to recompute", RT_CLASS_BLOCK, s->cheap);
        d[1].fwd_in[0] = 0;
    } else {
        d[0] = entry("saved", "what the block saves for its backward", RT_CLASS_BLOCK, s->expensive);
        d[0].fwd_in[0] = RT_X;
    }
    d[out] = entry("output", "the block output (the next block's input); its backward is the block's", RT_CLASS_BLOCK,
                   s->output);
    d[out].fwd_in[0] = (int8_t)(out - 1);
    for (int t = 0; t < out; t++) d[out].bwd_in[t] = (int8_t)t;
    d[out].has_bwd = 1;
    d[out].g_need[0] = (int8_t)dres;
    d[out].gout = d[out].gin = (int8_t)dres;
    d[in] = entry("input", "the chain's input", RT_CLASS_GLOBAL, s->input ? s->input : s->output);
    d[in].has_bwd = 1;
    d[in].g_need[0] = d[in].g_free[0] = (int8_t)dres;
    d[in].gout = (int8_t)dres;
    d[head] = entry("head", "what the ops outside the chain keep (before and after it)", RT_CLASS_GLOBAL, s->head);
    d[head].fwd_in[0] = RT_X;
    d[head].bwd_in[0] = RT_X;
    d[head].bwd_in[1] = (int8_t)head;
    d[head].has_bwd = 1;
    d[head].g_alloc[0] = (int8_t)dres;
    d[head].g_free[0] = (int8_t)head;
    d[head].gout = (int8_t)head;
    d[head].gin = (int8_t)dres;
    d[head].scratch[0] = (remat_scratch){ K(s->reserve), RT_P_BYTE, RW_ALWAYS, RS_OP };
    d[dres] = entry("d_output", "the gradient of a block output", RT_CLASS_GRAD, s->dout ? s->dout : s->output);

    remat_table *tb = &c->tb;
    memset(tb, 0, sizeof *tb);
    snprintf(c->name, sizeof c->name, "%s", s->name ? s->name : "table");   /* fits: remat_table_custom_add */
    tb->name = c->name;
    tb->arch = REMAT_ARCH_GPT2;
    tb->count = nb + 3;
    tb->nblock = nb;
    tb->first_grad = dres;
    tb->emb = in;
    tb->d_res = dres;
    tb->d_branch = N_;
    tb->nlmhead = 1;
    tb->lmhead[0] = (int8_t)head;
    tb->nlmhead_bwd = 1;
    tb->lmhead_bwd[0] = (int8_t)head;
    tb->nbwd = 1;
    tb->bwd[0] = (int8_t)out;
    tb->defs = c->defs;
    tb->has_static = 1;
    tb->static_bytes = s->static_bytes;
    c->spec = *s;
    c->spec.name = c->name;
    c->spec.per = c->per;
    c->spec.chain_names = c->names;
    c->spec.work = c->work;
    c->spec.ctx = c->ctx;
    c->spec.ctx_blocks = c->ctx_blocks;
}

/* n elements of size z at a and b the same (both NULL, or both there and equal) */
static int same_arr(const void *a, const void *b, size_t n, size_t z)
{
    return !a == !b && (!a || !n || !memcmp(a, b, n * z));
}

/* copies n elements of size z of src into *dst (NULL when src is); 0 when out of memory */
static int copy_arr(void **dst, const void *src, size_t n, size_t z)
{
    *dst = NULL;
    if (!src) return 1;
    if (!(*dst = remat_malloc(n && z ? n * z : 1))) return 0;
    if (n) memcpy(*dst, src, n * z);
    return 1;
}

static void custom_free(custom *c)
{
    if (!c) return;
    free(c->per);
    free(c->kind);
    free(c->names);
    free(c->work);
    free(c->ctx);
    free(c->ctx_blocks);
    free(c);
}

/* the contexts of two specs, field by field (their structs have padding) */
static int same_ctx(const remat_table_spec *a, const remat_table_spec *b)
{
    if (!a->ctx != !b->ctx) return 0;
    for (int k = 0; a->ctx && k < a->nctx; k++)
        if (a->ctx[k].bytes != b->ctx[k].bytes || a->ctx[k].made_by != b->ctx[k].made_by ||
            a->ctx[k].first != b->ctx[k].first || a->ctx[k].n != b->ctx[k].n)
            return 0;
    return 1;
}

/* the numbers of two specs (names aside) */
static int same_spec(const remat_table_spec *a, const remat_table_spec *b)
{
    return a->selective == b->selective && a->expensive == b->expensive && a->cheap == b->cheap &&
           a->output == b->output && a->head == b->head && a->reserve == b->reserve &&
           a->static_bytes == b->static_bytes && a->blocks == b->blocks && a->outside == b->outside &&
           a->context == b->context && a->call == b->call &&
           a->block_fwd_ms == b->block_fwd_ms && a->cheap_fwd_ms == b->cheap_fwd_ms &&
           a->block_bwd_ms == b->block_bwd_ms && a->input_fwd_ms == b->input_fwd_ms &&
           a->input_bwd_ms == b->input_bwd_ms && a->head_fwd_ms == b->head_fwd_ms &&
           a->head_bwd_ms == b->head_bwd_ms && a->update_ms == b->update_ms && a->input == b->input &&
           a->dout == b->dout && !a->per == !b->per &&
           (!a->per || !memcmp(a->per, b->per, sizeof *a->per * (size_t)a->blocks)) && a->nchains == b->nchains &&
           a->names_len == b->names_len && !a->chain_names == !b->chain_names &&
           (!a->chain_names || !memcmp(a->chain_names, b->chain_names, a->names_len)) &&
           a->has_work == b->has_work && a->head_work == b->head_work && a->input_work == b->input_work &&
           a->optimizer_work == b->optimizer_work && a->input_saved == b->input_saved && a->held == b->held &&
           same_arr(a->work, b->work, (size_t)a->blocks, sizeof *a->work) && a->nctx == b->nctx &&
           a->nctx_blocks == b->nctx_blocks && same_ctx(a, b) &&
           same_arr(a->ctx_blocks, b->ctx_blocks, (size_t)a->nctx_blocks, sizeof *a->ctx_blocks);
}

remat_status remat_table_custom_add(const remat_table_spec *s, uint64_t key, int *id)
{
    remat_status st = REMAT_OK;
    *id = 0;
    if (s->name && strlen(s->name) > REMAT_TABLE_NAME_MAX)
        return remat_fail(REMAT_ERR_INVALID, "a table's name has %zu bytes (at most %d)", strlen(s->name),
                          REMAT_TABLE_NAME_MAX);
    pthread_mutex_lock(&lock);
    int freeslot = -1;
    for (int i = 0; i < REMAT_TABLES_MAX; i++) {
        if (slots[i] && slots[i]->key == key && same_spec(&slots[i]->spec, s)) { slots[i]->refs++; *id = slots[i]->id; goto out; }
        if (!slots[i] && freeslot < 0) freeslot = i;
    }
    if (freeslot < 0) {
        st = remat_fail(REMAT_ERR_RANGE, "%d tables are loaded; unload one first (remat_table_unload)", REMAT_TABLES_MAX);
        goto out;
    }
    custom *c = remat_calloc(1, sizeof *c);
    if (c && s->per && (c->per = remat_malloc(sizeof *c->per * (size_t)s->blocks)))
        memcpy(c->per, s->per, sizeof *c->per * (size_t)s->blocks);
    if (!c || (s->per && !c->per)) {
        free(c);
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory loading a table");
        goto out;
    }
    if ((s->per && !(c->kind = remat_malloc(sizeof *c->kind * (size_t)s->blocks))) ||
        (s->chain_names && !(c->names = remat_malloc(s->names_len))) ||
        !copy_arr((void **)&c->work, s->work, (size_t)s->blocks, sizeof *c->work) ||
        !copy_arr((void **)&c->ctx, s->ctx, (size_t)s->nctx, sizeof *c->ctx) ||
        !copy_arr((void **)&c->ctx_blocks, s->ctx_blocks, (size_t)s->nctx_blocks, sizeof *c->ctx_blocks)) {
        custom_free(c);
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory loading a table");
        goto out;
    }
    if (s->chain_names) memcpy(c->names, s->chain_names, s->names_len);
    for (int l = 0; s->per && l < s->blocks; l++) {
        int b = 0;
        while (b < l && !(s->per[b].expensive == s->per[l].expensive && s->per[b].cheap == s->per[l].cheap &&
                          s->per[b].output == s->per[l].output && s->per[b].pinned == s->per[l].pinned)) b++;
        c->kind[l] = b < l ? c->kind[b] : c->nkinds++;
    }
    build(c, s);
    c->key = key;
    c->refs = 1;
    loads = (loads + 1) % (INT32_MAX / REMAT_TABLES_MAX - 1);
    c->id = freeslot + 1 + REMAT_TABLES_MAX * loads;
    slots[freeslot] = c;
    *id = c->id;
out:
    pthread_mutex_unlock(&lock);
    return st;
}

void remat_table_custom_release(int id)
{
    if (id < 1) return;
    pthread_mutex_lock(&lock);
    custom *c = slots[SLOT(id)];
    if (c && c->id == id && --c->refs == 0) {
        slots[SLOT(id)] = NULL;
        custom_free(c);
    }
    pthread_mutex_unlock(&lock);
}

static custom *lookup(int id)
{
    if (id < 1) return NULL;
    pthread_mutex_lock(&lock);
    custom *c = slots[SLOT(id)];
    if (c && c->id != id) c = NULL;
    pthread_mutex_unlock(&lock);
    return c;
}

const remat_table *remat_table_custom(int id)
{
    custom *c = lookup(id);
    return c ? &c->tb : NULL;
}

const remat_table_spec *remat_table_custom_spec(int id)
{
    custom *c = lookup(id);
    return c ? &c->spec : NULL;
}

uint64_t remat_table_custom_key(int id)
{
    custom *c = lookup(id);
    return c ? c->key : 0;
}

void remat_table_custom_times(int id, double *fwd, double *bwd)
{
    custom *c = lookup(id);
    if (!c) return;
    const remat_table_spec *s = &c->spec;
    int nb = c->tb.nblock, out = nb - 1;
    for (int t = 0; t < c->tb.first_grad; t++) fwd[t] = bwd[t] = 0;
    if (s->selective) {
        fwd[0] = s->block_fwd_ms - s->cheap_fwd_ms;
        fwd[1] = s->cheap_fwd_ms;
    } else {
        fwd[0] = s->block_fwd_ms;
    }
    bwd[out] = s->block_bwd_ms;
    fwd[c->tb.emb] = s->input_fwd_ms;
    bwd[c->tb.emb] = s->input_bwd_ms;
    fwd[c->tb.lmhead[0]] = s->head_fwd_ms;
    bwd[c->tb.lmhead[0]] = s->head_bwd_ms;
}

int remat_table_custom_layer_bytes(int id, int t, int layer, uint64_t *bytes)
{
    custom *c = lookup(id);
    if (!c || !c->per || layer < 0 || layer >= c->spec.blocks || t < 0 || t >= c->tb.nblock) return 0;
    const remat_table_spec_block *b = &c->per[layer];
    *bytes = t == c->tb.nblock - 1 ? b->output : t == 0 ? b->expensive : b->cheap;
    return 1;
}

int remat_table_custom_layer_ms(int id, int t, int layer, int bwd, double *ms)
{
    custom *c = lookup(id);
    if (!c || !c->per || layer < 0 || layer >= c->spec.blocks || t < 0 || t >= c->tb.nblock) return 0;
    const remat_table_spec_block *b = &c->per[layer];
    int out = c->tb.nblock - 1;                       /* as remat_table_custom_times, per block */
    if (bwd) *ms = t == out ? b->bwd_ms : 0;
    else *ms = t == out ? 0 : t == 1 ? b->cheap_fwd_ms : c->spec.selective ? b->fwd_ms - b->cheap_fwd_ms : b->fwd_ms;
    return 1;
}

const int *remat_table_custom_kinds(int id, int *nkinds)
{
    custom *c = lookup(id);
    *nkinds = c ? (c->per ? c->nkinds : 1) : 0;
    return c ? c->kind : NULL;
}

int remat_table_custom_pinned(int id, int layer)
{
    custom *c = lookup(id);
    return c && c->per && layer >= 0 && layer < c->spec.blocks && c->per[layer].pinned;
}

const char *remat_table_custom_chain_name(int id, int i)
{
    custom *c = lookup(id);
    if (!c || !c->names || i < 0 || i >= c->spec.nchains) return NULL;
    const char *n = c->names;
    while (i--) n += strlen(n) + 1;
    return n;
}

int remat_table_custom_chain_of(int id, int layer)
{
    custom *c = lookup(id);
    return c && c->names && c->per && layer >= 0 && layer < c->spec.blocks ? c->per[layer].chain : -1;
}
