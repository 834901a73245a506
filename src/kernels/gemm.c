/*
 * gemm.c -- the GEMM seam (gemm.h): oneDNN and CBLAS behind one call.
 *
 * oneDNN's matmul primitives are made once per shape and kept in a small
 * table (made under a lock, run without one: a primitive may run from
 * several threads at once, each on its own stream).  Memory descriptors
 * carry the leading dimensions and transposes as strides, so the attention
 * kernels' strided views into qkv need no copies.
 *
 * Workspace: an emulated bf16 product's fp32 copies (below) go in the
 * workspace its op was given (gemm.h, remat_ws), which the tensor table
 * declares and the accounting allocator counts.  Both libraries keep their
 * own packing buffers, which the accounting does not see, nor the native
 * bf16 primitives' scratchpads below: README, "How it works", paragraph
 * "Exact memory".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cblas.h>
#include <omp.h>
#include "gemm.h"
#include "../core/core.h"
#ifdef REMAT_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

static _Atomic int gemm_failed;   /* a remat_status, 0 when none */

#ifdef REMAT_ONEDNN
static remat_gemm_engine engine = REMAT_GEMM_ONEDNN;
#else
static remat_gemm_engine engine = REMAT_GEMM_CBLAS;
#endif


remat_status remat_gemm_check(void)
{
    int st = atomic_exchange(&gemm_failed, 0);
    if (st == REMAT_ERR_INVALID)
        return remat_fail(REMAT_ERR_INVALID, "bf16 GEMMs need the oneDNN engine (this one is %s)",
                          remat_gemm_name(engine));
    if (st == REMAT_ERR_STATE)
        return remat_fail(REMAT_ERR_STATE, "an emulated bf16 product's fp32 copies do not fit the workspace its op "
                          "was given (the tensor table's RS_ items under-declare it, or the op ran on more threads "
                          "than remat_get_threads says)");
    if (st) return remat_fail((remat_status)st, "oneDNN could not create or run a matmul primitive (out of memory?)");
    return REMAT_OK;
}

/* ---- engines ------------------------------------------------------- */


int remat_gemm_available(remat_gemm_engine e)
{
#ifdef REMAT_ONEDNN
    return e == REMAT_GEMM_ONEDNN || e == REMAT_GEMM_CBLAS;
#else
    return e == REMAT_GEMM_CBLAS;
#endif
}

const char *remat_gemm_name(remat_gemm_engine e)
{
    return e == REMAT_GEMM_ONEDNN ? "onednn" : e == REMAT_GEMM_CBLAS ? "cblas" : "?";
}

remat_status remat_gemm_set(remat_gemm_engine e)
{
    if (e != REMAT_GEMM_ONEDNN && e != REMAT_GEMM_CBLAS)
        return remat_fail(REMAT_ERR_INVALID, "unknown GEMM engine %d", (int)e);
    if (!remat_gemm_available(e))
        return remat_fail(REMAT_ERR_INVALID, "this build has no %s GEMM engine (built with GEMM=cblas; "
                          "rebuild with make GEMM=onednn)", remat_gemm_name(e));
    engine = e;
    return REMAT_OK;
}

remat_gemm_engine remat_gemm_get(void) { return engine; }

/* oneDNN's effective ISA, as its enum's names spell them without the
 * prefix (a constant string; "" in a build without oneDNN) */
const char *remat_gemm_isa(void)
{
#ifdef REMAT_ONEDNN
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
#else
    return "";
#endif
}

/* ---- CBLAS ----------------------------------------------------------------------- */

/* a bias is added by filling C's rows with it and accumulating (beta 1) */
static void fill_bias(const remat_gemm_op *g)
{
    float *C = g->C;
    for (int m = 0; m < g->M; m++) memcpy(C + (size_t)m * g->ldc, g->bias, (size_t)g->N * sizeof(float));
}

static void cblas_run(const remat_gemm_op *g)
{
    float beta = g->beta;
    if (g->bias) { fill_bias(g); beta = 1.0f; }
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->M, g->N,
                g->K, g->alpha, g->A, g->lda, g->B, g->ldb, beta, g->C, g->ldc);
}

