/*
 * profile.c -- `remat profile`: every op of the tensor table timed on this
 * machine, through the op dispatcher training runs (ops/ops.c), on buffers
 * from the accounting allocator.
 *
 * The buffers are those of a one-block model of the config: one block's
 * activations, the embedding, the head and the gradient buffers, bound to
 * each op exactly as the interpreter binds them (remat_operands_of,
 * remat_op_bind).  Each op is timed as the median of a few calls after a
 * warm-up, once on cold caches and once at once again (inputs in cache),
 * the reps of all ops interleaved (with one thread: CPU time, see
 * remat_profile_measure's clock).  The update is the same remat_op_update the step runs,
 * timed on a small parameter vector and scaled by the parameter count (it
 * streams memory linearly).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "planner.h"
#include "../core/core.h"
#include "../core/rng.h"
#include "../ops/ops.h"

#define FLUSH_BYTES ((size_t)64 << 20)   /* written between timed calls: twice a 32 MiB L3 */


/* the last-level cache, from sysfs (32 MiB when it cannot be read) */
static uint64_t llc_bytes(void)
{
    uint64_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            unsigned long long v = strtoull(buf, &end, 10);
            if (*end == 'K') v <<= 10;
            else if (*end == 'M') v <<= 20;
            if (v > best && v < (1ULL << 34)) best = v;
        }
        fclose(f);
    }
    return best ? best : (uint64_t)32 << 20;
}

/* A model of one block (or the small update config): buffers by slot,
 * parameters and gradients, the batch, all through one remat_mem. */
typedef struct bench {
    remat_config c;
    remat_mem mem;
    const remat_table *tb;
    int nslots;
    void **buf;
    uint64_t *bytes;
    float *params, *grads, *am, *av, *losses, *flush;
    void *temp;
    remat_bf16 *params16;
    float *rope;                /* RoPE's table, or NULL */
    size_t rope_n;
    int *inp, *tgt;
    size_t np;
    uint64_t temp_bytes;
    remat_machine mc;           /* the machine the ops run on: their kernels' workspace */
    remat_op_ctx ctx;
} bench;

static void bench_free(bench *b)
{
    for (int s = 0; s < b->nslots && b->buf; s++) remat_mem_free(&b->mem, REMAT_MEM_ACTS, b->buf[s], b->bytes[s]);
    size_t pb = b->np * sizeof(float), N = (size_t)b->c.batch * b->c.seq;
    remat_mem_free(&b->mem, REMAT_MEM_PARAMS, b->params, pb);
    remat_mem_free(&b->mem, REMAT_MEM_GRADS, b->grads, pb);
    remat_mem_free(&b->mem, REMAT_MEM_WORKSPACE, b->rope, b->rope_n * sizeof(float));
    remat_mem_free(&b->mem, REMAT_MEM_OPTIM, b->am, pb);
    remat_mem_free(&b->mem, REMAT_MEM_OPTIM, b->av, pb);
    remat_mem_free(&b->mem, REMAT_MEM_WEIGHTS16, b->params16, b->np * sizeof(remat_bf16));
    remat_mem_free(&b->mem, REMAT_MEM_WORKSPACE, b->inp, N * sizeof(int));
    remat_mem_free(&b->mem, REMAT_MEM_WORKSPACE, b->tgt, N * sizeof(int));
    remat_mem_free(&b->mem, REMAT_MEM_WORKSPACE, b->losses, N * sizeof(float));
    remat_mem_free(&b->mem, REMAT_MEM_ACTS, b->temp, b->temp_bytes);
    remat_mem_free(&b->mem, REMAT_MEM_WORKSPACE, b->flush, FLUSH_BYTES);
    remat_mem_release(&b->mem);
    free(b->buf);
    free(b->bytes);
    memset(b, 0, sizeof *b);
}

/* Allocates the model of config c (acts: its activation and gradient
 * buffers too, filled with small finite values; optim: AdamW moments). */
