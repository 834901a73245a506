/*
 * test_kernels.c -- every kernel of kernels.h against a double-precision
 * reference: forwards against a double re-implementation, backwards against
 * central finite differences of that reference, plus dropout-mask,
 * determinism and thread-count checks.
 *
 * Method for a backward: draw a fixed random R shaped like the output, set
 * the scalar loss L = sum(out * R) (so dout = R), evaluate L in double and
 * difference it, dL/dx ~ (L(x+h) - L(x-h)) / 2h with h = 1e-4, for every
 * input element.  The double reference makes the finite difference accurate
 * to ~1e-9, so what the check sees is the float error of the kernel.
 * A check passes when max_i |fd_i - g_i| <= tol * (1 + max_i |g_i|); the
 * per-kernel tol is stated where it is used (each is >= 10x the error
 * observed when the test was written).
 *
 * Build (standalone):
 *   cc -std=c11 -O2 -march=native -fopenmp -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc \
 *      -o /tmp/kt tests/test_kernels.c src/kernels/\*.c src/core/rng.c -lopenblas -lm
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/vmath.h"
#include "core/rng.h"
#include "core/core.h"   /* remat_mem_alloc_count: the workspace checks */
#include "harness.h"

#define FD_H 1e-4

/* ------------------------------------------------------------------ helpers */

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) { fprintf(stderr, "test_kernels: out of memory\n"); exit(2); }
    return p;
}

/* x[i] = lo + (hi-lo) * uniform(key, i) */
static void fill(float *x, size_t n, uint64_t key, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * remat_rng_uniform(key, i);
}

static double *to_double(const float *x, size_t n)
{
    double *d = xcalloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* max |a - ref| <= tol * (1 + max |ref|) for a float result against a double one */
static void check_close(const char *what, const float *a, const double *ref, size_t n, double tol)
{
    double err = 0.0, m = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - ref[i]);
        if (!(e <= err)) { err = e; worst = i; }   /* also catches NaN */
        if (fabs(ref[i]) > m) m = fabs(ref[i]);
    }
    printf("  %-44s max err %.2e (max|ref| %.2e, tol %.0e)\n", what, err, m, tol);
    CHECK(err <= tol * (1.0 + m), "%s: max err %.3g at %zu (max|ref| %.3g, tol %.3g)",
          what, err, worst, m, tol);
}

typedef double (*loss_fn)(const void *ctx);

/* Central differences of f with respect to x[0..n), into fd[0..n). */
static void fd_grad(double *fd, double *x, size_t n, loss_fn f, const void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + FD_H;
        double lp = f(ctx);
        x[i] = save - FD_H;
        double lm = f(ctx);
        x[i] = save;
        fd[i] = (lp - lm) / (2.0 * FD_H);
    }
}

/* the finite differences fd against the analytic g */
static void fd_compare(const char *what, const double *fd, const float *g, size_t n, double tol)
{
    double err = 0.0, gmax = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(fd[i] - g[i]);
        if (!(e <= err)) { err = e; worst = i; }
        if (fabs(g[i]) > gmax) gmax = fabs(g[i]);
    }
    printf("  %-44s max |fd-g| %.2e (max|g| %.2e, tol %.0e)\n", what, err, gmax, tol);
    CHECK(err <= tol * (1.0 + gmax), "%s: max |fd - g| %.3g at %zu (max|g| %.3g, tol %.3g)",
          what, err, worst, gmax, tol);
}

/* Central differences of f with respect to x[0..n) against the analytic g. */
static void fd_check(const char *what, double *x, size_t n, const float *g,
                     loss_fn f, const void *ctx, double tol)
{
    double *fd = xcalloc(n, sizeof(double));
    fd_grad(fd, x, n, f, ctx);
    fd_compare(what, fd, g, n, tol);
    free(fd);
}

/* ------------------------------------------------------------ bf16, exp */

/* The vector paths of bf16.h and vmath.h against their scalar twins, bit
 * for bit: every float with any of 2^16 upper halves and one of 8 lower
 * halves (0, 1, the ties 0x7fff/0x8000/0x8001, 0xffff and two others) --
 * all exponents, both signs, denormals (where VCVTNEPS2BF16 would flush),
 * infinities, quiet and signalling NaNs, values that round up to the next
 * binade or to infinity -- through remat_bf16_from_f32 (16, 8 and 1 lanes:
 * the buffer's length leaves a tail of each) and, for exp, remat_row_expsum
 * (whose outputs are exactly remat_expf's). */
static void test_vector_twins(void)
{
    printf("bf16 rounding and exp: vector paths against the scalar ones\n");
    static const uint32_t lows[8] = { 0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234, 0xc000 };
    size_t n = (size_t)8 << 16;
    float *x = xcalloc(n + 7, sizeof(float)), *y = xcalloc(n + 7, sizeof(float));
    remat_bf16 *h = xcalloc(n + 7, sizeof(remat_bf16));
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(i >> 3) << 16 | lows[i & 7];
        memcpy(&x[i], &u, 4);
    }
    size_t len = n + 7 - 8;   /* n - 1: ends in a tail of 15 lanes */
    remat_bf16_from_f32(h, x, len);
    size_t bad = 0, badx = 0;
    for (size_t i = 0; i < len; i++) bad += h[i] != remat_bf16_round(x[i]);
    CHECK(!bad, "remat_bf16_from_f32: %zu of %zu elements differ from remat_bf16_round", bad, len);
    float scale = 0.75f;
    remat_bf16_from_f32_scaled(h, x, len, scale);
    for (size_t i = 0; i < len; i++) bad += h[i] != remat_bf16_round(x[i] * scale);
    CHECK(!bad, "remat_bf16_from_f32_scaled: %zu elements differ from the scalar rounding", bad);
    /* exp on every 64th of them, in rows of 1001 (tails of 8 lanes and of 1) */
    for (size_t i = 0; i < n / 64; i++) x[i] = x[i * 64];
    for (size_t r = 0; r + 1001 <= n / 64; r += 1001) remat_row_expsum(y + r, x + r, 1001, 0.0f);
    for (size_t i = 0; i < n / 64 / 1001 * 1001; i++) {
        float e = remat_expf(x[i]);
        badx += memcmp(&e, &y[i], 4) != 0;
    }
    printf("  %zu roundings, %zu exponentials compared\n", 2 * len, n / 64 / 1001 * 1001);
    CHECK(!badx, "remat_row_expsum: %zu exponentials differ from remat_expf", badx);
    free(x); free(y); free(h);
}

/* ------------------------------------------------------------------ encoder */

typedef struct {
    int B, T, C;
    const int *inp;
    double *wte, *wpe;
    const float *R;
} enc_ctx;

static double enc_loss(const void *p)
{
    const enc_ctx *c = p;
    double L = 0.0;
    for (int bt = 0; bt < c->B * c->T; bt++)
        for (int k = 0; k < c->C; k++)
            L += (c->wte[(size_t)c->inp[bt] * c->C + k] + c->wpe[(size_t)(bt % c->T) * c->C + k])
                 * c->R[(size_t)bt * c->C + k];
    return L;
}

/* Encoder: exact (one float add forward, float adds backward): tol 1e-5. */
static void test_encoder(void)
{
    printf("encoder\n");
    enum { B = 2, T = 5, C = 6, Vp = 8, maxT = 7 };
    int inp[B * T] = { 3, 1, 3, 0, 7, 3, 3, 2, 1, 0 };   /* repeated tokens */
    float wte[Vp * C], wpe[maxT * C], out[B * T * C], R[B * T * C];
    float dwte[Vp * C] = { 0 }, dwpe[maxT * C] = { 0 };
    fill(wte, Vp * C, 11, -1, 1);
    fill(wpe, maxT * C, 12, -1, 1);
    fill(R, B * T * C, 13, -1, 1);

    remat_encoder_forward(out, inp, wte, wpe, B, T, C, REMAT_DTYPE_FP32);
    double ref[B * T * C];
    for (int bt = 0; bt < B * T; bt++)
        for (int k = 0; k < C; k++)
            ref[bt * C + k] = (double)wte[inp[bt] * C + k] + wpe[(bt % T) * C + k];
    check_close("encoder_forward out", out, ref, B * T * C, 1e-6);

    remat_encoder_backward(dwte, dwpe, R, inp, B, T, C);
    enc_ctx cx = { B, T, C, inp, to_double(wte, Vp * C), to_double(wpe, maxT * C), R };
    fd_check("encoder_backward dwte", cx.wte, Vp * C, dwte, enc_loss, &cx, 1e-5);
    fd_check("encoder_backward dwpe", cx.wpe, maxT * C, dwpe, enc_loss, &cx, 1e-5);

    /* no position embedding (wpe, dwpe NULL): the rows of wte, exactly, in
     * both dtypes; dwte as above with wpe's term gone (zeroed in the
     * reference), and nothing else written */
    float out0[B * T * C], dwte0[Vp * C] = { 0 };
    remat_bf16 out16[B * T * C];
    remat_encoder_forward(out0, inp, wte, NULL, B, T, C, REMAT_DTYPE_FP32);
    remat_encoder_forward(out16, inp, wte, NULL, B, T, C, REMAT_DTYPE_BF16);
    int exact = 1;
    for (int bt = 0; bt < B * T; bt++)
        for (int k = 0; k < C; k++) {
            exact &= out0[bt * C + k] == wte[inp[bt] * C + k];
            exact &= out16[bt * C + k] == remat_bf16_round(wte[inp[bt] * C + k]);
        }
    CHECK(exact, "encoder_forward without wpe is not the wte rows (fp32, bf16 rounded once)");
    remat_encoder_backward(dwte0, NULL, R, inp, B, T, C);
    memset(cx.wpe, 0, maxT * C * sizeof(double));
    fd_check("encoder_backward dwte (dwpe=NULL)", cx.wte, Vp * C, dwte0, enc_loss, &cx, 1e-5);
    free(cx.wte);
    free(cx.wpe);
}

/* ---------------------------------------------------------------- layernorm */

typedef struct {
    int N, C;
    double *x, *w, *b;
    const float *R;
    double *out;   /* optional: the reference output */
} ln_ctx;

static double ln_loss(const void *p)
{
    const ln_ctx *c = p;
    double L = 0.0;
    for (int n = 0; n < c->N; n++) {
        const double *x = c->x + (size_t)n * c->C;
        double mean = 0.0, var = 0.0;
        for (int k = 0; k < c->C; k++) mean += x[k];
        mean /= c->C;
        for (int k = 0; k < c->C; k++) var += (x[k] - mean) * (x[k] - mean);
        var /= c->C;
        double rstd = 1.0 / sqrt(var + 1e-5);
        for (int k = 0; k < c->C; k++) {
            double o = (x[k] - mean) * rstd * c->w[k] + c->b[k];
            if (c->out) c->out[(size_t)n * c->C + k] = o;
            L += o * c->R[(size_t)n * c->C + k];
        }
    }
    return L;
}

/* LayerNorm: forward tol 1e-5; backward tol 1e-4 (rstd ~ 2 amplifies float
 * rounding of the row means). */
