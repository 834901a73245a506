/*
 * tree.c -- a policy as the tree of checkpoints a framework runs, and what a
 * table's plan keeps in that framework (remat.h, "plans as checkpoint
 * trees").  The tree is the compiler's own moves (compile.c, solve: the hook
 * remat_schedule_moves), not a second reading of the plan grammar, so that
 * remat_torch and `remat plan --table` apply, count and explain one thing.
 *
 * A framework checkpoint holds, besides the block inputs the simulator
 * counts, what the table's "checkpoint" object says: the blocks' other
 * arguments once (context_bytes, when anything is checkpointed; version 3's
 * contexts, each when a checkpoint holds it: contexts_held) and a stash
 * per checkpoint call alive when the forward ends (call_bytes: torch's CPU
 * RNG state).  The calls alive then are every checkpoint of the tree: each
 * segment and each block kept as less than all, nested ones included (a
 * segment's re-run function runs in the first forward too, and its nested
 * checkpoints with it); a nested one holds its input as well, a block
 * output that the simulator's first forward does not keep (calls_of).
 */
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"

typedef struct moves {
    remat_plan_node *v;
    size_t n, cap;
    uint32_t out_bit, exp_bit, cheap_bit, all_bits;
    int table;
} moves;

static int on_move(void *arg, int parent, int a, int b, int move, int m, uint32_t keep, uint32_t off)
{
    moves *t = arg;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        remat_plan_node *p = remat_realloc(t->v, cap * sizeof *p);
        if (!p) return -1;
        t->v = p;
        t->cap = cap;
    }
    remat_plan_node *x = &t->v[t->n];
    memset(x, 0, sizeof *x);
    x->parent = parent;
    x->depth = parent < 0 ? 0 : t->v[parent].depth + 1;
    x->first = a;
    x->keep_mask = keep;
    x->offload_mask = off;
    if (move == 1) {
        x->kind = REMAT_NODE_SEGMENT;
        x->end = m;
        x->keep = REMAT_KEEP_OUTPUT;
        x->keep_mask = t->out_bit;
    } else {
        x->kind = REMAT_NODE_BLOCK;
        x->end = a + 1;
        /* the last block of a re-run: its forward runs inside its own backward */
        x->last = parent >= 0 && a + 1 == b;
        uint32_t inner = keep & t->all_bits & ~t->out_bit, droppable = t->all_bits & ~t->out_bit;
        if (x->last || inner == droppable) x->keep = REMAT_KEEP_ALL;
        else if (!inner) x->keep = REMAT_KEEP_OUTPUT;
        else if (t->table && t->exp_bit && inner == t->exp_bit) x->keep = REMAT_KEEP_EXPENSIVE;
        else if (t->table && t->cheap_bit && inner == t->cheap_bit) x->keep = REMAT_KEEP_CHEAP;
        else x->keep = REMAT_KEEP_SOME;
    }
    return (int)t->n++;
}

/* chain order: a segment before its re-run's nodes, they before its siblings */
static int before(const remat_plan_node *x, const remat_plan_node *y)
{
    return x->first != y->first ? x->first < y->first : x->depth < y->depth;
}

remat_status remat_plan_tree(const remat_config *cfg, const char *policy, remat_plan_node *out, size_t n,
                             size_t *len)
{
    moves t;
    int *where = NULL;
    remat_status st;
    memset(&t, 0, sizeof t);
    if (len) *len = 0;
    if (!cfg || (n && !out)) return remat_fail(REMAT_ERR_INVALID, "remat_plan_tree: NULL argument");
    int nt = remat_config_tensor_count(cfg);
    for (int id = 0; id < nt && id < 32; id++) {
        remat_tensor_info ti;
        if (remat_tensor_get(cfg, id, &ti) || !ti.per_layer) break;
        if (ti.is_grad) continue;
        t.all_bits |= 1u << id;
        t.out_bit = 1u << id;                  /* the last per-block tensor */
        if (!strcmp(ti.name, "expensive")) t.exp_bit = 1u << id;
        if (!strcmp(ti.name, "cheap")) t.cheap_bit = 1u << id;
    }
    t.table = cfg->framework == REMAT_FRAMEWORK_TABLE;
    if ((st = remat_schedule_moves(cfg, policy, on_move, &t))) goto out;
    /* insertion sort into chain order, parents renumbered (a few nodes per block) */
    where = remat_malloc((t.n ? t.n : 1) * sizeof *where);
    size_t *order = remat_malloc((t.n ? t.n : 1) * sizeof *order);
    if (!where || !order) { free(order); st = remat_fail(REMAT_ERR_NOMEM, "out of memory in remat_plan_tree"); goto out; }
    for (size_t i = 0; i < t.n; i++) {
        size_t j = i;
        while (j > 0 && before(&t.v[i], &t.v[order[j - 1]])) { order[j] = order[j - 1]; j--; }
        order[j] = i;
    }
    for (size_t i = 0; i < t.n; i++) where[order[i]] = (int)i;
    for (size_t i = 0; i < t.n && i < n; i++) {
        out[i] = t.v[order[i]];
        if (out[i].parent >= 0) out[i].parent = where[out[i].parent];
    }
    free(order);
    if (len) *len = t.n;
    if (n && n < t.n) st = remat_fail(REMAT_ERR_RANGE, "remat_plan_tree: %zu nodes, room for %zu", t.n, n);
out:
    free(where);
    free(t.v);
    return st;
}

