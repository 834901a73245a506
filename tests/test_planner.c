/*
 * test_planner.c -- the budget planner and its cost model:
 *   - plan:TOKENS round trip: every named policy, written as the tokens the
 *     compiler's recursion visits, compiles to the identical schedule;
 *   - the program's recurrences predict the simulator's peak to the byte and
 *     the cost model's time for random plans (any segmentation, any keep-set);
 *   - optimality: on small chains with a few droppable tensors, the planner
 *     equals an exhaustive enumeration of every plan string in the space
 *     (every keep/drop assignment and segmentation), for many budgets, with
 *     a randomised profile so that ties are rare;
 *   - dominance: at each named policy's own peak the plan is no slower;
 *   - feasibility: the plan, run for real, peaks at its predicted bytes and
 *     its whole step fits the budget;
 *   - monotonicity: more budget never gives a slower plan;
 *   - thinned fronts (long chains) still give exact peaks within budget;
 *   - errors: a too-small budget names the minimum; profiles round-trip
 *     through files, and malformed or mismatched files are rejected;
 *   - maximize: the largest seq/batch fits and the next one does not;
 *   - the GEMM probe's memory and largest product stay small for a
 *     175B-like config, as they are for S.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "remat.h"
#include "harness.h"
#include "planner/planner.h"
#include "kernels/gemm.h"   /* REMAT_PROBE_PASSES */

#define TOL 1e-9
static int close_ms(double a, double b) { return fabs(a - b) <= TOL * (fabs(b) > 1 ? fabs(b) : 1); }

static remat_config cfg_small(int L, int C, int NH, int T, int B, int V)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = L; c.n_embd = C; c.n_head = NH; c.seq = T; c.max_seq = T; c.batch = B; c.vocab = V;
    return c;
}

/* a profile with arbitrary, distinct op times, so ties between plans are rare */
static void random_profile(remat_profile *p, const remat_config *c, uint32_t seed)
{
    remat_profile_fill_model(p, c, 0);
    uint32_t x = seed * 2654435761u + 1;
    for (int t = 0; t < RT_D_RES; t++) {
        x = x * 1664525u + 1013904223u; p->fwd_ms[t] = 0.05 + (x >> 8) / 16777216.0 * 3.0;
        x = x * 1664525u + 1013904223u; if (p->bwd_ms[t] > 0) p->bwd_ms[t] = 0.05 + (x >> 8) / 16777216.0 * 5.0;
    }
    for (int t = 0; t < RT_D_RES; t++) {   /* warm calls faster, by a random share */
        x = x * 1664525u + 1013904223u; p->fwd_hot_ms[t] = p->fwd_ms[t] * (0.3 + 0.7 * (x >> 8) / 16777216.0);
        x = x * 1664525u + 1013904223u; p->bwd_hot_ms[t] = p->bwd_ms[t] * (0.3 + 0.7 * (x >> 8) / 16777216.0);
    }
    /* a cache of 3..12 block inputs: some recomputed tensors stay warm, some not */
    p->cache_bytes = remat_tensor_bytes(c, RT_RES3) * (3 + seed % 10);
    p->update_ms = 1.0;
}

/* ---- plan strings for named policies (mirror of compile.c's decide) ----- */

typedef struct gen { char *s; size_t n; int L, kind, arg; uint32_t keep; } gen;
enum { G_NONE, G_EVERY, G_FIRST, G_REVOLVE };

static void tok(gen *g, const char *fmt, unsigned v)
{
    size_t k = strlen(g->s);
    snprintf(g->s + k, g->n - k, "%s", k > 5 ? "." : "");
    k = strlen(g->s);
    snprintf(g->s + k, g->n - k, fmt, v);
}

static void gen_solve(gen *g, int a, int b, int slots)
{
    int L = g->L, top = b == L + 1, m = 0;
    if (a == L) return;
    if (g->kind == G_EVERY && top) m = (a + g->arg < L ? a + g->arg : L) - a;
    if (g->kind == G_FIRST && top && a < g->arg) m = 1;
    if (g->kind == G_REVOLVE && b - a >= 2) {
        int s = slots > g->arg ? g->arg : slots, j = 0;
        remat_revolve_cost(b - a, s, &j);
        m = j;
    }
    if (m) {
        tok(g, "C%u", (unsigned)m);
        gen_solve(g, a + m, b, slots - 1);
        gen_solve(g, a, a + m, slots);
    } else {
        tok(g, "A%x", g->keep & 0x3ff);
        if (a + 1 < b) gen_solve(g, a + 1, b, slots - 1);
    }
}

static int same_schedule(const remat_schedule *a, const remat_schedule *b)
{
    size_t n = remat_schedule_length(a);
    if (n != remat_schedule_length(b)) return 0;
    for (size_t i = 0; i < n; i++) {
        const remat_instr *x = &a->ins[i], *y = &b->ins[i];
        if (x->kind != y->kind || x->tid != y->tid || x->layer != y->layer) return 0;
    }
    return 1;
}

static void test_round_trip(void)
{
    static const struct { const char *mod; uint32_t keep; } mods[] = {
        { "", 0x3ff }, { ",selective", 0x3ff & ~(1u << RT_ATT) },
        { ",pointwise", 0x3ff & ~((1u << RT_LN1) | (1u << RT_LN2) | (1u << RT_FCH_GELU)) },
        { ",save:qkv+fch", (1u << RT_QKV) | (1u << RT_FCH) },
    };
    char plan[4096], named[64];
    int checked = 0;
    for (int L = 1; L <= 6; L++) {
        remat_config c = cfg_small(L, 32, 4, 16, 2, 64);
        for (int kind = G_NONE; kind <= G_REVOLVE; kind++)
            for (int arg = 1; arg <= 4; arg++) {
                if ((kind == G_NONE && arg > 1) || (kind == G_REVOLVE && arg < 2)) continue;
                for (size_t m = 0; m < sizeof mods / sizeof mods[0]; m++) {
                    const char *base = kind == G_NONE ? "none" : kind == G_EVERY ? "every" : kind == G_FIRST ? "first" : "revolve";
                    if (kind == G_NONE) snprintf(named, sizeof named, "%s%s", base, mods[m].mod);
                    else snprintf(named, sizeof named, "%s:%d%s", base, arg, mods[m].mod);
                    remat_schedule *a = NULL, *b = NULL;
                    if (remat_schedule_create(&c, named, &a)) continue;   /* e.g. revolve with too few slots */
                    gen g = { plan, sizeof plan, L, kind, arg, mods[m].keep };
                    snprintf(plan, sizeof plan, "plan:");
                    gen_solve(&g, 0, L + 1, kind == G_REVOLVE ? (arg > L + 1 ? L + 1 : arg) : 1 << 30);
                    remat_status st = remat_schedule_create(&c, plan, &b);
                    CHECK(st == REMAT_OK, "L=%d %s -> %s: %s", L, named, plan, remat_errmsg());
                    if (!st) {
                        remat_sim sa, sb;
                        remat_schedule_simulate(a, &sa);
                        remat_schedule_simulate(b, &sb);
                        CHECK(same_schedule(a, b) && sa.peak_bytes == sb.peak_bytes,
                              "L=%d %s and %s compile differently (%zu vs %zu instructions, peak %llu vs %llu)", L,
                              named, plan, remat_schedule_length(a), remat_schedule_length(b),
                              (unsigned long long)sa.peak_bytes, (unsigned long long)sb.peak_bytes);
                        checked++;
                    }
                    remat_schedule_free(a);
                    remat_schedule_free(b);
                }
            }
    }
    CHECK(checked > 100, "round trip checked only %d policies", checked);
}

