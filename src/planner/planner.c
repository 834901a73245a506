/*
 * planner.c -- the budget planner: the fastest plan whose simulated peak
 * fits, by an exact dynamic program over the chain of blocks.
 *
 * The search space is the compiler's own (compile.c, schedule.h): solve(a,b)
 * over the chain of L blocks plus the head picks ALL(keep) or CK(j) at every
 * step, and a plan:TOKENS string records those decisions in preorder.  The
 * program follows Rotor (Beaumont et al. 2019, "Optimal checkpointing for
 * heterogeneous chains") with per-block keep-sets as in Rockmate (Zhao et al.
 * 2023): its sub-problems are
 *   B(n)  a chain of n blocks entered during the backward pass (d_res live,
 *         input x_a live, output not live): every recomputation pass;
 *   F(n)  the last n blocks plus the head, entered in the first forward pass
 *         (d_res not yet allocated; the head allocates it).
 * Because the compiler only ever frees a block's own tensors, the live bytes
 * inside solve(a,b) are those at its entry plus a quantity that depends only
 * on the sub-plan, so peaks compose exactly:
 *   leaf B(1)   x + Bpk(nothing kept)
 *   ALL(k)      max(x + Fpk(k), x + K(k) + P(n-1), x [+ d in F] + Bpk(k))
 *   CK(j)       max(x + CKF(j), x + P(n-j), [d in F +] P_B(j))
 *   head F(0)   the head's peak
 *   OFF(k)      max(x + Fpk(k), P(n-1), x [+ d in F] + Bpk(k))
 * with x the block input, d the d_res buffer, Fpk/K/Bpk a keep-set's forward
 * peak, stored bytes and backward peak, and CKF the peak of forwarding j
 * blocks keeping only their outputs.  Times add.  OFF(k) is ALL(k) with what
 * the block keeps and its input offloaded to the host after its forward and
 * reloaded when its backward starts (an O token): the block holds nothing on
 * the device while the rest is solved, and its time is ALL(k)'s plus what
 * the transfers do not hide (cost.c).  It is a move of the first forward
 * sweep only -- F(n) -- for every keep-set (pruned among themselves),
 * offered when the profile has a host link, and, to bound the host's bytes,
 * only for the first blocks (remat_planner_set_host: the ones TE and
 * Megatron offload, which have the longest to hide their transfers).  These constants are not
 * derived from a second model of memory: they are read off schedules that
 * the real compiler emits for 1- and 2-block chains, as walked by the
 * simulator (remat_schedule_trace).  The plan returned is then simulated
 * whole and its peak must equal the program's prediction to the byte (a
 * mismatch is an error, never silently reported); tests/test_planner.c
 * checks the recurrences on random plans and the optimum against an
 * exhaustive enumeration of every plan string.
 *
 * Memory is a continuous quantity here: every sub-problem keeps its Pareto
 * front of (peak, time) as a step function, and the moves combine fronts in
 * linear time (a max of shifted peaks is a union of breakpoints), so there is
 * no discretisation into slots and no rounding.  Keep-sets are pruned to
 * those not dominated in (Fpk, K, Bpk, recompute time), and a candidate move
 * is only merged where it can beat the front built so far; both lose nothing.
 *
 * Exact fronts can hold tens of thousands of points for long chains of wide
 * blocks (a knapsack of keep-sets whose peaks differ by a LayerNorm
 * statistic, a few KiB).  Past a work limit the fronts are thinned to at most
 * two points per bucket of max(x/16, range/4096) bytes, range being the
 * budget or the peak of keeping everything (peaks stay exact, so every plan
 * still fits and reports its true peak; a budget may get the plan of a
 * budget up to one bucket per recursion level smaller), and past a second
 * limit to buckets wide enough to bound the work (build_fronts).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "planner.h"
#include "../core/core.h"

/* the block output's bit, and every other per-block tensor, in planner p's table */
#define RES3_BIT(p) remat_out_bit((p)->tb)
/* what a keep-set may drop: what the framework saves, but the block output */
#define DROPPABLE_ALL(p) (remat_keep_default((p)->tb) & ~RES3_BIT(p))
#define TIME_EPS 1e-12

typedef struct keepc {
    uint32_t mask;       /* keep mask (res3 implied) */
    uint64_t fpk;        /* block-forward peak above the live bytes at its start */
    uint64_t kept;       /* stored after the forward, res3 excluded (on the device) */
    uint64_t bpk;        /* block-backward peak above (everything else + x_a + d_res) */
    double bwd_ms;       /* the block's backward: recomputation and backward ops (their
                          * times depend on what was kept: recomputed inputs are warm);
                          * offloaded, also what its offload adds to the forward */
    int off;             /* 1: offloaded (OFF(k), an O token) */
    uint64_t so;         /* device bytes it holds while the rest is solved: x + kept, 0 offloaded */
    uint64_t host;       /* bytes it moves to the host (offloaded: x + what it keeps) */
} keepc;

typedef struct fpt {
    uint64_t peak;
    double ms;
    int32_t move;        /* >= 0: ALL with keep-set index; < 0: CK(-move) */
} fpt;

typedef struct front {
    fpt *p;
    size_t n, cap;
    uint64_t bend;     /* end of the last point's bucket (thinning) */
    int second;        /* the last point is the second of its bucket */
} front;

/* one block of a chain whose blocks differ (a table read from a file) */
typedef struct hblock {
    uint64_t x;          /* its input */
    keepc *ks;           /* its keep-sets, pruned (no offload) */
    int nks;
    uint64_t ckf1;       /* its forward keeping nothing, above its input: as a CK segment's first block */
    uint64_t fr1;        /* the same as a later block of a CK segment, above the segment's checkpoint */
    uint64_t leaf_bpk;   /* B(1) of it: its backward keeping nothing, above x + d */
    double tf, leaf_ms;  /* its forward; its leaf's time */
    int pinned;          /* the junction of two chains: ALL keeping all, in no segment */
} hblock;

struct remat_planner {
    remat_config cfg;
    const remat_table *tb;
    int L;
    uint64_t x, d;             /* block input bytes; d_res bytes */
    uint64_t ckf1, ckf2;       /* CKF(1), CKF(j >= 2) */
    uint64_t head_pk, leaf_bpk;
    double tf, th, te, leaf_ms;  /* block forward, head, emb + update, leaf */
    keepc *ks;
    int nks;                   /* ALL keep-sets [0, nall), then the offloaded ones */
    int nall;
    int cap;                   /* blocks [0, cap) of the first sweep may offload */
    uint64_t u;                /* bucket width of the fronts (1: exact) */
    front *fb, *ff;            /* fb[1..L], ff[0..L] */
    uint64_t *mb, *mf;         /* minimum peaks of B(n), F(n), bytes, exact */
    int32_t *mvb, *mvf;        /* their moves */
    /* A chain whose blocks differ (het): per block its constants, and
     * B(a, n) -- blocks a..a+n-1 in a backward pass -- at fbh, mbh, mvbh
     * [a (L + 1) + n]; F(n) is still ff[n], blocks L-n.. and the head. */
    int het;
    hblock *hb;
    front *fbh;
    uint64_t *mbh;
    int32_t *mvbh;
};

/* ---- constants from compiled 1- and 2-block schedules -------------------- */

/* A compiled schedule (its instructions, live and peak bytes per
 * instruction) and each instruction's predicted time. */
typedef struct trace {
    remat_schedule *s;
    size_t n;
    double *ms;
} trace;

static void trace_free(trace *t)
{
    remat_schedule_free(t->s);
    free(t->ms);
    memset(t, 0, sizeof *t);
}

/* activation bytes live before instruction i */
static uint64_t before(const trace *t, size_t i) { return i ? t->s->live_after[i - 1] : 0; }

static remat_status trace_policy(const remat_config *c, const remat_profile *prof, const char *policy, trace *t)
{
    memset(t, 0, sizeof *t);
    remat_status st = remat_schedule_create(c, policy, &t->s);
    if (st) {
        if (st == REMAT_ERR_NOMEM) return st;   /* keep its message */
        char why[512];
        snprintf(why, sizeof why, "%s", remat_errmsg());   /* remat_fail rewrites the buffer it reads */
        return remat_fail(st, "planner: cannot compile '%s': %s", policy, why);
    }
    t->n = t->s->n;
    if (!(t->ms = remat_malloc(t->n * sizeof(double)))) st = remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
    else if (remat_cost_schedule_times(prof, t->s, t->ms, NULL) < 0) st = REMAT_ERR_NOMEM;
    if (st) trace_free(t);
    return st;
}

static int is_head(const remat_table *tb, int tid)
{
    for (int h = 0; h < tb->nlmhead; h++)
        if (tb->lmhead[h] == tid) return 1;
    return 0;
}

/* Segments of a schedule for a chain whose last block is L-1:
 * [1, h) the block forwards, [h, bs) the head, [bs, e) the last block's
 * backward (for L = 1 the only block's). */
static remat_status segments(const remat_table *tb, const trace *t, int L, size_t *h, size_t *bs, size_t *e)
{
    size_t i = 0, lnfb = 0;
    int last_head_bwd = tb->lmhead_bwd[tb->nlmhead_bwd - 1];
    while (i < t->n && !is_head(tb, t->s->ins[i].tid)) i++;
    *h = i;
    for (; i < t->n; i++)
        if (t->s->ins[i].kind == REMAT_I_BACKWARD && t->s->ins[i].tid == last_head_bwd) { lnfb = i; break; }
    for (i = lnfb + 1; i < t->n; i++)
        if (!(t->s->ins[i].kind == REMAT_I_FREE &&
              (is_head(tb, t->s->ins[i].tid) || (t->s->ins[i].tid == tb->nblock - 1 && t->s->ins[i].layer == L - 1))))
            break;
    *bs = i;
    for (; i < t->n; i++)
        if (t->s->ins[i].kind == REMAT_I_BACKWARD && t->s->ins[i].tid == tb->emb) break;
    *e = i;
    if (!lnfb || *h == 0 || *h >= *bs || *bs >= *e || *e >= t->n)
        return remat_fail(REMAT_ERR_STATE, "planner: the compiled schedule does not have the expected shape "
                          "(forward, head, backward); compile.c and planner.c disagree");
    return REMAT_OK;
}

