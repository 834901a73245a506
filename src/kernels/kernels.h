/*
 * kernels.h -- the CPU kernels of a GPT-2 or Llama block, as forward/backward
 * pairs.
 *
 * Dimension legend (used in every shape comment below):
 *   B  batch size            T  sequence length        C  channels (n_embd)
 *   NH number of (query) heads                         N  rows = B*T
 *   KV key/value heads (divides NH; = NH in GPT-2)     F  MLP width (SwiGLU)
 *   hs head size (C / NH in GPT-2, head_dim in Llama)
 *   V  vocabulary            Vp padded vocabulary (multiple of 64, llm.c style)
 *   IC / OC  input / output channels of a linear layer
 *
 * Conventions, stated once:
 *   - Tensors are row-major and contiguous, except where a row stride (ld)
 *     is given.  Activations are fp32 or bf16:
 *     an argument typed `void *` holds dtype `dt` (REMAT_DTYPE_FP32 or
 *     REMAT_DTYPE_BF16); `float *` arguments are fp32 whatever dt is
 *     (parameters, their gradients, norm statistics, the RoPE table, d_res,
 *     scratch).
 *     bf16 values are widened to fp32 for all arithmetic, and every
 *     reduction and GEMM accumulates in fp32 (or double): mixed precision as
 *     autocast does it.  Results are rounded to bf16 once, when stored.
 *   - Parameter gradients ACCUMULATE (+=): the caller zeroes them once per
 *     step, or, where a kernel takes `acc`, passes acc = 0 on a gradient's
 *     first write of the step and the kernel ASSIGNS it (=) without reading
 *     the old value (the same bits as += on zeros).
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
#include "bf16.h"
#include "gemm.h"

/* ---- embedding: out[b,t,:] = wte[inp[b,t],:] + wpe[t,:] ----------------
 * wpe NULL: no position term, out[b,t,:] = wte[inp[b,t],:] (Llama). */
void remat_encoder_forward(void *out /* B,T,C dt */, const int *inp /* B,T */,
                     const float *wte /* Vp,C */, const float *wpe /* maxT,C or NULL */,
                     int B, int T, int C, int dt);
/* dwte[inp[b,t],:] += dout[b,t,:];  dwpe[t,:] += dout[b,t,:] (dwpe NULL: skipped) */
void remat_encoder_backward(float *dwte /* Vp,C */, float *dwpe /* maxT,C or NULL */,
                      const float *dout /* B,T,C */, const int *inp /* B,T */,
                      int B, int T, int C);

/* ---- LayerNorm (eps = 1e-5, biased variance, as torch.nn.LayerNorm) -----
 * Split in two so that the statistics can be kept while the output is
 * dropped and recomputed (llm.c's recompute of LayerNorm):
 *   stats:  mean = sum(x)/C,  rstd = 1/sqrt(sum((x-mean)^2)/C + eps)
 *   apply:  out  = (x - mean) * rstd * w + b
 * layernorm_forward == stats then apply, with the same arithmetic, so the
 * recomputed output is bit-identical to the original. */
void remat_layernorm_stats(float *stat /* N,2 = (mean, rstd) */, const void *inp /* N,C dt */,
                     int N, int C, int dt);
void remat_layernorm_apply(void *out /* N,C out_dt */, int out_dt, const void *inp /* N,C dt */, int dt,
                     const float *stat /* N,2 */, const float *w /* C */,
                     const float *b /* C */, int N, int C);
/* xhat = (x-mean)*rstd, dxhat = dout*w
 * dinp += rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat*xhat))   (+=)
 * dw += sum_n dout*xhat,  db += sum_n dout */
void remat_layernorm_backward(float *dinp /* N,C, += */, float *dw /* C */, float *db /* C */,
                        const void *dout /* N,C ddt */, int ddt, const void *inp /* N,C dt */, int dt,
                        const float *stat /* N,2 */, const float *w /* C */,
                        int N, int C);

/* ---- RMSNorm (Zhang & Sennrich 2019), as Hugging Face's LlamaRMSNorm ----
 * Split like LayerNorm, the statistic kept while the output is recomputed:
 *   stats:  rstd = 1/sqrt(sum(x^2)/C + eps)   (in double from the input, stored fp32)
 *   apply:  out  = w * (x * rstd)
 * eps is the config's norm_eps (rms_norm_eps). */
void remat_rmsnorm_stats(float *rstd /* N */, const void *inp /* N,C dt */, int N, int C, int dt, double eps);
void remat_rmsnorm_apply(void *out /* N,C out_dt */, int out_dt, const void *inp /* N,C dt */, int dt,
                         const float *rstd /* N */, const float *w /* C */, int N, int C);
