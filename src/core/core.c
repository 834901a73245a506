/*
 * core.c -- version, status names, thread-local error messages, threads,
 * hashing, and the accounting allocator (see core.h).
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include "core.h"
#include "endian.h"
#include "remat_testing.h"
#include "rng.h"

#ifdef REMAT_OPENBLAS
void openblas_set_num_threads(int);
#endif

const char *remat_version(void) { return REMAT_VERSION_STRING; }

static const char *const status_names[] = {
    [REMAT_OK] = "ok",
    [REMAT_ERR_INVALID] = "invalid argument",
    [REMAT_ERR_NOMEM] = "out of memory",
    [REMAT_ERR_IO] = "i/o error",
    [REMAT_ERR_FORMAT] = "malformed input",
    [REMAT_ERR_RANGE] = "out of range",
    [REMAT_ERR_POLICY] = "invalid policy",
    [REMAT_ERR_SCHEDULE] = "invalid schedule",
    [REMAT_ERR_VERIFY] = "recompute mismatch",
    [REMAT_ERR_NONFINITE] = "non-finite value",
    [REMAT_ERR_BUDGET] = "over budget",
    [REMAT_ERR_STATE] = "bad state",
    [REMAT_ERR_COMM] = "communication failed",
};
_Static_assert(sizeof status_names / sizeof status_names[0] == REMAT_ERR_COMM + 1,
               "status_names must name every remat_status: append to both");

const char *remat_status_str(remat_status st)
{
    if ((unsigned)st >= sizeof status_names / sizeof status_names[0]) return "unknown status";
    return status_names[st];
}

static _Thread_local char last_error[512];

const char *remat_errmsg(void) { return last_error; }
void remat_clear_error(void) { last_error[0] = 0; }

remat_status remat_fail(remat_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* one line, whatever a message quotes (a file's names and values) */
    for (char *c = last_error; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return st;
}

static int n_threads = 0;

void remat_set_threads(int n)
{
    if (n <= 0) n = omp_get_num_procs();
    n_threads = n;
    omp_set_num_threads(n);
#ifdef REMAT_OPENBLAS
    openblas_set_num_threads(n);
#endif
}

int remat_get_threads(void) { return n_threads > 0 ? n_threads : omp_get_max_threads(); }

