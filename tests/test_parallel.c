/*
 * test_parallel.c -- data parallelism and gradient accumulation
 * (engine/dpstep.c, table/dplayout.c, comm/comm.c):
 *   - the layout: slices cover the vector once, aligned; bit-reversed
 *     ownership is what recursive halving leaves each rank; the tree's
 *     buffer count; the loss tree; the byte and message counts;
 *   - sumsq in blocks equals sumsq bit for bit (the norm over ranks);
 *   - dropout keyed by global row: a micro-batch at row g draws the whole
 *     batch's mask for its rows (residual branch and attention, through
 *     the op dispatcher);
 *   - one micro-batch per step (set up or not) is exactly the plain step;
 *   - the same global batch and micro-batch over R = 1, 2 and 4 ranks:
 *     bitwise equal loss, summed gradient and parameters after updates,
 *     for four policies, with and without dropout, ZeRO-1 and not, bf16
 *     too when the build has oneDNN; each rank's memory equal to
 *     remat_parallel_memory_of's prediction and the bytes it sends to its
 *     comm_bytes; the activation peak equal to the simulator's.
 * R = 2 and 4 run this program again under `mpirun` (as its child: it
 * knows it was launched by MPI) and compare its lines with the R = 1 ones
 * computed here.  Without mpirun those comparisons are skipped.  Each
 * mpirun runs under coreutils' timeout: a job that hangs (a rank stuck in a
 * collective) is killed after REMAT_MPI_TIMEOUT seconds (default 120; each
 * job takes about a second here) and fails its check.
 */
// REMAT_TEST_REQUIRED: the bitwise equality across rank counts is the promise of data parallelism; CI installs openmpi-bin
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "remat.h"
#include "table/dplayout.h"
#include "kernels/kernels.h"
#include "ops/ops.h"
#include "harness.h"

/* ---- the layout ------------------------------------------------------------------ */

static void test_layout(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 2; c.n_embd = 32; c.n_head = 2; c.vocab = 64; c.seq = c.max_seq = 8; c.batch = 24;
    for (int R = 1; R <= 8; R *= 2)
        for (int r = 0; r < R; r++) {
            remat_dp_layout l;
            CHECK(!remat_dp_layout_make(&c, R, r, 3, 1, &l), "layout R %d: %s", R, remat_errmsg());
            CHECK(l.M == 8 && l.Ml == 8 / R && l.S % REMAT_DP_ALIGN == 0 && (size_t)R * l.S >= l.P &&
                  (size_t)R * l.S < l.P + (size_t)R * REMAT_DP_ALIGN, "R %d: slices of %zu for %zu", R, l.S, l.P);
            /* recursive halving leaves rank r its own slice */
            int lo, hi;
            remat_dp_region(R, r, l.logR, &lo, &hi);
            CHECK(hi == lo + 1 && lo == l.own, "R %d rank %d: halving ends at slice %d, owns %d", R, r, lo, l.own);
            CHECK(l.tree_bufs == remat_dp_tree_live(l.Ml) - 1, "tree buffers");
        }
    /* every slice owned once */
    int seen[8] = { 0 };
    for (int r = 0; r < 8; r++) seen[remat_dp_bitrev(r, 3)]++;
    int once = 1;
    for (int k = 0; k < 8; k++) once &= seen[k] == 1;
    CHECK(once, "bit reversal is a permutation");
    /* buffers the postorder tree needs: 1, 2, 2, 3, 3, 3, 3, 4 */
    static const int live[9] = { 0, 1, 2, 2, 3, 3, 3, 3, 4 };
    for (int n = 1; n <= 8; n++) CHECK(remat_dp_tree_live(n) == live[n], "tree of %d: %d", n, remat_dp_tree_live(n));
    double v[6] = { 1e16, 1, -1e16, 1, 3, 0.5 };
    CHECK(remat_dp_tree_sum(v, 6) == ((1e16 + 1) + -1e16) + ((1 + 3) + 0.5), "tree of 6: halves of 3, each (a+b)+c");
    CHECK(remat_dp_tree_sum(v, 4) == (1e16 + 1) + (-1e16 + 1), "tree of 4: pairs");
    /* invalid layouts name the valid micro-batches */
    remat_parallel p = { 2, 5, 1 };
    CHECK(remat_parallel_check(&c, &p) == REMAT_ERR_INVALID && strstr(remat_errmsg(), "1, 2, 3, 4, 6, 12"),
          "bad micro-batch: %s", remat_errmsg());
    p = (remat_parallel){ 3, 1, 1 };
    CHECK(remat_parallel_check(&c, &p) == REMAT_ERR_INVALID && strstr(remat_errmsg(), "power-of-two"),
          "3 ranks: %s", remat_errmsg());
    p = (remat_parallel){ 32, 1, 1 };
    CHECK(remat_parallel_check(&c, &p) == REMAT_ERR_INVALID && strstr(remat_errmsg(), "smaller than the 32"),
          "more ranks than sequences: %s", remat_errmsg());
    /* ZeRO-1 divides the optimizer state; the reduce buffers grow with M/R */
    remat_parallel_memory a, b;
    p = (remat_parallel){ 1, 3, 0 };
    remat_parallel_memory_of(&c, &p, 0, &a);
    p = (remat_parallel){ 4, 3, 1 };
    remat_parallel_memory_of(&c, &p, 0, &b);
    uint64_t P = remat_config_num_params(&c);
    CHECK(a.optim_bytes == 8 * P && b.optim_bytes < 8 * P / 4 + 8 * REMAT_DP_ALIGN && b.optim_bytes >= 8 * P / 4,
          "ZeRO-1: %llu of %llu", (unsigned long long)b.optim_bytes, (unsigned long long)a.optim_bytes);
    CHECK(a.tree_buffers == 3 && b.tree_buffers == 1 && a.comm_bytes == 0 && b.comm_bytes > 4 * P,
          "tree buffers %d and %d, comm %llu", a.tree_buffers, b.tree_buffers, (unsigned long long)b.comm_bytes);
    CHECK(remat_parallel_comm_ms(&c, &p, 1e9, 1e-5) > 1000.0 * (double)b.comm_bytes / 1e9, "alpha-beta");
}