/* ---- random plans: the recurrences against the simulator --------------- */

static uint32_t rng = 12345;
static uint32_t rnd(uint32_t n) { rng = rng * 1664525u + 1013904223u; return (rng >> 8) % n; }

/* A host link at which one block input takes `ms_per_x` ms: offload and
 * reload then take about as long as a block's ops, hidden or not by turns. */
static void with_host_link(remat_profile *p, const remat_config *c, double ms_per_x)
{
    p->host_bps = (double)remat_tensor_bytes(c, RT_RES3) / (ms_per_x * 1e-3);
}

static int rand_off;    /* 1: the first sweep's ALL moves offload by turns (O tokens) */

static void rand_plan(char *s, size_t n, int type, int len)
{
    if (type == 1 && len == 0) return;
    size_t k = strlen(s);
    const char *dot = k > 5 ? "." : "";
    if (type == 0 && len == 1) { snprintf(s + k, n - k, "%sA%x", dot, rnd(0x400)); return; }
    int jmax = type ? len : len - 1;
    if (rnd(3) == 0 && jmax >= 1) {
        int j = 1 + (int)rnd((uint32_t)jmax);
        snprintf(s + k, n - k, "%sC%d", dot, j);
        rand_plan(s, n, type, len - j);
        rand_plan(s, n, 0, j);
    } else {
        /* bias toward realistic masks: keep most, drop a few */
        uint32_t m = rnd(2) ? rnd(0x400) : (0x3ff & ~(1u << rnd(10)) & ~(1u << rnd(10)));
        snprintf(s + k, n - k, "%s%c%x", dot, rand_off && type == 1 && rnd(2) ? 'O' : 'A', m);
        rand_plan(s, n, type, len - 1);
    }
}

/* 60 random plans of c (rand_off: with O tokens) predicted by the program
 * p against the simulator and the cost pass: mispredictions into *bad (the
 * first few reported), plans into *n; with hid, also each plan without its
 * offloads, which is never slower nor keeps less when the forward ends --
 * equal (*hid) or faster (*exp) */
static void predict_plans(const remat_config *c, const remat_profile *prof, remat_planner *p, const char *what,
                          int *bad, int *n, int *hid, int *exp)
{
    for (int it = 0; it < 60; it++) {
        char plan[4096] = "plan:";
        rand_plan(plan, sizeof plan, 1, c->n_layer);
        remat_plan_row r, keep;
        uint64_t pk;
        double ms;
        remat_status st = remat_plan_evaluate(c, prof, plan, 0, 0, &r);
        remat_status st2 = remat_planner_predict(p, prof, plan, &pk, &ms);
        (*n)++;
        if (st || st2 || r.peak_bytes != pk || !close_ms(ms, r.step_ms_pred)) {
            if ((*bad)++ < 5)
                CHECK(0, "L=%d %s %s: simulated %llu B %.6f ms, predicted %llu B %.6f ms (%s)", c->n_layer, what, plan,
                      (unsigned long long)r.peak_bytes, r.step_ms_pred, (unsigned long long)pk, ms,
                      st || st2 ? remat_errmsg() : "");
        }
        for (char *q = plan; hid && *q; q++) if (*q == 'O') *q = 'A';
        if (hid && !st && !remat_plan_evaluate(c, prof, plan, 0, 0, &keep)) {
            CHECK(keep.step_ms_pred <= r.step_ms_pred * (1 + 1e-12) && keep.stored_bytes >= r.stored_bytes,
                  "%s: offloading made it faster or kept more", plan);
            *hid += keep.step_ms_pred == r.step_ms_pred;
            *exp += keep.step_ms_pred < r.step_ms_pred;
            remat_plan_row_clear(&keep);
        }
        remat_plan_row_clear(&r);
    }
}

/* offload: the program's OFF moves against the simulator and the cost
 * pass, and host bytes bounded by remat_planner_set_host */
static void test_offload(void)
{
    rand_off = 1;
    remat_config cs[] = { cfg_small(1, 32, 4, 16, 2, 64), cfg_small(4, 24, 2, 8, 3, 50), cfg_small(7, 16, 4, 12, 2, 100) };
    int bad = 0, n = 0, hidden = 0, exposed = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (int speed = 1; speed <= 4; speed *= 4) {
            remat_config c = cs[ci];
            remat_profile prof;
            random_profile(&prof, &c, (uint32_t)ci + 11);
            with_host_link(&prof, &c, 0.4 * speed);
            remat_planner *p = NULL;
            remat_status st = remat_planner_create(&c, &prof, 0x3ff, &p);
            CHECK(st == REMAT_OK && remat_planner_offload_sets(p) > 0, "planner_create with a host link: %s",
                  remat_errmsg());
            if (st) continue;
            predict_plans(&c, &prof, p, "offloading", &bad, &n, &hidden, &exposed);
            /* a host of room for 2 offloaded blocks: the optimum puts no more there */
            uint64_t most = remat_planner_offload_host(p), H = 2 * most + most / 2;
            remat_planner_set_host(p, H);
            char plan[REMAT_POLICY_MAX];
            if (!remat_planner_build_fronts(p, 0) && !remat_planner_best(p, UINT64_MAX / 2, plan, sizeof plan, NULL, NULL)) {
                remat_schedule *s = NULL;
                remat_sim sim;
                CHECK(remat_schedule_create(&c, plan, &s) == REMAT_OK && remat_schedule_simulate(s, &sim) == REMAT_OK &&
                      sim.host_peak_bytes <= H, "host bound %llu: %s puts %llu there", (unsigned long long)H, plan,
                      (unsigned long long)sim.host_peak_bytes);
                int offs = 0;
                for (char *q = plan; *q; q++) offs += *q == 'O';
                CHECK(offs <= 2, "host room for 2 blocks: %s offloads %d", plan, offs);
                remat_schedule_free(s);
            } else {
                CHECK(0, "the optimum with a host bound: %s", remat_errmsg());
            }
            remat_planner_free(p);
        }
    CHECK(bad == 0 && n >= 300, "%d of %d random offloading plans mispredicted", bad, n);
    CHECK(hidden > 0 && exposed > 0, "offloads both hidden (%d) and not (%d)", hidden, exposed);
    rand_off = 0;
    printf("  offload: %d random plans predicted, %d hidden, %d with transfers exposed\n", n, hidden, exposed);
}

