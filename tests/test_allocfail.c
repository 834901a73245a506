/*
 * test_allocfail.c -- allocation-failure injection (after SQLite's
 * test_malloc.c): every allocation of model creation, of one training step,
 * of installing a policy and of loading weights is made to fail in turn
 * (remat_mem_fail_at(N), N = 1, 2, ... until the operation no longer reaches
 * the N-th allocation).  Each failure must give REMAT_ERR_NOMEM with a
 * message, leave output pointers NULL, leak nothing (LeakSanitizer in `make
 * test-sanitize`), and leave the model usable: after a failed step the next
 * step succeeds and gives the same loss and parameters as a run that never
 * failed.
 *
 * The planner is walked too (evaluate, optimal, Pareto front, maximize, and
 * a profile's model/save/load round trip): each failure gives
 * REMAT_ERR_NOMEM, no output, no leak.
 *
 * Coverage: every allocation inside the library goes through remat_mem or
 * remat_malloc/calloc/realloc/strdup (core.h), which both count for
 * injection.  (Not walked: remat_profile_measure, which times real kernels
 * for seconds, and stdio's own buffers, e.g. open_memstream's.)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "remat.h"
#include "core/core.h"
#include "harness.h"

/* The walk gives up past this many allocations (a bug: a loop). */
#define MAX_WALK 100000

static void config(remat_config *c, float dropout)
{
    remat_config_default(c);
    c->n_layer = 3;
    c->n_embd = 16;
    c->n_head = 2;
    c->vocab = 40;
    c->max_seq = c->seq = 8;
    c->batch = 2;
    c->dropout = dropout;
}

static void batch(int *in, int *tg, int n, int V)
{
    for (int i = 0; i < n; i++) { in[i] = (i * 7 + 3) % V; tg[i] = (i * 5 + 1) % V; }
}

/* Walks every allocation of remat_model_create. */
static void walk_create(float dropout)
{
    remat_config c;
    config(&c, dropout);
    int n, bad = 0, nomsg = 0;
    for (n = 1; n < MAX_WALK; n++) {
        remat_model *m = (remat_model *)&c;
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_model_create(&c, 1, &m);
        remat_mem_fail_at(0);
        int reached = remat_mem_alloc_count() - before >= (uint64_t)n;
        if (!reached) {
            CHECK(st == REMAT_OK && m, "create without failures: %s", remat_errmsg());
            remat_model_free(m);
            break;
        }
        if (st != REMAT_ERR_NOMEM || m) {
            bad++;
            fprintf(stderr, "create, failing allocation %d: status %d, model %p\n", n, (int)st, (void *)m);
            if (st == REMAT_OK) remat_model_free(m);
        }
        nomsg += !*remat_errmsg();
    }
    CHECK(n > 5 && n < MAX_WALK, "create: walked %d allocations", n - 1);
    CHECK(bad == 0, "create: %d failures not reported as NOMEM with a NULL model", bad);
    CHECK(nomsg == 0, "create: %d failures without a message", nomsg);
    printf("create (dropout %g): %d allocations, each made to fail\n", (double)dropout, n - 1);
}

/* Walks every allocation of one training step under a policy.  The
 * reference: a fresh model's first two steps without failures. */
