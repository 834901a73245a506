/*
 * test_schedule.c -- recomputation policies as schedules:
 *   - bitwise equality of losses, gradients and params_hash against "none"
 *     for every policy and several combinations, with and without dropout;
 *   - predicted peak / stored bytes equal the measured ones exactly;
 *   - --verify-recompute finds no mismatch;
 *   - sanity: full < every:2 < none; selective never holds att across the
 *     forward; revolve:S holds at most S checkpoints; sqrt grows like sqrt(L);
 *   - a step's gradients do not depend on what the gradient buffer held
 *     (each run writes them: no zeroing pass);
 *   - the gradient norm the update clipped with is remat_sumsq of the
 *     step's gradients, bit for bit (its partials are taken in the backward:
 *     a layer's slices after their op, an untied embedding's by rows);
 *   - the validator rejects hand-made broken schedules;
 *   - bad policy strings are rejected.
 */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "remat.h"
#include "remat_testing.h"
#include "kernels/kernels.h"   /* remat_sumsq: the norm recomputed in one pass */
#include "schedule/schedule.h" /* remat_machine_now, the table's scratch: the kernels' workspace */
#include "harness.h"

static const char *policies[] = {
    "none", "full", "every:2", "every:3", "sqrt", "first:1", "first:2", "selective", "pointwise",
    "save:qkv+fch", "save:res2", "save:att+atty+fch_gelu", "revolve:2", "revolve:3", "revolve:4",
    "every:2,selective", "full,pointwise", "selective,pointwise", "first:2,selective",
    "revolve:3,pointwise", "every:2,save:ln1_stat+qkv+ln2_stat+fch", "selective,save:qkv+att",
};
#define NPOL ((int)(sizeof policies / sizeof policies[0]))
/* Llama's table: the same structures, its own names in the save: lists */
static const char *llama_policies[] = {
    "none", "full", "every:2", "sqrt", "first:1", "selective", "pointwise", "save:qkv+gate_up", "save:res2",
    "save:att+atty+swiglu", "save:qk_rope+att", "revolve:2", "revolve:3", "every:2,selective", "full,pointwise",
    "selective,pointwise", "revolve:3,pointwise", "every:2,save:ln1_rstd+qkv+ln2_rstd+gate_up",
};
#define NLPOL ((int)(sizeof llama_policies / sizeof llama_policies[0]))

typedef struct run_result {
    float loss[4];
    uint64_t hash, grad_hash;
    uint64_t peak, stored, peak_pred, stored_pred;
    remat_status st;
} run_result;

static void make_batch(const remat_config *c, int step, int *in, int *tg)
{
    int n = c->batch * c->seq;
    uint32_t x = 12345u + 7919u * (uint32_t)step;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u; in[i] = (int)((x >> 8) % (uint32_t)c->vocab);
        x = x * 1664525u + 1013904223u; tg[i] = (int)((x >> 8) % (uint32_t)c->vocab);
    }
}

static run_result run(const remat_config *c, const char *policy, int steps, int verify)
{
    run_result r;
    memset(&r, 0, sizeof r);
    remat_model *m = NULL;
    int n = c->batch * c->seq;
    int *in = malloc(sizeof(int) * n), *tg = malloc(sizeof(int) * n);
    if ((r.st = remat_model_create(c, 42, &m))) goto out;
    if ((r.st = remat_model_set_policy(m, policy))) goto out;
    remat_model_set_verify(m, verify);
    for (int s = 0; s < steps; s++) {
        make_batch(c, s, in, tg);
        if ((r.st = remat_model_step(m, in, tg, 1, &r.loss[s]))) goto out;
    }
    r.hash = remat_model_params_hash(m);
    r.grad_hash = remat_hash_bytes(remat_model_grads(m), remat_model_num_params(m) * sizeof(float));
    remat_stats st;
    remat_model_stats(m, &st);
    r.peak = st.act_peak_bytes;
    r.stored = st.act_stored_bytes;
    remat_sim sim;
    remat_schedule_simulate(remat_model_schedule(m), &sim);
    r.peak_pred = sim.peak_bytes;
    r.stored_pred = sim.stored_bytes;
out:
    if (r.st) fprintf(stderr, "run %s: %s\n", policy, remat_errmsg());
    remat_model_free(m);
    free(in);
    free(tg);
    return r;
}

static void check_config(const char *label0, remat_config c)
{
    const char *const *pols = c.arch == REMAT_ARCH_LLAMA ? llama_policies : policies;
    int npol = c.arch == REMAT_ARCH_LLAMA ? NLPOL : NPOL;
    for (int k = 0; k < 4; k++) {
        int drop = k & 1;
        c.dtype = k < 2 ? REMAT_DTYPE_FP32 : REMAT_DTYPE_BF16;
        char label[96];
        snprintf(label, sizeof label, "%s %s", label0, k < 2 ? "fp32" : "bf16");
        if (c.dtype == REMAT_DTYPE_BF16 && !remat_gemm_available(REMAT_GEMM_ONEDNN)) {
            TEST_SKIP("%s: bf16 needs the oneDNN engine, not in this build (GEMM=cblas)", label);
            continue;
        }
        c.dropout = drop ? 0.1f : 0.0f;
        run_result ref = run(&c, "none", 3, 0);
        CHECK(ref.st == REMAT_OK, "%s: none failed", label);
        CHECK(ref.peak == ref.peak_pred, "%s p=%.1f none: measured peak %llu != predicted %llu", label,
              (double)c.dropout, (unsigned long long)ref.peak, (unsigned long long)ref.peak_pred);
        for (int i = 1; i < npol; i++) {
            run_result r = run(&c, pols[i], 3, 1);
            CHECK(r.st == REMAT_OK, "%s p=%.1f %s: failed (%s)", label, (double)c.dropout, pols[i], remat_errmsg());
            if (r.st) continue;
            CHECK(!memcmp(r.loss, ref.loss, sizeof r.loss), "%s p=%.1f %s: losses differ from none "
                  "(%.9g vs %.9g)", label, (double)c.dropout, pols[i], r.loss[2], ref.loss[2]);
            CHECK(r.hash == ref.hash, "%s p=%.1f %s: params_hash differs from none", label, (double)c.dropout, pols[i]);
            CHECK(r.grad_hash == ref.grad_hash, "%s p=%.1f %s: gradients differ from none", label, (double)c.dropout, pols[i]);
            CHECK(r.peak == r.peak_pred, "%s p=%.1f %s: measured peak %llu != predicted %llu", label,
                  (double)c.dropout, pols[i], (unsigned long long)r.peak, (unsigned long long)r.peak_pred);
            CHECK(r.stored == r.stored_pred, "%s p=%.1f %s: measured stored %llu != predicted %llu", label,
                  (double)c.dropout, pols[i], (unsigned long long)r.stored, (unsigned long long)r.stored_pred);
        }
    }
}