static uint64_t seg_max(const trace *t, size_t a, size_t b)
{
    uint64_t m = 0;
    for (size_t i = a; i < b; i++) if (t->s->peak_in[i] > m) m = t->s->peak_in[i];
    return m;
}

static double seg_ms(const trace *t, size_t a, size_t b)
{
    double s = 0;
    for (size_t i = a; i < b; i++)
        s += t->ms[i];
    return s;
}

/* keep-set k of one block, from the 1-block schedule "plan:A<k>" (off:
 * "plan:O<k>", after the first, which gives p->tf) */
static remat_status measure_keep_io(remat_planner *p, const remat_config *c1, const remat_profile *prof,
                                    uint32_t mask, keepc *out, int first, int off, uint64_t x, uint64_t y)
{
    char pol[32];
    trace t;
    size_t h, bs, e;
    snprintf(pol, sizeof pol, "plan:%c%x", off ? 'O' : 'A', mask & ~RES3_BIT(p));
    remat_status st = trace_policy(c1, prof, pol, &t);
    if (st) return st;
    if ((st = segments(p->tb, &t, 1, &h, &bs, &e))) goto out;
    memset(out, 0, sizeof *out);
    out->mask = mask | RES3_BIT(p);
    out->off = off;
    out->fpk = seg_max(&t, 1, h) - before(&t, 1);
    /* offloaded, the output alone is on the device when the head starts,
     * and the block's bytes come back inside its backward segment */
    out->kept = off ? before(&t, h) - y : before(&t, h) - before(&t, 1) - y;
    out->so = off ? 0 : x + out->kept;
    out->host = t.s->sim.host_stored_bytes;
    out->bpk = seg_max(&t, bs, e) - (x + p->d);
    out->bwd_ms = seg_ms(&t, bs, e) + (off ? seg_ms(&t, 1, h) - p->tf : 0);
    if (before(&t, 1) != x || before(&t, bs) != (off ? p->d : x + p->d + out->kept) ||
        t.s->live_after[e - 1] != p->d || (off && out->kept)) {
        st = remat_fail(REMAT_ERR_STATE, "planner: live bytes around block 0 of '%s' are not as modelled; "
                        "compile.c and planner.c disagree", pol);
        goto out;
    }
    if (first) {    /* mask == res3 only: the block times, the head and the leaf */
        p->tf = seg_ms(&t, 1, h);
        p->th = seg_ms(&t, h, bs);
        p->te = seg_ms(&t, 0, t.n) - p->tf - p->th - seg_ms(&t, bs, e);
        p->head_pk = seg_max(&t, h, bs) - (before(&t, h) - y);
        p->leaf_bpk = out->bpk;
        p->leaf_ms = seg_ms(&t, bs, e);
        p->ckf1 = out->fpk;
    }
out:
    trace_free(&t);
    return st;
}

/* keep-set `mask` of a block whose input and output are p->x */
static remat_status measure_keep(remat_planner *p, const remat_config *c1, const remat_profile *prof,
                                 uint32_t mask, keepc *out, int first, int off)
{
    return measure_keep_io(p, c1, prof, mask, out, first, off, p->x, p->x);
}

/* The peak of the second block's forward in a CK forward, above the
 * segment's checkpoint (x0, the first block's input; x1 the second's):
 * it also holds its own input until its last forward reader (2-block
 * schedule "plan:C2.A0.A0"). */
static remat_status measure_fr1(remat_planner *p, const remat_config *c2, const remat_profile *prof, uint64_t x0,
                                uint64_t x1, uint64_t *fr1)
{
    trace t;
    size_t h, bs, e, s1 = 0;
    remat_status st = trace_policy(c2, prof, "plan:C2.A0.A0", &t);
    if (st) return st;
    if ((st = segments(p->tb, &t, 2, &h, &bs, &e))) goto out;
    while (s1 < h && t.s->ins[s1].layer != 1) s1++;
    if (s1 >= h || before(&t, s1) != x0 + x1) {
        st = remat_fail(REMAT_ERR_STATE, "planner: the checkpointed forward of 'plan:C2.A0.A0' is not as "
                        "modelled; compile.c and planner.c disagree");
        goto out;
    }
    *fr1 = seg_max(&t, s1, h) - x0;
out:
    trace_free(&t);
    return st;
}

/* CKF(j >= 2) */
static remat_status measure_ck(remat_planner *p, const remat_config *c2, const remat_profile *prof)
{
    uint64_t fr1 = 0;
    remat_status st = measure_fr1(p, c2, prof, p->x, p->x, &fr1);
    if (!st) p->ckf2 = fr1 > p->ckf1 ? fr1 : p->ckf1;
    return st;
}

static int dominates(const keepc *a, const keepc *b)
{
    return a->fpk <= b->fpk && a->kept <= b->kept && a->bpk <= b->bpk &&
           a->bwd_ms <= b->bwd_ms * (1 + TIME_EPS) + 1e-15;
}

/* Pareto-prunes all[0..na) into p->ks from index p->nks on (ties: keep the first) */
static void prune_into(remat_planner *p, const keepc *all, int na)
{
    for (int i = 0; i < na; i++) {
        int dom = 0;
        for (int j = 0; j < na && !dom; j++) {
            if (j == i || !dominates(&all[j], &all[i])) continue;
            dom = !dominates(&all[i], &all[j]) || j < i;
        }
        if (!dom) p->ks[p->nks++] = all[i];
    }
}

/* ---- fronts ------------------------------------------------------------------
 * A front is a step function: points sorted by peak (bytes, exact), time
 * strictly falling.  Pushing in peak order keeps it an envelope.  With a
 * bucket width u > 1 each bucket [k u, (k+1) u) keeps at most two points,
 * its first (lowest peak) and its fastest (thinning): peaks stay exact --
 * every point is a real plan -- but a budget inside a bucket may get the
 * plan of the bucket's first point.  Points above `limit` are never needed and
 * are dropped. */

typedef struct fctx { uint64_t u, limit; double *ops; } fctx;   /* ops: points handled, for the work limit */

/* room for need points in f (capacity first when empty, doubling); -1 when
 * out of memory (f unchanged) */
static int front_reserve(front *f, size_t need, size_t first)
{
    if (need <= f->cap) return 0;
    size_t cap = f->cap ? f->cap : first;
    while (cap < need) cap *= 2;
    fpt *q = remat_realloc(f->p, cap * sizeof *q);
    if (!q) return -1;
    f->p = q;
    f->cap = cap;
    return 0;
}

static inline int front_push(const fctx *c, front *f, uint64_t peak, double ms, int32_t move)
{
    (*c->ops)++;
    if (peak > c->limit) return 0;
    if (f->n) {
        fpt *last = &f->p[f->n - 1];
        if (peak <= last->peak) {           /* same breakpoint: keep the faster */
            if (ms < last->ms) { last->ms = ms; last->move = move; }
            return 0;
        }
        if (!(ms < last->ms * (1 - TIME_EPS))) return 0;
        if (peak < f->bend) {               /* same bucket (u > 1) */
            if (f->second) {                /* the faster replaces the bucket's second point */
                last->peak = peak; last->ms = ms; last->move = move;
                return 0;
            }
            goto append;                    /* the bucket's first point stays */
        }
    }
    f->second = -1;                         /* a new bucket */
append:
    if (front_reserve(f, f->n + 1, 64)) return -1;
    f->p[f->n].peak = peak;
    f->p[f->n].ms = ms;
    f->p[f->n].move = move;
    f->n++;
    if (f->second < 0 || f->n == 1) { f->bend = c->u > 1 ? (peak / c->u + 1) * c->u : 0; f->second = 0; }
    else f->second = 1;
    return 0;
}

/* index of the fastest point with peak <= budget, or -1 */
static long front_best(const front *f, uint64_t budget)
{
    long lo = 0, hi = (long)f->n - 1, r = -1;
    while (lo <= hi) {
        long m = (lo + hi) / 2;
        if (f->p[m].peak <= budget) { r = m; lo = m + 1; } else hi = m - 1;
    }
    return r;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t m = a > b ? a : b;
    return m > c ? m : c;
}

static void fronts_free(remat_planner *p)
{
    for (int n = 0; n <= p->L; n++) {
        if (p->fb) free(p->fb[n].p);
        if (p->ff) free(p->ff[n].p);
    }
    if (p->fbh)
        for (size_t i = 0; i < (size_t)(p->L + 1) * (size_t)(p->L + 1); i++) free(p->fbh[i].p);
    free(p->fb);
    free(p->ff);
    free(p->fbh);
    p->fb = p->ff = p->fbh = NULL;
}

/* appends acc->p[from..to) to dst, which they follow as an envelope */
static int front_append(const fctx *c, front *dst, const front *acc, size_t from, size_t to)
{
    if (to <= from) return 0;
    size_t need = dst->n + (to - from);
    if (front_reserve(dst, need, 64)) return -1;
    memcpy(dst->p + dst->n, acc->p + from, (to - from) * sizeof(fpt));
    dst->n = need;
    uint64_t pk = dst->p[dst->n - 1].peak;
    dst->bend = c->u > 1 ? (pk / c->u + 1) * c->u : 0;
    dst->second = c->u > 1 && dst->n >= 2 && dst->p[dst->n - 2].peak / c->u == pk / c->u;
    return 0;
}

/* dst = lower envelope of acc and the candidate ALL move over sub-front s:
 * peaks max(lo, off + s) up to cmax, times s + add (dst empty, distinct
 * from both).  acc's points at or above `cut` are known to be as fast as
 * every candidate point (cut_peak), so the merge touches only the window
 * where both interleave; the rest of acc is copied. */
