/*
 * model.c -- the GPT-2 model and the schedule interpreter.
 *
 * A model owns its parameters, gradients and AdamW state (allocated once)
 * and an installed schedule.  A step runs the schedule here (remat_model_run_step,
 * called by engine/step.c's remat_model_step, or per micro-batch by
 * dpstep.c through remat_model_run_rows): it is a
 * walk of the one walker (schedule/walk.c) whose hooks allocate each buffer
 * through the accounting allocator when the walker says a tensor comes to
 * life, release it when it dies, and run each instruction's op through the
 * op dispatcher (ops/ops.c) on exactly the buffers the tensor table
 * declares.  Evaluation and sampling run forward-only schedules the same
 * way.  The allocator's measured peak is compared, in the tests, with the
 * simulator's prediction for the same schedule: two independent counts.
 *
 * Parameter layout follows llm.c (train_gpt2.c), so its checkpoints map 1:1
 * (table/params.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "../core/rng.h"
#include "../kernels/kernels.h"
#include "../schedule/schedule.h"
#include "model.h"
#include "trace.h"
#include "remat_testing.h"   /* remat_model_debug_poison and _shrink are defined here */

void remat_optim_default(remat_optim *o)
{
    o->lr = 3e-4f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->weight_decay = 0.1f;
    o->grad_clip = 1.0f;
}

remat_status remat_model_fail(remat_model *m, remat_status st)
{
    if (m) snprintf(m->err, sizeof m->err, "%s", remat_errmsg());
    return st;
}

const char *remat_model_error(const remat_model *m) { return m ? m->err : remat_errmsg(); }
const remat_config *remat_model_config(const remat_model *m) { return m ? &m->cfg : NULL; }

/* The architecture's initialisation (params.c says which tensor gets
 * which): N(0, 0.02), GPT-2's residual projections scaled by 1/sqrt(2L),
 * zero biases, unit norm weights.  Each tensor draws from its own stream
 * of the counter RNG, keyed by its index. */
static void init_params(remat_model *m, uint64_t seed)
{
    const remat_config *c = &m->cfg;
    const remat_param_table *pt = remat_params_of(c);
    float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)c->n_layer);
    for (int i = 0; i < m->ly.count; i++) {
        float *p = m->params + m->ly.off[i];
        size_t n = m->ly.numel[i];
        uint64_t key = remat_rng_key(seed, 0xffffffffULL, (uint32_t)i, 0);
        switch (pt->defs[i].init) {
        case REMAT_INIT_ONES: for (size_t k = 0; k < n; k++) p[k] = 1.0f; break;
        case REMAT_INIT_ZEROS: memset(p, 0, n * sizeof *p); break;
        default: {
            float s = pt->defs[i].init == REMAT_INIT_NORMAL_PROJ ? proj_std : std;
            for (size_t k = 0; k < n; k++) p[k] = s * remat_rng_normal(key, k);
        }
        }
        /* padded vocabulary rows are zero and stay unused */
        if (pt->defs[i].vocab_rows)
            memset(p + (size_t)c->vocab * c->n_embd, 0,
                   (size_t)(remat_config_padded_vocab(c) - c->vocab) * c->n_embd * sizeof(float));
    }
}

remat_status remat_model_check(const remat_config *cfg)
{
    remat_status st;
    if ((st = remat_config_check(cfg))) return st;
    if (cfg->framework != REMAT_FRAMEWORK_REMAT || remat_config_tp(cfg) != 1 || cfg->stage != REMAT_STAGE_WHOLE)
        return remat_fail(REMAT_ERR_INVALID, "the engine runs remat's own table on one machine; --framework "
                          "megatron/pytorch, --tp and pipeline stages are for 'remat plan'");
    if (cfg->dtype == REMAT_DTYPE_BF16 && remat_gemm_get() != REMAT_GEMM_ONEDNN)
        return remat_fail(REMAT_ERR_INVALID, "bf16 needs the oneDNN GEMM engine (this one is %s; Debian's OpenBLAS "
                          "has no bf16 GEMM)", remat_gemm_name(remat_gemm_get()));
    return REMAT_OK;
}

