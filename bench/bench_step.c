/*
 * bench_step.c -- step time and achieved GFLOP/s of one training step, next
 * to an SGEMM figure measured in the same run (interleaved: SGEMM, step,
 * SGEMM, step, ...), so that the ratio means something on a machine whose
 * speed drifts.
 *
 *   build/bench/bench_step [--preset 124m|S|long|small] [--steps N] [--recompute P]
 *                          [--threads N] [--kernels LIST|all]
 *
 * Presets: 124m = GPT-2 124M shape (L12 d768 H12 V50257, B4 T64);
 *          S    = L6 d256 H8 V512, B8 T256;
 *          long = the 124M shape at B1 T2048;  small = the `make run` model.
 * --kernels: comma-separated kernel choices, ATTENTION+LMHEAD with ATTENTION
 * naive|flash and LMHEAD full|chunked (128 rows, as `--lmhead chunked`);
 * `all` = the four.  Default: naive+full.  Each choice gets its own model
 * (same seed, same batch); every round runs one SGEMM and then one step of
 * each choice in turn (A B C D A B C D ...), and the table gives medians
 * and the per-round ratio of each step to the first choice's.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "remat.h"
#include "bench_util.h"

/* GFLOP/s of an n x n x n SGEMM: the best of 3 back-to-back calls, so that
 * the first call's thread wake-up and cold caches do not flatter the step */
static double sgemm_gflops(int n, float *a, float *b, float *c)
{
    double best = 0;
    for (int r = 0; r < 3; r++) {
        double t0 = bench_now_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * n * (double)n / ((bench_now_ms() - t0) * 1e6);
        if (g > best) best = g;
    }
    return best;
}

#define MAXK 4