static void walk_step(const char *policy, float dropout)
{
    remat_config c;
    config(&c, dropout);
    int N = c.batch * c.seq;
    int in[64], tg[64];
    batch(in, tg, N, c.vocab);
    remat_model *ref = NULL, *m = NULL;
    float ref_loss[2] = {0, 0};
    if (remat_model_create(&c, 1, &ref) || remat_model_set_policy(ref, policy) ||
        remat_model_step(ref, in, tg, 1, &ref_loss[0]) || remat_model_step(ref, in, tg, 1, &ref_loss[1])) {
        CHECK(0, "reference run (%s): %s", policy, remat_errmsg());
        remat_model_free(ref);
        return;
    }
    uint64_t ref_hash = remat_model_params_hash(ref);
    remat_model_free(ref);
    int n, bad = 0, nomsg = 0, unusable = 0;
    for (n = 1; n < MAX_WALK; n++) {
        if (remat_model_create(&c, 1, &m) || remat_model_set_policy(m, policy)) {
            CHECK(0, "create (%s): %s", policy, remat_errmsg());
            break;
        }
        float loss = -1, loss2 = -1;
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_model_step(m, in, tg, 1, &loss);
        remat_mem_fail_at(0);
        int reached = remat_mem_alloc_count() - before >= (uint64_t)n;
        if (!reached) {
            CHECK(st == REMAT_OK && loss == ref_loss[0], "step without failures (%s): %s", policy, remat_errmsg());
            remat_model_free(m);
            break;
        }
        if (st != REMAT_ERR_NOMEM) {
            bad++;
            fprintf(stderr, "step (%s), failing allocation %d: status %d\n", policy, n, (int)st);
        }
        nomsg += !*remat_model_error(m) || !strstr(remat_model_error(m), "memory");
        /* the failed step changed nothing: the retry is the first step */
        st = remat_model_step(m, in, tg, 1, &loss);
        st = st ? st : remat_model_step(m, in, tg, 1, &loss2);
        if (st || loss != ref_loss[0] || loss2 != ref_loss[1] || remat_model_params_hash(m) != ref_hash) {
            unusable++;
            fprintf(stderr, "step (%s), after failing allocation %d: status %d, losses %.9g %.9g (want %.9g %.9g)\n",
                    policy, n, (int)st, (double)loss, (double)loss2, (double)ref_loss[0], (double)ref_loss[1]);
        }
        remat_model_free(m);
        m = NULL;
    }
    CHECK(n > 10 && n < MAX_WALK, "step (%s): walked %d allocations", policy, n - 1);
    CHECK(bad == 0, "step (%s): %d failures not reported as NOMEM", policy, bad);
    CHECK(nomsg == 0, "step (%s): %d failures without an out-of-memory message", policy, nomsg);
    CHECK(unusable == 0, "step (%s): %d failures left the model unusable or changed", policy, unusable);
    printf("step (%s, dropout %g): %d allocations, each made to fail\n", policy, (double)dropout, n - 1);
}

/* Gradient accumulation on one rank (two micro-batches of one row):
 * every allocation of remat_model_set_parallel fails in turn -- NOMEM, and
 * the model is still the plain one: its next step is a plain step -- and
 * every allocation of a step over the micro-batches: NOMEM, and the retry is
 * the first step of a run that never failed. */
static void walk_parallel(void)
{
    remat_config c;
    config(&c, 0.1f);
    int N = c.batch * c.seq, in[64], tg[64];
    batch(in, tg, N, c.vocab);
    remat_model *m = NULL;
    float plain = 0, acc[2] = { 0, 0 }, loss = -1, loss2 = -1;
    if (remat_model_create(&c, 1, &m) || remat_model_step(m, in, tg, 1, &plain)) { CHECK(0, "plain: %s", remat_errmsg()); return; }
    uint64_t plain_hash = remat_model_params_hash(m);
    remat_model_free(m);
    if (remat_model_create(&c, 1, &m) || remat_model_set_parallel(m, NULL, 1, 0) ||
        remat_model_step(m, in, tg, 1, &acc[0]) || remat_model_step(m, in, tg, 1, &acc[1])) {
        CHECK(0, "accumulating: %s", remat_errmsg());
        return;
    }
    uint64_t acc_hash = remat_model_params_hash(m);
    remat_model_free(m);
    int n, bad = 0, unusable = 0;
    for (n = 1; n < MAX_WALK; n++) {
        if (remat_model_create(&c, 1, &m)) { CHECK(0, "create: %s", remat_errmsg()); break; }
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_model_set_parallel(m, NULL, 1, 0);
        remat_mem_fail_at(0);
        if (remat_mem_alloc_count() - before < (uint64_t)n) { CHECK(st == REMAT_OK, "set up: %s", remat_errmsg()); remat_model_free(m); break; }
        bad += st != REMAT_ERR_NOMEM || !strstr(remat_model_error(m), "memory");
        st = remat_model_step(m, in, tg, 1, &loss);
        unusable += st || loss != plain || remat_model_params_hash(m) != plain_hash;
        remat_model_free(m);
    }
    CHECK(n > 3 && bad == 0 && unusable == 0, "set up for 2 micro-batches: %d allocations, %d not NOMEM, %d left the "
          "model changed", n - 1, bad, unusable);
    int nset = n - 1;
    bad = unusable = 0;
    for (n = 1; n < MAX_WALK; n++) {
        if (remat_model_create(&c, 1, &m) || remat_model_set_parallel(m, NULL, 1, 0)) { CHECK(0, "set up: %s", remat_errmsg()); break; }
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_model_step(m, in, tg, 1, &loss);
        remat_mem_fail_at(0);
        if (remat_mem_alloc_count() - before < (uint64_t)n) {
            CHECK(st == REMAT_OK && loss == acc[0], "accumulating step: %s", remat_errmsg());
            remat_model_free(m);
            break;
        }
        bad += st != REMAT_ERR_NOMEM;
        st = remat_model_step(m, in, tg, 1, &loss);
        st = st ? st : remat_model_step(m, in, tg, 1, &loss2);
        unusable += st || loss != acc[0] || loss2 != acc[1] || remat_model_params_hash(m) != acc_hash;
        remat_model_free(m);
    }
    CHECK(n > 10 && bad == 0 && unusable == 0, "a step of 2 micro-batches: %d allocations, %d not NOMEM, %d left the "
          "model unusable or changed", n - 1, bad, unusable);
    printf("set up for 2 micro-batches: %d allocations, a step over them: %d, each made to fail\n", nset, n - 1);
}

