/*
 * model.c -- the GPT-2 model and the schedule interpreter.
 *
 * A model owns its parameters, gradients and AdamW state (allocated once)
 * and an installed schedule.  remat_model_step() walks the schedule: each
 * forward/recompute instruction allocates one activation through the
 * accounting allocator and runs its op; each backward runs the op's backward,
 * allocating and freeing the activation-gradient buffers named in the
 * activation table; each free releases a tensor.  The allocator's measured
 * peak is compared, in the tests, with the simulator's prediction for the
 * same schedule.
 *
 * Parameter layout follows llm.c (train_gpt2.c), so its checkpoints map 1:1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensors.h"
#include "../core/core.h"
#include "../core/rng.h"
#include "../kernels/kernels.h"
#include "../schedule/schedule.h"
#include "model.h"
#include "remat_testing.h"   /* remat_model_debug_poison is defined here */

static const char *const param_names[REMAT_NPARAM] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"
};

void remat_param_shapes(const remat_config *c, int shapes[REMAT_NPARAM][3])
{
    int C = c->n_embd, L = c->n_layer, Vp = remat_config_padded_vocab(c);
    int s[REMAT_NPARAM][3] = {
        {Vp, C, 0}, {c->max_seq, C, 0}, {L, C, 0}, {L, C, 0}, {L, 3 * C, C}, {L, 3 * C, 0},
        {L, C, C}, {L, C, 0}, {L, C, 0}, {L, C, 0}, {L, 4 * C, C}, {L, 4 * C, 0},
        {L, C, 4 * C}, {L, C, 0}, {C, 0, 0}, {C, 0, 0}
    };
    memcpy(shapes, s, sizeof s);
}

static size_t shape_numel(const int s[3])
{
    size_t n = (size_t)s[0];
    if (s[1]) n *= (size_t)s[1];
    if (s[2]) n *= (size_t)s[2];
    return n;
}

size_t remat_param_layout(const remat_config *c, int shapes[REMAT_NPARAM][3], size_t offsets[REMAT_NPARAM])
{
    remat_param_shapes(c, shapes);
    size_t total = 0;
    for (int i = 0; i < REMAT_NPARAM; i++) {
        if (offsets) offsets[i] = total;
        total += shape_numel(shapes[i]);
    }
    return total;
}

void remat_optim_default(remat_optim *o)
{
    o->lr = 3e-4f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->weight_decay = 0.1f;
    o->grad_clip = 1.0f;
}

static remat_status model_fail(remat_model *m, remat_status st)
{
    if (m) snprintf(m->err, sizeof m->err, "%s", remat_errmsg());
    return st;
}

const char *remat_model_error(const remat_model *m) { return m ? m->err : remat_errmsg(); }
const remat_config *remat_model_config(const remat_model *m) { return &m->cfg; }

static void init_params(remat_model *m, uint64_t seed)
{
    const remat_config *c = &m->cfg;
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    for (int i = 0; i < REMAT_NPARAM; i++) {
        float *p = m->params + m->poff[i];
        size_t n = m->pnum[i];
        uint64_t key = remat_rng_key(seed, 0xffffffffULL, (uint32_t)i, 0);
        int is_ln_w = (i == 2 || i == 8 || i == 14), is_bias = (i == 3 || i == 5 || i == 7 || i == 9 ||
                                                                 i == 11 || i == 13 || i == 15);
        if (is_ln_w) { for (size_t k = 0; k < n; k++) p[k] = 1.0f; continue; }
        if (is_bias) { memset(p, 0, n * sizeof *p); continue; }
        float s = (i == 6 || i == 12) ? proj_std : std;
        for (size_t k = 0; k < n; k++) p[k] = s * remat_rng_normal(key, k);
        if (i == 0) /* padded vocabulary rows are zero and stay unused */
            memset(p + (size_t)c->vocab * c->n_embd, 0,
                   (size_t)(remat_config_padded_vocab(c) - c->vocab) * c->n_embd * sizeof *p);
    }
}

