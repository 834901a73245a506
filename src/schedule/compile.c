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
 * Gradient buffers are allocated and freed by the backward instructions
 * themselves (tensors.c: g_alloc / g_free).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "schedule.h"
#include "../core/core.h"

static const int bwd_order[] = { RT_RES3, RT_FCH_GELU, RT_FCH, RT_LN2, RT_RES2, RT_ATTY, RT_QKV, RT_LN1 };
#define N_BWD ((int)(sizeof bwd_order / sizeof bwd_order[0]))
static const int head_order[] = { RT_LOGITS, RT_LNF };

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

void remat_bwd_effects(const remat_config *cfg, int tid, int alloc[2], int *na, int freed[2], int *nf)
{
    const remat_tensor_def *d = &remat_tensor_defs[tid];
    *na = *nf = 0;
    for (int i = 0; i < 2; i++) {
        int a = d->g_alloc[i], f = d->g_free[i];
        if (a != RT_NONE && !(a == RT_D_BRANCH && cfg->dropout <= 0.0f)) alloc[(*na)++] = a;
        if (f != RT_NONE && !(f == RT_D_BRANCH && cfg->dropout <= 0.0f)) freed[(*nf)++] = f;
    }
}

int remat_bwd_grad_needs(int tid, int need[2])
{
    switch (tid) {
    case RT_RES3: case RT_RES2: case RT_LN2: case RT_EMB: need[0] = RT_D_RES; return 1;
    case RT_LN1: need[0] = RT_D_RES; need[1] = RT_D_LN1; return 2;
    case RT_FCH_GELU: case RT_FCH: need[0] = RT_D_FCH; return 1;
    case RT_ATTY: need[0] = RT_D_ATTY; return 1;
    case RT_QKV: need[0] = RT_D_QKV; return 1;
    case RT_LNF: need[0] = RT_D_LNF; return 1;
    default: return 0;
    }
    /* LN2 also reads d_ln2: */
}

/* ---- the generator ---------------------------------------------------- */

typedef struct gen {
    remat_schedule *s;
    const remat_config *cfg;
    const remat_policy *pol;
    int L;
    uint8_t *live, *computed;
    const char *cursor;      /* plan tokens */
    double *rev_cost;        /* revolve DP, (L+2) x (S+1) */
    int *rev_split;
    int S;
    remat_status st;
    int fwd_end_set;
} gen;

/* slot of tensor t as seen from block `layer` (layer -1: the head) */
static int gslot(gen *g, int layer, int t)
{
    if (t == RT_X) return remat_slot(g->L, layer < 0 ? g->L : layer, RT_X);
    if (t < RT_NBLOCK) return remat_slot(g->L, layer, t);
    return remat_slot(g->L, 0, t);
}

static void emit(gen *g, int kind, int layer, int t)
{
    if (g->st) return;
    /* resolve RT_X to a concrete (layer, tensor) for the instruction */
    int s = gslot(g, layer, t);
    int tid = remat_slot_tid(g->L, s), lay = remat_slot_layer(g->L, s);
    g->st = remat_schedule_push(g->s, kind, lay, tid);
    if (g->st) return;
    if (kind == REMAT_I_FORWARD || kind == REMAT_I_RECOMPUTE) { g->live[s] = 1; g->computed[s] = 1; }
    else if (kind == REMAT_I_FREE) g->live[s] = 0;
    else if (kind == REMAT_I_BACKWARD) {
        int a[2], f[2], na, nf;
        remat_bwd_effects(g->cfg, tid, a, &na, f, &nf);
        for (int i = 0; i < na; i++) g->live[gslot(g, 0, a[i])] = 1;
        for (int i = 0; i < nf; i++) g->live[gslot(g, 0, f[i])] = 0;
    }
}