/* Walks remat_model_set_policy: a failure keeps the installed schedule. */
static void walk_policy(const char *policy)
{
    remat_config c;
    config(&c, 0.0f);
    remat_model *m = NULL;
    if (remat_model_create(&c, 1, &m)) { CHECK(0, "create"); return; }
    int n, bad = 0;
    for (n = 1; n < MAX_WALK; n++) {
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_model_set_policy(m, policy);
        remat_mem_fail_at(0);
        if (remat_mem_alloc_count() - before < (uint64_t)n) { CHECK(st == REMAT_OK, "set_policy"); break; }
        const char *kept = remat_schedule_policy(remat_model_schedule(m));
        if (st != REMAT_ERR_NOMEM || strcmp(kept, "none") != 0) {
            bad++;
            fprintf(stderr, "set_policy(%s), failing allocation %d: status %d, schedule '%s'\n", policy, n, (int)st,
                    kept);
        }
    }
    CHECK(bad == 0 && n > 3 && n < MAX_WALK, "set_policy(%s): %d of %d failures mishandled", policy, bad, n - 1);
    remat_model_free(m);
}

/* remat_schedule_simulate returns a status, so its callers (the CLI's
 * train, bench and schedule) check it: a bad argument is REMAT_ERR_INVALID
 * with a message, and each allocation it makes (none, when the figures are
 * recorded at compile time) fails as REMAT_ERR_NOMEM with a message, the
 * run that does not fail giving the same figures as before. */
static void walk_simulate(const char *policy)
{
    remat_config c;
    config(&c, 0.1f);
    remat_schedule *s = NULL;
    remat_sim want, got;
    if (remat_schedule_create(&c, policy, &s) || remat_schedule_simulate(s, &want)) { CHECK(0, "setup"); return; }
    remat_clear_error();
    CHECK(remat_schedule_simulate(NULL, &got) == REMAT_ERR_INVALID && *remat_errmsg(), "simulate(NULL)");
    int n, bad = 0;
    for (n = 1; n < MAX_WALK; n++) {
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_schedule_simulate(s, &got);
        remat_mem_fail_at(0);
        if (remat_mem_alloc_count() - before < (uint64_t)n) {
            CHECK(st == REMAT_OK && got.peak_bytes == want.peak_bytes && got.flops == want.flops, "simulate");
            break;
        }
        if (st != REMAT_ERR_NOMEM || !*remat_errmsg()) {
            bad++;
            fprintf(stderr, "simulate(%s), failing allocation %d: status %d\n", policy, n, (int)st);
        }
    }
    CHECK(bad == 0 && n < MAX_WALK, "simulate(%s): %d of %d failures mishandled", policy, bad, n - 1);
    printf("simulate (%s): %d allocations, each made to fail\n", policy, n - 1);
    remat_schedule_free(s);
}

/* Makes each allocation of remat_weights_load(path) fail in turn until the
 * load makes no more (then it must give src's parameters); returns that
 * count + 1, *bad the failures that were not a clean REMAT_ERR_NOMEM. */