remat_status remat_model_create(const remat_config *cfg, uint64_t seed, remat_model **out)
{
    remat_status st;
    remat_model *m = NULL;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_model_create: out is NULL");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    m = remat_calloc(1, sizeof *m);
    if (!m) return remat_fail(REMAT_ERR_NOMEM, "out of memory creating the model");
    m->cfg = *cfg;
    m->seed = seed;
    remat_optim_default(&m->opt);
    int shapes[REMAT_NPARAM][3];
    size_t total = remat_param_layout(cfg, shapes, m->poff);
    for (int i = 0; i < REMAT_NPARAM; i++) m->pnum[i] = shape_numel(shapes[i]);
    m->nparams = total;
    size_t bytes = total * sizeof(float);
    int L = cfg->n_layer;
    m->nslots = remat_nslots(L);
    size_t N = (size_t)cfg->batch * cfg->seq;
    m->params = remat_mem_alloc(&m->mem, REMAT_MEM_PARAMS, bytes);
    m->grads = remat_mem_calloc(&m->mem, REMAT_MEM_GRADS, bytes);
    m->adam_m = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, bytes);
    m->adam_v = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, bytes);
    m->inputs = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE, N * sizeof(int));
    m->targets = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE, N * sizeof(int));
    m->losses = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE, N * sizeof(float));
    m->buf = remat_calloc((size_t)m->nslots, sizeof *m->buf);
    m->hash = remat_calloc((size_t)m->nslots, sizeof *m->hash);
    if (!m->params || !m->grads || !m->adam_m || !m->adam_v || !m->inputs || !m->targets || !m->losses ||
        !m->buf || !m->hash) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory allocating %zu parameters (%.1f MiB each for params, "
                        "grads, and two AdamW moments)", total, bytes / 1048576.0);
        goto out;
    }
    init_params(m, seed);
    if ((st = remat_model_set_policy(m, NULL))) goto out;
    *out = m;
    m = NULL;
out:
    remat_model_free(m);
    return st;
}

static void free_acts(remat_model *m)
{
    for (int s = 0; s < m->nslots; s++)
        if (m->buf[s]) {
            int t = remat_slot_tid(m->cfg.n_layer, s);
            remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->buf[s], remat_tensor_bytes(&m->cfg, t));
            m->buf[s] = NULL;
        }
}

void remat_model_free(remat_model *m)
{
    if (!m) return;
    size_t bytes = m->nparams * sizeof(float), N = (size_t)m->cfg.batch * m->cfg.seq;
    if (m->buf) free_acts(m);
    remat_mem_free(&m->mem, REMAT_MEM_PARAMS, m->params, bytes);
    remat_mem_free(&m->mem, REMAT_MEM_GRADS, m->grads, bytes);
    remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_m, bytes);
    remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_v, bytes);
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->inputs, N * sizeof(int));
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->targets, N * sizeof(int));
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->losses, N * sizeof(float));
    remat_mem_release(&m->mem);
    free(m->buf);
    free(m->hash);
    remat_schedule_free(m->sched);
    free(m);
}

remat_status remat_model_set_optim(remat_model *m, const remat_optim *o)
{
    if (!m || !o) return remat_fail(REMAT_ERR_INVALID, "NULL argument");
    if (!(o->lr >= 0 && o->lr < 10) || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) ||
        !(o->eps > 0) || !(o->weight_decay >= 0 && o->weight_decay < 1) || !(o->grad_clip == o->grad_clip))
        return model_fail(m, remat_fail(REMAT_ERR_INVALID, "optimizer settings out of range (lr in [0,10), "
                                        "betas in [0,1), eps > 0, weight decay in [0,1))"));
    m->opt = *o;
    return REMAT_OK;
}

remat_status remat_model_set_policy(remat_model *m, const char *policy)
{
    remat_schedule *s = NULL;
    if (!m) return remat_fail(REMAT_ERR_INVALID, "model is NULL");
    remat_status st = remat_schedule_create(&m->cfg, policy, &s);
    if (st) return model_fail(m, st);
    remat_schedule_free(m->sched);
    m->sched = s;
    return REMAT_OK;
}

const remat_schedule *remat_model_schedule(const remat_model *m) { return m->sched; }
void remat_model_set_verify(remat_model *m, int on) { if (m) m->verify = on; }

size_t remat_model_num_params(const remat_model *m) { return m->nparams; }
float *remat_model_params(remat_model *m) { return m->params; }
const float *remat_model_grads(const remat_model *m) { return m->grads; }
int remat_param_tensor_count(void) { return REMAT_NPARAM; }