static remat_sim sim_of(const remat_config *c, const char *policy)
{
    remat_schedule *s = NULL;
    remat_sim sim;
    memset(&sim, 0, sizeof sim);
    remat_status st = remat_schedule_create(c, policy, &s);
    CHECK(st == REMAT_OK, "schedule %s: %s", policy, remat_errmsg());
    if (s) remat_schedule_simulate(s, &sim);
    remat_schedule_free(s);
    return sim;
}

static void sanity(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 8; c.n_embd = 64; c.n_head = 4; c.vocab = 128; c.seq = 32; c.max_seq = 32; c.batch = 4;
    remat_sim none = sim_of(&c, "none"), full = sim_of(&c, "full"), ev2 = sim_of(&c, "every:2");
    CHECK(full.peak_bytes < ev2.peak_bytes && ev2.peak_bytes < none.peak_bytes,
          "peaks: full %llu < every:2 %llu < none %llu", (unsigned long long)full.peak_bytes,
          (unsigned long long)ev2.peak_bytes, (unsigned long long)none.peak_bytes);
    CHECK(none.recompute_flops == 0, "none recomputes nothing");
    CHECK(full.recompute_flops > 0 && full.recompute_flops < none.flops * 0.5, "full recomputes less than a forward");

    /* selective: no att tensor survives the forward sweep, and at most one
     * is ever live */
    remat_schedule *s = NULL;
    remat_schedule_create(&c, "selective", &s);
    int att = remat_config_tensor_find(&c, "att"), live_att = 0, max_att = 0, att_at_fwd_end = -1;
    remat_sim sel;
    remat_schedule_simulate(s, &sel);
    int first_head = -1;
    for (size_t i = 0; i < remat_schedule_length(s); i++) {
        remat_instr_info in;
        remat_schedule_instr(s, i, &in);
        if (first_head < 0 && (!strcmp(in.tensor, "lnf_stat") || !strcmp(in.tensor, "logits"))) {
            first_head = (int)i;
            att_at_fwd_end = live_att;
        }
        if (!strcmp(in.tensor, "att")) {
            if (in.kind == REMAT_I_FORWARD || in.kind == REMAT_I_RECOMPUTE) live_att++;
            if (in.kind == REMAT_I_FREE) live_att--;
        }
        if (live_att > max_att) max_att = live_att;
    }
    (void)att;
    CHECK(att_at_fwd_end == 0, "selective keeps %d att tensors across the forward", att_at_fwd_end);
    CHECK(max_att == 1, "selective holds at most one att at a time (got %d)", max_att);
    remat_tensor_info ti;
    remat_tensor_get(&c, remat_config_tensor_find(&c, "att"), &ti);
    CHECK(none.stored_bytes - sel.stored_bytes == (uint64_t)c.n_layer * ti.bytes,
          "selective saves exactly L att tensors of storage");
    remat_schedule_free(s);

    /* revolve: never more than S block checkpoints */
    for (int S = 2; S <= 5; S++) {
        char p[32];
        snprintf(p, sizeof p, "revolve:%d", S);
        remat_sim r = sim_of(&c, p);
        CHECK(r.max_checkpoints <= S, "%s holds %d checkpoints", p, r.max_checkpoints);
    }
    /* more slots never recompute more */
    double prev = INFINITY;
    for (int S = 2; S <= 9; S++) {
        char p[32];
        snprintf(p, sizeof p, "revolve:%d", S);
        remat_sim r = sim_of(&c, p);
        CHECK(r.recompute_flops <= prev, "%s recomputes more than with fewer slots", p);
        prev = r.recompute_flops;
    }

    /* sqrt: stored bytes grow like sqrt(L) */
    uint64_t st[3];
    int Ls[3] = { 4, 16, 64 };
    for (int k = 0; k < 3; k++) {
        remat_config t = c;
        t.n_layer = Ls[k]; t.n_embd = 8; t.n_head = 2; t.vocab = 16; t.seq = 4; t.max_seq = 4; t.batch = 1;
        st[k] = sim_of(&t, "sqrt").stored_bytes;
    }
    double r1 = (double)st[1] / st[0], r2 = (double)st[2] / st[1];
    CHECK(r1 > 1.4 && r1 < 2.6 && r2 > 1.4 && r2 < 2.6, "sqrt stored ratios %.2f %.2f should be ~2 (sqrt 4)", r1, r2);
}

