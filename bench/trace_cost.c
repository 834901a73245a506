/*
 * trace_cost.c -- what tracing costs a training step: steps with and
 * without a trace, alternated in one process (A B A B ...), so that a
 * machine whose speed drifts slows both alike.
 *
 *   build/bench/trace_cost [--preset default|S|124m] [--pairs N] [--threads N] [--policy P]
 *
 * Reports the median step time of each, the median of the per-pair ratios
 * (traced / untraced) and the cost per instruction it implies.  Timed by
 * the wall clock (CLOCK_MONOTONIC), as remat train times its steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "remat.h"
#include "bench_util.h"

int main(int argc, char **argv)
{
    const char *preset = "default", *policy = "none";
    int pairs = 40, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--preset")) preset = argv[i + 1];
        else if (!strcmp(argv[i], "--pairs")) pairs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--policy")) policy = argv[i + 1];
        else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    if (pairs < 2 || pairs > 100000) { fprintf(stderr, "pairs in [2, 100000]\n"); return 2; }
    remat_config c;
    remat_config_default(&c);
    if (!strcmp(preset, "S")) { c.n_layer = 6; c.n_embd = 256; c.n_head = 8; c.vocab = 512; c.batch = 8; c.seq = 256; }
    else if (!strcmp(preset, "124m")) { c.n_layer = 12; c.n_embd = 768; c.n_head = 12; c.vocab = 50257; c.batch = 4; c.seq = 64; }
    c.max_seq = c.seq;
    remat_set_threads(threads);
    remat_model *m = NULL;
    remat_trace *t = NULL;
    if (remat_model_create(&c, 1, &m) || remat_model_set_policy(m, policy) || remat_trace_create(&t)) {
        fprintf(stderr, "%s\n", remat_errmsg());
        return 1;
    }
    int n = c.batch * c.seq;
    int *in = malloc(sizeof(int) * (size_t)n), *tg = malloc(sizeof(int) * (size_t)n);
    double *off = malloc(sizeof(double) * (size_t)pairs), *on = malloc(sizeof(double) * (size_t)pairs),
           *ratio = malloc(sizeof(double) * (size_t)pairs);
    for (int i = 0; i < n; i++) { in[i] = (i * 7) % c.vocab; tg[i] = (i * 13 + 1) % c.vocab; }
    float loss;
    for (int p = -2; p < pairs; p++)
        for (int k = 0; k < 2; k++) {
            int traced = (k + p) & 1;   /* the order alternates too */
            remat_model_set_trace(m, traced ? t : NULL, (uint64_t)(p + 3) * 2 + (uint64_t)k);
            double t0 = bench_now_ms();
            if (remat_model_step(m, in, tg, 1, &loss)) { fprintf(stderr, "%s\n", remat_model_error(m)); return 1; }
            double ms = bench_now_ms() - t0;
            if (p >= 0) (traced ? on : off)[p] = ms;
        }
    for (int p = 0; p < pairs; p++) ratio[p] = on[p] / off[p];
    size_t ins = remat_schedule_length(remat_model_schedule(m));
    double r = remat_median(ratio, (size_t)pairs), a = remat_median(off, (size_t)pairs), b = remat_median(on, (size_t)pairs);
    printf("preset %s, policy %s, %d threads, %d pairs: untraced %.3f ms, traced %.3f ms (medians); "
           "traced/untraced %.4f (median of pairs): %+.2f%%, %+.2f us per instruction (%zu a step)\n",
           preset, policy, remat_get_threads(), pairs, a, b, r, 100 * (r - 1), (r - 1) * a * 1e3 / (double)ins, ins);
    remat_trace_free(t);
    remat_model_free(m);
    free(in); free(tg); free(off); free(on); free(ratio);
    return 0;
}