remat_status remat_model_param_tensor(const remat_model *m, remat_param i, const char **name, size_t *offset,
                                      int shape[3])
{
    if (!m || i < 0 || i >= REMAT_NPARAM) return remat_fail(REMAT_ERR_INVALID, "parameter tensor %d out of range", i);
    int shapes[REMAT_NPARAM][3];
    remat_param_shapes(&m->cfg, shapes);
    if (name) *name = param_names[i];
    if (offset) *offset = m->poff[i];
    if (shape) memcpy(shape, shapes[i], sizeof shapes[i]);
    return REMAT_OK;
}

remat_status remat_model_debug_poison(remat_model *m, remat_param param_tensor)
{
    if (!m || param_tensor < 0 || param_tensor > REMAT_POISON_LOSS)
        return remat_fail(REMAT_ERR_INVALID, "debug poison: parameter tensor %d is not in [0, %d]", (int)param_tensor,
                          REMAT_POISON_LOSS);
    m->poison = param_tensor == REMAT_POISON_LOSS ? 1 : (int)param_tensor + 2;
    return REMAT_OK;
}

uint64_t remat_model_params_hash(const remat_model *m)
{
    return remat_hash_bytes(m->params, m->nparams * sizeof(float));
}

void remat_model_stats(const remat_model *m, remat_stats *o)
{
    memset(o, 0, sizeof *o);
    o->act_peak_bytes = m->meas_peak;
    o->act_stored_bytes = m->meas_stored;
    o->act_workset_bytes = m->meas_peak - m->meas_stored;
    o->params_bytes = m->mem.live[REMAT_MEM_PARAMS];
    o->grads_bytes = m->mem.live[REMAT_MEM_GRADS];
    o->optim_bytes = m->mem.live[REMAT_MEM_OPTIM];
    o->workspace_bytes = m->mem.live[REMAT_MEM_WORKSPACE];
    o->step_peak_bytes = m->meas_total_peak;
    o->flops = m->step_flops;
    o->recompute_flops = m->step_recompute_flops;
    o->steps_done = m->t;
    o->grad_norm = m->grad_norm;
}

/* ---- the interpreter ------------------------------------------------------ */

#define P(i) (m->params + m->poff[i])
#define G(i) (m->grads + m->poff[i])

static float *slotbuf(remat_model *m, int layer, int t)
{
    return m->buf[remat_slot(m->cfg.n_layer, layer < 0 ? (t == RT_X ? m->cfg.n_layer : 0) : layer, t)];
}

static remat_dropout drop_for(const remat_model *m, int layer, int site)
{
    float p = m->training ? m->cfg.dropout : 0.0f;
    return remat_dropout_make(p, remat_rng_key(m->seed, m->t, (uint32_t)layer, (uint32_t)site));
}

static remat_status alloc_slot(remat_model *m, int slot, int t, int zero)
{
    uint64_t bytes = remat_tensor_bytes(&m->cfg, t);
    m->buf[slot] = zero ? remat_mem_calloc(&m->mem, REMAT_MEM_ACTS, bytes)
                        : remat_mem_alloc(&m->mem, REMAT_MEM_ACTS, bytes);
    if (!m->buf[slot])
        return remat_fail(REMAT_ERR_NOMEM, "out of memory allocating %s (%.1f MiB)", remat_tensor_defs[t].name,
                          bytes / 1048576.0);
    return REMAT_OK;
}

static void free_slot(remat_model *m, int slot, int t)
{
    remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->buf[slot], remat_tensor_bytes(&m->cfg, t));
    m->buf[slot] = NULL;
}

/* The LM head over chunks of rows (config lmhead_chunk): for each chunk,
 * logits = lnf @ wte^T, the loss, and -- when training -- at once the
 * gradient: d(lnf) = dlogits @ wte (into out) and dwte += dlogits^T lnf.
 * Computing the gradient in the same pass, instead of recomputing each
 * chunk's logits in the backward, saves a whole LM-head GEMM; it is valid
 * because every schedule runs the head's backward right after its forward
 * and never recomputes the head. */
