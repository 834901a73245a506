/*
 * cluster_search.c -- the layout search of `remat plan --framework megatron
 * --gpus N` (remat.h, remat_cluster_search; README, "Cluster planning"):
 * every layout of N GPUs that Megatron-LM accepts for a model, ranked by the
 * iteration time of its best Megatron-LM flags, by branch and bound.
 *
 *   1. enumerate: TP x CP x PP (and its stage split) x VPP x EP x ETP x the
 *      micro-batch, DP = N / (TP CP PP), the distributed optimizer on; each
 *      checked by remat_cluster_check (which holds Megatron's rules that
 *      remat models, with their sources);
 *   2. prune what cannot fit whatever is recomputed: the weights, gradients
 *      and optimizer state alone above the usable memory;
 *   3. bound: price each layout with no recomputation.  No plan of a layout
 *      is faster: recomputation adds work, an offload adds the time its link
 *      does not hide, and more work per micro-batch grows the bubble with
 *      it and hides at most one micro-batch of it in the data-parallel
 *      reduction (cluster.c, fill_row) -- so the step grows.  Where that row
 *      fits it is the layout's answer.  A micro-batch above 1 is bounded
 *      first from micro-batch 1's row and priced when that bound comes up;
 *   4. smallest key first (a queue of bounds and answers): price a bounded
 *      layout, or plan one that does not fit as it is (its Megatron-LM
 *      options, but those bound to be slower than the top-th answer found
 *      so far, or than the top-th of the layouts' upper bounds -- Megatron's
 *      full recomputation where it fits: remat_cluster_megatron_best), or
 *      take an answer -- until the top are taken: every key left is then
 *      no better;
 *   5. the top layouts' whole answers (remat_cluster_plan).
 * A bound found above the layout's own time when it is refined (or an
 * option's, in remat_cluster_megatron_best) makes the search run again,
 * pricing every layout and every option.  The order of everything is the
 * enumeration's, so the result is the same bits on every run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"

/* one layout: what differs between layouts of the same model and world */
typedef struct lay {
    int tp, cp, pp, vpp, dp, last, first, mb, dist, ep, etp;
    size_t idx;            /* enumeration order: the last tie-break */
    size_t base;           /* the same layout at micro-batch 1 (its own index when mb is 1 or fixed) */
    /* the search's state: level 0, key a bound inherited from the micro-batch-1
     * row; 1, key the time with no recomputation; 2, key the answer's time */
    int level, lb_fits;
    double key;
} lay;

typedef struct lays { lay *v; size_t n, cap; } lays;

static int lays_add(lays *a, const lay *l)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? 2 * a->cap : 256;
        lay *p = remat_realloc(a->v, nc * sizeof *p);
        if (!p) return -1;
        a->v = p;
        a->cap = nc;
    }
    a->v[a->n] = *l;
    a->v[a->n].idx = a->n;
    a->n++;
    return 0;
}

/* the layout as a config and a cluster */
static void apply(const remat_config *cfg, const remat_cluster *cl, const lay *l, remat_config *c, remat_cluster *k)
{
    *c = *cfg;
    *k = *cl;
    c->tp = l->tp;
    c->sp = l->tp > 1;
    c->cp = l->cp;
    c->batch = l->mb;
    c->ep = l->ep;
    c->etp = l->etp;
    c->stage = REMAT_STAGE_WHOLE;
    k->pp = l->pp;
    k->vpp = l->vpp;
    k->dp = l->dp;
    k->dist_optim = l->dist;
    k->first_layers = l->first;
    k->last_layers = l->last;
}

/* the enumeration's state: the model, the world, what is fixed, the first
 * reason a layout was refused (for the message when none is accepted) */
typedef struct enumr {
    const remat_config *cfg;
    const remat_cluster *cl;
    int N;
    unsigned fixed;
    lays all;
    char why[256];
} enumr;

