/*
 * bench_attention.c -- the attention core alone: forward (scores + values,
 * or flash stats + values) and backward of the naive and the flash kernel,
 * interleaved (naive, flash, naive, flash, ...), medians over rounds.  The
 * forward's first op (the naive scores, or the flash statistics) is also
 * timed alone: it is what `selective` recomputes.
 *
 *   build/bench/bench_attention [--shape B,T,C,NH] [--rounds N] [--dropout P] [--kernel naive|flash|both]
 *                               [--gemm onednn,cblas] [--dtype fp32,bf16]
 *
 * Default shape: the GPT-2 124M layer at B4 T64 (4,64,768,12).  The naive
 * kernel needs B*NH*T*T elements for the probabilities.  Every (kernel,
 * GEMM engine, dtype) is a variant, all interleaved in each round; --gemm
 * picks the engine of the attention tiles' GEMMs (the tile call site), so
 * this is where the two engines' per-call costs on small products inside
 * OpenMP regions are compared.  Inputs are fixed pseudo-random numbers; the
 * checksum of dqkv is printed so that two builds (or engines) can be
 * compared for the same answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"
#include "kernels/bf16.h"
#include "bench_util.h"

typedef struct variant { int kernel, engine, dtype; double *t; double sum; } variant;

int main(int argc, char **argv)
{
    int B = 4, T = 64, C = 768, NH = 12, rounds = 5, use[2] = {1, 1};
    int engines[2] = {remat_gemm_get()}, ne = 1, dts[2] = {REMAT_DTYPE_FP32}, nd = 1;
    float p = 0.0f;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
            if (sscanf(argv[++i], "%d,%d,%d,%d", &B, &T, &C, &NH) != 4) B = 0;
        } else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dropout") && i + 1 < argc) p = (float)atof(argv[++i]);
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) {
            const char *k = argv[++i];
            use[0] = !strcmp(k, "naive") || !strcmp(k, "both");
            use[1] = !strcmp(k, "flash") || !strcmp(k, "both");
        } else if (!strcmp(argv[i], "--gemm") && i + 1 < argc) {
            static const char *const names[] = { "onednn", "cblas" };
            static const int values[] = { REMAT_GEMM_ONEDNN, REMAT_GEMM_CBLAS };
            ne = bench_parse_list(argv[++i], names, values, 2, 2, engines);
        } else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            static const char *const names[] = { "fp32", "bf16" };
            static const int values[] = { REMAT_DTYPE_FP32, REMAT_DTYPE_BF16 };
            nd = bench_parse_list(argv[++i], names, values, 2, 2, dts);
        } else {
            fprintf(stderr, "usage: bench_attention [--shape B,T,C,NH] [--rounds N] [--dropout P] "
                            "[--kernel naive|flash|both] [--gemm onednn,cblas] [--dtype fp32,bf16]\n");
            return 2;
        }
    }
    if (B < 1 || T < 1 || NH < 1 || C < NH || C % NH || T > 65536 || rounds < 1 || rounds > 1000 || p < 0 || p >= 1 ||
        (!use[0] && !use[1]) || ne < 1 || nd < 1) {
        fprintf(stderr, "bench_attention: bad shape, rounds, dropout, kernel, engine or dtype\n");
        return 2;
    }
    variant v[8];
    int nv = 0;
    for (int k = 0; k < 2; k++)
        for (int e = 0; e < ne; e++)
            for (int d = 0; d < nd; d++) {
                if (!use[k]) continue;
                if (!remat_gemm_available(engines[e]) || (dts[d] == REMAT_DTYPE_BF16 && engines[e] != REMAT_GEMM_ONEDNN)) {
                    fprintf(stderr, "bench_attention: %s %s is not available in this build\n",
                            remat_gemm_name(engines[e]), bench_dtype_name(dts[d]));
                    return 2;
                }
                v[nv++] = (variant){ k, engines[e], dts[d], NULL, 0 };
            }
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    /* fp32 buffers, and bf16 copies of the inputs (the outputs get room for fp32) */
    float *qkv = malloc(nq * 4), *dq = malloc(nq * 4), *out = malloc(no * 4), *g = malloc(no * 4);
    remat_bf16 *qkv16 = malloc(nq * 2), *g16 = malloc(no * 2);
    float *acc = malloc(nq * 4);
    float *lse = malloc((size_t)B * NH * T * 4), *att = use[0] ? malloc((size_t)B * NH * T * T * 4) : NULL;
    double *t = malloc(sizeof(double) * 3 * rounds * nv);
    if (!qkv || !dq || !out || !g || !qkv16 || !g16 || !acc || !lse || (use[0] && !att) || !t) {
        fprintf(stderr, "bench_attention: out of memory\n");
        return 1;
    }
    uint32_t s = 12345;
    for (size_t i = 0; i < nq; i++) { s = s * 1664525u + 1013904223u; qkv[i] = ((s >> 8) / 16777216.0f) - 0.5f; }
    for (size_t i = 0; i < no; i++) { s = s * 1664525u + 1013904223u; g[i] = ((s >> 8) / 16777216.0f) - 0.5f; }
    remat_bf16_from_f32(qkv16, qkv, nq);
    remat_bf16_from_f32(g16, g, no);
    remat_dropout d = remat_dropout_make(p, 7);
    for (int r = -1; r < rounds; r++)   /* round -1 warms up */
        for (int i = 0; i < nv; i++) {
            variant *w = &v[i];
            int dt = w->dtype, bf = dt == REMAT_DTYPE_BF16;
            const void *q = bf ? (const void *)qkv16 : qkv, *go = bf ? (const void *)g16 : g;
            float *a = bf ? acc : NULL;
            remat_gemm_set(w->engine);
            remat_attn_layout al = remat_attn_layout_mha(q, B, T, C, NH, dt);
            double t0 = bench_now_ms();
            if (w->kernel == 0) remat_attention_scores_forward(att, &al);
            else remat_flash_attention_stats(lse, &al);
            double ts = bench_now_ms();
            if (w->kernel == 0) remat_attention_values_forward(out, att, &al, &d, a);
            else remat_flash_attention_values(out, lse, &al, &d, a);
            double t1 = bench_now_ms();
            if (w->kernel == 0) remat_attention_backward(dq, go, att, &al, &d, a);
            else remat_flash_attention_backward(dq, go, lse, &al, &d, a);
            double t2 = bench_now_ms();
            if (r < 0) continue;
            t[(3 * i) * rounds + r] = t1 - t0;
            t[(3 * i + 1) * rounds + r] = t2 - t1;
            t[(3 * i + 2) * rounds + r] = ts - t0;
            if (r == 0)
                for (size_t j = 0; j < nq; j++)
                    w->sum += bf ? remat_bf16_to_float(((const remat_bf16 *)dq)[j]) : dq[j];
        }
    printf("attention B%d T%d C%d NH%d dropout %.2f, %d rounds (medians, interleaved)\n", B, T, C, NH, (double)p, rounds);
    for (int i = 0; i < nv; i++)
        printf("%-6s %-7s %-5s forward %9.2f ms (%s %8.2f)  backward %9.2f ms  (dqkv checksum %.6g)\n",
               v[i].kernel ? "flash" : "naive", remat_gemm_name(v[i].engine), bench_dtype_name(v[i].dtype),
               remat_median(t + 3 * i * rounds, (size_t)rounds), v[i].kernel ? "stats " : "scores",
               remat_median(t + (3 * i + 2) * rounds, (size_t)rounds), remat_median(t + (3 * i + 1) * rounds, (size_t)rounds),
               v[i].sum);
    free(qkv); free(dq); free(out); free(g); free(qkv16); free(g16); free(acc); free(lse); free(att); free(t);
    return 0;
}