static remat_status lmhead_chunked(remat_model *m, float *out, int N)
{
    const remat_config *c = &m->cfg;
    int C = c->n_embd, Vp = remat_config_padded_vocab(c);
    int rows = c->lmhead_chunk < N ? c->lmhead_chunk : N;
    size_t bytes = remat_tensor_fwd_temp_bytes(c, RT_LOGITS);
    float *chunk = remat_mem_alloc(&m->mem, REMAT_MEM_ACTS, bytes);
    if (!chunk) return remat_fail(REMAT_ERR_NOMEM, "out of memory allocating a chunk of logits (%.1f MiB)", bytes / 1048576.0);
    const float *lnf = slotbuf(m, -1, RT_LNF);
    float scale = m->training ? 1.0f / (float)N : 0.0f;
    m->loss_sum = 0;
    for (int r0 = 0; r0 < N; r0 += rows) {
        int nr = N - r0 < rows ? N - r0 : rows;
        linear_forward(chunk, lnf + (size_t)r0 * C, P(0), NULL, nr, C, Vp);
        if (m->have_targets)
            m->loss_sum += crossentropy_forward(m->losses + r0, chunk, m->targets + r0, nr, c->vocab, Vp, scale);
        if (m->training)
            linear_backward(out + (size_t)r0 * C, G(0), NULL, chunk, lnf + (size_t)r0 * C, P(0), nr, C, Vp);
    }
    remat_mem_free(&m->mem, REMAT_MEM_ACTS, chunk, bytes);
    return REMAT_OK;
}

/* Runs tensor t's forward op into its (already allocated) buffer. */
static remat_status run_forward(remat_model *m, int l, int t, int nb)
{
    const remat_config *c = &m->cfg;
    int T = c->seq, C = c->n_embd, NH = c->n_head, N = nb * T, L = c->n_layer;
    int Vp = remat_config_padded_vocab(c);
    float *out = slotbuf(m, l, t);
    size_t lc = (size_t)(l < 0 ? 0 : l);
    remat_dropout d;
    switch (t) {
    case RT_EMB: encoder_forward(out, m->inputs, P(0), P(1), nb, T, C); break;
    case RT_LN1_STAT: layernorm_stats(out, slotbuf(m, l, RT_X), N, C); break;
    case RT_LN1: layernorm_apply(out, slotbuf(m, l, RT_X), slotbuf(m, l, RT_LN1_STAT), P(2) + lc * C, P(3) + lc * C, N, C); break;
    case RT_QKV: linear_forward(out, slotbuf(m, l, RT_LN1), P(4) + lc * 3 * C * C, P(5) + lc * 3 * C, N, C, 3 * C); break;
    case RT_ATT:
        if (c->attention == REMAT_ATTENTION_FLASH) flash_attention_stats(out, slotbuf(m, l, RT_QKV), nb, T, C, NH);
        else attention_scores_forward(out, slotbuf(m, l, RT_QKV), nb, T, C, NH);
        break;
    case RT_ATTY:
        d = drop_for(m, l, REMAT_SITE_ATT);
        if (c->attention == REMAT_ATTENTION_FLASH)
            flash_attention_values(out, slotbuf(m, l, RT_ATT), slotbuf(m, l, RT_QKV), &d, nb, T, C, NH);
        else
            attention_values_forward(out, slotbuf(m, l, RT_ATT), slotbuf(m, l, RT_QKV), &d, nb, T, C, NH);
        break;
    case RT_RES2:
        linear_forward(out, slotbuf(m, l, RT_ATTY), P(6) + lc * C * C, P(7) + lc * C, N, C, C);
        d = drop_for(m, l, REMAT_SITE_RES_ATTN);
        residual_forward(out, slotbuf(m, l, RT_X), out, &d, (size_t)N * C);
        break;
    case RT_LN2_STAT: layernorm_stats(out, slotbuf(m, l, RT_RES2), N, C); break;
    case RT_LN2: layernorm_apply(out, slotbuf(m, l, RT_RES2), slotbuf(m, l, RT_LN2_STAT), P(8) + lc * C, P(9) + lc * C, N, C); break;
    case RT_FCH: linear_forward(out, slotbuf(m, l, RT_LN2), P(10) + lc * 4 * C * C, P(11) + lc * 4 * C, N, C, 4 * C); break;
    case RT_FCH_GELU: gelu_forward(out, slotbuf(m, l, RT_FCH), (size_t)N * 4 * C); break;
    case RT_RES3:
        linear_forward(out, slotbuf(m, l, RT_FCH_GELU), P(12) + lc * 4 * C * C, P(13) + lc * C, N, 4 * C, C);
        d = drop_for(m, l, REMAT_SITE_RES_MLP);
        residual_forward(out, slotbuf(m, l, RT_RES2), out, &d, (size_t)N * C);
        break;
    case RT_LNF_STAT: layernorm_stats(out, slotbuf(m, -1, RT_X), N, C); break;
    case RT_LNF: layernorm_apply(out, slotbuf(m, -1, RT_X), slotbuf(m, -1, RT_LNF_STAT), P(14), P(15), N, C); break;
    case RT_LOGITS:
        if (c->lmhead_chunk > 0 && !m->full_head) return lmhead_chunked(m, out, N);
        linear_forward(out, slotbuf(m, -1, RT_LNF), P(0), NULL, N, C, Vp);
        if (m->have_targets)
            m->loss_sum = crossentropy_forward(m->losses, out, m->targets, N, c->vocab, Vp,
                                               m->training ? 1.0f / (float)N : 0.0f);
        break;
    }
    (void)L;
    return REMAT_OK;
}