static int merge_all(const fctx *c, front *dst, const front *acc, const front *s, uint64_t lo, uint64_t off,
                     double add, int32_t move, uint64_t cmax, uint64_t cut)
{
    size_t i = 0, k = 0;
    /* of the sub-points clamped to lo only the last (fastest) matters */
    while (k + 1 < s->n && off + s->p[k + 1].peak <= lo) k++;
    dst->n = 0;
    if (cmax > c->limit) cmax = c->limit;
    if (k < s->n) {      /* acc's points below the first candidate point stay as they are */
        uint64_t p0 = off + s->p[k].peak;
        if (p0 < lo) p0 = lo;
        long lo_i = 0, hi_i = (long)acc->n;          /* first index with peak >= p0 */
        while (lo_i < hi_i) { long m = (lo_i + hi_i) / 2; if (acc->p[m].peak < p0) lo_i = m + 1; else hi_i = m; }
        i = (size_t)lo_i;
        if (front_append(c, dst, acc, 0, i)) return -1;
    }
    while (k < s->n) {
        uint64_t cp = off + s->p[k].peak;
        if (cp < lo) cp = lo;
        if (cp > cmax) break;
        double cm = s->p[k].ms + add;
        if (i < acc->n && (acc->p[i].peak < cp || (acc->p[i].peak == cp && acc->p[i].ms <= cm))) {
            if (front_push(c, dst, acc->p[i].peak, acc->p[i].ms, acc->p[i].move)) return -1;
            i++;
        } else {
            if (front_push(c, dst, cp, cm, move == INT32_MIN ? s->p[k].move : move)) return -1;
            k++;
        }
    }
    /* the rest of acc: pushed while candidate points may still dominate
     * it, then, from the first point kept at or above the cut, copied */
    while (i < acc->n) {
        size_t n0 = dst->n;
        if (front_push(c, dst, acc->p[i].peak, acc->p[i].ms, acc->p[i].move)) return -1;
        i++;
        if (acc->p[i - 1].peak >= cut && dst->n > n0) break;
    }
    return front_append(c, dst, acc, i, acc->n);
}

static int cmp_fpt(const void *a, const void *b)
{
    const fpt *x = a, *y = b;
    if (x->peak != y->peak) return x->peak < y->peak ? -1 : 1;
    return (x->ms > y->ms) - (x->ms < y->ms);
}

/* appends (cp, cm, move) to pend unless acc is as fast at or below cp;
 * *i: acc points known to have peak <= cp (candidate peaks only grow) */
static int collect_point(const fctx *c, front *pend, const front *acc, size_t *i, uint64_t cp, double cm, int32_t move)
{
    (*c->ops)++;
    size_t step = 1, k = *i;
    while (k + step <= acc->n && acc->p[k + step - 1].peak <= cp) { k += step; step *= 2; }
    while (step > 1) { step /= 2; if (k + step <= acc->n && acc->p[k + step - 1].peak <= cp) k += step; }
    *i = k;
    if (k && acc->p[k - 1].ms <= cm) return 0;
    if (front_reserve(pend, pend->n + 1, 256)) return -1;
    pend->p[pend->n].peak = cp;
    pend->p[pend->n].ms = cm;
    pend->p[pend->n].move = move;
    pend->n++;
    return 0;
}

/* Appends to pend the points of candidate CK (peaks max(lo, off1 + s1, off2 + s2) at every breakpoint, times s1 + s2 + add) that acc does
 * not already match: acc's fastest time at or below the point's peak is
 * found by galloping forward, as the candidate's peaks only grow. */
static int collect_ck(const fctx *c, front *pend, const front *acc, const front *s1, uint64_t off1,
                      const front *s2, uint64_t off2, uint64_t lo, double add, int32_t move, uint64_t cmax)
{
    size_t a = 0, b = 0, i = 0;    /* acc->p[0..i) have peak <= the current candidate's */
    while (a < s1->n || b < s2->n) {
        uint64_t pa = a < s1->n ? off1 + s1->p[a].peak : UINT64_MAX;
        uint64_t pb = b < s2->n ? off2 + s2->p[b].peak : UINT64_MAX;
        uint64_t m = pa < pb ? pa : pb;
        uint64_t cp = m > lo ? m : lo;
        if (cp > c->limit || cp > cmax) break;
        while (a < s1->n && off1 + s1->p[a].peak <= m) a++;
        while (b < s2->n && off2 + s2->p[b].peak <= m) b++;
        if (!a || !b) continue;
        if (collect_point(c, pend, acc, &i, cp, s1->p[a - 1].ms + s2->p[b - 1].ms + add, move)) return -1;
    }
    return 0;
}

/* The lowest peak at which acc is already as fast as `fastest`: a
 * candidate whose every point takes at least that long cannot improve acc
 * there or above.  UINT64_MAX when acc never is. */
static uint64_t cut_peak(const front *acc, double fastest)
{
    long lo = 0, hi = (long)acc->n - 1, r = -1;     /* times fall with the index */
    while (lo <= hi) {
        long m = (lo + hi) / 2;
        if (acc->p[m].ms <= fastest) { r = m; hi = m - 1; } else lo = m + 1;
    }
    return r < 0 ? UINT64_MAX : acc->p[r].peak;
}

/* 1 when a candidate whose lowest peak is p0 and whose fastest time is
 * fastest cannot improve the front: already at p0 it is as fast */
static int useless(const front *acc, uint64_t p0, double fastest)
{
    long i = front_best(acc, p0);
    return i >= 0 && acc->p[i].ms <= fastest;
}

/* keep-set k is useful for sub-problem type `type` unless another of the
 * first n (the ALL keep-sets, or also the offloaded ones) is at least as
 * good in (lowest peak of the move, bytes held while the rest is solved,
 * time) */
static int keep_useful(const remat_planner *p, int type, int k, int n)
{
    const keepc *a = &p->ks[k];
    uint64_t dd = type ? p->d : 0;
    uint64_t la = a->fpk > dd + a->bpk ? a->fpk : dd + a->bpk;
    for (int j = 0; j < n; j++) {
        const keepc *b = &p->ks[j];
        uint64_t lb = b->fpk > dd + b->bpk ? b->fpk : dd + b->bpk;
        if (j == k || lb > la || b->so > a->so || b->bwd_ms > a->bwd_ms * (1 + TIME_EPS) + 1e-15) continue;
        int same = lb == la && b->so == a->so && b->bwd_ms >= a->bwd_ms * (1 - TIME_EPS) - 1e-15;
        if (!same || j < k) return 0;
    }
    return 1;
}

/* The fronts of every sub-problem with bucket width u, up to peak limit.
 * Returns REMAT_ERR_RANGE without a message when more than wmax points
 * would be processed (wmax 0: no limit). */
static remat_status run_fronts_het(remat_planner *p, uint64_t u, uint64_t limit, double wmax);
static void run_min_peaks_het(remat_planner *p);

static remat_status run_fronts(remat_planner *p, uint64_t u, uint64_t limit, double wmax)
{
    if (p->het) return run_fronts_het(p, u, limit, wmax);
    int L = p->L;
    front acc = { 0 }, tmp = { 0 }, pend = { 0 };
    remat_status st = REMAT_OK;
    double work = 0;
    fctx c = { u, limit, &work };
    /* the moves' keep-sets by kind: 0 B(n), 1 F(n) without offload, 2 F(n)
     * where the block may offload */
    int *use[3] = { NULL, NULL, NULL }, nuse[3] = { 0, 0, 0 };
    uint64_t *thr[3] = { NULL, NULL, NULL };
    fronts_free(p);
    p->u = u;
    p->fb = remat_calloc((size_t)L + 1, sizeof(front));
    p->ff = remat_calloc((size_t)L + 1, sizeof(front));
    for (int kind = 0; kind < 3; kind++) use[kind] = remat_malloc(sizeof(int) * (size_t)p->nks);
    if (!p->fb || !p->ff || !use[0] || !use[1] || !use[2]) goto nomem;
    for (int kind = 0; kind < 3; kind++) {
        int n = kind == 2 ? p->nks : p->nall;
        for (int k = 0; k < n; k++)
            if (keep_useful(p, kind > 0, k, n)) use[kind][nuse[kind]++] = k;
    }
    for (int kind = 0; kind < 3; kind++)          /* by the bytes they hold, for spreading the merged ones */
        for (int a = 1; a < nuse[kind]; a++)
            for (int b = a; b > 0 && p->ks[use[kind][b]].so < p->ks[use[kind][b - 1]].so; b--) {
                int t = use[kind][b]; use[kind][b] = use[kind][b - 1]; use[kind][b - 1] = t;
            }
    /* Keep-set a is dominated in (bytes held, time) by b with a higher
     * lowest peak lo_b: then every point of ALL(a) at or above lo_b is
     * matched by the same point of ALL(b) (max(lo_b, so_b + p) is no higher,
     * the time no longer), so ALL(a) only matters below lo_b. */
    for (int kind = 0; kind < 3; kind++) {
        thr[kind] = remat_malloc(sizeof(uint64_t) * (size_t)(nuse[kind] ? nuse[kind] : 1));
        if (!thr[kind]) goto nomem;
        for (int a = 0; a < nuse[kind]; a++) {
            const keepc *ka = &p->ks[use[kind][a]];
            thr[kind][a] = UINT64_MAX;
            for (int b = 0; b < nuse[kind]; b++) {
                const keepc *kb = &p->ks[use[kind][b]];
                if (b == a || kb->so > ka->so || kb->bwd_ms > ka->bwd_ms) continue;
                if (kb->so == ka->so && kb->bwd_ms == ka->bwd_ms && b > a) continue;
                uint64_t lob = max3(p->x + kb->fpk, p->x + (kind ? p->d : 0) + kb->bpk, 0);
                if (lob < thr[kind][a]) thr[kind][a] = lob;
            }
        }
    }
    uint64_t x = p->x, d = p->d;
    for (int type = 0; type < 2; type++) {       /* 0: B(n), 1: F(n) */
        front *fr = type ? p->ff : p->fb;
        for (int n = type ? 0 : 1; n <= L; n++) {
            acc.n = 0;
            if (type == 0 && n == 1) {
                if (front_push(&c, &acc, x + p->leaf_bpk, p->leaf_ms, 0)) goto nomem;
            } else if (type == 1 && n == 0) {
                if (front_push(&c, &acc, p->head_pk, p->th, 0)) goto nomem;
            } else {
                const front *sub = &fr[n - 1];
                int kind = type == 0 ? 0 : L - n < p->cap ? 2 : 1;   /* F(n) starts at block L - n */
                pend.n = 0;
                for (int kk = 0; kk < nuse[kind]; kk++) {
                    int k = use[kind][kk];
                    const keepc *kc = &p->ks[k];
                    uint64_t lo = max3(x + kc->fpk, x + (type ? d : 0) + kc->bpk, 0);
                    double add = p->tf + kc->bwd_ms;
                    if (!sub->n || useless(&acc, max3(lo, kc->so + sub->p[0].peak, 0), sub->p[sub->n - 1].ms + add))
                        continue;
                    /* points at or above thr are matched by a keep-set with less of
                     * both; at or above the cut, acc is already as fast */
                    uint64_t cut = cut_peak(&acc, sub->p[sub->n - 1].ms + add);
                    uint64_t top = thr[kind][kk] < cut ? thr[kind][kk] : cut;
                    if (merge_all(&c, &tmp, &acc, sub, lo, kc->so, add, k, top == UINT64_MAX ? top : top - 1, cut))
                        goto nomem;
                    front sw = acc; acc = tmp; tmp = sw;
                }
                /* CK(j): most of their points are slower than what the ALL
                 * moves already give; collect the others, merge them once */
                int jmax = type ? n : n - 1;
                for (int j = 1; j <= jmax; j++) {
                    uint64_t lo = x + (j == 1 ? p->ckf1 : p->ckf2);
                    const front *s1 = &fr[n - j], *s2 = &p->fb[j];
                    if (!s1->n || !s2->n ||
                        useless(&acc, max3(lo, x + s1->p[0].peak, (type ? d : 0) + s2->p[0].peak),
                                j * p->tf + s1->p[s1->n - 1].ms + s2->p[s2->n - 1].ms))
                        continue;
                    uint64_t cut = cut_peak(&acc, j * p->tf + s1->p[s1->n - 1].ms + s2->p[s2->n - 1].ms);
                    if (collect_ck(&c, &pend, &acc, s1, x, s2, type ? d : 0, lo, j * p->tf, -j,
                                   cut == UINT64_MAX ? UINT64_MAX : cut - 1)) goto nomem;
                    if (wmax > 0 && work > wmax) { st = REMAT_ERR_RANGE; goto out; }
                }
                if (pend.n) {
                    qsort(pend.p, pend.n, sizeof(fpt), cmp_fpt);
                    if (merge_all(&c, &tmp, &acc, &pend, 0, 0, 0, INT32_MIN, UINT64_MAX, UINT64_MAX)) goto nomem;
                    front sw = acc; acc = tmp; tmp = sw;
                }
            }
            /* keep an exact-size copy */
            fr[n].p = remat_malloc((acc.n ? acc.n : 1) * sizeof(fpt));
            if (!fr[n].p) goto nomem;
            if (acc.n) memcpy(fr[n].p, acc.p, acc.n * sizeof(fpt));   /* acc.p may be NULL when empty */
            fr[n].n = fr[n].cap = acc.n;
        }
    }
    goto out;
nomem:
    st = remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
out:
    free(acc.p); free(tmp.p); free(pend.p);
    for (int kind = 0; kind < 3; kind++) { free(use[kind]); free(thr[kind]); }
    if (st) fronts_free(p);
    return st;
}