/* The micro-batch and the distributed optimizer, then remat_cluster_check.
 * The distributed optimizer is on unless fixed off: with it a layout is
 * never slower and never larger (its state shards over D CP; the gradient
 * reduce-scatter and weight all-gather move 6 bytes a parameter where the
 * all-reduce moves 8, so with every overlap's floor the exposed reduction
 * is at most 1.5x the all-reduce's (D-1)/D 4n / bw, while the optimizer step
 * it saves reads 28 (D-1)/D n bytes more at the HBM's far higher bandwidth:
 * cluster.c's formulas), so the layout without it could only tie. */
static int add_tail(enumr *e, lay l)
{
    long G = e->cl->global_batch;
    if (G % l.dp) {
        if (!e->why[0])
            snprintf(e->why, sizeof e->why, "global batch %ld is not a multiple of dp %d (tp %d, cp %d, pp %d)", G, l.dp,
                     l.tp, l.cp, l.pp);
        return 0;
    }
    long per = G / l.dp;
    size_t base = SIZE_MAX;
    l.dist = (e->fixed & REMAT_SEARCH_FIX_DIST_OPTIM) ? e->cl->dist_optim != 0 : 1;
    for (long b = 1; b <= per && b <= REMAT_MAX_BATCH; b++) {
        int fix = (e->fixed & REMAT_SEARCH_FIX_MICROBATCH) != 0;
        if (fix) b = e->cfg->batch > 0 ? e->cfg->batch : 1;
        if (per % b == 0) {
            l.mb = (int)b;
            remat_config c;
            remat_cluster k;
            apply(e->cfg, e->cl, &l, &c, &k);
            if (remat_cluster_check(&c, &k)) {
                if (!e->why[0]) snprintf(e->why, sizeof e->why, "%s", remat_errmsg());
            } else {
                l.base = b == 1 || fix || base == SIZE_MAX ? e->all.n : base;
                if (b == 1) base = e->all.n;
                if (lays_add(&e->all, &l)) return -1;
            }
        }
        if (fix) break;
    }
    return 0;
}

/* experts: EP dividing E, ETP within a node, both dividing a stage's T CP D */
static int add_experts(enumr *e, lay l)
{
    const remat_config *c = e->cfg;
    if (c->n_experts <= 0) {
        l.ep = l.etp = 0;
        return add_tail(e, l);
    }
    long grid = (long)l.tp * l.cp * l.dp;
    for (int ep = 1; ep <= c->n_experts; ep++) {
        if (e->fixed & REMAT_SEARCH_FIX_EP) ep = c->ep > 1 ? c->ep : 1;
        if (c->n_experts % ep == 0 && grid % ep == 0)
            for (int etp = 1; etp <= e->cl->dev.node_gpus; etp++) {
                if (e->fixed & REMAT_SEARCH_FIX_ETP) etp = c->etp > 0 ? c->etp : l.tp;   /* Megatron's default: TP */
                if (grid % ((long)ep * etp) == 0 && c->moe_ffn_dim % etp == 0) {
                    l.ep = ep;
                    l.etp = etp;
                    if (add_tail(e, l)) return -1;
                }
                if (e->fixed & REMAT_SEARCH_FIX_ETP) break;
            }
        if (e->fixed & REMAT_SEARCH_FIX_EP) break;
    }
    return 0;
}

