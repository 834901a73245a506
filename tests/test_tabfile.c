/*
 * test_tabfile.c -- tables read from files (remat.h, "tables read from
 * files"; src/io/tablefile.c, src/table/custom.c): what the planner, the
 * simulator and the cost model make of one, and every refusal.
 *
 *   - the simulator's stored bytes, plus outside_bytes, are the kept bytes
 *     the numbers say, under no checkpoint, per-block checkpoints and
 *     segments; a per-block plan's peak is its kept bytes + reserve_bytes,
 *     a segment's re-run at least that;
 *   - a checkpointed block costs its whole forward again (the framework
 *     re-runs it), a selective keep-set only the other saved entry's;
 *   - the planner's plan for kept bytes K (K + reserve) keeps at most K and
 *     is no slower than every named policy that keeps no more; the minimum;
 *   - times are the median of the blocks'; the static bytes are the file's;
 *   - the same bytes load as the same id, counted; an unloaded id names
 *     nothing, even when its slot is reused; the engine refuses the config;
 *   - a parsed file written back parses to the same table;
 *   - 20 malformed files, each refused with REMAT_ERR_FORMAT in one line
 *     that says what is wrong;
 *   - version 2, blocks of their own (random small chains): the simulator's
 *     kept bytes and peak against a count of the file's numbers under every
 *     per-block plan, each block's own time in the cost model, and the
 *     planner's optimum and minimum against an exhaustive enumeration of
 *     every plan string (each simulated);
 *   - version 3: measured working sets and contexts read and written back; the
 *     contexts each plan's checkpoints hold, counted by hand on a toy T5 and
 *     from remat_plan_tree under the planner's plans and revolve's (nested);
 *     12 malformed version-3 files refused in one line;
 *   - a 255-byte name kept whole; lookups on one thread while another loads
 *     and unloads (a stale id is always refused, a held one always found).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "remat.h"
#include "io/io.h"
#include "core/core.h"

typedef unsigned long long ull;

/* a table: L blocks, each saving e[0..n) (cheap[k]) with output x */
typedef struct spec {
    int L, n, selective, input_kept, keeps_input;
    ull e[8], x, before, after, params;
    int cheap[8];
    double fwd, bwd, cheap_fwd;
} spec;

static char *table_json(const spec *s, const char *block_extra, const char *top_extra)
{
    size_t cap = 4096 + (size_t)s->L * 512;
    char *b = malloc(cap);
    size_t k = (size_t)snprintf(b, cap, "{\"format\": \"remat-table\", \"version\": 1, \"name\": \"t\", \"device\": \"test\", "
                                "\"selective\": %s, \"input\": {\"bytes\": %llu, \"kept\": %s, \"saved_bytes\": %llu, "
                                "\"forward_ms\": 0.25, \"backward_ms\": 0.5}, \"blocks\": [",
                                s->selective ? "true" : "false", s->x, s->input_kept ? "true" : "false", s->before);
    for (int l = 0; l < s->L; l++) {
        k += (size_t)snprintf(b + k, cap - k, "%s{\"saved\": [", l ? ", " : "");
        for (int i = 0; i < s->n; i++)
            k += (size_t)snprintf(b + k, cap - k, "%s{\"bytes\": %llu, \"cheap\": %s}", i ? ", " : "", s->e[i],
                                  s->cheap[i] ? "true" : "false");
        k += (size_t)snprintf(b + k, cap - k, "], \"output_bytes\": %llu, \"forward_ms\": %.17g, \"backward_ms\": %.17g, "
                              "\"cheap_forward_ms\": %.17g%s}", s->x, s->fwd + 0.001 * (l % 3), s->bwd, s->cheap_fwd,
                              block_extra && l == s->L - 1 ? block_extra : "");
    }
    snprintf(b + k, cap - k, "], \"head\": {\"saved_bytes\": %llu, \"keeps_input\": %s, \"forward_ms\": 1, "
             "\"backward_ms\": 2}, \"params_bytes\": %llu, \"grads_bytes\": %llu, \"optimizer_bytes\": %llu, "
             "\"optimizer_ms\": 3%s}", s->after, s->keeps_input ? "true" : "false", s->params, s->params, 2 * s->params,
             top_extra ? top_extra : "");
    return b;
}

static const spec BASE = { 6, 3, 0, 1, 1, { 65536, 16384, 131072 }, 16384, 512, 40000, 1000000, { 0, 1, 0 }, 1.0, 2.0, 0.25 };

static ull saved_sum(const spec *s, int cheap)
{
    ull t = 0;
    for (int i = 0; i < s->n; i++)
        if (!s->selective || s->cheap[i] == cheap) t += s->e[i];
    return t;
}

/* kept bytes the numbers say for a plan whose blocks keep kept_blocks of their saved bytes in all
 * and whose boundaries kept are nx (the chain's input and every block output kept) */
static ull kept_of(const spec *s, ull saved_kept, int nx)
{
    return (ull)nx * s->x + saved_kept + s->before + s->after -
           (s->input_kept ? 0 : s->x) - (s->keeps_input ? 0 : s->x);
}

static int load(const spec *s, remat_config *c, remat_profile **p, remat_table_info *info)
{
    char *j = table_json(s, NULL, NULL);
    remat_status st = remat_table_read(j, strlen(j), c, p);
    free(j);
    CHECK(st == REMAT_OK, "a valid table: %s", remat_errmsg());
    if (st) return 0;
    CHECK(remat_table_get_info(c, info) == REMAT_OK, "info: %s", remat_errmsg());
    return 1;
}

static remat_plan_row eval(const remat_config *c, const remat_profile *p, const char *pol)
{
    remat_plan_row r;
    remat_status st = remat_plan_evaluate(c, p, pol, 0, 1, &r);
    CHECK(st == REMAT_OK, "%s: %s", pol, remat_errmsg());
    return r;
}

