/*
 * compile.c -- policies to schedules.
 *
 * The recursion solve(a, b) over the chain of blocks is described in
 * schedule.h.  Three rules fix every instruction it emits:
 *   1. A block forward emits the block's tensors in table order and frees a
 *      tensor the policy does not keep right after its last forward reader.
 *   2. A backward first *ensures* what it reads: a tensor that is not live is
 *      recomputed from its op's inputs, recursively, from whatever is live.
 *      The block's output res3 is never needed by its own backward, so a
 *      checkpointed block's last GEMM is never re-run.
 *   3. After every backward instruction, each tensor of the block (and the
 *      block input) that no remaining backward of the block can need,
 *      directly or to recompute something, is freed at once.
 *   4. An offloading ALL move offloads, right after the block's forward, what
 *      the block keeps (of the names asked for) and then its input; the
 *      block's backward first frees what it will not need (rule 3, on the
 *      host too) and then reloads the rest, all before its first backward
 *      instruction: the framework's bulk reload of a layer.
 * Gradient buffers are allocated and freed by the backward instructions
 * themselves (tensors.c: g_alloc / g_free).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "schedule.h"
#include "../core/core.h"

remat_status remat_schedule_push(remat_schedule *s, int kind, int layer, int tid)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        remat_instr *p = remat_realloc(s->ins, cap * sizeof *p);
        if (!p) return remat_fail(REMAT_ERR_NOMEM, "out of memory growing a schedule");
        s->ins = p;
        s->cap = cap;
    }
    s->ins[s->n].kind = (uint8_t)kind;
    s->ins[s->n].tid = (int8_t)tid;
    s->ins[s->n].layer = layer;
    s->n++;
    return REMAT_OK;
}

/* ---- the generator ---------------------------------------------------- */

typedef struct gen {
    remat_schedule *s;
    const remat_table *tb;
    const remat_policy *pol;
    int L;
    remat_walker w;          /* what is live: the walker's view, nothing of our own */
    uint8_t *computed;       /* per slot: computed before (a new computation is a recompute) */
    int8_t last_reader[RT_MAXT + 1];   /* per block tensor (RT_X at nblock): its last forward reader */
    uint8_t need[RT_MAXT + 1];         /* rule 3, per tensor of one block or the head (RT_X at count) */
    const char *cursor;      /* plan tokens */
    double *rev_cost;        /* revolve DP, (L+2) x (S+1) */
    int *rev_split;
    int S;
    int node;                /* the move whose re-run is being solved (on_move's index), -1 */
    remat_status st;
    int fwd_end_set;
    int pins;                /* a table of several chains: blocks pinned as junctions */
} gen;

/* 1 when block `layer` is the junction of two chains of a table read from a
 * file (tablefile.c): it keeps all, and no segment holds it */
static int pinned(const gen *g, int layer)
{
    return g->pins && remat_table_custom_pinned(g->s->cfg.table, layer);
}

/* slot of tensor t as seen from block `layer` (layer -1: the head) */
static int gslot(gen *g, int layer, int t) { return remat_table_slot(g->tb, g->L, layer, t); }
static int live(gen *g, int layer, int t) { return g->w.live[gslot(g, layer, t)]; }

static void emit(gen *g, int kind, int layer, int t)
{
    if (g->st) return;
    /* resolve RT_X to a concrete (layer, tensor) for the instruction */
    int s = gslot(g, layer, t);
    int tid = remat_table_slot_tid(g->tb, g->L, s), lay = remat_table_slot_layer(g->tb, g->L, s);
    if ((g->st = remat_schedule_push(g->s, kind, lay, tid))) return;
    if (kind == REMAT_I_FORWARD || kind == REMAT_I_RECOMPUTE) g->computed[s] = 1;
    g->st = remat_walker_step(&g->w, g->s->n - 1, &g->s->ins[g->s->n - 1]);
}