static int walk_load(const char *path, remat_config *c, remat_model *src, int *bad)
{
    int n;
    *bad = 0;
    for (n = 1; n < MAX_WALK; n++) {
        remat_model *m = (remat_model *)c;
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_weights_load(path, c, 1, &m);
        remat_mem_fail_at(0);
        if (remat_mem_alloc_count() - before < (uint64_t)n) {
            CHECK(st == REMAT_OK && m && remat_model_params_hash(m) == remat_model_params_hash(src), "load %s", path);
            remat_model_free(m);
            break;
        }
        *bad += st != REMAT_ERR_NOMEM || m != NULL || !*remat_errmsg();
    }
    return n;
}

/* Walks remat_weights_load for both formats. */
static void walk_weights(void)
{
    remat_config c;
    config(&c, 0.0f);
    remat_model *src = NULL;
    if (remat_model_create(&c, 5, &src)) { CHECK(0, "create"); return; }
    char path[2][64];
    remat_weights_format fmt[2] = { REMAT_WEIGHTS_LLMC, REMAT_WEIGHTS_SAFETENSORS };
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "/tmp/remat-allocfail-%ld-%d", (long)getpid(), k);
        if (remat_weights_save(src, path[k], fmt[k])) { CHECK(0, "save: %s", remat_errmsg()); continue; }
        int bad, n = walk_load(path[k], &c, src, &bad);
        CHECK(bad == 0 && n > 5 && n < MAX_WALK, "weights load (format %d): %d of %d failures mishandled", (int)fmt[k],
              bad, n - 1);
        printf("weights load (format %d): %d allocations, each made to fail\n", (int)fmt[k], n - 1);
        /* a save's allocations too: NOMEM, and the file is untouched */
        for (n = 1; n < MAX_WALK; n++) {
            uint64_t before = remat_mem_alloc_count();
            remat_mem_fail_at((uint64_t)n);
            remat_status st = remat_weights_save(src, path[k], fmt[k]);
            remat_mem_fail_at(0);
            if (remat_mem_alloc_count() - before < (uint64_t)n) break;
            remat_weights_format got;
            remat_config shape;
            CHECK(st == REMAT_ERR_NOMEM && remat_weights_probe(path[k], &shape, &got) == REMAT_OK && got == fmt[k],
                  "save, failing allocation %d: status %d", n, (int)st);
        }
        unlink(path[k]);
    }
    remat_model_free(src);
}

/* Walks remat_weights_load and remat_weights_save_hf over a Llama model as
 * a Hugging Face directory in shards (config.json, the index, a header per
 * shard): a failed save leaves a directory that still loads the model. */
static void walk_hf(void)
{
    remat_config c;
    config(&c, 0.0f);
    c.arch = REMAT_ARCH_LLAMA;
    c.n_kv_head = 1;
    c.ffn_dim = 24;
    remat_model *src = NULL;
    if (remat_model_create(&c, 5, &src)) { CHECK(0, "create llama: %s", remat_errmsg()); return; }
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/remat-allocfail-%ld-hf", (long)getpid());
    if (remat_weights_save_hf(src, dir, REMAT_DTYPE_FP32, 1000)) { CHECK(0, "save: %s", remat_errmsg()); goto out; }
    int bad, n = walk_load(dir, &c, src, &bad);
    CHECK(bad == 0 && n > 20 && n < MAX_WALK, "hf directory load: %d of %d failures mishandled", bad, n - 1);
    printf("hf directory load: %d allocations, each made to fail\n", n - 1);
    for (n = 1, bad = 0; n < MAX_WALK; n++) {
        uint64_t before = remat_mem_alloc_count();
        remat_mem_fail_at((uint64_t)n);
        remat_status st = remat_weights_save_hf(src, dir, REMAT_DTYPE_FP32, 1000);
        remat_mem_fail_at(0);
        if (remat_mem_alloc_count() - before < (uint64_t)n) break;
        remat_model *m = NULL;
        bad += st != REMAT_ERR_NOMEM || remat_weights_load(dir, &c, 1, &m) != REMAT_OK ||
               remat_model_params_hash(m) != remat_model_params_hash(src);
        remat_model_free(m);
    }
    CHECK(bad == 0 && n > 5 && n < MAX_WALK, "hf directory save: %d of %d failures mishandled", bad, n - 1);
    printf("hf directory save: %d allocations, each made to fail\n", n - 1);
out: {
        DIR *d = opendir(dir);
        struct dirent *de;
        char p[64 + 256 + 2];
        while (d && (de = readdir(d)))
            if (de->d_name[0] != '.') { snprintf(p, sizeof p, "%s/%s", dir, de->d_name); unlink(p); }
        if (d) closedir(d);
        rmdir(dir);
    }
    remat_model_free(src);
}