/* stored + outside, peak and times of plans, for one spec */
static void plans(const spec *s)
{
    remat_config c;
    remat_profile *p = NULL;
    remat_table_info info;
    if (!load(s, &c, &p, &info)) return;
    int L = s->L;
    double med = s->fwd + 0.001 * (L >= 3 ? 1 : L == 2 ? 0.5 : 0);   /* the blocks' median forward */
    ull E = saved_sum(s, 0), C = s->selective ? saved_sum(s, 1) : 0, full = s->selective ? 3 : 1;
    CHECK(c.framework == REMAT_FRAMEWORK_TABLE && c.n_layer == L && c.table > 0, "config: framework %d, %d layers",
          (int)c.framework, c.n_layer);
    CHECK(info.blocks == L && info.block_saved_bytes == E + C && info.output_bytes == s->x, "info: %d blocks, %llu, %llu",
          info.blocks, (ull)info.block_saved_bytes, (ull)info.output_bytes);
    CHECK(remat_plan_static_bytes(&c) == 4 * s->params, "static bytes %llu", (ull)remat_plan_static_bytes(&c));
    remat_plan_row none = eval(&c, p, "none");
    ull want = kept_of(s, (ull)L * (E + C), L + 1);
    CHECK(none.stored_bytes + (ull)info.outside_bytes == want, "none: stored %llu + outside %lld, want %llu kept",
          (ull)none.stored_bytes, (long long)info.outside_bytes, want);
    CHECK(none.peak_bytes == want + info.reserve_bytes, "none: peak %llu, want kept %llu + reserve %llu",
          (ull)none.peak_bytes, want, (ull)info.reserve_bytes);
    /* every per-block plan of keep-all / keep-nothing */
    srand(7);
    for (int trial = 0; trial < 40; trial++) {
        char pol[512] = "plan:";
        int nck = 0;
        for (int l = 0; l < L; l++) {
            int ck = rand() % 2;
            nck += ck;
            snprintf(pol + strlen(pol), sizeof pol - strlen(pol), "%sA%llx", l ? "." : "", ck ? 0ULL : full);
        }
        remat_plan_row r = eval(&c, p, pol);
        ull k = kept_of(s, (ull)(L - nck) * (E + C), L + 1);
        CHECK(r.stored_bytes + (ull)info.outside_bytes == k, "%s: kept %llu, want %llu", pol,
              (ull)(r.stored_bytes + info.outside_bytes), k);
        CHECK(r.peak_bytes == k + info.reserve_bytes, "%s: peak %llu, want kept + reserve %llu", pol, (ull)r.peak_bytes,
              k + info.reserve_bytes);
        /* a checkpointed block is re-run whole: its forward again */
        CHECK(fabs(r.step_ms_pred - none.step_ms_pred - nck * med) < 1e-9 * (1 + nck) + 1e-12,
              "%s: %.6f ms, none %.6f, %d blocks re-run", pol, r.step_ms_pred, none.step_ms_pred, nck);
        remat_plan_row_clear(&r);
    }
    /* a segment of three blocks keeps only its input and output; its re-run holds all three */
    char pol[256] = "plan:C3";
    if (L < 4) goto planner;
    for (int l = 3; l < L; l++) strcat(pol, s->selective ? ".A3" : ".A1");
    strcat(pol, s->selective ? ".A3.A3.A0" : ".A1.A1.A0");
    remat_plan_row r = eval(&c, p, pol);
    ull k = kept_of(s, (ull)(L - 3) * (E + C), L + 1 - 2);
    CHECK(r.stored_bytes + (ull)info.outside_bytes == k && r.peak_bytes >= k + info.reserve_bytes,
          "%s: kept %llu (want %llu), peak %llu", pol, (ull)(r.stored_bytes + info.outside_bytes), k, (ull)r.peak_bytes);
    remat_plan_row_clear(&r);
planner:
    if (s->selective) {   /* keep expensive: re-run the cheap part; keep cheap: the rest */
        char pe[256] = "plan:", pc[256] = "plan:";
        for (int l = 0; l < L; l++) {
            strcat(pe, l ? ".A1" : "A1");
            strcat(pc, l ? ".A2" : "A2");
        }
        remat_plan_row re = eval(&c, p, pe), rc = eval(&c, p, pc);
        CHECK(fabs(re.step_ms_pred - none.step_ms_pred - L * s->cheap_fwd) < 1e-9, "keep expensive: %.6f vs %.6f",
              re.step_ms_pred, none.step_ms_pred);
        CHECK(fabs(rc.step_ms_pred - none.step_ms_pred - L * (med - s->cheap_fwd)) < 1e-9,
              "keep cheap: %.6f vs %.6f", rc.step_ms_pred, none.step_ms_pred);
        CHECK(re.stored_bytes + (ull)info.outside_bytes == kept_of(s, (ull)L * E, L + 1), "keep expensive: kept %llu",
              (ull)(re.stored_bytes + info.outside_bytes));
        remat_plan_row_clear(&re);
        remat_plan_row_clear(&rc);
    }
    /* the planner, on kept bytes: no slower than the named policies that keep no more */
    uint64_t minp;
    CHECK(remat_plan_min_peak(&c, &minp) == REMAT_OK, "min peak: %s", remat_errmsg());
    for (int pct = 20; pct <= 100; pct += 20) {
        uint64_t K = want * (uint64_t)pct / 100;
        remat_plan_row opt;
        remat_status st = remat_plan_optimal(&c, p, K + info.reserve_bytes, 1, &opt);
        if (K + info.reserve_bytes < minp) {
            CHECK(st == REMAT_ERR_BUDGET, "%d%%: below the minimum, yet %d", pct, (int)st);
            continue;
        }
        CHECK(st == REMAT_OK, "%d%%: %s", pct, remat_errmsg());
        if (st) continue;
        CHECK(opt.stored_bytes + (ull)info.outside_bytes <= K, "%d%%: the plan keeps %llu > %llu", pct,
              (ull)(opt.stored_bytes + info.outside_bytes), (ull)K);
        static const char *named[] = { "none", "full", "every:2", "every:3", "sqrt" };
        for (int i = 0; i < 5; i++) {
            remat_plan_row q = eval(&c, p, named[i]);
            if (q.peak_bytes <= K + info.reserve_bytes)
                CHECK(opt.step_ms_pred <= q.step_ms_pred * (1 + 1e-12), "%d%%: %s is faster (%.4f < %.4f)", pct,
                      named[i], q.step_ms_pred, opt.step_ms_pred);
            remat_plan_row_clear(&q);
        }
        remat_plan_row_clear(&opt);
    }
    /* the profile: the blocks' median forward, the file's other times */
    int out = s->selective ? 2 : 1;
    double got = remat_profile_op_ms(p, 0, 0) + (s->selective ? remat_profile_op_ms(p, 1, 0) : 0);
    CHECK(fabs(got - med) < 1e-12 && remat_profile_op_ms(p, out, 1) == s->bwd && remat_profile_op_ms(p, -1, 0) == 3,
          "profile: block forward %.6f (want the median %.6f), backward %.3f, update %.3f", got, med,
          remat_profile_op_ms(p, out, 1), remat_profile_op_ms(p, -1, 0));
    CHECK(strstr(remat_profile_describe(p), "test") != NULL, "profile: %s", remat_profile_describe(p));
    /* what a person reads */
    size_t n = 0;
    CHECK(remat_plan_explain(&c, "full", NULL, 0, &n) == REMAT_OK && n > 0, "explain: %s", remat_errmsg());
    char *text = malloc(n + 1);
    CHECK(remat_plan_explain(&c, "full", text, n + 1, NULL) == REMAT_OK &&
          strstr(text, "keep only its output; recompute the whole layer") != NULL, "explain full: %s", text);
    free(text);
    remat_plan_row_clear(&none);
    remat_model *m = NULL;
    CHECK(remat_model_create(&c, 1, &m) != REMAT_OK && !m, "the engine runs a file's table");
    remat_profile_free(p);
    remat_table_unload(&c);
    CHECK(remat_config_check(&c) == REMAT_ERR_INVALID, "an unloaded table's config is accepted");
}

static void ids(void)
{
    char *j = table_json(&BASE, NULL, NULL);
    remat_config a, b, c;
    CHECK(remat_table_read(j, strlen(j), &a, NULL) == REMAT_OK && remat_table_read(j, strlen(j), &b, NULL) == REMAT_OK,
          "load twice: %s", remat_errmsg());
    CHECK(a.table == b.table, "the same bytes: ids %d and %d", a.table, b.table);
    remat_table_unload(&a);
    CHECK(remat_config_check(&b) == REMAT_OK, "the second load ended with the first unload");
    remat_table_unload(&b);
    CHECK(remat_config_check(&b) == REMAT_ERR_INVALID, "the last unload did not end it");
    CHECK(remat_table_read(j, strlen(j), &c, NULL) == REMAT_OK && c.table != b.table && remat_config_check(&b),
          "a reloaded table reuses the old id %d (now %d)", b.table, c.table);
    remat_table_info info;
    CHECK(remat_table_get_info(&b, &info) == REMAT_ERR_INVALID, "info of an unloaded table");
    remat_table_unload(&c);
    remat_config d;
    remat_config_default(&d);
    d.table = 3;
    CHECK(remat_config_check(&d) == REMAT_ERR_INVALID, "a table id without the framework");
    free(j);
}

