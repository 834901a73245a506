/*
 * ops.c -- the op dispatcher (see ops.h): each kernel of enum remat_kernel
 * run for a table entry, forward and backward side by side.  What to run
 * on comes from the entry alone: its inputs (fwd_in, bwd_in), its weights
 * (w, b: parameter table indices), its product's (M, N, K), its dropout
 * site, and the gradients its backward reads (gout) and writes (gin).
 *
 * Dimension legend: B batch rows of the buffers, T sequence, C channels,
 * NH query heads, KV key/value heads, hs head size, F MLP width, N = B*T
 * rows, Vp padded vocabulary.  Parameter gradients accumulate (+=), the
 * first write of a run assigning (c->fresh, remat_op_grads_begin);
 * activation gradients are assigned, except d_res, which the residual
 * branches += into (it is allocated zeroed: RT_F_ZERO).
 *
 * Extents: every buffer a kernel reads or writes is checked against the
 * bytes the walker allocated for it (remat_op_args.n), from the sizes the
 * kernel is called with -- not from the table's shape formula, which is
 * what the check is there to catch.
 */
#include <assert.h>
#include <math.h>
#include <string.h>
#include "ops.h"
#include "../core/core.h"
#include "../core/rng.h"
#include "../kernels/kernels.h"
#include "../kernels/attn_tiles.h"

_Static_assert(RT_ATT_BR == ATT_BR && RT_ATT_BC == ATT_BC,
               "the table's attention tile (tensors.h) sizes the tiles' workspace: keep it the kernels' (attn_tiles.h)");

void remat_op_ctx_init(remat_op_ctx *c, const remat_config *cfg, float *params, float *grads)
{
    memset(c, 0, sizeof *c);
    c->cfg = cfg;
    c->tb = remat_table_of(cfg);
    c->params = params;
    c->grads = grads;
    remat_param_layout_of(cfg, &c->ly);
}

void remat_op_bind(const remat_operands *o, int kind, int t, void *const *buf, const uint64_t *bytes, void *temp,
                   uint64_t temp_bytes, remat_op_args *a)
{
    memset(a, 0, sizeof *a);
    if (kind != REMAT_I_BACKWARD) { a->t[t] = buf[o->out]; a->n[t] = bytes[o->out]; }
    for (int i = 0; i < o->nin; i++) {
        if (o->in_t[i] == RT_X) { a->x = buf[o->in[i]]; a->nx = bytes[o->in[i]]; }
        else { a->t[o->in_t[i]] = buf[o->in[i]]; a->n[o->in_t[i]] = bytes[o->in[i]]; }
    }
    for (int i = 0; i < o->nneed; i++) { a->t[o->need_t[i]] = buf[o->need[i]]; a->n[o->need_t[i]] = bytes[o->need[i]]; }
    for (int i = 0; i < o->nalloc; i++) { a->t[o->alloc_t[i]] = buf[o->alloc[i]]; a->n[o->alloc_t[i]] = bytes[o->alloc[i]]; }
    for (int i = 0; i < o->nfree; i++) { a->t[o->freed_t[i]] = buf[o->freed[i]]; a->n[o->freed_t[i]] = bytes[o->freed[i]]; }
    a->temp = temp;
    a->ntemp = temp_bytes;
    if (!temp || !(o->ws_serial || o->ws_thread)) return;
    assert(temp_bytes >= o->temp_bytes && "the scratch given is smaller than the op's (remat_operands.temp_bytes)");
    char *ws = (char *)temp + ((o->op_bytes + 63) & ~(uint64_t)63);
    a->ntemp = o->op_bytes;
    a->ws.serial = o->ws_serial ? ws : NULL;
    a->ws.nserial = o->ws_serial;
    a->ws.thread = o->ws_thread ? ws + o->ws_serial : NULL;
    a->ws.nthread = o->ws_thread;
    a->ws.nthreads = o->ws_threads;
}

/* ---- operands, checked ------------------------------------------------------
 * A(a, t, bytes): operand t, of which the kernel touches `bytes`.  An
 * operand the table does not declare, or one smaller than the kernel's use
 * of it, is a table bug. */
static inline void *A(const remat_op_args *a, int t, uint64_t bytes)
{
    assert(t >= 0 && a->t[t] && "op reads a tensor its table entry does not declare (src/table/tensors.c)");
    assert(bytes <= a->n[t] && "the kernel touches more bytes of an operand than its table entry declares");
    (void)bytes;
    return a->t[t];
}
/* input i of the entry's forward (backward: bwd_in) list: the block input for RT_X */
static inline void *IN(const remat_op_args *a, const int8_t *list, int i, uint64_t bytes)
{
    int t = list[i];
    if (t != RT_X) return A(a, t, bytes);
    assert(a->x && "op reads the block input, which its table entry does not declare");
    assert(bytes <= a->nx && "the kernel touches more bytes of the block input than its table entry declares");
    return a->x;
}
static inline void *TEMP(const remat_op_args *a, uint64_t bytes)
{
    assert(a->temp && "op needs scratch its table entry does not declare (its scratch items)");
    assert(bytes <= a->ntemp && "the kernel touches more scratch than its table entry declares");
    (void)bytes;
    return a->temp;
}