static void validator(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 1; c.n_embd = 8; c.n_head = 2; c.vocab = 16; c.seq = 4; c.max_seq = 4; c.batch = 1;
    const remat_instr_kind F = REMAT_I_FORWARD, B = REMAT_I_BACKWARD, X = REMAT_I_FREE, U = REMAT_I_UPDATE;
    /* a correct hand-written schedule: forward all, head, backward all */
    int ids[] = { remat_config_tensor_find(&c, "emb"),
                  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
    (void)ids;
    remat_instr_kind k[64]; int l[64], t[64]; size_t n = 0;
#define I(kind, layer, name) (k[n] = (kind), l[n] = (layer), t[n] = remat_config_tensor_find(&c, name), n++)
    I(F, -1, "emb");
    const char *blk[] = { "ln1_stat", "ln1", "qkv", "att", "atty", "res2", "ln2_stat", "ln2", "fch", "fch_gelu", "res3" };
    for (int i = 0; i < 11; i++) I(F, 0, blk[i]);
    I(F, -1, "lnf_stat"); I(F, -1, "lnf"); I(F, -1, "logits");
    I(B, -1, "logits"); I(X, -1, "lnf"); I(B, -1, "lnf"); I(X, -1, "lnf_stat"); I(X, 0, "res3");
    const char *bw[] = { "res3", "fch_gelu", "fch", "ln2", "res2", "atty", "qkv", "ln1" };
    for (int i = 0; i < 8; i++) I(B, 0, bw[i]);
    for (int i = 0; i < 10; i++) I(X, 0, blk[i]);
    I(X, -1, "emb"); I(B, -1, "emb"); I(U, -1, "emb");
    size_t good_n = n;
    remat_schedule *s = NULL;
    remat_status st = remat_schedule_from_instrs(&c, n, k, l, t, &s);
    CHECK(st == REMAT_OK && remat_schedule_validate(s) == REMAT_OK, "hand-made valid schedule accepted: %s", remat_errmsg());
    remat_schedule_free(s);

    /* Broken schedules: each is rejected when it is made, with the
     * validator's message naming the fault.  mutate() copies the good
     * schedule through an edit: drop an instruction, duplicate one, or swap
     * two. */
    struct { const char *what; int op; remat_instr_kind k1; const char *t1; remat_instr_kind k2; const char *t2;
             const char *msg; } broken[] = {
        /* qkv's forward before ln1's: reads ln1 before it exists */
        { "read before write", 'S', F, "ln1", F, "qkv", "forward of qkv (layer 0) reads ln1, which is not materialised" },
        /* ln1 freed right after its forward: qkv then reads a freed tensor */
        { "read of a freed tensor", 'F', F, "ln1", X, "ln1", "forward of qkv (layer 0) reads ln1, which is not materialised" },
        /* LN2's backward before FCH's: d_ln2 does not exist yet */
        { "ln2 backward before fch's", 'S', B, "fch", B, "ln2", "backward of ln2 (layer 0) runs before d_ln2 exists" },
        /* ln1_stat freed twice */
        { "double free", 'D', X, "ln1_stat", X, "ln1_stat", "free of ln1_stat (layer 0), which is not live" },
        /* no free of ln1_stat at all */
        { "leak", 'R', X, "ln1_stat", X, "ln1_stat", "leak: ln1_stat (layer 0) is never freed" },
        /* emb's backward dropped: d_res, a gradient buffer, is never freed */
        { "gradient buffer never freed", 'R', B, "emb", B, "emb", "leak: d_res (layer -1) is never freed" },
        /* fch_gelu's backward twice */
        { "gradient twice", 'D', B, "fch_gelu", B, "fch_gelu", "gradient of fch_gelu (layer 0) computed twice" },
        /* qkv's backward dropped: ln1's backward runs without d_ln1 */
        { "missing gradient", 'R', B, "qkv", B, "qkv", "backward of ln1 (layer 0) runs before d_ln1 exists" },
        /* res3's forward twice */
        { "computed over a live copy", 'D', F, "res3", F, "res3", "forward of res3 (layer 0) which is already live" },
        /* the update first */
        { "update before the end", 'U', U, "", U, "", "update before the end" },
    };
    for (size_t b = 0; b < sizeof broken / sizeof broken[0]; b++) {
        remat_instr_kind k2[64]; int l2[64], t2[64];
        size_t m = 0, i1 = good_n, i2 = good_n;
        for (size_t i = 0; i < good_n; i++) {
            if (k[i] == broken[b].k1 && t[i] == remat_config_tensor_find(&c, broken[b].t1) && i1 == good_n) i1 = i;
            if (k[i] == broken[b].k2 && t[i] == remat_config_tensor_find(&c, broken[b].t2)) i2 = i;
        }
        if (broken[b].op == 'U') { k2[m] = U; l2[m] = -1; t2[m] = -1; m++; }
        for (size_t i = 0; i < good_n; i++) {
            size_t src = i;
            if (broken[b].op == 'S' && i == i1) src = i2;
            if (broken[b].op == 'S' && i == i2) src = i1;
            if (broken[b].op == 'R' && i == i1) continue;
            if (broken[b].op == 'U' && k[i] == U) continue;
            k2[m] = k[src]; l2[m] = l[src]; t2[m] = t[src]; m++;
            if ((broken[b].op == 'D' && i == i1) || (broken[b].op == 'F' && i == i1)) {
                k2[m] = broken[b].op == 'F' ? X : k[i];
                l2[m] = l[i]; t2[m] = t[i]; m++;
            }
        }
        CHECK(broken[b].op == 'U' || (i1 < good_n && i2 < good_n), "%s: instructions found", broken[b].what);
        s = NULL;
        st = remat_schedule_from_instrs(&c, m, k2, l2, t2, &s);
        CHECK(st == REMAT_ERR_SCHEDULE && s == NULL && strstr(remat_errmsg(), broken[b].msg),
              "%s rejected with '%s': got %d '%s'", broken[b].what, broken[b].msg, (int)st, remat_errmsg());
        remat_schedule_free(s);
    }

    /* bad policy strings */
    const char *bad[] = { "", "bogus", "every:0", "every:x", "every:", "revolve:1", "full,every:2", "save:nope",
                          "save:", "save:qkv+", ",full", "full,", "full,,selective", "first:-1", "plan:", "plan:Z1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        remat_schedule *p = NULL;
        st = remat_schedule_create(&c, bad[i], &p);
        if (i == 0) { CHECK(st == REMAT_OK, "empty policy means none"); remat_schedule_free(p); continue; }
        CHECK(st == REMAT_ERR_POLICY && p == NULL, "policy '%s' rejected (got %d)", bad[i], st);
    }
}

/* Evaluation and sampling run forward-only schedules: their measured
 * activation peak equals the simulated one, the loss equals the training
 * forward's (no dropout), and a chunked head evaluates without the whole
 * logits unless they are asked for. */
static void forward_only(void)
{
    for (int chunk = 0; chunk < 2; chunk++) {
        remat_config c;
        remat_config_default(&c);
        c.n_layer = 3; c.n_embd = 32; c.n_head = 4; c.vocab = 500; c.seq = 16; c.max_seq = 16; c.batch = 3;
        c.lmhead_chunk = chunk ? 10 : 0;   /* the head dominates the peak */
        remat_model *m = NULL;
        int n = c.batch * c.seq;
        int *in = malloc(sizeof(int) * (size_t)n), *tg = malloc(sizeof(int) * (size_t)n);
        float *logits = malloc(sizeof(float) * (size_t)n * (size_t)remat_config_padded_vocab(&c));
        make_batch(&c, 0, in, tg);
        CHECK(remat_model_create(&c, 5, &m) == REMAT_OK, "create: %s", remat_errmsg());
        if (!m) goto next;
        float l_eval, l_logits, l_train;
        remat_stats st;
        remat_sim sim;
        remat_schedule *fs = NULL;

        CHECK(remat_model_eval(m, in, tg, &l_eval, NULL) == REMAT_OK, "eval: %s", remat_errmsg());
        remat_model_stats(m, &st);
        CHECK(remat_schedule_create_forward(&c, &fs) == REMAT_OK, "forward schedule: %s", remat_errmsg());
        remat_schedule_simulate(fs, &sim);
        CHECK(st.fwd_act_peak_bytes == sim.peak_bytes, "chunk %d: eval peak %llu measured, %llu simulated", chunk,
              (unsigned long long)st.fwd_act_peak_bytes, (unsigned long long)sim.peak_bytes);
        remat_schedule_free(fs);
        fs = NULL;
        uint64_t own_head = st.fwd_act_peak_bytes;

        remat_config cl = c;
        cl.lmhead_chunk = 0;   /* whole logits */
        CHECK(remat_model_eval(m, in, tg, &l_logits, logits) == REMAT_OK, "eval with logits: %s", remat_errmsg());
        remat_model_stats(m, &st);
        remat_schedule_create_forward(&cl, &fs);
        remat_schedule_simulate(fs, &sim);
        CHECK(st.fwd_act_peak_bytes == sim.peak_bytes, "chunk %d: eval+logits peak %llu measured, %llu simulated",
              chunk, (unsigned long long)st.fwd_act_peak_bytes, (unsigned long long)sim.peak_bytes);
        CHECK(chunk ? sim.peak_bytes > own_head : sim.peak_bytes == own_head,
              "chunk %d: whole logits %llu, the config's own head %llu", chunk, (unsigned long long)sim.peak_bytes,
              (unsigned long long)own_head);
        remat_schedule_free(fs);
        fs = NULL;
        CHECK(remat_model_step(m, in, tg, 0, &l_train) == REMAT_OK, "step: %s", remat_errmsg());
        CHECK(l_eval == l_logits, "chunk %d: eval losses %.9g and %.9g", chunk, l_eval, l_logits);
        CHECK(fabsf(l_eval - l_train) <= 1e-6f * fabsf(l_train), "chunk %d: eval %.9g, step %.9g", chunk, l_eval, l_train);

        int prompt[3] = { 1, 2, 3 }, out[5], out2[5];
        CHECK(remat_model_sample(m, prompt, 3, 5, 0.8f, 9, out) == REMAT_OK, "sample: %s", remat_errmsg());
        CHECK(remat_model_sample(m, prompt, 3, 5, 0.8f, 9, out2) == REMAT_OK && !memcmp(out, out2, sizeof out),
              "sampling is deterministic");
        remat_model_stats(m, &st);
        remat_config c1 = cl;
        c1.batch = 1;
        remat_schedule_create_forward(&c1, &fs);
        remat_schedule_simulate(fs, &sim);
        CHECK(st.fwd_act_peak_bytes == sim.peak_bytes, "sample peak %llu measured, %llu simulated",
              (unsigned long long)st.fwd_act_peak_bytes, (unsigned long long)sim.peak_bytes);
        remat_schedule_free(fs);
        /* bad arguments: one message, no crash */
        CHECK(remat_model_sample(NULL, prompt, 3, 5, 0.8f, 9, out) == REMAT_ERR_INVALID, "NULL model");
        CHECK(remat_model_sample(m, prompt, 3, INT_MAX, 0.8f, 9, out) == REMAT_ERR_INVALID, "prompt + new overflows");
        CHECK(remat_model_sample(m, prompt, 0, 1, 0.8f, 9, out) == REMAT_ERR_INVALID, "empty prompt");
    next:
        remat_model_free(m);
        free(in); free(tg); free(logits);
    }
}

/* Extents: every tensor of the table declared one byte smaller than its
 * formula says (remat_model_debug_shrink) must stop a training step with
 * the dispatcher's assertion -- the kernel that writes or reads it checks
 * the buffer it is given -- instead of overrunning it.  Each case runs in a
 * new process (this binary again, `--shrink K NAME`: OpenMP's threads do
 * not survive a fork), its stderr to a file; the parent wants SIGABRT and
 * the assertion's message. */
#define NEXT_CFG 4
static void extent_config(int k, remat_config *e)
{
    remat_config_default(e);   /* bf16 with dropout: every gradient buffer and scratch exists */
    e->n_layer = 2; e->n_embd = 16; e->n_head = 2; e->vocab = 32; e->seq = e->max_seq = 8; e->batch = 2;
    e->dropout = 0.1f;
    e->dtype = remat_gemm_available(REMAT_GEMM_ONEDNN) ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32;
    if (k & 1) { e->attention = REMAT_ATTENTION_FLASH; e->lmhead_chunk = 5; }
    if (k & 2) { e->arch = REMAT_ARCH_LLAMA; e->n_head = 4; e->n_kv_head = 2; e->head_dim = 6; e->ffn_dim = 20; }
}

static int shrink_child(int k, const char *name)
{
    remat_config c;
    extent_config(k, &c);
    remat_model *m = NULL;
    int in[64], tg[64];
    make_batch(&c, 0, in, tg);
    float loss;
    if (remat_model_create(&c, 42, &m) || remat_model_debug_shrink(m, name, 1) || remat_model_step(m, in, tg, 1, &loss))
        return 4;   /* a status, not the assertion */
    remat_model_free(m);
    return 0;       /* ran to the end: the shrunk buffer was not caught */
}

static void extents(const char *self)
{
    static const char *const labels[NEXT_CFG] = { "gpt2", "gpt2 flash chunked", "llama", "llama flash chunked" };
    char path[] = "/tmp/remat-extents-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    for (int k = 0; k < NEXT_CFG; k++) {
        remat_config c;
        extent_config(k, &c);
        int n = remat_config_tensor_count(&c), tried = 0;
        for (int t = 0; t < n; t++) {
            remat_tensor_info ti;
            if (remat_tensor_get(&c, t, &ti) || ti.bytes == 0) continue;
            fflush(NULL);
            pid_t pid = fork();
            if (pid == 0) {
                char ks[8];
                snprintf(ks, sizeof ks, "%d", k);
                dup2(fd, 2);
                execl(self, self, "--shrink", ks, ti.name, (char *)NULL);
                _exit(5);
            }
            int ws = 0;
            CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid, "fork/wait");
            char msg[4096] = "";
            ssize_t got = pread(fd, msg, sizeof msg - 1, 0);
            msg[got > 0 ? got : 0] = 0;
            if (ftruncate(fd, 0)) { /* the next child appends at its offset 0 anyway */ }
            lseek(fd, 0, SEEK_SET);
            int caught = WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT && strstr(msg, "table entry declares");
            CHECK(caught, "%s: %s declared 1 byte short was not caught by the dispatcher (status %#x: %.200s)", labels[k],
                  ti.name, ws, msg);
            tried++;
        }
        CHECK(tried >= 20, "%s: only %d tensors tried", labels[k], tried);
        printf("extents %s: %d tensors declared short, each caught\n", labels[k], tried);
    }
    close(fd);
    remove(path);
}