static void ensure(gen *g, int layer, int t)
{
    if (g->st) return;
    if (live(g, layer, t) == WALK_HOST) { emit(g, REMAT_I_RELOAD, layer, t); return; }
    if (live(g, layer, t)) return;
    if (t == RT_X) {
        g->st = remat_fail(REMAT_ERR_SCHEDULE, "internal: input of block %d is not live when needed", layer);
        return;
    }
    const remat_tensor_def *d = &g->tb->defs[t];
    for (int i = 0; i < RT_MAXIO && d->fwd_in[i] != RT_NONE; i++) ensure(g, layer, d->fwd_in[i]);
    emit(g, g->computed[gslot(g, layer, t)] ? REMAT_I_RECOMPUTE : REMAT_I_FORWARD, layer, t);
}

/* last_reader[u] over the block's forward: the last block tensor whose
 * forward reads u (u = nblock stands for RT_X); -1 when none */
static void last_readers(gen *g)
{
    int nb = g->tb->nblock;
    for (int u = 0; u <= nb; u++) g->last_reader[u] = -1;
    for (int r = 0; r < nb; r++)
        for (int i = 0; i < RT_MAXIO; i++) {
            int in = g->tb->defs[r].fwd_in[i];
            if (in == RT_X) g->last_reader[nb] = (int8_t)r;
            else if (in >= 0 && in < nb) g->last_reader[in] = (int8_t)r;
        }
}

/* Rule 1: forward of block a keeping `keep`; free_input frees x_a after its
 * last forward reader. */
static void block_forward(gen *g, int a, uint32_t keep, int free_input)
{
    int nb = g->tb->nblock;
    for (int t = 0; t < nb && !g->st; t++) {
        ensure(g, a, t);
        /* free inputs whose last forward reader was t */
        for (int u = -1; u < t; u++) {
            int cand = u < 0 ? RT_X : u;
            if (cand == RT_X ? !free_input : (keep & (1u << cand)) != 0) continue;
            if (!live(g, a, cand)) continue;
            if (g->last_reader[u < 0 ? nb : u] <= t) emit(g, REMAT_I_FREE, a, cand);
        }
    }
}

/* rule 3: mark what the remaining backward steps need, within one block or
 * the head (need[] by tensor id, RT_X at tb->count) */
static void need_mark(gen *g, int layer, int t)
{
    int k = t == RT_X ? g->tb->count : t;
    if (g->need[k]) return;
    g->need[k] = 1;
    if (t == RT_X || live(g, layer, t)) return;
    const remat_tensor_def *d = &g->tb->defs[t];
    for (int i = 0; i < RT_MAXIO && d->fwd_in[i] != RT_NONE; i++) need_mark(g, layer, d->fwd_in[i]);
}

static void free_unneeded(gen *g, int layer, const int8_t *order, int n, int next)
{
    const remat_table *tb = g->tb;
    memset(g->need, 0, sizeof g->need);
    for (int j = next; j < n; j++) {
        const remat_tensor_def *d = &tb->defs[order[j]];
        for (int i = 0; i < RT_MAXIO && d->bwd_in[i] != RT_NONE; i++) need_mark(g, layer, d->bwd_in[i]);
    }
    /* candidates: the block's own tensors (or the head's), then its input */
    int nc = layer < 0 ? tb->nlmhead : tb->nblock;
    for (int c = 0; c < nc; c++) {
        int t = layer < 0 ? tb->lmhead[c] : c;
        if (live(g, layer, t) && !g->need[t]) emit(g, REMAT_I_FREE, layer, t);
    }
    if (live(g, layer, RT_X) && !g->need[tb->count]) emit(g, REMAT_I_FREE, layer, RT_X);
}

/* rule 4: block a's kept tensors named in mask, then its input (the output's
 * bit), to the host */
static void block_offload(gen *g, int a, uint32_t mask)
{
    int nb = g->tb->nblock;
    for (int t = 0; t < nb - 1; t++)
        if ((mask & (1u << t)) && live(g, a, t) == WALK_DEVICE) emit(g, REMAT_I_OFFLOAD, a, t);
    if ((mask & remat_out_bit(g->tb)) && live(g, a, RT_X) == WALK_DEVICE) emit(g, REMAT_I_OFFLOAD, a, RT_X);
}