/* parameter p (its layer's slice for stacked tensors) in fp32, as a GEMM
 * operand (the bf16 copy under bf16), and its gradient; a tied head's
 * weight resolves to the token embedding */
static inline size_t poff(const remat_op_ctx *c, int p, int layer)
{
    p = remat_param_resolve(c->cfg, p);
    return c->ly.off[p] + (size_t)(layer < 0 ? 0 : layer) * c->ly.player[p];
}
static inline float *W(const remat_op_ctx *c, int p, int layer)
{
    return p < 0 ? NULL : c->params + poff(c, p, layer);
}
static inline const void *WG(const remat_op_ctx *c, int p, int layer)
{
    if (c->cfg->dtype == REMAT_DTYPE_BF16) {
        assert(c->params16 && "bf16 ops need the model's bf16 copy of the weights");
        return c->params16 + poff(c, p, layer);
    }
    return c->params + poff(c, p, layer);
}
/* the gradient slice of parameter p (layer's, or the whole tensor for a
 * global one): its elements, and its byte of c->fresh */
static inline size_t slice_numel(const remat_op_ctx *c, int p)
{
    p = remat_param_resolve(c->cfg, p);
    return c->ly.player[p] ? c->ly.player[p] : c->ly.numel[p];
}
static inline uint8_t *fresh_of(const remat_op_ctx *c, int p, int layer)
{
    p = remat_param_resolve(c->cfg, p);
    return c->fresh + (size_t)p * (size_t)(c->cfg->n_layer + 1) + (size_t)(layer + 1);
}
/* ---- the gradient norm, taken as the backward finishes each gradient ----------
 * With c->gnorm, the squared norm's block partials (kernels.h,
 * remat_sumsq_blocks_within) of a layer's gradient slice are computed at the
 * end of the backward op that wrote it, while the product that wrote it has
 * left it in cache, and the update reads each gradient once (AdamW) instead
 * of twice.  A slice written again later (by another op) has its blocks
 * forgotten and recomputed at the end.  An embedding whose backward writes
 * its gradient first (untied, or GPT-2's positions) knows every block its
 * rows miss is zero (gnorm_zeroed_rows).  The other global tensors (the
 * head, a tied embedding, the final norm) and the blocks across slices'
 * edges are computed when the norm is asked for: the head's gradient (154
 * MiB at 124M) leaves its GEMM too large for any of it to be in cache, and
 * cutting that GEMM into row chunks, each summed as it left, was measured
 * slower than the pass it saves (dnnl_sgemm on AVX2, 2 threads: 3-8% on
 * the GEMM against a 30 ms pass).  The result is remat_sumsq(grads)'s bits
 * in every case.
 * The tracker lives after the fresh flags in the same allocation
 * (remat_op_fresh_bytes): per slice a state (0 unwritten, 1 written since
 * its flush, 2 flushed), the partials, the list of state-1 slices (its
 * length first) and the blocks' done flags. */
typedef struct gnorm_view {
    uint8_t *state, *done;
    double *parts;
    int *pending;
    size_t n, nb, nsl;
} gnorm_view;

static size_t fresh_slices(const remat_config *cfg, const remat_param_layout *ly)
{
    return (size_t)ly->count * (size_t)(cfg->n_layer + 1);
}

static size_t gnorm_layout(const remat_config *cfg, const remat_param_layout *ly, gnorm_view *v, uint8_t *base)
{
    size_t nsl = fresh_slices(cfg, ly), nb = (ly->total + SUMSQ_BLOCK_ELEMS - 1) / SUMSQ_BLOCK_ELEMS;
    size_t o_parts = (2 * nsl + 7) / 8 * 8, o_pend = o_parts + nb * sizeof(double);
    size_t o_done = o_pend + (nsl + 1) * sizeof(int);
    if (v) {
        v->state = base + nsl;
        v->parts = (double *)(void *)(base + o_parts);
        v->pending = (int *)(void *)(base + o_pend);
        v->done = base + o_done;
        v->n = ly->total;
        v->nb = nb;
        v->nsl = nsl;
    }
    return o_done + nb;
}

static void gnorm_range(const remat_op_ctx *c, size_t idx, size_t *lo, size_t *hi)
{
    int L1 = c->cfg->n_layer + 1, p = (int)(idx / (size_t)L1), layer = (int)(idx % (size_t)L1) - 1;
    *lo = c->ly.off[p] + (size_t)(layer < 0 ? 0 : layer) * c->ly.player[p];
    *hi = *lo + (c->ly.player[p] ? c->ly.player[p] : c->ly.numel[p]);
}