/* The smallest peak of every sub-problem, exactly (in bytes), and a move
 * that reaches it. */
static void run_min_peaks(remat_planner *p)
{
    if (p->het) { run_min_peaks_het(p); return; }
    int L = p->L;
    uint64_t x = p->x, d = p->d;
    for (int type = 0; type < 2; type++) {
        uint64_t *m = type ? p->mf : p->mb;
        int32_t *mv = type ? p->mvf : p->mvb;
        for (int n = type ? 0 : 1; n <= L; n++) {
            uint64_t best = UINT64_MAX;
            int32_t bm = 0;
            if (type == 0 && n == 1) best = x + p->leaf_bpk;
            else if (type == 1 && n == 0) best = p->head_pk;
            else {
                int nk = type && L - n < p->cap ? p->nks : p->nall;    /* offloading: F(n) of the first blocks */
                for (int k = 0; k < nk; k++) {
                    const keepc *kc = &p->ks[k];
                    uint64_t v = max3(x + kc->fpk, kc->so + m[n - 1], x + (type ? d : 0) + kc->bpk);
                    if (v < best) { best = v; bm = k; }
                }
                int jmax = type ? n : n - 1;
                for (int j = 1; j <= jmax; j++) {
                    uint64_t v = max3(x + (j == 1 ? p->ckf1 : p->ckf2), x + m[n - j], (type ? d : 0) + p->mb[j]);
                    if (v < best) { best = v; bm = -j; }
                }
            }
            m[n] = best;
            mv[n] = bm;
        }
    }
}

/* ---- chains whose blocks differ ---------------------------------------------
 * A table read from a file whose blocks have numbers of their own
 * (custom.c: spec.per): the same program with per-block constants, as
 * Rotor's heterogeneous chains.  F(n) still starts at block L - n; B(n)
 * becomes B(a, n), blocks a..a+n-1, a quadratic number of sub-problems,
 * with the moves
 *   ALL(k) at a   max(x_a + Fpk_a(k), so_a(k) + P(rest from a+1), x_a [+ d in F] + Bpk_a(k))
 *   CK(j) at a    max(x_a + CKF(a, j), x_a + P(rest from a+j), [d in F +] P(B(a, j)))
 * CKF(a, j) = max(ckf1_a, fr1_{a+1}, .., fr1_{a+j-1}), times the blocks' own.
 * Block a's constants are read off the schedules of a 1-block table of it
 * alone (its input x_a; d_output and the head the chain's), fr1_a off a
 * 2-block table of blocks a-1 and a: tables registered for the measurement
 * and released, each kind of block measured once.  No offload (a table
 * read from a file has no host link). */

#define HET_MAX_BLOCKS 512
#define HB(p, a, n) ((size_t)(a) * (size_t)((p)->L + 1) + (size_t)(n))

/* registers blocks [a, a+n) (n 1 or 2) of ps, input xin, as a table of their own: its config and profile */
static remat_status het_sub(const remat_table_spec *ps, int a, int n, uint64_t xin, remat_config *c,
                            remat_profile **prof, int *id)
{
    remat_table_spec s = *ps;
    remat_table_spec_block blk[2];
    double fwd[RT_MAXT], bwd[RT_MAXT];
    uint64_t key[2 + 2 * sizeof blk[0] / sizeof(uint64_t)];
    *prof = NULL;
    *id = 0;
    memset(key, 0, sizeof key);
    s.name = "one block";
    s.blocks = n;
    s.input = xin;
    s.expensive = s.cheap = s.output = 0;
    for (int i = 0; i < n; i++) {
        blk[i] = ps->per[a + i];
        if (blk[i].expensive > s.expensive) s.expensive = blk[i].expensive;
        if (blk[i].cheap > s.cheap) s.cheap = blk[i].cheap;
        if (blk[i].output > s.output) s.output = blk[i].output;
    }
    memcpy(key + 2, blk, sizeof blk[0] * (size_t)n);
    key[0] = xin;
    key[1] = (uint64_t)n;
    if (n == 1) {
        s.per = NULL;
        s.block_fwd_ms = blk[0].fwd_ms;
        s.cheap_fwd_ms = blk[0].cheap_fwd_ms;
        s.block_bwd_ms = blk[0].bwd_ms;
    } else {
        s.per = blk;
    }
    remat_status st = remat_table_custom_add(&s, remat_hash_bytes(key, sizeof key) ^ ps->dout, id);
    if (st) return st;
    remat_config_default(c);
    c->n_layer = n;
    c->framework = REMAT_FRAMEWORK_TABLE;
    c->table = *id;
    if (!(*prof = remat_malloc(sizeof **prof))) {
        remat_table_custom_release(*id);
        *id = 0;
        return remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
    }
    remat_table_custom_times(*id, fwd, bwd);
    remat_profile_fill_times(*prof, c, fwd, bwd, s.update_ms, "a table's block");
    return REMAT_OK;
}