/* ---- oneDNN ----------------------------------------------------------------------- */

#ifdef REMAT_ONEDNN
static dnnl_engine_t dnnl_eng;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;
static _Thread_local dnnl_stream_t dnnl_strm;

static void dnnl_init(void)
{
    if (dnnl_engine_create(&dnnl_eng, dnnl_cpu, 0) != dnnl_success) dnnl_eng = NULL;
}

/* Each thread's scratchpad: primitives are made with a user-managed
 * scratchpad, because oneDNN's own is shared by every primitive of the
 * process and two threads running matmuls at once (attention's tiles)
 * would write over each other's.  Grown as needed, kept for the thread's
 * life: like the libraries' packing buffers, outside the accounting.  Its
 * size is what oneDNN's implementation for the shape and ISA asks
 * (dnnl_query_scratchpad_md), known only once a primitive is made: no
 * formula of the table can state it, so it is not table workspace.  Only
 * the native bf16 matmuls (AVX-512 machines) have one; fp32 products run as
 * dnnl_sgemm, and where bf16 is emulated no primitive is made. */
static _Thread_local void *scratch;
static _Thread_local size_t scratch_bytes;

/* a matmul primitive for one shape */
typedef struct mm_key {
    int ab, c, ta, tb, M, N, K, lda, ldb, ldc, bias;
    float alpha, beta;
} mm_key;

typedef struct mm_entry {
    mm_key key;
    int used;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, cmd, bmd, smd;
    size_t sbytes;        /* its scratchpad */
} mm_entry;

#define MM_CACHE 4096   /* slots; at most 3/4 of them are filled */
static mm_entry mm_cache[MM_CACHE];
static int mm_count;
static pthread_mutex_t mm_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t key_hash(const mm_key *k)
{
    return remat_hash_bytes(k, sizeof *k);
}

static dnnl_data_type_t dt_of(int d) { return d == REMAT_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32; }

/* creates the primitive for k into e; 0 on success */
static int mm_create(const mm_key *k, mm_entry *e)
{
    dnnl_dims_t da = { k->M, k->K }, db = { k->K, k->N }, dc = { k->M, k->N }, dbias = { 1, k->N };
    /* op(A) is M x K: A stored (M,K) with ld lda, or (K,M) transposed */
    dnnl_dims_t sa = { k->ta ? 1 : k->lda, k->ta ? k->lda : 1 };
    dnnl_dims_t sb = { k->tb ? 1 : k->ldb, k->tb ? k->ldb : 1 };
    dnnl_dims_t sc = { k->ldc, 1 }, sbias = { k->N, 1 };
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int bad = 1;
    memset(e, 0, sizeof *e);
    if (dnnl_memory_desc_init_by_strides(&e->a, 2, da, dt_of(k->ab), sa) ||
        dnnl_memory_desc_init_by_strides(&e->b, 2, db, dt_of(k->ab), sb) ||
        dnnl_memory_desc_init_by_strides(&e->cmd, 2, dc, dt_of(k->c), sc) ||
        (k->bias && dnnl_memory_desc_init_by_strides(&e->bmd, 2, dbias, dnnl_f32, sbias)) ||
        dnnl_matmul_desc_init(&md, &e->a, &e->b, k->bias ? &e->bmd : NULL, &e->cmd) ||
        dnnl_primitive_attr_create(&attr) || dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto out;
    if (k->alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha)) goto out;
    if (k->beta != 0.0f) {
        if (dnnl_post_ops_create(&po) || dnnl_post_ops_append_sum(po, k->beta) ||
            dnnl_primitive_attr_set_post_ops(attr, po))
            goto out;
    }
    if (dnnl_primitive_desc_create(&pd, &md, attr, dnnl_eng, NULL) || dnnl_primitive_create(&e->prim, pd)) goto out;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (smd) e->smd = *smd;
    e->sbytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    e->key = *k;
    e->used = 1;
    bad = 0;
out:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return bad;
}