static float *gbuf(remat_model *m, int t) { return m->buf[remat_slot(m->cfg.n_layer, 0, t)]; }

/* The gradient reaching a residual branch: d_res itself, or, with dropout,
 * d_res masked by the branch's regenerated mask into d_branch. */
static const float *branch_grad(remat_model *m, int l, int site, const float *dres, size_t n)
{
    remat_dropout d = drop_for(m, l, site);
    if (d.p <= 0) return dres;
    float *b = gbuf(m, RT_D_BRANCH);
    residual_backward_branch(b, dres, &d, n);
    return b;
}

static void run_backward(remat_model *m, int l, int t)
{
    const remat_config *c = &m->cfg;
    int T = c->seq, C = c->n_embd, NH = c->n_head, N = c->batch * T;
    int Vp = remat_config_padded_vocab(c);
    size_t lc = (size_t)(l < 0 ? 0 : l), n = (size_t)N * C;
    float *dres = gbuf(m, RT_D_RES);
    const float *src;
    remat_dropout d;
    switch (t) {
    case RT_RES3:
        src = branch_grad(m, l, REMAT_SITE_RES_MLP, dres, n);
        linear_backward(gbuf(m, RT_D_FCH), G(12) + lc * 4 * C * C, G(13) + lc * C, src,
                        slotbuf(m, l, RT_FCH_GELU), P(12) + lc * 4 * C * C, N, 4 * C, C);
        break;
    case RT_FCH_GELU:
        gelu_backward(gbuf(m, RT_D_FCH), slotbuf(m, l, RT_FCH), gbuf(m, RT_D_FCH), (size_t)N * 4 * C);
        break;
    case RT_FCH:
        linear_backward(gbuf(m, RT_D_LN2), G(10) + lc * 4 * C * C, G(11) + lc * 4 * C, gbuf(m, RT_D_FCH),
                        slotbuf(m, l, RT_LN2), P(10) + lc * 4 * C * C, N, C, 4 * C);
        break;
    case RT_LN2:
        layernorm_backward(dres, G(8) + lc * C, G(9) + lc * C, gbuf(m, RT_D_LN2), slotbuf(m, l, RT_RES2),
                           slotbuf(m, l, RT_LN2_STAT), P(8) + lc * C, N, C);
        break;
    case RT_RES2:
        src = branch_grad(m, l, REMAT_SITE_RES_ATTN, dres, n);
        linear_backward(gbuf(m, RT_D_ATTY), G(6) + lc * C * C, G(7) + lc * C, src, slotbuf(m, l, RT_ATTY),
                        P(6) + lc * C * C, N, C, C);
        break;
    case RT_ATTY:
        d = drop_for(m, l, REMAT_SITE_ATT);
        if (c->attention == REMAT_ATTENTION_FLASH)
            flash_attention_backward(gbuf(m, RT_D_QKV), gbuf(m, RT_D_ATTY), slotbuf(m, l, RT_ATT),
                                     slotbuf(m, l, RT_QKV), &d, c->batch, T, C, NH);
        else
            attention_backward(gbuf(m, RT_D_QKV), gbuf(m, RT_D_ATTY), slotbuf(m, l, RT_ATT), slotbuf(m, l, RT_QKV),
                               &d, c->batch, T, C, NH);
        break;
    case RT_QKV:
        linear_backward(gbuf(m, RT_D_LN1), G(4) + lc * 3 * C * C, G(5) + lc * 3 * C, gbuf(m, RT_D_QKV),
                        slotbuf(m, l, RT_LN1), P(4) + lc * 3 * C * C, N, C, 3 * C);
        break;
    case RT_LN1:
        layernorm_backward(dres, G(2) + lc * C, G(3) + lc * C, gbuf(m, RT_D_LN1), slotbuf(m, l, RT_X),
                           slotbuf(m, l, RT_LN1_STAT), P(2) + lc * C, N, C);
        break;
    case RT_LOGITS:
        if (c->lmhead_chunk > 0)   /* computed in the forward pass already */
            memcpy(gbuf(m, RT_D_LNF), slotbuf(m, -1, RT_LOGITS), (size_t)N * C * sizeof(float));
        else
            linear_backward(gbuf(m, RT_D_LNF), G(0), NULL, slotbuf(m, -1, RT_LOGITS), slotbuf(m, -1, RT_LNF), P(0),
                            N, C, Vp);
        break;
    case RT_LNF:
        layernorm_backward(dres, G(14), G(15), gbuf(m, RT_D_LNF), slotbuf(m, -1, RT_X),
                           slotbuf(m, -1, RT_LNF_STAT), P(14), N, C);
        break;
    case RT_EMB:
        encoder_backward(G(0), G(1), dres, m->inputs, c->batch, T, C);
        break;
    }
}

