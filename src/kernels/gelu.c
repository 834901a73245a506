/*
 * gelu.c -- the elementwise ops of a block: GELU (tanh approximation,
 * Hendrycks & Gimpel 2016; torch approximate='tanh') and the residual add
 * with inverted dropout on the branch.  Contract in kernels.h.
 *
 * Legend: n elements (N*4C for the GELU, N*C for the residual).
 * All gradients here are activation gradients and are assigned (=).
 * Elementwise, so any OpenMP split gives the same bits.
 */
#include <math.h>
#include "kernels.h"

#define GELU_K 0.7978845608028654f   /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* out = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).  out, inp (n) */
void gelu_forward(float *out, const float *inp, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + GELU_A * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

/* gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3*0.044715 x^2)
 * dinp = dout * gelu'(inp).  dinp, inp, dout (n); dinp may alias dout
 * (each element reads dout[i] before writing dinp[i]). */
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float u = GELU_K * (x + GELU_A * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        dinp[i] = dout[i] * g;
    }
}

/* out[i] = res[i] + branch[i] * m_i,  m_i = 0 or 1/(1-p) from (drop->key, i).
 * out, res, branch (n); out may alias branch (or res). */
void residual_forward(float *out, const float *res, const float *branch,
                      const remat_dropout *drop, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        out[i] = res[i] + branch[i] * remat_dropout_mult(drop, (uint64_t)i);
}

/* dbranch[i] = dout[i] * m_i.  dbranch, dout (n); dbranch may alias dout. */
void residual_backward_branch(float *dbranch, const float *dout,
                              const remat_dropout *drop, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        dbranch[i] = dout[i] * remat_dropout_mult(drop, (uint64_t)i);
}
