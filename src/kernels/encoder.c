/*
 * encoder.c -- token + position embedding (GPT-2 "wte"/"wpe"), forward and
 * backward; without wpe (NULL) the token embedding alone (Llama, whose
 * positions enter through RoPE instead).  Contract and legend in kernels.h.
 *
 * Legend: B batch, T sequence length, C channels, Vp padded vocabulary,
 * maxT the number of rows of wpe (>= T).
 * Parameter gradients accumulate (+=); there is no activation gradient
 * (the input is token ids).
 */
#include <string.h>
#include "kernels.h"
#include "vmath.h"

/* out[b,t,c] = wte[inp[b,t],c] + wpe[t,c]   (rounded once under bf16)
 * out (B,T,C dt), inp (B,T), wte (Vp,C), wpe (maxT,C) or NULL (no term).
 * Rows are independent, so any split over (b,t) gives the same bits. */
void remat_encoder_forward(void *out, const int *inp, const float *wte, const float *wpe, int B, int T, int C, int dt)
{
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)B * T * C))
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const float *we = wte + (size_t)inp[bt] * C;
        if (!wpe) {   /* a copy (exact, also under bf16: one rounding) */
            if (dt == REMAT_DTYPE_BF16) remat_bf16_from_f32((remat_bf16 *)out + (size_t)bt * C, we, (size_t)C);
            else memcpy((float *)out + (size_t)bt * C, we, (size_t)C * sizeof(float));
            continue;
        }
        const float *pe = wpe + (size_t)t * C;
        if (dt == REMAT_DTYPE_BF16) {
            remat_bf16 *o = (remat_bf16 *)out + (size_t)bt * C;
            for (int c = 0; c < C; c++) o[c] = remat_bf16_round(we[c] + pe[c]);
        } else {
            float *o = (float *)out + (size_t)bt * C;
            #pragma omp simd
            for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
        }
    }
}

/* dwte[inp[b,t],c] += dout[b,t,c];  dwpe[t,c] += dout[b,t,c] (skipped when NULL)
 * dwte (Vp,C), dwpe (maxT,C) or NULL, dout (B,T,C), inp (B,T).
 *
 * Several (b,t) can name the same token, so rows of dwte are shared between
 * (b,t).  Splitting over channels instead makes every output element belong
 * to exactly one thread, and each element sums its contributions in (b,t)
 * order whatever the split: no races, and the bits do not depend on the
 * thread count.  Blocks of 16 channels keep the row reads contiguous. */
#define ENC_CBLOCK 16
void remat_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *inp,
                      int B, int T, int C)
{
    int nblk = (C + ENC_CBLOCK - 1) / ENC_CBLOCK;
    #pragma omp parallel for schedule(static) if (REMAT_PAR((size_t)B * T * C))
    for (int blk = 0; blk < nblk; blk++) {
        int c0 = blk * ENC_CBLOCK;
        int c1 = c0 + ENC_CBLOCK < C ? c0 + ENC_CBLOCK : C;
        for (int bt = 0; bt < B * T; bt++) {
            int t = bt % T;
            const float *d = dout + (size_t)bt * C;
            float *gwe = dwte + (size_t)inp[bt] * C;
            if (!dwpe) {
                #pragma omp simd
                for (int c = c0; c < c1; c++) gwe[c] += d[c];
                continue;
            }
            float *gpe = dwpe + (size_t)t * C;
            #pragma omp simd
            for (int c = c0; c < c1; c++) {
                gwe[c] += d[c];
                gpe[c] += d[c];
            }
        }
    }
}