static remat_status check_tokens(const remat_model *m, const int *tok, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= m->cfg.vocab)
            return remat_fail(REMAT_ERR_INVALID, "%s[%zu] = %d is outside the vocabulary [0, %d)", what, i, tok[i],
                              m->cfg.vocab);
    return REMAT_OK;
}

static remat_status update(remat_model *m)
{
    const remat_optim *o = &m->opt;
    double norm = sqrt(sumsq(m->grads, m->nparams));
    m->grad_norm = (float)norm;
    if (!isfinite(norm)) {
        /* name the first tensor with a non-finite gradient */
        for (int i = 0; i < REMAT_NPARAM; i++)
            if (!isfinite(sumsq(G(i), m->pnum[i])))
                return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient in %s at step %llu", param_names[i],
                                  (unsigned long long)m->t + 1);
        return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient norm at step %llu", (unsigned long long)m->t + 1);
    }
    float scale = 1.0f;
    if (o->grad_clip > 0) {   /* torch.nn.utils.clip_grad_norm_ */
        double coef = o->grad_clip / (norm + 1e-6);
        if (coef < 1.0) scale = (float)coef;
    }
    int step = (int)(m->t + 1);
    for (int i = 0; i < REMAT_NPARAM; i++) {
        int decay = (i == 0 || i == 1 || i == 4 || i == 6 || i == 10 || i == 12);
        adamw_update(P(i), G(i), m->adam_m + m->poff[i], m->adam_v + m->poff[i], m->pnum[i], o->lr, o->beta1,
                     o->beta2, o->eps, o->weight_decay, decay, scale, step);
    }
    return REMAT_OK;
}

static uint64_t slot_hash(remat_model *m, int slot, int t)
{
    return remat_hash_bytes(m->buf[slot], remat_tensor_bytes(&m->cfg, t));
}

