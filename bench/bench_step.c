/*
 * bench_step.c -- step time and achieved GFLOP/s of one training step, next
 * to a GEMM figure measured in the same run (interleaved: GEMM, step, GEMM,
 * step, ...), so that the ratio means something on a machine whose speed
 * drifts.
 *
 *   build/bench/bench_step [--preset 124m|S|long|small] [--steps N] [--recompute P]
 *                          [--threads N] [--kernels LIST|all] [--gemm LIST] [--dtype LIST]
 *
 * Presets: 124m = GPT-2 124M shape (L12 d768 H12 V50257, B4 T64);
 *          S    = L6 d256 H8 V512, B8 T256;
 *          long = the 124M shape at B1 T2048;  small = the `make run` model.
 * --kernels: comma-separated kernel choices, ATTENTION+LMHEAD with ATTENTION
 * naive|flash and LMHEAD full|chunked (128 rows, as `--lmhead chunked`);
 * `all` = the four.  Default: naive+full.
 * --gemm: engines (onednn, cblas; default the build's); --dtype: fp32, bf16
 * (default fp32).  The variants are every (kernels, engine, dtype) of the
 * three lists.  Each gets its own model (same seed, same batch); every
 * round runs, for each variant in turn, the 1024^3 GEMM probe of its engine
 * and dtype (best of 3) and then one step (A B C ... A B C ...); the table
 * gives medians, the per-round ratio of each step to the first variant's,
 * and the step's GFLOP/s as a share of its own probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "remat.h"
#include "bench_util.h"

#define MAXV 16

typedef struct variant {
    int att, chunk;
    remat_gemm_engine gemm;
    remat_dtype dtype;
    remat_model *m;
    char name[64];
} variant;

static int parse_kernels(const char *arg, int att[4], int chunk[4])
{
    static const char *const names[4] = {"naive+full", "naive+chunked", "flash+full", "flash+chunked"};
    static const int index[4] = {0, 1, 2, 3};
    int ks[4], n = !strcmp(arg, "all") ? 4 : bench_parse_list(arg, names, index, 4, 4, ks);
    for (int i = 0; i < n; i++) {
        int k = !strcmp(arg, "all") ? i : ks[i];
        att[i] = k >= 2;
        chunk[i] = k % 2 ? 128 : 0;
    }
    return n;
}

/* GEMM probe: the best of 3 back-to-back 1024^3 products of the variant's
 * engine and dtype, so that a preempted call does not flatter the step */
static double probe(const variant *v)
{
    remat_gemm_set(v->gemm);
    return remat_gemm_gflops(1024, 3, v->dtype);
}