static void test_layernorm(void)
{
    printf("layernorm\n");
    enum { N = 6, C = 24 };
    float x[N * C], w[C], b[C], R[N * C], stat[N * 2], out[N * C];
    fill(x, N * C, 21, -1.0f, 1.6f);   /* non-zero mean */
    fill(w, C, 22, 0.5f, 1.5f);
    fill(b, C, 23, -0.3f, 0.3f);
    fill(R, N * C, 24, -1, 1);

    remat_layernorm_stats(stat, x, N, C, REMAT_DTYPE_FP32);
    remat_layernorm_apply(out, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, stat, w, b, N, C);
    double ref[N * C];
    ln_ctx cx = { N, C, to_double(x, N * C), to_double(w, C), to_double(b, C), R, ref };
    ln_loss(&cx);
    cx.out = NULL;
    check_close("layernorm stats+apply out", out, ref, N * C, 1e-5);

    float dx[N * C] = { 0 }, dw[C] = { 0 }, db[C] = { 0 };
    remat_layernorm_backward(dx, dw, db, R, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, stat, w, N, C);
    fd_check("layernorm_backward dinp", cx.x, N * C, dx, ln_loss, &cx, 1e-4);
    fd_check("layernorm_backward dw", cx.w, C, dw, ln_loss, &cx, 1e-4);
    fd_check("layernorm_backward db", cx.b, C, db, ln_loss, &cx, 1e-4);

    /* dinp, dw and db accumulate: a second call adds the same amounts again */
    float dx2[N * C], dw2[C], db2[C];
    memcpy(dx2, dx, sizeof dx);
    memcpy(dw2, dw, sizeof dw);
    memcpy(db2, db, sizeof db);
    remat_layernorm_backward(dx2, dw2, db2, R, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, stat, w, N, C);
    double acc = 0.0;
    for (int i = 0; i < N * C; i++) acc = fmax(acc, fabs(dx2[i] - 2.0 * dx[i]));
    for (int i = 0; i < C; i++) acc = fmax(acc, fabs(dw2[i] - 2.0 * dw[i]));
    for (int i = 0; i < C; i++) acc = fmax(acc, fabs(db2[i] - 2.0 * db[i]));
    CHECK(acc <= 1e-5, "layernorm_backward does not accumulate (+=): err %.3g", acc);

    free(cx.x);
    free(cx.w);
    free(cx.b);
}

/* ------------------------------------------------------------------ rmsnorm */

typedef struct {
    int N, C;
    double eps;
    double *x, *w;
    const float *R;
    double *out;   /* optional: the reference output */
} rms_ctx;

/* LlamaRMSNorm in double: out = w * (x / sqrt(mean(x^2) + eps)) */
static double rms_loss(const void *p)
{
    const rms_ctx *c = p;
    double L = 0.0;
    for (int n = 0; n < c->N; n++) {
        const double *x = c->x + (size_t)n * c->C;
        double ms = 0.0;
        for (int k = 0; k < c->C; k++) ms += x[k] * x[k];
        double rstd = 1.0 / sqrt(ms / c->C + c->eps);
        for (int k = 0; k < c->C; k++) {
            double o = c->w[k] * (x[k] * rstd);
            if (c->out) c->out[(size_t)n * c->C + k] = o;
            L += o * c->R[(size_t)n * c->C + k];
        }
    }
    return L;
}

/* RMSNorm: forward tol 1e-5, backward tol 1e-4 (as LayerNorm's; observed
 * 2e-7 and 3e-7).  C = 27 leaves a tail after the 8 double lanes; eps 1e-6
 * is Llama 2's, and a second eps (0.5) shows it is used.  bf16: the same
 * float ops on the widened inputs, so the bf16 output is the fp32 one
 * rounded once and dinp / dw equal the fp32 kernel's bit for bit; against
 * the double reference, tol 2e-2 (observed 1.9e-3 relative). */
static void test_rmsnorm(void)
{
    printf("rmsnorm\n");
    enum { N = 6, C = 27 };
    float x[N * C], w[C], R[N * C], rstd[N], out[N * C];
    fill(x, N * C, 25, -1.0f, 1.6f);
    fill(w, C, 26, 0.5f, 1.5f);
    fill(R, N * C, 27, -1, 1);
    const double epss[2] = { 1e-6, 0.5 };
    for (int e = 0; e < 2; e++) {
        double eps = epss[e], ref[N * C];
        char what[64];
        remat_rmsnorm_stats(rstd, x, N, C, REMAT_DTYPE_FP32, eps);
        remat_rmsnorm_apply(out, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, rstd, w, N, C);
        rms_ctx cx = { N, C, eps, to_double(x, N * C), to_double(w, C), R, ref };
        rms_loss(&cx);
        cx.out = NULL;
        snprintf(what, sizeof what, "rmsnorm stats+apply out (eps %g)", eps);
        check_close(what, out, ref, N * C, 1e-5);

        float dx[N * C] = { 0 }, dw[C] = { 0 };
        remat_rmsnorm_backward(dx, dw, R, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, rstd, w, N, C);
        snprintf(what, sizeof what, "rmsnorm_backward dinp (eps %g)", eps);
        fd_check(what, cx.x, N * C, dx, rms_loss, &cx, 1e-4);
        snprintf(what, sizeof what, "rmsnorm_backward dw (eps %g)", eps);
        fd_check(what, cx.w, C, dw, rms_loss, &cx, 1e-4);

        /* dinp and dw accumulate */
        float dx2[N * C], dw2[C];
        memcpy(dx2, dx, sizeof dx);
        memcpy(dw2, dw, sizeof dw);
        remat_rmsnorm_backward(dx2, dw2, R, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, rstd, w, N, C);
        double acc = 0.0;
        for (int i = 0; i < N * C; i++) acc = fmax(acc, fabs(dx2[i] - 2.0 * dx[i]));
        for (int i = 0; i < C; i++) acc = fmax(acc, fabs(dw2[i] - 2.0 * dw[i]));
        CHECK(acc <= 1e-5, "rmsnorm_backward does not accumulate (+=): err %.3g", acc);
        free(cx.x);
        free(cx.w);
    }

    /* recomputation: apply from kept stats gives the same bits again */
    float out2[N * C];
    remat_rmsnorm_apply(out2, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, rstd, w, N, C);
    CHECK(memcmp(out, out2, sizeof out) == 0, "rmsnorm_apply from kept stats is not bit-identical");

    /* bf16 inputs and outputs against the fp32 kernel on the same (widened) values */
    remat_bf16 x16[N * C], R16[N * C], o16[N * C];
    float xw[N * C], Rw[N * C], rs32[N], rs16[N], o32[N * C];
    remat_bf16_from_f32(x16, x, N * C);
    remat_bf16_from_f32(R16, R, N * C);
    remat_bf16_to_f32(xw, x16, N * C);
    remat_bf16_to_f32(Rw, R16, N * C);
    remat_rmsnorm_stats(rs32, xw, N, C, REMAT_DTYPE_FP32, 1e-6);
    remat_rmsnorm_stats(rs16, x16, N, C, REMAT_DTYPE_BF16, 1e-6);
    remat_rmsnorm_apply(o32, REMAT_DTYPE_FP32, xw, REMAT_DTYPE_FP32, rs32, w, N, C);
    remat_rmsnorm_apply(o16, REMAT_DTYPE_BF16, x16, REMAT_DTYPE_BF16, rs16, w, N, C);
    int same = memcmp(rs32, rs16, sizeof rs32) == 0;
    for (int i = 0; i < N * C; i++) same &= o16[i] == remat_bf16_round(o32[i]);
    CHECK(same, "rmsnorm bf16 forward is not the fp32 one rounded once");
    float dx32[N * C] = { 0 }, dw32[C] = { 0 }, dx16[N * C] = { 0 }, dw16[C] = { 0 };
    remat_rmsnorm_backward(dx32, dw32, Rw, REMAT_DTYPE_FP32, xw, REMAT_DTYPE_FP32, rs32, w, N, C);
    remat_rmsnorm_backward(dx16, dw16, R16, REMAT_DTYPE_BF16, x16, REMAT_DTYPE_BF16, rs16, w, N, C);
    CHECK(memcmp(dx32, dx16, sizeof dx32) == 0 && memcmp(dw32, dw16, sizeof dw32) == 0,
          "rmsnorm bf16 backward differs from the fp32 one on the same values");
    /* and the bf16 output against the double reference at bf16's precision
     * (the rounding of the inputs and of the output, ~2^-9 each) */
    double ref16[N * C];
    float o16f[N * C];
    rms_ctx c16 = { N, C, 1e-6, to_double(x, N * C), to_double(w, C), R, ref16 };
    rms_loss(&c16);
    remat_bf16_to_f32(o16f, o16, N * C);
    check_close("rmsnorm bf16 out vs double", o16f, ref16, N * C, 2e-2);
    free(c16.x);
    free(c16.w);
}

/* --------------------------------------------------------------------- rope */

/* The frequencies of transformers' _compute_default_rope_parameters and
 * _compute_llama3_parameters, in double, written the way they are written
 * there (masks and a blend), independently of rope.c's if-chain. */
static void rope_ref_freqs(double *f, int hs, double theta, const remat_rope_llama3 *sc)
{
    for (int i = 0; i < hs / 2; i++) {
        double inv = exp(-log(theta) * (2.0 * i) / hs);
        if (sc) {
            double wl = 2.0 * 3.14159265358979323846 / inv;
            double low_wl = sc->original_max_pos / sc->low_freq_factor;
            double high_wl = sc->original_max_pos / sc->high_freq_factor;
            double llama = wl > low_wl ? inv / sc->factor : inv;
            double sm = (sc->original_max_pos / wl - sc->low_freq_factor) /
                        (sc->high_freq_factor - sc->low_freq_factor);
            double smoothed = (1.0 - sm) * llama / sc->factor + sm * llama;
            int medium = !(wl < high_wl) && !(wl > low_wl);
            inv = medium ? smoothed : llama;
        }
        f[i] = inv;
    }
}

typedef struct {
    int B, T, ld, nh, hs;
    double *x;           /* B*T rows of ld */
    const double *f;     /* hs/2 frequencies */
    const float *R;      /* B,T,nh*hs */
    double *out;
} rope_ctx;

static double rope_loss(const void *p)
{
    const rope_ctx *c = p;
    int h = c->hs / 2, w = c->nh * c->hs;
    double L = 0.0;
    for (int bt = 0; bt < c->B * c->T; bt++) {
        double t = bt % c->T;
        for (int k = 0; k < c->nh; k++)
            for (int i = 0; i < h; i++) {
                const double *x = c->x + (size_t)bt * c->ld + k * c->hs;
                double cs = cos(t * c->f[i]), sn = sin(t * c->f[i]);
                double o1 = x[i] * cs - x[i + h] * sn, o2 = x[i + h] * cs + x[i] * sn;
                size_t oi = (size_t)bt * w + k * c->hs + i;
                if (c->out) { c->out[oi] = o1; c->out[oi + h] = o2; }
                L += o1 * c->R[oi] + o2 * c->R[oi + h];
            }
    }
    return L;
}