/* xhat = x*rstd, dxhat = dout*w
 * dinp += rstd * (dxhat - xhat * mean(dxhat*xhat))   (+=, the residual stream)
 * dw += sum_n dout*xhat */
void remat_rmsnorm_backward(float *dinp /* N,C, += */, float *dw /* C */, const void *dout /* N,C ddt */, int ddt,
                            const void *inp /* N,C dt */, int dt, const float *rstd /* N */, const float *w /* C */,
                            int N, int C);

/* ---- RoPE (rope.c), Hugging Face's convention: rotate_half over the two
 * halves of each head, positions 0..T-1.  With h = hs/2, c = cos(t f_i),
 * s = sin(t f_i), f_i = theta^(-2i/hs) (rescaled under llama3):
 *   out[i] = x[i] c - x[i+h] s,   out[i+h] = x[i+h] c + x[i] s   (i < h)
 * nh heads are rotated: NH query + KV key heads, the first nh*hs columns
 * of the qkv rows (stride ld); v, behind them, is not.
 * The table holds row t = [cos(t f_i), i < h | sin(t f_i), i < h], each
 * computed in double and rounded once. */
typedef struct remat_rope_llama3 {   /* rope_scaling {"rope_type": "llama3", ...} */
    double factor;                   /* factor (8 in Llama 3.1) */
    double low_freq_factor;          /* low_freq_factor (1) */
    double high_freq_factor;         /* high_freq_factor (4), > low_freq_factor */
    double original_max_pos;         /* original_max_position_embeddings (8192) */
} remat_rope_llama3;
/* scaling NULL: the plain frequencies.  hs even. */
void remat_rope_table(float *tab /* maxT,hs */, int maxT, int hs, double theta, const remat_rope_llama3 *scaling);
void remat_rope_forward(void *out /* B,T,nh*hs dt */, const void *qkv /* B*T rows of ld, dt */, int ld,
                        const float *tab /* maxT,hs */, int B, int T, int nh, int hs, int dt);
/* the transposed rotation, IN PLACE on the first nh*hs columns of d_qkv:
 *   dx[i] = dy[i] c + dy[i+h] s,   dx[i+h] = dy[i+h] c - dy[i] s */
void remat_rope_backward(void *dqkv /* B*T rows of ld, dt */, int ld, const float *tab /* maxT,hs */, int B, int T,
                         int nh, int hs, int dt);

/* ---- linear: out = inp @ w^T + b  (the GEMM seam, gemm.h) ---------------
 * w is the weight in dt (under bf16, the model's bf16 copy of it). */
void remat_linear_forward(void *out /* N,OC out_dt */, int out_dt, const void *inp /* N,IC dt */,
                    const void *w /* OC,IC dt */, const float *b /* OC or NULL */,
                    int N, int IC, int OC, int dt, const remat_ws *ws /* the products' (gemm.h), or NULL */);
/* dinp = dout @ w (assigned; skipped when dinp is NULL)
 * dw  += dout^T @ inp,   db += sum_n dout (skipped when db is NULL);
 * acc = 0: dw = ..., db = ... instead (the GEMM's beta 0: dw is not read) */
void remat_linear_backward(void *dinp /* N,IC dt or NULL */, float *dw /* OC,IC */,
                     float *db /* OC or NULL */, const void *dout /* N,OC dt */,
                     const void *inp /* N,IC dt */, const void *w /* OC,IC dt */,
                     int N, int IC, int OC, int dt, int acc, const remat_ws *ws);

/* ---- causal self-attention, split so the T^2 probabilities can be dropped
 * and recomputed from q and k (Korthikanti et al. 2022, "selective"), with
 * grouped-query attention (Ainslie et al. 2023): NH query heads and KV
 * key/value heads (KV divides NH), all of size hs; query head h reads kv
 * head h / (NH/KV).  KV = NH is multi-head attention (GPT-2).
 *   scores:  att[b,h,i,j] = softmax_j<=i( q_i . k_j / sqrt(hs) ),  0 for j > i
 *   values:  out[b,i,h*hs+d] = sum_j<=i drop(att[b,h,i,j]) * v_j[d]
 * drop() is inverted dropout with element index ((b*NH+h)*T+i)*T+j (h the
 * query head).  out and dout are (B,T,NH*hs); no repeated K/V is made.
 *
 * Where q, k, v live: element d of head h at row (b,t) of q is
 *   q[(b*T+t)*ldq + h*hs + d]          (q points at head 0's first channel)
 * and likewise k and v with their kv heads and strides.  The gradient goes
 * to one buffer dqkv of B*T rows of ldg elements, dq at column gq, dk at
 * gk, dv at gv; under bf16 the fp32 scratch acc of the backward has the
 * same layout (B*T x ldg), and that of the values forward mirrors out. */
