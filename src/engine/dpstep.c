/*
 * dpstep.c -- data parallelism and gradient accumulation: a step of M
 * micro-batches over R ranks whose result does not depend on R (remat.h,
 * "data parallelism", says what and why; table/dplayout.h lays out who
 * does what).
 *
 * A step (remat_dp_step):
 *   1. the rank's micro-batches, in postorder of the gradient tree: each
 *      one's gradient computed into a zeroed buffer of the pool
 *      (remat_model_run_rows), sibling subtrees added as soon as both
 *      exist (a += b, elementwise), so at most remat_dp_tree_live(M/R)
 *      buffers are live;
 *   2. the micro-batches' loss sums all-gathered and added in the tree's
 *      bracketing (remat_dp_tree_sum) by every rank;
 *   3. the gradient reduce-scattered by recursive halving: at step s rank r
 *      and r ^ 2^s, who hold the sums of sibling subtrees over the same
 *      region, swap halves, and each adds the partner's half into its own
 *      (the tree's next level: addition is commutative, so who adds is
 *      irrelevant);
 *   4. ZeRO-1: the norm's block partials of the rank's slice all-gathered,
 *      summed in sumsq's order (sumsq_from_blocks), AdamW on the slice,
 *      the parameters all-gathered; otherwise the gradient all-gathered and
 *      every rank updates everything.  Both are the same arithmetic.
 * The all-gathers run the halving backwards (partner r ^ 2^(logR-1)
 * first); they only copy.
 *
 * Errors.  A rank-local failure (out of memory, a --verify-recompute
 * mismatch) returns at once and leaves the others waiting in an exchange:
 * the caller must end the job (remat_comm_abort).  Failures every rank sees
 * alike -- a non-finite loss or gradient norm, which are global values --
 * are returned by every rank, collectively, and the job may go on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../core/core.h"
#include "../comm/comm.h"
#include "../kernels/kernels.h"
#include "model.h"

/* a slice's gradient-norm partials are whole sumsq blocks (step 4 indexes
 * the block partials by own_lo / REMAT_DP_ALIGN) */
_Static_assert(REMAT_DP_ALIGN == SUMSQ_BLOCK_ELEMS, "slices must align to the gradient norm's blocks");


/* a += b, elementwise: the same bits at any thread count */
static void add_into(float *a, const float *b, size_t n)
{
    #pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t i = 0; i < n; i++) a[i] += b[i];
}

/* ---- the all-gathers: the halving backwards, copies only ------------------------ */

/* Byte offset of unit k (a slice of the parameters, its norm blocks, or a
 * rank's loss sums in slice order) in the gathered array. */
typedef size_t (*unit_off)(const remat_dp_layout *l, int k);
static size_t off_params(const remat_dp_layout *l, int k) { return 4 * remat_dp_slice_lo(l, k); }
static size_t off_blocks(const remat_dp_layout *l, int k)
{
    return 8 * ((remat_dp_slice_lo(l, k) + REMAT_DP_ALIGN - 1) / REMAT_DP_ALIGN);
}
static size_t off_losses(const remat_dp_layout *l, int k) { return 8 * (size_t)k * (size_t)l->Ml; }

/* Every rank holds unit l->own of base; afterwards every rank holds all. */
static remat_status gather(remat_model *m, void *base, unit_off off)
{
    remat_dp *d = &m->dp;
    const remat_dp_layout *l = &d->l;
    char *b = base;
    for (int s = l->logR - 1; s >= 0; s--) {
        int a0, a1, c0, c1, partner = l->rank ^ (1 << s);
        remat_dp_region(l->R, l->rank, s + 1, &a0, &a1);
        remat_dp_region(l->R, partner, s + 1, &c0, &c1);
        remat_status st = remat_comm_sendrecv(d->comm, partner, b + off(l, a0), off(l, a1) - off(l, a0),
                                              b + off(l, c0), off(l, c1) - off(l, c0));
        if (st) return st;
    }
    return REMAT_OK;
}