static void test_predict_random(void)
{
    remat_config cs[] = { cfg_small(1, 32, 4, 16, 2, 64), cfg_small(3, 24, 2, 8, 3, 50),
                          cfg_small(5, 32, 4, 16, 2, 64), cfg_small(8, 16, 4, 12, 2, 100) };
    int bad = 0, n = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (int drop = 0; drop < 2; drop++) {
            remat_config c = cs[ci];
            c.dropout = drop ? 0.1f : 0.0f;
            remat_profile prof;
            random_profile(&prof, &c, (uint32_t)ci + 7);
            remat_planner *p = NULL;
            remat_status st = remat_planner_create(&c, &prof, 0x3ff, &p);
            CHECK(st == REMAT_OK, "planner_create: %s", remat_errmsg());
            if (st) continue;
            predict_plans(&c, &prof, p, drop ? "dropout" : "", &bad, &n, NULL, NULL);
            remat_planner_free(p);
        }
    CHECK(bad == 0 && n >= 400, "%d of %d random plans mispredicted", bad, n);
}

/* ---- optimality against exhaustive enumeration --------------------------- */

typedef struct plans { char **s; size_t n, cap; } plans;

static void plans_add(plans *ps, const char *s)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 1024;
        ps->s = realloc(ps->s, ps->cap * sizeof *ps->s);
    }
    ps->s[ps->n++] = strdup(s);
}

/* every token string of sub-problem (type, n), appended after prefix, each
 * completed by the continuation `rest` (a list of pending sub-problems) */
typedef struct pend { int type, n; } pendsp;

/* with enum_off, the first sweep's ALL moves (sub-problems F(n), at block
 * enum_L - n) of the blocks before enum_cap may offload: O tokens too */
static int enum_off, enum_L, enum_cap;

static void enum_rec(plans *out, char *buf, size_t len, const pendsp *cont, int sp, const uint32_t *masks, int nm)
{
    if (sp == 0) { buf[len] = 0; plans_add(out, buf); return; }
    pendsp stack[64];                 /* our own copy: callers reuse theirs */
    memcpy(stack, cont, sizeof(pendsp) * (size_t)sp);
    pendsp top = stack[sp - 1];
    sp--;
    if (top.type == 1 && top.n == 0) { enum_rec(out, buf, len, stack, sp, masks, nm); return; }
    const char *dot = len > 5 ? "." : "";
    if (top.type == 0 && top.n == 1) {
        int k = sprintf(buf + len, "%sA0", dot);
        enum_rec(out, buf, len + (size_t)k, stack, sp, masks, nm);
        return;
    }
    for (int o = 0; o < (enum_off && top.type == 1 && enum_L - top.n < enum_cap ? 2 : 1); o++)
        for (int m = 0; m < nm; m++) {
            int k = sprintf(buf + len, "%s%c%x", dot, o ? 'O' : 'A', masks[m]);
            stack[sp] = (pendsp){ top.type, top.n - 1 };
            enum_rec(out, buf, len + (size_t)k, stack, sp + 1, masks, nm);
        }
    int jmax = top.type ? top.n : top.n - 1;
    for (int j = 1; j <= jmax; j++) {
        int k = sprintf(buf + len, "%sC%d", dot, j);
        /* preorder: [a+j, b) first, then [a, a+j): push the latter first */
        stack[sp] = (pendsp){ 0, j };
        stack[sp + 1] = (pendsp){ top.type, top.n - j };
        enum_rec(out, buf, len + (size_t)k, stack, sp + 2, masks, nm);
    }
}

/* host: 0 no host link; > 0 with one, and offload allowed for the first
 * `cap` blocks (cap 0: all) */