typedef struct remat_attn_layout {
    int B, T, NH, KV, hs;
    const void *q, *k, *v;           /* dt */
    int ldq, ldk, ldv;               /* row strides, in elements */
    int ldg, gq, gk, gv;             /* the gradient's row stride and the columns of dq, dk, dv */
    int dt;
    const remat_ws *ws;              /* the tiles' products' workspace (gemm.h), or NULL */
} remat_attn_layout;
/* GPT-2: qkv[b,t,:] = [q (C) | k (C) | v (C)], NH heads of C/NH; the
 * gradient d_qkv likewise (B,T,3C). */
remat_attn_layout remat_attn_layout_mha(const void *qkv /* B,T,3C dt */, int B, int T, int C, int NH, int dt);
/* Llama: q and k RoPE'd in qk[b,t,:] = [q (NH*hs) | k (KV*hs)], v the last
 * KV*hs columns of qkv[b,t,:] = [q | k | v] ((NH+2KV)*hs); the gradient
 * goes to d_qkv shaped like qkv (dq, dk, dv, with RoPE's backward still to
 * run on dq and dk). */
remat_attn_layout remat_attn_layout_gqa(const void *qk /* B,T,(NH+KV)hs dt */, const void *qkv /* B,T,(NH+2KV)hs dt */,
                                        int B, int T, int NH, int KV, int hs, int dt);

/* bf16: one pass per row block with online softmax statistics; where a
 * row's causal columns span more than one key tile of 256 (T > 256), the
 * probabilities left of the last tile are rounded to bf16 twice (made,
 * then normalised): the one exception to "rounded once" above. */
void remat_attention_scores_forward(void *att /* B,NH,T,T dt */, const remat_attn_layout *L);
/* acc: bf16 only, (B,T,NH*hs) fp32 scratch the products accumulate in */
void remat_attention_values_forward(void *out /* B,T,NH*hs dt */, const void *att /* B,NH,T,T dt */,
                                    const remat_attn_layout *L, const remat_dropout *drop, float *acc);
/* Backward through values and scores together (no T^2 gradient buffer):
 *   dPd = dout_i . v_j,  dP = dPd * mask/(1-p),  dS = P*(dP - sum_j P*dP)
 *   dq_i = sum_j dS_ij k_j / sqrt(hs),  dk_j = sum_i dS_ij q_i / sqrt(hs),
 *   dv_j = sum_i drop(P_ij) dout_i,
 * dk and dv of a kv head summed over its query heads in order.  dq, dk, dv
 * are assigned; other columns of dqkv are not touched.
 * acc: bf16 only, (B*T, ldg) fp32 scratch the gradients accumulate in. */
void remat_attention_backward(void *dqkv /* B*T rows of ldg, dt */, const void *dout /* B,T,NH*hs dt */,
                              const void *att /* B,NH,T,T dt */, const remat_attn_layout *L,
                              const remat_dropout *drop, float *acc);

/* ---- flash attention (flash.c): the same attention without the T^2 matrix.
 * lse[b,h,i] = log sum_{j<=i} exp(q_i.k_j/sqrt(hs)) replaces att; the
 * values and the backward recompute the score tiles.  Same layouts and
 * dropout indices as above, so the two kernels agree up to summation
 * order.  lse is fp32 in both dtypes; acc as above. */
void remat_flash_attention_stats(float *lse /* B,NH,T */, const remat_attn_layout *L);
void remat_flash_attention_values(void *out /* B,T,NH*hs dt */, const float *lse /* B,NH,T */,
                                  const remat_attn_layout *L, const remat_dropout *drop, float *acc);
void remat_flash_attention_backward(void *dqkv /* B*T rows of ldg, dt */, const void *dout /* B,T,NH*hs dt */,
                                    const float *lse /* B,NH,T */, const remat_attn_layout *L,
                                    const remat_dropout *drop, float *acc);

/* ---- fp32 -> bf16 (round to nearest even), elementwise, in parallel ---- */
void remat_bf16_round_buf(remat_bf16 *dst, const float *src, size_t n);

/* ---- GELU, tanh form (torch approximate='tanh') ------------------------
 *   out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * gelu_backward: dinp = dout * gelu'(inp); dinp may alias dout. */
void remat_gelu_forward(void *out, const void *inp, size_t n, int dt);
void remat_gelu_backward(void *dinp, const void *inp, const void *dout, size_t n, int dt);

/* ---- SwiGLU (swiglu.c), the gated middle of a Llama MLP -----------------
 * Each input row is [gate (F) | up (F)]:  out = silu(gate) * up,
 * silu(x) = x * sigmoid(x).
 * backward (din assigned; din may alias inp):
 *   d_gate = dout * up * silu'(gate),  d_up = dout * silu(gate) */