static void round_trip(void)
{
    char *j = table_json(&BASE, NULL, ", \"checkpoint\": {\"context_bytes\": 4, \"call_bytes\": 5056}");
    remat_tabfile t, u;
    char *d1 = NULL, *d2 = NULL;
    CHECK(remat_tabfile_parse(j, strlen(j), "t", &t) == REMAT_OK, "parse: %s", remat_errmsg());
    CHECK(remat_tabfile_dump(&t, &d1) == REMAT_OK && remat_tabfile_parse(d1, strlen(d1), "d", &u) == REMAT_OK &&
          remat_tabfile_dump(&u, &d2) == REMAT_OK && !strcmp(d1, d2), "the dump is not a fixed point");
    CHECK(u.chain[0].nblock == t.chain[0].nblock && u.chain[0].block[2].forward_ms == t.chain[0].block[2].forward_ms &&
          u.context_bytes == 4 && u.call_bytes == 5056 && u.chain[0].input_saved == t.chain[0].input_saved,
          "the round trip changes the table");
    remat_config c;
    remat_table_info info;
    CHECK(remat_table_read(j, strlen(j), &c, NULL) == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK &&
          info.context_bytes == 4 && info.call_bytes == 5056, "the checkpoint object: %s", remat_errmsg());
    remat_table_unload(&c);
    remat_tabfile_clear(&t);
    remat_tabfile_clear(&u);
    free(d1);
    free(d2);
    free(j);
}

/* ---- version 3: measured working sets and contexts --------------------------------- */

/* fuzz/corpus/table/v3-t5.json: two chains of 3 blocks (plan numbers 0-2, the junction 3, 4-6),
 * contexts A (4096 B, made by block 0, taken by 1 and 2), B (2048 B, made at the junction, taken by
 * 5 and 6), C (512 B, made before, taken by 0 and 4), a checkpoint call 5056 B */
static const char *V3T5 =
    "{\"format\": \"remat-table\", \"version\": 3, \"name\": \"toy-t5-v3\", \"device\": \"cpu\", \"selective\": f"
    "alse, \"chains\": [{\"name\": \"encoder\", \"input\": {\"bytes\": 8192, \"kept\": true, \"saved_bytes\": 256"
    ", \"forward_ms\": 0.05, \"backward_ms\": 0.05, \"work_bytes\": 8192, \"grad_live_bytes\": 40960}, \"blocks\""
    ": [{\"saved\": [{\"bytes\": 32768, \"cheap\": false}, {\"bytes\": 8192, \"cheap\": false}], \"output_bytes\""
    ": 8192, \"forward_ms\": 0.6, \"backward_ms\": 1.0, \"cheap_forward_ms\": 0, \"work_bytes\": 24576}, {\"saved"
    "\": [{\"bytes\": 32768, \"cheap\": false}, {\"bytes\": 8192, \"cheap\": false}], \"output_bytes\": 8192, \"f"
    "orward_ms\": 0.5, \"backward_ms\": 1.0, \"cheap_forward_ms\": 0, \"work_bytes\": 25600}, {\"saved\": [{\"byt"
    "es\": 32768, \"cheap\": false}, {\"bytes\": 8192, \"cheap\": false}], \"output_bytes\": 8192, \"forward_ms\""
    ": 0.5, \"backward_ms\": 1.0, \"cheap_forward_ms\": 0, \"work_bytes\": 26624}], \"head\": {\"saved_bytes\": 4"
    "096, \"keeps_input\": true, \"forward_ms\": 0.1, \"backward_ms\": 0.1, \"output_bytes\": 8192, \"work_bytes"
    "\": 16384}}, {\"name\": \"decoder\", \"reads\": [\"encoder\"], \"input\": {\"bytes\": 4096, \"kept\": true, "
    "\"saved_bytes\": 256, \"forward_ms\": 0.05, \"backward_ms\": 0.05, \"work_bytes\": 0, \"grad_live_bytes\": 0"
    "}, \"blocks\": [{\"saved\": [{\"bytes\": 16384, \"cheap\": false}, {\"bytes\": 4096, \"cheap\": false}, {\"b"
    "ytes\": 20480, \"cheap\": false}], \"output_bytes\": 4096, \"forward_ms\": 0.6, \"backward_ms\": 1.0, \"chea"
    "p_forward_ms\": 0, \"work_bytes\": 24576}, {\"saved\": [{\"bytes\": 16384, \"cheap\": false}, {\"bytes\": 40"
    "96, \"cheap\": false}, {\"bytes\": 20480, \"cheap\": false}], \"output_bytes\": 4096, \"forward_ms\": 0.5, "
    "\"backward_ms\": 1.0, \"cheap_forward_ms\": 0, \"work_bytes\": 25600}, {\"saved\": [{\"bytes\": 16384, \"che"
    "ap\": false}, {\"bytes\": 4096, \"cheap\": false}, {\"bytes\": 20480, \"cheap\": false}], \"output_bytes\": "
    "4096, \"forward_ms\": 0.5, \"backward_ms\": 1.0, \"cheap_forward_ms\": 0, \"work_bytes\": 26624}], \"head\":"
    " {\"saved_bytes\": 4096, \"keeps_input\": true, \"forward_ms\": 0.1, \"backward_ms\": 0.1, \"work_bytes\": 3"
    "2768}}], \"params_bytes\": 500000, \"grads_bytes\": 500000, \"optimizer_bytes\": 1000000, \"optimizer_ms\": "
    "0.5, \"checkpoint\": {\"context_bytes\": 0, \"call_bytes\": 5056}, \"optimizer_work_bytes\": 65536, \"inputs"
    "_bytes\": 1024, \"contexts\": [{\"bytes\": 4096, \"made_by\": 0, \"blocks\": [1, 2]}, {\"bytes\": 2048, \"ma"
    "de_by\": 3, \"blocks\": [5, 6]}, {\"bytes\": 512, \"made_by\": -1, \"blocks\": [0, 4]}]}";

/* the table without its contexts, the same otherwise */
static char *v3_without_contexts(void)
{
    char *j = strdup(V3T5), *at = strstr(j, ", \"contexts\"");
    if (at) strcpy(at, "}");
    return j;
}