static int enumerate(enumr *e)
{
    const remat_config *c = e->cfg;
    const remat_cluster *cl = e->cl;
    int N = e->N, L = c->n_layer, node = cl->dev.node_gpus;
    for (int tp = 1; tp <= N; tp++) {
        if (e->fixed & REMAT_SEARCH_FIX_TP) tp = c->tp > 1 ? c->tp : 1;
        else if (tp > node) break;
        if (N % tp && (e->fixed & REMAT_SEARCH_FIX_TP) && !e->why[0])
            snprintf(e->why, sizeof e->why, "--tp %d does not divide %d GPUs", tp, N);
        for (int cp = 1; N % tp == 0 && cp <= N / tp; cp++) {
            if (e->fixed & REMAT_SEARCH_FIX_CP) cp = c->cp > 1 ? c->cp : 1;
            if ((N / tp) % cp && (e->fixed & REMAT_SEARCH_FIX_CP) && !e->why[0])
                snprintf(e->why, sizeof e->why, "--cp %d does not divide %d GPUs over tp %d", cp, N, tp);
            for (int pp = 1; (N / tp) % cp == 0 && pp <= N / tp / cp && pp <= L; pp++) {
                if (e->fixed & REMAT_SEARCH_FIX_PP) pp = cl->pp;
                int dp = N / tp / cp / pp;
                if ((N / tp / cp) % pp && (e->fixed & REMAT_SEARCH_FIX_PP) && !e->why[0])
                    snprintf(e->why, sizeof e->why, "--pp %d does not divide %d GPUs over tp %d x cp %d", pp, N, tp, cp);
                if (!((N / tp / cp) % pp) && (e->fixed & REMAT_SEARCH_FIX_DP) && dp != cl->dp && !e->why[0])
                    snprintf(e->why, sizeof e->why, "--dp %d: tp %d x cp %d x pp %d x dp %d is not %d GPUs", cl->dp, tp, cp,
                             pp, cl->dp, N);
                if ((N / tp / cp) % pp == 0 && !((e->fixed & REMAT_SEARCH_FIX_DP) && dp != cl->dp)) {
                    /* the stage split: as given; even; or every stage ceil(L/P)
                     * layers but a smaller last one (the first, planned, stage
                     * is then the largest) */
                    int first = 0, last = 0, ok = 1;
                    if (e->fixed & REMAT_SEARCH_FIX_STAGES) {
                        first = cl->first_layers;
                        last = cl->last_layers;
                    } else if (L % pp) {
                        int k = (L + pp - 1) / pp;
                        last = L - (pp - 1) * k;
                        ok = pp > 1 && last >= 1;
                    }
                    /* interleaving: V dividing a stage's layers, with a pipeline and an even split */
                    int fixv = (e->fixed & REMAT_SEARCH_FIX_VPP) != 0;
                    int v0 = fixv ? cl->vpp : 1, v1 = fixv ? cl->vpp : pp > 1 && !first && !last ? L / pp : 1;
                    for (int v = v0; ok && v <= v1; v++) {
                        if (!fixv && v > 1 && (L / pp) % v) continue;
                        lay l = { .tp = tp, .cp = cp, .pp = pp, .vpp = v, .dp = dp, .first = first, .last = last };
                        if (add_experts(e, l)) return -1;
                    }
                }
                if (e->fixed & REMAT_SEARCH_FIX_PP) break;
            }
            if (e->fixed & REMAT_SEARCH_FIX_CP) break;
        }
        if (e->fixed & REMAT_SEARCH_FIX_TP) break;
    }
    return 0;
}


/* the search's order: the smaller key first; on a tie the lower level (a
 * bound is refined before an answer of the same time is taken), then the
 * enumeration's order (smaller TP, CP, PP, VPP, micro-batch first): the
 * ranking's, among answers */
static int before(const lay *a, const lay *b)
{
    if (a->key != b->key) return a->key < b->key;
    if (a->level != b->level) return a->level < b->level;
    return a->idx < b->idx;
}

/* a binary heap of indices into the layouts */
typedef struct heap { size_t *v, n; const lay *l; } heap;

static void heap_push(heap *h, size_t i)
{
    size_t k = h->n++;
    h->v[k] = i;
    while (k > 0 && before(&h->l[h->v[k]], &h->l[h->v[(k - 1) / 2]])) {
        size_t p = (k - 1) / 2, t = h->v[p];
        h->v[p] = h->v[k];
        h->v[k] = t;
        k = p;
    }
}

static size_t heap_pop(heap *h)
{
    size_t top = h->v[0], k = 0;
    h->v[0] = h->v[--h->n];
    for (;;) {
        size_t a = 2 * k + 1, b = a + 1, m = k;
        if (a < h->n && before(&h->l[h->v[a]], &h->l[h->v[m]])) m = a;
        if (b < h->n && before(&h->l[h->v[b]], &h->l[h->v[m]])) m = b;
        if (m == k) break;
        size_t t = h->v[m];
        h->v[m] = h->v[k];
        h->v[k] = t;
        k = m;
    }
    return top;
}