/* the keep-sets of block a of ps (input h->x), pruned, into h */
static remat_status het_keepsets(remat_planner *p, const remat_table_spec *ps, int a, uint32_t droppable, hblock *h,
                                 uint64_t *head_pk, double *th, double *te)
{
    remat_config c1;
    remat_profile *pr = NULL;
    keepc *all = remat_malloc(sizeof(keepc) * ((size_t)1 << __builtin_popcount(droppable)));
    int id = 0, na = 0;
    remat_status st = all ? het_sub(ps, a, 1, h->x, &c1, &pr, &id) : remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
    if (st) goto out;
    uint64_t y = ps->per[a].output;
    keepc leaf;
    if ((st = measure_keep_io(p, &c1, pr, 0, &leaf, 1, 0, h->x, y))) goto out;
    h->tf = p->tf;
    h->leaf_bpk = p->leaf_bpk;
    h->leaf_ms = p->leaf_ms;
    h->ckf1 = p->ckf1;
    *head_pk = p->head_pk;
    *th = p->th;
    *te = p->te;
    for (uint32_t sub = droppable;; sub = (sub - 1) & droppable) {     /* as remat_planner_create */
        uint32_t keep = DROPPABLE_ALL(p) & ~sub;
        if (keep == 0) all[na++] = leaf;
        else if ((st = measure_keep_io(p, &c1, pr, keep, &all[na++], 0, 0, h->x, y))) goto out;
        if (!sub) break;
    }
    if (!(h->ks = remat_malloc(sizeof(keepc) * (size_t)na))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory planning"); goto out; }
    h->nks = 0;
    if (ps->per[a].pinned) {          /* a junction of chains keeps all: the last keep-set, which drops nothing */
        h->ks[h->nks++] = all[na - 1];
        na = 0;
    }
    for (int i = 0; i < na; i++) {
        int dom = 0;
        for (int j = 0; j < na && !dom; j++)
            if (j != i && dominates(&all[j], &all[i])) dom = !dominates(&all[i], &all[j]) || j < i;
        if (!dom) h->ks[h->nks++] = all[i];
    }
out:
    free(all);
    free(pr);
    remat_table_custom_release(id);
    return st;
}

/* every block's constants (p->L, p->tb set) */
static remat_status het_measure(remat_planner *p, uint32_t droppable)
{
    const remat_table_spec *ps = remat_table_custom_spec(p->cfg.table);
    int L = p->L;
    remat_status st = REMAT_OK;
    if (L > HET_MAX_BLOCKS)
        return remat_fail(REMAT_ERR_RANGE, "planner: a chain whose blocks differ has at most %d blocks (this one %d)",
                          HET_MAX_BLOCKS, L);
    if (!(p->hb = remat_calloc((size_t)L, sizeof *p->hb))) return remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
    p->het = 1;
    p->x = ps->input;
    p->d = ps->dout;
    uint64_t x = ps->input, head_pk = 0;
    double th = 0, te = 0;
    for (int a = 0; a < L; a++) {
        hblock *h = &p->hb[a];
        int b = 0;
        h->x = x;
        h->pinned = ps->per[a].pinned;
        x = ps->per[a].output;
        while (b < a && !(p->hb[b].x == h->x && !memcmp(&ps->per[b], &ps->per[a], sizeof ps->per[a]))) b++;
        if (b < a) {     /* a block like an earlier one: its constants */
            *h = p->hb[b];
            if (!(h->ks = remat_malloc(sizeof(keepc) * (size_t)h->nks))) return remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
            memcpy(h->ks, p->hb[b].ks, sizeof(keepc) * (size_t)h->nks);
            continue;
        }
        if ((st = het_keepsets(p, ps, a, droppable, h, &head_pk, &th, &te))) return st;
        if (a == 0) p->te = te;
        if (ps->per[a].output == ps->per[L - 1].output) { p->head_pk = head_pk; p->th = th; }   /* the head's input */
    }
    for (int a = 1; a < L; a++) {
        int b = 1;
        while (b < a && !(p->hb[b - 1].x == p->hb[a - 1].x &&
                          !memcmp(&ps->per[b - 1], &ps->per[a - 1], 2 * sizeof ps->per[a]))) b++;
        if (b < a) { p->hb[a].fr1 = p->hb[b].fr1; continue; }
        if (ps->per[a - 1].pinned || ps->per[a].pinned) continue;   /* no segment holds a junction */
        remat_config c2;
        remat_profile *pr = NULL;
        int id = 0;
        if ((st = het_sub(ps, a - 1, 2, p->hb[a - 1].x, &c2, &pr, &id))) return st;
        st = measure_fr1(p, &c2, pr, p->hb[a - 1].x, p->hb[a].x, &p->hb[a].fr1);
        free(pr);
        remat_table_custom_release(id);
        if (st) return st;
    }
    return REMAT_OK;
}

/* the front of sub-problem (type, a, n) into acc (tmp, pend: scratch) */
static int het_solve(remat_planner *p, const fctx *c, int type, int a, int n, front *acc, front *tmp, front *pend,
                     double wmax)
{
    acc->n = 0;
    if (type == 0 && n == 1) return front_push(c, acc, p->hb[a].x + p->hb[a].leaf_bpk, p->hb[a].leaf_ms, 0);
    if (type == 1 && n == 0) return front_push(c, acc, p->head_pk, p->th, 0);
    const hblock *h = &p->hb[a];
    uint64_t x = h->x, dd = type ? p->d : 0;
    const front *sub = type ? &p->ff[n - 1] : &p->fbh[HB(p, a + 1, n - 1)];
    for (int k = 0; k < h->nks; k++) {
        const keepc *kc = &h->ks[k];
        uint64_t lo = max3(x + kc->fpk, x + dd + kc->bpk, 0);
        double add = h->tf + kc->bwd_ms;
        if (!sub->n || useless(acc, max3(lo, kc->so + sub->p[0].peak, 0), sub->p[sub->n - 1].ms + add)) continue;
        uint64_t cut = cut_peak(acc, sub->p[sub->n - 1].ms + add);
        if (merge_all(c, tmp, acc, sub, lo, kc->so, add, k, cut == UINT64_MAX ? cut : cut - 1, cut)) return -1;
        front sw = *acc; *acc = *tmp; *tmp = sw;
    }
    int jmax = type ? n : n - 1;
    uint64_t ckf = h->ckf1;
    double tsum = 0;
    pend->n = 0;
    for (int j = 1; j <= jmax && !p->hb[a + j - 1].pinned; j++) {
        tsum += p->hb[a + j - 1].tf;
        if (j >= 2 && p->hb[a + j - 1].fr1 > ckf) ckf = p->hb[a + j - 1].fr1;
        const front *s1 = type ? &p->ff[n - j] : &p->fbh[HB(p, a + j, n - j)], *s2 = &p->fbh[HB(p, a, j)];
        uint64_t lo = x + ckf;
        if (!s1->n || !s2->n ||
            useless(acc, max3(lo, x + s1->p[0].peak, dd + s2->p[0].peak), tsum + s1->p[s1->n - 1].ms + s2->p[s2->n - 1].ms))
            continue;
        uint64_t cut = cut_peak(acc, tsum + s1->p[s1->n - 1].ms + s2->p[s2->n - 1].ms);
        if (collect_ck(c, pend, acc, s1, x, s2, dd, lo, tsum, -j, cut == UINT64_MAX ? UINT64_MAX : cut - 1)) return -1;
        if (wmax > 0 && *c->ops > wmax) return 1;
    }
    if (pend->n) {
        qsort(pend->p, pend->n, sizeof(fpt), cmp_fpt);
        if (merge_all(c, tmp, acc, pend, 0, 0, 0, INT32_MIN, UINT64_MAX, UINT64_MAX)) return -1;
        front sw = *acc; *acc = *tmp; *tmp = sw;
    }
    return 0;
}

/* an exact-size copy of acc into f; -1 when out of memory */
static int front_keep(front *f, const front *acc)
{
    f->p = remat_malloc((acc->n ? acc->n : 1) * sizeof(fpt));
    if (!f->p) return -1;
    if (acc->n) memcpy(f->p, acc->p, acc->n * sizeof(fpt));
    f->n = f->cap = acc->n;
    return 0;
}

static remat_status run_fronts_het(remat_planner *p, uint64_t u, uint64_t limit, double wmax)
{
    int L = p->L, r = 0;
    front acc = { 0 }, tmp = { 0 }, pend = { 0 };
    double work = 0;
    fctx c = { u, limit, &work };
    fronts_free(p);
    p->u = u;
    p->ff = remat_calloc((size_t)L + 1, sizeof(front));
    p->fbh = remat_calloc((size_t)(L + 1) * (size_t)(L + 1), sizeof(front));
    if (!p->ff || !p->fbh) r = -1;
    for (int n = 1; n <= L && !r; n++)
        for (int a = 0; a + n <= L && !r; a++)
            if (!(r = het_solve(p, &c, 0, a, n, &acc, &tmp, &pend, wmax))) r = front_keep(&p->fbh[HB(p, a, n)], &acc);
    for (int n = 0; n <= L && !r; n++)
        if (!(r = het_solve(p, &c, 1, L - n, n, &acc, &tmp, &pend, wmax))) r = front_keep(&p->ff[n], &acc);
    free(acc.p); free(tmp.p); free(pend.p);
    if (r) fronts_free(p);
    return r < 0 ? remat_fail(REMAT_ERR_NOMEM, "out of memory planning") : r ? REMAT_ERR_RANGE : REMAT_OK;
}

/* the least peak of sub-problem (type, a, n) and its move */
static void het_min(remat_planner *p, int type, int a, int n, uint64_t *best, int32_t *bm)
{
    *bm = 0;
    if (type == 0 && n == 1) { *best = p->hb[a].x + p->hb[a].leaf_bpk; return; }
    if (type == 1 && n == 0) { *best = p->head_pk; return; }
    const hblock *h = &p->hb[a];
    uint64_t dd = type ? p->d : 0, sub = type ? p->mf[n - 1] : p->mbh[HB(p, a + 1, n - 1)], ckf = h->ckf1;
    *best = UINT64_MAX;
    for (int k = 0; k < h->nks; k++) {
        const keepc *kc = &h->ks[k];
        uint64_t v = max3(h->x + kc->fpk, kc->so + sub, h->x + dd + kc->bpk);
        if (v < *best) { *best = v; *bm = k; }
    }
    for (int j = 1; j <= (type ? n : n - 1) && !p->hb[a + j - 1].pinned; j++) {
        if (j >= 2 && p->hb[a + j - 1].fr1 > ckf) ckf = p->hb[a + j - 1].fr1;
        uint64_t rest = type ? p->mf[n - j] : p->mbh[HB(p, a + j, n - j)];
        uint64_t v = max3(h->x + ckf, h->x + rest, dd + p->mbh[HB(p, a, j)]);
        if (v < *best) { *best = v; *bm = -j; }
    }
}

static void run_min_peaks_het(remat_planner *p)
{
    int L = p->L;
    for (int n = 1; n <= L; n++)
        for (int a = 0; a + n <= L; a++) het_min(p, 0, a, n, &p->mbh[HB(p, a, n)], &p->mvbh[HB(p, a, n)]);
    for (int n = 0; n <= L; n++) het_min(p, 1, L - n, n, &p->mf[n], &p->mvf[n]);
}

void remat_planner_free(remat_planner *p)
{
    if (!p) return;
    fronts_free(p);
    free(p->mb); free(p->mf); free(p->mvb); free(p->mvf); free(p->ks);
    for (int a = 0; p->hb && a < p->L; a++) free(p->hb[a].ks);
    free(p->hb); free(p->mbh); free(p->mvbh);
    free(p);
}

remat_status remat_planner_create(const remat_config *cfg, const remat_profile *prof, uint32_t droppable,
                                  remat_planner **out)
{
    remat_status st;
    remat_planner *p = NULL;
    keepc *all = NULL;
    remat_profile tmp;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_planner_create: out is NULL");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    if (!(prof = remat_profile_resolve(cfg, prof, &tmp))) return REMAT_ERR_INVALID;
    p = remat_calloc(1, sizeof *p);
    if (!p) return remat_fail(REMAT_ERR_NOMEM, "out of memory planning");
    p->cfg = *cfg;
    p->tb = remat_table_of(cfg);
    droppable &= DROPPABLE_ALL(p);
    for (int t = 0; t < p->tb->nblock; t++)     /* empty under cfg (dropout masks without dropout): always kept */
        if (!remat_tensor_bytes(cfg, t)) droppable &= ~(1u << t);
    int ndrop = __builtin_popcount(droppable);
    p->L = cfg->n_layer;
    p->x = remat_tensor_bytes(cfg, p->tb->nblock - 1);
    p->d = remat_tensor_bytes(cfg, p->tb->d_res);
    const remat_table_spec *ts = cfg->framework == REMAT_FRAMEWORK_TABLE ? remat_table_custom_spec(cfg->table) : NULL;
    if (ts && ts->per) {          /* a chain whose blocks differ */
        size_t nb = (size_t)(p->L + 1) * (size_t)(p->L + 1);
        p->cap = 0;
        if ((st = het_measure(p, droppable))) goto out;
        p->mf = remat_calloc((size_t)p->L + 1, sizeof(uint64_t));
        p->mvf = remat_calloc((size_t)p->L + 1, sizeof(int32_t));
        p->mbh = remat_calloc(nb, sizeof(uint64_t));
        p->mvbh = remat_calloc(nb, sizeof(int32_t));
        if (!p->mf || !p->mvf || !p->mbh || !p->mvbh) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory planning"); goto out; }
        run_min_peaks_het(p);
        *out = p;
        return REMAT_OK;
    }
    remat_config c1 = *cfg, c2 = *cfg;
    c1.n_layer = 1;
    c2.n_layer = 2;
    p->mb = remat_calloc((size_t)p->L + 1, sizeof(uint64_t));
    p->mf = remat_calloc((size_t)p->L + 1, sizeof(uint64_t));
    p->mvb = remat_calloc((size_t)p->L + 1, sizeof(int32_t));
    p->mvf = remat_calloc((size_t)p->L + 1, sizeof(int32_t));
    all = remat_malloc(sizeof(keepc) * ((size_t)1 << ndrop));
    if (!p->mb || !p->mf || !p->mvb || !p->mvf || !all) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory planning"); goto out; }

    /* the block, head and leaf constants come with "keep only res3"; then
     * every keep-set that drops a subset of the droppable tensors */
    keepc leaf;
    if ((st = measure_keep(p, &c1, prof, 0, &leaf, 1, 0))) goto out;
    int na = 0;
    for (uint32_t sub = droppable;; sub = (sub - 1) & droppable) {
        uint32_t keep = DROPPABLE_ALL(p) & ~sub;
        if (keep == 0) all[na++] = leaf;
        else if ((st = measure_keep(p, &c1, prof, keep, &all[na++], 0, 0))) goto out;
        if (!sub) break;
    }
    if (p->L >= 2 && (st = measure_ck(p, &c2, prof))) goto out;
    if (p->L < 2) p->ckf2 = p->ckf1;

    /* Pareto-prune the keep-sets (ties: keep the first); then, with a host
     * link, the same keep-sets offloaded, pruned among themselves */
    p->ks = remat_malloc(sizeof(keepc) * (size_t)na * 2);
    if (!p->ks) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory planning"); goto out; }
    prune_into(p, all, na);
    p->nall = p->nks;
    if (prof->host_bps > 0) {
        for (int i = 0; i < na; i++)
            if ((st = measure_keep(p, &c1, prof, all[i].mask, &all[i], 0, 1))) goto out;
        prune_into(p, all, na);
    }
    p->cap = p->L;
    run_min_peaks(p);
    *out = p;
    p = NULL;
out:
    free(all);
    remat_planner_free(p);
    return st;
}

remat_status remat_planner_build_fronts(remat_planner *p, uint64_t limit)
{
    remat_status st = REMAT_OK;
    /* Exact fronts first; when they would take too long, thinned ones (see
     * the top of the file).  The range of useful peaks ends at the budget
     * or at the peak of keeping everything. */
    remat_schedule *s = NULL;
    remat_sim sim;
    if ((st = remat_schedule_create(&p->cfg, "none", &s))) return st;
    remat_schedule_simulate(s, &sim);
    remat_schedule_free(s);
    uint64_t range = limit && limit < sim.peak_bytes ? limit : sim.peak_bytes;
    /* Rungs: exact; then buckets of max(x/16, range/4096) bytes (the blow-up
     * comes from the LayerNorm statistics, x/(C/2) each, whose keep/drop
     * variants differ by a few KiB and microseconds); then buckets wide
     * enough that the work is bounded whatever the fronts look like: a front
     * holds at most 2 range/u points, and each of the L sizes of the two
     * sub-problems merges at most (keep-sets + L) candidates into it. */
    uint64_t u1 = (p->x >> 4) > (range >> 12) ? p->x >> 4 : range >> 12;
    double moves = (double)p->L * ((double)p->nks + (double)p->L);
    uint64_t u2 = (uint64_t)ceil(2.0 * (double)range * moves / 4e7);
    if (u2 < 2 * u1) u2 = 2 * u1;
    struct { uint64_t u; double wmax; } rung[3] = { { 1, 5e6 }, { u1, 1.5e7 }, { u2, 0 } };
    for (int i = 0; i < 3; i++) {
        uint64_t u = rung[i].u < 1 ? 1 : rung[i].u;
        if (i && u <= p->u) continue;
        st = run_fronts(p, u, limit ? limit : UINT64_MAX, i < 2 ? rung[i].wmax : 0);
        if (st != REMAT_ERR_RANGE) break;
    }
    return st;
}

static uint64_t top_peak(const remat_planner *p, uint64_t peak)
{
    /* emb's forward (x) and emb's backward (d_res) surround the chain */
    return max3(peak, p->x, p->d);
}

uint64_t remat_planner_min_peak(const remat_planner *p) { return top_peak(p, p->mf[p->L]); }

uint64_t remat_planner_offload_host(const remat_planner *p)
{
    uint64_t most = 0;
    for (int k = p->nall; k < p->nks; k++)
        if (p->ks[k].host > most) most = p->ks[k].host;
    return most;
}

void remat_planner_set_offload_blocks(remat_planner *p, int n)
{
    p->cap = n < 0 ? 0 : n > p->L ? p->L : n;
    fronts_free(p);
    run_min_peaks(p);
}

void remat_planner_set_host(remat_planner *p, uint64_t host_bytes)
{
    /* every block offloaded puts at most `most` bytes on the host */
    uint64_t most = remat_planner_offload_host(p);
    remat_planner_set_offload_blocks(p, !most || host_bytes / most >= (uint64_t)p->L ? p->L : (int)(host_bytes / most));
}

int remat_planner_offload_sets(const remat_planner *p) { return p->nks - p->nall; }
int remat_planner_keepsets(const remat_planner *p) { return p->nks; }
size_t remat_planner_front_size(const remat_planner *p) { return p->ff ? p->ff[p->L].n : 0; }
uint64_t remat_planner_unit(const remat_planner *p) { return p->ff ? p->u : 1; }
int remat_planner_exact(const remat_planner *p) { return !p->ff || p->u == 1; }

void remat_planner_front_point(const remat_planner *p, size_t i, uint64_t *peak, double *ms)
{
    const fpt *f = &p->ff[p->L].p[i];
    if (peak) *peak = top_peak(p, f->peak);
    if (ms) *ms = f->ms + p->te;
}

/* ---- plans as strings ------------------------------------------------------- */

typedef struct sbuf { char *s; size_t n, len; int over; } sbuf;

static void put(sbuf *b, const char *fmt, unsigned v)
{
    char t[24];
    int k = snprintf(t, sizeof t, fmt, v);
    if (b->len + (size_t)k + 2 > b->n) { b->over = 1; return; }
    if (b->len > 5) b->s[b->len++] = '.';
    memcpy(b->s + b->len, t, (size_t)k + 1);
    b->len += (size_t)k;
}

/* tokens of the best plan for sub-problem (type, a, n) of a chain whose blocks differ */
static void emit_plan_het(const remat_planner *p, int type, int a, int n, uint64_t budget, sbuf *b)
{
    if (b->over || (type == 1 && n == 0)) return;
    if (type == 0 && n == 1) { put(b, "A%x", 0); return; }
    const front *f = type ? &p->ff[n] : &p->fbh[HB(p, a, n)];
    long i = front_best(f, budget);
    if (i < 0) { b->over = 2; return; }
    int32_t mv = f->p[i].move;
    if (mv >= 0) {
        const keepc *kc = &p->hb[a].ks[mv];
        put(b, "A%x", kc->mask & ~RES3_BIT(p));
        emit_plan_het(p, type, a + 1, n - 1, budget - kc->so, b);
    } else {
        int j = -mv;
        put(b, "C%u", (unsigned)j);
        emit_plan_het(p, type, a + j, n - j, budget - p->hb[a].x, b);
        emit_plan_het(p, 0, a, j, budget - (type ? p->d : 0), b);
    }
}

static void emit_min_het(const remat_planner *p, int type, int a, int n, sbuf *b)
{
    if (b->over || (type == 1 && n == 0)) return;
    if (type == 0 && n == 1) { put(b, "A%x", 0); return; }
    int32_t mv = type ? p->mvf[n] : p->mvbh[HB(p, a, n)];
    if (mv >= 0) {
        put(b, "A%x", p->hb[a].ks[mv].mask & ~RES3_BIT(p));
        emit_min_het(p, type, a + 1, n - 1, b);
    } else {
        put(b, "C%u", (unsigned)-mv);
        emit_min_het(p, type, a - mv, n + mv, b);
        emit_min_het(p, 0, a, -mv, b);
    }
}

/* tokens of the best plan for sub-problem (type, n) within budget, preorder */
static void emit_plan(const remat_planner *p, int type, int n, uint64_t budget, sbuf *b)
{
    if (b->over) return;
    if (type == 1 && n == 0) return;                  /* the head takes no token */
    if (type == 0 && n == 1) { put(b, "A%x", 0); return; }
    const front *f = type ? &p->ff[n] : &p->fb[n];
    long i = front_best(f, budget);
    if (i < 0) { b->over = 2; return; }               /* cannot happen: sub-budgets follow the point's peak */
    int32_t mv = f->p[i].move;
    if (mv >= 0) {
        const keepc *kc = &p->ks[mv];
        put(b, kc->off ? "O%x" : "A%x", kc->mask & ~RES3_BIT(p));
        emit_plan(p, type, n - 1, budget - kc->so, b);
    } else {
        int j = -mv;
        put(b, "C%u", (unsigned)j);
        emit_plan(p, type, n - j, budget - p->x, b);
        emit_plan(p, 0, j, budget - (type ? p->d : 0), b);
    }
}

/* tokens of the minimum-peak plan */
static void emit_min(const remat_planner *p, int type, int n, sbuf *b)
{
    if (b->over || (type == 1 && n == 0)) return;
    if (type == 0 && n == 1) { put(b, "A%x", 0); return; }
    int32_t mv = (type ? p->mvf : p->mvb)[n];
    if (mv >= 0) {
        put(b, p->ks[mv].off ? "O%x" : "A%x", p->ks[mv].mask & ~RES3_BIT(p));
        emit_min(p, type, n - 1, b);
    } else {
        put(b, "C%u", (unsigned)-mv);
        emit_min(p, type, n + mv, b);
        emit_min(p, 0, -mv, b);
    }
}

remat_status remat_planner_best(const remat_planner *p, uint64_t act_budget, char *policy, size_t n,
                                 uint64_t *peak, double *ms)
{
    if (!p || !p->ff || !policy) return remat_fail(REMAT_ERR_INVALID, "remat_planner_best: no fronts");
    if (n < 8) return remat_fail(REMAT_ERR_RANGE, "plan buffer too small");
    uint64_t minp = remat_planner_min_peak(p);
    if (act_budget < minp) return remat_fail(REMAT_ERR_BUDGET, "nothing fits");
    const front *f = &p->ff[p->L];
    long i = front_best(f, act_budget);
    sbuf b = { policy, n, 0, 0 };
    memcpy(policy, "plan:", 6);
    b.len = 5;
    if (p->het && i >= 0) emit_plan_het(p, 1, 0, p->L, f->p[i].peak, &b);
    else if (p->het) emit_min_het(p, 1, 0, p->L, &b);
    else if (i >= 0) emit_plan(p, 1, p->L, f->p[i].peak, &b);
    else emit_min(p, 1, p->L, &b);   /* coarse fronts start above the exact minimum */
    if (b.over == 1) return remat_fail(REMAT_ERR_RANGE, "the plan for %d blocks is longer than %zu bytes", p->L, n);
    if (b.over) return remat_fail(REMAT_ERR_STATE, "planner: internal error reconstructing a plan");
    if (i >= 0) {
        if (peak) *peak = top_peak(p, f->p[i].peak);
        if (ms) *ms = f->p[i].ms + p->te;
    } else {
        if (peak) *peak = minp;
        if (ms) *ms = -1;    /* not tracked: the caller evaluates the plan */
    }
    return REMAT_OK;
}


/* ---- predicting a given plan (tests) ------------------------------------- */

typedef struct pred { const char *cur; remat_status st; const remat_profile *prof; remat_config c1; } pred;

static int next_tok(pred *r, char *kind, unsigned *v)
{
    const char *c = r->cur;
    if (*c != 'A' && *c != 'C' && *c != 'O') return 0;
    char *end;
    unsigned long x = strtoul(c + 1, &end, *c == 'C' ? 10 : 16);
    if (end == c + 1 || (*end && *end != '.')) return 0;
    *kind = *c;
    *v = (unsigned)x;
    r->cur = *end ? end + 1 : end;
    return 1;
}

static void predict_rec(remat_planner *p, pred *r, int type, int n, uint64_t *peak, double *ms)
{
    char k;
    unsigned v;
    *peak = 0;
    *ms = 0;
    if (r->st) return;
    if (type == 1 && n == 0) { *peak = p->head_pk; *ms = p->th; return; }
    if (!next_tok(r, &k, &v)) { r->st = remat_fail(REMAT_ERR_POLICY, "predict: bad or missing token"); return; }
    if (type == 0 && n == 1) {
        if (k != 'A') r->st = remat_fail(REMAT_ERR_POLICY, "predict: a single block takes an A token");
        *peak = p->x + p->leaf_bpk;
        *ms = p->leaf_ms;
        return;
    }
    uint64_t d = type ? p->d : 0, sp, sp2;
    double sm, sm2;
    if (k == 'A' || k == 'O') {
        keepc kc;
        if (k == 'O' && type == 0) { r->st = remat_fail(REMAT_ERR_POLICY, "predict: an O token in a recomputation pass"); return; }
        if ((r->st = measure_keep(p, &r->c1, r->prof, v & remat_keep_all(p->tb), &kc, 0, k == 'O'))) return;
        predict_rec(p, r, type, n - 1, &sp, &sm);
        *peak = max3(p->x + kc.fpk, kc.so + sp, p->x + d + kc.bpk);
        *ms = p->tf + kc.bwd_ms + sm;
    } else {
        int j = (int)v;
        if (j < 1 || j > (type ? n : n - 1)) { r->st = remat_fail(REMAT_ERR_POLICY, "predict: split out of range"); return; }
        predict_rec(p, r, type, n - j, &sp, &sm);
        predict_rec(p, r, 0, j, &sp2, &sm2);
        *peak = max3(p->x + (j == 1 ? p->ckf1 : p->ckf2), p->x + sp, d + sp2);
        *ms = j * p->tf + sm + sm2;
    }
}

remat_status remat_planner_predict(remat_planner *p, const remat_profile *prof, const char *plan, uint64_t *peak,
                                   double *ms)
{
    remat_profile tmp;
    pred r;
    memset(&r, 0, sizeof r);
    if (strncmp(plan, "plan:", 5)) return remat_fail(REMAT_ERR_POLICY, "predict: expected plan:TOKENS");
    if (p->het) return remat_fail(REMAT_ERR_INVALID, "predict: not for a chain whose blocks differ (simulate the plan)");
    if (!(r.prof = remat_profile_resolve(&p->cfg, prof, &tmp))) return REMAT_ERR_INVALID;
    r.cur = plan + 5;
    r.c1 = p->cfg;
    r.c1.n_layer = 1;
    uint64_t pk;
    double m;
    predict_rec(p, &r, 1, p->L, &pk, &m);
    if (r.st) return r.st;
    if (*r.cur) return remat_fail(REMAT_ERR_POLICY, "predict: unused tokens");
    *peak = top_peak(p, pk);
    *ms = m + p->te;
    return REMAT_OK;
}

remat_status remat_planner_build_fronts_unit(remat_planner *p, uint64_t limit, uint64_t unit)
{
    return run_fronts(p, unit ? unit : 1, limit ? limit : UINT64_MAX, 0);
}

/* ---- the public planner API ------------------------------------------------- */

void remat_plan_row_clear(remat_plan_row *r)
{
    if (!r) return;
    free(r->policy);
    r->policy = NULL;
}

void remat_plan_rows_free(remat_plan_row *rows, size_t n)
{
    if (!rows) return;
    for (size_t i = 0; i < n; i++) free(rows[i].policy);
    free(rows);
}

uint64_t remat_plan_static_bytes(const remat_config *cfg)
{
    const remat_table *tb = remat_table_of(cfg);
    if (tb && tb->has_static) return tb->static_bytes;   /* a table read from a file states it */
    /* remat_model_create: params, grads, two AdamW moments (fp32 each),
     * under bf16 the bf16 copy of the weights (2 bytes each); workspace:
     * inputs and targets (int) and per-position losses (float) */
    uint64_t np = remat_config_num_params(cfg);
    uint64_t N = (uint64_t)cfg->batch * (uint64_t)cfg->seq;
    return (cfg->dtype == REMAT_DTYPE_BF16 ? 18 : 16) * np + N * (2 * sizeof(int) + sizeof(float));
}

const char *remat_fmt_bytes(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ULL << 30)) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ULL << 20)) snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
    return buf;
}