/* slice idx is about to be written */
static void gnorm_touch(const remat_op_ctx *c, size_t idx)
{
    gnorm_view v;
    gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
    if (v.state[idx] == 1) return;
    if (v.state[idx] == 2) {
        size_t lo, hi;
        gnorm_range(c, idx, &lo, &hi);
        remat_sumsq_blocks_forget(v.n, lo, hi, v.done);
    }
    v.state[idx] = 1;
    v.pending[1 + v.pending[0]++] = (int)idx;
}

/* after a backward op: the layers' slices it wrote are final (until written again) */
static void gnorm_flush(const remat_op_ctx *c)
{
    gnorm_view v;
    gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
    int keep = 0, L1 = c->cfg->n_layer + 1;
    for (int k = 0; k < v.pending[0]; k++) {
        size_t idx = (size_t)v.pending[1 + k], lo, hi;
        if (!c->ly.player[idx / (size_t)L1]) {   /* a global tensor: at the end */
            v.pending[1 + keep++] = (int)idx;
            continue;
        }
        gnorm_range(c, idx, &lo, &hi);
        remat_sumsq_blocks_within(c->grads, v.n, lo, hi, v.parts, v.done);
        v.state[idx] = 2;
    }
    v.pending[0] = keep;
}

/* the state of parameter p's global slice, and its flag index; -1 without the tracker */
static int gnorm_state(const remat_op_ctx *c, int p, size_t *idx)
{
    if (!c->gnorm || !c->fresh || p < 0) return -1;
    gnorm_view v;
    gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
    *idx = (size_t)(fresh_of(c, p, -1) - c->fresh);
    return v.state[*idx];
}

/* An embedding's gradient, global slice idx of parameter p, which its op
 * wrote first (from zeros) by adding to the rows rows[0..n) (row r:
 * elements r*C..(r+1)*C of the slice; i % row_mod instead when row_mod is
 * set) and nothing else: every block within the slice that those rows do
 * not touch is zero, its partial 0.0 (the sum sumsq_block makes of zeros),
 * set unread; the touched ones are taken now, in cache.  Blocks across the
 * slice's edges are left to the end.  (An untied token embedding is 39% of
 * Llama-S's gradient, 98 MiB, of which a batch touches a few rows.) */
static void gnorm_zeroed_rows(const remat_op_ctx *c, int p, size_t idx, const int *rows, int n, int row_mod)
{
    gnorm_view v;
    gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
    const size_t B = SUMSQ_BLOCK_ELEMS, C = (size_t)c->cfg->n_embd;
    p = remat_param_resolve(c->cfg, p);
    size_t lo = c->ly.off[p], hi = lo + c->ly.numel[p];
    size_t k0 = (lo + B - 1) / B, k1 = hi >= v.n ? v.nb : hi / B;   /* the blocks within [lo, hi) */
    for (size_t k = k0; k < k1; k++) { v.parts[k] = 0.0; v.done[k] = 1; }
    for (int i = 0; i < n; i++) {
        size_t r = (size_t)(row_mod ? i % row_mod : rows[i]);
        remat_sumsq_blocks_forget(v.n, lo + r * C, lo + (r + 1) * C, v.done);
    }
    for (int i = 0; i < n; i++) {
        size_t r = (size_t)(row_mod ? i % row_mod : rows[i]);
        for (size_t k = (lo + r * C) / B; k * B < lo + (r + 1) * C; k++)
            if (k >= k0 && k < k1 && !v.done[k])
                remat_sumsq_blocks_within(c->grads, v.n, k * B, (k + 1) * B < v.n ? (k + 1) * B : v.n, v.parts,
                                          v.done);
    }
    v.state[idx] = 2;
}

void remat_op_grad_written(const remat_op_ctx *c, size_t lo, size_t hi)
{
    if (!c->gnorm || !c->fresh) return;
    gnorm_view v;
    gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
    remat_sumsq_blocks_forget(v.n, lo, hi, v.done);
}

double remat_op_grad_sumsq(const remat_op_ctx *c)
{
    if (!c->gnorm || !c->fresh) return remat_sumsq(c->grads, c->ly.total);
    gnorm_view v;
    gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
    return remat_sumsq_blocks_finish(c->grads, v.n, v.parts, v.done);
}

/* a kernel's `acc` for the gradient of p: 0 on the run's first write of
 * it (the kernel assigns), 1 after (it adds) or without fresh tracking */
static int grad_acc(const remat_op_ctx *c, int p, int layer)
{
    if (p < 0 || !c->fresh) return 1;
    uint8_t *f = fresh_of(c, p, layer);
    int acc = !*f;
    *f = 0;
    if (c->gnorm) gnorm_touch(c, (size_t)(f - c->fresh));
    return acc;
}
/* the gradient of p for a kernel that only accumulates: zeroed first on
 * the run's first write of it */