static void ensure(gen *g, int layer, int t)
{
    if (g->st) return;
    int s = gslot(g, layer, t);
    if (g->live[s]) return;
    if (t == RT_X) {
        g->st = remat_fail(REMAT_ERR_SCHEDULE, "internal: input of block %d is not live when needed", layer);
        return;
    }
    const remat_tensor_def *d = &remat_tensor_defs[t];
    for (int i = 0; i < RT_MAXIO && d->fwd_in[i] != RT_NONE; i++) ensure(g, layer, d->fwd_in[i]);
    emit(g, g->computed[s] ? REMAT_I_RECOMPUTE : REMAT_I_FORWARD, layer, t);
}

/* Rule 1: forward of block a keeping `keep`; free_input frees x_a after its
 * last forward reader. */
static void block_forward(gen *g, int a, uint32_t keep, int free_input)
{
    for (int t = 0; t < RT_NBLOCK && !g->st; t++) {
        ensure(g, a, t);
        /* free inputs whose last forward reader was t */
        for (int u = -1; u < t; u++) {
            int cand = u < 0 ? RT_X : u;
            if (cand == RT_X ? !free_input : (keep & (1u << cand)) != 0) continue;
            if (!g->live[gslot(g, a, cand)]) continue;
            int last = -1;
            for (int r = 0; r < RT_NBLOCK; r++)
                for (int i = 0; i < RT_MAXIO; i++)
                    if (remat_tensor_defs[r].fwd_in[i] == cand) last = r;
            if (last <= t) emit(g, REMAT_I_FREE, a, cand);
        }
    }
}

/* mark what the remaining backward steps need (rule 3) */
static void need_mark(gen *g, int layer, int t, uint8_t *need)
{
    int s = gslot(g, layer, t);
    if (need[s]) return;
    need[s] = 1;
    if (g->live[s] || t == RT_X) return;
    const remat_tensor_def *d = &remat_tensor_defs[t];
    for (int i = 0; i < RT_MAXIO && d->fwd_in[i] != RT_NONE; i++) need_mark(g, layer, d->fwd_in[i], need);
}

static void free_unneeded(gen *g, int layer, const int *order, int n, int next, uint8_t *need)
{
    int nslots = remat_nslots(g->L);
    memset(need, 0, (size_t)nslots);
    for (int j = next; j < n; j++) {
        const remat_tensor_def *d = &remat_tensor_defs[order[j]];
        for (int i = 0; i < RT_MAXIO && d->bwd_in[i] != RT_NONE; i++) need_mark(g, layer, d->bwd_in[i], need);
    }
    /* candidates: the block's (or head's) own tensors, then its input */
    int lo = layer < 0 ? RT_EMB + 1 : 0, hi = layer < 0 ? RT_LOGITS : RT_NBLOCK - 1;
    for (int t = lo; t <= hi; t++) {
        int s = gslot(g, layer, t);
        if (g->live[s] && !need[s]) emit(g, REMAT_I_FREE, layer, t);
    }
    int sx = gslot(g, layer, RT_X);
    if (g->live[sx] && !need[sx]) emit(g, REMAT_I_FREE, layer, RT_X);
}

static void block_backward(gen *g, int layer, const int *order, int n)
{
    uint8_t *need = remat_calloc((size_t)remat_nslots(g->L), 1);
    if (!need) { g->st = remat_fail(REMAT_ERR_NOMEM, "out of memory compiling a schedule"); return; }
    free_unneeded(g, layer, order, n, 0, need);
    for (int j = 0; j < n && !g->st; j++) {
        const remat_tensor_def *d = &remat_tensor_defs[order[j]];
        for (int i = 0; i < RT_MAXIO && d->bwd_in[i] != RT_NONE; i++) ensure(g, layer, d->bwd_in[i]);
        emit(g, REMAT_I_BACKWARD, layer, order[j]);
        free_unneeded(g, layer, order, n, j + 1, need);
    }
    free(need);
}

/* ---- decisions -------------------------------------------------------------- */

enum { MOVE_ALL = 0, MOVE_CK = 1 };