/* evaluate with an already resolved profile; none_ms < 0: compute it */
static remat_status evaluate(const remat_config *cfg, const remat_profile *prof, const char *policy, uint64_t budget,
                             int act_only, double none_ms, remat_plan_row *out)
{
    remat_schedule *s = NULL;
    remat_status st;
    remat_sim sim;
    memset(out, 0, sizeof *out);
    if (none_ms < 0) {
        if ((st = remat_schedule_create(cfg, "none", &s))) return st;
        none_ms = remat_cost_schedule_ms(prof, s, NULL);
        remat_schedule_free(s);
        s = NULL;
        if (none_ms < 0) return REMAT_ERR_NOMEM;
    }
    if ((st = remat_schedule_create(cfg, policy, &s))) return st;
    if ((st = remat_profile_check_offload(prof, s)) || (st = remat_schedule_simulate(s, &sim))) goto out;
    double rec;
    out->step_ms_pred = remat_cost_schedule_ms(prof, s, &rec);
    if (out->step_ms_pred < 0) { st = REMAT_ERR_NOMEM; goto out; }
    if (!(out->policy = remat_strdup(remat_schedule_policy(s)))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    out->overhead_pct = none_ms > 0 ? 100.0 * rec / none_ms : 0;
    out->peak_bytes = sim.peak_bytes;
    out->stored_bytes = sim.stored_bytes;
    out->workset_bytes = sim.workset_bytes;
    out->total_bytes = sim.peak_bytes + remat_plan_static_bytes(cfg);
    out->fits = budget == 0 || (act_only ? out->peak_bytes : out->total_bytes) <= budget;
out:
    remat_schedule_free(s);
    return st;
}

remat_status remat_plan_evaluate(const remat_config *cfg, const remat_profile *prof, const char *policy,
                                 uint64_t budget, int activations_only, remat_plan_row *out)
{
    remat_profile tmp;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_plan_evaluate: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_config_check(cfg))) return st;
    if (!(prof = remat_profile_resolve(cfg, prof, &tmp))) return REMAT_ERR_INVALID;
    return evaluate(cfg, prof, policy, budget, activations_only, -1, out);
}