/* ---- offload and reload ------------------------------------------------------
 * The schedules are the same for every table; remat's own engine refuses to
 * run them (it has no host link), so these are simulated only. */

static uint64_t tbytes(const remat_config *c, const char *name)
{
    remat_tensor_info ti;
    int id = remat_config_tensor_find(c, name);
    return id >= 0 && remat_tensor_get(c, id, &ti) == REMAT_OK ? ti.bytes : 0;
}

static void offload_schedules(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 4; c.n_embd = 16; c.n_head = 2; c.vocab = 32; c.seq = 8; c.max_seq = 8; c.batch = 2;
    int nb = 0;
    uint64_t inner = 0, x = tbytes(&c, "emb");     /* a block's kept bytes but its output, and x */
    for (int t = 0; t < remat_config_tensor_count(&c); t++) {
        remat_tensor_info ti;
        remat_tensor_get(&c, t, &ti);
        if (!ti.per_layer) break;
        nb++;
        if (strcmp(ti.name, "res3")) inner += ti.bytes;
    }
    remat_sim none = sim_of(&c, "none");
    for (int N = 1; N <= 4; N++) {
        char pol[32];
        snprintf(pol, sizeof pol, "offload:%d", N);
        remat_schedule *s = NULL;
        remat_sim sim;
        CHECK(remat_schedule_create(&c, pol, &s) == REMAT_OK && remat_schedule_simulate(s, &sim) == REMAT_OK,
              "%s: %s", pol, remat_errmsg());
        if (!s) continue;
        CHECK(remat_schedule_validate(s) == REMAT_OK && !strcmp(remat_schedule_policy(s), pol), "%s validates", pol);
        /* blocks 0..N-1 move their kept tensors and their inputs: emb and the
         * outputs of blocks 0..N-2 */
        uint64_t host = (uint64_t)N * (inner + x);
        CHECK(sim.host_stored_bytes == host && sim.host_peak_bytes == host, "%s: %llu on the host, want %llu", pol,
              (unsigned long long)sim.host_stored_bytes, (unsigned long long)host);
        CHECK(sim.stored_bytes == none.stored_bytes - host, "%s: %llu stored on the device, want %llu", pol,
              (unsigned long long)sim.stored_bytes, (unsigned long long)(none.stored_bytes - host));
        CHECK(sim.transfer_bytes == 2 * host, "%s: every byte offloaded is reloaded", pol);
        CHECK(sim.flops == none.flops && sim.recompute_flops == 0, "%s: nothing recomputed", pol);
        /* per instruction: what is on the host, and nothing at the end */
        size_t n = remat_schedule_length(s), off = 0, rel = 0;
        uint64_t h = 0;
        int ok = 1;
        for (size_t i = 0; i < n; i++) {
            remat_instr_info in;
            remat_schedule_instr(s, i, &in);
            if (in.kind == REMAT_I_OFFLOAD) { off++; h += tbytes(&c, in.tensor); }
            if (in.kind == REMAT_I_RELOAD) { rel++; h -= tbytes(&c, in.tensor); }
            ok &= in.host_bytes == h;
        }
        CHECK(ok && h == 0 && off == rel && off == (size_t)N * (size_t)nb, "%s: %zu offloads, %zu reloads, host bytes "
              "per instruction", pol, off, rel);
        remat_layer_info li[4];
        CHECK(remat_schedule_layers(s, li) == REMAT_OK, "layers");
        for (int l = 0; l < 4; l++) {
            uint32_t outb = 1u << (nb - 1), want = l < N - 1 ? li[l].kept : l == N - 1 ? li[l].kept & ~outb : 0;
            CHECK(li[l].offloaded == want, "%s layer %d: offloaded %x, want %x", pol, l, li[l].offloaded, want);
        }
        remat_schedule_free(s);
    }
    /* an offloading plan token is the same schedule */
    char plan[64];
    snprintf(plan, sizeof plan, "plan:O%x.O%x.A%x.A%x", (1u << (nb - 1)) - 1, (1u << (nb - 1)) - 1,
             (1u << (nb - 1)) - 1, (1u << (nb - 1)) - 1);
    remat_schedule *a = NULL, *b = NULL;
    CHECK(remat_schedule_create(&c, plan, &a) == REMAT_OK && remat_schedule_create(&c, "offload:2", &b) == REMAT_OK,
          "%s: %s", plan, remat_errmsg());
    if (a && b) {
        int same = remat_schedule_length(a) == remat_schedule_length(b);
        for (size_t i = 0; same && i < remat_schedule_length(a); i++) {
            remat_instr_info p, q;
            remat_schedule_instr(a, i, &p);
            remat_schedule_instr(b, i, &q);
            same = p.kind == q.kind && p.layer == q.layer && !strcmp(p.tensor, q.tensor);
        }
        CHECK(same, "%s is offload:2 instruction for instruction", plan);
    }
    remat_schedule_free(a);
    remat_schedule_free(b);
    /* only what is named: the kept qkv of block 0 and its input */
    remat_sim sim = sim_of(&c, "offload:1:qkv+input");
    CHECK(sim.host_stored_bytes == tbytes(&c, "qkv") + x, "offload:1:qkv+input: %llu on the host",
          (unsigned long long)sim.host_stored_bytes);
    /* offload moves what an ALL move keeps: full recomputation checkpoints
     * every block instead, and keeps its inputs on the device */
    sim = sim_of(&c, "full,offload:4");
    remat_sim full = sim_of(&c, "full");
    CHECK(sim.host_peak_bytes == 0 && sim.peak_bytes == full.peak_bytes, "full,offload:4 is full (%llu on the host)",
          (unsigned long long)sim.host_peak_bytes);
    /* the canonical string, and what is refused */
    remat_schedule *s = NULL;
    CHECK(remat_schedule_create(&c, "offload:3:input+ln1,selective", &s) == REMAT_OK &&
          !strcmp(remat_schedule_policy(s), "selective,offload:3:ln1+input"), "canonical: %s",
          s ? remat_schedule_policy(s) : remat_errmsg());
    remat_schedule_free(s);
    const char *bad[] = { "offload:0", "offload:x", "offload:", "offload:2:", "offload:2:bogus", "offload:2:res3",
                          "offload:2:qkv+", "offload:5", "plan:O3ff.Z" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = NULL;
        remat_status st = remat_schedule_create(&c, bad[i], &s);
        CHECK(st == REMAT_ERR_POLICY && !s, "'%s' refused (got %d: %s)", bad[i], (int)st, remat_errmsg());
    }
    /* remat's engine has no host link: it refuses to run them, and its
     * planner to price them */
    remat_model *m = NULL;
    CHECK(remat_model_create(&c, 1, &m) == REMAT_OK, "model");
    CHECK(remat_model_set_policy(m, "offload:1") == REMAT_ERR_INVALID && strstr(remat_errmsg(), "no host link") &&
          !strcmp(remat_schedule_policy(remat_model_schedule(m)), "none"), "the engine refuses offload: %s",
          remat_errmsg());
    remat_model_free(m);
    remat_plan_row r;
    CHECK(remat_plan_evaluate(&c, NULL, "offload:1", 0, 0, &r) == REMAT_ERR_INVALID &&
          strstr(remat_errmsg(), "host link"), "remat plan refuses offload on the CPU: %s", remat_errmsg());
}