static void v3(void)
{
    remat_config c, c0;
    remat_profile *p = NULL, *p0 = NULL;
    remat_table_info info;
    remat_tabfile t, u;
    char *d1 = NULL, *d2 = NULL, *j0 = v3_without_contexts();
    CHECK(remat_tabfile_parse(V3T5, strlen(V3T5), "t", &t) == REMAT_OK && t.version == 3 && t.has_work &&
          t.nctx == 3 && t.ctx[1].made_by == 3 && t.ctx[1].nblocks == 2 && t.ctx[1].blocks[1] == 6 &&
          t.chain[0].input_live == 40960 && t.inputs_bytes == 1024 && t.chain[1].block[2].work_bytes == 26624,
          "version 3 parsed: %s", remat_errmsg());
    CHECK(remat_tabfile_dump(&t, &d1) == REMAT_OK && remat_tabfile_parse(d1, strlen(d1), "d", &u) == REMAT_OK &&
          remat_tabfile_dump(&u, &d2) == REMAT_OK && !strcmp(d1, d2) && u.nctx == 3 && u.has_work,
          "version 3: the dump is not a fixed point");
    remat_tabfile_clear(&t);
    remat_tabfile_clear(&u);
    free(d1);
    free(d2);
    CHECK(remat_table_read(V3T5, strlen(V3T5), &c, &p) == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK,
          "version 3 loads: %s", remat_errmsg());
    CHECK(remat_table_read(j0, strlen(j0), &c0, &p0) == REMAT_OK, "version 3 without contexts: %s", remat_errmsg());
    free(j0);
    /* the static bytes count the sample inputs and buffers (inputs_bytes) */
    CHECK(info.static_bytes == 500000 + 500000 + 1000000 + 1024, "static bytes %llu with inputs_bytes 1024",
          (ull)info.static_bytes);
    /* the contexts each plan holds, counted by hand (tree in the comment) */
    static const struct { const char *pol; ull ctx; int calls; } want[] = {
        { "none", 0, 0 },
        /* block 0, segment 1-2, blocks 4, 5, 6 checkpointed: C (block 0), A (the segment begins after block
         * 0, which made it), B (block 5, after the junction) */
        { "plan:A0.C2.A1.A0.A0.A0.A1.A0", 512 + 4096 + 2048, 5 },
        /* segment 0-2: it holds C (made before it) but not A (its own block 0 makes it); blocks 5, 6: B */
        { "plan:C3.A1.A1.A0.A0.A1.A1.A0", 512 + 2048, 3 },
        { "plan:A1.C2.A1.A1.A1.A1.A1.A0", 4096, 1 },
        { "plan:C3.A1.A1.A1.A1.A1.A1.A0", 512, 1 },
        /* block 4 alone: C, which it takes */
        { "plan:A1.A1.A1.A1.A0.A1.A1", 512, 1 },
        /* block 0 alone: C; A is its product */
        { "plan:A0.A1.A1.A1.A1.A1.A1", 512, 1 },
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        remat_table_row r, r0;
        remat_status st = remat_table_evaluate(&c, p, want[k].pol, &r);
        remat_status s0 = remat_table_evaluate(&c0, p0, want[k].pol, &r0);
        CHECK(st == REMAT_OK && s0 == REMAT_OK, "%s: %s", want[k].pol, remat_errmsg());
        if (st || s0) continue;
        CHECK(r.checkpoint_calls == want[k].calls && r.checkpoint_bytes - r0.checkpoint_bytes == want[k].ctx &&
              r0.checkpoint_bytes == (ull)want[k].calls * 5056 && r.kept_bytes - r0.kept_bytes == want[k].ctx,
              "%s: %d calls, checkpoint bytes %llu (%llu without contexts), want contexts %llu", want[k].pol,
              r.checkpoint_calls, (ull)r.checkpoint_bytes, (ull)r0.checkpoint_bytes, want[k].ctx);
        remat_table_row_clear(&r);
        remat_table_row_clear(&r0);
    }
    remat_profile_free(p);
    remat_profile_free(p0);
    remat_table_unload(&c);
    remat_table_unload(&c0);
}

/* contexts under the planner's plans, nested ones among them: what each holds against a count from
 * its tree (remat_plan_tree): a context is held when a checkpoint (nested too) runs a block that
 * takes it and begins after the block that made it */
static void v3_nested(void)
{
    static const struct { ull bytes; int made; int blocks[16], n; } X[] = {
        { 3000, -1, { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 }, 16 },
        { 700, 0, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 }, 15 }, { 50, 4, { 6, 9, 13 }, 3 },
        { 9, 7, { 8 }, 1 } };
    enum { L = 16, NX = 4 };
    char *j = malloc(16384), *j0 = malloc(16384);
    size_t k = 0;
    k += (size_t)snprintf(j + k, 16384 - k, "{\"format\": \"remat-table\", \"version\": 3, \"input\": {\"bytes\": 4096, "
                          "\"work_bytes\": 100}, \"blocks\": [");
    for (int l = 0; l < L; l++)
        k += (size_t)snprintf(j + k, 16384 - k, "%s{\"saved\": [{\"bytes\": 262144}, {\"bytes\": 65536}], \"output_bytes\": "
                              "4096, \"forward_ms\": %g, \"backward_ms\": 2, \"work_bytes\": 1000}", l ? ", " : "",
                              1.0 + 0.01 * l);
    k += (size_t)snprintf(j + k, 16384 - k, "], \"head\": {\"saved_bytes\": 4000, \"work_bytes\": 3000}, \"checkpoint\": "
                          "{\"call_bytes\": 5056}");
    memcpy(j0, j, k);
    snprintf(j0 + k, 16384 - k, "}");
    k += (size_t)snprintf(j + k, 16384 - k, ", \"contexts\": [");
    for (int x = 0; x < NX; x++) {
        k += (size_t)snprintf(j + k, 16384 - k, "%s{\"bytes\": %llu, \"made_by\": %d, \"blocks\": [", x ? ", " : "",
                              X[x].bytes, X[x].made);
        for (int q = 0; q < X[x].n; q++) k += (size_t)snprintf(j + k, 16384 - k, "%s%d", q ? ", " : "", X[x].blocks[q]);
        k += (size_t)snprintf(j + k, 16384 - k, "]}");
    }
    snprintf(j + k, 16384 - k, "]}");
    remat_config c, c0;
    remat_profile *p = NULL, *p0 = NULL;
    CHECK(remat_table_read(j, strlen(j), &c, &p) == REMAT_OK && remat_table_read(j0, strlen(j0), &c0, &p0) == REMAT_OK,
          "the tables: %s", remat_errmsg());
    free(j);
    free(j0);
    remat_table_row least, none;
    CHECK(remat_table_min_kept(&c, p, &least) == REMAT_OK && remat_table_evaluate(&c, p, "none", &none) == REMAT_OK,
          "min and none: %s", remat_errmsg());
    int nested = 0, plans = 0;
    char last[512] = "";
    /* the planner's plans from the least kept bytes to none's, then revolve's (nested all the way) */
    static const char *revolve[] = { "revolve:2", "revolve:3", "revolve:4", "revolve:5" };
    for (int step = 0; step <= 204; step++) {
        remat_table_row r, r0;
        if (step <= 200) {
            ull budget = least.kept_bytes + (none.kept_bytes - least.kept_bytes) * (ull)step / 200;
            if (remat_table_optimal(&c, p, budget, &r) != REMAT_OK) continue;
            if (!strcmp(last, r.row.policy)) { remat_table_row_clear(&r); continue; }
            snprintf(last, sizeof last, "%s", r.row.policy);
        } else {
            CHECK(remat_table_evaluate(&c, p, revolve[step - 201], &r) == REMAT_OK, "%s: %s", revolve[step - 201],
                  remat_errmsg());
        }
        CHECK(remat_table_evaluate(&c0, p0, r.row.policy, &r0) == REMAT_OK, "%s: %s", r.row.policy, remat_errmsg());
        remat_plan_node v[128];
        size_t n = 0;
        CHECK(remat_plan_tree(&c, r.row.policy, v, 128, &n) == REMAT_OK, "tree: %s", remat_errmsg());
        ull want = 0;
        int deep = 0;
        for (int x = 0; x < NX; x++) {
            int held = 0;
            for (size_t i = 0; i < n; i++) {
                int ck = v[i].kind == REMAT_NODE_SEGMENT || v[i].keep != REMAT_KEEP_ALL;
                deep |= ck && v[i].depth > 0;
                for (int q = 0; q < X[x].n; q++)
                    held |= ck && v[i].first > X[x].made && X[x].blocks[q] >= v[i].first && X[x].blocks[q] < v[i].end;
            }
            if (held) want += X[x].bytes;
        }
        nested += deep;
        plans++;
        CHECK(r.checkpoint_bytes - r0.checkpoint_bytes == want && r.checkpoint_calls == r0.checkpoint_calls,
              "%s: contexts %llu, want %llu", r.row.policy, (ull)(r.checkpoint_bytes - r0.checkpoint_bytes), want);
        remat_table_row_clear(&r);
        remat_table_row_clear(&r0);
    }
    CHECK(plans >= 20 && nested >= 5, "%d plans, %d with nested checkpoints", plans, nested);
    printf("version 3 contexts: %d plans, %d with nested checkpoints\n", plans, nested);
    remat_table_row_clear(&least);
    remat_table_row_clear(&none);
    remat_profile_free(p);
    remat_profile_free(p0);
    remat_table_unload(&c);
    remat_table_unload(&c0);
}

/* ---- version 2: chains whose blocks differ ----------------------------------- */

typedef struct hspec {
    int L, selective, n[6], cheap[6][3], input_kept, keeps_input;
    ull e[6][3], y[6], x0, before, after;
    double fwd[6], bwd[6], cfwd[6];
} hspec;