/* The cached primitive for k, made on first use.  Entries are never
 * evicted: other threads may be running them (attention's tiles run on
 * every thread).  Once the table is 3/4 full, a new shape gets a primitive
 * of its own in *local, which the caller destroys after running it.  NULL
 * when oneDNN could not make one. */
static mm_entry *mm_get(const mm_key *k, mm_entry *local)
{
    uint64_t h = key_hash(k);
    mm_entry *found = NULL;
    pthread_mutex_lock(&mm_lock);
    for (size_t i = 0; i < MM_CACHE; i++) {
        mm_entry *e = &mm_cache[(h + i) % MM_CACHE];
        if (e->used && !memcmp(&e->key, k, sizeof *k)) { found = e; break; }
        if (!e->used) {
            if (mm_count < MM_CACHE * 3 / 4) {
                if (!mm_create(k, e)) { mm_count++; found = e; }
            } else if (!mm_create(k, local)) found = local;
            break;
        }
    }
    pthread_mutex_unlock(&mm_lock);
    return found;
}

/* Each thread's last few primitives with their memory objects, so that a
 * call of a shape the thread ran before only points the objects at its
 * operands (dnnl_memory_set_data_handle): no lock, no lookup in the shared
 * table, no memory object made and destroyed per call (the attention
 * tiles are thousands of small products a step; making and destroying the
 * objects was about a fifth of a score tile's time).  Direct-mapped by the
 * key's hash; a slot taken by another shape destroys its objects.  Kept
 * for the thread's life, like the scratchpad. */
#define MM_TLS 64
typedef struct mm_tls {
    mm_key key;
    mm_entry *e;          /* NULL: empty; a local (uncached) primitive is never kept here */
    dnnl_memory_t m[5];   /* src, weights, dst, bias (or NULL), scratchpad (or NULL) */
} mm_tls;
static _Thread_local mm_tls mm_thread[MM_TLS];

static void tls_drop(mm_tls *t)
{
    for (int i = 0; i < 5; i++)
        if (t->m[i]) dnnl_memory_destroy(t->m[i]);
    memset(t, 0, sizeof *t);
}

/* the memory objects of e for this thread, made on NULL handles; 0 on success */
static int tls_fill(mm_tls *t, const mm_key *k, mm_entry *e)
{
    tls_drop(t);
    if (dnnl_memory_create(&t->m[0], &e->a, dnnl_eng, DNNL_MEMORY_NONE) ||
        dnnl_memory_create(&t->m[1], &e->b, dnnl_eng, DNNL_MEMORY_NONE) ||
        dnnl_memory_create(&t->m[2], &e->cmd, dnnl_eng, DNNL_MEMORY_NONE) ||
        (k->bias && dnnl_memory_create(&t->m[3], &e->bmd, dnnl_eng, DNNL_MEMORY_NONE)) ||
        (e->sbytes && dnnl_memory_create(&t->m[4], &e->smd, dnnl_eng, DNNL_MEMORY_NONE))) {
        tls_drop(t);
        return 1;
    }
    t->key = *k;
    t->e = e;
    return 0;
}

/* runs entry e on g's operands with the memory objects m (5, as mm_tls);
 * 0 on success */
static int mm_exec(const mm_entry *e, dnnl_memory_t *m, const remat_gemm_op *g)
{
    if (dnnl_memory_set_data_handle(m[0], (void *)g->A) || dnnl_memory_set_data_handle(m[1], (void *)g->B) ||
        dnnl_memory_set_data_handle(m[2], g->C) || (g->bias && dnnl_memory_set_data_handle(m[3], (void *)g->bias)) ||
        (e->sbytes && dnnl_memory_set_data_handle(m[4], scratch)))
        return 1;
    dnnl_exec_arg_t args[5] = { { DNNL_ARG_SRC, m[0] }, { DNNL_ARG_WEIGHTS, m[1] }, { DNNL_ARG_DST, m[2] } };
    int na = 3;
    if (g->bias) args[na++] = (dnnl_exec_arg_t){ DNNL_ARG_BIAS, m[3] };
    if (e->sbytes) args[na++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, m[4] };
    return dnnl_primitive_execute(e->prim, dnnl_strm, na, args) || dnnl_stream_wait(dnnl_strm);
}

