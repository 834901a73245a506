/*
 * bench_gemm.c -- every matrix product of a training step at its own shape,
 * through the GEMM seam (remat_gemm) on each engine and dtype, interleaved:
 * for each shape, every round runs CBLAS fp32, oneDNN fp32 and oneDNN bf16
 * once each (A B C A B C ...), and the table gives each one's median
 * GFLOP/s.  This is where the engines are compared shape by shape, beside
 * the 1024^3 probe the other benchmarks use.
 *
 *   build/bench/bench_gemm [--preset 124m|S] [--rounds N]
 *
 * Shapes, for N = B*T rows: each linear layer's forward (N x OC x IC, the
 * weight transposed), input gradient (N x IC x OC) and weight gradient
 * (OC x IC x N, the gradient transposed), for c_attn, c_proj, c_fc,
 * mlp.c_proj and the LM head, then the 1024^3 probe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/gemm.h"
#include "bench_util.h"

typedef struct shape { const char *what; int M, N, K, ta, tb; } shape;

int main(int argc, char **argv)
{
    const char *preset = "124m";
    int rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else { fprintf(stderr, "usage: bench_gemm [--preset 124m|S] [--rounds N]\n"); return 2; }
    }
    int C, Vp, N;
    if (!strcmp(preset, "124m")) { C = 768; Vp = 50304; N = 4 * 64; }
    else if (!strcmp(preset, "S")) { C = 256; Vp = 512; N = 8 * 256; }
    else { fprintf(stderr, "bench_gemm: --preset 124m or S\n"); return 2; }
    if (rounds < 1 || rounds > 1000) { fprintf(stderr, "bench_gemm: --rounds in [1, 1000]\n"); return 2; }
    struct { const char *name; int oc, ic; } lin[] = {
        {"c_attn", 3 * C, C}, {"c_proj", C, C}, {"c_fc", 4 * C, C}, {"mlp.c_proj", C, 4 * C}, {"lm head", Vp, C},
    };
    shape sh[16];
    int ns = 0;
    for (int l = 0; l < 5; l++) {
        sh[ns++] = (shape){ lin[l].name, N, lin[l].oc, lin[l].ic, 0, 1 };   /* y = x W^T */
        sh[ns++] = (shape){ lin[l].name, N, lin[l].ic, lin[l].oc, 0, 0 };   /* dx = dy W */
        sh[ns++] = (shape){ lin[l].name, lin[l].oc, lin[l].ic, N, 1, 0 };   /* dW = dy^T x */
    }
    sh[ns++] = (shape){ "probe", 1024, 1024, 1024, 0, 0 };
    static const char *kind[3] = {"fwd", "dx", "dW"};

    size_t most = 0;
    for (int s = 0; s < ns; s++) {
        size_t a = (size_t)sh[s].M * sh[s].K, b = (size_t)sh[s].K * sh[s].N, c = (size_t)sh[s].M * sh[s].N;
        if (a > most) most = a;
        if (b > most) most = b;
        if (c > most) most = c;
    }
    float *A = malloc(most * 4), *B = malloc(most * 4), *Cm = malloc(most * 4);
    remat_bf16 *A16 = malloc(most * 2), *B16 = malloc(most * 2);
    double *t = malloc(sizeof(double) * 3 * (size_t)rounds);
    if (!A || !B || !Cm || !A16 || !B16 || !t) { fprintf(stderr, "bench_gemm: out of memory\n"); return 1; }
    uint32_t x = 1;
    for (size_t i = 0; i < most; i++) {
        x = x * 1664525u + 1013904223u; A[i] = ((x >> 8) / 16777216.0f) - 0.5f;
        x = x * 1664525u + 1013904223u; B[i] = ((x >> 8) / 16777216.0f) - 0.5f;
    }
    remat_bf16_from_f32(A16, A, most);
    remat_bf16_from_f32(B16, B, most);
    int have_dnnl = remat_gemm_available(REMAT_GEMM_ONEDNN);
    printf("GEMMs of preset %s (N = %d rows), %d rounds, GFLOP/s (median), the variants interleaved\n", preset, N, rounds);
    printf("%-11s %-4s %6s %6s %6s   %8s %8s %8s\n", "layer", "", "M", "N", "K", "cblas", "sgemm", "bf16");
    for (int s = 0; s < ns; s++) {
        const shape *g = &sh[s];
        int lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
        double flop = 2.0 * g->M * g->N * g->K;
        for (int r = -1; r < rounds; r++)
            for (int v = 0; v < 3; v++) {
                if (v > 0 && !have_dnnl) continue;
                remat_gemm_set(v == 0 ? REMAT_GEMM_CBLAS : REMAT_GEMM_ONEDNN);
                int bf = v == 2;
                remat_gemm_op op = { bf ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32, REMAT_DTYPE_FP32, g->ta, g->tb,
                                     g->M, g->N, g->K, 1.0f, 0.0f, bf ? (const void *)A16 : A, lda,
                                     bf ? (const void *)B16 : B, ldb, Cm, g->N, NULL, NULL };
                double t0 = bench_now_ms();
                remat_gemm(&op);
                double dt = bench_now_ms() - t0;
                if (r >= 0) t[v * rounds + r] = dt;
            }
        if (remat_gemm_check()) { fprintf(stderr, "bench_gemm: %s\n", remat_errmsg()); return 1; }
        printf("%-11s %-4s %6d %6d %6d   %8.0f", g->what, s < ns - 1 ? kind[s % 3] : "", g->M, g->N, g->K,
               flop / remat_median(t, (size_t)rounds) / 1e6);
        if (have_dnnl)
            printf(" %8.0f %8.0f", flop / remat_median(t + rounds, (size_t)rounds) / 1e6,
                   flop / remat_median(t + 2 * rounds, (size_t)rounds) / 1e6);
        printf("\n");
    }
    free(A); free(B); free(Cm); free(A16); free(B16); free(t);
    return 0;
}