static ull rnd(ull lo, ull hi) { return lo + (ull)rand() % (hi - lo + 1); }

static void hspec_random(hspec *h, int L)
{
    memset(h, 0, sizeof *h);
    h->L = L;
    h->selective = rand() % 2;
    h->input_kept = rand() % 4 != 0;
    h->keeps_input = rand() % 4 != 0;
    h->x0 = 1024 * rnd(1, 8);
    h->before = 64 * rnd(0, 8);
    h->after = 1024 * rnd(0, 16);
    for (int l = 0; l < L; l++) {
        h->n[l] = (int)rnd(1, 3);
        for (int k = 0; k < h->n[l]; k++) {
            h->e[l][k] = 1024 * rnd(0, 40);
            h->cheap[l][k] = rand() % 2;
        }
        h->y[l] = 1024 * rnd(1, 8);
        h->fwd[l] = 0.25 + 0.01 * (double)rnd(0, 100);
        h->bwd[l] = 0.5 + 0.01 * (double)rnd(0, 150);
        h->cfwd[l] = h->fwd[l] * 0.01 * (double)rnd(0, 60);
    }
}

static char *hspec_json(const hspec *h)
{
    size_t cap = 4096 + (size_t)h->L * 600, k;
    char *b = malloc(cap);
    k = (size_t)snprintf(b, cap, "{\"format\": \"remat-table\", \"version\": 2, \"name\": \"het\", \"device\": \"test\", "
                         "\"selective\": %s, \"input\": {\"bytes\": %llu, \"kept\": %s, \"saved_bytes\": %llu, "
                         "\"forward_ms\": 0.25, \"backward_ms\": 0.5}, \"blocks\": [", h->selective ? "true" : "false",
                         h->x0, h->input_kept ? "true" : "false", h->before);
    for (int l = 0; l < h->L; l++) {
        k += (size_t)snprintf(b + k, cap - k, "%s{\"saved\": [", l ? ", " : "");
        for (int i = 0; i < h->n[l]; i++)
            k += (size_t)snprintf(b + k, cap - k, "%s{\"bytes\": %llu, \"cheap\": %s}", i ? ", " : "", h->e[l][i],
                                  h->cheap[l][i] ? "true" : "false");
        k += (size_t)snprintf(b + k, cap - k, "], \"output_bytes\": %llu, \"forward_ms\": %.17g, \"backward_ms\": %.17g, "
                              "\"cheap_forward_ms\": %.17g}", h->y[l], h->fwd[l], h->bwd[l], h->cfwd[l]);
    }
    snprintf(b + k, cap - k, "], \"head\": {\"saved_bytes\": %llu, \"keeps_input\": %s, \"forward_ms\": 1, "
             "\"backward_ms\": 2}, \"optimizer_ms\": 3}", h->after, h->keeps_input ? "true" : "false");
    return b;
}

/* block l's saved bytes: expensive (cheap 0) or cheap (1); all of them unselective */
static ull hsaved(const hspec *h, int l, int cheap)
{
    ull t = 0;
    for (int i = 0; i < h->n[l]; i++)
        if (h->selective ? h->cheap[l][i] == cheap : !cheap) t += h->e[l][i];
    return t;
}

/* kept bytes, counted from the file's numbers, of a per-block plan: block l keeps mask[l] (bit 0 expensive or saved,
 * bit 1 cheap), every boundary kept */
static ull hkept(const hspec *h, const int *mask)
{
    ull k = h->x0 + h->before + h->after - (h->input_kept ? 0 : h->x0) - (h->keeps_input ? 0 : h->y[h->L - 1]);
    for (int l = 0; l < h->L; l++)
        k += h->y[l] + ((mask[l] & 1) ? hsaved(h, l, 0) : 0) + ((mask[l] & 2) ? hsaved(h, l, 1) : 0);
    return k;
}

/* every plan string of sub-problem F (type 1) or B (0) of n blocks, masks 0..nm-1, appended to buf at len */
typedef struct penum {
    const remat_config *c;
    const remat_profile *p;
    int nm, count, junctions, refused;
    uint64_t minpeak;
    size_t nplans;
    uint64_t *peaks;
    double *ms;
} penum;

typedef struct pstack { char s[256]; int want[8][2], top; } pstack;   /* sub-problems still to expand: (type, n) */

static void enum_rec(penum *e, pstack *ps)
{
    if (ps->top == 0) {
        remat_plan_row r;
        remat_status st = remat_plan_evaluate(e->c, e->p, ps->s, 0, 1, &r);
        /* with several chains, plans that checkpoint a junction or hold one in a segment are not plans */
        if (e->junctions && st == REMAT_ERR_POLICY && strstr(remat_errmsg(), "junction of two chains")) {
            e->refused++;
            return;
        }
        CHECK(st == REMAT_OK, "%s: %s", ps->s, remat_errmsg());
        if (!st) {
            e->peaks = realloc(e->peaks, (e->nplans + 1) * sizeof *e->peaks);
            e->ms = realloc(e->ms, (e->nplans + 1) * sizeof *e->ms);
            e->peaks[e->nplans] = r.peak_bytes;
            e->ms[e->nplans] = r.step_ms_pred;
            e->nplans++;
        }
        remat_plan_row_clear(&r);
        return;
    }
    int type = ps->want[ps->top - 1][0], n = ps->want[ps->top - 1][1];
    pstack q;
    if (type == 1 && n == 0) { q = *ps; q.top--; enum_rec(e, &q); return; }
    size_t len = strlen(ps->s);
    const char *dot = len > 5 ? "." : "";
    if (type == 0 && n == 1) {
        q = *ps; q.top--;
        snprintf(q.s + len, sizeof q.s - len, "%sA0", dot);
        enum_rec(e, &q);
        return;
    }
    for (int m = 0; m < e->nm; m++) {
        q = *ps;
        snprintf(q.s + len, sizeof q.s - len, "%sA%x", dot, m);
        q.want[q.top - 1][1] = n - 1;
        enum_rec(e, &q);
    }
    for (int j = 1; j <= (type ? n : n - 1); j++) {
        q = *ps;
        snprintf(q.s + len, sizeof q.s - len, "%sC%d", dot, j);
        /* preorder: the rest (type, n - j) first, then B(j) */
        q.want[q.top - 1][0] = 0;
        q.want[q.top - 1][1] = j;
        q.want[q.top][0] = type;
        q.want[q.top][1] = n - j;
        q.top++;
        enum_rec(e, &q);
    }
}

static void against_every_plan(const remat_config *cp, const remat_profile *p, int nm, int junctions, unsigned seed);