/* ---- bf16 where oneDNN has none ------------------------------------------------
 * oneDNN 2.x makes bf16 primitives only from AVX-512 on (its
 * src/cpu/platform.cpp: has_data_type_support(bf16) returns
 * mayiuse(avx512_core); 3.x adds avx2_vnni_2), so on an AVX2 machine (a Zen
 * 3 EPYC with Debian's oneDNN 2.6.3, tried) every bf16 matmul is
 * "unimplemented" and bf16 steps failed.  There a bf16 product is run as dnnl_sgemm on fp32
 * copies of its operands: a product of two bf16 values is exact in fp32,
 * and it accumulates in fp32 as the bf16 primitive does, so this is the
 * same arithmetic up to the order of the sums (a different machine's bits,
 * as between any two ISAs; deterministic for a shape and thread count).
 * The copies (A, B, C, each at a 64-byte boundary: remat_gemm_ws_bytes)
 * go in the product's workspace: the serial part for a call outside a
 * parallel region, else the calling thread's slice (remat_ws_get); the
 * tensor table declares it per op (tensors.c, LINEAR_WS, the tiles' and the
 * head's items), and a product that does not fit fails (REMAT_ERR_STATE)
 * rather than allocate.  A call without a workspace (calibration, benches,
 * tests) allocates its copies for the call. */
static int bf16_native = 1;
static pthread_once_t bf16_once = PTHREAD_ONCE_INIT;

static void bf16_probe(void)
{
    dnnl_dims_t d = { 16, 16 };
    dnnl_memory_desc_t a, c;
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_memory_desc_init_by_tag(&a, 2, d, dnnl_bf16, dnnl_ab) ||
        dnnl_memory_desc_init_by_tag(&c, 2, d, dnnl_f32, dnnl_ab) || dnnl_matmul_desc_init(&md, &a, &a, NULL, &c))
        return;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, NULL, dnnl_eng, NULL);
    if (st == dnnl_unimplemented) bf16_native = 0;
    if (pd) dnnl_primitive_desc_destroy(pd);
}

static _Atomic int bf16_forced;   /* the test hook: 1 emulates even where oneDNN has bf16 */

int remat_gemm_bf16_native(void)
{
    pthread_once(&dnnl_once, dnnl_init);
    if (dnnl_eng) pthread_once(&bf16_once, bf16_probe);
    return bf16_native && !atomic_load(&bf16_forced);
}

void remat_gemm_bf16_emulate(int on) { atomic_store(&bf16_forced, on != 0); }


/* The copies of g, in floats, each at a 64-byte boundary: A and B when
 * they are bf16, C when it is; their sum is at most MK + NK + MN + 30 (the
 * tensor table's bound, remat_gemm_ws_bytes). */
static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

static void emu_sizes(const remat_gemm_op *g, size_t *na, size_t *nb, size_t *nc)
{
    size_t ra = (size_t)(g->ta ? g->K : g->M), ca = (size_t)(g->ta ? g->M : g->K);
    size_t rb = (size_t)(g->tb ? g->N : g->K), cb = (size_t)(g->tb ? g->K : g->N);
    int bfab = g->ab == REMAT_DTYPE_BF16, bfc = g->c == REMAT_DTYPE_BF16;
    *na = bfab ? round16(ra * ca) : 0;
    *nb = bfab ? round16(rb * cb) : 0;
    *nc = bfc ? (size_t)g->M * (size_t)g->N : 0;
}

size_t remat_gemm_ws_bytes(const remat_gemm_op *g)
{
    if ((g->ab != REMAT_DTYPE_BF16 && g->c != REMAT_DTYPE_BF16) || g->M <= 0 || g->N <= 0 || g->K <= 0 ||
        remat_gemm_bf16_native())
        return 0;
    size_t na, nb, nc;
    emu_sizes(g, &na, &nb, &nc);
    return (na + nb + nc) * sizeof(float);
}