static inline float *GW(const remat_op_ctx *c, int p, int layer)
{
    if (p < 0) return NULL;
    float *g = c->grads + poff(c, p, layer);
    if (!grad_acc(c, p, layer)) memset(g, 0, slice_numel(c, p) * sizeof(float));
    return g;
}
/* the gradient of p for a kernel that takes acc (*acc set) */
static inline float *GWA(const remat_op_ctx *c, int p, int layer, int *acc)
{
    *acc = grad_acc(c, p, layer);
    return p < 0 ? NULL : c->grads + poff(c, p, layer);
}
/* GW for an embedding's global gradient, which its op adds to row by row:
 * *zeroed is 1 when the tracker is on and this op writes the slice first
 * (GW's zeroing, without gnorm_touch: gnorm_zeroed_rows takes its partials
 * after the op), else 0 (GW as it is) */
static float *GW_rows(const remat_op_ctx *c, int p, int *zeroed, size_t *idx)
{
    *zeroed = 0;
    if (p < 0) return NULL;
    if (gnorm_state(c, p, idx) == 0 && *fresh_of(c, p, -1)) {
        float *g = c->grads + poff(c, p, -1);
        memset(g, 0, slice_numel(c, p) * sizeof(float));
        *fresh_of(c, p, -1) = 0;
        *zeroed = 1;
        return g;
    }
    return GW(c, p, -1);
}

size_t remat_op_fresh_bytes(const remat_config *cfg)
{
    remat_param_layout ly;
    remat_param_layout_of(cfg, &ly);
    return gnorm_layout(cfg, &ly, NULL, NULL);
}

void remat_op_grads_begin(remat_op_ctx *c)
{
    if (!c->fresh) return;
    memset(c->fresh, 1, fresh_slices(c->cfg, &c->ly));
    if (c->gnorm) {
        gnorm_view v;
        gnorm_layout(c->cfg, &c->ly, &v, c->fresh);
        memset(v.state, 0, v.nsl);
        memset(v.done, 0, v.nb);
        v.pending[0] = 0;
    }
}

void remat_op_grads_end(remat_op_ctx *c)
{
    if (!c->fresh) return;
    for (int p = 0; p < c->ly.count; p++)
        for (int l = c->ly.player[p] ? 0 : -1; l < (c->ly.player[p] ? c->cfg->n_layer : 0); l++)
            if (*fresh_of(c, p, l)) memset(c->grads + poff(c, p, l), 0, slice_numel(c, p) * sizeof(float));
}

/* the element type of tensor t under the context's config; RT_X: the
 * block input's (the block output's) */
static inline int DT(const remat_op_ctx *c, int t) { return remat_tensor_dtype(c->cfg, t == RT_X ? c->tb->nblock - 1 : t); }
static inline uint64_t ES(const remat_op_ctx *c, int t) { int d = DT(c, t); return d < 0 ? 1 : remat_dtype_bytes(d); }

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

/* An entry's sizes, as its kernels are called with them. */
typedef struct op_dims {
    int B, T, C, NH, KV, hs, F, N, Vp, dt;
    uint64_t M, Nc, K;         /* a product's (M, N, K) */
} op_dims;

static void dims_of(const remat_op_ctx *c, int t, op_dims *d)
{
    const remat_config *cf = c->cfg;
    d->B = cf->batch; d->T = cf->seq; d->C = cf->n_embd; d->NH = cf->n_head;
    d->KV = remat_config_kv_heads(cf); d->hs = remat_config_head_dim(cf); d->F = remat_config_ffn_dim(cf);
    d->N = d->B * d->T; d->Vp = remat_config_padded_vocab(cf); d->dt = cf->dtype;
    remat_tensor_gemm(cf, t, &d->M, &d->Nc, &d->K);
}

/* The attention core's operands, from the entry: its q and k are the first
 * NH hs and the next KV hs columns of `qk`, its v the last KV hs columns
 * of `v` (GPT-2: both qkv; Llama: the RoPE output and qkv), each with its
 * tensor's row width as the stride; the gradient goes to the backward's
 * d_qkv, shaped like qkv: dq, dk, dv one after another. */
static remat_attn_layout attn_layout(const remat_op_ctx *c, const op_dims *d, int qk_t, const void *qk, int v_t,
                                     const void *v, int g_t)
{
    const remat_config *cf = c->cfg;
    remat_attn_layout L;
    memset(&L, 0, sizeof L);
    L.B = d->B; L.T = d->T; L.NH = d->NH; L.KV = d->KV; L.hs = d->hs; L.dt = d->dt;
    size_t es = remat_dtype_bytes(d->dt);
    L.ldq = L.ldk = (int)remat_tensor_row_elems(cf, qk_t);
    L.q = qk;
    L.k = (const char *)qk + (size_t)d->NH * d->hs * es;
    if (v) {
        L.ldv = (int)remat_tensor_row_elems(cf, v_t);
        L.v = (const char *)v + (size_t)(L.ldv - d->KV * d->hs) * es;
    }
    if (g_t >= 0) {
        L.ldg = (int)remat_tensor_row_elems(cf, g_t);
        L.gq = 0;
        L.gk = d->NH * d->hs;
        L.gv = (d->NH + d->KV) * d->hs;
    }
    return L;
}