static void het_chain(unsigned seed, int L)
{
    hspec h;
    srand(seed);
    hspec_random(&h, L);
    char *j = hspec_json(&h);
    remat_config c;
    remat_profile *p = NULL;
    remat_table_info info;
    remat_status st = remat_table_read(j, strlen(j), &c, &p);
    free(j);
    CHECK(st == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK, "seed %u: %s", seed, remat_errmsg());
    if (st) return;
    int nm = h.selective ? 4 : 2, mask[6], full = nm - 1;
    /* the simulator against the file's numbers: every per-block plan of keep-all, keep-one (selective) or keep-none */
    double none_ms = 0;
    for (int trial = 0; trial < 24; trial++) {
        char pol[256] = "plan:";
        double rerun = 0;
        for (int l = 0; l < L; l++) {
            mask[l] = trial == 0 ? full : rand() % nm;
            snprintf(pol + strlen(pol), sizeof pol - strlen(pol), "%sA%x", l ? "." : "", mask[l]);
            /* what the block's re-run costs: the parts it did not keep (the whole block when nothing) */
            rerun += mask[l] == full ? 0 : mask[l] == 0 ? h.fwd[l]
                     : mask[l] == 1 ? (h.selective ? h.cfwd[l] : 0) : h.fwd[l] - h.cfwd[l];
        }
        remat_plan_row r = eval(&c, p, trial == 0 ? "none" : pol);
        ull k = hkept(&h, mask);
        CHECK(r.stored_bytes + (ull)info.outside_bytes == k, "seed %u %s: kept %llu, counted %llu", seed, pol,
              (ull)(r.stored_bytes + info.outside_bytes), k);
        CHECK(r.peak_bytes == k + info.reserve_bytes, "seed %u %s: peak %llu, want kept + reserve %llu", seed, pol,
              (ull)r.peak_bytes, k + info.reserve_bytes);
        if (trial == 0) none_ms = r.step_ms_pred;
        else CHECK(fabs(r.step_ms_pred - none_ms - rerun) < 1e-9, "seed %u %s: %.9f ms, none %.9f + re-runs %.9f", seed,
                   pol, r.step_ms_pred, none_ms, rerun);
        remat_plan_row_clear(&r);
    }
    against_every_plan(&c, p, nm, 0, seed);
    remat_profile_free(p);
    remat_table_unload(&c);
}

/* the planner's minimum and optimum at 9 budgets against every plan string of c's chain, each simulated */
static void against_every_plan(const remat_config *cp, const remat_profile *p, int nm, int junctions, unsigned seed)
{
    remat_config c = *cp;
    int L = c.n_layer;
    remat_status st;
    penum e = { &c, p, nm, 0, junctions, 0, UINT64_MAX, 0, NULL, NULL };
    pstack ps;
    memset(&ps, 0, sizeof ps);
    strcpy(ps.s, "plan:");
    ps.want[0][0] = 1;
    ps.want[0][1] = L;
    ps.top = 1;
    enum_rec(&e, &ps);
    uint64_t lo = UINT64_MAX, hi = 0, minp = 0;
    for (size_t i = 0; i < e.nplans; i++) {
        if (e.peaks[i] < lo) lo = e.peaks[i];
        if (e.peaks[i] > hi) hi = e.peaks[i];
    }
    CHECK(remat_plan_min_peak(&c, &minp) == REMAT_OK && minp == lo, "seed %u: min peak %llu, enumeration %llu of %zu plans",
          seed, (ull)minp, (ull)lo, e.nplans);
    for (int b = 0; b <= 8; b++) {
        uint64_t B = lo + (hi - lo) * (uint64_t)b / 8 + (b == 3 ? 1 : 0);
        double best = INFINITY;
        for (size_t i = 0; i < e.nplans; i++)
            if (e.peaks[i] <= B && e.ms[i] < best) best = e.ms[i];
        remat_plan_row opt;
        st = remat_plan_optimal(&c, p, B, 1, &opt);
        CHECK(st == REMAT_OK && opt.peak_bytes <= B && fabs(opt.step_ms_pred - best) <= 1e-9 * best,
              "seed %u, budget %llu: planner %s %.9f ms (peak %llu), enumeration %.9f ms: %s", seed, (ull)B,
              st ? "-" : opt.policy, st ? 0 : opt.step_ms_pred, st ? 0ULL : (ull)opt.peak_bytes, best,
              st ? remat_errmsg() : "");
        if (!st) remat_plan_row_clear(&opt);
    }
    CHECK(!junctions || e.refused > 0, "seed %u: no plan was refused for a junction", seed);
    free(e.peaks);
    free(e.ms);
}

/* two chains, the second reading the first's result: kept bytes counted from the file under "none" and with every
 * block checkpointed (the junction kept whole), and the planner against every plan */
static void two_chains(unsigned seed)
{
    hspec h[2];
    srand(seed);
    int sel = rand() % 2;
    ull R = 1024 * rnd(1, 8);
    char *b = malloc(16384);
    size_t k = (size_t)snprintf(b, 16384, "{\"format\": \"remat-table\", \"version\": 2, \"selective\": %s, "
                                "\"optimizer_ms\": 1, \"chains\": [", sel ? "true" : "false");
    ull want_none = 0, want_ck = 0;
    for (int ch = 0; ch < 2; ch++) {
        hspec_random(&h[ch], 1 + rand() % 2);
        h[ch].selective = sel;
        char *j = hspec_json(&h[ch]), *in = strstr(j, "\"input\""), *end = strstr(j, ", \"optimizer_ms\"");
        k += (size_t)snprintf(b + k, 16384 - k, "%s{\"name\": \"c%d\"%s, %.*s", ch ? ", " : "", ch,
                              ch ? ", \"reads\": [\"c0\"]" : "", (int)(end - in), in);
        if (!ch) k += (size_t)snprintf(b + k - 1, 16384 - k + 1, ", \"output_bytes\": %llu}", R) - 1;   /* head.output_bytes */
        k += (size_t)snprintf(b + k, 16384 - k, "}");
        free(j);
        int none[6] = { 3, 3, 3, 3, 3, 3 }, zero[6] = { 0 };
        want_none += hkept(&h[ch], none);
        want_ck += hkept(&h[ch], zero);
    }
    snprintf(b + k, 16384 - k, "]}");
    want_none += R;
    want_ck += R;
    remat_config c;
    remat_profile *p = NULL;
    remat_table_info info;
    remat_status st = remat_table_read(b, strlen(b), &c, &p);
    CHECK(st == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK, "seed %u: %s (%s)", seed, remat_errmsg(), b);
    free(b);
    if (st) return;
    CHECK(c.n_layer == h[0].L + 1 + h[1].L && remat_table_block_kinds(&c) >= 2, "seed %u: %d blocks", seed, c.n_layer);
    char pol[128] = "plan:";
    for (int l = 0; l < c.n_layer; l++) strcat(pol, l == 0 ? "" : "."), strcat(pol, l == h[0].L ? (sel ? "A3" : "A1") : "A0");
    remat_plan_row none = eval(&c, p, "none"), ck = eval(&c, p, pol);
    CHECK(none.stored_bytes + (ull)info.outside_bytes == want_none && ck.stored_bytes + (ull)info.outside_bytes == want_ck,
          "seed %u: kept none %llu (counted %llu), %s %llu (counted %llu)", seed,
          (ull)(none.stored_bytes + info.outside_bytes), want_none, pol, (ull)(ck.stored_bytes + info.outside_bytes),
          want_ck);
    CHECK(none.peak_bytes == want_none + info.reserve_bytes && ck.peak_bytes == want_ck + info.reserve_bytes,
          "seed %u: peaks %llu, %llu; kept + reserve %llu, %llu", seed, (ull)none.peak_bytes, (ull)ck.peak_bytes,
          want_none + info.reserve_bytes, want_ck + info.reserve_bytes);
    remat_plan_row_clear(&none);
    remat_plan_row_clear(&ck);
    /* a named policy stops its segments before the junction and keeps it whole */
    remat_plan_row full = eval(&c, p, "full"), ev = eval(&c, p, "every:4");
    CHECK(full.stored_bytes == ck.stored_bytes && ev.peak_bytes > 0, "seed %u: full keeps %llu, every block "
          "checkpointed %llu", seed, (ull)full.stored_bytes, (ull)ck.stored_bytes);
    remat_plan_row_clear(&full);
    remat_plan_row_clear(&ev);
    against_every_plan(&c, p, sel ? 4 : 2, 1, seed);
    remat_profile_free(p);
    remat_table_unload(&c);
}

/* every allocation of reading a file of two chains and planning it failed in turn: REMAT_ERR_NOMEM each time, never
 * a different plan; a sample of them when there are many */