static void block_backward(gen *g, int layer, const int8_t *order, int n)
{
    free_unneeded(g, layer, order, n, 0);
    if (layer >= 0)             /* rule 4: what is on the host and needed comes back at once */
        for (int c = 0; c <= g->tb->nblock; c++) {
            int t = c == g->tb->nblock ? RT_X : c, k = c == g->tb->nblock ? g->tb->count : c;
            if (g->need[k] && live(g, layer, t) == WALK_HOST) emit(g, REMAT_I_RELOAD, layer, t);
        }
    for (int j = 0; j < n && !g->st; j++) {
        const remat_tensor_def *d = &g->tb->defs[order[j]];
        for (int i = 0; i < RT_MAXIO && d->bwd_in[i] != RT_NONE; i++) ensure(g, layer, d->bwd_in[i]);
        emit(g, REMAT_I_BACKWARD, layer, order[j]);
        free_unneeded(g, layer, order, n, j + 1);
    }
}

/* ---- decisions -------------------------------------------------------------- */

enum { MOVE_ALL = 0, MOVE_CK = 1, MOVE_OFF = 2 /* a plan token: ALL, offloaded */ };

static int next_token(gen *g, int *kind, uint32_t *arg)
{
    const char *c = g->cursor;
    if (!c || !*c) return 0;
    if (*c != 'A' && *c != 'C' && *c != 'O') return 0;
    *kind = *c == 'A' ? MOVE_ALL : *c == 'O' ? MOVE_OFF : MOVE_CK;
    char *end;
    unsigned long v = strtoul(c + 1, &end, *kind == MOVE_CK ? 10 : 16);
    if (end == c + 1 || v > 0xffffffffUL) return 0;
    *arg = (uint32_t)v;
    g->cursor = *end == '.' ? end + 1 : end;
    if (*end && *end != '.') return 0;
    return 1;
}

/* The move for [a, b): ALL (keeping *keep; *off: what of it goes to the
 * host, 0 nothing) or CK(*m). */
static void decide(gen *g, int a, int b, int slots, int *move, int *m, uint32_t *keep, uint32_t *off)
{
    const remat_policy *p = g->pol;
    int L = g->L, top = (b == L + 1);
    *move = MOVE_ALL;
    *keep = p->keep;
    *off = 0;
    switch (p->structure) {
    case RS_NONE: break;
    case RS_EVERY:
        if (top) { *move = MOVE_CK; *m = a + p->arg < L ? a + p->arg : L; }
        break;
    case RS_FIRST:
        if (top && a < p->arg) { *move = MOVE_CK; *m = a + 1; }
        break;
    case RS_REVOLVE:
        if (b - a >= 2) {
            int n = b - a, s = slots > g->S ? g->S : slots;
            int j = g->rev_split[n * (g->S + 1) + s];
            if (j > 0) { *move = MOVE_CK; *m = a + j; }
            else g->st = remat_fail(REMAT_ERR_POLICY, "revolve:%d: no schedule with %d slots for %d blocks",
                                    g->S, s, n - 1);
        }
        break;
    case RS_PLAN: {
        int kind; uint32_t arg;
        if (!next_token(g, &kind, &arg)) {
            g->st = remat_fail(REMAT_ERR_POLICY, "plan: malformed or too few tokens at block %d", a);
            return;
        }
        *move = kind == MOVE_OFF ? MOVE_ALL : kind;
        if (kind == MOVE_OFF) *off = UINT32_MAX;
        if (kind == MOVE_CK) {
            if (arg < 1 || (int)arg >= b - a) {
                g->st = remat_fail(REMAT_ERR_POLICY, "plan: split C%u out of range for blocks [%d,%d)", arg, a, b);
                return;
            }
            *m = a + (int)arg;
        } else {
            if (arg & ~remat_keep_all(g->tb)) {
                g->st = remat_fail(REMAT_ERR_POLICY, "plan: keep mask A%x names unknown tensors", arg);
                return;
            }
            *keep = (arg | remat_out_bit(g->tb)) & p->keep;
        }
        break;
    }
    }
    /* offload:N -- the first sweep's ALL moves of blocks [0, N) */
    if (*move == MOVE_ALL && top && a < p->offload_n) *off |= p->offload_mask;
    if (!g->pins || g->st) return;
    /* junctions of chains: a named policy's segment stops before one, and
     * one keeps all; a plan that asks otherwise is refused */
    if (*move == MOVE_CK) {
        int q = a;
        while (q < *m && !pinned(g, q)) q++;
        if (q < *m && p->structure == RS_PLAN) {
            g->st = remat_fail(REMAT_ERR_POLICY, "plan: C%d at block %d holds block %d, the junction of two chains (a "
                               "segment is of one chain)", *m - a, a, q);
            return;
        }
        if (q == a) *move = MOVE_ALL;
        else if (q < *m) *m = q;
    }
    if (*move == MOVE_ALL && pinned(g, a)) {
        uint32_t all = remat_keep_all(g->tb) | remat_out_bit(g->tb);
        if (p->structure == RS_PLAN && ((*keep | remat_out_bit(g->tb)) & all) != all) {
            g->st = remat_fail(REMAT_ERR_POLICY, "plan: block %d is the junction of two chains; it keeps all (A%x)", a,
                               all & ~remat_out_bit(g->tb));
            return;
        }
        *keep = all;
        *off = 0;
    }
}