/* the bytes of the q/k and v tensors the attention kernels read: whole rows
 * up to the last column they use */
static uint64_t qk_bytes(const remat_op_ctx *c, const op_dims *d, int t)
{
    uint64_t ld = remat_tensor_row_elems(c->cfg, t);
    return ((uint64_t)d->N - 1) * ld * ES(c, t) + (uint64_t)(d->NH + d->KV) * d->hs * ES(c, t);
}
static uint64_t v_bytes(const remat_op_ctx *c, const op_dims *d, int t)
{
    return (uint64_t)d->N * remat_tensor_row_elems(c->cfg, t) * ES(c, t);
}

/* The chunked LM head (config lmhead_chunk): for each chunk of rows,
 * logits (fp32, in scratch) = lnf @ W^T, the loss, and -- when training --
 * at once the gradient d(lnf) = dlogits @ W (into out, which holds
 * d(lnf)) and dW += dlogits^T lnf.  Computing the gradient in the same
 * pass, instead of recomputing each chunk's logits in the backward, saves a
 * whole LM-head GEMM; it is valid because every schedule runs the head's
 * backward right after its forward and never recomputes it.
 * temp: rows x Vp fp32, then under bf16 rows x Vp bf16 for d(logits) as a
 * GEMM operand. */
static void lmhead_rows(remat_op_ctx *c, int w, void *out, const void *lnf, void *temp, const remat_ws *ws)
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
                            x, C, WG(c, w, -1), C, chunk, Vp, NULL, ws };
        remat_gemm(&g);
        if (c->have_targets)
            c->loss_sum += remat_crossentropy_forward(c->losses + r0, chunk, c->targets + r0, nr, cf->vocab, Vp, scale,
                                                      REMAT_DTYPE_FP32, ws);
        if (!c->training) continue;
        const void *dlog = chunk;
        if (dt == REMAT_DTYPE_BF16) {
            remat_bf16_from_f32(chunk16, chunk, (size_t)nr * Vp);
            dlog = chunk16;
        }
        int acc;
        float *dw = GWA(c, w, -1, &acc);
        remat_linear_backward((char *)out + (size_t)r0 * C * es, dw, NULL, dlog, x, WG(c, w, -1), nr, C, Vp, dt, acc,
                              ws);
    }
}

