/*
 * kernels.h -- the CPU kernels of a GPT-2 block, as forward/backward pairs.
 *
 * Dimension legend (used in every shape comment below):
 *   B  batch size            T  sequence length        C  channels (n_embd)
 *   NH number of heads       hs head size = C / NH     N  rows = B*T
 *   V  vocabulary            Vp padded vocabulary (multiple of 64, llm.c style)
 *   IC / OC  input / output channels of a linear layer
 *
 * Conventions, stated once:
 *   - All tensors are fp32, row-major, contiguous.
 *   - Parameter gradients ACCUMULATE (+=): the caller zeroes them once per step.
 *   - Activation gradients are ASSIGNED (=), except where a comment says "+="
 *     (the residual stream, where several branches meet).
 *   - Kernels are pure functions of their arguments: no globals, no hidden
 *     state, no allocation.  A kernel called twice on the same inputs writes
 *     bit-identical outputs, which is what makes recomputation exact.
 *   - Results do not depend on the OpenMP thread count unless a comment says
 *     so (reductions run in a fixed order).
 *   - Dropout masks are regenerated from the counter RNG (core/rng.h), so a
 *     backward kernel that needs a mask takes the same remat_dropout value
 *     that its forward took.
 */
#ifndef REMAT_KERNELS_H
#define REMAT_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "../core/rng.h"

/* ---- embedding: out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] ---------------- */
void encoder_forward(float *out /* B,T,C */, const int *inp /* B,T */,
                     const float *wte /* Vp,C */, const float *wpe /* maxT,C */,
                     int B, int T, int C);
/* dwte[inp[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:] */
void encoder_backward(float *dwte /* Vp,C */, float *dwpe /* maxT,C */,
                      const float *dout /* B,T,C */, const int *inp /* B,T */,
                      int B, int T, int C);

/* ---- LayerNorm (eps = 1e-5, biased variance, as torch.nn.LayerNorm) -----
 * Split in two so that the statistics can be kept while the output is
 * dropped and recomputed (llm.c's recompute of LayerNorm):
 *   stats:  mean = sum(x)/C,  rstd = 1/sqrt(sum((x-mean)^2)/C + eps)
 *   apply:  out  = (x - mean) * rstd * w + b
 * layernorm_forward == stats then apply, with the same arithmetic, so the
 * recomputed output is bit-identical to the original. */
void layernorm_stats(float *stat /* N,2 = (mean, rstd) */, const float *inp /* N,C */,
                     int N, int C);
void layernorm_apply(float *out /* N,C */, const float *inp /* N,C */,
                     const float *stat /* N,2 */, const float *w /* C */,
                     const float *b /* C */, int N, int C);
/* xhat = (x-mean)*rstd, dxhat = dout*w
 * dinp += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat*xhat))   (+=)
 * dw += sum_n dout*xhat,  db += sum_n dout */
void layernorm_backward(float *dinp /* N,C, += */, float *dw /* C */, float *db /* C */,
                        const float *dout /* N,C */, const float *inp /* N,C */,
                        const float *stat /* N,2 */, const float *w /* C */,
                        int N, int C);

/* ---- linear: out = inp @ w^T + b  (cblas_sgemm) ------------------------ */
void linear_forward(float *out /* N,OC */, const float *inp /* N,IC */,
                    const float *w /* OC,IC */, const float *b /* OC or NULL */,
                    int N, int IC, int OC);
/* dinp = dout @ w (assigned; skipped when dinp is NULL)
 * dw  += dout^T @ inp,   db += sum_n dout (skipped when db is NULL) */
void linear_backward(float *dinp /* N,IC or NULL */, float *dw /* OC,IC */,
                     float *db /* OC or NULL */, const float *dout /* N,OC */,
                     const float *inp /* N,IC */, const float *w /* OC,IC */,
                     int N, int IC, int OC);

/* ---- causal self-attention, split so the T^2 probabilities can be dropped
 * and recomputed from qkv (Korthikanti et al. 2022, "selective").
 * qkv[b,t,:] = [q (C) | k (C) | v (C)], head h uses channels h*hs..h*hs+hs-1.
 *   scores:  att[b,h,i,j] = softmax_j<=i( q_i . k_j / sqrt(hs) ),  0 for j > i
 *   values:  out[b,i,h*hs+d] = sum_j<=i drop(att[b,h,i,j]) * v_j[d]
 * drop() is inverted dropout with element index ((b*NH+h)*T+i)*T+j. */