static void solve(gen *g, int a, int b, int slots)
{
    if (g->st) return;
    int L = g->L;
    if (a == L) {                   /* the head: lnf, logits, loss */
        if (!g->fwd_end_set) { g->s->fwd_end = g->s->n; g->fwd_end_set = 1; }
        block_backward(g, -1, g->tb->lmhead_bwd, g->tb->nlmhead_bwd);
        return;
    }
    int move, m = a + 1;
    uint32_t keep, off;
    decide(g, a, b, slots, &move, &m, &keep, &off);
    if (g->st) return;
    int me = -1;
    if (g->s->on_move && (me = g->s->on_move(g->s->on_move_arg, g->node, a, b, move, m, keep, off)) < 0) {
        g->st = remat_fail(REMAT_ERR_NOMEM, "out of memory recording a plan's moves");
        return;
    }
    if (move == MOVE_ALL) {
        if (a + 1 < b) {
            block_forward(g, a, keep | remat_out_bit(g->tb), 0);
            if (off) block_offload(g, a, off);
            solve(g, a + 1, b, slots - 1);
        }
        block_backward(g, a, g->tb->bwd, g->tb->nbwd);
    } else {
        for (int k = a; k < m; k++) block_forward(g, k, remat_out_bit(g->tb), k > a);
        solve(g, m, b, slots - 1);
        int up = g->node;
        g->node = me;
        solve(g, a, m, slots);
        g->node = up;
    }
}

/* Optimal binomial checkpointing by dynamic programming (Griewank & Walther
 * 2000 give the closed form; the DP yields the same minimum and a split).
 * cost[n][s]: block forwards re-run to reverse a chain of n elements whose
 * input is live, with s slots (the input's included).  The last element is
 * the head, which is never re-run. */
static remat_status revolve_table(int maxn, int S, double **cost_out, int **split_out)
{
    size_t w = (size_t)S + 1;
    double *cost = remat_malloc(sizeof(double) * (size_t)(maxn + 1) * w);
    int *split = remat_calloc((size_t)(maxn + 1) * w, sizeof(int));
    if (!cost || !split) { free(cost); free(split); return remat_fail(REMAT_ERR_NOMEM, "out of memory"); }
    for (int n = 0; n <= maxn; n++)
        for (int s = 0; s <= S; s++) {
            double best = (n <= 1 && s >= 1) ? 0 : INFINITY;
            int bj = 0;
            if (n >= 2 && s >= 2)
                for (int j = 1; j < n; j++) {
                    double c = j + cost[(n - j) * w + s - 1] + cost[j * w + s];
                    if (c < best) { best = c; bj = j; }
                }
            cost[n * w + s] = best;
            split[n * w + s] = bj;
        }
    *cost_out = cost;
    *split_out = split;
    return REMAT_OK;
}