void remat_op_forward(remat_op_ctx *c, int t, int l, const remat_op_args *a)
{
    const remat_config *cf = c->cfg;
    const remat_tensor_def *e = &c->tb->defs[t];
    const int8_t *in = e->fwd_in;
    op_dims d;
    dims_of(c, t, &d);
    int dt = d.dt, N = d.N, C = d.C;
    uint64_t out_b = remat_tensor_bytes(cf, t), nc = (uint64_t)N * C;
    void *out = A(a, t, out_b);
    int flash = remat_tensor_variant_on(cf, t);
    remat_dropout drop;
    switch (e->kernel) {
    case RK_EMBED:      /* emb = wte[inputs] (+ wpe) */
        remat_encoder_forward(out, c->inputs, W(c, e->w, -1), W(c, e->b, -1), d.B, d.T, C, DT(c, t));
        break;
    case RK_LN_STATS:
        remat_layernorm_stats(A(a, t, 2 * 4 * (uint64_t)N), IN(a, in, 0, nc * ES(c, in[0])), N, C, DT(c, in[0]));
        break;
    case RK_LN:
        remat_layernorm_apply(A(a, t, nc * ES(c, t)), DT(c, t), IN(a, in, 0, nc * ES(c, in[0])), DT(c, in[0]),
                              IN(a, in, 1, 8 * (uint64_t)N), W(c, e->w, l), W(c, e->b, l), N, C);
        break;
    case RK_LINEAR: {   /* out = in @ W^T + b; residual: out = in[1] + dropout(that) */
        uint64_t M = d.M, Nc = d.Nc, K = d.K;
        remat_linear_forward(A(a, t, M * Nc * ES(c, t)), DT(c, t), IN(a, in, 0, M * K * ES(c, in[0])),
                             WG(c, e->w, l), W(c, e->b, l), (int)M, (int)K, (int)Nc, dt, &a->ws);
        if (e->flags & RT_F_RESIDUAL) {
            drop = drop_for(c, l, e->site);
            remat_residual_forward(out, IN(a, in, 1, M * Nc * ES(c, in[1])), out, &drop, (size_t)(M * Nc), DT(c, t));
        }
        break;
    }
    case RK_ATT_SCORES: {   /* naive: the (B,NH,T,T) probabilities; flash: the logsumexp */
        remat_attn_layout L = attn_layout(c, &d, in[0], IN(a, in, 0, qk_bytes(c, &d, in[0])), -1, NULL, -1);
        L.ws = &a->ws;   /* the tiles' products' workspace */
        uint64_t n = (uint64_t)d.B * d.NH * d.T;
        if (flash) remat_flash_attention_stats(A(a, t, 4 * n), &L);
        else remat_attention_scores_forward(A(a, t, n * d.T * ES(c, t)), &L);
        break;
    }
    case RK_ATT_VALUES: {   /* in: the scores' output, the q/k tensor, the v tensor (the same one in GPT-2) */
        uint64_t nout = (uint64_t)N * d.NH * d.hs;
        float *acc = NULL;   /* when the table declares it (its scratch items) */
        if (dt == REMAT_DTYPE_BF16 && (flash || cf->dropout > 0.0f)) acc = TEMP(a, 4 * nout);
        drop = drop_for(c, l, e->site);
        int vi = in[2] != RT_NONE ? 2 : 1;
        remat_attn_layout L = attn_layout(c, &d, in[1], IN(a, in, 1, qk_bytes(c, &d, in[1])), in[vi],
                                          IN(a, in, vi, v_bytes(c, &d, in[vi])), -1);
        L.ws = &a->ws;   /* the tiles' products' workspace */
        const void *att = IN(a, in, 0, remat_tensor_bytes(cf, in[0]));
        if (flash) remat_flash_attention_values(A(a, t, nout * ES(c, t)), att, &L, &drop, acc);
        else remat_attention_values_forward(A(a, t, nout * ES(c, t)), att, &L, &drop, acc);
        break;
    }
    case RK_ROPE: {     /* the q and k columns of in[0], rotated */
        int nh = d.NH + d.KV;
        uint64_t ld = remat_tensor_row_elems(cf, in[0]);
        remat_rope_forward(A(a, t, (uint64_t)N * nh * d.hs * ES(c, t)), IN(a, in, 0, (uint64_t)N * ld * ES(c, in[0])),
                           (int)ld, c->rope, d.B, d.T, nh, d.hs, dt);
        break;
    }
    case RK_RMS_STATS:
        remat_rmsnorm_stats(A(a, t, 4 * (uint64_t)N), IN(a, in, 0, nc * ES(c, in[0])), N, C, DT(c, in[0]),
                            remat_config_norm_eps(cf));
        break;
    case RK_RMS:
        remat_rmsnorm_apply(A(a, t, nc * ES(c, t)), DT(c, t), IN(a, in, 0, nc * ES(c, in[0])), DT(c, in[0]),
                            IN(a, in, 1, 4 * (uint64_t)N), W(c, e->w, l), N, C);
        break;
    case RK_SWIGLU:
        remat_swiglu_forward(A(a, t, (uint64_t)N * d.F * ES(c, t)), IN(a, in, 0, 2 * (uint64_t)N * d.F * ES(c, in[0])),
                             N, d.F, dt);
        break;
    case RK_GELU:
        remat_gelu_forward(out, IN(a, in, 0, out_b), out_b / ES(c, t), dt);
        break;
    case RK_LMHEAD: {
        const void *lnf = IN(a, in, 0, nc * ES(c, in[0]));
        if (flash) {   /* chunked: out holds d(lnf) */
            uint64_t rows = (uint64_t)remat_lmhead_rows(cf), vp = (uint64_t)d.Vp;
            lmhead_rows(c, e->w, A(a, t, nc * ES(c, t)), lnf,
                        TEMP(a, rows * vp * (4 + (dt == REMAT_DTYPE_BF16 ? 2 : 0))), &a->ws);
            break;
        }
        remat_linear_forward(A(a, t, (uint64_t)N * d.Vp * ES(c, t)), DT(c, t), lnf, WG(c, e->w, -1), NULL, N, C,
                             d.Vp, dt, &a->ws);
        /* fused softmax + cross-entropy; training overwrites the logits
         * with d(logits) in place */
        if (!c->have_targets) c->loss_sum = 0.0;
        else c->loss_sum = remat_crossentropy_forward(c->losses, out, c->targets, N, cf->vocab, d.Vp,
                                                      dlogits_scale(c, N), dt, &a->ws);
        break;
    }
    default: assert(!"remat_op_forward: an entry whose kernel the dispatcher does not run"); break;
    }
}

/* The gradient reaching a residual branch: d_res itself when the table
 * has no d_branch (fp32, no dropout), or d_res masked by the branch's
 * regenerated mask and/or rounded to bf16 into d_branch.  (A backward runs
 * only in training, so the mask's p is the config's dropout.) */
