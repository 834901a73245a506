/*
 * ops.c -- the op dispatcher (see ops.h): each entry of remat's GPT-2 table
 * mapped to its kernels, forward and backward side by side.
 *
 * Dimension legend: B batch rows of the buffers, T sequence, C channels,
 * NH heads, N = B*T rows, Vp padded vocabulary.  Parameter gradients
 * accumulate (+=); activation gradients are assigned, except d_res, which
 * the residual branches += into (it is allocated zeroed: RT_F_ZERO).
 */
#include <assert.h>
#include <math.h>
#include <string.h>
#include "ops.h"
#include "../core/core.h"
#include "../core/rng.h"
#include "../kernels/kernels.h"

void remat_op_ctx_init(remat_op_ctx *c, const remat_config *cfg, float *params, float *grads)
{
    int shapes[REMAT_PARAM_COUNT][3];
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->params = params;
    c->grads = grads;
    remat_param_layout(cfg, shapes, c->poff);
    for (int i = 0; i < REMAT_PARAM_COUNT; i++) {
        size_t n = remat_param_numel(shapes[i]);
        c->pnum[i] = n;
        c->player[i] = remat_param_defs[i].per_layer ? n / (size_t)cfg->n_layer : 0;
    }
}


void remat_op_bind(const remat_operands *o, int kind, int t, void *const *buf, void *temp, remat_op_args *a)
{
    memset(a, 0, sizeof *a);
    if (kind != REMAT_I_BACKWARD) a->t[t] = buf[o->out];
    for (int i = 0; i < o->nin; i++) {
        if (o->in_t[i] == RT_X) a->x = buf[o->in[i]];
        else a->t[o->in_t[i]] = buf[o->in[i]];
    }
    for (int i = 0; i < o->nneed; i++) a->t[o->need_t[i]] = buf[o->need[i]];
    for (int i = 0; i < o->nalloc; i++) a->t[o->alloc_t[i]] = buf[o->alloc[i]];
    for (int i = 0; i < o->nfree; i++) a->t[o->freed_t[i]] = buf[o->freed[i]];
    a->temp = temp;
}

/* An operand the table declares; anything else is a table bug.  Its
 * element type is the table's (remat_tensor_dtype): the activation dtype,
 * or fp32 (F() below) for the statistics, lse and d_res. */
static inline void *A(const remat_op_args *a, int t)
{
    assert(a->t[t] && "op reads a tensor its table entry does not declare (src/table/tensors.c)");
    return a->t[t];
}
static inline float *F(const remat_op_args *a, int t) { return A(a, t); }
static inline void *X(const remat_op_args *a)
{
    assert(a->x && "op reads the block input, which its table entry does not declare");
    return a->x;
}
static inline void *TEMP(const remat_op_args *a)
{
    assert(a->temp && "op needs scratch its table entry does not declare (remat_tensor_*_temp_bytes)");
    return a->temp;
}

/* parameter p (its layer's slice for stacked tensors) in fp32, as a GEMM
 * operand (the bf16 copy under bf16), and its gradient */
static inline float *W(const remat_op_ctx *c, remat_param p, int layer)
{
    return c->params + c->poff[p] + (size_t)(layer < 0 ? 0 : layer) * c->player[p];
}
static inline const void *WG(const remat_op_ctx *c, remat_param p, int layer)
{
    size_t off = c->poff[p] + (size_t)(layer < 0 ? 0 : layer) * c->player[p];
    if (c->cfg->dtype == REMAT_DTYPE_BF16) {
        assert(c->params16 && "bf16 ops need the model's bf16 copy of the weights");
        return c->params16 + off;
    }
    return c->params + off;
}
static inline float *GW(const remat_op_ctx *c, remat_param p, int layer)
{
    return c->grads + c->poff[p] + (size_t)(layer < 0 ? 0 : layer) * c->player[p];
}

/* the element type of tensor t under the context's config; RT_X: the
 * block input's (the block output's) */
static inline int DT(const remat_op_ctx *c, int t) { return remat_tensor_dtype(c->cfg, t == RT_X ? RT_RES3 : t); }

static remat_dropout drop_for(const remat_op_ctx *c, int layer, int site)
{
    float p = c->training ? c->cfg->dropout : 0.0f;
    remat_dropout d = remat_dropout_make(p, remat_rng_key(c->seed, c->step, (uint32_t)layer, (uint32_t)site));
    /* kernels.h's element indices: att_index over (B,NH,T,T), the flat
     * index over (B,T,C) for the residual branches */
    const remat_config *cf = c->cfg;
    uint64_t row = site == REMAT_SITE_ATT ? (uint64_t)cf->n_head * cf->seq * cf->seq : (uint64_t)cf->seq * cf->n_embd;
    d.offset = c->row0 * row;
    return d;
}