/* RoPE.
 *  - The table against rope_ref_freqs at Llama 3.1's settings (theta 5e5,
 *    hs 64, llama3 factor 8, low 1, high 4, original context 8192; all
 *    three bands occur), t up to 4095: tol 1e-6 (one float rounding of
 *    each entry; observed 3e-8).
 *  - A few entries by hand (math.cos / math.sin of the angles worked out
 *    in Python): hs 8, theta 1e4, f = 1, 0.1, 0.01, 0.001; with llama3
 *    (factor 8, low 1, high 4, context 1024) f_2 = 0.01 (1 - a)/8 + 0.01 a,
 *    a = (1024 / (200 pi) - 1) / 3, = 0.003086760967011274, and
 *    f_3 = 0.001 / 8.  tol 3e-7 (the float rounding; observed 3e-8).
 *  - Forward against the double rotation, tol 1e-5 (observed 9e-8);
 *    backward (in place, v columns and padding untouched) against finite
 *    differences, tol 1e-5 (observed 9e-8).  GQA shape: NH 3 + KV 1 heads
 *    rotated of hs 6, rows of ld 32 > (NH + 2 KV) hs.
 *  - bf16: the fp32 rotation on the widened inputs, rounded once (bitwise). */
static void test_rope(void)
{
    printf("rope\n");
    remat_rope_llama3 l31 = { 8.0, 1.0, 4.0, 8192.0 };
    {
        enum { maxT = 4096, hs = 64 };
        float *tab = xcalloc((size_t)maxT * hs, sizeof(float));
        double *ref = xcalloc((size_t)maxT * hs, sizeof(double)), f[hs / 2];
        remat_rope_table(tab, maxT, hs, 500000.0, &l31);
        rope_ref_freqs(f, hs, 500000.0, &l31);
        int band[3] = { 0, 0, 0 };   /* unchanged, interpolated, divided */
        for (int i = 0; i < hs / 2; i++) {
            double f0 = exp(-log(500000.0) * (2.0 * i) / hs);
            band[f[i] == f0 ? 0 : fabs(f[i] * 8.0 - f0) <= 1e-12 * f0 ? 2 : 1]++;
        }
        CHECK(band[0] && band[1] && band[2], "rope test: llama3 bands %d/%d/%d, want all three", band[0], band[1],
              band[2]);
        for (int t = 0; t < maxT; t++)
            for (int i = 0; i < hs / 2; i++) {
                ref[(size_t)t * hs + i] = cos(t * f[i]);
                ref[(size_t)t * hs + hs / 2 + i] = sin(t * f[i]);
            }
        check_close("rope table llama3 (theta 5e5, hs 64, T 4096)", tab, ref, (size_t)maxT * hs, 1e-6);
        remat_rope_table(tab, maxT, hs, 10000.0, NULL);
        rope_ref_freqs(f, hs, 10000.0, NULL);
        for (int t = 0; t < maxT; t++)
            for (int i = 0; i < hs / 2; i++) {
                ref[(size_t)t * hs + i] = cos(t * f[i]);
                ref[(size_t)t * hs + hs / 2 + i] = sin(t * f[i]);
            }
        check_close("rope table default (theta 1e4, hs 64, T 4096)", tab, ref, (size_t)maxT * hs, 1e-6);
        free(tab);
        free(ref);
    }
    {
        /* by hand: (table, t, i, cos, sin) */
        float plain[16 * 8], l3[128 * 8];
        remat_rope_llama3 sc = { 8.0, 1.0, 4.0, 1024.0 };
        remat_rope_table(plain, 16, 8, 10000.0, NULL);
        remat_rope_table(l3, 128, 8, 10000.0, &sc);
        struct { const float *tab; int t, i; double c, s; } hv[] = {
            { plain, 1, 0, 0.5403023058681398, 0.8414709848078965 },     /* cos 1, sin 1 */
            { plain, 3, 1, 0.955336489125606, 0.29552020666133955 },     /* angle 0.3 */
            { plain, 7, 3, 0.9999755001000415, 0.006999942833473391 },   /* angle 0.007 */
            { plain, 0, 2, 1.0, 0.0 },
            { l3, 37, 1, -0.848100031710408, -0.5298361409084934 },      /* unchanged: angle 3.7 */
            { l3, 5, 2, 0.9998809011983192, 0.01543319211430424 },       /* interpolated */
            { l3, 100, 2, 0.9527366033159734, 0.30379757191580964 },
            { l3, 100, 3, 0.9999218760172474, 0.012499674481709789 },    /* divided: angle 0.0125 */
        };
        double err = 0.0;
        for (size_t k = 0; k < sizeof hv / sizeof hv[0]; k++) {
            err = fmax(err, fabs(hv[k].tab[hv[k].t * 8 + hv[k].i] - hv[k].c));
            err = fmax(err, fabs(hv[k].tab[hv[k].t * 8 + 4 + hv[k].i] - hv[k].s));
        }
        printf("  %-44s max err %.2e (tol 3e-07)\n", "rope table, values by hand", err);
        CHECK(err <= 3e-7, "rope table: a hand-computed value is off by %.3g", err);
    }

    enum { B = 2, T = 7, NH = 3, KV = 1, hs = 6, nh = NH + KV, ld = 32, W = nh * hs };
    size_t nx = (size_t)B * T * ld, no = (size_t)B * T * W;
    float tab[T * hs], x[B * T * ld], out[B * T * W], R[B * T * W], d[B * T * ld], g[B * T * ld];
    double f[hs / 2], ref[B * T * W];
    remat_rope_table(tab, T, hs, 10.0, NULL);   /* a small theta: large angles within T = 7 */
    rope_ref_freqs(f, hs, 10.0, NULL);
    fill(x, nx, 141, -1, 1);
    fill(R, no, 142, -1, 1);
    rope_ctx cx = { B, T, ld, nh, hs, to_double(x, nx), f, R, ref };
    rope_loss(&cx);
    cx.out = NULL;
    remat_rope_forward(out, x, ld, tab, B, T, nh, hs, REMAT_DTYPE_FP32);
    check_close("rope_forward out (NH 3, KV 1, hs 6, ld 32)", out, ref, no, 1e-5);

    for (size_t i = 0; i < nx; i++) d[i] = 7.0f;   /* v columns and padding: must stay */
    for (int bt = 0; bt < B * T; bt++) memcpy(d + (size_t)bt * ld, R + (size_t)bt * W, W * sizeof(float));
    remat_rope_backward(d, ld, tab, B, T, nh, hs, REMAT_DTYPE_FP32);
    int kept = 1;
    for (size_t i = 0; i < nx; i++) {
        int col = (int)(i % ld);
        g[i] = col < W ? d[i] : 0.0f;
        if (col >= W) kept &= d[i] == 7.0f;
    }
    CHECK(kept, "rope_backward wrote outside the first nh*hs columns");
    fd_check("rope_backward d_qkv (in place)", cx.x, nx, g, rope_loss, &cx, 1e-5);
    free(cx.x);

    /* bf16 against the fp32 kernel on the widened values */
    remat_bf16 x16[B * T * ld], o16[B * T * W], d16[B * T * ld];
    float xw[B * T * ld], dw[B * T * ld], o32[B * T * W];
    remat_bf16_from_f32(x16, x, nx);
    remat_bf16_to_f32(xw, x16, nx);
    remat_rope_forward(o32, xw, ld, tab, B, T, nh, hs, REMAT_DTYPE_FP32);
    remat_rope_forward(o16, x16, ld, tab, B, T, nh, hs, REMAT_DTYPE_BF16);
    memcpy(d16, x16, sizeof d16);
    memcpy(dw, xw, sizeof dw);
    remat_rope_backward(dw, ld, tab, B, T, nh, hs, REMAT_DTYPE_FP32);
    remat_rope_backward(d16, ld, tab, B, T, nh, hs, REMAT_DTYPE_BF16);
    size_t bad = 0;
    for (size_t i = 0; i < no; i++) bad += o16[i] != remat_bf16_round(o32[i]);
    for (size_t i = 0; i < nx; i++) bad += d16[i] != remat_bf16_round(dw[i]);
    CHECK(bad == 0, "rope bf16: %zu elements are not the fp32 rotation rounded once", bad);
}

/* ------------------------------------------------------------------- linear */

typedef struct {
    int N, IC, OC;
    double *x, *w, *b;   /* b may be NULL */
    const float *R;
    double *out;
} lin_ctx;

static double lin_loss(const void *p)
{
    const lin_ctx *c = p;
    double L = 0.0;
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) {
            double s = c->b ? c->b[o] : 0.0;
            for (int i = 0; i < c->IC; i++) s += c->x[(size_t)n * c->IC + i] * c->w[(size_t)o * c->IC + i];
            if (c->out) c->out[(size_t)n * c->OC + o] = s;
            L += s * c->R[(size_t)n * c->OC + o];
        }
    return L;
}

/* Linear: forward and backward tol 1e-5 (sums of <= 9 float products). */
static void test_linear(void)
{
    printf("linear\n");
    enum { N = 5, IC = 7, OC = 9 };
    float x[N * IC], w[OC * IC], b[OC], R[N * OC], out[N * OC];
    fill(x, N * IC, 31, -1, 1);
    fill(w, OC * IC, 32, -1, 1);
    fill(b, OC, 33, -1, 1);
    fill(R, N * OC, 34, -1, 1);
    double ref[N * OC];

    for (int with_bias = 1; with_bias >= 0; with_bias--) {
        lin_ctx cx = { N, IC, OC, to_double(x, N * IC), to_double(w, OC * IC),
                       with_bias ? to_double(b, OC) : NULL, R, ref };
        lin_loss(&cx);
        cx.out = NULL;
        for (int i = 0; i < N * OC; i++) out[i] = NAN;   /* beta=0 must overwrite */
        remat_linear_forward(out, REMAT_DTYPE_FP32, x, w, with_bias ? b : NULL, N, IC, OC, REMAT_DTYPE_FP32, NULL);
        check_close(with_bias ? "linear_forward out" : "linear_forward out (b=NULL)",
                    out, ref, N * OC, 1e-5);

        float dx[N * IC], dw[OC * IC] = { 0 }, db[OC] = { 0 };
        for (int i = 0; i < N * IC; i++) dx[i] = NAN;     /* dinp is assigned */
        if (with_bias) {
            remat_linear_backward(dx, dw, db, R, x, w, N, IC, OC, REMAT_DTYPE_FP32, 1, NULL);
            fd_check("linear_backward dinp", cx.x, N * IC, dx, lin_loss, &cx, 1e-5);
            fd_check("linear_backward dw", cx.w, OC * IC, dw, lin_loss, &cx, 1e-5);
            fd_check("linear_backward db", cx.b, OC, db, lin_loss, &cx, 1e-5);
            /* dw, db accumulate */
            float dw2[OC * IC], db2[OC];
            memcpy(dw2, dw, sizeof dw);
            memcpy(db2, db, sizeof db);
            remat_linear_backward(dx, dw2, db2, R, x, w, N, IC, OC, REMAT_DTYPE_FP32, 1, NULL);
            double acc = 0.0;
            for (int i = 0; i < OC * IC; i++) acc = fmax(acc, fabs(dw2[i] - 2.0 * dw[i]));
            for (int i = 0; i < OC; i++) acc = fmax(acc, fabs(db2[i] - 2.0 * db[i]));
            CHECK(acc <= 1e-5, "linear_backward dw/db do not accumulate: err %.3g", acc);
        } else {
            /* dinp == NULL and db == NULL: only dw is touched */
            remat_linear_backward(NULL, dw, NULL, R, x, w, N, IC, OC, REMAT_DTYPE_FP32, 1, NULL);
            fd_check("linear_backward dw (dinp=NULL, db=NULL)", cx.w, OC * IC, dw, lin_loss, &cx, 1e-5);
            int untouched = 1;
            for (int i = 0; i < N * IC; i++) untouched &= isnan(dx[i]);
            for (int i = 0; i < OC; i++) untouched &= db[i] == 0.0f;
            CHECK(untouched, "linear_backward wrote through a NULL-skipped output");
        }
        free(cx.x);
        free(cx.w);
        free(cx.b);
    }
}

