/*
 * bench_attention.c -- the attention core alone: forward (scores + values,
 * or flash stats + values) and backward of the naive and the flash kernel,
 * interleaved (naive, flash, naive, flash, ...), medians over rounds.
 *
 *   build/bench/bench_attention [--shape B,T,C,NH] [--rounds N] [--dropout P] [--kernel naive|flash|both]
 *
 * Default shape: the GPT-2 124M layer at B4 T64 (4,64,768,12).  The naive
 * kernel needs B*NH*T*T floats for the probabilities.  Inputs are fixed
 * pseudo-random numbers; the checksum of dqkv is printed so that two builds
 * can be compared for the same answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"
#include "bench_util.h"

int main(int argc, char **argv)
{
    int B = 4, T = 64, C = 768, NH = 12, rounds = 5, use[2] = {1, 1};
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
        } else {
            fprintf(stderr, "usage: bench_attention [--shape B,T,C,NH] [--rounds N] [--dropout P] "
                            "[--kernel naive|flash|both]\n");
            return 2;
        }
    }
    if (B < 1 || T < 1 || NH < 1 || C < NH || C % NH || T > 65536 || rounds < 1 || rounds > 1000 || p < 0 || p >= 1 ||
        (!use[0] && !use[1])) {
        fprintf(stderr, "bench_attention: bad shape, rounds, dropout or kernel\n");
        return 2;
    }
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
    float *qkv = malloc(nq * 4), *dq = malloc(nq * 4), *out = malloc(no * 4), *g = malloc(no * 4);
    float *lse = malloc((size_t)B * NH * T * 4), *att = use[0] ? malloc((size_t)B * NH * T * T * 4) : NULL;
    double *t = malloc(sizeof(double) * 4 * rounds);
    if (!qkv || !dq || !out || !g || !lse || (use[0] && !att) || !t) { fprintf(stderr, "bench_attention: out of memory\n"); return 1; }
    uint32_t s = 12345;
    for (size_t i = 0; i < nq; i++) { s = s * 1664525u + 1013904223u; qkv[i] = ((s >> 8) / 16777216.0f) - 0.5f; }
    for (size_t i = 0; i < no; i++) { s = s * 1664525u + 1013904223u; g[i] = ((s >> 8) / 16777216.0f) - 0.5f; }
    remat_dropout d = remat_dropout_make(p, 7);
    double sum[2] = {0, 0};
    for (int r = -1; r < rounds; r++)   /* round -1 warms up */
        for (int k = 0; k < 2; k++) {
            if (!use[k]) continue;
            double t0 = bench_now_ms();
            if (k == 0) {
                attention_scores_forward(att, qkv, B, T, C, NH, REMAT_DTYPE_FP32);
                attention_values_forward(out, att, qkv, &d, B, T, C, NH, REMAT_DTYPE_FP32, NULL);
            } else {
                flash_attention_stats(lse, qkv, B, T, C, NH, REMAT_DTYPE_FP32);
                flash_attention_values(out, lse, qkv, &d, B, T, C, NH, REMAT_DTYPE_FP32, NULL);
            }
            double t1 = bench_now_ms();
            if (k == 0) attention_backward(dq, g, att, qkv, &d, B, T, C, NH, REMAT_DTYPE_FP32, NULL);
            else flash_attention_backward(dq, g, lse, qkv, &d, B, T, C, NH, REMAT_DTYPE_FP32, NULL);
            double t2 = bench_now_ms();
            if (r < 0) continue;
            t[(2 * k) * rounds + r] = t1 - t0;
            t[(2 * k + 1) * rounds + r] = t2 - t1;
            if (r == 0)
                for (size_t i = 0; i < nq; i++) sum[k] += dq[i];
        }
    printf("attention B%d T%d C%d NH%d dropout %.2f, %d rounds (medians)\n", B, T, C, NH, (double)p, rounds);
    for (int k = 0; k < 2; k++)
        if (use[k])
            printf("%-6s forward %9.2f ms  backward %9.2f ms  (dqkv checksum %.6g)\n", k ? "flash" : "naive",
                   remat_median(t + 2 * k * rounds, (size_t)rounds), remat_median(t + (2 * k + 1) * rounds, (size_t)rounds), sum[k]);
    free(qkv); free(dq); free(out); free(g); free(lse); free(att); free(t);
    return 0;
}