uint64_t remat_clock_ns(int cpu)
{
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The content hash (remat.h): splitmix64's finaliser over the bytes read as
 * little-endian 64-bit words, seeded by the length, the last partial word
 * zero-padded.  Little-endian words make it the same number on every host,
 * so a checksum written on one machine checks out on another. */
#define HASH_SEED 0x243f6a8885a308d3ULL
#define HASH_STEP 0x9e3779b97f4a7c15ULL

void remat_hash_init(remat_hash *s, uint64_t total)
{
    s->h = HASH_SEED ^ total;
    s->ntail = 0;
}

void remat_hash_update(remat_hash *s, const void *p, size_t n)
{
    const unsigned char *b = p;
    if (s->ntail) {   /* complete the word a previous piece began */
        while (s->ntail < 8 && n) { s->tail[s->ntail++] = *b++; n--; }
        if (s->ntail < 8) return;
        s->h = remat_mix64(s->h ^ remat_get_le64(s->tail)) + HASH_STEP;
        s->ntail = 0;
    }
    for (; n >= 8; b += 8, n -= 8) s->h = remat_mix64(s->h ^ remat_get_le64(b)) + HASH_STEP;
    if (n) memcpy(s->tail, b, n);
    s->ntail = n;
}

uint64_t remat_hash_final(const remat_hash *s)
{
    uint64_t w = 0;
    for (size_t k = 0; k < s->ntail; k++) w |= (uint64_t)s->tail[k] << (8 * k);
    return remat_mix64(s->h ^ w);
}

uint64_t remat_hash_bytes(const void *p, size_t n)
{
    remat_hash s;
    remat_hash_init(&s, n);
    remat_hash_update(&s, p, n);
    return remat_hash_final(&s);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double remat_median(double *x, size_t n)
{
    if (!n) return 0;
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* ---- accounting allocator ---------------------------------------------- */

/* Failure injection (core.h): atomics, so that threads allocating at once
 * are each counted and exactly one allocation fails.  Relaxed order: they
 * are counters, nothing is published through them. */
static _Atomic uint64_t alloc_count;   /* allocations attempted, process-wide */
static _Atomic uint64_t fail_at;       /* the count whose allocation fails; 0: never */

void remat_mem_fail_at(uint64_t n)
{
    atomic_store_explicit(&fail_at, n ? atomic_load_explicit(&alloc_count, memory_order_relaxed) + n : 0,
                          memory_order_relaxed);
}

uint64_t remat_mem_alloc_count(void) { return atomic_load_explicit(&alloc_count, memory_order_relaxed); }

/* Counts one allocation attempt; 1 when it is the one to fail. */
static int inject_failure(void)
{
    uint64_t k = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed) + 1;
    uint64_t f = atomic_load_explicit(&fail_at, memory_order_relaxed);
    return f && k == f;
}

static size_t round64(size_t bytes) { return bytes ? (bytes + 63) & ~(size_t)63 : 64; }

void remat_debug_fail_alloc(uint64_t n) { remat_mem_fail_at(n); }

void *remat_mem_alloc(remat_mem *m, int cat, size_t bytes)
{
    if (inject_failure()) return NULL;
    size_t rounded = round64(bytes);
    if (rounded < bytes) return NULL;
    void *p = NULL;
    for (size_t i = 0; i < m->ncache; i++)
        if (m->cache[i].size == rounded) {
            p = m->cache[i].p;
            m->cache[i] = m->cache[--m->ncache];
            m->cached -= rounded;
            break;
        }
    if (!p) {
        if (!(p = aligned_alloc(64, rounded))) return NULL;
        m->n_fresh++;
    }
    m->live[cat] += bytes;
    if (m->live[cat] > m->peak[cat]) m->peak[cat] = m->live[cat];
    m->live_total += bytes;
    if (m->live_total > m->peak_total) m->peak_total = m->live_total;
    m->n_allocs++;
    return p;
}

void *remat_malloc(size_t bytes) { return inject_failure() ? NULL : malloc(bytes ? bytes : 1); }
void *remat_calloc(size_t n, size_t size) { return inject_failure() ? NULL : calloc(n ? n : 1, size ? size : 1); }
void *remat_realloc(void *p, size_t bytes) { return inject_failure() ? NULL : realloc(p, bytes ? bytes : 1); }

char *remat_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = remat_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *remat_mem_calloc(remat_mem *m, int cat, size_t bytes)
{
    void *p = remat_mem_alloc(m, cat, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void remat_mem_free(remat_mem *m, int cat, void *p, size_t bytes)
{
    if (!p) return;
    m->live[cat] -= bytes;
    m->live_total -= bytes;
    if (!REMAT_MEM_CACHING || cat != REMAT_MEM_ACTS) { free(p); return; }
    if (m->ncache == m->cache_cap) {
        /* plain realloc: growing the list is the allocator's own business,
         * not an allocation failure injection may pick, and a free that
         * cannot cache its block just frees it */
        size_t cap = m->cache_cap ? 2 * m->cache_cap : 64;
        remat_mem_block *c = cap <= SIZE_MAX / sizeof *c ? realloc(m->cache, cap * sizeof *c) : NULL;
        if (!c) { free(p); return; }
        m->cache = c;
        m->cache_cap = cap;
    }
    size_t rounded = round64(bytes);
    m->cache[m->ncache++] = (remat_mem_block){ p, rounded };
    m->cached += rounded;
}

uint64_t remat_mem_cached(const remat_mem *m) { return m->cached; }

void remat_mem_trim(remat_mem *m)
{
    for (size_t i = 0; i < m->ncache; i++) free(m->cache[i].p);
    m->ncache = 0;
    m->cached = 0;
}

void remat_mem_release(remat_mem *m)
{
    remat_mem_trim(m);
    free(m->cache);
    m->cache = NULL;
    m->cache_cap = 0;
}

void remat_mem_reset_peak(remat_mem *m, int cat) { m->peak[cat] = m->live[cat]; }