/* rows x cols of bf16 with leading dimension ld, into a packed fp32 copy */
static void emu_widen(float *dst, const remat_bf16 *src, int rows, int cols, int ld)
{
    for (int r = 0; r < rows; r++) remat_bf16_to_f32(dst + (size_t)r * cols, src + (size_t)r * ld, (size_t)cols);
}

static void emu_run(const remat_gemm_op *g)
{
    int ra = g->ta ? g->K : g->M, ca = g->ta ? g->M : g->K, rb = g->tb ? g->N : g->K, cb = g->tb ? g->K : g->N;
    int bfab = g->ab == REMAT_DTYPE_BF16, bfc = g->c == REMAT_DTYPE_BF16;
    size_t na, nb, nc;
    emu_sizes(g, &na, &nb, &nc);
    size_t bytes = (na + nb + nc) * sizeof(float);
    /* the op's workspace (the table declares it), or the call's own copies */
    float *own = NULL, *base = g->ws ? remat_ws_get(g->ws, bytes) : (own = remat_malloc(bytes));
    if (!base) { atomic_store(&gemm_failed, g->ws ? REMAT_ERR_STATE : REMAT_ERR_NOMEM); return; }
    const float *A = bfab ? base : g->A, *B = bfab ? base + na : g->B;
    float *C = bfc ? base + na + nb : g->C;
    int lda = bfab ? ca : g->lda, ldb = bfab ? cb : g->ldb, ldc = bfc ? g->N : g->ldc;
    if (bfab) {
        emu_widen((float *)A, g->A, ra, ca, g->lda);
        emu_widen((float *)B, g->B, rb, cb, g->ldb);
    }
    /* C = alpha A B + (beta C + bias): the second term first, in C */
    float beta = g->beta;
    if (bfc || g->bias)
        for (int m = 0; m < g->M; m++) {
            float *row = C + (size_t)m * ldc;
            if (bfc) {
                if (g->beta != 0.0f) remat_bf16_to_f32(row, (const remat_bf16 *)g->C + (size_t)m * g->ldc, (size_t)g->N);
                else memset(row, 0, (size_t)g->N * sizeof(float));
            }
            for (int n = 0; n < g->N; n++) {
                float old = g->beta != 0.0f ? g->beta * row[n] : 0.0f;
                row[n] = g->bias ? old + g->bias[n] : old;
            }
        }
    if (bfc || g->bias) beta = 1.0f;
    if (dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->M, g->N, g->K, g->alpha, A, lda, B, ldb, beta, C, ldc) !=
        dnnl_success) {
        atomic_store(&gemm_failed, REMAT_ERR_NOMEM);
        free(own);
        return;
    }
    if (bfc)
        for (int m = 0; m < g->M; m++)
            remat_bf16_from_f32((remat_bf16 *)g->C + (size_t)m * g->ldc, C + (size_t)m * ldc, (size_t)g->N);
    free(own);
}