/* The validator on hand-made schedules that move tensors to the host and back */
static void offload_validator(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 1; c.n_embd = 8; c.n_head = 2; c.vocab = 16; c.seq = 4; c.max_seq = 4; c.batch = 1;
    const remat_instr_kind F = REMAT_I_FORWARD, B = REMAT_I_BACKWARD, X = REMAT_I_FREE, U = REMAT_I_UPDATE,
                           O = REMAT_I_OFFLOAD, R = REMAT_I_RELOAD;
    const char *blk[] = { "ln1_stat", "ln1", "qkv", "att", "atty", "res2", "ln2_stat", "ln2", "fch", "fch_gelu", "res3" };
    const char *bw[] = { "res3", "fch_gelu", "fch", "ln2", "res2", "atty", "qkv", "ln1" };
    /* variant v: 0 valid (qkv offloaded after the forward, reloaded before
     * the backward), 1 a read while offloaded, 2 a reload of a tensor on the
     * device, 3 an offload of a freed tensor, 4 left on the host, 5
     * offloaded twice, 6 a free of its host copy instead of a reload (the
     * backward then reads it) */
    static const char *msg[] = { NULL, "forward of att (layer 0) reads qkv, which is on the host (reload it first)",
                                 "reload of ln1 (layer 0), which is on the device, not the host",
                                 "offload of ln1_stat (layer 0), which is not live",
                                 "leak: fch_gelu (layer 0) is still on the host at the end",
                                 "offload of qkv (layer 0), which is already on the host",
                                 "backward of atty (layer 0) reads qkv, which is not materialised" };
    for (int v = 0; v < 7; v++) {
        remat_instr_kind k[80]; int l[80], t[80]; size_t n = 0;
#define I(kind, layer, name) (k[n] = (kind), l[n] = (layer), t[n] = remat_config_tensor_find(&c, name), n++)
        I(F, -1, "emb");
        for (int i = 0; i < 11; i++) {
            I(F, 0, blk[i]);
            if (v == 3 && i == 1) { I(X, 0, "ln1_stat"); I(O, 0, "ln1_stat"); }
            if (v == 1 && i == 2) I(O, 0, "qkv");
        }
        if (v != 1) I(O, 0, "qkv");
        if (v == 5) I(O, 0, "qkv");
        I(F, -1, "lnf_stat"); I(F, -1, "lnf"); I(F, -1, "logits");
        I(B, -1, "logits"); I(X, -1, "lnf"); I(B, -1, "lnf"); I(X, -1, "lnf_stat"); I(X, 0, "res3");
        if (v == 2) I(R, 0, "ln1");
        if (v == 6) I(X, 0, "qkv");
        else I(R, 0, "qkv");
        for (int i = 0; i < 8; i++) I(B, 0, bw[i]);
        for (int i = 0; i < 10; i++)
            if (v == 4 && i == 9) I(O, 0, blk[i]);
            else if (!(v == 3 && i == 0) && !(v == 6 && i == 2)) I(X, 0, blk[i]);
        I(X, -1, "emb"); I(B, -1, "emb"); I(U, -1, "emb");
#undef I
        remat_schedule *s = NULL;
        remat_status st = remat_schedule_from_instrs(&c, n, k, l, t, &s);
        if (!msg[v]) {
            remat_sim sim;
            CHECK(st == REMAT_OK && remat_schedule_simulate(s, &sim) == REMAT_OK &&
                  sim.host_peak_bytes == tbytes(&c, "qkv") && sim.transfer_bytes == 2 * tbytes(&c, "qkv"),
                  "the valid offloading schedule: %s", remat_errmsg());
        } else {
            CHECK(st == REMAT_ERR_SCHEDULE && !s && strstr(remat_errmsg(), msg[v]), "variant %d rejected with '%s': "
                  "got %d '%s'", v, msg[v], (int)st, remat_errmsg());
        }
        remat_schedule_free(s);
    }
}