/* The GEMM seam's bf16 products (gemm.h) against a double reference of
 * the bf16 operands, every transpose, fp32 and bf16 results, alpha, beta
 * on a previous C, a bias, leading dimensions wider than the rows: through
 * oneDNN's bf16 matmul where this machine has one, and always through the
 * fp32 copies used where it has none (gemm.c, "bf16 where oneDNN has
 * none").  The products of bf16 values are exact and summed in fp32:
 * tol 1e-5 for an fp32 result, a bf16 rounding (2^-8) for a bf16 one. */
static void test_gemm_bf16(void)
{
    enum { M = 13, N = 21, K = 37, LD = 45 };
    if (remat_gemm_get() != REMAT_GEMM_ONEDNN) {
        /* the CBLAS engine (make test-cblas) has no bf16 product: it refuses
         * one, in a message that names the engine it needs */
        printf("gemm, bf16 operands: the %s engine refuses them\n", remat_gemm_name(remat_gemm_get()));
        remat_bf16 a[4] = { 0 }, b[4] = { 0 };
        float c[4] = { 0 };
        remat_gemm_op g = { REMAT_DTYPE_BF16, REMAT_DTYPE_FP32, 0, 0, 2, 2, 2, 1.0f, 0.0f, a, 2, b, 2, c, 2, NULL, NULL };
        remat_gemm(&g);
        CHECK(remat_gemm_check() != REMAT_OK && strstr(remat_errmsg(), "oneDNN"),
              "a bf16 GEMM on the %s engine: refused, in a message naming oneDNN", remat_gemm_name(remat_gemm_get()));
        return;
    }
    printf("gemm, bf16 operands (oneDNN %s)\n", remat_gemm_bf16_native() ? "bf16 matmul" : "has none: fp32 copies");
    float fa[LD * LD], fb[LD * LD], fc[LD * LD], bias[N];
    remat_bf16 a[LD * LD], b[LD * LD], c16[LD * LD];
    fill(fa, LD * LD, 41, -1, 1);
    fill(fb, LD * LD, 42, -1, 1);
    fill(fc, LD * LD, 43, -1, 1);
    fill(bias, N, 44, -1, 1);
    remat_bf16_from_f32(a, fa, LD * LD);
    remat_bf16_from_f32(b, fb, LD * LD);
    int native = remat_gemm_bf16_native();
    for (int emu = native ? 0 : 1; emu <= 1; emu++) {
        remat_gemm_bf16_emulate(emu);
        for (int v = 0; v < 32; v++) {
            int ta = v & 1, tb = (v >> 1) & 1, out16 = (v >> 2) & 1, beta_on = (v >> 3) & 1, bias_on = (v >> 4) & 1;
            if (beta_on && bias_on) continue;   /* gemm.h: a bias only with beta 0 */
            float alpha = beta_on ? 0.75f : 1.0f, beta = beta_on ? 0.5f : 0.0f;
            float c[M * LD];
            double ref[M * N];
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0.0;
                    for (int k = 0; k < K; k++)
                        s += (double)remat_bf16_to_float(ta ? a[k * LD + i] : a[i * LD + k]) *
                             remat_bf16_to_float(tb ? b[j * LD + k] : b[k * LD + j]);
                    double old = out16 ? remat_bf16_to_float(remat_bf16_round(fc[i * LD + j])) : fc[i * LD + j];
                    ref[i * N + j] = alpha * s + (beta_on ? beta * old : 0.0) + (bias_on ? bias[j] : 0.0);
                }
            for (int i = 0; i < M * LD; i++) c[i] = fc[i];
            remat_bf16_from_f32(c16, fc, M * LD);
            remat_gemm_op g = { REMAT_DTYPE_BF16, out16 ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32, ta, tb, M, N, K,
                                alpha, beta, a, LD, b, LD, out16 ? (void *)c16 : (void *)c, LD,
                                bias_on ? bias : NULL, NULL };
            remat_gemm(&g);
            CHECK(remat_gemm_check() == REMAT_OK, "gemm bf16 failed: %s", remat_errmsg());
            float got[M * N];
            int spill = 0;   /* the columns past N of each row are C's, untouched */
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) got[i * N + j] = out16 ? remat_bf16_to_float(c16[i * LD + j]) : c[i * LD + j];
                for (int j = N; j < LD; j++)
                    spill += out16 ? c16[i * LD + j] != remat_bf16_round(fc[i * LD + j]) : c[i * LD + j] != fc[i * LD + j];
            }
            char what[80];
            snprintf(what, sizeof what, "gemm bf16 %s ta%d tb%d %s%s%s", emu ? "fp32 copies" : "oneDNN", ta, tb,
                     out16 ? "-> bf16" : "-> fp32", beta_on ? " beta" : "", bias_on ? " bias" : "");
            check_close(what, got, ref, M * N, out16 ? 1.0 / 256 : 1e-5);
            CHECK(!spill, "%s: wrote %d elements past its N columns", what, spill);
            /* its workspace (issue 29): the fp32 copies' bytes within the
             * tensor table's bound (M K + N K + M N + 32 floats); given a
             * workspace of exactly that, the product allocates nothing and
             * gives the same bits; 64 bytes fewer is a failure (REMAT_ERR_STATE),
             * not an allocation of its own */
            size_t need = remat_gemm_ws_bytes(&g);
            CHECK(emu ? need > 0 && need <= 4 * ((size_t)M * K + (size_t)N * K + (size_t)M * N + 32) : need == 0,
                  "%s: workspace %zu bytes, bound %zu", what, need,
                  4 * ((size_t)M * K + (size_t)N * K + (size_t)M * N + 32));
            if (!emu) continue;
            char *wbuf = aligned_alloc(64, (need + 63) & ~(size_t)63);
            for (int shortfall = 0; shortfall <= 64; shortfall += 64) {
                remat_ws ws = { wbuf, need - shortfall, NULL, 0, 0 };
                float c2[M * LD];
                remat_bf16 d16[M * LD];
                for (int i = 0; i < M * LD; i++) c2[i] = fc[i];
                remat_bf16_from_f32(d16, fc, M * LD);
                g.C = out16 ? (void *)d16 : (void *)c2;
                g.ws = &ws;
                uint64_t n0 = remat_mem_alloc_count();
                remat_gemm(&g);
                uint64_t made = remat_mem_alloc_count() - n0;
                remat_status st = remat_gemm_check();
                if (shortfall) {
                    CHECK(st == REMAT_ERR_STATE && made == 0, "%s: a workspace 64 bytes short: %s, %llu allocations",
                          what, remat_status_str(st), (unsigned long long)made);
                    continue;
                }
                CHECK(st == REMAT_OK && made == 0, "%s: in its workspace: %s, %llu allocations", what,
                      remat_status_str(st), (unsigned long long)made);
                CHECK(out16 ? !memcmp(d16, c16, sizeof d16) : !memcmp(c2, c, sizeof c2),
                      "%s: in its workspace, other bits than with copies of its own", what);
            }
            free(wbuf);
            g.ws = NULL;
            g.C = out16 ? (void *)c16 : (void *)c;
            uint64_t n0 = remat_mem_alloc_count();
            remat_gemm(&g);
            CHECK(remat_mem_alloc_count() - n0 == 1 && remat_gemm_check() == REMAT_OK,
                  "%s: without a workspace, one allocation for the call", what);
        }
    }
    remat_gemm_bf16_emulate(0);
}

/* ---------------------------------------------------------------- attention */

/* The inputs of one attention call live in one fp32 buffer X (and its
 * double copy x): q, k, v at element offsets oq, ok, ov with row strides
 * ldq, ldk, ldv, as a remat_attn_layout into X describes them. */
typedef struct {
    int B, T, NH, KV, hs;
    size_t oq, ok, ov;
    int ldq, ldk, ldv;
    double *x;
    const float *R;              /* B,T,NH*hs: dout */
    const remat_dropout *drop;
    double *out;                 /* optional: the reference output */
} att_ctx;

static att_ctx att_ctx_of(const remat_attn_layout *L, const float *X, double *x, const float *R,
                          const remat_dropout *drop, double *out)
{
    att_ctx c = { L->B, L->T, L->NH, L->KV, L->hs, (size_t)((const float *)L->q - X),
                  (size_t)((const float *)L->k - X), (size_t)((const float *)L->v - X), L->ldq, L->ldk, L->ldv,
                  x, R, drop, out };
    return c;
}

/* Double reference of scores + values with the kernels' dropout mask:
 * query head h reads kv head h / (NH/KV), L = sum(out * R). */
static double att_loss(const void *p)
{
    const att_ctx *c = p;
    int B = c->B, T = c->T, NH = c->NH, hs = c->hs, grp = NH / c->KV, W = NH * hs;
    double scale = 1.0 / sqrt((double)hs), L = 0.0;
    double *s = xcalloc((size_t)T, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / grp;
            for (int i = 0; i < T; i++) {
                const double *q = c->x + c->oq + ((size_t)b * T + i) * c->ldq + h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *k = c->x + c->ok + ((size_t)b * T + j) * c->ldk + kvh * hs;
                    double d = 0.0;
                    for (int e = 0; e < hs; e++) d += q[e] * k[e];
                    s[j] = d * scale;
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j <= i; j++) { s[j] = exp(s[j] - mx); sum += s[j]; }
                for (int e = 0; e < hs; e++) {
                    double o = 0.0;
                    for (int j = 0; j <= i; j++) {
                        uint64_t idx = (((uint64_t)b * NH + h) * T + i) * T + j;
                        double m = remat_dropout_mult(c->drop, idx);
                        o += s[j] / sum * m * c->x[c->ov + ((size_t)b * T + j) * c->ldv + kvh * hs + e];
                    }
                    size_t oi = ((size_t)b * T + i) * W + h * hs + e;
                    if (c->out) c->out[oi] = o;
                    L += o * c->R[oi];
                }
            }
        }
    free(s);
    return L;
}

/* gx[e] = the kernel's gradient (in dqkv, by the layout's ldg, gq, gk, gv)
 * for element e of X: dq, dk, dv where X holds q, k, v, 0 where no kernel
 * reads X */
static void att_grad_of_x(float *gx, size_t nx, const att_ctx *c, const remat_attn_layout *L, const float *dqkv)
{
    memset(gx, 0, nx * sizeof(float));
    for (size_t r = 0; r < (size_t)c->B * c->T; r++) {
        for (int e = 0; e < c->NH * c->hs; e++) gx[c->oq + r * c->ldq + e] = dqkv[r * L->ldg + L->gq + e];
        for (int e = 0; e < c->KV * c->hs; e++) {
            gx[c->ok + r * c->ldk + e] = dqkv[r * L->ldg + L->gk + e];
            gx[c->ov + r * c->ldv + e] = dqkv[r * L->ldg + L->gv + e];
        }
    }
}

