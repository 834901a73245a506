/*
 * plan_accuracy.c -- the planner's predicted step time against the measured
 * one, with the cost model calibrated three ways, for named policies and
 * for plans the planner picks.
 *
 *   build/bench/plan_accuracy [--preset S|124m] [--dtype fp32|bf16] [--rounds R] [--steps K]
 *                             [--threads N] [--calib-steps C]
 *
 * Presets: S = L6 d256 H8 V512, B8 T256; 124m = GPT-2 124M (L12 d768 H12
 * V50257, B4 T64).  The rows: none, full, selective, every:2, and the
 * planner's optimum at two activation budgets (25% and 50% of the way from
 * its smallest peak to none's; chosen once, with the FLOP model's defaults,
 * so that every round runs the same plans).
 *
 * Each round, on one model:
 *   run      a previous run of the same config calibrates the model: C
 *            traced steps of `none` (remat_trace, remat_profile_calibrate
 *            on the GEMM-probed FLOP model), as `remat train` stores them;
 *   profile  `remat profile`'s measurement (remat_profile_measure, 5 reps);
 *   probe    neither: the FLOP model with its GEMM probe only
 *            (remat_profile_model(cfg, 1)), timed;
 * then every row runs one warm-up step and K timed steps, the rows in an
 * order that rotates by one each round.  With one thread a step is timed by
 * the thread's CPU time (what the wall time is on an idle machine; profiles
 * and traces time ops the same way), else by the wall clock; the wall
 * clock is reported too.  Medians over rounds; the error of each
 * prediction; and whether the predicted order of the rows is the measured
 * one (pairs whose measured times differ by less than 1% are ties).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "remat.h"
#include "bench_util.h"

#define NPOL 6
#define NMODE 3
#define MAXR 32

static const char *mode_names[NMODE] = { "run", "profile", "probe" };

static double median(const double *v, int n)
{
    double c[MAXR * 8];
    memcpy(c, v, sizeof(double) * (size_t)n);
    return remat_median(c, (size_t)n);
}

static int fail(const char *what)
{
    fprintf(stderr, "plan_accuracy: %s: %s\n", what, remat_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    const char *preset = "S", *dtype = "fp32";
    int rounds = 3, steps = 2, threads = 1, calib = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--preset")) preset = argv[i + 1];
        else if (!strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calib-steps")) calib = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    if (rounds < 1 || rounds > MAXR || steps < 1 || steps > 8 || calib < 1 || calib > 64) {
        fprintf(stderr, "rounds in [1,32], steps in [1,8], calib-steps in [1,64]\n");
        return 2;
    }
    static const char *const dnames[] = { "fp32", "bf16" };
    static const int dvals[] = { REMAT_DTYPE_FP32, REMAT_DTYPE_BF16 };
    int dt;
    if (bench_parse_list(dtype, dnames, dvals, 2, 1, &dt) != 1) {
        fprintf(stderr, "--dtype expects fp32 or bf16, got '%s'\n", dtype);
        return 2;
    }
    if (strcmp(preset, "S") && strcmp(preset, "124m")) {
        fprintf(stderr, "--preset expects S or 124m, got '%s'\n", preset);
        return 2;
    }
    remat_config c;
    remat_config_default(&c);
    if (!strcmp(preset, "124m")) {
        c.n_layer = 12; c.n_embd = 768; c.n_head = 12; c.vocab = 50257; c.batch = 4; c.seq = 64;
    } else {
        c.n_layer = 6; c.n_embd = 256; c.n_head = 8; c.vocab = 512; c.batch = 8; c.seq = 256;
    }
    c.max_seq = c.seq;
    c.dtype = (remat_dtype)dt;
    remat_set_threads(threads);
    int cpu = threads == 1;

    static char pols[NPOL][REMAT_POLICY_MAX] = { "none", "full", "selective", "every:2" };
    remat_plan_row *row = calloc(1, sizeof *row);
    uint64_t minp;
    if (!row || remat_plan_min_peak(&c, &minp) || remat_plan_evaluate(&c, NULL, "none", 0, 1, row)) return fail("plan");
    uint64_t nonep = row->peak_bytes;
    remat_plan_row_clear(row);
    for (int k = 0; k < 2; k++) {
        uint64_t b = minp + (nonep - minp) * (uint64_t)(k + 1) / 4;
        if (remat_plan_optimal(&c, NULL, b, 1, row)) return fail("optimal");
        snprintf(pols[4 + k], sizeof pols[4 + k], "%s", row->policy);
        remat_plan_row_clear(row);
    }

    remat_model *m = NULL;
    if (remat_model_create(&c, 1, &m)) return fail("model");
    int n = c.batch * c.seq;
    int *in = malloc(sizeof(int) * (size_t)n), *tg = malloc(sizeof(int) * (size_t)n);
    uint32_t x = 1;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u; in[i] = (int)((x >> 8) % (uint32_t)c.vocab);
        x = x * 1664525u + 1013904223u; tg[i] = (int)((x >> 8) % (uint32_t)c.vocab);
    }
    static double pred[NMODE][NPOL][MAXR], meas[NPOL][MAXR], wall[NPOL][MAXR], probe_ms[MAXR];
    float loss;
    for (int r = 0; r < rounds; r++) {
        remat_profile *p[NMODE] = { NULL, NULL, NULL };
        /* run: a previous run of none, traced */
        remat_trace *tr = NULL;
        if (remat_trace_create(&tr) || remat_model_set_policy(m, "none")) return fail("trace");
        for (int s = 0; s <= calib; s++) {
            if (remat_model_set_trace(m, s ? tr : NULL, (uint64_t)s)) return fail("trace");
            if (remat_model_step(m, in, tg, 1, &loss)) return fail(remat_model_error(m));
        }
        remat_model_set_trace(m, NULL, 0);
        if (remat_profile_model(&c, 1, &p[0]) || remat_profile_calibrate(p[0], tr)) return fail("calibrate");
        remat_trace_free(tr);
        if (remat_profile_measure(&c, 5, &p[1])) return fail("profile");
        double t0 = bench_now_ms();
        if (remat_profile_model(&c, 1, &p[2])) return fail("probe");
        probe_ms[r] = bench_now_ms() - t0;
        for (int q = 0; q < NMODE; q++)
            for (int k = 0; k < NPOL; k++) {
                if (remat_plan_evaluate(&c, p[q], pols[k], 0, 0, row)) return fail(pols[k]);
                pred[q][k][r] = row->step_ms_pred;
                remat_plan_row_clear(row);
            }
        for (int q = 0; q < NMODE; q++) remat_profile_free(p[q]);
        for (int j = 0; j < NPOL; j++) {
            int k = (j + r) % NPOL;
            if (remat_model_set_policy(m, pols[k])) return fail(pols[k]);
            double w[8], u[8];
            for (int s = -1; s < steps; s++) {
                double w0 = bench_clock_ms(CLOCK_MONOTONIC), u0 = bench_clock_ms(CLOCK_THREAD_CPUTIME_ID);
                if (remat_model_step(m, in, tg, 1, &loss)) return fail(remat_model_error(m));
                if (s >= 0) { w[s] = bench_clock_ms(CLOCK_MONOTONIC) - w0; u[s] = bench_clock_ms(CLOCK_THREAD_CPUTIME_ID) - u0; }
            }
            wall[k][r] = median(w, steps);
            meas[k][r] = cpu ? median(u, steps) : wall[k][r];
            fprintf(stderr, "round %d %-28.28s run %8.1f profile %8.1f probe %8.1f | measured %8.1f (wall %8.1f) ms\n",
                    r + 1, pols[k], pred[0][k][r], pred[1][k][r], pred[2][k][r], meas[k][r], wall[k][r]);
        }
    }
    printf("preset %s, %s, %d thread%s, %d rounds x %d steps (medians over rounds); measured: %s; GEMM probe %.0f ms\n",
           preset, dtype, threads, threads == 1 ? "" : "s", rounds, steps, cpu ? "the thread's CPU time" : "wall clock",
           median(probe_ms, rounds));
    printf("%-28s %10s %10s", "policy", "measured", "wall");
    for (int q = 0; q < NMODE; q++) printf(" %10s %7s", mode_names[q], "error");
    printf("\n");
    double mm[NPOL], pp[NMODE][NPOL], worst[NMODE] = { 0 };
    for (int k = 0; k < NPOL; k++) {
        mm[k] = median(meas[k], rounds);
        printf("%-28.28s %7.1f ms %7.1f ms", k < 4 ? pols[k] : (k == 4 ? "optimum, budget 25%" : "optimum, budget 50%"),
               mm[k], median(wall[k], rounds));
        for (int q = 0; q < NMODE; q++) {
            pp[q][k] = median(pred[q][k], rounds);
            double e = 100 * (pp[q][k] - mm[k]) / mm[k];
            if (fabs(e) > worst[q]) worst[q] = fabs(e);
            printf(" %7.1f ms %+6.1f%%", pp[q][k], e);
        }
        printf("\n");
    }
    for (int q = 0; q < NMODE; q++) {
        int wrong = 0, pairs = 0;
        for (int a = 0; a < NPOL; a++)
            for (int b = a + 1; b < NPOL; b++) {
                if (fabs(mm[a] - mm[b]) < 0.01 * fmin(mm[a], mm[b])) continue;   /* a measured tie */
                pairs++;
                wrong += (mm[a] < mm[b]) != (pp[q][a] < pp[q][b]);
            }
        printf("%-8s worst |error| %5.1f%%, ranking: %d of %d pairs of rows in the measured order\n", mode_names[q],
               worst[q], pairs - wrong, pairs);
    }
    printf("optimum, budget 25%%: %s\noptimum, budget 50%%: %s\n", pols[4], pols[5]);
    remat_model_free(m);
    free(in); free(tg); free(row);
    return 0;
}