/* ---- the norm in blocks ----------------------------------------------------------- */

static void test_sumsq_blocks(void)
{
    size_t n = 300000 + 123;   /* > one sumsq chunk, a short last block */
    float *g = malloc(n * sizeof *g);
    double *parts = malloc(((n + SUMSQ_BLOCK_ELEMS - 1) / SUMSQ_BLOCK_ELEMS) * sizeof *parts);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        g[i] = (float)((double)(x >> 11) / 9007199254740992.0 - 0.5) * (i % 7 ? 1.0f : 1e4f);
    }
    remat_sumsq_blocks(g, n, parts);
    double a = remat_sumsq(g, n), b = remat_sumsq_from_blocks(parts, (n + SUMSQ_BLOCK_ELEMS - 1) / SUMSQ_BLOCK_ELEMS);
    CHECK(memcmp(&a, &b, sizeof a) == 0, "sumsq from blocks %.17g, whole %.17g", b, a);
    free(g);
    free(parts);
}

/* ---- dropout by global row ---------------------------------------------------------- */

/* The op dispatcher's tensor t of rows [g, g + b) of a B-row batch, with
 * dropout 0.3, equals the whole batch's rows: the masks are keyed by the
 * global row (residual branch: res2 with a zero projection and unit bias;
 * attention: atty over fixed probabilities and values). */
