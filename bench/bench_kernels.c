/*
 * bench_kernels.c -- the kernels of a step other than its products, one
 * at a time, at a preset's shapes: the bf16 pointwise kernels (norms,
 * GELU or SwiGLU, RoPE, the residual branch, the cross-entropy), the naive
 * attention core and AdamW over the preset's parameter count.
 *
 *   build/bench/bench_kernels [--preset 124m|llama-s] [--threads N] [--rounds R]
 *
 * Presets: 124m = GPT-2 124M (N = B*T = 256 rows, C 768, 4C 3072, NH 12,
 * Vp 50304, 124M parameters); llama-s = L12 C768 NH12 KV4 hs64 F2048
 * V32000, B4 T128 (N = 512, 125M parameters).  Beside AdamW, a loop with
 * its fp32 bytes and no arithmetic (the memory's rate).  Each kernel runs R times
 * after two untimed calls; the median is printed, in milliseconds of the
 * calling thread's CPU time with one thread (what a machine shared with
 * other work still measures: a preempted call does not count), of wall
 * time with more.  Inputs are fixed pseudo-random numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"
#include "kernels/bf16.h"
#include "bench_util.h"

static int rounds = 15, one_thread;

static double clock_now(void) { return one_thread ? bench_clock_ms(CLOCK_THREAD_CPUTIME_ID) : bench_now_ms(); }

#define TIME(name, expr)                                                      \
    do {                                                                      \
        double *t_ = malloc(sizeof(double) * rounds);                         \
        for (int r_ = -2; r_ < rounds; r_++) {                                \
            double a_ = clock_now();                                          \
            expr;                                                             \
            if (r_ >= 0) t_[r_] = clock_now() - a_;                           \
        }                                                                     \
        printf("%-34s %9.3f ms\n", name, remat_median(t_, (size_t)rounds));   \
        free(t_);                                                             \
    } while (0)

static void fill_f(float *x, size_t n, uint32_t s)
{
    for (size_t i = 0; i < n; i++) { s = s * 1664525u + 1013904223u; x[i] = ((s >> 8) / 16777216.0f) - 0.5f; }
}

static void fill_b(remat_bf16 *x, size_t n, uint32_t s)
{
    for (size_t i = 0; i < n; i++) { s = s * 1664525u + 1013904223u; x[i] = remat_bf16_round(((s >> 8) / 16777216.0f) - 0.5f); }
}

/* What the memory gives a loop with AdamW's fp32 traffic (p, g, m, v read,
 * p, m, v written: 28 bytes an element; AdamW adds the 2 bytes of its
 * streamed bf16 copy) and next to no arithmetic: AdamW near this time is
 * at memory speed. */
static void bytes_probe(float *p, const float *g, float *m, float *v, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        p[i] += gi;
        m[i] += gi;
        v[i] += gi;
    }
}