/* Attention: forward tol 1e-5; backward tol 1e-4 (softmax backward subtracts
 * a row sum, and dropout scales by 1/(1-p)). */
static void test_attention_case(int B, int T, int C, int NH, float p)
{
    char what[96];
    size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    float *qkv = xcalloc(nq, sizeof(float)), *R = xcalloc(no, sizeof(float));
    float *att = xcalloc(na, sizeof(float)), *out = xcalloc(no, sizeof(float));
    float *dqkv = xcalloc(nq, sizeof(float));
    double *ref = xcalloc(no, sizeof(double));
    fill(qkv, nq, 41 + T, -1.5f, 1.5f);
    fill(R, no, 42 + T, -1, 1);
    remat_dropout drop = remat_dropout_make(p, remat_rng_key(7, 3, 1, REMAT_SITE_ATT));

    remat_attn_layout al = remat_attn_layout_mha(qkv, B, T, C, NH, REMAT_DTYPE_FP32);
    remat_attention_scores_forward(att, &al);
    remat_attention_values_forward(out, att, &al, &drop, NULL);

    /* causal zeros are written, and each row is a distribution */
    int causal = 1;
    double rowerr = 0.0;
    for (size_t r = 0; r < (size_t)B * NH * T; r++) {
        int i = (int)(r % T);
        double s = 0.0;
        for (int j = 0; j < T; j++) {
            float a = att[r * T + j];
            if (j > i) causal &= a == 0.0f;
            else s += a;
        }
        rowerr = fmax(rowerr, fabs(s - 1.0));
    }
    CHECK(causal, "attention_scores_forward: non-zero above the diagonal (B%d T%d NH%d)", B, T, NH);
    CHECK(rowerr <= 1e-5, "attention_scores_forward: rows do not sum to 1 (err %.3g)", rowerr);

    att_ctx cx = att_ctx_of(&al, qkv, to_double(qkv, nq), R, &drop, ref);
    att_loss(&cx);
    cx.out = NULL;
    snprintf(what, sizeof what, "attention fwd B%d T%d C%d NH%d p%.1f", B, T, C, NH, p);
    check_close(what, out, ref, no, 1e-5);

    for (size_t i = 0; i < nq; i++) dqkv[i] = NAN;   /* dqkv is assigned */
    remat_attention_backward(dqkv, R, att, &al, &drop, NULL);
    snprintf(what, sizeof what, "attention bwd dqkv B%d T%d C%d NH%d p%.1f", B, T, C, NH, p);
    fd_check(what, cx.x, nq, dqkv, att_loss, &cx, 1e-4);

    free(cx.x);
    free(qkv); free(R); free(att); free(out); free(dqkv); free(ref);
}

/* Grouped-query attention, naive and flash, against the double reference:
 * forward tol 1e-5, backward (finite differences over every element of X)
 * tol 1e-4, as for multi-head attention (observed 3e-7 and 5e-7).  Two layouts:
 *   llama:  X = [qk (B,T,(NH+KV)hs) | qkv (B,T,(NH+2KV)hs)], the layout of
 *           remat_attn_layout_gqa: q, k read from qk, v from qkv's last
 *           columns (qkv's q and k columns are not read: their gradient is
 *           0), the gradient shaped like qkv;
 *   custom: q, k, v in three regions of X with strides wider than their
 *           heads and q at column 1; the gradient rows [dv | dk | 3 unused
 *           | dq], whose unused columns must keep what they held.
 * dq, dk, dv are assigned (the buffer starts as NaN). */
static void test_gqa_case(int B, int T, int NH, int KV, int hs, float p, int custom)
{
    char what[112];
    size_t BT = (size_t)B * T, W = (size_t)NH * hs, Wkv = (size_t)KV * hs;
    size_t no = BT * W, na = (size_t)B * NH * T * T, nl = (size_t)B * NH * T, nx, ng;
    remat_attn_layout al;
    float *X;
    if (!custom) {
        nx = BT * (W + Wkv) + BT * (W + 2 * Wkv);
        X = xcalloc(nx, sizeof(float));
        al = remat_attn_layout_gqa(X, X + BT * (W + Wkv), B, T, NH, KV, hs, REMAT_DTYPE_FP32);
    } else {
        int ldq = (int)W + 1, ldk = (int)Wkv + 2, ldv = (int)Wkv + 3;
        nx = BT * (size_t)(ldq + ldk + ldv);
        X = xcalloc(nx, sizeof(float));
        remat_attn_layout c = { B, T, NH, KV, hs, X + 1, X + BT * ldq + 2, X + BT * (ldq + ldk), ldq, ldk, ldv,
                                (int)(2 * Wkv + 3 + W), (int)(2 * Wkv + 3), (int)Wkv, 0, REMAT_DTYPE_FP32, NULL };
        al = c;
    }
    ng = BT * (size_t)al.ldg;
    float *R = xcalloc(no, sizeof(float)), *att = xcalloc(na, sizeof(float)), *lse = xcalloc(nl, sizeof(float));
    float *out = xcalloc(no, sizeof(float)), *g = xcalloc(ng, sizeof(float)), *gx = xcalloc(nx, sizeof(float));
    double *ref = xcalloc(no, sizeof(double)), *fd = xcalloc(nx, sizeof(double));
    fill(X, nx, 43 + T + KV, -1.5f, 1.5f);
    fill(R, no, 44 + T, -1, 1);
    remat_dropout drop = remat_dropout_make(p, remat_rng_key(7, 3, 2, REMAT_SITE_ATT));
    att_ctx cx = att_ctx_of(&al, X, to_double(X, nx), R, &drop, ref);
    att_loss(&cx);
    cx.out = NULL;
    fd_grad(fd, cx.x, nx, att_loss, &cx);
    const char *lay = custom ? "custom" : "llama";

    for (int flash = 0; flash <= 1; flash++) {
        const char *k = flash ? "flash" : "naive";
        if (flash) {
            remat_flash_attention_stats(lse, &al);
            remat_flash_attention_values(out, lse, &al, &drop, NULL);
        } else {
            remat_attention_scores_forward(att, &al);
            remat_attention_values_forward(out, att, &al, &drop, NULL);
        }
        snprintf(what, sizeof what, "gqa %s fwd T%d NH%d KV%d hs%d p%.1f %s", k, T, NH, KV, hs, p, lay);
        check_close(what, out, ref, no, 1e-5);

        for (size_t i = 0; i < ng; i++) g[i] = NAN;
        if (custom)
            for (size_t r = 0; r < BT; r++)
                for (int e = 0; e < 3; e++) g[r * al.ldg + 2 * Wkv + e] = 7.0f;   /* unused columns */
        if (flash) remat_flash_attention_backward(g, R, lse, &al, &drop, NULL);
        else remat_attention_backward(g, R, att, &al, &drop, NULL);
        int kept = 1;
        if (custom)
            for (size_t r = 0; r < BT; r++)
                for (int e = 0; e < 3; e++) kept &= g[r * al.ldg + 2 * Wkv + e] == 7.0f;
        CHECK(kept, "gqa %s bwd wrote a column of the gradient that is not dq, dk or dv", k);
        att_grad_of_x(gx, nx, &cx, &al, g);
        snprintf(what, sizeof what, "gqa %s bwd T%d NH%d KV%d hs%d p%.1f %s", k, T, NH, KV, hs, p, lay);
        fd_compare(what, fd, gx, nx, 1e-4);
    }
    free(cx.x);
    free(X); free(R); free(att); free(lse); free(out); free(g); free(gx); free(ref); free(fd);
}

static void test_attention(void)
{
    printf("attention\n");
    test_attention_case(1, 1, 4, 1, 0.0f);
    test_attention_case(2, 5, 8, 1, 0.0f);
    test_attention_case(2, 5, 8, 2, 0.0f);
    test_attention_case(1, 17, 8, 1, 0.0f);
    test_attention_case(2, 17, 12, 3, 0.0f);
    test_attention_case(1, 1, 4, 2, 0.3f);
    test_attention_case(2, 5, 8, 2, 0.3f);
    test_attention_case(1, 17, 8, 1, 0.3f);
    test_attention_case(2, 17, 12, 3, 0.3f);
    printf("grouped-query attention\n");
    test_gqa_case(2, 5, 4, 1, 3, 0.0f, 0);    /* KV 1 */
    test_gqa_case(2, 5, 4, 2, 3, 0.3f, 0);    /* KV 2 */
    test_gqa_case(1, 17, 4, 4, 5, 0.0f, 0);   /* KV = NH, hs 5 */
    test_gqa_case(1, 17, 4, 4, 5, 0.3f, 1);
    test_gqa_case(1, 17, 6, 2, 3, 0.3f, 1);
    test_gqa_case(1, 1, 2, 1, 4, 0.3f, 0);    /* T 1 */
    test_gqa_case(1, 70, 2, 1, 4, 0.3f, 0);   /* two row blocks (T > 64) */
    test_gqa_case(1, 70, 4, 2, 3, 0.0f, 1);
    test_gqa_case(1, 130, 2, 1, 2, 0.2f, 0);  /* two key tiles (T > 128) */
}

/* --------------------------------------------------------------------- gelu */

typedef struct {
    size_t n;
    double *x;
    const float *R;
    double *out;
} gelu_ctx;

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x)));
}

static double gelu_loss(const void *p)
{
    const gelu_ctx *c = p;
    double L = 0.0;
    for (size_t i = 0; i < c->n; i++) {
        double o = gelu_ref(c->x[i]);
        if (c->out) c->out[i] = o;
        L += o * c->R[i];
    }
    return L;
}

/* GELU: forward and backward tol 1e-5 (elementwise, tanhf ~1 ulp). */
static void test_gelu(void)
{
    printf("gelu\n");
    enum { n = 64 };
    float x[n], R[n], out[n], dx[n];
    fill(x, n, 51, -5, 5);
    fill(R, n, 52, -1, 1);
    double ref[n];
    gelu_ctx cx = { n, to_double(x, n), R, ref };
    gelu_loss(&cx);
    cx.out = NULL;
    remat_gelu_forward(out, x, n, REMAT_DTYPE_FP32);
    check_close("gelu_forward out", out, ref, n, 1e-5);
    remat_gelu_backward(dx, x, R, n, REMAT_DTYPE_FP32);
    fd_check("gelu_backward dinp", cx.x, n, dx, gelu_loss, &cx, 1e-5);
    /* in place: dinp == dout gives the same bits */
    float d2[n];
    memcpy(d2, R, sizeof d2);
    remat_gelu_backward(d2, x, d2, n, REMAT_DTYPE_FP32);
    CHECK(memcmp(d2, dx, sizeof dx) == 0, "gelu_backward in place differs from out of place");
    free(cx.x);
}

/* ------------------------------------------------------------------- swiglu */

typedef struct {
    int N, F;
    double *x;   /* N,2F: [gate | up] */
    const float *R;
    double *out;
} swiglu_ctx;

