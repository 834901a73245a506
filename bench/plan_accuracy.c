/*
 * plan_accuracy.c -- the planner's predicted step time against the measured
 * one, for named policies and for plans the planner picks.
 *
 *   build/bench/plan_accuracy [--preset S|124m] [--rounds R] [--steps K] [--threads N]
 *
 * Presets: S = L6 d256 H8 V512, B8 T256; 124m = GPT-2 124M (L12 d768 H12
 * V50257, B4 T64).  Each round measures a profile (remat_profile_measure),
 * predicts every policy with it (remat_plan_evaluate), then runs each policy
 * for one warm-up step and K timed steps on one model, policies one after
 * the other, so that load from other processes on a shared machine falls on
 * all of them alike.  A step is timed by the wall clock and, with one
 * thread, by the thread's CPU time (which is what the wall time is on an
 * idle machine; the profile is timed the same way).  The table reports
 * medians over rounds and the error of the prediction against each.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "remat.h"
#include "bench_util.h"

#define NPOL 6
#define MAXR 32

static double median(const double *v, int n)
{
    double c[MAXR * 8];
    memcpy(c, v, sizeof(double) * (size_t)n);
    return remat_median(c, (size_t)n);
}

int main(int argc, char **argv)
{
    const char *preset = "S";
    int rounds = 3, steps = 3, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--preset")) preset = argv[i + 1];
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    if (rounds < 1 || rounds > MAXR || steps < 1 || steps > 8) { fprintf(stderr, "rounds in [1,32], steps in [1,8]\n"); return 2; }
    remat_config c;
    remat_config_default(&c);
    if (!strcmp(preset, "124m")) {
        c.n_layer = 12; c.n_embd = 768; c.n_head = 12; c.vocab = 50257; c.batch = 4; c.seq = 64;
    } else {
        c.n_layer = 6; c.n_embd = 256; c.n_head = 8; c.vocab = 512; c.batch = 8; c.seq = 256;
    }
    c.max_seq = c.seq;
    remat_set_threads(threads);

    /* the policies: four named ones and the planner's plans at 25% and 50%
     * of the way from its minimum activation peak to that of none (chosen
     * once, with the FLOP model, so that every round runs the same ones) */
    static char pols[NPOL][REMAT_POLICY_MAX] = { "none", "selective", "full", "every:2,selective" };
    remat_plan_row *row = calloc(1, sizeof *row);
    uint64_t minp;
    if (!row || remat_plan_min_peak(&c, &minp) || remat_plan_evaluate(&c, NULL, "none", 0, 1, row)) {
        fprintf(stderr, "%s\n", remat_errmsg());
        return 1;
    }
    uint64_t nonep = row->peak_bytes;
    remat_plan_row_clear(row);
    for (int k = 0; k < 2; k++) {
        uint64_t b = minp + (nonep - minp) * (uint64_t)(k + 1) / 4;
        if (remat_plan_optimal(&c, NULL, b, 1, row)) { fprintf(stderr, "%s\n", remat_errmsg()); return 1; }
        snprintf(pols[4 + k], sizeof pols[4 + k], "%s", row->policy);
        remat_plan_row_clear(row);
    }

    remat_model *m = NULL;
    if (remat_model_create(&c, 1, &m)) { fprintf(stderr, "%s\n", remat_errmsg()); return 1; }
    int n = c.batch * c.seq;
    int *in = malloc(sizeof(int) * (size_t)n), *tg = malloc(sizeof(int) * (size_t)n);
    uint32_t x = 1;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u; in[i] = (int)((x >> 8) % (uint32_t)c.vocab);
        x = x * 1664525u + 1013904223u; tg[i] = (int)((x >> 8) % (uint32_t)c.vocab);
    }
    static double pred[NPOL][MAXR], wall[NPOL][MAXR], cpu[NPOL][MAXR];
    for (int r = 0; r < rounds; r++) {
        remat_profile *p = NULL;
        if (remat_profile_measure(&c, 5, &p)) { fprintf(stderr, "%s\n", remat_errmsg()); return 1; }
        for (int k = 0; k < NPOL; k++) {
            if (remat_plan_evaluate(&c, p, pols[k], 0, 0, row) || remat_model_set_policy(m, pols[k])) {
                fprintf(stderr, "%s: %s\n", pols[k], remat_errmsg());
                return 1;
            }
            pred[k][r] = row->step_ms_pred;
            remat_plan_row_clear(row);
            double w[8], u[8];
            float loss;
            for (int s = -1; s < steps; s++) {
                double w0 = bench_clock_ms(CLOCK_MONOTONIC), u0 = bench_clock_ms(CLOCK_THREAD_CPUTIME_ID);
                if (remat_model_step(m, in, tg, 1, &loss)) { fprintf(stderr, "%s\n", remat_model_error(m)); return 1; }
                if (s >= 0) { w[s] = bench_clock_ms(CLOCK_MONOTONIC) - w0; u[s] = bench_clock_ms(CLOCK_THREAD_CPUTIME_ID) - u0; }
            }
            wall[k][r] = median(w, steps);
            cpu[k][r] = median(u, steps);
            fprintf(stderr, "round %d %-36.36s predicted %9.1f ms  wall %9.1f ms  cpu %9.1f ms\n", r + 1, pols[k],
                    pred[k][r], wall[k][r], cpu[k][r]);
        }
        remat_profile_free(p);
    }
    printf("preset %s, %d thread%s, %d rounds x %d steps (medians over rounds)\n", preset, threads,
           threads == 1 ? "" : "s", rounds, steps);
    printf("%-40s %12s %12s %8s %12s %8s\n", "policy", "predicted", "cpu", "error", "wall", "error");
    double worst_cpu = 0, worst_wall = 0;
    for (int k = 0; k < NPOL; k++) {
        double pr = median(pred[k], rounds), cu = median(cpu[k], rounds), wa = median(wall[k], rounds);
        double ec = 100 * (pr - cu) / cu, ew = 100 * (pr - wa) / wa;
        if (fabs(ec) > worst_cpu) worst_cpu = fabs(ec);
        if (fabs(ew) > worst_wall) worst_wall = fabs(ew);
        printf("%-40.40s %9.1f ms %9.1f ms %+7.1f%% %9.1f ms %+7.1f%%\n", pols[k], pr, cu, ec, wa, ew);
    }
    printf("worst |error|: %.1f%% against CPU time, %.1f%% against wall time\n", worst_cpu, worst_wall);
    remat_model_free(m);
    free(in); free(tg); free(row);
    return 0;
}