remat_status remat_model_create(const remat_config *cfg, uint64_t seed, remat_model **out)
{
    remat_status st;
    remat_model *m = NULL;
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_model_create: out is NULL");
    *out = NULL;
    if ((st = remat_model_check(cfg))) return st;
    m = remat_calloc(1, sizeof *m);
    if (!m) return remat_fail(REMAT_ERR_NOMEM, "out of memory creating the model");
    m->cfg = *cfg;
    m->mcfg = *cfg;
    m->seed = seed;
    m->shrink_t = -1;
    remat_optim_default(&m->opt);
    size_t total = remat_param_layout_of(cfg, &m->ly);
    m->nparams = total;
    m->optim_n = total;
    size_t bytes = total * sizeof(float);
    m->nslots = remat_table_nslots(remat_table_of(cfg), cfg->n_layer);
    size_t N = (size_t)cfg->batch * cfg->seq;
    m->params = remat_mem_alloc(&m->mem, REMAT_MEM_PARAMS, bytes);
    m->grads = remat_mem_calloc(&m->mem, REMAT_MEM_GRADS, bytes);
    m->adam_m = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, bytes);
    m->adam_v = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, bytes);
    m->inputs = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE, N * sizeof(int));
    m->targets = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE, N * sizeof(int));
    m->losses = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE, N * sizeof(float));
    if (cfg->dtype == REMAT_DTYPE_BF16)
        m->params16 = remat_mem_alloc(&m->mem, REMAT_MEM_WEIGHTS16, total * sizeof(remat_bf16));
    if ((m->rope_n = remat_op_rope_floats(cfg)) && (m->rope = remat_mem_alloc(&m->mem, REMAT_MEM_WORKSPACE,
                                                                               m->rope_n * sizeof(float))))
        remat_op_rope_fill(cfg, m->rope);
    m->buf = remat_calloc((size_t)m->nslots, sizeof *m->buf);
    m->bufbytes = remat_calloc((size_t)m->nslots, sizeof *m->bufbytes);
    m->hash = remat_calloc((size_t)m->nslots, sizeof *m->hash);
    m->fresh = remat_calloc(remat_op_fresh_bytes(cfg), 1);
    if (!m->params || !m->grads || !m->adam_m || !m->adam_v || !m->inputs || !m->targets || !m->losses ||
        !m->buf || !m->bufbytes || !m->hash || !m->fresh || (cfg->dtype == REMAT_DTYPE_BF16 && !m->params16) ||
        (m->rope_n && !m->rope)) {
        st = remat_fail(REMAT_ERR_NOMEM, "out of memory allocating %zu parameters (%.1f MiB each for params, "
                        "grads, and two AdamW moments)", total, bytes / 1048576.0);
        goto out;
    }
    init_params(m, seed);
    m->params16_stale = 1;
    if ((st = remat_model_set_policy(m, NULL))) goto out;
    *out = m;
    m = NULL;
out:
    remat_model_free(m);
    return st;
}

/* releases every live activation buffer (after a failed or finished run) */
static void free_acts(remat_model *m)
{
    for (int s = 0; s < m->nslots; s++)
        if (m->buf[s]) {
            remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->buf[s], m->bufbytes[s]);
            m->buf[s] = NULL;
        }
    if (m->temp) remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->temp, m->temp_bytes);
    m->temp = NULL;
}

/* the reduction's buffers of m->dp (engine/dpstep.c sets them up; they
 * are the model's, freed with it) */
void remat_dp_free(remat_model *m)
{
    remat_dp *d = &m->dp;
    size_t bytes = m->nparams * sizeof(float);
    for (int k = 1; k < d->npool; k++) remat_mem_free(&m->mem, REMAT_MEM_REDUCE, d->pool[k], bytes);
    remat_mem_free(&m->mem, REMAT_MEM_REDUCE, d->recv, d->l.recv_n * sizeof(float));
    remat_mem_free(&m->mem, REMAT_MEM_REDUCE, d->parts, d->l.nblocks * sizeof(double));
    remat_mem_free(&m->mem, REMAT_MEM_REDUCE, d->losses, 2 * (size_t)d->l.M * sizeof(double));
    free(d->pool);
    free(d->free_idx);
    memset(d, 0, sizeof *d);
}