/* A step writes its gradients without a zeroing pass (ops.h: the first
 * write of a slice assigns, slices no op writes are zeroed at the end of
 * the run).  So a step on a gradient buffer full of NaN, or right after
 * another step whose update was skipped, gives the gradients of a step on
 * a zeroed one, bit for bit: GPT-2 with position rows the run never
 * touches (max_seq > seq) and its head tied to wte, Llama untied (a
 * scattered token embedding) and with flash attention and the chunked
 * head (wte's gradient written in the forward), each in fp32 and bf16, and
 * under gradient accumulation (micro-batches summed into buffers of their
 * own). */
static void stale_gradients(void)
{
    remat_config cs[4];
    remat_config_default(&cs[0]);
    cs[0].n_layer = 2; cs[0].n_embd = 24; cs[0].n_head = 3; cs[0].vocab = 50; cs[0].seq = 9; cs[0].max_seq = 12;
    cs[0].batch = 4;
    remat_config_default(&cs[1]);
    cs[1].arch = REMAT_ARCH_LLAMA;
    cs[1].n_layer = 2; cs[1].n_embd = 32; cs[1].n_head = 4; cs[1].n_kv_head = 2; cs[1].ffn_dim = 48; cs[1].vocab = 64;
    cs[1].seq = 16; cs[1].max_seq = 16; cs[1].batch = 4;
    cs[2] = cs[1];
    cs[2].attention = REMAT_ATTENTION_FLASH; cs[2].lmhead_chunk = 9;
    cs[3] = cs[0];
    for (int k = 0; k < 8; k++) {
        remat_config c = cs[k % 4];
        c.dtype = k < 4 ? REMAT_DTYPE_FP32 : REMAT_DTYPE_BF16;
        int accum = k % 4 == 3;
        const char *what = k % 4 == 0 ? "gpt2 T9 of 12" : k % 4 == 1 ? "llama untied" : k % 4 == 2 ? "llama flash chunked"
                                                                                         : "gpt2 4 micro-batches";
        if (c.dtype == REMAT_DTYPE_BF16 && !remat_gemm_available(REMAT_GEMM_ONEDNN)) {
            TEST_SKIP("stale gradients %s bf16: bf16 needs the oneDNN engine, not in this build (GEMM=cblas)", what);
            continue;
        }
        int n = c.batch * c.seq, *in = malloc(sizeof(int) * n), *tg = malloc(sizeof(int) * n);
        make_batch(&c, 0, in, tg);
        uint64_t h[3] = { 0, 0, 0 };
        remat_status st = REMAT_OK;
        for (int v = 0; v < 2 && !st; v++) {
            remat_model *m = NULL;
            if ((st = remat_model_create(&c, 42, &m)) || (accum && (st = remat_model_set_parallel(m, NULL, 1, 0)))) {
                remat_model_free(m);
                break;
            }
            size_t np = remat_model_num_params(m);
            float *g = (float *)remat_model_grads(m);   /* test only: what a previous run could have left */
            if (v) for (size_t i = 0; i < np; i++) g[i] = NAN;
            float loss;
            for (int s2 = 0; s2 < (v ? 1 : 2) && !st; s2++) {
                st = remat_model_step(m, in, tg, 0, &loss);
                h[v ? 2 : s2] = remat_hash_bytes(remat_model_grads(m), np * sizeof(float));
            }
            remat_model_free(m);
        }
        CHECK(st == REMAT_OK, "stale gradients %s %s: a step failed (%s)", what, k < 4 ? "fp32" : "bf16",
              remat_errmsg());
        CHECK(h[1] == h[0], "stale gradients %s %s: a second step without an update changed the gradients", what,
              k < 4 ? "fp32" : "bf16");
        CHECK(h[2] == h[0], "stale gradients %s %s: a gradient buffer of NaN changed the step's gradients", what,
              k < 4 ? "fp32" : "bf16");
        free(in);
        free(tg);
    }
}