static double swiglu_loss(const void *p)
{
    const swiglu_ctx *c = p;
    double L = 0.0;
    for (int n = 0; n < c->N; n++)
        for (int k = 0; k < c->F; k++) {
            double g = c->x[(size_t)n * 2 * c->F + k], u = c->x[(size_t)n * 2 * c->F + c->F + k];
            double o = g / (1.0 + exp(-g)) * u;
            if (c->out) c->out[(size_t)n * c->F + k] = o;
            L += o * c->R[(size_t)n * c->F + k];
        }
    return L;
}

/* SwiGLU: forward and backward tol 1e-5 (elementwise; observed 2.3e-6 at
 * max|ref| 27, i.e. 8e-8 of the scale, and 3e-7).  F = 13 leaves a partial vector.  bf16: the fp32 code on the
 * widened inputs, rounded once, so bit-equal to rounding the fp32 kernel's
 * results; F = 1100 crosses a bf16 chunk (1024). */
static void test_swiglu(void)
{
    printf("swiglu\n");
    enum { N = 5, F = 13 };
    float x[N * 2 * F], R[N * F], out[N * F], dx[N * 2 * F];
    fill(x, N * 2 * F, 56, -6, 6);
    fill(R, N * F, 57, -1, 1);
    double ref[N * F];
    swiglu_ctx cx = { N, F, to_double(x, N * 2 * F), R, ref };
    swiglu_loss(&cx);
    cx.out = NULL;
    remat_swiglu_forward(out, x, N, F, REMAT_DTYPE_FP32);
    check_close("swiglu_forward out", out, ref, N * F, 1e-5);
    for (int i = 0; i < N * 2 * F; i++) dx[i] = NAN;   /* din is assigned */
    remat_swiglu_backward(dx, R, x, N, F, REMAT_DTYPE_FP32);
    fd_check("swiglu_backward din", cx.x, N * 2 * F, dx, swiglu_loss, &cx, 1e-5);
    /* in place: din == inp gives the same bits */
    float xi[N * 2 * F];
    memcpy(xi, x, sizeof xi);
    remat_swiglu_backward(xi, R, xi, N, F, REMAT_DTYPE_FP32);
    CHECK(memcmp(xi, dx, sizeof dx) == 0, "swiglu_backward in place differs from out of place");
    free(cx.x);

    /* saturation: exp(-g) -> 0 gives silu = g, silu' = 1; exp(-g) clamped at
     * exp(88) gives silu ~ -0, silu' ~ 0; g = 0 gives 0 and silu' = 1/2 */
    float ge[2 * 8] = { 120, -120, 0, 90, -90, 3, -3, 1, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 2 };
    float de[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, oe[8], dge[16];
    remat_swiglu_forward(oe, ge, 1, 8, REMAT_DTYPE_FP32);
    remat_swiglu_backward(dge, de, ge, 1, 8, REMAT_DTYPE_FP32);
    CHECK(oe[0] == 60.0f && fabsf(oe[1]) < 1e-30f && oe[2] == 0.0f && oe[3] == 45.0f && dge[0] == 0.5f &&
          fabsf(dge[1]) < 1e-30f && dge[2] == 0.25f && dge[8] == 120.0f && fabsf(dge[9]) < 1e-30f && dge[10] == 0.0f,
          "swiglu saturation: out %g %g %g %g, d_gate %g %g %g, d_up %g %g %g", oe[0], oe[1], oe[2], oe[3], dge[0],
          dge[1], dge[2], dge[8], dge[9], dge[10]);

    enum { N2 = 3, F2 = 1100 };
    float *y = xcalloc(N2 * 2 * F2, sizeof(float)), *yw = xcalloc(N2 * 2 * F2, sizeof(float));
    float *d = xcalloc(N2 * F2, sizeof(float)), *dw = xcalloc(N2 * F2, sizeof(float));
    float *o32 = xcalloc(N2 * F2, sizeof(float)), *g32 = xcalloc(N2 * 2 * F2, sizeof(float));
    remat_bf16 *y16 = xcalloc(N2 * 2 * F2, 2), *d16 = xcalloc(N2 * F2, 2);
    remat_bf16 *o16 = xcalloc(N2 * F2, 2), *g16 = xcalloc(N2 * 2 * F2, 2);
    fill(y, N2 * 2 * F2, 58, -6, 6);
    fill(d, N2 * F2, 59, -1, 1);
    remat_bf16_from_f32(y16, y, N2 * 2 * F2);
    remat_bf16_from_f32(d16, d, N2 * F2);
    remat_bf16_to_f32(yw, y16, N2 * 2 * F2);
    remat_bf16_to_f32(dw, d16, N2 * F2);
    remat_swiglu_forward(o32, yw, N2, F2, REMAT_DTYPE_FP32);
    remat_swiglu_forward(o16, y16, N2, F2, REMAT_DTYPE_BF16);
    remat_swiglu_backward(g32, dw, yw, N2, F2, REMAT_DTYPE_FP32);
    remat_swiglu_backward(g16, d16, y16, N2, F2, REMAT_DTYPE_BF16);
    size_t bad = 0;
    for (int i = 0; i < N2 * F2; i++) bad += o16[i] != remat_bf16_round(o32[i]);
    for (int i = 0; i < N2 * 2 * F2; i++) bad += g16[i] != remat_bf16_round(g32[i]);
    CHECK(bad == 0, "swiglu bf16: %zu elements are not the fp32 results rounded once", bad);
    free(y); free(yw); free(d); free(dw); free(o32); free(g32); free(y16); free(d16); free(o16); free(g16);
}

/* ----------------------------------------------------------------- residual */

typedef struct {
    size_t n;
    const float *res;
    double *branch;
    const float *R;
    const remat_dropout *drop;
} res_ctx;

static double res_loss(const void *p)
{
    const res_ctx *c = p;
    double L = 0.0;
    for (size_t i = 0; i < c->n; i++)
        L += ((double)c->res[i] + c->branch[i] * remat_dropout_mult(c->drop, i)) * c->R[i];
    return L;
}

/* Residual: forward tol 1e-6, backward tol 1e-5 (one product each). */
static void test_residual(void)
{
    printf("residual + dropout\n");
    enum { n = 96 };
    float res[n], br[n], R[n], out[n], dbr[n];
    fill(res, n, 61, -1, 1);
    fill(br, n, 62, -1, 1);
    fill(R, n, 63, -1, 1);
    for (int pi = 0; pi < 2; pi++) {
        float p = pi ? 0.3f : 0.0f;
        remat_dropout drop = remat_dropout_make(p, remat_rng_key(7, 3, 0, REMAT_SITE_RES_MLP));
        double ref[n];
        for (int i = 0; i < n; i++) ref[i] = (double)res[i] + (double)br[i] * remat_dropout_mult(&drop, i);
        remat_residual_forward(out, res, br, &drop, n, REMAT_DTYPE_FP32);
        check_close(pi ? "residual_forward out p0.3" : "residual_forward out p0", out, ref, n, 1e-6);
        float alias[n];   /* out aliasing branch */
        memcpy(alias, br, sizeof alias);
        remat_residual_forward(alias, res, alias, &drop, n, REMAT_DTYPE_FP32);
        CHECK(memcmp(alias, out, sizeof out) == 0, "residual_forward with out == branch differs");

        remat_residual_backward_branch(dbr, R, &drop, n, REMAT_DTYPE_FP32);
        res_ctx cx = { n, res, to_double(br, n), R, &drop };
        fd_check(pi ? "residual_backward_branch p0.3" : "residual_backward_branch p0",
                 cx.branch, n, dbr, res_loss, &cx, 1e-5);
        free(cx.branch);
    }
}

/* Dropout masks: rate ~p, kept elements scaled by 1/(1-p), same key -> same
 * mask, another key -> another mask; for the residual and for attention. */
static void test_dropout_mask(void)
{
    printf("dropout masks\n");
    const float p = 0.3f;
    remat_dropout d1 = remat_dropout_make(p, remat_rng_key(1, 2, 3, REMAT_SITE_RES_ATTN));
    remat_dropout d2 = remat_dropout_make(p, remat_rng_key(1, 3, 3, REMAT_SITE_RES_ATTN));

    /* residual: dout = 1 exposes the mask */
    size_t n = 200000;
    float *one = xcalloc(n, sizeof(float)), *m1 = xcalloc(n, sizeof(float));
    float *m1b = xcalloc(n, sizeof(float)), *m2 = xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) one[i] = 1.0f;
    remat_residual_backward_branch(m1, one, &d1, n, REMAT_DTYPE_FP32);
    remat_residual_backward_branch(m1b, one, &d1, n, REMAT_DTYPE_FP32);
    remat_residual_backward_branch(m2, one, &d2, n, REMAT_DTYPE_FP32);
    size_t zeros = 0, badscale = 0;
    for (size_t i = 0; i < n; i++) {
        if (m1[i] == 0.0f) zeros++;
        else if (m1[i] != d1.scale) badscale++;
    }
    double frac = (double)zeros / n;   /* sd = sqrt(p(1-p)/n) ~ 1e-3 */
    printf("  %-44s dropped %.4f (p %.2f)\n", "residual mask", frac, p);
    CHECK(fabs(frac - p) <= 0.01, "residual dropout fraction %.4f, expected %.2f", frac, p);
    CHECK(badscale == 0, "residual dropout: %zu kept elements not scaled by 1/(1-p)", badscale);
    CHECK(memcmp(m1, m1b, n * sizeof(float)) == 0, "residual dropout: same key, different mask");
    CHECK(memcmp(m1, m2, n * sizeof(float)) != 0, "residual dropout: different keys, same mask");
    free(one); free(m1); free(m1b); free(m2);

    /* attention: att = lower-triangular ones and v_j = e_j (hs = T) make
     * out[b,i,h*hs+j] equal to the multiplier of element (b,h,i,j) */
    enum { B = 2, NH = 4, T = 32, C = NH * T };
    float *qkv = xcalloc((size_t)B * T * 3 * C, sizeof(float));
    float *att = xcalloc((size_t)B * NH * T * T, sizeof(float));
    float *o1 = xcalloc((size_t)B * T * C, sizeof(float)), *o2 = xcalloc((size_t)B * T * C, sizeof(float));
    for (int b = 0; b < B; b++)
        for (int j = 0; j < T; j++)
            for (int h = 0; h < NH; h++) qkv[((size_t)b * T + j) * 3 * C + 2 * C + h * T + j] = 1.0f;
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        for (int j = 0; j <= (int)(r % T); j++) att[r * T + j] = 1.0f;
    remat_dropout da = remat_dropout_make(p, remat_rng_key(9, 1, 0, REMAT_SITE_ATT));
    remat_attn_layout al = remat_attn_layout_mha(qkv, B, T, C, NH, REMAT_DTYPE_FP32);
    remat_attention_values_forward(o1, att, &al, &da, NULL);
    remat_attention_values_forward(o2, att, &al, &da, NULL);
    size_t total = 0, dropped = 0, wrong = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j <= i; j++) {
                    float v = o1[((size_t)b * T + i) * C + h * T + j];
                    uint64_t idx = (((uint64_t)b * NH + h) * T + i) * T + j;
                    total++;
                    if (v == 0.0f) dropped++;
                    if (v != remat_dropout_mult(&da, idx)) wrong++;
                }
    frac = (double)dropped / total;   /* sd ~ 5e-3 */
    printf("  %-44s dropped %.4f (p %.2f)\n", "attention mask", frac, p);
    CHECK(fabs(frac - p) <= 0.03, "attention dropout fraction %.4f, expected %.2f", frac, p);
    CHECK(wrong == 0, "attention dropout: %zu elements disagree with index ((b*NH+h)*T+i)*T+j", wrong);
    CHECK(memcmp(o1, o2, (size_t)B * T * C * sizeof(float)) == 0, "attention dropout: same key, different mask");
    free(qkv); free(att); free(o1); free(o2);
}