void remat_model_free(remat_model *m)
{
    if (!m) return;
    size_t bytes = m->nparams * sizeof(float), N = (size_t)m->cfg.batch * m->cfg.seq;
    if (m->buf) free_acts(m);
    remat_mem_free(&m->mem, REMAT_MEM_PARAMS, m->params, bytes);
    remat_mem_free(&m->mem, REMAT_MEM_GRADS, m->grads, bytes);
    remat_dp_free(m);
    remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_m, m->optim_n * sizeof(float));
    remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_v, m->optim_n * sizeof(float));
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->inputs, N * sizeof(int));
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->targets, N * sizeof(int));
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->losses, N * sizeof(float));
    remat_mem_free(&m->mem, REMAT_MEM_WEIGHTS16, m->params16, m->nparams * sizeof(remat_bf16));
    remat_mem_free(&m->mem, REMAT_MEM_WORKSPACE, m->rope, m->rope_n * sizeof(float));
    remat_mem_release(&m->mem);
    free(m->buf);
    free(m->bufbytes);
    free(m->hash);
    free(m->fresh);
    remat_schedule_free(m->sched);
    for (int i = 0; i < FWD_COUNT; i++) remat_schedule_free(m->fwd[i]);
    free(m);
}

remat_status remat_model_set_optim(remat_model *m, const remat_optim *o)
{
    if (!m || !o) return remat_fail(REMAT_ERR_INVALID, "NULL argument");
    if (!(o->lr >= 0 && o->lr < 10) || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) ||
        !(o->eps > 0) || !(o->weight_decay >= 0 && o->weight_decay < 1) || !(o->grad_clip == o->grad_clip))
        return remat_model_fail(m, remat_fail(REMAT_ERR_INVALID, "optimizer settings out of range (lr in [0,10), "
                                        "betas in [0,1), eps > 0, weight decay in [0,1))"));
    m->opt = *o;
    return REMAT_OK;
}

remat_status remat_model_set_policy(remat_model *m, const char *policy)
{
    remat_schedule *s = NULL;
    if (!m) return remat_fail(REMAT_ERR_INVALID, "model is NULL");
    remat_status st = remat_schedule_create(&m->mcfg, policy, &s);
    if (st) return remat_model_fail(m, st);
    if (s->noffload) {   /* the activations already live in host memory: there is nowhere to offload to */
        remat_schedule_free(s);
        return remat_model_fail(m, remat_fail(REMAT_ERR_INVALID, "remat's CPU engine has no host link to offload over; "
                                        "offload: plans are for planning GPU runs (remat plan --framework)"));
    }
    remat_schedule_free(m->sched);
    m->sched = s;
    return REMAT_OK;
}

const remat_schedule *remat_model_schedule(const remat_model *m) { return m ? m->sched : NULL; }
void remat_model_set_verify(remat_model *m, int on) { if (m) m->verify = on; }

size_t remat_model_num_params(const remat_model *m) { return m ? m->nparams : 0; }
float *remat_model_params(remat_model *m)
{
    if (!m) return NULL;
    m->params16_stale = 1;   /* the caller may write them */
    return m->params;
}
const float *remat_model_grads(const remat_model *m) { return m ? m->grads : NULL; }
remat_status remat_model_debug_poison(remat_model *m, int param_tensor)
{
    if (!m || ((param_tensor < 0 || param_tensor >= m->ly.count) && param_tensor != REMAT_POISON_LOSS))
        return remat_fail(REMAT_ERR_INVALID, "debug poison: parameter tensor %d is not in [0, %d) nor the loss (%d)",
                          param_tensor, m ? m->ly.count : 0, REMAT_POISON_LOSS);
    m->poison = param_tensor == REMAT_POISON_LOSS ? 1 : param_tensor + 2;
    return REMAT_OK;
}

remat_status remat_model_debug_shrink(remat_model *m, const char *name, uint64_t bytes)
{
    if (!m) return remat_fail(REMAT_ERR_INVALID, "debug shrink: model is NULL");
    m->shrink_t = -1;
    m->shrink_by = 0;
    if (!name) return REMAT_OK;
    int t = remat_table_find(remat_table_of(&m->mcfg), name);
    if (t < 0) return remat_fail(REMAT_ERR_INVALID, "no tensor '%.64s' in this table", name);
    if (bytes > remat_tensor_bytes(&m->mcfg, t))
        return remat_fail(REMAT_ERR_INVALID, "%s has fewer than %llu bytes", name, (unsigned long long)bytes);
    m->shrink_t = t;
    m->shrink_by = bytes;
    return REMAT_OK;
}