void attention_scores_forward(float *att /* B,NH,T,T */, const float *qkv /* B,T,3C */,
                              int B, int T, int C, int NH);
void attention_values_forward(float *out /* B,T,C */, const float *att /* B,NH,T,T */,
                              const float *qkv /* B,T,3C */, const remat_dropout *drop,
                              int B, int T, int C, int NH);
/* Backward through values and scores together (no T^2 gradient buffer):
 *   dPd = dout_i . v_j,  dP = dPd * mask/(1-p),  dS = P*(dP - sum_j P*dP)
 *   dq_i = sum_j dS_ij k_j / sqrt(hs),  dk_j = sum_i dS_ij q_i / sqrt(hs),
 *   dv_j = sum_i drop(P_ij) dout_i.   dqkv is assigned. */
void attention_backward(float *dqkv /* B,T,3C */, const float *dout /* B,T,C */,
                        const float *att /* B,NH,T,T */, const float *qkv /* B,T,3C */,
                        const remat_dropout *drop, int B, int T, int C, int NH);

/* ---- flash attention (flash.c): the same attention without the T^2 matrix.
 * lse[b,h,i] = log sum_{j<=i} exp(q_i.k_j/sqrt(hs)) replaces att; the
 * values and the backward recompute the score tiles.  Same dropout indices
 * as above, so the two kernels agree up to summation order. */
void flash_attention_stats(float *lse /* B,NH,T */, const float *qkv /* B,T,3C */,
                           int B, int T, int C, int NH);
void flash_attention_values(float *out /* B,T,C */, const float *lse /* B,NH,T */,
                            const float *qkv /* B,T,3C */, const remat_dropout *drop,
                            int B, int T, int C, int NH);
void flash_attention_backward(float *dqkv /* B,T,3C, assigned */, const float *dout /* B,T,C */,
                              const float *lse /* B,NH,T */, const float *qkv /* B,T,3C */,
                              const remat_dropout *drop, int B, int T, int C, int NH);

/* ---- GELU, tanh form (torch approximate='tanh') ------------------------
 *   out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * gelu_backward: dinp = dout * gelu'(inp); dinp may alias dout. */
void gelu_forward(float *out, const float *inp, size_t n);
void gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);

/* ---- residual add with dropout on the branch ---------------------------
 *   out = res + drop(branch)   (element index = flat index into N*C)
 * out may alias branch (the projection is written there first). */
void residual_forward(float *out, const float *res, const float *branch,
                      const remat_dropout *drop, size_t n);
/* dbranch = dout * mask/(1-p).  The residual path's gradient is dout itself,
 * so the caller keeps using dout for it. */
void residual_backward_branch(float *dbranch, const float *dout,
                              const remat_dropout *drop, size_t n);

/* ---- softmax + cross-entropy over the first V of Vp logits, fused --------
 * losses[n] = logsumexp(logits[n,:V]) - logits[n,target[n]]
 * With dlogits_scale != 0 the logits are overwritten IN PLACE by their
 * gradient: dlogits[n,v] = (softmax(logits[n,:V])[v] - [v==target]) * scale
 * for v < V, and 0 for the padded columns V..Vp-1 (never predicted).
 * With dlogits_scale == 0 the logits are left untouched (evaluation).
 * Returns the sum of losses, accumulated in double in row order. */
double crossentropy_forward(float *losses /* N */, float *logits /* N,Vp */,
                            const int *targets /* N */, int N, int V, int Vp,
                            float dlogits_scale);

/* ---- AdamW (Loshchilov & Hutter 2019), as torch.optim.AdamW -------------
 * p *= 1 - lr*wd (only where decay[i] is set: 2-D weights)
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 * p -= (lr / (1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 * g is multiplied by grad_scale first (global-norm clipping). t >= 1. */
void adamw_update(float *p, const float *g, float *m, float *v, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int decay,
                  float grad_scale, uint64_t t);
/* sum of g^2 in double, fixed order independent of the thread count */
double sumsq(const float *g, size_t n);

#endif