static const void *branch_grad(const remat_op_ctx *c, const remat_op_args *a, const remat_tensor_def *e, int l,
                               size_t n)
{
    const float *dres = A(a, e->gout, 4 * (uint64_t)n);
    int db = c->tb->d_branch;
    if (db < 0 || !remat_tensor_exists(c->cfg, db)) return dres;
    remat_dropout d = drop_for(c, l, e->site);
    void *b = A(a, db, n * ES(c, db));
    remat_residual_backward_branch(b, dres, &d, n, c->cfg->dtype);
    return b;
}

void remat_op_backward(remat_op_ctx *c, int t, int l, const remat_op_args *a)
{
    const remat_config *cf = c->cfg;
    const remat_tensor_def *e = &c->tb->defs[t];
    const int8_t *in = e->bwd_in;
    op_dims d;
    dims_of(c, t, &d);
    int dt = d.dt, N = d.N, C = d.C;
    uint64_t nc = (uint64_t)N * C;
    int flash = remat_tensor_variant_on(cf, t);
    remat_dropout drop;
    switch (e->kernel) {
    case RK_EMBED: {    /* adds to the rows of the tokens (wte) and of the positions (wpe) */
        int zw, zp;
        size_t iw, ip;
        float *dwte = GW_rows(c, e->w, &zw, &iw), *dwpe = GW_rows(c, e->b, &zp, &ip);
        remat_encoder_backward(dwte, dwpe, A(a, e->gout, 4 * nc), c->inputs, d.B, d.T, C);
        if (zw) gnorm_zeroed_rows(c, e->w, iw, c->inputs, N, 0);
        if (zp) gnorm_zeroed_rows(c, e->b, ip, NULL, N, d.T);
        break;
    }
    case RK_LN:         /* d_res += layernorm'(d_ln) */
        remat_layernorm_backward(A(a, e->gin, 4 * nc), GW(c, e->w, l), GW(c, e->b, l), A(a, e->gout, nc * ES(c, e->gout)),
                                 DT(c, e->gout), IN(a, in, 0, nc * ES(c, in[0])), DT(c, in[0]),
                                 IN(a, in, 1, 8 * (uint64_t)N), W(c, e->w, l), N, C);
        break;
    case RK_LINEAR: {   /* din = dout @ W; dW += dout^T in; db += sum dout */
        uint64_t M = d.M, Nc = d.Nc, K = d.K;
        const void *src = (e->flags & RT_F_RESIDUAL) ? branch_grad(c, a, e, l, (size_t)(M * Nc))
                                                     : A(a, e->gout, M * Nc * ES(c, e->gout));
        /* w and b are written by this op alone, together: one acc serves both */
        int acc, bacc;
        float *dw = GWA(c, e->w, l, &acc), *db = GWA(c, e->b, l, &bacc);
        assert((e->b < 0 || acc == bacc) && "a linear layer's bias gradient written apart from its weight's");
        remat_linear_backward(A(a, e->gin, M * K * ES(c, e->gin)), dw, db, src, IN(a, in, 0, M * K * ES(c, in[0])),
                              WG(c, e->w, l), (int)M, (int)K, (int)Nc, dt, acc, &a->ws);
        break;
    }
    case RK_GELU: {     /* in place: d = d * gelu'(in) */
        uint64_t n = remat_tensor_bytes(cf, t) / ES(c, t);
        remat_gelu_backward(A(a, e->gin, n * ES(c, e->gin)), IN(a, in, 0, n * ES(c, in[0])),
                            A(a, e->gout, n * ES(c, e->gout)), (size_t)n, dt);
        break;
    }
    case RK_ATT_VALUES: {   /* through values and scores at once: d_qkv (dq, dk, dv) */
        uint64_t ng = (uint64_t)N * remat_tensor_row_elems(cf, e->gin);
        float *acc = dt == REMAT_DTYPE_BF16 ? TEMP(a, 4 * ng) : NULL;
        drop = drop_for(c, l, e->site);
        int vi = in[2] != RT_NONE ? 2 : 1;
        remat_attn_layout L = attn_layout(c, &d, in[1], IN(a, in, 1, qk_bytes(c, &d, in[1])), in[vi],
                                          IN(a, in, vi, v_bytes(c, &d, in[vi])), e->gin);
        L.ws = &a->ws;   /* the tiles' products' workspace */
        void *dqkv = A(a, e->gin, ng * ES(c, e->gin));
        const void *dout = A(a, e->gout, (uint64_t)N * d.NH * d.hs * ES(c, e->gout));
        const void *att = IN(a, in, 0, remat_tensor_bytes(cf, in[0]));
        if (flash) remat_flash_attention_backward(dqkv, dout, att, &L, &drop, acc);
        else remat_attention_backward(dqkv, dout, att, &L, &drop, acc);
        break;
    }
    case RK_ROPE: {     /* in place: d_qkv's q and k columns rotated back */
        uint64_t ld = remat_tensor_row_elems(cf, e->gin);
        remat_rope_backward(A(a, e->gin, (uint64_t)N * ld * ES(c, e->gin)), (int)ld, c->rope, d.B, d.T, d.NH + d.KV,
                            d.hs, dt);
        break;
    }
    case RK_RMS:        /* d_res += rmsnorm'(d_ln) */
        remat_rmsnorm_backward(A(a, e->gin, 4 * nc), GW(c, e->w, l), A(a, e->gout, nc * ES(c, e->gout)),
                               DT(c, e->gout), IN(a, in, 0, nc * ES(c, in[0])), DT(c, in[0]),
                               IN(a, in, 1, 4 * (uint64_t)N), W(c, e->w, l), N, C);
        break;
    case RK_SWIGLU: {
        uint64_t n2 = 2 * (uint64_t)N * d.F;
        remat_swiglu_backward(A(a, e->gin, n2 * ES(c, e->gin)), A(a, e->gout, (uint64_t)N * d.F * ES(c, e->gout)),
                              IN(a, in, 0, n2 * ES(c, in[0])), N, d.F, dt);
        break;
    }
    case RK_LMHEAD:
        if (flash) {    /* chunked: computed in the forward pass already */
            memcpy(A(a, e->gin, nc * ES(c, e->gin)), A(a, t, nc * ES(c, t)), nc * remat_dtype_bytes(dt));
        } else {        /* logits hold d(logits) */
            int acc;
            float *dw = GWA(c, e->w, -1, &acc);
            remat_linear_backward(A(a, e->gin, nc * ES(c, e->gin)), dw, NULL, A(a, t, (uint64_t)N * d.Vp * ES(c, t)),
                                  IN(a, in, 0, nc * ES(c, in[0])), WG(c, e->w, -1), N, C, d.Vp, dt, acc, &a->ws);
        }
        break;
    default: assert(!"remat_op_backward: an entry without a backward of its own"); break;
    }
    if (c->gnorm && c->fresh) gnorm_flush(c);
}

