/*
 * core.h -- internals shared by every part of the library: error messages,
 * checked size arithmetic, the accounting allocator.
 */
#ifndef REMAT_CORE_H
#define REMAT_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "remat.h"

/* Records a printf-style message as the calling thread's last error and
 * returns st, so that `return remat_fail(REMAT_ERR_INVALID, "...")` reads
 * naturally.  The message is one line: control characters (a newline in a
 * name a file holds, say) become '?'. */
remat_status remat_fail(remat_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void remat_clear_error(void);

/* a*b and a+b, or 0 with *ok cleared on overflow. */
static inline uint64_t remat_mul(uint64_t a, uint64_t b, int *ok)
{
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) { *ok = 0; return 0; }
    return r;
}
static inline uint64_t remat_add(uint64_t a, uint64_t b, int *ok)
{
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) { *ok = 0; return 0; }
    return r;
}

/* ---- the content hash, piecewise ----------------------------------------------
 * remat_hash_bytes (remat.h) over data that arrives in pieces, e.g. a file
 * read in chunks: init with the total number of bytes that will be fed (the
 * hash is seeded by the length), update with the pieces in order, in any
 * sizes, then final.  The result equals remat_hash_bytes of the
 * concatenation; a partial 8-byte word is carried between pieces. */
typedef struct remat_hash {
    uint64_t h;
    unsigned char tail[8];
    size_t ntail;
} remat_hash;

void remat_hash_init(remat_hash *s, uint64_t total);
void remat_hash_update(remat_hash *s, const void *p, size_t n);
uint64_t remat_hash_final(const remat_hash *s);

/* ---- the accounting allocator (after Redis's zmalloc) ----------------------
 * Every byte remat allocates for a model goes through one remat_mem, which
 * keeps live and peak bytes per category and in total.  Requested sizes are
 * counted exactly (no malloc overhead), so the figures are reproducible and
 * can be predicted.  Allocations are 64-byte aligned.  fail_at = N makes the
 * N-th allocation from now fail (1-based), for failure-injection tests. */
enum remat_mem_cat {
    REMAT_MEM_PARAMS = 0,
    REMAT_MEM_GRADS,
    REMAT_MEM_OPTIM,
    REMAT_MEM_ACTS,        /* activations and activation gradients */
    REMAT_MEM_WORKSPACE,
    REMAT_MEM_WEIGHTS16,   /* bf16: the copy of the weights the GEMMs read */
    REMAT_MEM_REDUCE,      /* data parallelism: the gradient tree's partial sums, the
                              receive buffer, norm and loss partials */
    REMAT_MEM_NCAT
};

/* The caching of freed activation blocks: off under AddressSanitizer, so
 * that it still sees every use after free. */
#if defined(__SANITIZE_ADDRESS__)
#define REMAT_MEM_CACHING 0
#else
#define REMAT_MEM_CACHING 1
#endif

/* A freed block kept for reuse: its address and 64-byte rounded size. */
typedef struct remat_mem_block {
    void *p;
    size_t size;
} remat_mem_block;

/* Zero-initialise (memset or calloc); remat_mem_release before dropping it.
 * Not thread-safe: one remat_mem is used by one thread at a time. */
typedef struct remat_mem {
    uint64_t live[REMAT_MEM_NCAT];
    uint64_t peak[REMAT_MEM_NCAT];
    uint64_t live_total, peak_total;
    uint64_t n_allocs;         /* successful allocations ... */
    uint64_t n_fresh;          /* ... of which took a new block from the heap (the rest reused a cached one) */
    /* Freed activation blocks (REMAT_MEM_ACTS) kept for reuse by an
     * allocation of the same rounded size, so that a training step does not
     * page-fault its activations in anew every time (like PyTorch's caching
     * allocator).  Cached blocks are not live and are in no category; cached
     * counts their (64-byte rounded) bytes exactly.  The list has no cap: it
     * grows by doubling, outside failure injection (a free never fails; if
     * the list cannot grow, the block is simply freed).  Memory the process
     * holds (its RSS, about) is therefore live_total + cached + malloc's own
     * overhead; remat_mem_trim brings it back down to the live bytes. */
    uint64_t cached;
    remat_mem_block *cache;
    size_t ncache, cache_cap;
} remat_mem;

void *remat_mem_alloc(remat_mem *m, int cat, size_t bytes);   /* NULL on failure */
void *remat_mem_calloc(remat_mem *m, int cat, size_t bytes);
void remat_mem_free(remat_mem *m, int cat, void *p, size_t bytes);
/* Bytes of the cached free blocks (the act_cached_bytes of remat_stats). */
uint64_t remat_mem_cached(const remat_mem *m);
/* Returns the cached free blocks to the heap (cached becomes 0); the
 * remat_mem stays usable. */