/* ---- the reduce-scatter: recursive halving, the tree's cross-rank levels ---------- */

static remat_status reduce_scatter(remat_model *m, float *g)
{
    remat_dp *d = &m->dp;
    const remat_dp_layout *l = &d->l;
    for (int s = 0; s < l->logR; s++) {
        int lo, hi, partner = l->rank ^ (1 << s);
        remat_dp_region(l->R, l->rank, s, &lo, &hi);
        int mid = lo + (hi - lo) / 2, up = (l->rank >> s) & 1;
        size_t k0 = remat_dp_slice_lo(l, up ? mid : lo), k1 = remat_dp_slice_lo(l, up ? hi : mid);
        size_t s0 = remat_dp_slice_lo(l, up ? lo : mid), s1 = remat_dp_slice_lo(l, up ? mid : hi);
        size_t keep = k1 - k0, send = s1 - s0, big = keep > send ? keep : send;
        size_t pieces = big ? (big + REMAT_DP_PIECE - 1) / REMAT_DP_PIECE : 1;
        for (size_t i = 0; i < pieces; i++) {
            size_t at = i * REMAT_DP_PIECE;
            size_t sn = send > at ? send - at : 0, kn = keep > at ? keep - at : 0;
            if (sn > REMAT_DP_PIECE) sn = REMAT_DP_PIECE;
            if (kn > REMAT_DP_PIECE) kn = REMAT_DP_PIECE;
            remat_status st = remat_comm_sendrecv(d->comm, partner, g + s0 + (sn ? at : 0), 4 * sn, d->recv, 4 * kn);
            if (st) return st;
            double t0 = remat_clock_ms(0);
            add_into(g + k0 + at, d->recv, kn);
            d->reduce_ms += remat_clock_ms(0) - t0;
        }
    }
    return REMAT_OK;
}

/* ---- the local tree ------------------------------------------------------------------- */

/* Sums the gradients of global micro-batches [lo, lo + n) into a pool
 * buffer, *out its index; losses[i - first] gets micro-batch i's loss sum. */
static remat_status tree(remat_model *m, int lo, int n, int *out, double *losses, int first)
{
    remat_dp *d = &m->dp;
    remat_status st;
    if (n == 1) {
        int k = d->free_idx[--d->nfree];   /* there is one: the pool has remat_dp_tree_live buffers */
        *out = k;   /* the run writes all of it (no zeroing: ops.h's remat_op_grads_begin) */
        return remat_model_run_rows(m, 1, (uint64_t)lo * (uint64_t)d->l.b, d->pool[k], &losses[lo - first]);
    }
    int h = remat_dp_split(n), a, b;
    if ((st = tree(m, lo, h, &a, losses, first))) return st;
    if ((st = tree(m, lo + h, n - h, &b, losses, first))) return st;
    double t0 = remat_clock_ms(0);
    add_into(d->pool[a], d->pool[b], m->nparams);
    d->reduce_ms += remat_clock_ms(0) - t0;
    d->free_idx[d->nfree++] = b;
    *out = a;
    return REMAT_OK;
}

/* The same model on every rank: compared once, before the first exchange
 * that would otherwise mix different models' gradients. */
static remat_status check_ranks(remat_model *m)
{
    remat_dp *d = &m->dp;
    uint64_t h = remat_hash_bytes(m->params, m->nparams * sizeof(float));
    uint64_t c[8] = { h, m->t, m->seed, (uint64_t)m->cfg.batch, (uint64_t)d->l.b, (uint64_t)d->l.zero,
                      remat_hash_bytes(&m->cfg, sizeof m->cfg), remat_hash_bytes(&m->opt, sizeof m->opt) };
    int same;
    remat_status st = remat_comm_same(d->comm, remat_hash_bytes(c, sizeof c), &same);
    if (st) return st;
    if (!same)
        return remat_fail(REMAT_ERR_INVALID, "the %d ranks do not hold the same model (config, micro-batch, step, "
                          "optimizer or parameters differ): every rank must run the same command", d->l.R);
    d->checked = 1;
    return REMAT_OK;
}