static int next_token(gen *g, int *kind, uint32_t *arg)
{
    const char *c = g->cursor;
    if (!c || !*c) return 0;
    if (*c != 'A' && *c != 'C') return 0;
    *kind = *c == 'A' ? MOVE_ALL : MOVE_CK;
    char *end;
    unsigned long v = strtoul(c + 1, &end, *kind == MOVE_ALL ? 16 : 10);
    if (end == c + 1 || v > 0xffffffUL) return 0;
    *arg = (uint32_t)v;
    g->cursor = *end == '.' ? end + 1 : end;
    if (*end && *end != '.') return 0;
    return 1;
}

static void decide(gen *g, int a, int b, int slots, int *move, int *m, uint32_t *keep)
{
    const remat_policy *p = g->pol;
    int L = g->L, top = (b == L + 1);
    *move = MOVE_ALL;
    *keep = p->keep;
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
        *move = kind;
        if (kind == MOVE_CK) {
            if (arg < 1 || (int)arg >= b - a) {
                g->st = remat_fail(REMAT_ERR_POLICY, "plan: split C%u out of range for blocks [%d,%d)", arg, a, b);
                return;
            }
            *m = a + (int)arg;
        } else {
            if (arg & ~REMAT_KEEP_ALL) {
                g->st = remat_fail(REMAT_ERR_POLICY, "plan: keep mask A%x names unknown tensors", arg);
                return;
            }
            *keep = (arg | (1u << RT_RES3)) & p->keep;
        }
        break;
    }
    }
}

static void solve(gen *g, int a, int b, int slots)
{
    if (g->st) return;
    int L = g->L;
    if (a == L) {                   /* the head: lnf, logits, loss */
        if (!g->fwd_end_set) { g->s->fwd_end = g->s->n; g->fwd_end_set = 1; }
        block_backward(g, -1, head_order, 2);
        return;
    }
    int move, m = a + 1;
    uint32_t keep;
    decide(g, a, b, slots, &move, &m, &keep);
    if (g->st) return;
    if (move == MOVE_ALL) {
        if (a + 1 < b) {
            block_forward(g, a, keep | (1u << RT_RES3), 0);
            solve(g, a + 1, b, slots - 1);
        }
        block_backward(g, a, bwd_order, N_BWD);
    } else {
        for (int k = a; k < m; k++) block_forward(g, k, 1u << RT_RES3, k > a);
        solve(g, m, b, slots - 1);
        solve(g, a, m, slots);
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

remat_status remat_compile(remat_schedule *s, const remat_policy *pol)
{
    gen g;
    memset(&g, 0, sizeof g);
    remat_policy p = *pol;
    g.s = s;
    g.cfg = &s->cfg;
    g.L = s->cfg.n_layer;
    g.pol = &p;
    if (p.is_sqrt) p.arg = (int)ceil(sqrt((double)g.L));
    int nslots = remat_nslots(g.L);
    g.live = remat_calloc((size_t)nslots, 1);
    g.computed = remat_calloc((size_t)nslots, 1);
    if (!g.live || !g.computed) { g.st = remat_fail(REMAT_ERR_NOMEM, "out of memory compiling a schedule"); goto out; }
    if (p.structure == RS_REVOLVE) {
        g.S = p.arg > g.L + 1 ? g.L + 1 : p.arg;
        if ((g.st = revolve_table(g.L + 1, g.S, &g.rev_cost, &g.rev_split))) goto out;
    }
    g.cursor = p.plan;
    emit(&g, REMAT_I_FORWARD, -1, RT_EMB);
    solve(&g, 0, g.L + 1, g.S ? g.S : 1 << 30);
    if (!g.st) emit(&g, REMAT_I_BACKWARD, -1, RT_EMB);
    if (!g.st) g.st = remat_schedule_push(s, REMAT_I_UPDATE, -1, -1);
    if (!g.st && p.structure == RS_PLAN && g.cursor && *g.cursor)
        g.st = remat_fail(REMAT_ERR_POLICY, "plan: %zu unused characters at the end ('%.20s')",
                          strlen(g.cursor), g.cursor);
out:
    free(g.live);
    free(g.computed);
    free(g.rev_cost);
    free(g.rev_split);
    return g.st;
}