uint64_t remat_model_params_hash(const remat_model *m)
{
    return remat_hash_bytes(m->params, m->nparams * sizeof(float));
}

void remat_model_stats(const remat_model *m, remat_stats *o)
{
    memset(o, 0, sizeof *o);
    if (!m) return;
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
    o->fwd_act_peak_bytes = m->meas_fwd_peak;
    o->weights16_bytes = m->mem.live[REMAT_MEM_WEIGHTS16];
    o->act_cached_bytes = remat_mem_cached(&m->mem);
    o->ranks = m->dp.l.R ? m->dp.l.R : 1;
    o->micro_batch = m->mcfg.batch;
    o->grad_accum = m->dp.l.Ml ? m->dp.l.Ml : 1;
    o->zero = m->dp.l.zero;
    o->reduce_bytes = m->mem.live[REMAT_MEM_REDUCE];
    o->comm_bytes = m->dp.comm_bytes;
    o->comm_ms = m->dp.comm_ms;
    o->reduce_ms = m->dp.reduce_ms;
}

/* ---- the interpreter ------------------------------------------------------ */

/* One run of a schedule: the walker's hooks and what they need. */
typedef struct run {
    remat_model *m;
    const remat_schedule *s;
    remat_op_ctx ctx;
    uint64_t act0;              /* activation bytes live before the run */
    int do_update;
    int micro_batch;            /* a micro-batch of a longer step: the update instruction
                                   only ends the run (engine/dpstep.c updates) */
    uint64_t row0;              /* the step's batch row of the run's row 0 */
    float *grads;               /* where the run writes its parameter gradients (NULL: m->grads) */
    float *loss;
    double flops, rflops;
    /* forward-only runs read the logits at their free */
    float *logits_out;          /* (B*T*Vp) copy, or NULL */
    int sample_row;             /* >= 0: draw a token from this row */
    float temperature;
    uint64_t sample_key, sample_idx;
    int picked;
} run;

static remat_status hk_begin(void *arg, size_t i, const remat_instr *in)
{
    run *r = arg;
    (void)in;
    if (i == r->s->fwd_end && !r->s->forward_only) r->m->meas_stored = r->m->mem.live[REMAT_MEM_ACTS] - r->act0;
    return REMAT_OK;
}

static remat_status hk_alloc(void *arg, int slot, int t, uint64_t bytes, int zero)
{
    remat_model *m = ((run *)arg)->m;
    if (t == m->shrink_t) bytes -= m->shrink_by;   /* the testing hook: less than the table says */
    m->buf[slot] = zero ? remat_mem_calloc(&m->mem, REMAT_MEM_ACTS, bytes)
                        : remat_mem_alloc(&m->mem, REMAT_MEM_ACTS, bytes);
    if (!m->buf[slot])
        return remat_fail(REMAT_ERR_NOMEM, "out of memory allocating %s (%.1f MiB)", remat_table_of(&m->cfg)->defs[t].name,
                          bytes / 1048576.0);
    m->bufbytes[slot] = bytes;
    return REMAT_OK;
}

static void hk_release(void *arg, int slot, int t, uint64_t bytes)
{
    remat_model *m = ((run *)arg)->m;
    (void)t;
    (void)bytes;   /* what was allocated (remat_model_debug_shrink may have cut it) */
    remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->buf[slot], m->bufbytes[slot]);
    m->buf[slot] = NULL;
}