/* the scale of d(logits): one over the tokens the loss is a mean over */
static float dlogits_scale(const remat_op_ctx *c, int N)
{
    if (!c->training) return 0.0f;
    return c->loss_n ? 1.0f / (float)c->loss_n : 1.0f / (float)N;
}

/* The chunked LM head (config lmhead_chunk): for each chunk of rows,
 * logits (fp32, in scratch) = lnf @ wte^T, the loss, and -- when training
 * -- at once the gradient d(lnf) = dlogits @ wte (into out, which holds
 * d(lnf)) and dwte += dlogits^T lnf.  Computing the gradient in the same
 * pass, instead of recomputing each chunk's logits in the backward, saves a
 * whole LM-head GEMM; it is valid because every schedule runs the head's
 * backward right after its forward and never recomputes it.
 * temp: rows x Vp fp32, then under bf16 rows x Vp bf16 for d(logits) as a
 * GEMM operand. */
static void lmhead_rows(remat_op_ctx *c, void *out, const void *lnf, void *temp)
{
    const remat_config *cf = c->cfg;
    int N = cf->batch * cf->seq, C = cf->n_embd, Vp = remat_config_padded_vocab(cf), dt = cf->dtype;
    int rows = remat_lmhead_rows(cf);
    size_t es = remat_dtype_bytes(dt);
    float scale = dlogits_scale(c, N), *chunk = temp;
    remat_bf16 *chunk16 = (remat_bf16 *)(chunk + (size_t)rows * Vp);
    c->loss_sum = 0;
    for (int r0 = 0; r0 < N; r0 += rows) {
        int nr = N - r0 < rows ? N - r0 : rows;
        const void *x = (const char *)lnf + (size_t)r0 * C * es;
        remat_gemm_op g = { dt, REMAT_DTYPE_FP32, 0, 1, nr, Vp, C, 1.0f, 0.0f,
                            x, C, WG(c, REMAT_PARAM_WTE, -1), C, chunk, Vp, NULL };
        remat_gemm(&g);
        if (c->have_targets)
            c->loss_sum += remat_crossentropy_forward(c->losses + r0, chunk, c->targets + r0, nr, cf->vocab, Vp, scale,
                                                REMAT_DTYPE_FP32);
        if (!c->training) continue;
        const void *dlog = chunk;
        if (dt == REMAT_DTYPE_BF16) {
            remat_bf16_from_f32(chunk16, chunk, (size_t)nr * Vp);
            dlog = chunk16;
        }
        remat_linear_backward((char *)out + (size_t)r0 * C * es, GW(c, REMAT_PARAM_WTE, -1), NULL, dlog, x,
                        WG(c, REMAT_PARAM_WTE, -1), nr, C, Vp, dt);
    }
}