/* All-gathers the M loss sums (rank r's at its slice's unit) and adds
 * them in the tree's bracketing, in global micro-batch order. */
static remat_status total_loss(remat_model *m, double *total)
{
    remat_dp *d = &m->dp;
    const remat_dp_layout *l = &d->l;
    remat_status st = gather(m, d->losses, off_losses);
    if (st) return st;
    double *all = d->losses + l->M;
    for (int i = 0; i < l->M; i++) {
        int rank = i / l->Ml;
        all[i] = d->losses[(size_t)remat_dp_bitrev(rank, l->logR) * (size_t)l->Ml + (size_t)(i % l->Ml)];
    }
    *total = remat_dp_tree_sum(all, l->M);
    return REMAT_OK;
}

remat_status remat_dp_step(remat_model *m, int do_update, float *loss)
{
    remat_dp *d = &m->dp;
    const remat_dp_layout *l = &d->l;
    remat_status st;
    remat_op_ctx c;
    d->reduce_ms = 0;
    if (d->comm && l->R > 1 && !d->checked && (st = check_ranks(m))) return st;
    if (d->comm) remat_comm_counters_reset(d->comm);
    m->meas_peak = m->meas_total_peak = 0;
    m->step_flops = m->step_recompute_flops = 0;
    remat_mem_reset_peak(&m->mem, REMAT_MEM_ACTS);

    /* 1. this rank's micro-batches, summed in the tree (pool[0] taken first) */
    d->nfree = 0;
    for (int k = d->npool - 1; k >= 0; k--) d->free_idx[d->nfree++] = k;
    int first = l->rank * l->Ml, root;
    double *mine = d->losses + (size_t)l->own * (size_t)l->Ml;
    if ((st = tree(m, first, l->Ml, &root, mine, first))) return st;
    float *g = d->pool[root];
    d->pool[root] = d->pool[0];   /* the root becomes the model's gradient */
    d->pool[0] = g;
    m->grads = g;
    if (m->poison == 1) mine[0] = NAN;
    else if (m->poison > 1) g[m->ly.off[m->poison - 2]] = NAN;
    m->poison = 0;

    /* 2. the loss */
    double sum;
    if ((st = total_loss(m, &sum))) return st;
    uint64_t step = m->t + 1;
    if (loss) *loss = (float)(sum / ((double)m->cfg.batch * (double)m->cfg.seq));
    if (!isfinite(sum))
        return remat_fail(REMAT_ERR_NONFINITE, "non-finite loss at step %llu", (unsigned long long)step);

    /* 3. the tree's cross-rank levels */
    if ((st = reduce_scatter(m, g))) return st;

    /* 4. norm and update */
    remat_op_ctx_init(&c, &m->cfg, m->params, g);
    c.params16 = m->params16;
    double norm2;
    int sliced = do_update && l->zero;
    if (sliced) {
        remat_sumsq_blocks(g + l->own_lo, l->own_hi - l->own_lo, d->parts + l->own_lo / REMAT_DP_ALIGN);
        if ((st = gather(m, d->parts, off_blocks))) return st;
    } else {
        if ((st = gather(m, g, off_params))) return st;
        remat_sumsq_blocks(g, m->nparams, d->parts);
    }
    norm2 = remat_sumsq_from_blocks(d->parts, l->nblocks);
    double norm = sqrt(norm2);
    m->grad_norm = (float)norm;
    if (!do_update) goto done;
    if (!isfinite(norm)) {
        /* the first tensor with a non-finite gradient in any rank's slice */
        size_t lo = sliced ? l->own_lo : 0, hi = sliced ? l->own_hi : m->nparams;
        uint64_t first_bad = (uint64_t)remat_op_first_nonfinite(&c, lo, hi);
        if (d->comm && (st = remat_comm_allreduce_u64(d->comm, &first_bad, 1, REMAT_COMM_MIN))) return st;
        if (first_bad < (uint64_t)m->ly.count)
            return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient in %s at step %llu",
                              remat_params_of(&m->cfg)->defs[first_bad].name, (unsigned long long)step);
        return remat_fail(REMAT_ERR_NONFINITE, "non-finite gradient norm at step %llu", (unsigned long long)step);
    }
    float scale = remat_op_clip_scale(&m->opt, norm);
    remat_op_adamw_range(&c, m->adam_m, m->adam_v, &m->opt, step, m->optim_lo, m->optim_lo + m->optim_n, scale);
    /* AdamW wrote the bf16 copy of what it updated; the gathered slices'
     * are made here */
    if (sliced) {
        if ((st = gather(m, m->params, off_params))) return st;
        remat_op_refresh16_range(&c, 0, l->own_lo);
        remat_op_refresh16_range(&c, l->own_hi, m->nparams);
    }
    m->t = step;