/* the figures of the plan at act_budget, checked against the simulator */
static remat_status plan_row(const remat_planner *pl, const remat_config *cfg, const remat_profile *prof,
                             uint64_t act_budget, uint64_t budget, int act_only, double none_ms, remat_plan_row *out)
{
    uint64_t peak;
    double ms;
    char *pol = remat_malloc(REMAT_POLICY_MAX);
    if (!pol) return remat_fail(REMAT_ERR_NOMEM, "out of memory");
    remat_status st = remat_planner_best(pl, act_budget, pol, REMAT_POLICY_MAX, &peak, &ms);
    if (!st) st = evaluate(cfg, prof, pol, budget, act_only, none_ms, out);
    if (st) { free(pol); return st; }
    /* Exact fronts: the program's peak is the simulator's, to the byte, and
     * its time the cost model's own sum.  Thinned fronts: the plan is rebuilt
     * from the sub-problems' fronts at the budgets the recorded point leaves
     * them, where a faster sub-plan than the one recorded may fit (it was
     * thinned out of the parent's bucket), so the plan can only be as good or
     * better: no higher than the point's peak, no slower. */
    double tol = 1e-9 * (ms > 1 ? ms : 1);
    int ok = remat_planner_exact(pl) ? out->peak_bytes == peak && (ms < 0 || fabs(out->step_ms_pred - ms) <= tol)
                                     : out->peak_bytes <= peak && (ms < 0 || out->step_ms_pred <= ms + tol);
    if (!ok) {
        st = remat_fail(REMAT_ERR_STATE, "planner: internal error: predicted peak %llu B and %.6f ms, but the "
                        "simulator gives %llu B and the cost model %.6f ms for %.200s; please report",
                        (unsigned long long)peak, ms, (unsigned long long)out->peak_bytes, out->step_ms_pred, pol);
        remat_plan_row_clear(out);
    }
    free(pol);
    return st;
}