remat_status remat_model_step(remat_model *m, const int *inputs, const int *targets, int do_update, float *loss)
{
    remat_status st = REMAT_OK;
    if (!m || !inputs || !targets) return remat_fail(REMAT_ERR_INVALID, "remat_model_step: NULL argument");
    const remat_config *c = &m->cfg;
    size_t N = (size_t)c->batch * c->seq;
    int L = c->n_layer;
    if ((st = check_tokens(m, inputs, N, "inputs")) || (st = check_tokens(m, targets, N, "targets")))
        return model_fail(m, st);
    memcpy(m->inputs, inputs, N * sizeof(int));
    memcpy(m->targets, targets, N * sizeof(int));
    m->training = 1;
    m->have_targets = 1;
    memset(m->grads, 0, m->nparams * sizeof(float));
    remat_mem_reset_peak(&m->mem, REMAT_MEM_ACTS);
    m->mem.peak_total = m->mem.live_total;
    uint64_t act0 = m->mem.live[REMAT_MEM_ACTS];
    const remat_schedule *s = m->sched;
    double flops = 0, rflops = 0;
    for (size_t i = 0; i < s->n; i++) {
        const remat_instr *in = &s->ins[i];
        if (i == s->fwd_end) m->meas_stored = m->mem.live[REMAT_MEM_ACTS] - act0;
        int t = in->tid, l = in->layer;
        if (in->kind == REMAT_I_UPDATE) {
            if (m->poison == 1) m->loss_sum = NAN;
            else if (m->poison > 1) G(m->poison - 2)[0] = NAN;
            m->poison = 0;
            if (loss) *loss = (float)(m->loss_sum / (double)N);
            if (!isfinite(m->loss_sum)) {
                st = remat_fail(REMAT_ERR_NONFINITE, "non-finite loss at step %llu", (unsigned long long)m->t + 1);
                goto out;
            }
            if (do_update) { if ((st = update(m))) goto out; }
            else m->grad_norm = (float)sqrt(sumsq(m->grads, m->nparams));
            flops += remat_update_flops(c);
            continue;
        }
        int slot = remat_islot(c, l, t);
        if (in->kind == REMAT_I_FORWARD || in->kind == REMAT_I_RECOMPUTE) {
            if ((st = alloc_slot(m, slot, t, 0))) goto out;
            if ((st = run_forward(m, l, t, c->batch))) goto out;
            double f = remat_tensor_fwd_flops(c, t);
            flops += f;
            if (in->kind == REMAT_I_RECOMPUTE) rflops += f;
            if (m->verify) {
                uint64_t h = slot_hash(m, slot, t);
                if (in->kind == REMAT_I_FORWARD) m->hash[slot] = h;
                else if (h != m->hash[slot]) {
                    st = remat_fail(REMAT_ERR_VERIFY, "recomputed %s of layer %d at step %llu differs from its "
                                    "first computation (instruction %zu)", remat_tensor_defs[t].name, l,
                                    (unsigned long long)m->t + 1, i);
                    goto out;
                }
            }
        } else if (in->kind == REMAT_I_FREE) {
            free_slot(m, slot, t);
        } else {
            int a[2], f[2], na, nf;
            remat_bwd_effects(c, t, a, &na, f, &nf);
            for (int k = 0; k < na; k++)
                if ((st = alloc_slot(m, remat_islot(c, -1, a[k]), a[k], a[k] == RT_D_RES))) goto out;
            run_backward(m, l, t);
            for (int k = 0; k < nf; k++) free_slot(m, remat_islot(c, -1, f[k]), f[k]);
            flops += remat_tensor_bwd_flops(c, t);
        }
    }
    if (do_update) m->t++;
out:
    m->meas_peak = m->mem.peak[REMAT_MEM_ACTS] - act0;
    m->meas_total_peak = m->mem.peak_total;
    m->step_flops = flops;
    m->step_recompute_flops = rflops;
    free_acts(m);
    (void)L;
    return st ? model_fail(m, st) : REMAT_OK;
}

/* Forward only, for nb <= B rows, keeping only what the next op needs. */
static remat_status forward_only(remat_model *m, int nb)
{
    const remat_config *c = &m->cfg;
    int L = c->n_layer;
    remat_config cc = *c;
    cc.batch = nb;          /* buffers sized for nb rows */
    cc.lmhead_chunk = 0;    /* inference returns whole logits */
    m->full_head = 1;
    remat_status st = REMAT_OK;
    int s = remat_islot(c, -1, RT_EMB);
#define ALLOC(slot, t) do { uint64_t b_ = remat_tensor_bytes(&cc, t); \
        if (!(m->buf[slot] = remat_mem_alloc(&m->mem, REMAT_MEM_ACTS, b_))) { \
            st = remat_fail(REMAT_ERR_NOMEM, "out of memory in forward"); goto out; } } while (0)