static void test_dropout_rows(void)
{
    remat_config c;
    remat_config_default(&c);
    c.n_layer = 1; c.n_embd = 8; c.n_head = 2; c.vocab = 64; c.seq = c.max_seq = 5; c.batch = 6; c.dropout = 0.3f;
    int B = c.batch, T = c.seq, C = c.n_embd, NH = c.n_head, b = 2, g = 4;
    size_t P = remat_config_num_params(&c);
    float *params = calloc(P, sizeof *params);
    remat_op_ctx whole, part;
    remat_op_ctx_init(&whole, &c, params, NULL);
    for (size_t i = 0; i < whole.ly.numel[GP_ATTPROJB]; i++) params[whole.ly.off[GP_ATTPROJB] + i] = 1.0f;
    remat_config cb = c;
    cb.batch = b;
    remat_op_ctx_init(&part, &cb, params, NULL);
    whole.training = part.training = 1;
    whole.seed = part.seed = 11;
    whole.step = part.step = 3;
    part.row0 = (uint64_t)g;
    size_t n = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    float *x = malloc(n * 4), *atty = malloc(n * 4), *out = malloc(n * 4), *out2 = malloc(n * 4);
    float *qkv = malloc(3 * n * 4), *att = malloc(natt * 4);
    for (size_t i = 0; i < n; i++) { x[i] = (float)(i % 13) * 0.25f; atty[i] = (float)(i % 5) - 2.0f; }
    for (size_t i = 0; i < 3 * n; i++) qkv[i] = (float)((i * 7) % 11) * 0.125f - 0.5f;
    remat_attn_layout al = remat_attn_layout_mha(qkv, B, T, C, NH, REMAT_DTYPE_FP32);
    remat_attention_scores_forward(att, &al);
    size_t row = (size_t)T * C, arow = (size_t)NH * T * T;
    for (int t = 0; t < 2; t++) {
        int tid = t ? RT_ATTY : RT_RES2;
        remat_op_args a;
        memset(&a, 0, sizeof a);
        a.t[tid] = out;
        a.x = x;
        a.t[RT_ATTY] = t ? out : atty;
        a.t[RT_ATT] = att;
        a.t[RT_QKV] = qkv;
        a.n[RT_RES2] = a.n[RT_ATTY] = a.nx = n * 4;   /* extents: the whole batch's */
        a.n[RT_ATT] = natt * 4;
        a.n[RT_QKV] = 3 * n * 4;
        remat_op_forward(&whole, tid, 0, &a);
        memset(&a, 0, sizeof a);
        a.t[tid] = out2;
        a.x = x + g * row;
        a.t[RT_ATTY] = t ? out2 : atty + g * row;
        a.t[RT_ATT] = att + g * arow;
        a.t[RT_QKV] = qkv + 3 * g * row;
        a.n[RT_RES2] = a.n[RT_ATTY] = a.nx = (size_t)b * row * 4;   /* the micro-batch's rows */
        a.n[RT_ATT] = (size_t)b * arow * 4;
        a.n[RT_QKV] = 3 * (size_t)b * row * 4;
        remat_op_forward(&part, tid, 0, &a);
        int dropped = 0;
        for (size_t i = 0; i < n && !t; i++) dropped += out[i] == x[i];
        CHECK(!memcmp(out + g * row, out2, (size_t)b * row * 4), "%s: the micro-batch's rows differ from the "
              "whole batch's", t ? "atty" : "res2");
        CHECK(t || (dropped > (int)n / 5 && dropped < (int)n / 2), "res2: %d of %zu dropped", dropped, n);
    }
    free(params); free(x); free(atty); free(out); free(out2); free(qkv); free(att);
}

/* ---- the same step at any rank count ------------------------------------------------- */

#define NCASE 9
static const struct { const char *policy; float dropout; int zero, attention, bf16; } cases[NCASE] = {
    { "none", 0.0f, 1, 0, 0 },         { "none", 0.1f, 1, 0, 0 },
    { "full", 0.1f, 0, 0, 0 },         { "full", 0.0f, 1, 1, 0 },
    { "every:2,selective", 0.1f, 1, 0, 0 }, { "every:2,selective", 0.0f, 0, 0, 0 },
    { "revolve:2,pointwise", 0.1f, 1, 1, 0 }, { "save:qkv+fch", 0.1f, 1, 0, 0 },
    { "selective", 0.1f, 1, 0, 1 },
};
enum { B = 8, MICRO = 2, T = 8, STEPS = 3 };

static void case_config(int k, remat_config *c)
{
    remat_config_default(c);
    c->n_layer = 3; c->n_embd = 32; c->n_head = 2; c->vocab = 61; c->seq = c->max_seq = T; c->batch = B;
    c->dropout = cases[k].dropout;
    c->attention = cases[k].attention ? REMAT_ATTENTION_FLASH : REMAT_ATTENTION_NAIVE;
    c->dtype = cases[k].bf16 ? REMAT_DTYPE_BF16 : REMAT_DTYPE_FP32;
}

static void batch_of(int step, int *in, int *tg)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(step + 1);
    for (int i = 0; i < B * T; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        in[i] = (int)((x >> 33) % 61);
        tg[i] = (int)((x >> 17) % 61);
    }
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Runs case k on comm (NULL: one rank) and writes its result line (what
 * every rank count must agree on) to line; 0 when it could not run.
 * *own_ok: this rank's memory, bytes sent and activation peak equal the
 * predictions. */