static void het_allocfail(void)
{
    hspec h;
    srand(5);
    hspec_random(&h, 3);
    char *j = hspec_json(&h), *in = strstr(j, "\"input\""), *end = strstr(j, ", \"optimizer_ms\"");
    size_t cap = 3 * strlen(j);
    char *b = malloc(cap);
    snprintf(b, cap, "{\"format\": \"remat-table\", \"version\": 2, \"selective\": %s, \"chains\": [{\"name\": \"a\", "
             "%.*s}, {\"name\": \"b\", \"reads\": [\"a\"], %.*s}]}", h.selective ? "true" : "false", (int)(end - in), in,
             (int)(end - in), in);
    free(j);
    remat_config c;
    remat_profile *p = NULL;
    remat_plan_row want, got;
    CHECK(remat_table_read(b, strlen(b), &c, &p) == REMAT_OK, "two chains: %s", remat_errmsg());
    CHECK(remat_plan_optimal(&c, p, 0, 1, &want) == REMAT_OK, "plan: %s", remat_errmsg());
    uint64_t before = remat_mem_alloc_count();
    CHECK(remat_plan_optimal(&c, p, 0, 1, &got) == REMAT_OK, "plan again: %s", remat_errmsg());
    uint64_t total = remat_mem_alloc_count() - before;
    remat_plan_row_clear(&got);
    int bad = 0, walked = 0;
    for (uint64_t n = 1; n <= total; n += n < 64 ? 1 : total / 97 + 1, walked++) {
        remat_mem_fail_at(n);
        remat_status st = remat_plan_optimal(&c, p, 0, 1, &got);
        remat_mem_fail_at(0);
        if (st == REMAT_OK) {
            bad += strcmp(got.policy, want.policy) != 0;
            remat_plan_row_clear(&got);
        } else {
            bad += st != REMAT_ERR_NOMEM || !*remat_errmsg();
        }
    }
    for (uint64_t n = 1; n < 200; n++) {    /* reading it */
        remat_config d;
        remat_profile *q = NULL;
        remat_mem_fail_at(n);
        remat_status st = remat_table_read(b, strlen(b), &d, &q);
        remat_mem_fail_at(0);
        if (st == REMAT_OK) { remat_profile_free(q); remat_table_unload(&d); break; }
        bad += st != REMAT_ERR_NOMEM || q;
    }
    CHECK(!bad && walked > 60, "%d of %d failed allocations (of %llu) planning two chains gave another answer than "
          "REMAT_ERR_NOMEM or the same plan", bad, walked, (ull)total);
    remat_plan_row_clear(&want);
    remat_profile_free(p);
    remat_table_unload(&c);
    free(b);
}

/* the program of a chain whose blocks differ is quadratic in sub-problems: at most 256 blocks */
static void het_limit(void)
{
    hspec h;
    srand(3);
    hspec_random(&h, 6);
    char *j = hspec_json(&h), *bl = strstr(j, "\"blocks\": [") + 11, *end = strstr(bl, "], \"head\"");
    size_t one = (size_t)(end - bl), cap = strlen(j) + 50 * (one + 2);
    char *b = malloc(cap);
    size_t k = (size_t)snprintf(b, cap, "%.*s", (int)(bl - j), j);
    for (int i = 0; i < 43; i++) k += (size_t)snprintf(b + k, cap - k, "%s%.*s", i ? ", " : "", (int)one, bl);   /* 258 */
    snprintf(b + k, cap - k, "%s", end);
    remat_config c;
    remat_plan_row r;
    CHECK(remat_table_read(b, strlen(b), &c, NULL) == REMAT_OK && c.n_layer == 258, "258 blocks: %s", remat_errmsg());
    remat_status st = remat_plan_optimal(&c, NULL, 0, 1, &r);
    CHECK(st == REMAT_ERR_RANGE && strstr(remat_errmsg(), "at most 256 blocks (this one 258)"), "258 blocks planned: %d %s",
          (int)st, remat_errmsg());
    remat_table_unload(&c);
    free(b);
    free(j);
}

static void het(void)
{
    het_limit();
    het_allocfail();
    for (unsigned seed = 1; seed <= 12; seed++) het_chain(seed, 2 + (int)(seed % 3));
    for (unsigned seed = 21; seed <= 28; seed++) two_chains(seed);
}

/* the name a file gives, kept whole up to the reader's 255 bytes */
static void long_name(void)
{
    spec s = BASE;
    char name[256], top[300];
    for (int i = 0; i < 255; i++) name[i] = (char)('a' + i % 26);
    name[255] = 0;
    char *j = table_json(&s, NULL, NULL), *at = strstr(j, "\"name\": \"t\"");
    char *k = malloc(strlen(j) + 300);
    snprintf(top, sizeof top, "\"name\": \"%s\"", name);
    snprintf(k, strlen(j) + 300, "%.*s%s%s", (int)(at - j), j, top, at + strlen("\"name\": \"t\""));
    remat_config c;
    remat_table_info info;
    CHECK(remat_table_read(k, strlen(k), &c, NULL) == REMAT_OK && remat_table_get_info(&c, &info) == REMAT_OK &&
          !strcmp(info.name, name), "a 255-byte name is not kept whole: %s", remat_errmsg());
    remat_table_unload(&c);
    free(j);
    free(k);
}

/* one thread loads and unloads a table over and over while this one looks
 * up a table it holds and one whose last load has ended */
typedef struct churn { const char *json; int stop, loads, fails; } churn;
static void *churn_run(void *arg)
{
    churn *ch = arg;
    while (!__atomic_load_n(&ch->stop, __ATOMIC_ACQUIRE)) {
        remat_config c;
        if (remat_table_read(ch->json, strlen(ch->json), &c, NULL)) { ch->fails++; continue; }
        ch->loads++;
        remat_table_unload(&c);
    }
    return NULL;
}