done:
    if (d->comm) {
        d->comm_bytes = d->comm->sent_bytes;
        d->comm_ms = (double)d->comm->ns / 1e6;
    }
    return REMAT_OK;
}

remat_status remat_dp_eval(remat_model *m, int have_targets, float *loss)
{
    remat_dp *d = &m->dp;
    const remat_dp_layout *l = &d->l;
    remat_status st;
    double *mine = d->losses + (size_t)l->own * (size_t)l->Ml;
    for (int i = 0; i < l->Ml; i++)
        if ((st = remat_model_run_rows(m, 0, (uint64_t)(l->rank * l->Ml + i) * (uint64_t)l->b, NULL, &mine[i])))
            return st;
    if (!have_targets) {
        if (loss) *loss = 0.0f;
        return REMAT_OK;
    }
    double sum;
    if ((st = total_loss(m, &sum))) return st;
    if (loss) *loss = (float)(sum / ((double)m->cfg.batch * (double)m->cfg.seq));
    return REMAT_OK;
}

/* ---- setting it up ------------------------------------------------------------------- */

/* Moves the AdamW state to elements [lo, lo + n) (within the elements it
 * holds).  A model that has not stepped has zero moments: its buffers are
 * freed first, so the whole state and the slice never exist at once (a
 * resume loads into a model already set up: remat_checkpoint_load_parallel). */
static remat_status move_optim(remat_model *m, size_t lo, size_t n)
{
    size_t old = m->optim_n * sizeof(float), bytes = n * sizeof(float);
    if (lo == m->optim_lo && n == m->optim_n) return REMAT_OK;
    int fresh = m->t == 0;
    if (fresh) {
        remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_m, old);
        remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_v, old);
        m->adam_m = m->adam_v = NULL;
    }
    float *a = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, bytes), *b = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, bytes);
    if (!a || !b) {
        remat_mem_free(&m->mem, REMAT_MEM_OPTIM, a, bytes);
        remat_mem_free(&m->mem, REMAT_MEM_OPTIM, b, bytes);
        if (fresh) {   /* put the zero state back, so that the model stays usable */
            m->adam_m = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, old);
            m->adam_v = remat_mem_calloc(&m->mem, REMAT_MEM_OPTIM, old);
            if (!m->adam_m || !m->adam_v) {
                remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_m, old);
                remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_v, old);
                m->adam_m = m->adam_v = NULL;
                m->optim_n = 0;   /* remat_model_step refuses to run without it */
            }
        }
        return remat_fail(REMAT_ERR_NOMEM, "out of memory allocating the AdamW state of this rank's slice (%.1f MiB)",
                          2 * bytes / 1048576.0);
    }
    if (!fresh) {
        memcpy(a, m->adam_m + (lo - m->optim_lo), bytes);
        memcpy(b, m->adam_v + (lo - m->optim_lo), bytes);
    }
    remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_m, old);
    remat_mem_free(&m->mem, REMAT_MEM_OPTIM, m->adam_v, old);
    m->adam_m = a;
    m->adam_v = b;
    m->optim_lo = lo;
    m->optim_n = n;
    return REMAT_OK;
}