void remat_mem_trim(remat_mem *m);
/* remat_mem_trim, and frees the list itself: call before dropping a
 * remat_mem (it stays usable: a later free starts a new list). */
void remat_mem_release(remat_mem *m);
/* Resets a category's peak to its current live bytes. */
void remat_mem_reset_peak(remat_mem *m, int cat);

/* Global failure injection for tests: the N-th allocation from now fails
 * (0 disables); it counts remat_mem allocations and the plain ones below.
 * remat_mem_alloc_count returns the number of allocations attempted so far.
 * Both are safe when several threads use the library: the counter is one
 * process-wide atomic, so every attempt of every thread is counted exactly
 * once, and exactly one allocation fails -- the one that takes the count to
 * (count when remat_mem_fail_at was called) + N, whichever thread makes it.
 * "From now" is exact only when no other thread allocates during the call.
 * (A remat_mem itself is not shared: one per thread, or a lock around it.) */
void remat_mem_fail_at(uint64_t n);
uint64_t remat_mem_alloc_count(void);

/* Plain heap memory for handles, schedules, strings and file headers: not
 * counted in any remat_mem (whose figures are the tensors' bytes), but part
 * of failure injection, so that every allocation of the library can be made
 * to fail.  Release with free(). */
void *remat_malloc(size_t bytes);
void *remat_calloc(size_t n, size_t size);
void *remat_realloc(void *p, size_t bytes);
char *remat_strdup(const char *s);

/* ---- writing files atomically (files.c) ------------------------------------
 * The one way the library writes a file: begin creates PATH.tmp.PID (PID:
 * this process) after deleting the PATH.tmp.N that dead writers left, the
 * caller writes the contents to f, then commit flushes, fsyncs and closes
 * it, renames it over PATH and fsyncs the directory -- PATH is then the old
 * file or the whole new one -- or abort closes and deletes it.  After begin
 * succeeds exactly one of commit and abort must be called; both release
 * everything, whatever their outcome (a failed commit leaves no temporary
 * file).  Errors: REMAT_ERR_INVALID (no or too long a path), REMAT_ERR_IO
 * with a message that names PATH and the reason (a write that failed
 * unnoticed on f is caught by commit). */
typedef struct remat_atomic_file {
    FILE *f;                       /* write the contents here */
    char path[4096], tmp[4096 + 32];
} remat_atomic_file;

remat_status remat_atomic_begin(remat_atomic_file *a, const char *path);
/* remat_atomic_begin without the sweep, for a caller that has just swept
 * PATH's directory itself (remat_sweep_tmps with a tmp_pid that matches
 * PATH.tmp.N), so the directory is not read twice. */
remat_status remat_atomic_begin_swept(remat_atomic_file *a, const char *path);
remat_status remat_atomic_commit(remat_atomic_file *a);
void remat_atomic_abort(remat_atomic_file *a);

/* Reads the whole file at path (a regular file, or a pipe) into *buf, *n
 * bytes followed by a NUL so that text can be parsed in place (free() it),
 * refusing one over max bytes (max < SIZE_MAX - 1).  Errors (*buf NULL, *n
 * 0): REMAT_ERR_INVALID (a NULL argument), REMAT_ERR_IO (cannot open or
 * read; the message names path and the reason), REMAT_ERR_NOMEM, and
 * REMAT_ERR_FORMAT only for a file over max bytes, so that a caller can
 * replace that message with its own advice. */
remat_status remat_read_file(const char *path, size_t max, char **buf, size_t *n);

/* mkdir -p: creates path (parent_only: the directory path is in) and its
 * missing parents, mode 0755.  0, or -1 with errno set (ENOTDIR when it
 * exists as something else). */
int remat_mkdirs(const char *path, int parent_only);

/* The one sweeper of temporary files: deletes every file of dir for which
 * tmp_pid(name, arg) gives a process id > 0 that is neither this process
 * nor a live one (a live writer's file is left alone).  Errors (an
 * unreadable dir, a file that cannot be deleted) are ignored: a stale file
 * is harmless, only untidy. */
void remat_sweep_tmps(const char *dir, long (*tmp_pid)(const char *name, const void *arg), const void *arg);
/* The writer's pid when s is the suffix ".tmp.PID" of remat_atomic_begin's
 * names, else 0: the building block of tmp_pid functions. */
long remat_tmp_suffix_pid(const char *s);

/* ---- clocks -------------------------------------------------------------- */
/* Nanoseconds on CLOCK_MONOTONIC, or with cpu != 0 on this thread's CPU
 * clock (CLOCK_THREAD_CPUTIME_ID); remat_clock_ms the same in ms. */
uint64_t remat_clock_ns(int cpu);
static inline double remat_clock_ms(int cpu) { return (double)remat_clock_ns(cpu) / 1e6; }

#endif