/* ------------------------------------------------------------- crossentropy */

typedef struct {
    int N, V, Vp;
    double *x;
    const int *tgt;
    double *losses;
} ce_ctx;

/* mean over rows of logsumexp(x[n,:V]) - x[n,tgt] */
static double ce_loss(const void *p)
{
    const ce_ctx *c = p;
    double L = 0.0;
    for (int n = 0; n < c->N; n++) {
        const double *x = c->x + (size_t)n * c->Vp;
        double mx = -INFINITY, s = 0.0;
        for (int v = 0; v < c->V; v++) mx = fmax(mx, x[v]);
        for (int v = 0; v < c->V; v++) s += exp(x[v] - mx);
        double l = mx + log(s) - x[c->tgt[n]];
        if (c->losses) c->losses[n] = l;
        L += l;
    }
    return L / c->N;
}

/* Cross-entropy: loss tol 1e-5; dlogits (of the mean loss) tol 1e-5. */
static void test_crossentropy(void)
{
    printf("crossentropy\n");
    enum { N = 6, V = 37, Vp = 64 };
    float x[N * Vp], g[N * Vp], losses[N];
    int tgt[N] = { 0, 36, 5, 17, 5, 30 };
    fill(x, N * Vp, 71, -4, 4);
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++) x[n * Vp + v] = 100.0f;   /* padding must be ignored */
    x[2 * Vp + 5] = 60.0f;   /* a confident row */

    double lref[N];
    ce_ctx cx = { N, V, Vp, to_double(x, N * Vp), tgt, lref };
    double mean_ref = ce_loss(&cx);
    cx.losses = NULL;

    /* evaluation: logits untouched */
    memcpy(g, x, sizeof g);
    double sum0 = remat_crossentropy_forward(losses, g, tgt, N, V, Vp, 0.0f, REMAT_DTYPE_FP32, NULL);
    CHECK(memcmp(g, x, sizeof g) == 0, "crossentropy_forward with scale 0 modified the logits");
    check_close("crossentropy losses", losses, lref, N, 1e-5);
    double s = 0.0;
    for (int n = 0; n < N; n++) s += losses[n];
    CHECK(sum0 == s, "crossentropy_forward return %.17g != row-order double sum %.17g", sum0, s);
    CHECK(fabs(sum0 / N - mean_ref) <= 1e-5 * (1 + fabs(mean_ref)),
          "crossentropy mean loss %.9g vs reference %.9g", sum0 / N, mean_ref);
    printf("  %-44s %.9f vs ref %.9f\n", "crossentropy mean loss", sum0 / N, mean_ref);

    /* training: logits become d(mean loss)/d logits */
    memcpy(g, x, sizeof g);
    double sum1 = remat_crossentropy_forward(losses, g, tgt, N, V, Vp, 1.0f / N, REMAT_DTYPE_FP32, NULL);
    CHECK(sum1 == sum0, "crossentropy loss differs between scale 0 and 1/N");
    int padzero = 1;
    for (int n = 0; n < N; n++)
        for (int v = V; v < Vp; v++) padzero &= g[n * Vp + v] == 0.0f;
    CHECK(padzero, "crossentropy: padded columns of dlogits are not zero");
    fd_check("crossentropy dlogits (mean loss)", cx.x, N * Vp, g, ce_loss, &cx, 1e-5);
    free(cx.x);

    /* stability: huge logits */
    float big[Vp];
    for (int v = 0; v < Vp; v++) big[v] = 1000.0f;
    int t0 = 3;
    float l1;
    remat_crossentropy_forward(&l1, big, &t0, 1, V, Vp, 1.0f, REMAT_DTYPE_FP32, NULL);
    CHECK(fabs(l1 - log((double)V)) <= 1e-5, "crossentropy unstable for large logits: %g", l1);
    CHECK(isfinite(big[0]) && fabs(big[t0] - (1.0 / V - 1.0)) <= 1e-6, "crossentropy grad unstable");
}

/* -------------------------------------------------------------------- adamw */

/* AdamW: one step against the same formula in double: tol 1e-6 relative.
 * Step counts past 2^31 and 2^32 too: the count is 64-bit end to end (an
 * int would wrap to a negative or a small step and misplace the bias
 * corrections). */
static void test_adamw(void)
{
    printf("adamw\n");
    enum { n = 1003 };   /* a ragged last vector */
    float p[n], g[n], m[n], v[n];
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.7f;
    const uint64_t steps[] = { 1, 3, ((uint64_t)1 << 31) + 7, ((uint64_t)1 << 32) + 3 };
    for (int decay = 0; decay <= 1; decay++)
        for (int k = 0; k < 4; k++) {
            uint64_t t = steps[k];
            fill(p, n, 81, -1, 1);
            fill(g, n, 82, -1, 1);
            if (t == 1) { memset(m, 0, sizeof m); memset(v, 0, sizeof v); }
            else { fill(m, n, 83, -0.1f, 0.1f); fill(v, n, 84, 0.0f, 0.01f); }
            double pr[n], mr[n], vr[n];
            for (int i = 0; i < n; i++) {
                double gi = (double)g[i] * gs, pi = p[i];
                if (decay) pi *= 1.0 - (double)lr * wd;
                mr[i] = (double)b1 * m[i] + (1.0 - (double)b1) * gi;
                vr[i] = (double)b2 * v[i] + (1.0 - (double)b2) * gi * gi;
                double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
                pr[i] = pi - lr / bc1 * mr[i] / (sqrt(vr[i]) / sqrt(bc2) + eps);
            }
            remat_bf16 p16[n];
            remat_adamw_update(p, g, m, v, p16, n, lr, b1, b2, eps, wd, decay, gs, t);
            int bad16 = 0;   /* the fused bf16 copy is the new p, rounded */
            for (int i = 0; i < n; i++) bad16 += p16[i] != remat_bf16_round(p[i]);
            CHECK(bad16 == 0, "adamw bf16 copy: %d of %d differ from the rounded parameters", bad16, n);
            char what[64];
            snprintf(what, sizeof what, "adamw p (decay %d, t %llu)", decay, (unsigned long long)t);
            check_close(what, p, pr, n, 1e-6);
            snprintf(what, sizeof what, "adamw m (decay %d, t %llu)", decay, (unsigned long long)t);
            check_close(what, m, mr, n, 1e-6);
            snprintf(what, sizeof what, "adamw v (decay %d, t %llu)", decay, (unsigned long long)t);
            check_close(what, v, vr, n, 1e-6);
        }
}

/* AdamW over several spans at once (remat_adamw_update_spans: one
 * parallel region, spans of ragged lengths starting anywhere, the bf16
 * copy streamed where aligned) against the scalar operations of its
 * contract, bit for bit: the vector lanes, the masked last vector and the
 * streaming stores change no bits.  The moments start at an offset (a
 * ZeRO-1 slice's). */
static void test_adamw_spans(void)
{
    enum { n = 70001, mv0 = 1000 };
    float *p = xcalloc(n, 4), *g = xcalloc(n, 4), *m = xcalloc(n - mv0, 4), *v = xcalloc(n - mv0, 4);
    float *pr = xcalloc(n, 4), *mr = xcalloc(n - mv0, 4), *vr = xcalloc(n - mv0, 4);
    remat_bf16 *p16 = xcalloc(n, 2);
    fill(p, n, 91, -1, 1); fill(g, n, 92, -1, 1); fill(m, n - mv0, 93, -0.1f, 0.1f); fill(v, n - mv0, 94, 0, 0.01f);
    memcpy(pr, p, n * 4); memcpy(mr, m, (n - mv0) * 4); memcpy(vr, v, (n - mv0) * 4);
    remat_adamw_span sp[4] = { { mv0, 17, 1 }, { mv0 + 17, 8192 * 3 + 5, 0 }, { mv0 + 17 + 8192 * 3 + 5, 1, 1 },
                               { mv0 + 17 + 8192 * 3 + 6, n - (mv0 + 17 + 8192 * 3 + 6), 1 } };
    const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.7f;
    const uint64_t t = 5;
    remat_adamw_update_spans(p, g, m, v, p16, mv0, sp, 4, lr, b1, b2, eps, wd, gs, t);
    float step = (float)((double)lr / (1.0 - pow(b1, (double)t))), bc2 = (float)sqrt(1.0 - pow(b2, (double)t));
    float keep1 = (float)(1.0 - (double)lr * (double)wd), c1 = 1.0f - b1, c2 = 1.0f - b2;
    size_t bad = 0, bad16 = 0;
    for (int k = 0; k < 4; k++)
        for (size_t i = sp[k].at; i < sp[k].at + sp[k].n; i++) {
            float gi = g[i] * gs, pi = pr[i] * (sp[k].decay ? keep1 : 1.0f);
            float mi = b1 * mr[i - mv0] + c1 * gi, vi = b2 * vr[i - mv0] + c2 * gi * gi;
            pi = pi - step * (mi / (sqrtf(vi) / bc2 + eps));
            bad += memcmp(&pi, &p[i], 4) || memcmp(&mi, &m[i - mv0], 4) || memcmp(&vi, &v[i - mv0], 4);
            bad16 += p16[i] != remat_bf16_round(pi);
        }
    for (size_t i = 0; i < mv0; i++) bad += p[i] != pr[i] || p16[i] != 0;   /* outside every span: untouched */
    CHECK(!bad && !bad16, "adamw spans: %zu parameters or moments and %zu bf16 copies differ from the scalar "
          "operations", bad, bad16);
    free(p); free(g); free(m); free(v); free(pr); free(mr); free(vr); free(p16);
}

/* ---------------------------------------------------------------- sumsq */