static remat_status bench_init(bench *b, const remat_config *c, int acts, int optim)
{
    memset(b, 0, sizeof *b);
    b->c = *c;
    b->tb = remat_table_of(c);
    remat_param_layout ly;
    b->np = remat_param_layout_of(c, &ly);
    size_t pb = b->np * sizeof(float), N = (size_t)c->batch * c->seq;
    if (!(b->params = remat_mem_alloc(&b->mem, REMAT_MEM_PARAMS, pb)) ||
        !(b->grads = remat_mem_calloc(&b->mem, REMAT_MEM_GRADS, pb)) ||
        !(b->inp = remat_mem_alloc(&b->mem, REMAT_MEM_WORKSPACE, N * sizeof(int))) ||
        !(b->tgt = remat_mem_alloc(&b->mem, REMAT_MEM_WORKSPACE, N * sizeof(int))) ||
        !(b->losses = remat_mem_alloc(&b->mem, REMAT_MEM_WORKSPACE, N * sizeof(float))))
        goto nomem;
    if (optim && (!(b->am = remat_mem_calloc(&b->mem, REMAT_MEM_OPTIM, pb)) ||
                  !(b->av = remat_mem_calloc(&b->mem, REMAT_MEM_OPTIM, pb))))
        goto nomem;
    if (c->dtype == REMAT_DTYPE_BF16 &&
        !(b->params16 = remat_mem_alloc(&b->mem, REMAT_MEM_WEIGHTS16, b->np * sizeof(remat_bf16))))
        goto nomem;
    if ((b->rope_n = remat_op_rope_floats(c)) &&
        !(b->rope = remat_mem_alloc(&b->mem, REMAT_MEM_WORKSPACE, b->rope_n * sizeof(float))))
        goto nomem;
    if (b->rope) remat_op_rope_fill(c, b->rope);
    remat_op_ctx_init(&b->ctx, &b->c, b->params, b->grads);
    b->ctx.params16 = b->params16;
    b->ctx.rope = b->rope;
    const remat_param_table *pt = remat_params_of(c);
    for (int i = 0; i < ly.count; i++) {
        float *w = b->params + ly.off[i];
        size_t ne = ly.numel[i];
        uint64_t key = remat_rng_key(7, 0, (uint32_t)i, 0);
        int ones = pt->defs[i].init == REMAT_INIT_ONES;
        for (size_t k = 0; k < ne; k++) w[k] = ones ? 1.0f : 0.02f * (remat_rng_uniform(key, k) - 0.5f);
    }
    remat_op_refresh16(&b->ctx);
    for (size_t i = 0; i < N; i++) {
        b->inp[i] = (int)((i * 7u) % (unsigned)c->vocab);
        b->tgt[i] = (int)((i * 13u + 1) % (unsigned)c->vocab);
    }
    b->ctx.inputs = b->inp;
    b->ctx.targets = b->tgt;
    b->ctx.losses = b->losses;
    b->ctx.seed = 1;
    b->ctx.training = 1;
    b->ctx.have_targets = 1;
    if (!acts) return REMAT_OK;
    b->nslots = remat_table_nslots(b->tb, c->n_layer);
    b->buf = remat_calloc((size_t)b->nslots, sizeof *b->buf);
    b->bytes = remat_calloc((size_t)b->nslots, sizeof *b->bytes);
    if (!b->buf || !b->bytes) goto nomem;
    for (int s = 0; s < b->nslots; s++) {
        int t = remat_table_slot_tid(b->tb, c->n_layer, s);
        if (!remat_tensor_exists(c, t)) continue;
        b->bytes[s] = remat_tensor_bytes(c, t);
        if (!(b->buf[s] = remat_mem_alloc(&b->mem, REMAT_MEM_ACTS, b->bytes[s]))) goto nomem;
        /* small finite values (some kernels accumulate into gradient buffers) */
        if (remat_tensor_dtype(c, t) == REMAT_DTYPE_BF16)
            for (size_t i = 0; i < b->bytes[s] / 2; i++)
                ((remat_bf16 *)b->buf[s])[i] = remat_bf16_round((float)((int)(i % 13) - 6) * 1e-3f);
        else
            for (size_t i = 0; i < b->bytes[s] / 4; i++) ((float *)b->buf[s])[i] = (float)((int)(i % 13) - 6) * 1e-3f;
    }
    remat_machine_now(c, &b->mc);
    for (int t = 0; t < b->tb->first_grad; t++) {
        uint64_t f = remat_tensor_fwd_temp_bytes(c, &b->mc, t), g = remat_tensor_bwd_temp_bytes(c, &b->mc, t);
        if (f > b->temp_bytes) b->temp_bytes = f;
        if (g > b->temp_bytes) b->temp_bytes = g;
    }
    if (b->temp_bytes && !(b->temp = remat_mem_alloc(&b->mem, REMAT_MEM_ACTS, b->temp_bytes))) goto nomem;
    if (!(b->flush = remat_mem_alloc(&b->mem, REMAT_MEM_WORKSPACE, FLUSH_BYTES))) goto nomem;
    return REMAT_OK;
nomem:
    bench_free(b);
    return remat_fail(REMAT_ERR_NOMEM, "out of memory allocating the buffers to profile (one block, the "
                      "embedding and the LM head)");
}