/* Walks one planner call (op 0..5) until it no longer fails. */
static remat_status planner_op(int op, const remat_config *c, const char *dir)
{
    remat_plan_row row = { 0 };
    remat_plan_row *rows = NULL;
    size_t nrows = 0;
    int best = 0;
    remat_status st = REMAT_OK;
    remat_profile *p = NULL, *q = NULL;
    char path[300];
    switch (op) {
    case 0: st = remat_plan_evaluate(c, NULL, "every:2,selective", 0, 0, &row); break;
    case 1: st = remat_plan_optimal(c, NULL, (uint64_t)1 << 40, 1, &row); break;
    case 2:
        st = remat_plan_pareto(c, NULL, &rows, &nrows);
        if (st && (rows || nrows)) st = REMAT_ERR_STATE;   /* outputs must be empty on failure */
        remat_plan_rows_free(rows, nrows);
        return st;
    case 3: st = remat_plan_maximize(c, NULL, REMAT_PLAN_SEQ, (uint64_t)64 << 20, 0, &best, &row); break;
    case 4: return remat_plan_min_peak(c, &row.peak_bytes);
    default:
        snprintf(path, sizeof path, "%s/p.txt", dir);
        if (!(st = remat_profile_model(c, 0, &p)) && !(st = remat_profile_save(p, path)))
            st = remat_profile_load(c, path, &q);
        if (st && q) st = REMAT_ERR_STATE;
        remat_profile_free(p);
        remat_profile_free(q);
        return st;
    }
    if (st && row.policy) st = REMAT_ERR_STATE;   /* no plan on failure */
    remat_plan_row_clear(&row);
    return st;
}

/* The planner makes tens of thousands of small allocations (fronts grow by
 * realloc), too many to fail each in turn: it fails the first 16, the last,
 * and 24 spread evenly between, counted from a run that succeeds. */
static void walk_planner(void)
{
    static const char *names[] = {"evaluate", "optimal", "pareto", "maximize", "min_peak", "profile"};
    remat_config c;
    config(&c, 0.0f);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/remat-allocfail-XXXXXX");
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    for (int op = 0; op < 6; op++) {
        uint64_t before = remat_mem_alloc_count();
        remat_status st = planner_op(op, &c, dir);
        uint64_t total = remat_mem_alloc_count() - before;
        CHECK(st == REMAT_OK && total > 0, "planner %s: %d, %llu allocations", names[op], (int)st,
              (unsigned long long)total);
        int bad = 0, tried = 0;
        for (int k = 0; k < 16 + 24 + 1; k++) {
            uint64_t n = k < 16 ? (uint64_t)k + 1 : k < 40 ? 16 + (total - 16) * (uint64_t)(k - 15) / 25 : total;
            if (n > total || (k >= 16 && n <= 16)) continue;
            tried++;
            remat_mem_fail_at(n);
            st = planner_op(op, &c, dir);
            remat_mem_fail_at(0);
            if (st != REMAT_ERR_NOMEM || !*remat_errmsg()) {
                bad++;
                fprintf(stderr, "planner %s, failing allocation %llu of %llu: status %d (%s)\n", names[op],
                        (unsigned long long)n, (unsigned long long)total, (int)st, remat_errmsg());
            }
        }
        CHECK(bad == 0 && tried > 0, "planner %s: %d of %d failures mishandled", names[op], bad, tried);
    }
    char path[300];
    snprintf(path, sizeof path, "%s/p.txt", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    remat_set_threads(1);
    walk_parallel();
    walk_create(0.0f);
    walk_create(0.1f);
    walk_step("none", 0.0f);
    walk_step("full", 0.1f);
    walk_step("every:2,selective", 0.1f);
    walk_step("revolve:2,pointwise", 0.0f);
    walk_step("save:qkv+fch", 0.1f);
    walk_policy("revolve:3,selective");
    walk_policy("first:2,save:qkv");
    walk_simulate("every:2,selective");
    walk_weights();
    walk_hf();
    walk_planner();
    return TEST_REPORT();
}