/* The norm the update clipped with against remat_sumsq over the gradients
 * left by the step (AdamW reads them, writes none), bit for bit, after
 * each of 3 steps: models whose embeddings span many norm blocks (40000 x
 * 64 = 625 blocks of 4096, a batch's 32 tokens touching a few), GPT-2
 * (tied, with wpe) and Llama (untied and tied), the head whole or in row
 * chunks, under none / full / selective, fp32 and bf16, with and without
 * dropout.  The norm itself is compared: one off in its last bit would not
 * change the parameters of a step that does not clip. */
static void grad_norm_exact(void)
{
    const char *pols[] = { "none", "full", "selective" };
    int nfail = 0, ncase = 0;
    for (int k = 0; k < 16; k++) {
        remat_config c;
        remat_config_default(&c);
        c.n_layer = 2; c.n_embd = 64; c.n_head = 4; c.vocab = 40000; c.seq = 16; c.max_seq = 16; c.batch = 2;
        int kind = k % 4;
        if (kind >= 1) { c.arch = REMAT_ARCH_LLAMA; c.n_kv_head = 2; c.ffn_dim = 96; }
        if (kind == 2) c.tie_embeddings = 1;
        if (kind == 3) { c.lmhead_chunk = 9; c.attention = REMAT_ATTENTION_FLASH; }
        c.dtype = k < 8 ? REMAT_DTYPE_FP32 : REMAT_DTYPE_BF16;
        c.dropout = (k / 4) % 2 ? 0.1f : 0.0f;
        if (c.dtype == REMAT_DTYPE_BF16 && !remat_gemm_available(REMAT_GEMM_ONEDNN)) {
            TEST_SKIP("grad norm: bf16 needs the oneDNN engine, not in this build (GEMM=cblas)");
            continue;
        }
        const char *pol = pols[k % 3];
        char what[96];
        snprintf(what, sizeof what, "grad norm %s%s %s %s p=%.1f", kind ? "llama" : "gpt2",
                 kind == 2 ? " tied" : kind == 3 ? " chunked head" : "", pol, k < 8 ? "fp32" : "bf16",
                 (double)c.dropout);
        int n = c.batch * c.seq, *in = malloc(sizeof(int) * n), *tg = malloc(sizeof(int) * n);
        remat_model *m = NULL;
        remat_status st = remat_model_create(&c, 42, &m);
        if (!st) st = remat_model_set_policy(m, pol);
        for (int s2 = 0; s2 < 3 && !st; s2++) {
            float loss;
            make_batch(&c, s2, in, tg);
            if ((st = remat_model_step(m, in, tg, 1, &loss))) break;
            remat_stats sta;
            remat_model_stats(m, &sta);
            float ref = (float)sqrt(remat_sumsq(remat_model_grads(m), remat_model_num_params(m)));
            ncase++;
            if (memcmp(&ref, &sta.grad_norm, sizeof ref)) {
                nfail++;
                CHECK(0, "%s step %d: the update's norm %.9g, the gradients' %.9g", what, s2 + 1,
                      (double)sta.grad_norm, (double)ref);
            }
        }
        CHECK(st == REMAT_OK, "%s: a step failed (%s)", what, remat_errmsg());
        remat_model_free(m);
        free(in);
        free(tg);
    }
    printf("  grad norm: %d of %d steps the norm of their gradients, bit for bit\n", ncase - nfail, ncase);
}

/* Issue 29: the kernels' workspace -- the fp32 copies of bf16 products where
 * they are emulated, the bf16 cross-entropy's fp32 row per thread -- is
 * allocated through the accounting allocator as the table declares it, so
 * a bf16 step's measured peak equals the predicted one with it, on this
 * machine (its own: emulated on AVX2) and with the copies forced (the
 * tests' hook); bits do not depend on the workspace (every policy gives
 * none's); and the workspace is in the prediction, by an independent
 * restatement of the LM head's (its products' copies, the rows) and its
 * absence under fp32.  T = 300 puts several key tiles in a row block (past
 * the bf16 scores' 256-wide tile), whose bounds the table declares. */
static uint64_t r64(uint64_t b) { return (b + 63) & ~(uint64_t)63; }