/* tensor t's forward (bw = 0) or backward op, bound as the interpreter binds it */
static void bench_op(bench *b, int t, int bw)
{
    remat_operands o;
    remat_op_args a;
    int kind = bw ? REMAT_I_BACKWARD : REMAT_I_FORWARD;
    int layer = b->tb->defs[t].cls == RT_CLASS_BLOCK ? 0 : -1;
    remat_operands_of(&b->c, &b->mc, kind, layer, t, &o);
    remat_op_bind(&o, kind, t, b->buf, b->bytes, b->temp, b->temp_bytes, &a);
    if (bw) remat_op_backward(&b->ctx, t, layer, &a);
    else remat_op_forward(&b->ctx, t, layer, &a);
}

remat_status remat_profile_measure(const remat_config *cfg, int reps, remat_profile **out)
{
    remat_status st;
    remat_profile *p = NULL;
    bench b, bu;
    double *v = NULL, *all = NULL;
    memset(&b, 0, sizeof b);
    memset(&bu, 0, sizeof bu);
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_profile_measure: out is NULL");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    if (cfg->framework != REMAT_FRAMEWORK_REMAT)   /* the dispatcher runs remat's own ops only */
        return remat_fail(REMAT_ERR_INVALID, "profiles time remat's own ops on this machine; a framework's "
                          "ops are priced on its GPUs by 'remat plan --framework'");
    if (reps < 1 || reps > 1000) return remat_fail(REMAT_ERR_INVALID, "reps must be in [1, 1000], got %d", reps);
    const remat_table *tb = remat_table_of(cfg);
    size_t per = (size_t)reps * 2 * (size_t)tb->first_grad;
    p = remat_calloc(1, sizeof *p);
    v = remat_malloc(sizeof(double) * (size_t)reps);
    all = remat_malloc(sizeof(double) * per * 2);   /* [hot][t][bw][rep] */
    if (!p || !v || !all) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    remat_config c1 = *cfg;
    c1.n_layer = 1;
    if ((st = bench_init(&b, &c1, 1, 0))) goto out;

    /* forward once in table order, so every input holds sane values */
    bench_op(&b, tb->emb, 0);
    for (int t = 0; t < tb->nblock; t++) bench_op(&b, t, 0);
    for (int h = 0; h < tb->nlmhead; h++) bench_op(&b, tb->lmhead[h], 0);
    p->cfg = *cfg;
    p->measured = 1;
    p->threads = remat_get_threads();
    /* the clock: with one thread, the thread's CPU time -- what the wall
     * time is on an idle machine, without the time other processes take on
     * a shared one; with several, the wall clock (CPU time would add up the
     * threads) */
    int cpu = p->threads == 1;
    remat_machine_cpu(p->cpu, sizeof p->cpu);
    float *dres = b.buf[remat_table_slot(tb, 1, -1, tb->d_res)];   /* fp32 in both dtypes */
    size_t dres_n = remat_tensor_bytes(&c1, tb->d_res) / 4;
    /* Reps are interleaved over the ops (rep r of every op, then rep r+1),
     * so that a burst of load on a shared machine hits all ops alike; and
     * before each timed call the caches are flushed, as in a real step an
     * op's inputs were written several ops (and many MiB) earlier. */
    for (int r = -1; r < reps; r++)
        for (int t = 0; t < tb->first_grad; t++)
            for (int bw = 0; bw < 2; bw++) {
                if (bw && !tb->defs[t].has_bwd) continue;
                memset(b.flush, r & 0xff, FLUSH_BYTES);
                for (int hot = 0; hot < 2; hot++) {   /* cold caches, then at once again: inputs in cache */
                    double t0 = remat_clock_ms(cpu);
                    bench_op(&b, t, bw);
                    double dt = remat_clock_ms(cpu) - t0;
                    if (r >= 0) all[(size_t)hot * per + ((size_t)t * 2 + (size_t)bw) * (size_t)reps + (size_t)r] = dt;
                    if (bw)   /* keep the += into d_res bounded */
                        for (size_t i = 0; i < dres_n; i++) dres[i] *= 0.5f;
                }
            }
    for (int hot = 0; hot < 2; hot++)
        for (int t = 0; t < tb->first_grad; t++)
            for (int bw = 0; bw < 2; bw++) {
                if (bw && !tb->defs[t].has_bwd) continue;
                memcpy(v, all + (size_t)hot * per + ((size_t)t * 2 + (size_t)bw) * (size_t)reps, sizeof(double) * (size_t)reps);
                double m = remat_median(v, (size_t)reps);
                if (hot) (bw ? p->bwd_hot_ms : p->fwd_hot_ms)[t] = m;
                else (bw ? p->bwd_ms : p->fwd_ms)[t] = m;
            }
    /* a warm call is never slower than a cold one; where noise says so, the
     * difference is noise */
    for (int t = 0; t < tb->first_grad; t++) {
        if (p->fwd_hot_ms[t] > p->fwd_ms[t]) p->fwd_hot_ms[t] = p->fwd_ms[t];
        if (p->bwd_hot_ms[t] > p->bwd_ms[t]) p->bwd_hot_ms[t] = p->bwd_ms[t];
    }
    p->cache_bytes = llc_bytes();
    bench_free(&b);

    /* the update: remat_op_update (norm, clipping, AdamW), on a one-block
     * model at most 512 wide, scaled to cfg's parameter count.  The
     * gradients are filled before the clock starts: a step never zeroes
     * them (each parameter's first gradient write assigns, ops.c), so their
     * filling is no part of what is priced */
    {
        remat_config cu = c1;
        cu.n_embd = cfg->n_embd < 512 ? cfg->n_embd : 512;
        cu.n_head = 1;
        cu.vocab = 64;
        cu.seq = cu.max_seq = cu.batch = 1;
        cu.lmhead_chunk = 0;
        if ((st = bench_init(&bu, &cu, 0, 1))) goto out;
        remat_optim o;
        remat_optim_default(&o);
        double scale = (double)remat_config_num_params(cfg) / (double)bu.np;
        for (int r = -1; r < reps; r++) {
            memset(bu.grads, 0, bu.np * sizeof(float));
            for (size_t i = 0; i < bu.np; i += 4096) bu.grads[i] = 1e-3f;
            double t0 = remat_clock_ms(cpu);
            remat_op_update(&bu.ctx, bu.am, bu.av, &o, (uint64_t)r + 2, NULL);
            if (r >= 0) v[r] = (remat_clock_ms(cpu) - t0) * scale;
        }
        p->update_ms = remat_median(v, (size_t)reps);
    }
    snprintf(p->desc, sizeof p->desc, "measured on %s, %d thread%s (%d reps, median of %s time)", p->cpu, p->threads,
             p->threads == 1 ? "" : "s", reps, cpu ? "CPU" : "wall");
    *out = p;
    p = NULL;
out:
    bench_free(&b);
    bench_free(&bu);
    free(all);
    free(v);
    free(p);
    return st;
}