static void threads(void)
{
    spec s = BASE, o = BASE;
    o.x = 8192;
    char *held = table_json(&s, NULL, NULL), *other = table_json(&o, NULL, NULL);
    remat_config h, stale;
    CHECK(remat_table_read(held, strlen(held), &h, NULL) == REMAT_OK &&
          remat_table_read(other, strlen(other), &stale, NULL) == REMAT_OK, "load: %s", remat_errmsg());
    remat_table_unload(&stale);
    churn ch = { other, 0, 0, 0 };
    pthread_t th;
    CHECK(pthread_create(&th, NULL, churn_run, &ch) == 0, "a thread");
    int found = 0, refused_ = 0;
    for (int i = 0; i < 200000; i++) {
        found += remat_config_check(&h) == REMAT_OK;
        refused_ += remat_config_check(&stale) == REMAT_ERR_INVALID;
    }
    __atomic_store_n(&ch.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK(found == 200000 && refused_ == 200000 && !ch.fails && ch.loads > 0,
          "lookups beside loads: held found %d, stale refused %d of 200000; %d loads, %d failed", found, refused_,
          ch.loads, ch.fails);
    remat_table_unload(&h);
    free(held);
    free(other);
}

/* a malformed file: FORMAT, one line, saying want */
static void refused(const char *json, const char *want)
{
    remat_config c;
    remat_profile *p = (remat_profile *)1;
    remat_status st = remat_table_read(json, strlen(json), &c, &p);
    const char *m = remat_errmsg();
    CHECK(st == REMAT_ERR_FORMAT && !p && !strchr(m, '\n') && strstr(m, want), "refusal: status %d, '%s' (want '%s')",
          (int)st, m, want);
    if (!st) remat_table_unload(&c);
}

static void refusals(void)
{
    spec s = BASE;
    char *j;
    refused("{\"format\": \"remat-table\"", "malformed table");
    refused("[1]", "not a JSON object");
    refused("{\"version\": 1}", "not a remat table");
    refused("{\"format\": \"remat-table\", \"version\": 4}", "version 4; this remat reads versions 1 to 3");
    refused("{\"format\": \"remat-table\"}", "version must be given");
    j = table_json(&s, ", \"extra\": 1", NULL);
    refused(j, "unknown key 'blocks[5].extra'");
    free(j);
    j = table_json(&s, NULL, ", \"colour\": 1");
    refused(j, "unknown key 'colour'");
    free(j);
    j = table_json(&s, NULL, ", \"checkpoint\": {\"call\": 1}");
    refused(j, "unknown key 'checkpoint.call'");
    free(j);
    j = table_json(&s, NULL, ", \"checkpoint\": 7");
    refused(j, "checkpoint must be an object");
    free(j);
    j = table_json(&s, NULL, NULL);
    char *at = strstr(j, "\"bytes\": 16384, \"cheap\"");
    memcpy(at, "\"bytes\": -1638", strlen("\"bytes\": -1638"));
    refused(j, "blocks[0].saved[1].bytes must be a whole number in [0, 281474976710656], got -1638");
    free(j);
    s.cheap_fwd = 5;
    j = table_json(&s, NULL, NULL);
    refused(j, "cheap_forward_ms 5 is more than its forward_ms");
    free(j);
    s = BASE;
    s.L = 0;
    j = table_json(&s, NULL, NULL);
    refused(j, "blocks must be an array of 1 to");
    free(j);
    s = BASE;
    s.x = 0;
    j = table_json(&s, NULL, NULL);
    refused(j, "output_bytes must be at least 1");
    free(j);
    /* blocks that differ: named, with the first difference */
    s = BASE;
    j = table_json(&s, NULL, NULL);
    at = strstr(strstr(j, "\"blocks\"") + 200, "\"bytes\": 16384");    /* a later block's tensor */
    memcpy(at, "\"bytes\": 16385", strlen("\"bytes\": 16385"));
    refused(j, "differs from block 0: its saved tensor 1 has 16385 bytes (cheap), block 0's 16384 (cheap)");
    free(j);
    j = table_json(&s, NULL, NULL);
    at = strstr(strstr(j, "\"blocks\"") + 300, "\"output_bytes\": 16384");
    memcpy(at, "\"output_bytes\": 16388", strlen("\"output_bytes\": 16388"));
    refused(j, "its output has 16388 bytes, block 0's 16384");
    free(j);
    j = table_json(&s, NULL, NULL);
    at = strstr(j, "\"input\": {\"bytes\": 16384");
    memcpy(at, "\"input\": {\"bytes\": 16383", strlen("\"input\": {\"bytes\": 16383"));
    refused(j, "the chain's input has 16383 bytes, a block's output 16384");
    free(j);
    j = table_json(&s, NULL, NULL);
    at = strstr(j, "\"forward_ms\": 0.25");
    memcpy(at, "\"forward_ms\": -1.0", strlen("\"forward_ms\": -1.0"));
    refused(j, "input.forward_ms must be a number in [0,");
    free(j);
    j = table_json(&s, NULL, ", \"name\": 3");
    refused(j, "malformed table");           /* a duplicate key */
    free(j);
    refused("{\"format\": \"remat-table\", \"version\": 1, \"input\": {\"bytes\": 1}, \"head\": {}, \"blocks\": "
            "[{\"saved\": 3, \"output_bytes\": 1}]}", "blocks[0].saved must be an array");
    refused("{\"format\": \"remat-table\", \"version\": 1, \"input\": {\"bytes\": 1}, \"blocks\": []}",
            "head must be an object");
    s = BASE;
    s.params = 1ULL << 46;     /* 2^46 + 2^46 + 2^47 = 2^48 fits; more does not */
    j = table_json(&s, NULL, NULL);
    remat_config c;
    CHECK(remat_table_read(j, strlen(j), &c, NULL) == REMAT_OK, "2^48 static bytes: %s", remat_errmsg());
    remat_table_unload(&c);
    free(j);
    s.params++;
    j = table_json(&s, NULL, NULL);
    refused(j, "params_bytes + grads_bytes + optimizer_bytes + inputs_bytes is more than 281474976710656 bytes");
    free(j);
    s = BASE;
    s.before = 1ULL << 47;
    s.after = (1ULL << 47) + 1;
    j = table_json(&s, NULL, NULL);
    refused(j, "the ops outside the chain keep more than 281474976710656 bytes");
    free(j);
    CHECK(remat_table_load("/nonexistent/t.json", &c, NULL) == REMAT_ERR_IO, "a missing file: %s", remat_errmsg());
    /* version 3's keys: contexts numbered as plans number the blocks, each after the block that made it,
     * none the junction of two chains; the measured bytes not in version 2 */
    static const struct { const char *from, *to, *want; } v3bad[] = {
        { "\"made_by\": 0, \"blocks\": [1, 2]", "\"made_by\": 0, \"blocks\": [2, 1]",
          "contexts[0].blocks[1] must be a block number in [3, 6], above the one before it and made_by" },
        { "\"made_by\": 0, \"blocks\": [1, 2]", "\"made_by\": 1, \"blocks\": [1, 2]",
          "contexts[0].blocks[0] must be a block number in [2, 6]" },
        { "\"made_by\": -1, \"blocks\": [0, 4]", "\"made_by\": -1, \"blocks\": [0, 3]",
          "contexts[2].blocks[1] is 3, the junction of two chains" },
        { "\"made_by\": -1, \"blocks\": [0, 4]", "\"made_by\": -1, \"blocks\": [0, 7]",
          "contexts[2].blocks[1] must be a block number in [1, 6]" },
        { "\"made_by\": -1, \"blocks\": [0, 4]", "\"made_by\": -2, \"blocks\": [0, 4]",
          "contexts[2].made_by must be a whole number in [-1, 6], got -2" },
        { "\"made_by\": -1, \"blocks\": [0, 4]", "\"made_by\": -1, \"blocks\": []",
          "contexts[2].blocks must be an array of 1 to 7 blocks" },
        { "{\"bytes\": 512, \"made_by\"", "{\"bytes\": 0, \"made_by\"", "contexts[2].bytes must be at least 1" },
        { "{\"bytes\": 512, \"made_by\"", "{\"size\": 512, \"made_by\"", "unknown key 'contexts[2].size'" },
        { "\"version\": 3", "\"version\": 2", "unknown key 'optimizer_work_bytes'" },
        { "\"inputs_bytes\": 1024", "\"inputs_bytes\": 281474974710657",
          "params_bytes + grads_bytes + optimizer_bytes + inputs_bytes is more than 281474976710656 bytes" },
        { "\"work_bytes\": 16384}", "\"work_bytes\": -1}", "chains[0].head.work_bytes must be a whole number" },
    };
    for (size_t k = 0; k < sizeof v3bad / sizeof v3bad[0]; k++) {
        const char *at = strstr(V3T5, v3bad[k].from);
        CHECK(at != NULL, "the toy has no '%s'", v3bad[k].from);
        if (!at) continue;
        size_t n = strlen(V3T5) + strlen(v3bad[k].to) + 1;
        j = malloc(n);
        snprintf(j, n, "%.*s%s%s", (int)(at - V3T5), V3T5, v3bad[k].to, at + strlen(v3bad[k].from));
        refused(j, v3bad[k].want);
        free(j);
    }
    j = table_json(&BASE, NULL, ", \"contexts\": []");
    refused(j, "unknown key 'contexts'");                 /* version 1 */
    free(j);
}

int main(void)
{
    spec s = BASE;
    plans(&s);
    s.selective = 1;
    plans(&s);
    s = BASE;
    s.input_kept = 0;        /* the chain's input is a sample input; the head drops the last output */
    s.keeps_input = 0;
    s.L = 5;
    plans(&s);
    s = BASE;
    s.L = 1;
    plans(&s);
    ids();
    het();
    long_name();
    threads();
    round_trip();
    v3();
    v3_nested();
    refusals();
    return TEST_REPORT();
}