void remat_op_forward(remat_op_ctx *c, int t, int l, const remat_op_args *a)
{
    const remat_config *cf = c->cfg;
    int B = cf->batch, T = cf->seq, C = cf->n_embd, NH = cf->n_head, N = B * T, dt = cf->dtype;
    int Vp = remat_config_padded_vocab(cf);
    int flash = cf->attention == REMAT_ATTENTION_FLASH;
    void *out = A(a, t);
    float *acc = dt == REMAT_DTYPE_BF16 ? a->temp : NULL;   /* attention's fp32 accumulator */
    remat_dropout d;
    remat_attn_layout L;
    switch (t) {
    case RT_EMB:        /* emb = wte[inputs] + wpe */
        remat_encoder_forward(out, c->inputs, W(c, REMAT_PARAM_WTE, -1), W(c, REMAT_PARAM_WPE, -1), B, T, C, DT(c, t));
        break;
    case RT_LN1_STAT: remat_layernorm_stats(out, X(a), N, C, DT(c, RT_X)); break;
    case RT_LN1:
        remat_layernorm_apply(out, DT(c, t), X(a), DT(c, RT_X), F(a, RT_LN1_STAT), W(c, REMAT_PARAM_LN1W, l),
                        W(c, REMAT_PARAM_LN1B, l), N, C);
        break;
    case RT_QKV:
        remat_linear_forward(out, DT(c, t), A(a, RT_LN1), WG(c, REMAT_PARAM_QKVW, l), W(c, REMAT_PARAM_QKVB, l), N, C, 3 * C,
                       dt);
        break;
    case RT_ATT:        /* naive: the (B,NH,T,T) probabilities; flash: the logsumexp */
        L = remat_attn_layout_mha(A(a, RT_QKV), B, T, C, NH, dt);
        if (flash) remat_flash_attention_stats(out, &L);
        else remat_attention_scores_forward(out, &L);
        break;
    case RT_ATTY:
        d = drop_for(c, l, REMAT_SITE_ATT);   /* acc: when the table declares it (remat_tensor_fwd_temp_bytes) */
        L = remat_attn_layout_mha(A(a, RT_QKV), B, T, C, NH, dt);
        if (flash) remat_flash_attention_values(out, F(a, RT_ATT), &L, &d, acc);
        else remat_attention_values_forward(out, A(a, RT_ATT), &L, &d, acc);
        break;
    case RT_RES2:       /* res2 = x + dropout(atty @ Wproj^T + b): the residual stream */
        remat_linear_forward(out, DT(c, t), A(a, RT_ATTY), WG(c, REMAT_PARAM_ATTPROJW, l), W(c, REMAT_PARAM_ATTPROJB, l), N,
                       C, C, dt);
        d = drop_for(c, l, REMAT_SITE_RES_ATTN);
        remat_residual_forward(out, X(a), out, &d, (size_t)N * C, DT(c, t));
        break;
    case RT_LN2_STAT: remat_layernorm_stats(out, A(a, RT_RES2), N, C, DT(c, RT_RES2)); break;
    case RT_LN2:
        remat_layernorm_apply(out, DT(c, t), A(a, RT_RES2), DT(c, RT_RES2), F(a, RT_LN2_STAT), W(c, REMAT_PARAM_LN2W, l),
                        W(c, REMAT_PARAM_LN2B, l), N, C);
        break;
    case RT_FCH:
        remat_linear_forward(out, DT(c, t), A(a, RT_LN2), WG(c, REMAT_PARAM_FCW, l), W(c, REMAT_PARAM_FCB, l), N, C, 4 * C,
                       dt);
        break;
    case RT_FCH_GELU: remat_gelu_forward(out, A(a, RT_FCH), (size_t)N * 4 * C, dt); break;
    case RT_RES3:       /* res3 = res2 + dropout(fch_gelu @ Wfcproj^T + b) */
        remat_linear_forward(out, DT(c, t), A(a, RT_FCH_GELU), WG(c, REMAT_PARAM_FCPROJW, l), W(c, REMAT_PARAM_FCPROJB, l), N,
                       4 * C, C, dt);
        d = drop_for(c, l, REMAT_SITE_RES_MLP);
        remat_residual_forward(out, A(a, RT_RES2), out, &d, (size_t)N * C, DT(c, t));
        break;
    case RT_LNF_STAT: remat_layernorm_stats(out, X(a), N, C, DT(c, RT_X)); break;
    case RT_LNF:
        remat_layernorm_apply(out, DT(c, t), X(a), DT(c, RT_X), F(a, RT_LNF_STAT), W(c, REMAT_PARAM_LNFW, -1),
                        W(c, REMAT_PARAM_LNFB, -1), N, C);
        break;
    case RT_LOGITS:
        if (cf->lmhead_chunk > 0) {   /* chunked: out holds d(lnf) */
            lmhead_rows(c, out, A(a, RT_LNF), TEMP(a));
            break;
        }
        remat_linear_forward(out, DT(c, t), A(a, RT_LNF), WG(c, REMAT_PARAM_WTE, -1), NULL, N, C, Vp, dt);
        /* fused softmax + cross-entropy; training overwrites the logits
         * with d(logits) in place */
        if (!c->have_targets) c->loss_sum = 0.0;
        else c->loss_sum = remat_crossentropy_forward(c->losses, out, c->targets, N, cf->vocab, Vp, dlogits_scale(c, N), dt);
        break;
    default: assert(!"remat_op_forward: not an activation of the GPT-2 table");
    }
}

/* The gradient reaching a residual branch: d_res itself when the table
 * has no d_branch (fp32, no dropout), or d_res masked by the branch's
 * regenerated mask and/or rounded to bf16 into d_branch.  (A backward runs
 * only in training, so the mask's p is the config's dropout.) */