#define FREE(slot, t) do { remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->buf[slot], remat_tensor_bytes(&cc, t)); \
        m->buf[slot] = NULL; } while (0)
    ALLOC(s, RT_EMB);
    if ((st = run_forward(m, -1, RT_EMB, nb))) goto out;
    for (int l = 0; l < L; l++) {
        for (int t = 0; t < RT_NBLOCK; t++) {
            ALLOC(remat_islot(c, l, t), t);
            if ((st = run_forward(m, l, t, nb))) goto out;
        }
        int xs = remat_slot(L, l, RT_X);
        FREE(xs, l == 0 ? RT_EMB : RT_RES3);
        for (int t = 0; t < RT_RES3; t++) FREE(remat_islot(c, l, t), t);
    }
    int heads[3] = { RT_LNF_STAT, RT_LNF, RT_LOGITS };
    for (int k = 0; k < 3; k++) {
        ALLOC(remat_islot(c, -1, heads[k]), heads[k]);
        if ((st = run_forward(m, -1, heads[k], nb))) goto out;
    }
out:
    m->full_head = 0;
#undef ALLOC
#undef FREE
    return st;
}

static void free_acts_sized(remat_model *m, int nb)
{
    remat_config cc = m->cfg;
    cc.batch = nb;
    cc.lmhead_chunk = 0;
    for (int s = 0; s < m->nslots; s++)
        if (m->buf[s]) {
            int t = remat_slot_tid(m->cfg.n_layer, s);
            remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->buf[s], remat_tensor_bytes(&cc, t));
            m->buf[s] = NULL;
        }
}

remat_status remat_model_eval(remat_model *m, const int *inputs, const int *targets, float *loss, float *logits)
{
    if (!m || !inputs) return remat_fail(REMAT_ERR_INVALID, "remat_model_eval: NULL argument");
    const remat_config *c = &m->cfg;
    size_t N = (size_t)c->batch * c->seq;
    remat_status st;
    if ((st = check_tokens(m, inputs, N, "inputs"))) return model_fail(m, st);
    if (targets && (st = check_tokens(m, targets, N, "targets"))) return model_fail(m, st);
    memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));
    m->training = 0;
    m->have_targets = targets != NULL;
    m->loss_sum = 0;
    st = forward_only(m, c->batch);
    if (!st) {
        if (loss) *loss = (float)(m->loss_sum / (double)N);
        if (logits) memcpy(logits, m->buf[remat_islot(c, -1, RT_LOGITS)],
                           (size_t)N * remat_config_padded_vocab(c) * sizeof(float));
    }
    free_acts_sized(m, c->batch);
    return st ? model_fail(m, st) : REMAT_OK;
}

remat_status remat_model_sample(remat_model *m, const int *prompt, int n_prompt, int n_new, float temperature,
                                uint64_t seed, int *out)
{
    const remat_config *c = &m->cfg;
    int T = c->seq, V = c->vocab, Vp = remat_config_padded_vocab(c);
    if (!m || !prompt || !out || n_prompt < 1 || n_new < 0 || n_prompt + n_new > T || !(temperature > 0))
        return model_fail(m, remat_fail(REMAT_ERR_INVALID, "sample: need 1 <= prompt, prompt + new <= seq (%d), "
                                        "temperature > 0", T));
    remat_status st;
    if ((st = check_tokens(m, prompt, (size_t)n_prompt, "prompt"))) return model_fail(m, st);
    int *seqbuf = m->inputs;   /* row 0 only */
    for (int i = 0; i < T; i++) seqbuf[i] = i < n_prompt ? prompt[i] : 0;
    m->training = 0;
    m->have_targets = 0;
    int len = n_prompt;
    uint64_t key = remat_rng_key(seed, 0, 0xfffffffeu, 0);
    for (int k = 0; k < n_new; k++) {
        if ((st = forward_only(m, 1))) { free_acts_sized(m, 1); return model_fail(m, st); }
        const float *row = m->buf[remat_islot(c, -1, RT_LOGITS)] + (size_t)(len - 1) * Vp;
        float mx = row[0];
        for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        double sum = 0;
        for (int v = 0; v < V; v++) sum += exp((row[v] - mx) / temperature);
        double u = remat_rng_uniform(key, (uint64_t)k) * sum, acc = 0;
        int pick = V - 1;
        for (int v = 0; v < V; v++) {
            acc += exp((row[v] - mx) / temperature);
            if (acc > u) { pick = v; break; }
        }
        free_acts_sized(m, 1);
        seqbuf[len++] = pick;
        out[k] = pick;
    }
    return REMAT_OK;
}