static int run_case(int k, remat_comm *comm, int micro, char *line, size_t n, int *own_ok)
{
    remat_config c;
    case_config(k, &c);
    remat_model *m = NULL;
    int in[B * T], tg[B * T];
    *own_ok = 1;
    if (remat_model_create(&c, 7, &m)) { snprintf(line, n, "create: %s", remat_errmsg()); return 0; }
    remat_status st = remat_model_set_policy(m, cases[k].policy);
    if (!st) st = remat_model_set_parallel(m, comm, micro, cases[k].zero);
    if (st) { snprintf(line, n, "setup: %s", remat_model_error(m)); remat_model_free(m); return 0; }
    float l0, l[STEPS];
    batch_of(0, in, tg);
    st = remat_model_step(m, in, tg, 0, &l0);   /* update 0: the summed gradient is left in the model */
    uint64_t gh = remat_hash_bytes(remat_model_grads(m), remat_model_num_params(m) * sizeof(float));
    remat_stats s;
    remat_sim sim;
    remat_schedule_simulate(remat_model_schedule(m), &sim);
    for (int i = 0; i < STEPS && !st; i++) {
        batch_of(i + 1, in, tg);
        st = remat_model_step(m, in, tg, 1, &l[i]);
        remat_model_stats(m, &s);
        remat_parallel par = { s.ranks, s.micro_batch, s.zero };
        remat_parallel_memory pm;
        remat_parallel_memory_of(&c, &par, comm ? remat_comm_rank(comm) : 0, &pm);
        int ok = s.params_bytes == pm.params_bytes && s.grads_bytes == pm.grads_bytes &&
                 s.optim_bytes == pm.optim_bytes && s.reduce_bytes == pm.reduce_bytes &&
                 s.workspace_bytes == pm.workspace_bytes && s.weights16_bytes == pm.weights16_bytes &&
                 s.comm_bytes == pm.comm_bytes && s.act_peak_bytes == sim.peak_bytes &&
                 s.step_peak_bytes == pm.static_bytes + sim.peak_bytes;
        if (!ok) {
            fprintf(stderr, "case %d rank %d: measured params %llu grads %llu optim %llu reduce %llu work %llu "
                    "comm %llu act %llu step %llu; predicted %llu %llu %llu %llu %llu %llu %llu %llu\n", k,
                    comm ? remat_comm_rank(comm) : 0, (unsigned long long)s.params_bytes,
                    (unsigned long long)s.grads_bytes, (unsigned long long)s.optim_bytes,
                    (unsigned long long)s.reduce_bytes, (unsigned long long)s.workspace_bytes,
                    (unsigned long long)s.comm_bytes, (unsigned long long)s.act_peak_bytes,
                    (unsigned long long)s.step_peak_bytes, (unsigned long long)pm.params_bytes,
                    (unsigned long long)pm.grads_bytes, (unsigned long long)pm.optim_bytes,
                    (unsigned long long)pm.reduce_bytes, (unsigned long long)pm.workspace_bytes,
                    (unsigned long long)pm.comm_bytes, (unsigned long long)sim.peak_bytes,
                    (unsigned long long)(pm.static_bytes + sim.peak_bytes));
            *own_ok = 0;
        }
    }
    if (st) { snprintf(line, n, "step: %s", remat_model_error(m)); remat_model_free(m); return 0; }
    float ev;
    st = remat_model_eval(m, in, tg, &ev, NULL);
    snprintf(line, n, "case %d loss %08x grads %016llx losses %08x %08x %08x eval %08x params %016llx", k, fbits(l0),
             (unsigned long long)gh, fbits(l[0]), fbits(l[1]), fbits(l[2]), st ? 0u : fbits(ev),
             (unsigned long long)remat_model_params_hash(m));
    remat_model_free(m);
    return 1;
}

static int bf16_ok(void) { return remat_gemm_available(REMAT_GEMM_ONEDNN); }

/* Under mpirun: every case, rank 0 prints the lines. */
static int child(int argc, char **argv)
{
    remat_comm *comm = NULL;
    if (remat_comm_create(&argc, &argv, &comm)) { fprintf(stderr, "comm: %s\n", remat_errmsg()); return 2; }
    remat_set_threads(1);
    int rank = remat_comm_rank(comm);
    for (int k = 0; k < NCASE; k++) {
        if (cases[k].bf16 && !bf16_ok()) continue;
        char line[256];
        int own_ok, first;
        int ran = run_case(k, comm, MICRO, line, sizeof line, &own_ok);
        if (!ran) { fprintf(stderr, "rank %d: %s\n", rank, line); remat_comm_abort(comm, 2); }
        remat_comm_first_failure(comm, !own_ok, &first, NULL);
        if (rank == 0) printf("%s memory %s\n", line, first < 0 ? "ok" : "MISMATCH");
    }
    fflush(stdout);
    remat_comm_free(comm);
    return 0;
}