/* ---- the update --------------------------------------------------------------- */

static size_t num_params(const remat_op_ctx *c) { return c->ly.total; }

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
    for (int i = 0; i < c->ly.count; i++) {
        size_t a = c->ly.off[i] > lo ? c->ly.off[i] : lo, b = c->ly.off[i] + c->ly.numel[i];
        if (b > hi) b = hi;
        if (a < b && !isfinite(remat_sumsq(c->grads + a, b - a))) return i;
    }
    return c->ly.count;
}

void remat_op_adamw_range(const remat_op_ctx *c, float *adam_m, float *adam_v, const remat_optim *o, uint64_t t,
                          size_t lo, size_t hi, float scale)
{
    const remat_param_table *pt = remat_params_of(c->cfg);
    remat_adamw_span spans[RP_MAX];
    int ns = 0;
    for (int i = 0; i < c->ly.count; i++) {
        size_t a = c->ly.off[i] > lo ? c->ly.off[i] : lo, b = c->ly.off[i] + c->ly.numel[i];
        if (b > hi) b = hi;
        if (a < b) spans[ns++] = (remat_adamw_span){ a, b - a, pt->defs[i].decay };
    }
    /* every tensor in one pass, and the bf16 copy in the same one */
    remat_adamw_update_spans(c->params, c->grads, adam_m, adam_v, c->params16, lo, spans, ns, o->lr, o->beta1,
                             o->beta2, o->eps, o->weight_decay, scale, t);
}

remat_status remat_op_update(const remat_op_ctx *c, float *adam_m, float *adam_v, const remat_optim *o, uint64_t t,
                             float *norm_out)
{
    size_t np = num_params(c);
    double norm = sqrt(remat_op_grad_sumsq(c));
    if (norm_out) *norm_out = (float)norm;
    if (!isfinite(norm)) {
        /* name the first tensor with a non-finite gradient */
        int i = remat_op_first_nonfinite(c, 0, np);
        if (i < c->ly.count)
            return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient in %s at step %llu",
                              remat_params_of(c->cfg)->defs[i].name, (unsigned long long)t);
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

/* the table has a row per position the config runs (0..seq-1): each row
 * is computed on its own, so it is the same in every table that has it */
size_t remat_op_rope_floats(const remat_config *cfg)
{
    const remat_table *tb = remat_table_of(cfg);
    int rope = 0;
    for (int t = 0; tb && t < tb->count; t++) rope |= tb->defs[t].kernel == RK_ROPE;
    return rope ? (size_t)cfg->seq * (size_t)remat_config_head_dim(cfg) : 0;
}

void remat_op_rope_fill(const remat_config *cfg, float *rope)
{
    const remat_rope_scaling *r = &cfg->rope_scaling;
    remat_rope_llama3 l3 = { r->factor, r->low_freq_factor, r->high_freq_factor, (double)r->original_max_position };
    remat_rope_table(rope, cfg->seq, remat_config_head_dim(cfg), remat_config_rope_theta(cfg),
                     r->type == REMAT_ROPE_LLAMA3 ? &l3 : NULL);
}