void remat_cluster_layouts_free(remat_cluster_layout *v, size_t n)
{
    if (!v) return;
    for (size_t i = 0; i < n; i++) remat_cluster_answer_clear(&v[i].answer);
    free(v);
}

/* Prices layout l with no recomputation: its key becomes that time (level 1).
 * *stage gets the first stage's time per micro-batch (its ops and the
 * collectives and transfers inside them: the row's parts but the bubble, the
 * data-parallel reduction and the optimizer, over the micro-batches). */
static remat_status price(const remat_config *cfg, const remat_cluster *cl, lay *l, double *stage, double *opt,
                          double *ub)
{
    remat_config c;
    remat_cluster k;
    remat_cluster_row r;
    remat_status st;
    apply(cfg, cl, l, &c, &k);
    if ((st = remat_cluster_evaluate(&c, &k, "none", &r))) return st;
    double m = (double)cl->global_batch / ((double)l->mb * l->dp);
    l->key = r.step_ms_pred;
    l->lb_fits = r.fits;
    l->level = 1;
    if (stage) *stage = (r.compute_ms + r.tp_ms + r.cp_ms + r.offload_ms) / m;
    if (opt) *opt = r.optimizer_ms;
    remat_cluster_row_clear(&r);
    if (ub) {       /* an answer's time at most: no recomputation, or else Megatron's full, where it fits */
        *ub = l->lb_fits ? l->key : INFINITY;
        if (!l->lb_fits) {
            if ((st = remat_cluster_megatron_full(&c, &k, &r))) return st;
            if (r.fits) *ub = r.step_ms_pred;
            remat_cluster_row_clear(&r);
        }
    }
    return REMAT_OK;
}

/* The top answers found so far, at most top, in the ranking's order (time,
 * then the enumeration's) */
typedef struct kbest { double t; size_t idx; } kbest;

static int kb_before(double t, size_t idx, const kbest *b) { return t != b->t ? t < b->t : idx < b->idx; }

static void kth_add(kbest *kth, int *nk, int top, double t, size_t idx)
{
    int j;
    if (*nk < top) j = (*nk)++;
    else if (!kb_before(t, idx, &kth[top - 1])) return;
    else j = top - 1;
    while (j > 0 && kb_before(t, idx, &kth[j - 1])) { kth[j] = kth[j - 1]; j--; }
    kth[j] = (kbest){ t, idx };
}

/* the smallest upper bounds of distinct layouts so far, ascending, at most top */
static void kub_add(double *kub, int *nu, int top, double t)
{
    int j;
    if (*nu < top) j = (*nu)++;
    else if (t >= kub[top - 1]) return;
    else j = top - 1;
    while (j > 0 && kub[j - 1] > t) { kub[j] = kub[j - 1]; j--; }
    kub[j] = t;
}

/* One search; *broken 1 when a bound inherited from micro-batch 1 was
 * above the layout's own time (the lazy bounds are then not trusted: the
 * caller searches again pricing every layout). */