static int parse_kernels(const char *arg, int att[MAXK], int chunk[MAXK])
{
    static const char *names[MAXK] = {"naive+full", "naive+chunked", "flash+full", "flash+chunked"};
    if (!strcmp(arg, "all")) {
        for (int k = 0; k < MAXK; k++) { att[k] = k >= 2; chunk[k] = k % 2 ? 128 : 0; }
        return MAXK;
    }
    int n = 0;
    const char *p = arg;
    while (*p) {
        size_t len = strcspn(p, ",");
        int k = 0;
        while (k < MAXK && !(strlen(names[k]) == len && !strncmp(p, names[k], len))) k++;
        if (k == MAXK || n == MAXK) return -1;
        att[n] = k >= 2;
        chunk[n] = k % 2 ? 128 : 0;
        n++;
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

int main(int argc, char **argv)
{
    const char *preset = "124m", *policy = "none", *kernels = "naive+full";
    int steps = 6, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--recompute") && i + 1 < argc) policy = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = argv[++i];
        else {
            fprintf(stderr, "usage: bench_step [--preset 124m|S|long|small] [--steps N] [--recompute P] [--threads N] "
                            "[--kernels LIST|all]\n");
            return 2;
        }
    }
    if (steps < 1 || steps > 1000) { fprintf(stderr, "bench_step: --steps must be in [1, 1000]\n"); return 2; }
    int att[MAXK], chunk[MAXK], nk = parse_kernels(kernels, att, chunk);
    if (nk < 1) {
        fprintf(stderr, "bench_step: --kernels takes up to 4 of naive+full, naive+chunked, flash+full, flash+chunked, "
                        "or all; got '%s'\n", kernels);
        return 2;
    }
    remat_config c;
    remat_config_default(&c);
    if (!strcmp(preset, "124m") || !strcmp(preset, "long")) {
        c.n_layer = 12; c.n_embd = 768; c.n_head = 12; c.vocab = 50257; c.batch = 4; c.seq = 64;
        if (!strcmp(preset, "long")) { c.batch = 1; c.seq = 2048; }
    } else if (!strcmp(preset, "S")) {
        c.n_layer = 6; c.n_embd = 256; c.n_head = 8; c.vocab = 512; c.batch = 8; c.seq = 256;
    } else if (strcmp(preset, "small")) {
        fprintf(stderr, "bench_step: unknown preset '%s' (124m, S, long, small)\n", preset);
        return 2;
    }
    c.max_seq = c.seq;
    remat_set_threads(threads);
    remat_model *m[MAXK] = {0};
    for (int k = 0; k < nk; k++) {
        remat_config ck = c;
        ck.attention = att[k] ? REMAT_ATTENTION_FLASH : REMAT_ATTENTION_NAIVE;
        ck.lmhead_chunk = chunk[k];
        if (remat_model_create(&ck, 1, &m[k]) || remat_model_set_policy(m[k], policy)) {
            fprintf(stderr, "bench_step: %s\n", remat_errmsg());
            return 1;
        }
    }
    size_t N = (size_t)c.batch * c.seq;
    int *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    for (size_t i = 0; i < N; i++) { in[i] = (int)((i * 7919) % (size_t)c.vocab); tg[i] = (int)((i * 104729 + 1) % (size_t)c.vocab); }
    int n = 1024;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *cc = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) { a[i] = (float)(i % 13) * 0.01f; b[i] = (float)(i % 7) * 0.02f; }
    double *ms = malloc(sizeof(double) * steps * MAXK), *ratio = malloc(sizeof(double) * steps * MAXK);
    double *sg = malloc(sizeof(double) * steps);
    float loss[MAXK];
    sgemm_gflops(n, a, b, cc);                                      /* warm-up */
    for (int k = 0; k < nk; k++)
        if (remat_model_step(m[k], in, tg, 1, &loss[k])) { fprintf(stderr, "bench_step: %s\n", remat_model_error(m[k])); return 1; }
    for (int s = 0; s < steps; s++) {
        sg[s] = sgemm_gflops(n, a, b, cc);
        for (int k = 0; k < nk; k++) {
            double t0 = bench_now_ms();
            if (remat_model_step(m[k], in, tg, 1, &loss[k])) { fprintf(stderr, "bench_step: %s\n", remat_model_error(m[k])); return 1; }
            ms[k * steps + s] = bench_now_ms() - t0;
        }
        for (int k = 0; k < nk; k++) ratio[k * steps + s] = ms[k * steps + s] / ms[s];
    }
    double sgm = bench_median(sg, steps);
    printf("preset %s (L%d d%d H%d V%d B%d T%d), policy %s, %d threads, %d rounds, SGEMM %d^3 %.1f GFLOP/s "
           "(median, same run)\n", preset, c.n_layer, c.n_embd, c.n_head, c.vocab, c.batch, c.seq,
           remat_schedule_policy(remat_model_schedule(m[0])), remat_get_threads(), steps, n, sgm);
    printf("%-14s %10s %7s %9s %8s %12s %12s %9s\n", "kernels", "step ms", "ratio", "GFLOP/s", "%SGEMM", "act peak MiB",
           "step peak MiB", "loss");
    for (int k = 0; k < nk; k++) {
        remat_stats st;
        remat_model_stats(m[k], &st);
        double med = bench_median(ms + k * steps, steps), gf = st.flops / (med * 1e6);
        char name[32];
        snprintf(name, sizeof name, "%s+%s", att[k] ? "flash" : "naive", chunk[k] ? "chunked" : "full");
        printf("%-14s %10.1f %7.3f %9.1f %7.1f%% %12.2f %12.2f %9.4f\n", name, med, bench_median(ratio + k * steps, steps),
               gf, 100.0 * gf / sgm, st.act_peak_bytes / 1048576.0, st.step_peak_bytes / 1048576.0, (double)loss[k]);
    }
    free(ms); free(ratio); free(sg); free(a); free(b); free(cc); free(in); free(tg);
    for (int k = 0; k < nk; k++) remat_model_free(m[k]);
    return 0;
}