static void test_sumsq(void)
{
    printf("sumsq\n");
    size_t n = 256 * 4096 + 77777;   /* more than one stack group, ragged tail */
    float *g = xcalloc(n, sizeof(float));
    fill(g, n, 91, -1, 1);
    long double ref = 0.0L;
    for (size_t i = 0; i < n; i++) ref += (long double)g[i] * g[i];
    double s = remat_sumsq(g, n);
    double rel = fabs(s - (double)ref) / (double)ref;
    printf("  %-44s rel err %.2e\n", "sumsq vs long double", rel);
    CHECK(rel <= 1e-12, "sumsq rel err %.3g", rel);
    CHECK(remat_sumsq(g, 0) == 0.0, "sumsq of nothing is not 0");
    CHECK(remat_sumsq(g, 3) == (double)g[0] * g[0] + (double)g[1] * g[1] + (double)g[2] * g[2],
          "sumsq of 3 elements");
    /* the partials taken piece by piece as a backward finishes them: ragged
     * pieces, one passed twice with a write in between (forgotten and
     * recomputed), one never passed, the last ending at n */
    size_t nb = (n + SUMSQ_BLOCK_ELEMS - 1) / SUMSQ_BLOCK_ELEMS;
    double *parts = xcalloc(nb, sizeof(double));
    uint8_t *done = xcalloc(nb, 1);
    size_t cut[] = { 0, 5000, 5001, 300000, 301234, 700000, n - 3000, n };
    for (int k = 0; k + 1 < (int)(sizeof cut / sizeof cut[0]); k++)
        if (k != 3) remat_sumsq_blocks_within(g, n, cut[k], cut[k + 1], parts, done);
    g[400000] *= 3.0f;   /* piece 4 written again after its partials */
    remat_sumsq_blocks_forget(n, cut[4], cut[5], done);
    double s2 = remat_sumsq(g, n), sp = remat_sumsq_blocks_finish(g, n, parts, done);
    printf("  %-44s %s\n", "sumsq from a backward's pieces", sp == s2 ? "same bits" : "DIFFERENT");
    CHECK(sp == s2, "sumsq_blocks_finish %.17g != sumsq %.17g", sp, s2);
    CHECK(s2 != s, "the rewritten element did not change the norm (the test cannot see a stale partial)");
    free(parts); free(done);
    free(g);
}

/* ------------------------------------------------------------- determinism */

/* Two runs on the same inputs give memcmp-identical outputs. */
static void test_repeatable(void)
{
    printf("determinism: same inputs, same bits\n");
    enum { B = 2, T = 33, C = 48, NH = 4, N = B * T, OC = 40, V = 50, Vp = 64 };
    float *qkv = xcalloc(N * 3 * C, sizeof(float)), *R = xcalloc(N * C, sizeof(float));
    fill(qkv, N * 3 * C, 101, -2, 2);
    fill(R, N * C, 102, -1, 1);
    remat_dropout drop = remat_dropout_make(0.1f, 55);
    remat_attn_layout al = remat_attn_layout_mha(qkv, B, T, C, NH, REMAT_DTYPE_FP32);

    float *att[2], *out[2], *dq[2];
    for (int r = 0; r < 2; r++) {
        att[r] = xcalloc((size_t)B * NH * T * T, sizeof(float));
        out[r] = xcalloc(N * C, sizeof(float));
        dq[r] = xcalloc(N * 3 * C, sizeof(float));
        remat_attention_scores_forward(att[r], &al);
        remat_attention_values_forward(out[r], att[r], &al, &drop, NULL);
        remat_attention_backward(dq[r], R, att[r], &al, &drop, NULL);
    }
    CHECK(memcmp(att[0], att[1], (size_t)B * NH * T * T * sizeof(float)) == 0, "attention scores not repeatable");
    CHECK(memcmp(out[0], out[1], N * C * sizeof(float)) == 0, "attention values not repeatable");
    CHECK(memcmp(dq[0], dq[1], N * 3 * C * sizeof(float)) == 0, "attention backward not repeatable");

    /* one thread vs two: attention backward too (disjoint (b,h) slices) */
    omp_set_num_threads(1);
    remat_attention_backward(dq[1], R, att[0], &al, &drop, NULL);
    omp_set_num_threads(2);
    remat_attention_backward(dq[0], R, att[0], &al, &drop, NULL);
    CHECK(memcmp(dq[0], dq[1], N * 3 * C * sizeof(float)) == 0, "attention backward depends on threads");
    for (int r = 0; r < 2; r++) { free(att[r]); free(out[r]); free(dq[r]); }

    /* layernorm, linear, crossentropy: run twice */
    float *x = xcalloc(N * C, sizeof(float)), *w = xcalloc(OC * C, sizeof(float)), *b = xcalloc(OC, sizeof(float));
    fill(x, N * C, 103, -1, 2);
    fill(w, OC * C, 104, -1, 1);
    fill(b, OC, 105, -1, 1);
    float lnw[C], lnb[C];
    fill(lnw, C, 107, 0.5f, 1.5f);
    fill(lnb, C, 108, -1, 1);
    float *lo[2], *st[2], *li[2], *ldx[2], *ldw[2], *ldb[2], *ce[2], *cl[2];
    double cs[2];
    int tgt[N];
    for (int i = 0; i < N; i++) tgt[i] = (i * 7) % V;
    for (int r = 0; r < 2; r++) {
        st[r] = xcalloc(N * 2, sizeof(float));
        lo[r] = xcalloc(N * C, sizeof(float));
        remat_layernorm_stats(st[r], x, N, C, REMAT_DTYPE_FP32);
        remat_layernorm_apply(lo[r], REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, st[r], lnw, lnb, N, C);
        li[r] = xcalloc(N * OC, sizeof(float));
        ldx[r] = xcalloc(N * C, sizeof(float));
        ldw[r] = xcalloc(OC * C, sizeof(float));
        ldb[r] = xcalloc(OC, sizeof(float));
        remat_linear_forward(li[r], REMAT_DTYPE_FP32, x, w, b, N, C, OC, REMAT_DTYPE_FP32, NULL);
        remat_linear_backward(ldx[r], ldw[r], ldb[r], li[r], x, w, N, C, OC, REMAT_DTYPE_FP32, 1, NULL);
        ce[r] = xcalloc(N * Vp, sizeof(float));
        cl[r] = xcalloc(N, sizeof(float));
        fill(ce[r], N * Vp, 106, -5, 5);
        cs[r] = remat_crossentropy_forward(cl[r], ce[r], tgt, N, V, Vp, 0.5f, REMAT_DTYPE_FP32, NULL);
    }
    CHECK(memcmp(st[0], st[1], N * 2 * sizeof(float)) == 0 &&
          memcmp(lo[0], lo[1], N * C * sizeof(float)) == 0, "layernorm forward not repeatable");
    CHECK(memcmp(li[0], li[1], N * OC * sizeof(float)) == 0 &&
          memcmp(ldx[0], ldx[1], N * C * sizeof(float)) == 0 &&
          memcmp(ldw[0], ldw[1], OC * C * sizeof(float)) == 0 &&
          memcmp(ldb[0], ldb[1], OC * sizeof(float)) == 0, "linear not repeatable");
    CHECK(memcmp(ce[0], ce[1], N * Vp * sizeof(float)) == 0 &&
          memcmp(cl[0], cl[1], N * sizeof(float)) == 0 &&
          memcmp(&cs[0], &cs[1], sizeof(double)) == 0, "crossentropy not repeatable");
    for (int r = 0; r < 2; r++) {
        free(st[r]); free(lo[r]); free(li[r]); free(ldx[r]); free(ldw[r]); free(ldb[r]);
        free(ce[r]); free(cl[r]);
    }
    free(x); free(w); free(b); free(qkv); free(R);
}

/* One thread vs two (vs four): layernorm and rmsnorm backward, encoder
 * backward and sumsq give the same bits, because their reductions run in a fixed order. */
static void test_thread_independence(void)
{
    printf("determinism: thread count\n");
    /* N*C = 281600 is above the kernels' 2^18 threshold for forking a
     * parallel region, so the threaded paths run */
    enum { B = 4, T = 64, C = 1100, N = B * T, Vp = 64 };
    float *x = xcalloc(N * C, sizeof(float)), *d = xcalloc(N * C, sizeof(float));
    float *w = xcalloc(C, sizeof(float)), *b = xcalloc(C, sizeof(float)), *st = xcalloc(N * 2, sizeof(float));
    fill(x, N * C, 111, -1, 2);
    fill(d, N * C, 112, -1, 1);
    fill(w, C, 113, 0.5f, 1.5f);
    fill(b, C, 114, -1, 1);
    int inp[N];
    for (int i = 0; i < N; i++) inp[i] = (int)(remat_rng_bits(115, i) % 10);   /* many repeats */
    remat_layernorm_stats(st, x, N, C, REMAT_DTYPE_FP32);

    const int threads[3] = { 1, 2, 4 };
    float *dx[3], *dw[3], *db[3], *dwte[3], *dwpe[3], *rx[3], *rw[3];
    float *rs = xcalloc(N, sizeof(float));
    double ss[3];
    remat_rmsnorm_stats(rs, x, N, C, REMAT_DTYPE_FP32, 1e-5);
    for (int r = 0; r < 3; r++) {
        omp_set_num_threads(threads[r]);
        dx[r] = xcalloc(N * C, sizeof(float));
        dw[r] = xcalloc(C, sizeof(float));
        db[r] = xcalloc(C, sizeof(float));
        remat_layernorm_backward(dx[r], dw[r], db[r], d, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, st, w, N, C);
        rx[r] = xcalloc(N * C, sizeof(float));
        rw[r] = xcalloc(C, sizeof(float));
        remat_rmsnorm_backward(rx[r], rw[r], d, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, rs, w, N, C);
        dwte[r] = xcalloc(Vp * C, sizeof(float));
        dwpe[r] = xcalloc(T * C, sizeof(float));
        remat_encoder_backward(dwte[r], dwpe[r], d, inp, B, T, C);
        ss[r] = remat_sumsq(x, N * C);
    }
    omp_set_num_threads(2);
    for (int r = 1; r < 3; r++) {
        CHECK(memcmp(dx[0], dx[r], N * C * sizeof(float)) == 0 &&
              memcmp(dw[0], dw[r], C * sizeof(float)) == 0 &&
              memcmp(db[0], db[r], C * sizeof(float)) == 0,
              "layernorm_backward differs between 1 and %d threads", threads[r]);
        CHECK(memcmp(rx[0], rx[r], N * C * sizeof(float)) == 0 && memcmp(rw[0], rw[r], C * sizeof(float)) == 0,
              "rmsnorm_backward differs between 1 and %d threads", threads[r]);
        CHECK(memcmp(dwte[0], dwte[r], Vp * C * sizeof(float)) == 0 &&
              memcmp(dwpe[0], dwpe[r], T * C * sizeof(float)) == 0,
              "encoder_backward differs between 1 and %d threads", threads[r]);
        CHECK(memcmp(&ss[0], &ss[r], sizeof(double)) == 0,
              "sumsq differs between 1 and %d threads", threads[r]);
    }
    /* and the encoder's scatter is right with many repeats */
    double err = 0.0;
    for (int k = 0; k < C; k++) {
        double s = 0.0;
        for (int i = 0; i < N; i++) if (inp[i] == 3) s += d[(size_t)i * C + k];
        err = fmax(err, fabs(s - dwte[0][3 * C + k]));
    }
    CHECK(err <= 1e-4, "encoder_backward scatter with repeated tokens: err %.3g", err);
    for (int r = 0; r < 3; r++) {
        free(dx[r]); free(dw[r]); free(db[r]); free(dwte[r]); free(dwpe[r]); free(rx[r]); free(rw[r]);
    }
    free(x); free(d); free(w); free(b); free(st); free(rs);
}

int main(void)
{
    test_vector_twins();
    test_encoder();
    test_layernorm();
    test_rmsnorm();
    test_rope();
    test_linear();
    test_gemm_bf16();
    test_attention();
    test_gelu();
    test_swiglu();
    test_residual();
    test_dropout_mask();
    test_crossentropy();
    test_adamw();
    test_adamw_spans();
    test_sumsq();
    test_repeatable();
    test_thread_independence();
    return TEST_REPORT();
}
