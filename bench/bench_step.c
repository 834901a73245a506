/*
 * bench_step.c -- step time and achieved GFLOP/s of one training step, next
 * to an SGEMM figure measured in the same run (interleaved: SGEMM, step,
 * SGEMM, step, ...), so that the ratio means something on a machine whose
 * speed drifts.
 *
 *   build/bench/bench_step [--preset 124m|S|small] [--steps N] [--recompute P] [--threads N]
 *
 * Presets: 124m = GPT-2 124M shape (L12 d768 H12 V50257, B4 T64);
 *          S    = L6 d256 H8 V512, B8 T256;  small = the `make run` model.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "remat.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof *x, cmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* GFLOP/s of an n x n x n SGEMM: the best of 3 back-to-back calls, so that
 * the first call's thread wake-up and cold caches do not flatter the step */
static double sgemm_gflops(int n, float *a, float *b, float *c)
{
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = now_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * n * (double)n / ((now_ms() - t0) * 1e6);
        if (g > best) best = g;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *preset = "124m", *policy = "none";
    int steps = 6, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--recompute") && i + 1 < argc) policy = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else { fprintf(stderr, "usage: bench_step [--preset 124m|S|small] [--steps N] [--recompute P] [--threads N]\n"); return 2; }
    }
    if (steps < 1 || steps > 1000) { fprintf(stderr, "bench_step: --steps must be in [1, 1000]\n"); return 2; }
    remat_config c;
    remat_config_default(&c);
    if (!strcmp(preset, "124m")) {
        c.n_layer = 12; c.n_embd = 768; c.n_head = 12; c.vocab = 50257; c.batch = 4; c.seq = 64;
    } else if (!strcmp(preset, "S")) {
        c.n_layer = 6; c.n_embd = 256; c.n_head = 8; c.vocab = 512; c.batch = 8; c.seq = 256;
    } else if (strcmp(preset, "small")) {
        fprintf(stderr, "bench_step: unknown preset '%s' (124m, S, small)\n", preset);
        return 2;
    }
    c.max_seq = c.seq;
    remat_set_threads(threads);
    remat_model *m = NULL;
    if (remat_model_create(&c, 1, &m) || remat_model_set_policy(m, policy)) {
        fprintf(stderr, "bench_step: %s\n", remat_errmsg());
        return 1;
    }
    size_t N = (size_t)c.batch * c.seq;
    int *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    for (size_t i = 0; i < N; i++) { in[i] = (int)((i * 7919) % (size_t)c.vocab); tg[i] = (int)((i * 104729 + 1) % (size_t)c.vocab); }
    int n = 1024;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *cc = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 13) * 0.01f; b[i] = (float)(i % 7) * 0.02f; }
    double *ms = malloc(sizeof(double) * steps), *sg = malloc(sizeof(double) * steps);
    float loss;
    sgemm_gflops(n, a, b, cc);                                      /* warm-up */
    if (remat_model_step(m, in, tg, 1, &loss)) { fprintf(stderr, "bench_step: %s\n", remat_model_error(m)); return 1; }
    for (int s = 0; s < steps; s++) {
        sg[s] = sgemm_gflops(n, a, b, cc);
        double t0 = now_ms();
        if (remat_model_step(m, in, tg, 1, &loss)) { fprintf(stderr, "bench_step: %s\n", remat_model_error(m)); return 1; }
        ms[s] = now_ms() - t0;
    }
    remat_stats st;
    remat_model_stats(m, &st);
    double med = median(ms, steps), sgm = median(sg, steps);
    double gf = st.flops / (med * 1e6);
    printf("preset %s (L%d d%d H%d V%d B%d T%d), policy %s, %d threads, %d steps\n", preset, c.n_layer, c.n_embd,
           c.n_head, c.vocab, c.batch, c.seq, remat_schedule_policy(remat_model_schedule(m)), remat_get_threads(), steps);
    printf("step %.1f ms (median) | %.1f GFLOP/s | SGEMM %d^3 %.1f GFLOP/s (median, same run) | %.1f%% of SGEMM\n",
           med, gf, n, sgm, 100.0 * gf / sgm);
    printf("act peak %.2f MiB | loss %.4f\n", st.act_peak_bytes / 1048576.0, (double)loss);
    free(ms); free(sg); free(a); free(b); free(cc); free(in); free(tg);
    remat_model_free(m);
    return 0;
}