static void dnnl_run(const remat_gemm_op *g)
{
    pthread_once(&dnnl_once, dnnl_init);
    if (!dnnl_eng) { atomic_store(&gemm_failed, REMAT_ERR_NOMEM); return; }
    if ((g->ab == REMAT_DTYPE_BF16 || g->c == REMAT_DTYPE_BF16) && !remat_gemm_bf16_native()) { emu_run(g); return; }
    if (g->ab == REMAT_DTYPE_FP32 && g->c == REMAT_DTYPE_FP32) {   /* dnnl_sgemm */
        float beta = g->beta;
        if (g->bias) { fill_bias(g); beta = 1.0f; }
        if (dnnl_sgemm(g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb,
                       beta, g->C, g->ldc) != dnnl_success)
            atomic_store(&gemm_failed, REMAT_ERR_NOMEM);
        return;
    }
    mm_key k;
    memset(&k, 0, sizeof k);   /* the padding too: keys are compared as bytes */
    k.ab = g->ab; k.c = g->c; k.ta = g->ta; k.tb = g->tb; k.M = g->M; k.N = g->N; k.K = g->K;
    k.lda = g->lda; k.ldb = g->ldb; k.ldc = g->ldc; k.bias = g->bias != NULL; k.alpha = g->alpha; k.beta = g->beta;
    if (!dnnl_strm && dnnl_stream_create(&dnnl_strm, dnnl_eng, dnnl_stream_default_flags) != dnnl_success) {
        dnnl_strm = NULL;
        atomic_store(&gemm_failed, REMAT_ERR_NOMEM);
        return;
    }
    mm_tls *t = &mm_thread[key_hash(&k) % MM_TLS];
    mm_entry local, *e = t->e && !memcmp(&t->key, &k, sizeof k) ? t->e : mm_get(&k, &local);
    if (!e) { atomic_store(&gemm_failed, REMAT_ERR_NOMEM); return; }
    if (e->sbytes > scratch_bytes) {
        void *p = realloc(scratch, e->sbytes);
        if (!p) { atomic_store(&gemm_failed, REMAT_ERR_NOMEM); return; }
        scratch = p;
        scratch_bytes = e->sbytes;
    }
    int bad;
    if (e != &local) {   /* a cached primitive: its objects stay with the thread */
        bad = (t->e != e && tls_fill(t, &k, e)) || mm_exec(e, t->m, g);
    } else {             /* the table is full: everything made for this call goes */
        mm_tls once;
        memset(&once, 0, sizeof once);
        bad = tls_fill(&once, &k, e) || mm_exec(e, once.m, g);
        tls_drop(&once);
        dnnl_primitive_destroy(local.prim);
    }
    if (bad) atomic_store(&gemm_failed, REMAT_ERR_NOMEM);
}
#endif

void remat_gemm(const remat_gemm_op *g)
{
    if (g->M <= 0 || g->N <= 0) return;
    if (g->K <= 0) {   /* an empty sum: C = beta C (+ bias) */
        for (int m = 0; m < g->M; m++)
            for (int n = 0; n < g->N; n++) {
                size_t i = (size_t)m * g->ldc + n;
                float b = g->bias ? g->bias[n] : 0.0f;
                if (g->c == REMAT_DTYPE_FP32) {
                    float *C = g->C;
                    C[i] = (g->beta != 0.0f ? g->beta * C[i] : 0.0f) + b;
                } else {
                    remat_bf16 *C = g->C;
                    C[i] = remat_bf16_round((g->beta != 0.0f ? g->beta * remat_bf16_to_float(C[i]) : 0.0f) + b);
                }
            }
        return;
    }
#ifdef REMAT_ONEDNN
    if (engine == REMAT_GEMM_ONEDNN || g->ab != REMAT_DTYPE_FP32 || g->c != REMAT_DTYPE_FP32) {
        dnnl_run(g);
        return;
    }
#endif
    if (g->ab != REMAT_DTYPE_FP32 || g->c != REMAT_DTYPE_FP32) {   /* no bf16 GEMM here: refused earlier */
        atomic_store(&gemm_failed, REMAT_ERR_INVALID);
        return;
    }
    cblas_run(g);
}

#ifndef REMAT_ONEDNN
int remat_gemm_bf16_native(void) { return 1; }
void remat_gemm_bf16_emulate(int on) { (void)on; }
size_t remat_gemm_ws_bytes(const remat_gemm_op *g) { (void)g; return 0; }
#endif

/* ---- workspace ----------------------------------------------------------- */

void *remat_ws_thread(const remat_ws *ws, size_t bytes)
{
    if (!ws || !ws->thread || bytes > ws->nthread) return NULL;
    int i = omp_get_thread_num();
    return i < ws->nthreads ? ws->thread + (size_t)i * ws->nthread : NULL;
}

void *remat_ws_get(const remat_ws *ws, size_t bytes)
{
    if (!ws) return NULL;
    if (!omp_in_parallel() && ws->serial && bytes <= ws->nserial) return ws->serial;
    return remat_ws_thread(ws, bytes);
}