static void test_optimal_exhaustive_host(const char *label, remat_config c, uint32_t droppable, uint32_t seed, int host,
                                         int cap)
{
    remat_profile prof;
    random_profile(&prof, &c, seed);
    if (host) with_host_link(&prof, &c, 0.4 * host);
    enum_off = host > 0;
    enum_L = c.n_layer;
    enum_cap = cap ? cap : c.n_layer;
    uint32_t masks[1024];
    int nm = 0;
    for (uint32_t sub = droppable;; sub = (sub - 1) & droppable) {
        masks[nm++] = 0x3ff & ~sub;
        if (!sub) break;
    }
    plans ps = { 0 };
    char buf[4096] = "plan:";
    pendsp stack[64];
    stack[0] = (pendsp){ 1, c.n_layer };
    enum_rec(&ps, buf, 5, stack, 1, masks, nm);
    uint64_t *peak = malloc(ps.n * sizeof *peak);
    double *ms = malloc(ps.n * sizeof *ms);
    uint64_t lo = UINT64_MAX, hi = 0;
    int fails = 0;
    for (size_t i = 0; i < ps.n; i++) {
        remat_plan_row r;
        remat_status st = remat_plan_evaluate(&c, &prof, ps.s[i], 0, 1, &r);
        if (st && fails++ < 3) CHECK(0, "%s: %s does not compile: %s", label, ps.s[i], remat_errmsg());
        peak[i] = st ? UINT64_MAX : r.peak_bytes;
        ms[i] = r.step_ms_pred;
        remat_plan_row_clear(&r);
        if (!st && peak[i] < lo) lo = peak[i];
        if (!st && peak[i] > hi) hi = peak[i];
    }
    remat_planner *p = NULL;
    remat_status st = remat_planner_create(&c, &prof, droppable, &p);
    if (!st && host && cap) remat_planner_set_offload_blocks(p, cap);
    if (!st) st = remat_planner_build_fronts_unit(p, 0, 1);
    CHECK(st == REMAT_OK, "%s: planner: %s", label, remat_errmsg());
    if (st) goto out;
    CHECK(remat_planner_min_peak(p) == lo, "%s: min peak %llu, exhaustive %llu", label,
          (unsigned long long)remat_planner_min_peak(p), (unsigned long long)lo);
    int nb = 0, bad = 0;
    for (int k = 0; k <= 60; k++) {
        /* budgets spread over [lo - 1, hi], plus exact plan peaks */
        uint64_t b = k == 0 ? lo - 1 : k <= 40 ? lo + (hi - lo) * (uint64_t)(k - 1) / 39 : peak[rnd((uint32_t)ps.n)];
        double best = INFINITY;
        for (size_t i = 0; i < ps.n; i++)
            if (peak[i] <= b && ms[i] < best) best = ms[i];
        char plan[REMAT_POLICY_MAX];
        uint64_t pk;
        double pms;
        st = remat_planner_best(p, b, plan, sizeof plan, &pk, &pms);
        nb++;
        if (isinf(best)) {
            if (st != REMAT_ERR_BUDGET && bad++ < 3) CHECK(0, "%s: budget %llu: nothing fits, planner says %s", label,
                                                           (unsigned long long)b, plan);
            continue;
        }
        remat_plan_row r = { 0 };
        remat_status st2 = st ? st : remat_plan_evaluate(&c, &prof, plan, b, 1, &r);
        if (st || st2 || !close_ms(pms, best) || !close_ms(r.step_ms_pred, best) || r.peak_bytes != pk || pk > b) {
            if (bad++ < 3)
                CHECK(0, "%s: budget %llu: exhaustive best %.9f ms; planner %s %.9f ms (evaluated %.9f ms, peak %llu, "
                      "predicted %llu) %s", label, (unsigned long long)b, best, st ? "-" : plan, pms, r.step_ms_pred,
                      (unsigned long long)r.peak_bytes, (unsigned long long)pk, st ? remat_errmsg() : "");
        }
        remat_plan_row_clear(&r);
    }
    CHECK(bad == 0, "%s: %d of %d budgets differ from exhaustive enumeration (%zu plans)", label, bad, nb, ps.n);
    printf("  %s: %zu plans enumerated, %d budgets, %d keep-sets after pruning (%d offloaded)\n", label, ps.n, nb,
           remat_planner_keepsets(p), remat_planner_offload_sets(p));
out:
    remat_planner_free(p);
    for (size_t i = 0; i < ps.n; i++) free(ps.s[i]);
    free(ps.s);
    free(peak);
    free(ms);
}

static void test_optimal_exhaustive(const char *label, remat_config c, uint32_t droppable, uint32_t seed)
{
    test_optimal_exhaustive_host(label, c, droppable, seed, 0, 0);
}

/* ---- dominance, monotonicity, feasibility --------------------------------- */

static const char *named[] = { "none", "full", "every:2", "every:3", "sqrt", "first:2", "selective", "pointwise",
                               "every:2,selective", "revolve:3", "save:qkv+fch", "full,selective",
                               "selective,pointwise", "revolve:2,pointwise" };
#define NNAMED ((int)(sizeof named / sizeof named[0]))

static void test_dominance(remat_config c)
{
    for (int i = 0; i < NNAMED; i++) {
        remat_plan_row pol, opt;
        if (remat_plan_evaluate(&c, NULL, named[i], 0, 0, &pol)) continue;
        for (int act = 0; act < 2; act++) {
            uint64_t budget = act ? pol.peak_bytes : pol.total_bytes;
            remat_status st = remat_plan_optimal(&c, NULL, budget, act, &opt);
            CHECK(st == REMAT_OK, "optimal at %s's budget: %s", named[i], remat_errmsg());
            if (st) continue;
            CHECK(opt.step_ms_pred <= pol.step_ms_pred * (1 + TOL), "%s: %.6f ms, the plan %.6f ms (%s)", named[i],
                  pol.step_ms_pred, opt.step_ms_pred, opt.policy);
            CHECK(opt.fits && (act ? opt.peak_bytes : opt.total_bytes) <= budget, "%s: plan does not fit", named[i]);
            remat_plan_row_clear(&opt);
        }
        remat_plan_row_clear(&pol);
    }
}

static void test_monotone(remat_config c)
{
    uint64_t minp;
    CHECK(remat_plan_min_peak(&c, &minp) == REMAT_OK, "min_peak");
    remat_plan_row none;
    remat_plan_evaluate(&c, NULL, "none", 0, 1, &none);
    double prev = INFINITY;
    int bad = 0;
    for (int k = 0; k <= 80; k++) {
        uint64_t b = minp + (none.peak_bytes - minp) * (uint64_t)k / 80;
        remat_plan_row r;
        remat_status st = remat_plan_optimal(&c, NULL, b, 1, &r);
        if (st || r.step_ms_pred > prev * (1 + TOL) || r.peak_bytes > b) {
            if (bad++ < 3) CHECK(0, "budget %llu: st %d, %.6f ms after %.6f ms (%s)", (unsigned long long)b, st,
                                 r.step_ms_pred, prev, st ? remat_errmsg() : r.policy);
        }
        prev = r.step_ms_pred;
        remat_plan_row_clear(&r);
    }
    CHECK(bad == 0, "monotonicity: %d violations", bad);
    remat_plan_row r;
    CHECK(remat_plan_optimal(&c, NULL, none.peak_bytes, 1, &r) == REMAT_OK && close_ms(r.step_ms_pred, none.step_ms_pred),
          "with none's peak the plan is as fast as none (%.6f vs %.6f)", r.step_ms_pred, none.step_ms_pred);
    remat_plan_row_clear(&r);
    remat_plan_row_clear(&none);
}

static void make_batch(const remat_config *c, int *in, int *tg)
{
    uint32_t x = 99;
    for (int i = 0; i < c->batch * c->seq; i++) {
        x = x * 1664525u + 1013904223u; in[i] = (int)((x >> 8) % (uint32_t)c->vocab);
        x = x * 1664525u + 1013904223u; tg[i] = (int)((x >> 8) % (uint32_t)c->vocab);
    }
}