/* The contexts (a table's version 3) that the checkpoints of tree v[0..n) hold: one is held
 * when a checkpoint (nested ones too: they run in the first forward) runs a block that takes it
 * and begins after the block that makes it -- a checkpoint that makes it keeps no copy of its own
 * product (remat_torch's segments replay it from their re-run). */
static uint64_t contexts_held(const remat_config *cfg, const remat_plan_node *v, size_t n)
{
    const remat_table_spec *s = cfg->framework == REMAT_FRAMEWORK_TABLE ? remat_table_custom_spec(cfg->table) : NULL;
    uint64_t held = 0;
    for (int k = 0; s && s->ctx && k < s->nctx; k++) {
        const remat_table_spec_context *x = &s->ctx[k];
        int hit = 0;
        for (size_t i = 0; i < n && !hit; i++) {
            if (!(v[i].kind == REMAT_NODE_SEGMENT || v[i].keep != REMAT_KEEP_ALL) || v[i].first <= x->made_by) continue;
            for (int q = 0; q < x->n && !hit; q++) {
                int b = s->ctx_blocks[x->first + q];
                hit = b >= v[i].first && b < v[i].end;
            }
        }
        if (hit) held += x->bytes;
    }
    return held;
}

/* Checkpoint calls alive when the first forward ends (see the file's notes), and the block
 * inputs that nested ones hold besides: a checkpoint inside a segment's re-run runs in the first
 * forward too, and holds its input there -- the output of a block before it in the segment, which
 * nothing else keeps then -- unless that is the outermost checkpoint's own input (one per block);
 * and the bytes of the contexts they hold. */
static remat_status calls_of(const remat_config *cfg, const char *policy, int *calls, int *inputs, uint64_t *ctx)
{
    size_t n = 0;
    remat_plan_node *v = NULL;
    uint8_t *held = NULL;
    remat_status st = remat_plan_tree(cfg, policy, NULL, 0, &n);
    *calls = *inputs = 0;
    *ctx = 0;
    if (st) return st;
    v = remat_malloc((n ? n : 1) * sizeof *v);
    held = remat_calloc((size_t)cfg->n_layer + 1, 1);
    if (!v || !held) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = remat_plan_tree(cfg, policy, v, n, NULL))) goto out;
    for (size_t i = 0; i < n; i++) {
        int ck = v[i].kind == REMAT_NODE_SEGMENT || v[i].keep != REMAT_KEEP_ALL;
        *calls += ck;
        if (!ck || v[i].parent < 0) continue;
        int top = (int)i;
        while (v[top].parent >= 0) top = v[top].parent;
        if (v[i].first != v[top].first && !held[v[i].first]) { held[v[i].first] = 1; (*inputs)++; }
    }
    *ctx = contexts_held(cfg, v, n);
out:
    free(v);
    free(held);
    return st;
}

static remat_status table_row(const remat_config *cfg, const remat_table_info *info, remat_table_row *out)
{
    int inputs;
    uint64_t ctx;
    remat_status st = calls_of(cfg, out->row.policy, &out->checkpoint_calls, &inputs, &ctx);
    if (st) return st;
    out->checkpoint_bytes = (out->checkpoint_calls ? info->context_bytes : 0) + ctx +
                            info->call_bytes * (uint64_t)out->checkpoint_calls +
                            info->output_bytes * (uint64_t)inputs;
    out->kept_bytes = (uint64_t)((int64_t)out->row.stored_bytes + info->outside_bytes) + out->checkpoint_bytes;
    out->peak_bytes = out->row.peak_bytes + out->checkpoint_bytes;
    return remat_table_device_peak_of(cfg, info, out);
}

void remat_table_row_clear(remat_table_row *r)
{
    if (!r) return;
    remat_plan_row_clear(&r->row);
    memset(r, 0, sizeof *r);
}

remat_status remat_table_evaluate(const remat_config *cfg, const remat_profile *prof, const char *policy,
                                  remat_table_row *out)
{
    remat_table_info info;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_table_evaluate: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_table_get_info(cfg, &info))) return st;
    if ((st = remat_plan_evaluate(cfg, prof, policy, 0, 1, &out->row))) return st;
    if ((st = table_row(cfg, &info, out))) remat_table_row_clear(out);
    return st;
}