static void test_ranks(const char *self)
{
    char want[NCASE][256];
    int have[NCASE] = { 0 };
    remat_set_threads(1);
    for (int k = 0; k < NCASE; k++) {
        if (cases[k].bf16 && !bf16_ok()) { TEST_SKIP("bf16 needs the oneDNN GEMM engine"); continue; }
        int own_ok;
        have[k] = run_case(k, NULL, MICRO, want[k], sizeof want[k], &own_ok);
        CHECK(have[k], "case %d on one rank: %s", k, want[k]);
        CHECK(own_ok, "case %d on one rank: memory or activation peak differs from the prediction", k);
    }
    /* one micro-batch per step, set up or not, is the plain step */
    {
        remat_config c;
        case_config(1, &c);
        char a[256], b[256];
        int own_ok;
        remat_model *m = NULL;
        int in[B * T], tg[B * T];
        float l;
        remat_model_create(&c, 7, &m);
        batch_of(0, in, tg);
        remat_model_step(m, in, tg, 1, &l);
        snprintf(a, sizeof a, "%08x %016llx", fbits(l), (unsigned long long)remat_model_params_hash(m));
        remat_model_free(m);
        remat_model_create(&c, 7, &m);
        remat_model_set_parallel(m, NULL, B, 0);
        remat_model_step(m, in, tg, 1, &l);
        snprintf(b, sizeof b, "%08x %016llx", fbits(l), (unsigned long long)remat_model_params_hash(m));
        remat_model_free(m);
        CHECK(!strcmp(a, b), "one micro-batch: %s, plain step %s", b, a);
        CHECK(run_case(1, NULL, B, b, sizeof b, &own_ok) && strcmp(b, want[1]), "micro-batches change the sums");
    }
    if (system("command -v mpirun > /dev/null 2>&1") != 0) {
        TEST_SKIP("mpirun is not installed (apt-get install openmpi-bin): R = 2 and 4 not compared");
        return;
    }
    if (getuid() == 0) {   /* OpenMPI refuses root without these */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    if (getenv("REMAT_SANITIZE")) {
        /* the children: OpenMPI's own allocations left at exit are not
         * remat's leaks (tests/lsan-mpi.supp, as tests/lib.sh's mpi_sanitizer_env) */
        char opt[1200], cwd[900];
        const char *a = getenv("ASAN_OPTIONS"), *l = getenv("LSAN_OPTIONS");
        snprintf(opt, sizeof opt, "%s:fast_unwind_on_malloc=0", a ? a : "");
        setenv("ASAN_OPTIONS", opt, 1);
        snprintf(opt, sizeof opt, "%s:suppressions=%s/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0",
                 l ? l : "", getcwd(cwd, sizeof cwd) ? cwd : ".");
        setenv("LSAN_OPTIONS", opt, 1);
    }
    /* seconds, passed to timeout(1) as written: digits and at most one '.' */
    const char *limit = getenv("REMAT_MPI_TIMEOUT");
    if (!limit || !*limit || strspn(limit, "0123456789.") != strlen(limit) || strchr(limit, '.') != strrchr(limit, '.'))
        limit = "120";
    for (int R = 2; R <= 4; R *= 2) {
        char cmd[1024], line[512];
        /* -k: an mpirun that ignores SIGTERM gets SIGKILL 10 s later */
        snprintf(cmd, sizeof cmd, "timeout -k 10 %s mpirun -q --oversubscribe --bind-to none -np %d %s 2>&1", limit, R,
                 self);
        FILE *p = popen(cmd, "r");
        if (!p) { CHECK(0, "cannot run %s", cmd); continue; }
        int got = 0;
        while (fgets(line, sizeof line, p)) {
            int k;
            line[strcspn(line, "\n")] = 0;
            if (sscanf(line, "case %d", &k) != 1 || k < 0 || k >= NCASE || !have[k]) {
                fprintf(stderr, "R=%d: %s\n", R, line);
                continue;
            }
            got++;
            CHECK(!strncmp(line, want[k], strlen(want[k])), "R=%d differs from one rank:\n  %s\n  %s", R, line, want[k]);
            CHECK(strstr(line, "memory ok") != NULL, "R=%d case %d: a rank's memory or bytes sent differ from the "
                  "prediction", R, k);
        }
        int rc = pclose(p);
        int expect = 0;
        for (int k = 0; k < NCASE; k++) expect += have[k];
        int timed_out = rc != -1 && WIFEXITED(rc) && (WEXITSTATUS(rc) == 124 || WEXITSTATUS(rc) == 137);
        CHECK(!timed_out, "mpirun -np %d timed out after %s s (REMAT_MPI_TIMEOUT), killed", R, limit);
        CHECK(rc == 0 && got == expect, "mpirun -np %d: exit %d, %d of %d cases", R, rc, got, expect);
    }
}

int main(int argc, char **argv)
{
    if (remat_comm_launched()) return child(argc, argv);
    test_layout();
    test_sumsq_blocks();
    test_dropout_rows();
    test_ranks(argv[0]);
    return TEST_REPORT();
}