int main(int argc, char **argv)
{
    const char *preset = "llama-s";
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--preset") && i + 1 < argc) preset = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else { fprintf(stderr, "usage: bench_kernels [--preset 124m|llama-s] [--threads N] [--rounds R]\n"); return 2; }
    }
    int llama = !strcmp(preset, "llama-s");
    if ((!llama && strcmp(preset, "124m")) || rounds < 1 || rounds > 1000 || threads < 0) {
        fprintf(stderr, "bench_kernels: --preset 124m or llama-s, --rounds in [1, 1000], --threads >= 0\n");
        return 2;
    }
    remat_set_threads(threads);
    one_thread = remat_get_threads() == 1;
    int B = 4, T = llama ? 128 : 64, C = 768, NH = 12, KV = llama ? 4 : 12, hs = 64, F = llama ? 2048 : 3072;
    int V = llama ? 32000 : 50257, Vp = llama ? 32000 : 50304, N = B * T;
    size_t np = llama ? 125u << 20 : 124u << 20;   /* about the presets' parameter counts */
    size_t big = (size_t)N * Vp > np ? (size_t)N * Vp : np;
    float *xf = malloc(big * 4), *yf = malloc(big * 4), *st = malloc((size_t)N * 8), *w = malloc(C * 4);
    float *b = malloc(C * 4), *dw = calloc(C, 4), *db = calloc(C, 4), *losses = malloc((size_t)N * 4);
    remat_bf16 *x16 = malloc(big * 2), *y16 = malloc(big * 2), *z16 = malloc(big * 2);
    int *tg = malloc((size_t)N * sizeof(int));
    if (!xf || !yf || !st || !w || !b || !dw || !db || !losses || !x16 || !y16 || !z16 || !tg) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    fill_f(xf, big, 1); fill_b(x16, big, 2); fill_b(y16, big, 3); fill_f(w, C, 4); fill_f(b, C, 5);
    for (int i = 0; i < N; i++) tg[i] = (int)((i * 37u) % (unsigned)V);
    printf("bench_kernels: preset %s, %d thread(s), median of %d (%s)\n", preset, remat_get_threads(), rounds,
           one_thread ? "thread CPU time" : "wall time");
    remat_dropout d0 = remat_dropout_make(0.0f, 1);
    /* the kernels' workspace, per thread, as the engine gives it (tensors.c:
     * the cross-entropy's fp32 row; the attention tiles' fp32 copies where
     * bf16 products are emulated, the naive values' row blocks and a tile) */
    size_t wsf = (size_t)64 * T + (size_t)T * hs + 64 * hs + 32 + 64 * 128 + 32 + (2 * 128 + 64) * (size_t)hs;
    if (wsf < (size_t)V) wsf = (size_t)V;
    remat_ws ws = { NULL, 0, NULL, (wsf * 4 + 63) & ~(size_t)63, remat_get_threads() };
    if (!(ws.thread = aligned_alloc(64, ws.nthread * (size_t)ws.nthreads))) {
        fprintf(stderr, "bench_kernels: out of memory\n");
        return 1;
    }
    if (llama) {
        remat_rmsnorm_stats(st, xf, N, C, REMAT_DTYPE_FP32, 1e-6);
        TIME("rmsnorm apply fp32 -> bf16", remat_rmsnorm_apply(z16, REMAT_DTYPE_BF16, xf, REMAT_DTYPE_FP32, st, w, N, C));
        TIME("rmsnorm backward", remat_rmsnorm_backward(yf, dw, x16, REMAT_DTYPE_BF16, xf, REMAT_DTYPE_FP32, st, w, N, C));
        TIME("swiglu forward bf16", remat_swiglu_forward(z16, x16, N, F, REMAT_DTYPE_BF16));
        TIME("swiglu backward bf16", remat_swiglu_backward(z16, y16, x16, N, F, REMAT_DTYPE_BF16));
        float *tab = malloc((size_t)T * hs * 4);
        remat_rope_table(tab, T, hs, 10000.0, NULL);
        int ld = (NH + 2 * KV) * hs;
        TIME("rope forward bf16", remat_rope_forward(z16, x16, ld, tab, B, T, NH + KV, hs, REMAT_DTYPE_BF16));
        TIME("rope backward bf16", remat_rope_backward(z16, ld, tab, B, T, NH + KV, hs, REMAT_DTYPE_BF16));
        free(tab);
    } else {
        remat_layernorm_stats(st, xf, N, C, REMAT_DTYPE_FP32);
        TIME("layernorm apply fp32 -> bf16",
             remat_layernorm_apply(z16, REMAT_DTYPE_BF16, xf, REMAT_DTYPE_FP32, st, w, b, N, C));
        TIME("layernorm backward",
             remat_layernorm_backward(yf, dw, db, x16, REMAT_DTYPE_BF16, xf, REMAT_DTYPE_FP32, st, w, N, C));
        TIME("gelu forward bf16", remat_gelu_forward(z16, x16, (size_t)N * F, REMAT_DTYPE_BF16));
        TIME("gelu backward bf16", remat_gelu_backward(z16, x16, y16, (size_t)N * F, REMAT_DTYPE_BF16));
    }
    TIME("residual branch gradient bf16", remat_residual_backward_branch(z16, xf, &d0, (size_t)N * C, REMAT_DTYPE_BF16));
    TIME("cross-entropy bf16 (+ a copy)", (memcpy(y16, x16, (size_t)N * Vp * 2),
                                           remat_crossentropy_forward(losses, y16, tg, N, V, Vp, 1.0f / N, REMAT_DTYPE_BF16, &ws)));
    TIME("  the copy alone", memcpy(y16, x16, (size_t)N * Vp * 2));
    /* the attention core, bf16, naive: q, k, v in the architecture's layout */
    size_t nq = (size_t)N * (NH + 2 * KV) * hs, no = (size_t)N * NH * hs, na = (size_t)B * NH * T * T;
    remat_bf16 *qkv = malloc(nq * 2), *dout = malloc(no * 2), *att = malloc(na * 2), *dq = malloc(nq * 2);
    remat_bf16 *out = malloc(no * 2);
    float *acc = malloc(nq * 4);
    if (!qkv || !dout || !att || !dq || !out || !acc) { fprintf(stderr, "bench_kernels: out of memory\n"); return 1; }
    fill_b(qkv, nq, 7); fill_b(dout, no, 8);
    remat_attn_layout L = llama ? remat_attn_layout_gqa(qkv, qkv, B, T, NH, KV, hs, REMAT_DTYPE_BF16)
                                : remat_attn_layout_mha(qkv, B, T, C, NH, REMAT_DTYPE_BF16);
    L.ws = &ws;
    TIME("attention scores bf16", remat_attention_scores_forward(att, &L));
    TIME("attention values bf16", remat_attention_values_forward(out, att, &L, &d0, acc));
    TIME("attention backward bf16", remat_attention_backward(dq, dout, att, &L, &d0, acc));
    /* AdamW with the bf16 copy, over the preset's parameters in 12 tensors */
    float *m = calloc(np, 4), *v = calloc(np, 4);
    if (!m || !v) { fprintf(stderr, "bench_kernels: out of memory\n"); return 1; }
    remat_adamw_span sp[12];
    for (int k = 0; k < 12; k++) sp[k] = (remat_adamw_span){ k * (np / 12), k == 11 ? np - 11 * (np / 12) : np / 12, k & 1 };
    TIME("adamw + bf16 copy (all parameters)",
         remat_adamw_update_spans(xf, yf, m, v, z16, 0, sp, 12, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 1));
    TIME("  memory probe, AdamW's fp32 bytes", bytes_probe(xf, yf, m, v, np));
    TIME("gradient norm (sumsq)", (void)remat_sumsq(yf, np));
    free(xf); free(yf); free(st); free(w); free(b); free(dw); free(db); free(losses); free(x16); free(y16); free(z16);
    free(tg); free(qkv); free(dout); free(att); free(dq); free(out); free(acc); free(m); free(v); free(ws.thread);
    return 0;
}