void remat_swiglu_forward(void *out /* N,F dt */, const void *inp /* N,2F dt */, int N, int F, int dt);
void remat_swiglu_backward(void *din /* N,2F dt */, const void *dout /* N,F dt */, const void *inp /* N,2F dt */,
                           int N, int F, int dt);

/* ---- residual add with dropout on the branch ---------------------------
 *   out = res + drop(branch)   (element index = flat index into N*C)
 * out may alias branch (the projection is written there first). */
void remat_residual_forward(void *out, const void *res, const void *branch,
                      const remat_dropout *drop, size_t n, int dt);
/* dbranch = dout * mask/(1-p) (dout is d_res, fp32; dbranch in dt).  The
 * residual path's gradient is dout itself, so the caller keeps using dout
 * for it. */
void remat_residual_backward_branch(void *dbranch, const float *dout,
                              const remat_dropout *drop, size_t n, int dt);

/* ---- softmax + cross-entropy over the first V of Vp logits, fused --------
 * losses[n] = logsumexp(logits[n,:V]) - logits[n,target[n]]
 * With dlogits_scale != 0 the logits are overwritten IN PLACE by their
 * gradient: dlogits[n,v] = (softmax(logits[n,:V])[v] - [v==target]) * scale
 * for v < V, and 0 for the padded columns V..Vp-1 (never predicted).
 * With dlogits_scale == 0 the logits are left untouched (evaluation).
 * Returns the sum of losses, accumulated in double in row order.
 * bf16 logits: the loss and its sums in fp32/double, the gradient rounded
 * to bf16 in place. */
double remat_crossentropy_forward(float *losses /* N */, void *logits /* N,Vp dt */,
                            const int *targets /* N */, int N, int V, int Vp,
                            float dlogits_scale, int dt, const remat_ws *ws /* bf16: V floats a thread, or NULL */);

/* ---- AdamW (Loshchilov & Hutter 2019), as torch.optim.AdamW -------------
 * p *= 1 - lr*wd (only where decay[i] is set: 2-D weights)
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 * p -= (lr / (1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
 * g is multiplied by grad_scale first (global-norm clipping). t >= 1.
 * p16 (or NULL) gets the new p rounded to bf16, in the same pass. */
void remat_adamw_update(float *p, const float *g, float *m, float *v, remat_bf16 *p16 /* n or NULL */, size_t n,
                  float lr, float b1, float b2, float eps, float wd, int decay,
                  float grad_scale, uint64_t t);
/* The same over several spans of flat vectors at once (one parallel
 * region for all of them: a model's tensors, each with its decay flag):
 * span k updates p, g, p16 at [at, at + n) and m, v at [at - mv0, ...). */
typedef struct remat_adamw_span { size_t at, n; int decay; } remat_adamw_span;
void remat_adamw_update_spans(float *p, const float *g, float *m, float *v, remat_bf16 *p16 /* or NULL */,
                              size_t mv0, const remat_adamw_span *spans, int nspans, float lr, float b1, float b2,
                              float eps, float wd, float grad_scale, uint64_t t);
/* sum of g^2 in double, fixed order independent of the thread count */
double remat_sumsq(const float *g, size_t n);
/* sumsq in pieces, for a norm whose vector is split over ranks:
 * parts[k] = the sum over block k of g (SUMSQ_BLOCK_ELEMS elements, the last
 * block short) exactly as sumsq sums a block, and sumsq_from_blocks adds
 * the partials of a whole vector in sumsq's order, so that
 * remat_sumsq_from_blocks(parts of g) == remat_sumsq(g) bit for bit, whoever computed
 * which block. */
#define SUMSQ_BLOCK_ELEMS 4096
void remat_sumsq_blocks(const float *g, size_t n, double *parts /* ceil(n / SUMSQ_BLOCK_ELEMS) */);
double remat_sumsq_from_blocks(const double *parts, size_t nblocks);
/* The same partials taken while a run writes its gradients, so that the
 * gradient is not read a second time, from memory, for its norm: each
 * piece [lo, hi) of g (n elements) is passed to sumsq_blocks_within once it
 * is final, which computes the blocks lying wholly inside it and marks them
 * in done (ceil(n / SUMSQ_BLOCK_ELEMS) flags); a piece written again after
 * that is passed to sumsq_blocks_forget, which unmarks every block it
 * touches.  sumsq_blocks_finish computes the unmarked blocks (those across
 * pieces' edges, and pieces never passed) and returns
 * remat_sumsq_from_blocks: remat_sumsq(g)'s bits, whatever was passed. */
void remat_sumsq_blocks_within(const float *g, size_t n, size_t lo, size_t hi, double *parts, uint8_t *done);
void remat_sumsq_blocks_forget(size_t n, size_t lo, size_t hi, uint8_t *done);
double remat_sumsq_blocks_finish(const float *g, size_t n, double *parts, const uint8_t *done);

#endif