static void test_feasible(remat_config c)
{
    uint64_t minp, fixed = remat_plan_static_bytes(&c);
    remat_plan_min_peak(&c, &minp);
    remat_plan_row none;
    remat_plan_evaluate(&c, NULL, "none", 0, 0, &none);
    int *in = malloc(sizeof(int) * (size_t)(c.batch * c.seq)), *tg = malloc(sizeof(int) * (size_t)(c.batch * c.seq));
    make_batch(&c, in, tg);
    for (int k = 0; k < 5; k++) {
        uint64_t budget = fixed + minp + (none.peak_bytes - minp) * (uint64_t)k / 4;
        remat_plan_row r;
        remat_status st = remat_plan_optimal(&c, NULL, budget, 0, &r);
        CHECK(st == REMAT_OK, "optimal: %s", remat_errmsg());
        if (st) continue;
        remat_model *m = NULL;
        float loss;
        st = remat_model_create(&c, 1, &m);
        if (!st) st = remat_model_set_policy(m, r.policy);
        if (!st) st = remat_model_step(m, in, tg, 1, &loss);
        CHECK(st == REMAT_OK, "running %s: %s", r.policy, remat_errmsg());
        if (!st) {
            remat_stats s;
            remat_model_stats(m, &s);
            CHECK(s.act_peak_bytes == r.peak_bytes, "%s: measured peak %llu, predicted %llu", r.policy,
                  (unsigned long long)s.act_peak_bytes, (unsigned long long)r.peak_bytes);
            CHECK(s.params_bytes + s.grads_bytes + s.optim_bytes + s.workspace_bytes == fixed,
                  "static bytes %llu, measured %llu", (unsigned long long)fixed,
                  (unsigned long long)(s.params_bytes + s.grads_bytes + s.optim_bytes + s.workspace_bytes));
            CHECK(s.step_peak_bytes <= budget && s.step_peak_bytes == r.total_bytes,
                  "%s: measured step peak %llu, predicted %llu, budget %llu", r.policy,
                  (unsigned long long)s.step_peak_bytes, (unsigned long long)r.total_bytes, (unsigned long long)budget);
        }
        remat_model_free(m);
        remat_plan_row_clear(&r);
    }
    remat_plan_row_clear(&none);
    free(in);
    free(tg);
}

/* Thinned fronts (long chains): plans still fit with exact peaks, and each
 * level of the recursion loses at most one bucket of memory: at budget b the
 * plan is no slower than the exact optimum at b - depth * u. */
static void test_thinned(void)
{
    remat_config c = cfg_small(12, 64, 4, 32, 2, 128);
    remat_planner *p = NULL, *e = NULL;
    remat_status st = remat_planner_create(&c, NULL, 0x3ff, &p);
    if (!st) st = remat_planner_create(&c, NULL, 0x3ff, &e);
    if (!st) st = remat_planner_build_fronts_unit(e, 0, 1);
    uint64_t x = remat_tensor_bytes(&c, RT_RES3), u = x / 8, depth = 2 * (uint64_t)c.n_layer + 2;
    if (!st) st = remat_planner_build_fronts_unit(p, 0, u);
    CHECK(st == REMAT_OK, "thinned planner: %s", remat_errmsg());
    if (st) goto out;
    CHECK(remat_planner_front_size(p) < remat_planner_front_size(e), "thinning keeps fewer points (%zu vs %zu)",
          remat_planner_front_size(p), remat_planner_front_size(e));
    CHECK(remat_planner_min_peak(p) == remat_planner_min_peak(e), "same minimum");
    uint64_t minp = remat_planner_min_peak(p);
    int bad = 0;
    for (int k = 0; k <= 120; k++) {
        uint64_t b = minp + (uint64_t)k * x / 7;
        char plan[REMAT_POLICY_MAX], plan2[REMAT_POLICY_MAX];
        uint64_t pk, pk2;
        double ms, ms2;
        remat_plan_row r = { 0 };
        st = remat_planner_best(p, b, plan, sizeof plan, &pk, &ms);
        int ok = !st && !remat_plan_evaluate(&c, NULL, plan, b, 1, &r) && r.peak_bytes <= b && r.peak_bytes == pk;
        if (ok && b >= minp + depth * u && !remat_planner_best(e, b - depth * u, plan2, sizeof plan2, &pk2, &ms2))
            ok = r.step_ms_pred <= ms2 * (1 + TOL);
        if (!ok && bad++ < 3) CHECK(0, "thinned plan at %llu: %s (%s)", (unsigned long long)b, plan, remat_errmsg());
        remat_plan_row_clear(&r);
    }
    CHECK(bad == 0, "thinned fronts: %d budgets out of bounds", bad);
out:
    remat_planner_free(p);
    remat_planner_free(e);
}

/* ---- errors ------------------------------------------------------------- */

static void test_errors(void)
{
    remat_config c = cfg_small(4, 64, 4, 32, 4, 256);
    uint64_t fixed = remat_plan_static_bytes(&c), minp;
    remat_plan_min_peak(&c, &minp);
    remat_plan_row r;
    remat_status st = remat_plan_optimal(&c, NULL, fixed + minp - 1, 0, &r);
    CHECK(st == REMAT_ERR_BUDGET && strstr(remat_errmsg(), "minimum") && strstr(remat_errmsg(), "parameters+optimizer"),
          "too small a budget: %d %s", st, remat_errmsg());
    CHECK(r.policy == NULL, "no plan on failure");
    st = remat_plan_optimal(&c, NULL, fixed + minp, 0, &r);
    CHECK(st == REMAT_OK && r.total_bytes == fixed + minp, "exactly the minimum fits: %s", remat_errmsg());
    remat_plan_row_clear(&r);
    st = remat_plan_optimal(&c, NULL, minp - 1, 1, &r);
    CHECK(st == REMAT_ERR_BUDGET && strstr(remat_errmsg(), "minimum activations"), "activation budget: %s", remat_errmsg());
    st = remat_plan_optimal(&c, NULL, 1000, 0, &r);
    CHECK(st == REMAT_ERR_BUDGET, "1000 B");
    CHECK(remat_plan_evaluate(&c, NULL, "every:0", 0, 0, &r) == REMAT_ERR_POLICY, "bad policy");
    CHECK(remat_plan_evaluate(&c, NULL, "plan:A0", 0, 0, &r) == REMAT_ERR_POLICY, "short plan");
    remat_config bad = c;
    bad.n_head = 3;
    CHECK(remat_plan_optimal(&bad, NULL, 1u << 30, 0, &r) == REMAT_ERR_INVALID, "bad config");
    /* a profile for another config is refused */
    remat_profile *p = NULL;
    CHECK(remat_profile_model(&bad, 0, &p) == REMAT_ERR_INVALID && !p, "model for a bad config");
    remat_config other = c;
    other.seq = 16;
    other.max_seq = 16;
    CHECK(remat_profile_model(&other, 0, &p) == REMAT_OK, "model");
    CHECK(remat_plan_evaluate(&c, p, "none", 0, 0, &r) == REMAT_ERR_INVALID, "profile of another config");
    remat_profile_free(p);
    remat_profile_free(NULL);
}