static remat_status search(const remat_config *cfg, const remat_cluster *cl, lays *ls, int top, int lazy, lay *best,
                           int *nb, remat_cluster_search_stats *sx, int *broken)
{
    remat_status st = REMAT_OK;
    uint64_t usable = remat_cluster_usable(cl);
    heap h = { remat_malloc((ls->n ? ls->n : 1) * sizeof(size_t)), 0, ls->v };
    double *stage = remat_malloc((ls->n ? ls->n : 1) * sizeof *stage), *opt = remat_malloc((ls->n ? ls->n : 1) * sizeof *opt);
    char *pruned = remat_calloc(ls->n ? ls->n : 1, 1);
    /* two cutoffs, each the top-th of distinct layouts' times: kth, of the
     * answers found; kub, of upper bounds -- a layout's time with no
     * recomputation or else with Megatron's full recomputation, where that
     * fits -- known after pricing: no answer above either enters the top */
    kbest *kth = remat_malloc((size_t)top * sizeof *kth);
    double *kub = remat_malloc((size_t)top * sizeof *kub);
    int nk = 0, nu = 0;
    *nb = 0;
    *broken = 0;
    if (!h.v || !stage || !opt || !pruned || !kth || !kub) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    /* prune, then price micro-batch 1 (or every layout when not lazy), and
     * bound the larger micro-batches by it: with b times the tokens a
     * micro-batch the first stage takes b times as long (every op is per
     * token or per sequence), for m/b micro-batches, and the bubble is b
     * times longer; the data-parallel reduction is at least 0 */
    for (size_t i = 0; i < ls->n && !st; i++) {
        lay *l = &ls->v[i];
        remat_config c;
        remat_cluster k;
        apply(cfg, cl, l, &c, &k);      /* checked when enumerated */
        if (remat_cluster_state_max(&c, &k) > usable) { pruned[i] = 1; sx->pruned++; continue; }
        if (!lazy || l->base == i) {
            double ub;
            if ((st = price(cfg, cl, l, &stage[i], &opt[i], lazy ? &ub : NULL))) break;
            sx->priced++;
            if (lazy && ub < INFINITY) kub_add(kub, &nu, top, ub);
        } else {
            const lay *b = &ls->v[l->base];        /* the same layout at micro-batch 1: enumerated before */
            if (pruned[l->base]) { pruned[i] = 1; sx->pruned++; continue; }   /* the same parameter state */
            double m1 = (double)cl->global_batch / b->dp, s1 = stage[l->base];
            l->key = s1 * m1 + l->mb * s1 * (double)(l->pp - 1) / l->vpp + opt[l->base];
            l->key *= 1 - 1e-9;                    /* the sums' rounding */
            l->level = 0;
        }
        heap_push(&h, i);
    }
    /* fastest first: refine a bound, take an answer, until the top are taken */
    while (!st && h.n && *nb < top) {
        lay *l = &ls->v[heap_pop(&h)];
        if (l->level == 0) {
            double bound = l->key;
            if ((st = price(cfg, cl, l, NULL, NULL, NULL))) break;
            sx->priced++;
            if (l->key < bound) { *broken = 1; break; }
            heap_push(&h, (size_t)(l - ls->v));
        } else if (l->level == 1) {
            /* behind the top answers found so far, or beyond the top-th upper
             * bound: it cannot enter the top */
            if (lazy && ((nk == top && !kb_before(l->key, l->idx, &kth[top - 1])) || (nu == top && l->key > kub[top - 1])))
                continue;
            remat_config c;
            remat_cluster k;
            remat_cluster_row r;
            int violated = 0;
            apply(cfg, cl, l, &c, &k);
            if (l->lb_fits) {
                st = remat_cluster_evaluate(&c, &k, "none", &r);
            } else {
                /* options bound to be slower than the top-th answer (or
                 * upper bound) are not priced */
                sx->planned++;
                double cut = INFINITY;
                if (lazy && nk == top) cut = kth[top - 1].t;
                if (lazy && nu == top && kub[top - 1] < cut) cut = kub[top - 1];
                st = remat_cluster_megatron_best(&c, &k, cut, &r, &violated);
            }
            if (st) break;
            if (violated && lazy) { *broken = 1; remat_cluster_row_clear(&r); break; }
            if (r.policy && !(lazy && nk == top && !kb_before(r.step_ms_pred, l->idx, &kth[top - 1])) &&
                !(lazy && nu == top && r.step_ms_pred > kub[top - 1])) {
                l->level = 2;
                l->key = r.step_ms_pred;
                heap_push(&h, (size_t)(l - ls->v));
                kth_add(kth, &nk, top, l->key, l->idx);
            }
            remat_cluster_row_clear(&r);
        } else {
            best[(*nb)++] = *l;
        }
    }
out:
    free(h.v);
    free(stage);
    free(opt);
    free(pruned);
    free(kth);
    free(kub);
    return st;
}

