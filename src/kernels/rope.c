/*
 * rope.c -- rotary position embeddings (Su et al. 2021, "RoFormer") in
 * Hugging Face's convention (transformers' modeling_llama.py: rotate_half
 * over split halves, positions 0..T-1), and the llama3 frequency scaling
 * of modeling_rope_utils.py (Llama 3.1).  Contract in kernels.h.
 *
 * Legend: B batch, T sequence length, hs head size, h = hs/2, nh heads
 * rotated (NH query heads + KV key heads), ld the row stride of the qkv
 * buffer, maxT the rows of the table (>= T).
 *
 * Channel i < h of a head pairs with channel i + h (not 2i with 2i+1, the
 * paper's interleaving): with c = cos(t f_i), s = sin(t f_i),
 *   out[i]   = x[i] c - x[i+h] s
 *   out[i+h] = x[i+h] c + x[i] s          (x cos + rotate_half(x) sin)
 * and the backward is the transposed rotation (the angle negated):
 *   dx[i]    = dy[i] c + dy[i+h] s
 *   dx[i+h]  = dy[i+h] c - dy[i] s.
 * Frequencies f_i = theta^(-2i/hs), optionally rescaled (llama3, below).
 * Hugging Face computes f_i, t f_i, cos and sin in fp32; the table here
 * computes them in double and rounds each entry once (the two differ by
 * about t * 2^-24 in the angle).
 *
 * Elementwise over rows: any split gives the same bits.  bf16: the
 * elements widened to fp32, the rotation in fp32, one rounding when stored.
 */
#include <assert.h>
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "vmath.h"

#define ROPE_PI 3.14159265358979323846

#define INLINE static inline __attribute__((always_inline))
#define LD(p, c, t) (t == REMAT_DTYPE_BF16 ? remat_bf16_to_float(((const remat_bf16 *)(p))[c]) : ((const float *)(p))[c])

/* The frequency of channel pair i, in double.
 * llama3 (transformers' _compute_llama3_parameters): with the wavelength
 * w = 2 pi / f and the original context L0,
 *   w > L0 / low_freq_factor    (low frequencies):   f / factor
 *   w < L0 / high_freq_factor   (high frequencies):  f unchanged
 *   otherwise, a = (L0 / w - low) / (high - low):    (1 - a) f / factor + a f
 * (the two bounds themselves fall in the interpolated band). */
static double rope_freq(int i, int hs, double theta, const remat_rope_llama3 *sc)
{
    double f = 1.0 / pow(theta, (double)(2 * i) / hs);
    if (!sc) return f;
    double w = 2.0 * ROPE_PI / f, L0 = sc->original_max_pos;
    if (w > L0 / sc->low_freq_factor) return f / sc->factor;   /* first, as transformers' torch.where */
    if (w < L0 / sc->high_freq_factor) return f;
    double a = (L0 / w - sc->low_freq_factor) / (sc->high_freq_factor - sc->low_freq_factor);
    return (1.0 - a) * f / sc->factor + a * f;
}

/* tab[t, i] = cos(t f_i), tab[t, h + i] = sin(t f_i) for t < maxT, i < h */
void remat_rope_table(float *tab, int maxT, int hs, double theta, const remat_rope_llama3 *scaling)
{
    assert(hs > 0 && hs % 2 == 0 && "RoPE needs an even head size: validate head_dim before building the table");
    int h = hs / 2;
    double f[h];
    for (int i = 0; i < h; i++) f[i] = rope_freq(i, hs, theta, scaling);
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)16 * maxT * h))
    for (int t = 0; t < maxT; t++)
        for (int i = 0; i < h; i++) {
            double a = (double)t * f[i];
            tab[(size_t)t * hs + i] = (float)cos(a);
            tab[(size_t)t * hs + h + i] = (float)sin(a);
        }
}

/* one row: nh heads of x (dt) rotated into o (o_dt); sign +1 forward, -1
 * backward (the transpose).  o may be x (each pair is read before it is
 * written).  ROPE_CHUNK pairs at a time: the rotations in fp32 vectors,
 * then (bf16) one vector rounding per half; elementwise, so the bits of one
 * pair at a time. */
#define ROPE_CHUNK 64
INLINE void rope_row(void *o, int o_dt, const void *x, int dt, const float *cs, int nh, int hs, int sign)
{
    int h = hs / 2;
    const float *sn = cs + h;
    for (int k = 0; k < nh; k++)
        for (int i0 = 0; i0 < h; i0 += ROPE_CHUNK) {
            int m = h - i0 < ROPE_CHUNK ? h - i0 : ROPE_CHUNK, c1 = k * hs + i0, c2 = c1 + h;
            float y1[ROPE_CHUNK], y2[ROPE_CHUNK];
            #pragma omp simd
            for (int i = 0; i < m; i++) {
                float x1 = LD(x, c1 + i, dt), x2 = LD(x, c2 + i, dt), c = cs[i0 + i], s = sn[i0 + i];
                if (sign > 0) {
                    y1[i] = x1 * c - x2 * s;
                    y2[i] = x2 * c + x1 * s;
                } else {
                    y1[i] = x1 * c + x2 * s;
                    y2[i] = x2 * c - x1 * s;
                }
            }
            if (o_dt == REMAT_DTYPE_BF16) {
                remat_bf16_from_f32((remat_bf16 *)o + c1, y1, (size_t)m);
                remat_bf16_from_f32((remat_bf16 *)o + c2, y2, (size_t)m);
            } else {
                memcpy((float *)o + c1, y1, (size_t)m * sizeof(float));
                memcpy((float *)o + c2, y2, (size_t)m * sizeof(float));
            }
        }
}

/* out[b,t,k*hs+i] = rope(qkv[b,t,k*hs+i]) for heads k < nh (positions t).
 * out (B,T,nh*hs), qkv rows of ld elements (B*T of them), tab (maxT,hs). */
void remat_rope_forward(void *out, const void *qkv, int ld, const float *tab, int B, int T, int nh, int hs, int dt)
{
    size_t es = remat_dtype_bytes(dt), w = (size_t)nh * hs;
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)B * T * w))
    for (int bt = 0; bt < B * T; bt++) {
        const char *x = (const char *)qkv + (size_t)bt * ld * es;
        char *o = (char *)out + (size_t)bt * w * es;
        const float *cs = tab + (size_t)(bt % T) * hs;
        if (dt == REMAT_DTYPE_BF16) rope_row(o, REMAT_DTYPE_BF16, x, REMAT_DTYPE_BF16, cs, nh, hs, 1);
        else rope_row(o, REMAT_DTYPE_FP32, x, REMAT_DTYPE_FP32, cs, nh, hs, 1);
    }
}

/* dqkv[b,t,k*hs+i] = rope^T(dqkv[b,t,k*hs+i]) in place for heads k < nh;
 * the columns from nh*hs on are not touched. */
void remat_rope_backward(void *dqkv, int ld, const float *tab, int B, int T, int nh, int hs, int dt)
{
    size_t es = remat_dtype_bytes(dt);
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)B * T * nh * hs))
    for (int bt = 0; bt < B * T; bt++) {
        char *d = (char *)dqkv + (size_t)bt * ld * es;
        const float *cs = tab + (size_t)(bt % T) * hs;
        if (dt == REMAT_DTYPE_BF16) rope_row(d, REMAT_DTYPE_BF16, d, REMAT_DTYPE_BF16, cs, nh, hs, -1);
        else rope_row(d, REMAT_DTYPE_FP32, d, REMAT_DTYPE_FP32, cs, nh, hs, -1);
    }
}