double remat_revolve_cost(int n, int s, int *split)
{
    double *c; int *sp;
    if (revolve_table(n, s, &c, &sp)) return INFINITY;
    double r = c[n * (s + 1) + s];
    if (split) *split = sp[n * (s + 1) + s];
    free(c); free(sp);
    return r;
}

static remat_status gen_init(gen *g, remat_schedule *s)
{
    memset(g, 0, sizeof *g);
    g->s = s;
    g->tb = s->tb;
    g->L = s->cfg.n_layer;
    for (int l = 0; l < g->L && s->cfg.framework == REMAT_FRAMEWORK_TABLE && !g->pins; l++)
        g->pins = remat_table_custom_pinned(s->cfg.table, l);
    g->node = -1;
    last_readers(g);
    remat_status st = remat_walker_init(&g->w, &s->cfg, s->forward_only, 0, NULL, SIZE_MAX);
    if (st) return st;
    g->computed = remat_calloc((size_t)g->w.nslots, 1);
    if (!g->computed) return remat_fail(REMAT_ERR_NOMEM, "out of memory compiling a schedule");
    return REMAT_OK;
}

static void gen_free(gen *g)
{
    remat_walker_free(&g->w);
    free(g->computed);
    free(g->rev_cost);
    free(g->rev_split);
}

remat_status remat_compile(remat_schedule *s, const remat_policy *pol)
{
    gen g;
    remat_policy p = *pol;
    if ((g.st = gen_init(&g, s))) goto out;
    g.pol = &p;
    if (p.is_sqrt) p.arg = (int)ceil(sqrt((double)g.L));
    if (p.offload_n > g.L) {
        g.st = remat_fail(REMAT_ERR_POLICY, "offload:%d names more blocks than the %d there are", p.offload_n, g.L);
        goto out;
    }
    if (p.structure == RS_REVOLVE) {
        g.S = p.arg > g.L + 1 ? g.L + 1 : p.arg;
        if ((g.st = revolve_table(g.L + 1, g.S, &g.rev_cost, &g.rev_split))) goto out;
    }
    g.cursor = p.plan;
    emit(&g, REMAT_I_FORWARD, -1, g.tb->emb);
    solve(&g, 0, g.L + 1, g.S ? g.S : 1 << 30);
    emit(&g, REMAT_I_BACKWARD, -1, g.tb->emb);
    if (!g.st) g.st = remat_schedule_push(s, REMAT_I_UPDATE, -1, -1);
    if (!g.st && p.structure == RS_PLAN && g.cursor && *g.cursor)
        g.st = remat_fail(REMAT_ERR_POLICY, "plan: %zu unused characters at the end ('%.20s')",
                          strlen(g.cursor), g.cursor);
out:
    gen_free(&g);
    return g.st;
}

/* Evaluation: every block forward keeping only its output and freeing its
 * input after the last reader (rule 1), then the head the same way,
 * keeping the logits, which the interpreter reads at their free. */
remat_status remat_compile_forward(remat_schedule *s)
{
    gen g;
    if ((g.st = gen_init(&g, s))) goto out;
    const remat_table *tb = g.tb;
    emit(&g, REMAT_I_FORWARD, -1, tb->emb);
    for (int l = 0; l < g.L; l++) block_forward(&g, l, remat_out_bit(tb), 1);
    s->fwd_end = s->n;
    for (int h = 0; h < tb->nlmhead && !g.st; h++) {
        int t = tb->lmhead[h];
        ensure(&g, -1, t);
        /* free what no later head tensor reads: the input, then the head's own */
        for (int u = -1; u < h; u++) {
            int cand = u < 0 ? RT_X : tb->lmhead[u], read_later = 0;
            for (int r = h + 1; r < tb->nlmhead; r++)
                for (int i = 0; i < RT_MAXIO; i++) read_later |= tb->defs[tb->lmhead[r]].fwd_in[i] == cand;
            if (!read_later && live(&g, -1, cand)) emit(&g, REMAT_I_FREE, -1, cand);
        }
    }
    emit(&g, REMAT_I_FREE, -1, tb->lmhead[tb->nlmhead - 1]);
out:
    gen_free(&g);
    return g.st;
}