remat_status remat_cluster_search(const remat_config *cfg, const remat_cluster *cl, int gpus, unsigned fixed, int top,
                                  remat_cluster_layout **out, size_t *n, remat_cluster_search_stats *stats)
{
    remat_status st = REMAT_OK;
    remat_cluster_search_stats sx;
    memset(&sx, 0, sizeof sx);
    if (stats) memset(stats, 0, sizeof *stats);
    if (!cfg || !cl || !out || !n) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_search: NULL argument");
    *out = NULL;
    *n = 0;
    if (cfg->framework != REMAT_FRAMEWORK_MEGATRON)
        return remat_fail(REMAT_ERR_INVALID, "the layout search ranks Megatron-LM's layouts: --framework megatron");
    if (gpus < 1 || gpus > (1 << 20)) return remat_fail(REMAT_ERR_INVALID, "--gpus must be in [1, 1048576], got %d", gpus);
    if (top < 1 || top > 1000) return remat_fail(REMAT_ERR_INVALID, "--top must be in [1, 1000], got %d", top);
    if (cl->global_batch < 1)
        return remat_fail(REMAT_ERR_INVALID, "the layout search needs the global batch (--global-batch G): the "
                          "micro-batches of each layout follow from it");
    if (fixed & ~0x3ffu) return remat_fail(REMAT_ERR_INVALID, "remat_cluster_search: unknown REMAT_SEARCH_FIX_ bits %#x", fixed);
    remat_config model = *cfg;            /* the model and the step; the layout's fields are the search's */
    model.tp = model.cp = model.ep = model.etp = 0;
    model.sp = 0;
    model.batch = 1;
    model.stage = REMAT_STAGE_WHOLE;
    if ((st = remat_config_check(&model))) return st;

    enumr e;
    memset(&e, 0, sizeof e);
    e.cfg = cfg;
    e.cl = cl;
    e.N = gpus;
    e.fixed = fixed;
    if (enumerate(&e)) { free(e.all.v); return remat_fail(REMAT_ERR_NOMEM, "out of memory"); }
    sx.layouts = e.all.n;
    if (!e.all.n) {
        remat_status r = remat_fail(REMAT_ERR_INVALID, "no layout of %d GPUs that Megatron-LM accepts%s%s%s", gpus,
                                    fixed ? " with the dimensions given" : "", e.why[0] ? ": e.g. " : "", e.why);
        free(e.all.v);
        return r;
    }
    lay *best = remat_calloc((size_t)top, sizeof *best);
    int nb = 0, broken = 0;
    if (!best) st = remat_fail(REMAT_ERR_NOMEM, "out of memory");
    if (!st) st = search(cfg, cl, &e.all, top, 1, best, &nb, &sx, &broken);
    if (!st && broken) {        /* a lazy bound failed: price every layout */
        memset(&sx, 0, sizeof sx);
        sx.layouts = e.all.n;
        st = search(cfg, cl, &e.all, top, 0, best, &nb, &sx, &broken);
    }
    free(e.all.v);

    /* the top layouts' whole answers */
    remat_cluster_layout *v = NULL;
    if (!st && nb && !(v = remat_calloc((size_t)nb, sizeof *v))) st = remat_fail(REMAT_ERR_NOMEM, "out of memory");
    for (int m = 0; !st && m < nb; m++) {
        apply(cfg, cl, &best[m], &v[m].cfg, &v[m].cl);
        if ((st = remat_cluster_plan(&v[m].cfg, &v[m].cl, &v[m].answer))) break;
        if (!v[m].answer.best_megatron.policy || v[m].answer.best_megatron.step_ms_pred != best[m].key)
            st = remat_fail(REMAT_ERR_STATE, "the layout search's answer for a layout differs from "
                            "remat_cluster_plan's (a bug)");
    }
    free(best);
    if (st) {
        remat_cluster_layouts_free(v, (size_t)nb);   /* zeroed past the failure: clearing them is a no-op */
        return st;
    }
    *out = v;
    *n = (size_t)nb;
    if (stats) *stats = sx;
    return REMAT_OK;
}