/* the predicted time of `none`: the reference of overhead_pct */
static remat_status none_time(const remat_config *cfg, const remat_profile *prof, double *ms)
{
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_create(cfg, "none", &s);
    if (st) return st;
    *ms = remat_cost_schedule_ms(prof, s, NULL);
    remat_schedule_free(s);
    return *ms < 0 ? REMAT_ERR_NOMEM : REMAT_OK;
}

remat_status remat_plan_optimal(const remat_config *cfg, const remat_profile *prof, uint64_t budget,
                                int activations_only, remat_plan_row *out)
{
    remat_profile tmp;
    remat_planner *pl = NULL;
    remat_status st;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_plan_optimal: out is NULL");
    memset(out, 0, sizeof *out);
    if ((st = remat_config_check(cfg))) return st;
    if (!(prof = remat_profile_resolve(cfg, prof, &tmp))) return REMAT_ERR_INVALID;
    if ((st = remat_planner_create(cfg, prof, UINT32_MAX, &pl))) return st;
    uint64_t fixed = remat_plan_static_bytes(cfg), minp = remat_planner_min_peak(pl);
    uint64_t act = UINT64_MAX;
    if (budget) act = activations_only ? budget : (budget > fixed ? budget - fixed : 0);
    if (act < minp) {
        char a[32], b[32], c[32], e[32];
        if (activations_only)
            st = remat_fail(REMAT_ERR_BUDGET, "minimum activations %s (the smallest peak of any schedule); "
                            "activation budget %s is below it", remat_fmt_bytes(minp, a, sizeof a),
                            remat_fmt_bytes(budget, b, sizeof b));
        else
            st = remat_fail(REMAT_ERR_BUDGET, "parameters+optimizer %s; minimum activations %s; budget %s is "
                            "below the minimum %s (%s dominates)", remat_fmt_bytes(fixed, a, sizeof a),
                            remat_fmt_bytes(minp, b, sizeof b), remat_fmt_bytes(budget, c, sizeof c),
                            remat_fmt_bytes(fixed + minp, e, sizeof e),
                            fixed >= minp ? "parameters+gradients+AdamW state" : "activations");
        goto out;
    }
    double none_ms;
    if ((st = remat_planner_build_fronts(pl, act == UINT64_MAX ? 0 : act)) || (st = none_time(cfg, prof, &none_ms)))
        goto out;
    st = plan_row(pl, cfg, prof, act, budget, activations_only, none_ms, out);
out:
    remat_planner_free(pl);
    return st;
}

remat_status remat_plan_min_peak(const remat_config *cfg, uint64_t *peak)
{
    remat_planner *pl = NULL;
    if (!peak) return remat_fail(REMAT_ERR_INVALID, "remat_plan_min_peak: peak is NULL");
    *peak = 0;
    remat_status st = remat_planner_create(cfg, NULL, UINT32_MAX, &pl);
    if (st) return st;
    *peak = remat_planner_min_peak(pl);
    remat_planner_free(pl);
    return REMAT_OK;
}

static int cmp_row(const void *a, const void *b)
{
    const remat_plan_row *x = a, *y = b;
    if (x->peak_bytes != y->peak_bytes) return x->peak_bytes < y->peak_bytes ? -1 : 1;
    return (x->step_ms_pred > y->step_ms_pred) - (x->step_ms_pred < y->step_ms_pred);
}

remat_status remat_plan_pareto(const remat_config *cfg, const remat_profile *prof, remat_plan_row **rows, size_t *n)
{
    remat_profile tmp;
    remat_planner *pl = NULL;
    remat_plan_row *r = NULL;
    remat_status st;
    if (!rows || !n) return remat_fail(REMAT_ERR_INVALID, "remat_plan_pareto: NULL argument");
    *rows = NULL;
    *n = 0;
    if ((st = remat_config_check(cfg))) return st;
    if (!(prof = remat_profile_resolve(cfg, prof, &tmp))) return REMAT_ERR_INVALID;
    if ((st = remat_planner_create(cfg, prof, UINT32_MAX, &pl))) return st;
    size_t m = 0;
    if ((st = remat_planner_build_fronts(pl, 0))) goto out;
    m = remat_planner_front_size(pl);
    double none_ms;
    if ((st = none_time(cfg, prof, &none_ms))) goto out;
    r = remat_calloc(m ? m : 1, sizeof *r);
    if (!r) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    for (size_t i = 0; i < m; i++) {
        uint64_t pk;
        remat_planner_front_point(pl, i, &pk, NULL);
        if ((st = plan_row(pl, cfg, prof, pk, 0, 1, none_ms, &r[i]))) goto out;
    }
    /* thinned fronts rebuild plans at least as good as their points, which
     * may then overtake one another: keep the front of what was rebuilt */
    qsort(r, m, sizeof *r, cmp_row);
    size_t k = 0;
    for (size_t i = 0; i < m; i++)
        if (!k || (r[i].peak_bytes > r[k - 1].peak_bytes && r[i].step_ms_pred < r[k - 1].step_ms_pred)) {
            if (k != i) { r[k] = r[i]; r[i].policy = NULL; }
            k++;
        } else {
            remat_plan_row_clear(&r[i]);
        }
    *rows = r;
    *n = k;
    r = NULL;
out:
    remat_plan_rows_free(r, m);
    remat_planner_free(pl);
    return st;
}

/* does `policy` (NULL: the best plan) fit at this shape?  *fits 1 or 0 */
static remat_status fits_at(const remat_config *cfg, const char *policy, uint64_t budget, int act_only, int *fits)
{
    remat_status st;
    *fits = 0;
    if (remat_config_check(cfg)) return REMAT_OK;       /* sizes out of range: does not fit */
    uint64_t fixed = remat_plan_static_bytes(cfg), peak;
    if (!act_only && fixed > budget) return REMAT_OK;
    uint64_t room = act_only ? budget : budget - fixed;
    if (!policy) {
        if ((st = remat_plan_min_peak(cfg, &peak))) return st;
    } else {
        remat_schedule *s = NULL;
        remat_sim sim;
        if ((st = remat_schedule_create(cfg, policy, &s))) return st;
        st = remat_schedule_simulate(s, &sim);
        remat_schedule_free(s);
        if (st) return st;
        peak = sim.peak_bytes;
    }
    *fits = peak <= room;
    return REMAT_OK;
}

remat_status remat_search_largest(int limit, remat_fits_fn fits, void *arg, int *best)
{
    remat_status st;
    int lo = 1, hi = 2, f;                   /* lo fits; find hi that does not */
    while (hi <= limit) {
        if ((st = fits(arg, hi, &f))) return st;
        if (!f) break;
        lo = hi;
        hi *= 2;
    }
    if (hi > limit) hi = limit + 1;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if ((st = fits(arg, mid, &f))) return st;
        if (f) lo = mid; else hi = mid;
    }
    *best = lo;
    return REMAT_OK;
}

static void set_dim(remat_config *c, const remat_config *base, int dim, int v)
{
    *c = *base;
    if (dim == REMAT_PLAN_SEQ) {
        c->seq = v;
        if (c->max_seq < v) c->max_seq = v;
    } else {
        c->batch = v;
    }
}

typedef struct maxarg { const remat_config *cfg; const char *policy; remat_plan_dim dim; int act; uint64_t budget; } maxarg;

static remat_status fits_dim(void *arg, int v, int *ok)
{
    const maxarg *a = arg;
    remat_config c;
    set_dim(&c, a->cfg, a->dim, v);
    return fits_at(&c, a->policy, a->budget, a->act, ok);
}

remat_status remat_plan_maximize(const remat_config *cfg, const char *policy, remat_plan_dim dim, uint64_t budget,
                                 int activations_only, int *best, remat_plan_row *out)
{
    remat_status st;
    remat_config c;
    if (!best) return remat_fail(REMAT_ERR_INVALID, "remat_plan_maximize: best is NULL");
    *best = 0;
    if ((st = remat_config_check(cfg))) return st;
    if (dim != REMAT_PLAN_SEQ && dim != REMAT_PLAN_BATCH)
        return remat_fail(REMAT_ERR_INVALID, "maximize: dimension must be seq or batch");
    if (budget == 0) return remat_fail(REMAT_ERR_INVALID, "maximize needs a budget");
    const int limit = 1 << 20;
    if (policy) {   /* a bad policy is a policy error, not "nothing fits" */
        remat_schedule *s = NULL;
        if ((st = remat_schedule_create(cfg, policy, &s))) return st;
        remat_schedule_free(s);
    }
    set_dim(&c, cfg, dim, 1);
    int f;
    if ((st = fits_at(&c, policy, budget, activations_only, &f))) return st;
    if (!f) {
        const char *what = dim == REMAT_PLAN_SEQ ? "seq" : "batch";
        remat_plan_row r;
        if (policy || !(st = remat_plan_optimal(&c, NULL, budget, activations_only, &r))) {
            if (!policy) remat_plan_row_clear(&r);
            return remat_fail(REMAT_ERR_BUDGET, "%s=1 does not fit in the budget with %s", what,
                              policy ? policy : "any plan");
        }
        if (st != REMAT_ERR_BUDGET) return st;
        char m[400];
        snprintf(m, sizeof m, "%s", remat_errmsg());
        return remat_fail(REMAT_ERR_BUDGET, "even %s=1 does not fit: %s", what, m);
    }
    maxarg ma = { cfg, policy, dim, activations_only, budget };
    if ((st = remat_search_largest(limit, fits_dim, &ma, best))) return st;
    if (out) {
        set_dim(&c, cfg, dim, *best);
        st = policy ? remat_plan_evaluate(&c, NULL, policy, budget, activations_only, out)
                    : remat_plan_optimal(&c, NULL, budget, activations_only, out);
        if (st) return st;
    }
    return REMAT_OK;
}