/* ---- profiles: measure, save, load, reject ----------------------------- */

static int write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fwrite(data, 1, n, f);
    return fclose(f);
}

static void test_profiles(void)
{
    remat_config c = cfg_small(2, 32, 4, 16, 2, 64);
    char dir[] = "/tmp/remat_test_planner_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[512], bad[600];
    snprintf(path, sizeof path, "%s/sub/dir/p.txt", dir);
    remat_profile *p = NULL, *q = NULL;
    remat_status st = remat_profile_measure(&c, 2, &p);
    CHECK(st == REMAT_OK, "measure: %s", remat_errmsg());
    if (st) return;
    for (int t = 0; t < RT_D_RES; t++) {
        CHECK(remat_profile_op_ms(p, t, 0) >= 0 && remat_profile_op_ms(p, t, 0) < 1e4, "fwd time of %d", t);
        if (remat_table_gpt2.defs[t].has_bwd) CHECK(remat_profile_op_ms(p, t, 1) >= 0, "bwd time of %d", t);
    }
    /* run times with every bit significant: a save prints each time so that
     * the load reads back the same double, measured or not */
    p->run_ms[REMAT_I_FORWARD][RT_QKV] = 1.0 / 3;
    p->run_n[REMAT_I_FORWARD][RT_QKV] = 2;
    p->run_ms[REMAT_I_UPDATE][0] = 0.1 + 0.2;
    p->run_n[REMAT_I_UPDATE][0] = 1;
    p->run_overhead_ms = 2.0 / 7;
    p->run_overhead_n = 3;
    p->update_ms *= 1 + 1.0 / 3;
    CHECK(remat_profile_save(p, path) == REMAT_OK, "save: %s", remat_errmsg());
    st = remat_profile_load(&c, path, &q);
    CHECK(st == REMAT_OK, "load: %s", remat_errmsg());
    if (!st) {
        for (int t = 0; t < RT_D_RES; t++)
            CHECK(q->fwd_ms[t] == p->fwd_ms[t] && q->bwd_ms[t] == p->bwd_ms[t] && q->fwd_hot_ms[t] == p->fwd_hot_ms[t] &&
                  q->bwd_hot_ms[t] == p->bwd_hot_ms[t] &&
                  p->fwd_hot_ms[t] <= p->fwd_ms[t] && remat_profile_op_warm_ms(p, t, 1) <= remat_profile_op_ms(p, t, 1),
                  "round trip of op %d, to the bit", t);
        CHECK(!memcmp(q->run_ms, p->run_ms, sizeof p->run_ms) && !memcmp(q->run_n, p->run_n, sizeof p->run_n) &&
              q->run_overhead_ms == p->run_overhead_ms && q->run_overhead_n == p->run_overhead_n &&
              q->update_ms == p->update_ms, "run and update times round trip to the bit");
        CHECK(q->cache_bytes == p->cache_bytes && p->cache_bytes > 0, "cache size round trip");
        remat_plan_row a, b;
        remat_plan_evaluate(&c, p, "full", 0, 0, &a);
        remat_plan_evaluate(&c, q, "full", 0, 0, &b);
        CHECK(a.step_ms_pred == b.step_ms_pred, "the same prediction after a round trip");
        remat_plan_row o;
        CHECK(remat_plan_optimal(&c, q, 0, 0, &o) == REMAT_OK, "optimal with a measured profile");
        remat_plan_row_clear(&a);
        remat_plan_row_clear(&b);
        remat_plan_row_clear(&o);
    }
    remat_profile_free(q);
    q = NULL;
    /* another config, another machine key */
    remat_config c2 = c;
    c2.batch = 3;
    CHECK(remat_profile_load(&c2, path, &q) == REMAT_ERR_INVALID && !q, "config mismatch: %s", remat_errmsg());
    CHECK(remat_profile_load(&c, "/nonexistent/p.txt", &q) == REMAT_ERR_IO, "missing file");
    /* mutations of a valid file: never a crash, never an accepted garbage time */
    FILE *f = fopen(path, "rb");
    char text[8192];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    snprintf(bad, sizeof bad, "%s/bad.txt", dir);
    static const char *cases[] = {
        "", "remat-profile 2\n", "hello\n", "remat-profile 1\nmeasured 1\n",
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        write_file(bad, cases[k], strlen(cases[k]));
        CHECK(remat_profile_load(&c, bad, &q) == REMAT_ERR_FORMAT && !q, "case %zu: %s", k, remat_errmsg());
    }
    write_file(bad, text, n - 4);                          /* truncated: no 'end' */
    CHECK(remat_profile_load(&c, bad, &q) == REMAT_ERR_FORMAT, "truncated: %s", remat_errmsg());
    char *t2 = strdup(text), *hit = strstr(t2, "fwd qkv ");
    if (hit) { hit[8] = '-'; }                             /* a negative time */
    write_file(bad, t2, n);
    CHECK(remat_profile_load(&c, bad, &q) == REMAT_ERR_FORMAT, "negative time: %s", remat_errmsg());
    free(t2);
    t2 = strdup(text);
    hit = strstr(t2, "fwdhot qkv ");
    if (hit) { hit[11] = '9'; hit[12] = '9'; }             /* warm far slower than cold */
    write_file(bad, t2, n);
    CHECK(remat_profile_load(&c, bad, &q) == REMAT_ERR_FORMAT, "warm > cold: %s", remat_errmsg());
    free(t2);
    int accepted = 0, crashed = 0;
    for (int it = 0; it < 400; it++) {
        char m[8192];
        memcpy(m, text, n);
        size_t len = n;
        int kind = (int)rnd(3);
        if (kind == 0) m[rnd((uint32_t)n)] = (char)rnd(256);
        else if (kind == 1) len = rnd((uint32_t)n);
        else { size_t at = rnd((uint32_t)n); memmove(m + at + 1, m + at, n - at); m[at] = (char)("0.e-x \n"[rnd(7)]); len = n + 1; }
        write_file(bad, m, len);
        st = remat_profile_load(&c, bad, &q);
        if (st == REMAT_OK) {
            accepted++;
            for (int t = 0; t < RT_D_RES; t++)
                if (!(q->fwd_ms[t] >= 0 && q->fwd_ms[t] <= 1e9) || !(q->bwd_ms[t] >= 0)) crashed++;
            remat_profile_free(q);
        } else if (st != REMAT_ERR_FORMAT && st != REMAT_ERR_INVALID) {
            crashed++;
        }
        q = NULL;
    }
    CHECK(crashed == 0, "mutated profiles: %d bad outcomes (%d accepted)", crashed, accepted);
    /* the default path follows REMAT_CACHE */
    setenv("REMAT_CACHE", dir, 1);
    char def[1024];
    CHECK(remat_profile_default_path(&c, def, sizeof def) == REMAT_OK && !strncmp(def, dir, strlen(dir)),
          "default path %s", def);
    CHECK(remat_profile_default_path(&c, def, 8) == REMAT_ERR_RANGE, "short buffer");
    remat_profile_free(p);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* ---- maximize ------------------------------------------------------------ */

static void test_maximize(void)
{
    remat_config c = cfg_small(4, 64, 4, 32, 4, 256);
    remat_plan_row none;
    remat_plan_evaluate(&c, NULL, "none", 0, 0, &none);
    uint64_t budget = none.total_bytes;
    const char *pols[] = { "none", "full", NULL };
    for (remat_plan_dim dim = REMAT_PLAN_SEQ; dim <= REMAT_PLAN_BATCH; dim++)
        for (int i = 0; i < 3; i++) {
            int best = 0;
            remat_plan_row r;
            remat_status st = remat_plan_maximize(&c, pols[i], dim, budget, 0, &best, &r);
            CHECK(st == REMAT_OK && best >= (dim ? c.batch : c.seq) && r.fits && r.total_bytes <= budget,
                  "maximize %s %s: %d (%s)", dim ? "batch" : "seq", pols[i] ? pols[i] : "optimal", best, remat_errmsg());
            remat_config n = c;
            if (dim) n.batch = best + 1; else { n.seq = best + 1; if (n.max_seq < n.seq) n.max_seq = n.seq; }
            remat_plan_row r2;
            if (pols[i]) st = remat_plan_evaluate(&n, NULL, pols[i], budget, 0, &r2);
            else st = remat_plan_optimal(&n, NULL, budget, 0, &r2);
            CHECK(pols[i] ? (st == REMAT_OK && !r2.fits) : st == REMAT_ERR_BUDGET, "maximize %s %s: %d + 1 fits",
                  dim ? "batch" : "seq", pols[i] ? pols[i] : "optimal", best);
            remat_plan_row_clear(&r);
            if (!st) remat_plan_row_clear(&r2);
        }
    remat_plan_row_clear(&none);
    int best;
    CHECK(remat_plan_maximize(&c, "bogus", REMAT_PLAN_SEQ, budget, 0, &best, NULL) == REMAT_ERR_POLICY, "bad policy");
    CHECK(remat_plan_maximize(&c, NULL, REMAT_PLAN_SEQ, 10, 0, &best, NULL) == REMAT_ERR_BUDGET, "nothing fits");
}

/* ---- the GEMM probe's size ----------------------------------------------- */

/* The probe times products past a size at a smaller shape and scales them
 * by their FLOPs, so neither what it allocates nor what one of its timed
 * calls does grows with the model: GPT-3 175B's shapes (L96 d12288 H96,
 * T2048; its fc weight alone is 2.4 GB in fp32), the same on 8 tokens (too
 * few rows to cut) and a wider, longer model probe within 128 MiB and
 * 1.2 GFLOP a call, like S (53 MiB) and 124M (78 MiB).  The probe then runs
 * (well under a second) and allocates what its sizing said. */
static void test_probe_size(void)
{
    remat_config cs[4] = { cfg_small(6, 256, 8, 256, 8, 512), cfg_small(96, 12288, 96, 2048, 1, 50304),
                           cfg_small(96, 12288, 96, 8, 1, 50304), cfg_small(4, 16384, 128, 8192, 1, 50304) };
    const char *names[4] = { "S", "175B", "175B on 8 tokens", "d16384 T8192" };
    cs[3].attention = REMAT_ATTENTION_FLASH;
    for (int i = 0; i < 4; i++) {
        remat_probe size, run;
        CHECK(remat_config_check(&cs[i]) == REMAT_OK, "%s: %s", names[i], remat_errmsg());
        remat_gemm_probe_size(&cs[i], &size);
        int small = size.bytes > 0 && size.bytes <= (128u << 20) && size.max_flops > 0 && size.max_flops <= 1.2e9;
        CHECK(small, "%s: the probe allocates %.1f MiB (at most 128) and times up to %.3g FLOPs a call (at most 1.2e9)",
              names[i], size.bytes / 1048576.0, size.max_flops);
        if (!small) continue;   /* the probe would take minutes and gigabytes */
        CHECK(remat_gemm_probe(&cs[i], &run) == REMAT_OK, "%s: probe: %s", names[i], remat_errmsg());
        CHECK(run.bytes == size.bytes && run.max_flops == size.max_flops, "%s: the probe allocated what it was sized at",
              names[i]);
        for (int t = 0; t < RT_D_RES; t++)
            if (run.gemm_ms[t][0] || run.gemm_ms[t][1])
                CHECK(isfinite(run.gemm_ms[t][0]) && run.gemm_ms[t][0] > 0 && isfinite(run.gemm_ms[t][1]) &&
                      run.gemm_ms[t][1] > 0, "%s: the products of tensor %d are timed", names[i], t);
        CHECK(run.gemm_ms[RT_QKV][0] > 0 && run.gemm_ms[RT_LOGITS][0] > 0 && run.tile_gflops > 0 && run.gbps > 0 &&
              run.other_gflops > 0, "%s: every probe ran", names[i]);
        /* it stops repeating once a pass is trusted */
        CHECK(run.floor_gflops > 0 && run.passes >= 1 && run.passes <= REMAT_PROBE_PASSES &&
              (run.passes == REMAT_PROBE_PASSES || !remat_probe_distrusted(&run)),
              "%s: %d passes, floor %.1f GFLOP/s, products %.2f, tiles %.2f", names[i], run.passes, run.floor_gflops,
              run.gemm_gflops, run.tile_gflops);
    }
}

/* A probe that read a rate far below its floor (a busy machine) says so in
 * the cost model's description, which `remat plan` prints; one that did
 * not, says nothing more.  Rates as issue 30 saw them: 0.1-0.2 GFLOP/s. */
static void test_probe_distrust(void)
{
    remat_config c = cfg_small(4, 128, 4, 64, 16, 256);
    remat_probe pr;
    memset(&pr, 0, sizeof pr);
    pr.tile_gflops = 40;
    pr.other_gflops = 10;
    pr.gbps = 10;
    pr.floor_gflops = 60;
    pr.gemm_gflops = 30;
    pr.first_gflops = 30;
    pr.passes = 1;
    remat_profile p;
    CHECK(!remat_probe_distrusted(&pr), "30 GFLOP/s against a floor of 60 is trusted");
    remat_profile_fill_probed(&p, &c, &pr);
    CHECK(!strstr(remat_profile_describe(&p), "passes"), "one pass: no note (%s)", remat_profile_describe(&p));
    pr.first_gflops = 0.15;
    pr.passes = 3;
    remat_profile_fill_probed(&p, &c, &pr);
    CHECK(strstr(remat_profile_describe(&p), "3 passes, the first at 0.15 GFLOP/s") &&
          strstr(remat_profile_describe(&p), "best kept") && !strstr(remat_profile_describe(&p), "still low"),
          "repeated, then trusted: %s", remat_profile_describe(&p));
    pr.gemm_gflops = 0.2;
    pr.passes = REMAT_PROBE_PASSES;
    CHECK(remat_probe_distrusted(&pr), "0.2 GFLOP/s against a floor of 60 is distrusted");
    remat_profile_fill_probed(&p, &c, &pr);
    CHECK(strstr(remat_profile_describe(&p), "still low: a busy machine") != NULL, "still low: %s",
          remat_profile_describe(&p));
    pr.gemm_gflops = 30;
    pr.tile_gflops = 0.2;
    CHECK(remat_probe_distrusted(&pr), "slow tiles alone are distrusted too");
}

/* Profiles are keyed by the whole config: two Llama configs that differ in
 * one architecture field alone (KV, F, hs, RoPE, eps, tie) have different
 * cache files, and GPT-2's keys are as they were (no architecture words). */
static void test_profile_keys(void)
{
    setenv("REMAT_CACHE", "/tmp/remat-keys", 1);
    remat_config base;
    remat_config_default(&base);
    base.arch = REMAT_ARCH_LLAMA;
    base.n_kv_head = 2;
    char p0[1024], p1[1024];
    CHECK(!remat_profile_default_path(&base, p0, sizeof p0), "path: %s", remat_errmsg());
    for (int k = 0; k < 7; k++) {
        remat_config c = base;
        if (k == 0) c.n_kv_head = 4;
        if (k == 1) c.ffn_dim = 256;
        if (k == 2) c.head_dim = 16;
        if (k == 3) c.rope_theta = 5e5;
        if (k == 4) c.norm_eps = 1e-5;
        if (k == 5) c.tie_embeddings = 1;
        if (k == 6) { c.rope_scaling.type = REMAT_ROPE_LLAMA3; c.rope_scaling.factor = 8; c.rope_scaling.low_freq_factor = 1;
                      c.rope_scaling.high_freq_factor = 4; c.rope_scaling.original_max_position = 32; }
        CHECK(!remat_profile_default_path(&c, p1, sizeof p1) && strcmp(p0, p1), "field %d: the same cache file %s", k, p1);
    }
}

int main(void)
{
    remat_set_threads(1);
    test_profile_keys();
    test_round_trip();
    test_predict_random();
    test_offload();
    test_optimal_exhaustive_host("L=3 offload, drop att/fch_gelu/ln1", cfg_small(3, 32, 4, 16, 2, 64),
                                 (1u << RT_ATT) | (1u << RT_FCH_GELU) | (1u << RT_LN1), 1, 1, 0);
    test_optimal_exhaustive_host("L=3 slow host link, drop qkv/fch/ln2_stat", cfg_small(3, 16, 2, 24, 2, 40),
                                 (1u << RT_QKV) | (1u << RT_FCH) | (1u << RT_LN2_STAT), 2, 4, 0);
    test_optimal_exhaustive_host("L=4 offload of block 0 only, drop att/ln2", cfg_small(4, 24, 3, 12, 3, 70),
                                 (1u << RT_ATT) | (1u << RT_LN2), 3, 2, 1);
    test_optimal_exhaustive("L=3, drop att/fch_gelu/ln1", cfg_small(3, 32, 4, 16, 2, 64),
                            (1u << RT_ATT) | (1u << RT_FCH_GELU) | (1u << RT_LN1), 1);
    test_optimal_exhaustive("L=4, drop qkv/fch/ln2_stat", cfg_small(4, 16, 2, 24, 2, 40),
                            (1u << RT_QKV) | (1u << RT_FCH) | (1u << RT_LN2_STAT), 2);
    {
        remat_config c = cfg_small(4, 24, 3, 12, 3, 70);
        c.dropout = 0.1f;
        test_optimal_exhaustive("L=4 dropout, drop att/res2/ln2", c, (1u << RT_ATT) | (1u << RT_RES2) | (1u << RT_LN2), 3);
    }
    test_optimal_exhaustive("L=2, drop 5 tensors", cfg_small(2, 32, 4, 32, 2, 64),
                            (1u << RT_ATT) | (1u << RT_QKV) | (1u << RT_ATTY) | (1u << RT_FCH_GELU) | (1u << RT_LN1_STAT), 4);
    test_dominance(cfg_small(6, 64, 4, 64, 4, 256));
    test_monotone(cfg_small(6, 64, 4, 64, 4, 256));
    test_feasible(cfg_small(3, 32, 4, 32, 2, 64));
    {
        remat_config c = cfg_small(3, 32, 4, 32, 2, 64);
        c.dropout = 0.1f;
        test_feasible(c);
    }
    test_thinned();
    test_errors();
    test_profiles();
    test_maximize();
    test_probe_size();
    test_probe_distrust();
    return TEST_REPORT();
}