static void workspace(void)
{
    if (!remat_gemm_available(REMAT_GEMM_ONEDNN)) {
        TEST_SKIP("workspace: bf16 needs the oneDNN engine, not in this build (GEMM=cblas)");
        return;
    }
    int native = remat_gemm_bf16_native();
    printf("workspace: this machine's bf16 products: %s\n", native ? "oneDNN's bf16 matmul" : "fp32 copies");
    static const char *pols[] = { "none", "full", "selective", "every:2,pointwise" };
    for (int hook = 0; hook < 2; hook++) {
        remat_gemm_bf16_emulate(hook);
        for (int k = 0; k < 4; k++) {
            remat_config c;
            remat_config_default(&c);
            c.dtype = REMAT_DTYPE_BF16;
            c.n_layer = 2; c.n_embd = 32; c.n_head = 2; c.vocab = 64; c.seq = 300; c.max_seq = 300; c.batch = 1;
            if (k == 1) { c.attention = REMAT_ATTENTION_FLASH; c.dropout = 0.1f; }
            if (k >= 2) { c.arch = REMAT_ARCH_LLAMA; c.n_head = 4; c.n_kv_head = 2; c.ffn_dim = 48; }
            if (k == 2) c.dropout = 0.1f;
            if (k == 3) { c.attention = REMAT_ATTENTION_FLASH; c.lmhead_chunk = 37; c.seq = c.max_seq = 140; c.batch = 2; }
            char label[96];
            snprintf(label, sizeof label, "workspace %s %s%s%s%s", hook ? "copies forced" : "this machine",
                     k >= 2 ? "llama" : "gpt2", c.attention == REMAT_ATTENTION_FLASH ? " flash" : " naive",
                     c.dropout > 0 ? " dropout" : "", c.lmhead_chunk ? " chunked" : "");
            remat_machine mc, none = { 0, 0 };
            remat_machine_now(&c, &mc);
            CHECK(mc.bf16_copies == (hook || !native) && mc.threads == remat_get_threads(),
                  "%s: the machine: copies %d threads %d", label, mc.bf16_copies, mc.threads);
            run_result ref;
            memset(&ref, 0, sizeof ref);
            for (int i = 0; i < 4; i++) {
                run_result r = run(&c, pols[i], 2, 0);
                CHECK(r.st == REMAT_OK, "%s %s: failed (%s)", label, pols[i], remat_errmsg());
                if (r.st) continue;
                CHECK(r.peak == r.peak_pred, "%s %s: measured peak %llu != predicted %llu", label, pols[i],
                      (unsigned long long)r.peak, (unsigned long long)r.peak_pred);
                if (!i) ref = r;
                else CHECK(r.hash == ref.hash && !memcmp(r.loss, ref.loss, sizeof r.loss),
                           "%s %s: other bits than none", label, pols[i]);
            }
            /* the LM head's forward scratch, restated */
            const remat_table *tb = remat_table_of(&c);
            int head = tb->lmhead[tb->nlmhead - 1];
            uint64_t rows = (uint64_t)remat_lmhead_rows(&c), Vp = (uint64_t)remat_config_padded_vocab(&c);
            uint64_t C = (uint64_t)c.n_embd, V = (uint64_t)c.vocab;
            uint64_t own = c.lmhead_chunk ? rows * Vp * 6 : 0;   /* the chunk's fp32 logits and bf16 d(logits) */
            uint64_t copies = mc.bf16_copies ? r64(4 * (rows * C + Vp * C + rows * Vp + 32)) : 0;
            uint64_t row = c.lmhead_chunk ? 0 : (uint64_t)mc.threads * r64(4 * V);
            uint64_t want = copies || row ? r64(own) + copies + row : own;
            uint64_t got = remat_tensor_fwd_temp_bytes(&c, &mc, head);
            CHECK(got == want, "%s: the head's forward scratch %llu, want %llu", label, (unsigned long long)got,
                  (unsigned long long)want);
            CHECK(remat_tensor_fwd_temp_bytes(&c, NULL, head) == own, "%s: the head's own scratch", label);
            /* every product's op has its copies' workspace when they are made */
            uint64_t ws = 0;
            int nprod = 0;
            for (int t = 0; t < tb->first_grad; t++) {
                if (tb->defs[t].opc != RO_LINEAR && tb->defs[t].opc != RO_ATTENTION && tb->defs[t].opc != RO_LMHEAD)
                    continue;
                uint64_t w = remat_tensor_fwd_temp_bytes(&c, &mc, t) - remat_tensor_fwd_temp_bytes(&c, &none, t);
                if (tb->defs[t].has_bwd)
                    w += remat_tensor_bwd_temp_bytes(&c, &mc, t) - remat_tensor_bwd_temp_bytes(&c, &none, t);
                CHECK(!mc.bf16_copies || w > 0, "%s: %s's op has no workspace for its products' copies", label,
                      tb->defs[t].name);
                ws += w;
                nprod++;
            }
            printf("  %s: %d product ops, %llu workspace bytes (forward + backward scratch)\n", label, nprod,
                   (unsigned long long)ws);
            /* fp32: no workspace at all */
            c.dtype = REMAT_DTYPE_FP32;
            for (int t = 0; t < tb->first_grad; t++)
                CHECK(remat_tensor_fwd_temp_bytes(&c, &mc, t) == remat_tensor_fwd_temp_bytes(&c, NULL, t) &&
                      remat_tensor_bwd_temp_bytes(&c, &mc, t) == remat_tensor_bwd_temp_bytes(&c, NULL, t),
                      "%s: fp32 %s has a workspace", label, tb->defs[t].name);
        }
    }
    remat_gemm_bf16_emulate(0);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--shrink")) return shrink_child(atoi(argv[2]), argv[3]);
    remat_set_threads(2);
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 4; c.n_embd = 32; c.n_head = 4; c.vocab = 64; c.seq = 16; c.max_seq = 16; c.batch = 2;
    check_config("L4 C32", c);
    c.n_layer = 3; c.n_embd = 36; c.n_head = 1; c.vocab = 101; c.seq = 1; c.max_seq = 1; c.batch = 2;
    check_config("odd C36 H1 T1 V101", c);
    c.n_layer = 5; c.n_embd = 24; c.n_head = 3; c.vocab = 50; c.seq = 9; c.max_seq = 12; c.batch = 3;
    check_config("L5 C24 T9", c);
    /* Llama: grouped-query attention (KV < NH), RoPE, SwiGLU, RMSNorm; an
     * untied head; then the odd shapes: head size != C/NH, KV = 1, T = 1,
     * tied; and flash attention with the chunked head */
    remat_config_default(&c);
    c.arch = REMAT_ARCH_LLAMA;
    c.n_layer = 4; c.n_embd = 32; c.n_head = 4; c.n_kv_head = 2; c.ffn_dim = 48; c.vocab = 64;
    c.seq = 16; c.max_seq = 16; c.batch = 2;
    check_config("llama L4 C32 NH4 KV2 F48", c);
    c.n_layer = 3; c.n_embd = 36; c.n_head = 3; c.n_kv_head = 1; c.head_dim = 10; c.ffn_dim = 50; c.vocab = 101;
    c.seq = 1; c.max_seq = 1; c.batch = 2; c.tie_embeddings = 1;
    check_config("llama odd C36 NH3 KV1 hs10 T1 tied", c);
    c.n_layer = 3; c.n_embd = 24; c.n_head = 6; c.n_kv_head = 3; c.head_dim = 0; c.ffn_dim = 40; c.vocab = 50;
    c.seq = 70; c.max_seq = 70; c.batch = 2; c.tie_embeddings = 0; c.attention = REMAT_ATTENTION_FLASH;
    c.lmhead_chunk = 9; c.rope_theta = 500000; c.rope_scaling.type = REMAT_ROPE_LLAMA3;
    c.rope_scaling.factor = 8; c.rope_scaling.low_freq_factor = 1; c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position = 32;
    check_config("llama flash chunk:9 T70 llama3 rope", c);
    workspace();
    extents("/proc/self/exe");
    stale_gradients();
    grad_norm_exact();
    sanity();
    validator();
    forward_only();
    offload_schedules();
    offload_validator();
    return TEST_REPORT();
}