static const void *branch_grad(const remat_op_ctx *c, const remat_op_args *a, int l, int site, size_t n)
{
    if (!remat_tensor_exists(c->cfg, RT_D_BRANCH)) return A(a, RT_D_RES);
    remat_dropout d = drop_for(c, l, site);
    void *b = A(a, RT_D_BRANCH);
    remat_residual_backward_branch(b, F(a, RT_D_RES), &d, n, c->cfg->dtype);
    return b;
}

void remat_op_backward(remat_op_ctx *c, int t, int l, const remat_op_args *a)
{
    const remat_config *cf = c->cfg;
    int B = cf->batch, T = cf->seq, C = cf->n_embd, NH = cf->n_head, N = B * T, dt = cf->dtype;
    int Vp = remat_config_padded_vocab(cf);
    size_t n = (size_t)N * C;
    float *acc = dt == REMAT_DTYPE_BF16 ? a->temp : NULL;
    const void *src;
    remat_dropout d;
    remat_attn_layout L;
    switch (t) {
    case RT_RES3:       /* d_fch = d_branch @ Wfcproj; dWfcproj += d_branch^T fch_gelu */
        src = branch_grad(c, a, l, REMAT_SITE_RES_MLP, n);
        remat_linear_backward(A(a, RT_D_FCH), GW(c, REMAT_PARAM_FCPROJW, l), GW(c, REMAT_PARAM_FCPROJB, l), src,
                        A(a, RT_FCH_GELU), WG(c, REMAT_PARAM_FCPROJW, l), N, 4 * C, C, dt);
        break;
    case RT_FCH_GELU:   /* in place: d_fch = d_fch * gelu'(fch) */
        remat_gelu_backward(A(a, RT_D_FCH), A(a, RT_FCH), A(a, RT_D_FCH), (size_t)N * 4 * C, dt);
        break;
    case RT_FCH:
        remat_linear_backward(A(a, RT_D_LN2), GW(c, REMAT_PARAM_FCW, l), GW(c, REMAT_PARAM_FCB, l), A(a, RT_D_FCH),
                        A(a, RT_LN2), WG(c, REMAT_PARAM_FCW, l), N, C, 4 * C, dt);
        break;
    case RT_LN2:        /* d_res += layernorm'(d_ln2) */
        remat_layernorm_backward(F(a, RT_D_RES), GW(c, REMAT_PARAM_LN2W, l), GW(c, REMAT_PARAM_LN2B, l), A(a, RT_D_LN2),
                           DT(c, RT_D_LN2), A(a, RT_RES2), DT(c, RT_RES2), F(a, RT_LN2_STAT), W(c, REMAT_PARAM_LN2W, l),
                           N, C);
        break;
    case RT_RES2:
        src = branch_grad(c, a, l, REMAT_SITE_RES_ATTN, n);
        remat_linear_backward(A(a, RT_D_ATTY), GW(c, REMAT_PARAM_ATTPROJW, l), GW(c, REMAT_PARAM_ATTPROJB, l), src,
                        A(a, RT_ATTY), WG(c, REMAT_PARAM_ATTPROJW, l), N, C, C, dt);
        break;
    case RT_ATTY:       /* through values and scores at once: d_qkv */
        d = drop_for(c, l, REMAT_SITE_ATT);
        if (dt == REMAT_DTYPE_BF16) (void)TEMP(a);
        L = remat_attn_layout_mha(A(a, RT_QKV), B, T, C, NH, dt);
        if (cf->attention == REMAT_ATTENTION_FLASH)
            remat_flash_attention_backward(A(a, RT_D_QKV), A(a, RT_D_ATTY), F(a, RT_ATT), &L, &d, acc);
        else
            remat_attention_backward(A(a, RT_D_QKV), A(a, RT_D_ATTY), A(a, RT_ATT), &L, &d, acc);
        break;
    case RT_QKV:
        remat_linear_backward(A(a, RT_D_LN1), GW(c, REMAT_PARAM_QKVW, l), GW(c, REMAT_PARAM_QKVB, l), A(a, RT_D_QKV),
                        A(a, RT_LN1), WG(c, REMAT_PARAM_QKVW, l), N, C, 3 * C, dt);
        break;
    case RT_LN1:        /* d_res += layernorm'(d_ln1) */
        remat_layernorm_backward(F(a, RT_D_RES), GW(c, REMAT_PARAM_LN1W, l), GW(c, REMAT_PARAM_LN1B, l), A(a, RT_D_LN1),
                           DT(c, RT_D_LN1), X(a), DT(c, RT_X), F(a, RT_LN1_STAT), W(c, REMAT_PARAM_LN1W, l), N, C);
        break;
    case RT_LOGITS:
        if (cf->lmhead_chunk > 0)   /* computed in the forward pass already */
            memcpy(A(a, RT_D_LNF), A(a, RT_LOGITS), n * remat_dtype_bytes(dt));
        else                        /* logits hold d(logits) */
            remat_linear_backward(A(a, RT_D_LNF), GW(c, REMAT_PARAM_WTE, -1), NULL, A(a, RT_LOGITS), A(a, RT_LNF),
                            WG(c, REMAT_PARAM_WTE, -1), N, C, Vp, dt);
        break;
    case RT_LNF:        /* d_res (allocated zeroed) += layernorm'(d_lnf) */
        remat_layernorm_backward(F(a, RT_D_RES), GW(c, REMAT_PARAM_LNFW, -1), GW(c, REMAT_PARAM_LNFB, -1), A(a, RT_D_LNF),
                           DT(c, RT_D_LNF), X(a), DT(c, RT_X), F(a, RT_LNF_STAT), W(c, REMAT_PARAM_LNFW, -1), N, C);
        break;
    case RT_EMB:
        remat_encoder_backward(GW(c, REMAT_PARAM_WTE, -1), GW(c, REMAT_PARAM_WPE, -1), F(a, RT_D_RES), c->inputs, B, T, C);
        break;
    default: assert(!"remat_op_backward: no backward of its own");
    }
}