int main(int argc, char **argv)
{
    const char *preset = "124m", *policy = "none", *kernels = "naive+full", *gemms = NULL, *dtypes = "fp32";
    int steps = 6, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--recompute") && i + 1 < argc) policy = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = argv[++i];
        else if (!strcmp(argv[i], "--gemm") && i + 1 < argc) gemms = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dtypes = argv[++i];
        else {
            fprintf(stderr, "usage: bench_step [--preset 124m|S|long|small] [--steps N] [--recompute P] [--threads N] "
                            "[--kernels LIST|all] [--gemm onednn,cblas] [--dtype fp32,bf16]\n");
            return 2;
        }
    }
    if (steps < 1 || steps > 1000) { fprintf(stderr, "bench_step: --steps must be in [1, 1000]\n"); return 2; }
    int att[4], chunk[4], nk = parse_kernels(kernels, att, chunk);
    static const char *const gnames[] = { "onednn", "cblas" }, *const dnames[] = { "fp32", "bf16" };
    static const int gvals[] = { REMAT_GEMM_ONEDNN, REMAT_GEMM_CBLAS }, dvals[] = { REMAT_DTYPE_FP32, REMAT_DTYPE_BF16 };
    int gl[4], dl[4], ng = 1, nd = bench_parse_list(dtypes, dnames, dvals, 2, 4, dl);
    gl[0] = remat_gemm_get();
    if (gemms) ng = bench_parse_list(gemms, gnames, gvals, 2, 4, gl);
    if (nk < 1 || ng < 1 || nd < 1) {
        fprintf(stderr, "bench_step: --kernels takes naive+full, naive+chunked, flash+full, flash+chunked or all; "
                        "--gemm onednn and/or cblas; --dtype fp32 and/or bf16\n");
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
    variant v[MAXV];
    int nv = 0;
    for (int k = 0; k < nk; k++)
        for (int g = 0; g < ng; g++)
            for (int d = 0; d < nd && nv < MAXV; d++) {
                if (dl[d] == REMAT_DTYPE_BF16 && gl[g] != REMAT_GEMM_ONEDNN) continue;   /* no bf16 CBLAS */
                variant *w = &v[nv++];
                memset(w, 0, sizeof *w);
                w->att = att[k]; w->chunk = chunk[k]; w->gemm = gl[g]; w->dtype = dl[d];
                snprintf(w->name, sizeof w->name, "%s+%s %s %s", w->att ? "flash" : "naive", w->chunk ? "chunked" : "full",
                         remat_gemm_name(w->gemm), bench_dtype_name(w->dtype));
                remat_config ck = c;
                ck.attention = w->att ? REMAT_ATTENTION_FLASH : REMAT_ATTENTION_NAIVE;
                ck.lmhead_chunk = w->chunk;
                ck.dtype = w->dtype;
                if (remat_gemm_set(w->gemm) || remat_model_create(&ck, 1, &w->m) || remat_model_set_policy(w->m, policy)) {
                    fprintf(stderr, "bench_step: %s: %s\n", w->name, remat_errmsg());
                    return 1;
                }
            }
    size_t N = (size_t)c.batch * c.seq;
    int *in = malloc(N * sizeof *in), *tg = malloc(N * sizeof *tg);
    for (size_t i = 0; i < N; i++) { in[i] = (int)((i * 7919) % (size_t)c.vocab); tg[i] = (int)((i * 104729 + 1) % (size_t)c.vocab); }
    double *ms = malloc(sizeof(double) * steps * nv), *ratio = malloc(sizeof(double) * steps * nv);
    double *gf = malloc(sizeof(double) * steps * nv);
    float loss[MAXV];
    for (int k = 0; k < nv; k++) {   /* warm-up: one probe and one step each */
        probe(&v[k]);
        if (remat_model_step(v[k].m, in, tg, 1, &loss[k])) { fprintf(stderr, "bench_step: %s\n", remat_model_error(v[k].m)); return 1; }
    }
    for (int s = 0; s < steps; s++) {
        for (int k = 0; k < nv; k++) {
            gf[k * steps + s] = probe(&v[k]);
            double t0 = bench_now_ms();
            if (remat_model_step(v[k].m, in, tg, 1, &loss[k])) { fprintf(stderr, "bench_step: %s\n", remat_model_error(v[k].m)); return 1; }
            ms[k * steps + s] = bench_now_ms() - t0;
        }
        for (int k = 0; k < nv; k++) ratio[k * steps + s] = ms[k * steps + s] / ms[s];
    }
    printf("preset %s (L%d d%d H%d V%d B%d T%d), policy %s, %d threads, %d rounds; GEMM: each variant's own 1024^3 "
           "probe (engine, dtype), median of the rounds\n", preset, c.n_layer, c.n_embd, c.n_head, c.vocab, c.batch,
           c.seq, remat_schedule_policy(remat_model_schedule(v[0].m)), remat_get_threads(), steps);
    printf("%-30s %10s %7s %9s %9s %7s %12s %12s %9s\n", "variant", "step ms", "ratio", "GFLOP/s", "GEMM GF", "%GEMM",
           "act peak MiB", "step peak MiB", "loss");
    for (int k = 0; k < nv; k++) {
        remat_stats st;
        remat_model_stats(v[k].m, &st);
        double med = remat_median(ms + k * steps, (size_t)steps), g = st.flops / (med * 1e6);
        double probe_gf = remat_median(gf + k * steps, (size_t)steps);
        printf("%-30s %10.1f %7.3f %9.1f %9.1f %6.1f%% %12.2f %12.2f %9.4f\n", v[k].name, med,
               remat_median(ratio + k * steps, (size_t)steps), g, probe_gf, 100.0 * g / probe_gf, st.act_peak_bytes / 1048576.0,
               st.step_peak_bytes / 1048576.0, (double)loss[k]);
    }
    free(ms); free(ratio); free(gf); free(in); free(tg);
    for (int k = 0; k < nv; k++) remat_model_free(v[k].m);
    return 0;
}