static remat_status set_parallel(remat_model *m, remat_comm *comm, int micro_batch, int zero);

remat_status remat_model_set_parallel(remat_model *m, remat_comm *comm, int micro_batch, int zero)
{
    if (!m) return remat_fail(REMAT_ERR_INVALID, "remat_model_set_parallel: model is NULL");
    remat_status st = set_parallel(m, comm, micro_batch, zero);
    if (st) snprintf(m->err, sizeof m->err, "%s", remat_errmsg());
    return st;
}

static remat_status set_parallel(remat_model *m, remat_comm *comm, int micro_batch, int zero)
{
    remat_status st;
    remat_dp_layout l;
    if (m->dp.l.active) return remat_fail(REMAT_ERR_STATE, "remat_model_set_parallel: the model is already set up");
    int R = comm ? comm->size : 1, rank = comm ? comm->rank : 0;
    if (micro_batch == 0) micro_batch = m->cfg.batch / R > 0 ? m->cfg.batch / R : 1;
    if (zero < 0) zero = R > 1;
    if ((st = remat_dp_layout_make(&m->cfg, R, rank, micro_batch, zero, &l))) return st;
    /* the micro-batch's schedule first: the one step that can fail on the policy */
    remat_config mc = m->cfg;
    mc.batch = micro_batch;
    remat_schedule *s = NULL;
    const char *pol = m->sched ? remat_schedule_policy(m->sched) : NULL;
    if ((st = remat_schedule_create(&mc, pol, &s))) return st;
    remat_dp *d = &m->dp;
    if (l.active) {
        size_t bytes = m->nparams * sizeof(float);
        int npool = 1 + l.tree_bufs;
        d->pool = remat_calloc((size_t)npool, sizeof *d->pool);
        d->free_idx = remat_calloc((size_t)npool, sizeof *d->free_idx);
        if (!d->pool || !d->free_idx) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto fail; }
        d->pool[0] = m->grads;
        for (d->npool = 1; d->npool < npool; d->npool++)   /* remat_dp_free frees pool[1 .. npool) */
            if (!(d->pool[d->npool] = remat_mem_alloc(&m->mem, REMAT_MEM_REDUCE, bytes))) {
                st = remat_fail(REMAT_ERR_NOMEM, "out of memory allocating the %d partial-sum gradient buffers of "
                                "%d micro-batches per rank (%.1f MiB each)", l.tree_bufs, l.Ml, bytes / 1048576.0);
                goto fail;
            }
        d->l = l;   /* remat_dp_free sizes what it frees by it */
        if (l.recv_n) d->recv = remat_mem_alloc(&m->mem, REMAT_MEM_REDUCE, l.recv_n * sizeof(float));
        d->parts = remat_mem_alloc(&m->mem, REMAT_MEM_REDUCE, l.nblocks * sizeof(double));
        d->losses = remat_mem_calloc(&m->mem, REMAT_MEM_REDUCE, 2 * (size_t)l.M * sizeof(double));
        if ((l.recv_n && !d->recv) || !d->parts || !d->losses) {
            st = remat_fail(REMAT_ERR_NOMEM, "out of memory allocating the reduction's buffers");
            goto fail;
        }
    }
    if ((st = move_optim(m, l.zero ? l.own_lo : 0, l.zero ? l.own_hi - l.own_lo : m->nparams))) goto fail;
    d->comm = comm;
    d->l = l;
    m->mcfg = mc;
    remat_schedule_free(m->sched);
    m->sched = s;
    for (int i = 0; i < FWD_COUNT; i++) {
        remat_schedule_free(m->fwd[i]);
        m->fwd[i] = NULL;
    }
    return REMAT_OK;
fail:
    d->l = l;
    remat_dp_free(m);
    remat_schedule_free(s);
    return st;
}