/* ---- the update --------------------------------------------------------------- */

static size_t num_params(const remat_op_ctx *c)
{
    return c->poff[REMAT_PARAM_COUNT - 1] + c->pnum[REMAT_PARAM_COUNT - 1];
}

float remat_op_clip_scale(const remat_optim *o, double norm)
{
    float scale = 1.0f;
    if (o->grad_clip > 0) {   /* torch.nn.utils.clip_grad_norm_ */
        double coef = o->grad_clip / (norm + 1e-6);
        if (coef < 1.0) scale = (float)coef;
    }
    return scale;
}

int remat_op_first_nonfinite(const remat_op_ctx *c, size_t lo, size_t hi)
{
    for (int i = 0; i < REMAT_PARAM_COUNT; i++) {
        size_t a = c->poff[i] > lo ? c->poff[i] : lo, b = c->poff[i] + c->pnum[i];
        if (b > hi) b = hi;
        if (a < b && !isfinite(remat_sumsq(c->grads + a, b - a))) return i;
    }
    return REMAT_PARAM_COUNT;
}

void remat_op_adamw_range(const remat_op_ctx *c, float *adam_m, float *adam_v, const remat_optim *o, uint64_t t,
                          size_t lo, size_t hi, float scale)
{
    for (int i = 0; i < REMAT_PARAM_COUNT; i++) {
        size_t a = c->poff[i] > lo ? c->poff[i] : lo, b = c->poff[i] + c->pnum[i];
        if (b > hi) b = hi;
        if (a < b)   /* and the bf16 copy, in the same pass */
            remat_adamw_update(c->params + a, c->grads + a, adam_m + (a - lo), adam_v + (a - lo),
                         c->params16 ? c->params16 + a : NULL, b - a, o->lr, o->beta1, o->beta2, o->eps,
                         o->weight_decay, remat_param_defs[i].decay, scale, t);
    }
}

remat_status remat_op_update(const remat_op_ctx *c, float *adam_m, float *adam_v, const remat_optim *o, uint64_t t,
                             float *norm_out)
{
    size_t np = num_params(c);
    double norm = sqrt(remat_sumsq(c->grads, np));
    if (norm_out) *norm_out = (float)norm;
    if (!isfinite(norm)) {
        /* name the first tensor with a non-finite gradient */
        int i = remat_op_first_nonfinite(c, 0, np);
        if (i < REMAT_PARAM_COUNT)
            return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient in %s at step %llu",
                              remat_param_defs[i].name, (unsigned long long)t);
        return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient norm at step %llu", (unsigned long long)t);
    }
    remat_op_adamw_range(c, adam_m, adam_v, o, t, 0, np, remat_op_clip_scale(o, norm));
    return REMAT_OK;
}

void remat_op_refresh16_range(const remat_op_ctx *c, size_t lo, size_t hi)
{
    if (c->params16 && hi > lo) remat_bf16_round_buf(c->params16 + lo, c->params + lo, hi - lo);
}

void remat_op_refresh16(const remat_op_ctx *c) { remat_op_refresh16_range(c, 0, num_params(c)); }