remat_status remat_table_min_kept(const remat_config *cfg, const remat_profile *prof, remat_table_row *out)
{
    remat_table_info info;
    remat_table_row none, least;
    uint64_t minp = 0;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_table_min_kept: out is NULL");
    memset(out, 0, sizeof *out);
    memset(&none, 0, sizeof none);
    memset(&least, 0, sizeof least);
    if ((st = remat_table_get_info(cfg, &info)) || (st = remat_plan_min_peak(cfg, &minp))) return st;
    if ((st = remat_plan_optimal(cfg, prof, minp, 1, &least.row)) || (st = table_row(cfg, &info, &least)) ||
        (st = remat_table_evaluate(cfg, prof, "none", &none)))
        goto out;
    /* the checkpoints' own bytes can make "none" keep less than the smallest peak's plan */
    if (none.kept_bytes < least.kept_bytes) { *out = none; memset(&none, 0, sizeof none); }
    else { *out = least; memset(&least, 0, sizeof least); }
out:
    remat_table_row_clear(&none);
    remat_table_row_clear(&least);
    return st;
}

static uint64_t kept_of(const remat_table_row *r) { return r->kept_bytes; }

remat_status remat_table_fit(const remat_config *cfg, const remat_table_info *info, const remat_profile *prof,
                             uint64_t target, uint64_t add, uint64_t floor, int act,
                             uint64_t (*measure)(const remat_table_row *), remat_table_row *out)
{
    remat_status st;
    memset(out, 0, sizeof *out);
    /* the room only falls, and each round leaves out the plan the round before found (its peak is
     * then over the planner's budget), so this ends; sixteen rounds are plenty in practice */
    uint64_t room = target;
    for (int round = 0; round < 16 && room + add >= floor; round++) {
        remat_table_row r;
        memset(&r, 0, sizeof r);
        st = remat_plan_optimal(cfg, prof, room + add, act, &r.row);
        if (st == REMAT_ERR_BUDGET) break;
        if (st || (st = table_row(cfg, info, &r))) { remat_table_row_clear(&r); return st; }
        uint64_t got = measure(&r), planned = act ? r.row.peak_bytes : r.row.total_bytes;
        if (got <= target) { *out = r; return REMAT_OK; }
        remat_table_row_clear(&r);
        if (got - target >= room) break;
        room -= got - target;
        if (planned <= add) break;
        if (room + add >= planned) room = planned - add - 1;
    }
    return REMAT_ERR_BUDGET;
}

remat_status remat_table_optimal(const remat_config *cfg, const remat_profile *prof, uint64_t kept_budget,
                                 remat_table_row *out)
{
    remat_table_info info;
    uint64_t minp = 0;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_table_optimal: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_table_get_info(cfg, &info)) || (st = remat_plan_min_peak(cfg, &minp))) return st;
    /* kept K is an activation budget of K + the reserve */
    if ((st = remat_table_fit(cfg, &info, prof, kept_budget, info.reserve_bytes, minp, 1, kept_of, out)) != REMAT_ERR_BUDGET)
        return st;
    remat_table_row least;
    char b1[32], b2[32], b3[32];
    if ((st = remat_table_min_kept(cfg, prof, &least))) return st;
    remat_table_row none;
    if ((st = remat_table_evaluate(cfg, prof, "none", &none))) { remat_table_row_clear(&least); return st; }
    st = remat_fail(REMAT_ERR_BUDGET, "budget %s is below the minimum %s of kept bytes (the least any plan keeps, "
                    "%s; the model without checkpoints keeps %s)", remat_fmt_bytes(kept_budget, b1, sizeof b1),
                    remat_fmt_bytes(least.kept_bytes, b2, sizeof b2), least.row.policy,
                    remat_fmt_bytes(none.kept_bytes, b3, sizeof b3));
    remat_table_row_clear(&least);
    remat_table_row_clear(&none);
    return st;
}

size_t remat_abi_size(const char *name)
{
    static const struct { const char *name; size_t size; } sizes[] = {
        { "remat_config", sizeof(remat_config) },
        { "remat_plan_row", sizeof(remat_plan_row) },
        { "remat_layer_info", sizeof(remat_layer_info) },
        { "remat_table_info", sizeof(remat_table_info) },
        { "remat_tensor_info", sizeof(remat_tensor_info) },
        { "remat_plan_node", sizeof(remat_plan_node) },
        { "remat_table_row", sizeof(remat_table_row) },
        { "remat_graph_node", sizeof(remat_graph_node) },
        { "remat_graph_group", sizeof(remat_graph_group) },
    };
    for (size_t i = 0; name && i < sizeof sizes / sizeof sizes[0]; i++)
        if (!strcmp(sizes[i].name, name)) return sizes[i].size;
    return 0;
}