static remat_status hk_temp_alloc(void *arg, uint64_t bytes)
{
    remat_model *m = ((run *)arg)->m;
    if (!(m->temp = remat_mem_alloc(&m->mem, REMAT_MEM_ACTS, bytes)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory allocating an op's scratch (%.1f MiB)", bytes / 1048576.0);
    m->temp_bytes = bytes;
    return REMAT_OK;
}

static void hk_temp_release(void *arg, uint64_t bytes)
{
    remat_model *m = ((run *)arg)->m;
    remat_mem_free(&m->mem, REMAT_MEM_ACTS, m->temp, bytes);
    m->temp = NULL;
}

static remat_status run_update(run *r)
{
    remat_model *m = r->m;
    size_t N = (size_t)m->cfg.batch * m->cfg.seq;
    if (r->micro_batch) return REMAT_OK;   /* a micro-batch: the data-parallel step updates (and poisons) */
    if (m->poison == 1) r->ctx.loss_sum = NAN;
    else if (m->poison > 1) {
        size_t at = m->ly.off[m->poison - 2];
        m->grads[at] = NAN;
        remat_op_grad_written(&r->ctx, at, at + 1);
    }
    m->poison = 0;
    if (r->loss) *r->loss = (float)(r->ctx.loss_sum / (double)N);
    if (!isfinite(r->ctx.loss_sum))
        return remat_fail(REMAT_ERR_NONFINITE, "non-finite loss at step %llu", (unsigned long long)m->t + 1);
    if (r->do_update) return remat_op_update(&r->ctx, m->adam_m, m->adam_v, &m->opt, m->t + 1, &m->grad_norm);
    m->grad_norm = (float)sqrt(remat_op_grad_sumsq(&r->ctx));
    return REMAT_OK;
}

/* The logits of a forward-only run, at their free: copied out, or a token
 * drawn from one row with the counter RNG. */
static void consume_logits(run *r, const void *logits)
{
    const remat_config *c = r->ctx.cfg;
    int V = c->vocab, Vp = remat_config_padded_vocab(c), bf = c->dtype == REMAT_DTYPE_BF16;
    size_t n = (size_t)c->batch * c->seq * Vp;
    if (r->logits_out) {
        if (bf) remat_bf16_to_f32(r->logits_out, logits, n);
        else memcpy(r->logits_out, logits, n * sizeof(float));
    }
    if (r->sample_row < 0) return;
    size_t row = (size_t)r->sample_row * Vp;
#define LOGIT(v) (bf ? remat_bf16_to_float(((const remat_bf16 *)logits)[row + (v)]) : ((const float *)logits)[row + (v)])
    float mx = LOGIT(0);
    for (int v = 1; v < V; v++) mx = LOGIT(v) > mx ? LOGIT(v) : mx;
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp((LOGIT(v) - mx) / r->temperature);
    double u = remat_rng_uniform(r->sample_key, r->sample_idx) * sum, acc = 0;
    int pick = V - 1;
    for (int v = 0; v < V; v++) {
        acc += exp((LOGIT(v) - mx) / r->temperature);
        if (acc > u) { pick = v; break; }
    }
#undef LOGIT
    r->picked = pick;
}

static remat_status hk_exec(void *arg, size_t i, const remat_instr *in, const remat_operands *o)
{
    run *r = arg;
    remat_model *m = r->m;
    int t = in->tid, l = in->layer;
    remat_op_args a;
    remat_status st;
    switch (in->kind) {
    case REMAT_I_UPDATE:
        return run_update(r);
    case REMAT_I_FREE:
        if (r->s->forward_only && t == r->s->tb->lmhead[r->s->tb->nlmhead - 1]) consume_logits(r, m->buf[o->out]);
        return REMAT_OK;
    case REMAT_I_OFFLOAD: case REMAT_I_RELOAD:    /* remat_model_set_policy refuses such schedules */
        return remat_fail(REMAT_ERR_INVALID, "remat's CPU engine cannot run instruction %zu (%s)", i,
                          remat_instr_kind_name((remat_instr_kind)in->kind));
    case REMAT_I_BACKWARD:
        remat_op_bind(o, in->kind, t, m->buf, m->bufbytes, m->temp, m->temp ? m->temp_bytes : 0, &a);
        remat_op_backward(&r->ctx, t, l, &a);
        return remat_gemm_check();
    default:   /* forward, recompute */
        remat_op_bind(o, in->kind, t, m->buf, m->bufbytes, m->temp, m->temp ? m->temp_bytes : 0, &a);
        remat_op_forward(&r->ctx, t, l, &a);
        if ((st = remat_gemm_check())) return st;
        if (m->verify && !r->s->forward_only) {
            uint64_t h = remat_hash_bytes(m->buf[o->out], m->bufbytes[o->out]);
            if (in->kind == REMAT_I_FORWARD) m->hash[o->out] = h;
            else if (h != m->hash[o->out])
                return remat_fail(REMAT_ERR_VERIFY, "recomputed %s of layer %d at step %llu differs from its "
                                  "first computation (instruction %zu)", r->s->tb->defs[t].name, l,
                                  (unsigned long long)m->t + 1, i);
        }
        return REMAT_OK;
    }
}

static void hk_end(void *arg, size_t i, const remat_instr *in, uint64_t live, uint64_t peak, double flops)
{
    run *r = arg;
    (void)i; (void)live; (void)peak;
    r->flops += flops;
    if (in->kind == REMAT_I_RECOMPUTE) r->rflops += flops;
}

/* Runs schedule s (its config sizes the buffers) on the batch in
 * m->inputs / m->targets; tr: the step's trace, or NULL. */
static remat_status run_schedule(remat_model *m, const remat_schedule *s, run *r, int training, int have_targets,
                                 remat_trace_run *tr)
{
    r->m = m;
    r->s = s;
    remat_op_ctx_init(&r->ctx, &s->cfg, m->params, r->grads ? r->grads : m->grads);
    if (training) {   /* the run's gradients are written, not added to zeros (ops.h) */
        r->ctx.fresh = m->fresh;
        r->ctx.gnorm = !r->micro_batch;
        remat_op_grads_begin(&r->ctx);
    }
    r->ctx.params16 = m->params16;
    r->ctx.rope = m->rope;
    if (m->params16 && m->params16_stale) {
        remat_op_refresh16(&r->ctx);
        m->params16_stale = 0;
    }
    size_t off = (size_t)r->row0 * (size_t)s->cfg.seq;
    r->ctx.inputs = m->inputs + off;
    r->ctx.targets = m->targets + off;
    r->ctx.losses = m->losses + off;
    r->ctx.row0 = r->row0;
    r->ctx.loss_n = (uint64_t)m->cfg.batch * (uint64_t)m->cfg.seq;
    r->ctx.seed = m->seed;
    r->ctx.step = m->t;
    r->ctx.training = training;
    r->ctx.have_targets = have_targets;
    remat_mem_reset_peak(&m->mem, REMAT_MEM_ACTS);
    m->mem.peak_total = m->mem.live_total;
    r->act0 = m->mem.live[REMAT_MEM_ACTS];
    remat_walk_hooks h = { .arg = r, .begin = hk_begin, .alloc = hk_alloc, .release = hk_release,
                           .temp_alloc = hk_temp_alloc, .temp_release = hk_temp_release,
                           .exec = hk_exec, .end = hk_end };
    remat_status st = remat_walk(s, 0, tr ? remat_trace_wrap(tr, &h, &m->mem, r->act0) : &h, NULL);
    if (training) remat_op_grads_end(&r->ctx);
    free_acts(m);
    return st;
}

remat_status remat_model_check_tokens(const remat_model *m, const int *tok, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (tok[i] < 0 || tok[i] >= m->cfg.vocab)
            return remat_fail(REMAT_ERR_INVALID, "%s[%zu] = %d is outside the vocabulary [0, %d)", what, i, tok[i],
                              m->cfg.vocab);
    return REMAT_OK;
}

/* One training pass of the schedule over m->inputs / m->targets, traced
 * when the model has a trace; it writes the run's parameter gradients
 * (over whatever r->grads or m->grads held: no zeroing pass, ops.h's
 * remat_op_grads_begin); its measured peaks and FLOPs are added to the
 * step's, which the caller resets when a step begins. */
static remat_status training_run(remat_model *m, run *r)
{
    remat_trace_run tr;
    remat_status st;
    if (m->trace && (st = remat_trace_step_begin(&tr, m->trace, m->trace_step, m->sched))) return st;
    st = run_schedule(m, m->sched, r, 1, 1, m->trace ? &tr : NULL);
    if (m->trace) remat_trace_step_end(&tr, st == REMAT_OK);
    uint64_t peak = m->mem.peak[REMAT_MEM_ACTS] - r->act0;
    if (peak > m->meas_peak) m->meas_peak = peak;
    if (m->mem.peak_total > m->meas_total_peak) m->meas_total_peak = m->mem.peak_total;
    m->step_flops += r->flops;
    m->step_recompute_flops += r->rflops;
    return st;
}

remat_status remat_model_run_step(remat_model *m, int do_update, float *loss)
{
    run r;
    memset(&r, 0, sizeof r);
    r.do_update = do_update;
    r.loss = loss;
    r.sample_row = -1;
    m->meas_peak = m->meas_total_peak = 0;
    m->step_flops = m->step_recompute_flops = 0;
    remat_status st = training_run(m, &r);
    if (st) return st;
    if (do_update) m->t++;
    return REMAT_OK;
}

/* The forward-only schedule `which` (compiled on first use). */
static remat_status fwd_schedule(remat_model *m, int which, const remat_schedule **out)
{
    if (!m->fwd[which]) {
        remat_config c = m->mcfg;
        if (which != FWD_EVAL) c.lmhead_chunk = 0;   /* whole logits */
        if (which == FWD_SAMPLE) c.batch = 1;
        remat_status st = remat_schedule_create_forward(&c, &m->fwd[which]);
        if (st) return st;
    }
    *out = m->fwd[which];
    return REMAT_OK;
}

static remat_status run_forward_only(remat_model *m, int which, int have_targets, run *r)
{
    const remat_schedule *s;
    remat_status st = fwd_schedule(m, which, &s);
    if (st) return st;
    st = run_schedule(m, s, r, 0, have_targets, NULL);
    m->meas_fwd_peak = m->mem.peak[REMAT_MEM_ACTS] - r->act0;
    return st;
}

remat_status remat_model_run_eval(remat_model *m, float *logits, int have_targets, float *loss)
{
    run r;
    memset(&r, 0, sizeof r);
    r.logits_out = logits;
    r.sample_row = -1;
    int which = logits && m->cfg.lmhead_chunk > 0 ? FWD_LOGITS : FWD_EVAL;
    remat_status st = run_forward_only(m, which, have_targets, &r);
    if (st) return st;
    if (loss) *loss = have_targets ? (float)(r.ctx.loss_sum / (double)((size_t)m->cfg.batch * m->cfg.seq)) : 0.0f;
    return REMAT_OK;
}

remat_status remat_model_sample(remat_model *m, const int *prompt, int n_prompt, int n_new, float temperature,
                                uint64_t seed, int *out)
{
    if (!m) return remat_fail(REMAT_ERR_INVALID, "remat_model_sample: model is NULL");
    int T = m->cfg.seq;
    /* n_prompt + n_new without overflow */
    if (!prompt || !out || n_prompt < 1 || n_new < 0 || n_prompt > T || n_new > T - n_prompt || !(temperature > 0))
        return remat_model_fail(m, remat_fail(REMAT_ERR_INVALID, "sample: need 1 <= prompt, prompt + new <= seq (%d), "
                                        "temperature > 0", T));
    remat_status st;
    if ((st = remat_model_check_tokens(m, prompt, (size_t)n_prompt, "prompt"))) return remat_model_fail(m, st);
    int *seqbuf = m->inputs;   /* row 0 only */
    for (int i = 0; i < T; i++) seqbuf[i] = i < n_prompt ? prompt[i] : 0;
    int len = n_prompt;
    uint64_t key = remat_rng_key(seed, 0, 0xfffffffeu, 0);
    for (int k = 0; k < n_new; k++) {
        run r;
        memset(&r, 0, sizeof r);
        r.sample_row = len - 1;
        r.temperature = temperature;
        r.sample_key = key;
        r.sample_idx = (uint64_t)k;
        if ((st = run_forward_only(m, FWD_SAMPLE, 0, &r))) return remat_model_fail(m, st);
        seqbuf[len++] = r.picked;
        out[k] = r.picked;
    }
    return REMAT_OK;
}

remat_status remat_model_run_rows(remat_model *m, int training, uint64_t row0, float *grads, double *loss_sum)
{
    remat_status st;
    run r;
    memset(&r, 0, sizeof r);
    r.sample_row = -1;
    r.row0 = row0;
    if (!training) {
        st = run_forward_only(m, FWD_EVAL, 1, &r);
        *loss_sum = r.ctx.loss_sum;
        return st;
    }
    r.micro_batch = 1;
    r.grads = grads;
    st = training_run(m, &r);
    *loss_sum = r.ctx.loss_sum;
    return st;
}
