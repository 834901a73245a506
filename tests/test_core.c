/*
 * test_core.c -- the shared pieces of src/core/: the little-endian helpers
 * (endian.h), the content hash (remat_hash_bytes and its piecewise form),
 * the atomic writer and the sweeper of temporary files (files.c), the
 * median, the failure-injection counters under two threads, and the
 * caching allocator's free list (no cap, cached bytes exact, trim), and
 * the JSON writer (jsonw.c).
 *
 * Files go to a fresh mkdtemp directory under /tmp, removed at the end.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <omp.h>
#include "remat.h"
#include "core/core.h"
#include "core/endian.h"
#include "harness.h"

/* Fields are read from and written to explicit byte patterns, at every
 * alignment, so the test means the same on any host. */
static void test_endian(void)
{
    unsigned char buf[24];
    static const unsigned char le[8] = { 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01 };
    int bad = 0;
    for (int off = 0; off < 8; off++) {
        memset(buf, 0xee, sizeof buf);
        memcpy(buf + off, le, 8);
        bad += remat_get_le16(buf + off) != 0x0708;
        bad += remat_get_le32(buf + off) != 0x05060708u;
        bad += remat_get_le64(buf + off) != 0x0102030405060708ull;
        memset(buf, 0xee, sizeof buf);
        remat_put_le64(buf + off, 0x0102030405060708ull);
        bad += memcmp(buf + off, le, 8) != 0 || buf[off + 8] != 0xee || (off && buf[off - 1] != 0xee);
        memset(buf, 0xee, sizeof buf);
        remat_put_le32(buf + off, 0x05060708u);
        bad += memcmp(buf + off, le, 4) != 0 || buf[off + 4] != 0xee;
        memset(buf, 0xee, sizeof buf);
        remat_put_le16(buf + off, 0x0708);
        bad += memcmp(buf + off, le, 2) != 0 || buf[off + 2] != 0xee;
    }
    CHECK(bad == 0, "endian: %d fields read or written wrong", bad);

    /* 1.5f is 0x3fc00000: little-endian bytes 00 00 c0 3f */
    static const unsigned char f15[4] = { 0x00, 0x00, 0xc0, 0x3f };
    CHECK(remat_get_lef32(f15) == 1.5f, "get_lef32: %g", (double)remat_get_lef32(f15));
    remat_put_lef32(buf + 1, -2.25f);
    CHECK(remat_get_lef32(buf + 1) == -2.25f && buf[4] == 0xc0 && buf[3] == 0x10,
          "put_lef32(-2.25) wrote %02x %02x %02x %02x", buf[1], buf[2], buf[3], buf[4]);

    /* the array conversion: little-endian bytes in, host floats out, and back */
    float x[3];
    unsigned char raw[12];
    const float want[3] = { 1.5f, -2.25f, 1e-30f };
    for (int i = 0; i < 3; i++) remat_put_lef32(raw + 4 * i, want[i]);
    memcpy(x, raw, sizeof raw);
    remat_le_f32_swap(x, 3);
    CHECK(x[0] == want[0] && x[1] == want[1] && x[2] == want[2], "le_f32_swap: %g %g %g", (double)x[0],
          (double)x[1], (double)x[2]);
    remat_le_f32_swap(x, 3);
    CHECK(memcmp(x, raw, sizeof raw) == 0, "le_f32_swap twice is the identity");
    uint16_t one = 1;
    CHECK(remat_host_is_le() == (*(unsigned char *)&one == 1), "host_is_le");
}

/* remat_hash_bytes is defined on little-endian words: these values hold on
 * every host (they are what the little-endian hosts always computed, so
 * params_hash and checkpoint checksums did not change).  Fed in pieces of
 * every split, the piecewise form gives the same numbers. */
static void test_hash(void)
{
    static const struct { size_t n; uint64_t h; } gold[] = {
        {0, 0xe9e0033e3badaf36ull}, {1, 0xfd080f9a026d8f50ull}, {7, 0x6efc2a749138a7abull},
        {8, 0x3acde8cd836c61c9ull}, {9, 0x9a85a2f8207344daull}, {15, 0x7d8f4eef12a85e9cull},
        {16, 0x74e9cb188d0443ceull}, {17, 0x082e365591e9485eull}, {63, 0xf7c8bef35e6871a8ull},
        {64, 0x137d6f1ae67f80d7ull},
    };
    unsigned char b[64];
    for (int i = 0; i < 64; i++) b[i] = (unsigned char)(i * 37 + 11);
    for (size_t k = 0; k < sizeof gold / sizeof gold[0]; k++)
        CHECK(remat_hash_bytes(b, gold[k].n) == gold[k].h, "hash of %zu bytes: %016llx, want %016llx", gold[k].n,
              (unsigned long long)remat_hash_bytes(b, gold[k].n), (unsigned long long)gold[k].h);
    int bad = 0;
    for (size_t n = 0; n <= 64; n++) {
        uint64_t want = remat_hash_bytes(b, n);
        for (size_t i = 0; i <= n; i++)
            for (size_t j = i; j <= n; j++) {   /* three pieces: [0,i) [i,j) [j,n) */
                remat_hash s;
                remat_hash_init(&s, n);
                remat_hash_update(&s, b, i);
                remat_hash_update(&s, b + i, j - i);
                remat_hash_update(&s, b + j, n - j);
                bad += remat_hash_final(&s) != want;
            }
    }
    CHECK(bad == 0, "piecewise hash: %d splits differ from remat_hash_bytes", bad);
    /* byte by byte, over an unaligned start */
    remat_hash s;
    remat_hash_init(&s, 61);
    for (int i = 3; i < 64; i++) remat_hash_update(&s, b + i, 1);
    CHECK(remat_hash_final(&s) == remat_hash_bytes(b + 3, 61), "byte-by-byte hash");
}

static char dir[64];

static const char *path_in(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static int exists(const char *name) { struct stat sb; return stat(path_in(name), &sb) == 0; }

static void put_file(const char *name, const char *text)
{
    FILE *f = fopen(path_in(name), "wb");
    if (!f) { perror(name); exit(2); }
    fputs(text, f);
    fclose(f);
}

static int has_text(const char *name, const char *text)
{
    char buf[256] = "";
    FILE *f = fopen(path_in(name), "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return !strcmp(buf, text);
}

static int count_tmps(void)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) n += strstr(de->d_name, ".tmp") != NULL;
    if (d) closedir(d);
    return n;
}

/* "x-<anything>.tmp.PID" -> PID: a caller's own naming, for the sweeper */
static long x_tmp_pid(const char *name, const void *arg)
{
    (void)arg;
    const char *t = strstr(name, ".tmp.");
    return strncmp(name, "x-", 2) || !t ? 0 : remat_tmp_suffix_pid(t);
}

static void test_atomic_files(void)
{
    remat_atomic_file a;
    /* commit: the whole new file under the final name, no temporary file */
    put_file("f.txt", "old");
    CHECK(remat_atomic_begin(&a, path_in("f.txt")) == REMAT_OK && a.f, "begin: %s", remat_errmsg());
    CHECK(count_tmps() == 1 && has_text("f.txt", "old"), "begun: one temporary file, the old contents in place");
    fputs("new contents", a.f);
    CHECK(remat_atomic_commit(&a) == REMAT_OK && !a.f, "commit: %s", remat_errmsg());
    CHECK(has_text("f.txt", "new contents") && count_tmps() == 0, "committed: new contents, no temporary file");
    /* abort: the old file untouched, no temporary file */
    CHECK(remat_atomic_begin(&a, path_in("f.txt")) == REMAT_OK, "begin again");
    fputs("half of", a.f);
    remat_atomic_abort(&a);
    CHECK(!a.f && has_text("f.txt", "new contents") && count_tmps() == 0, "aborted: old contents, no temporary file");
    /* a file that does not exist yet */
    CHECK(remat_atomic_begin(&a, path_in("g.txt")) == REMAT_OK && remat_atomic_commit(&a) == REMAT_OK &&
          exists("g.txt") && count_tmps() == 0, "an empty new file");
    /* failures: a missing directory, no path, commit without begin */
    CHECK(remat_atomic_begin(&a, path_in("nodir/f.txt")) == REMAT_ERR_IO && !a.f && strstr(remat_errmsg(), "nodir"),
          "begin in a missing directory: %s", remat_errmsg());
    CHECK(remat_atomic_begin(&a, "") == REMAT_ERR_INVALID && remat_atomic_begin(&a, path_in("")) == REMAT_ERR_INVALID,
          "begin without a file name");
    a.f = NULL;
    CHECK(remat_atomic_commit(&a) == REMAT_ERR_STATE, "commit without begin");
    remat_atomic_abort(&a);   /* harmless */
    CHECK(remat_write_file_atomic(path_in("w.txt"), "abc", 3) == REMAT_OK && has_text("w.txt", "abc") &&
          count_tmps() == 0, "remat_write_file_atomic: %s", remat_errmsg());

    /* the suffix parser */
    CHECK(remat_tmp_suffix_pid(".tmp.123") == 123 && !remat_tmp_suffix_pid(".tmp.") &&
          !remat_tmp_suffix_pid(".tmp.12x") && !remat_tmp_suffix_pid(".tmp.-4") && !remat_tmp_suffix_pid(".tmp.0") &&
          !remat_tmp_suffix_pid("tmp.5") && !remat_tmp_suffix_pid(".tmp.99999999999999999999999"),
          "remat_tmp_suffix_pid");

    /* the sweeper: dead writers' files go, a live writer's and other names stay */
    pid_t child = fork();
    if (child == 0) _exit(0);
    if (child < 0) { CHECK(0, "fork"); return; }
    waitpid(child, NULL, 0);   /* its pid now names no process */
    char dead[64], live[64], mine[64], x_dead[64], x_live[64];
    snprintf(dead, sizeof dead, "f.txt.tmp.%ld", (long)child);
    snprintf(live, sizeof live, "f.txt.tmp.%ld", (long)getppid());
    snprintf(mine, sizeof mine, "f.txt.tmp.%ld", (long)getpid());
    snprintf(x_dead, sizeof x_dead, "x-7.tmp.%ld", (long)child);
    snprintf(x_live, sizeof x_live, "x-8.tmp.%ld", (long)getppid());
    const char *all[] = { dead, live, mine, x_dead, x_live, "f.txt.tmp.", "f.txt.tmp.9x", "other.tmp.1" };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) put_file(all[k], "half");
    /* begin_swept leaves the sweep to its caller */
    CHECK(remat_atomic_begin_swept(&a, path_in("f.txt")) == REMAT_OK, "begin_swept: %s", remat_errmsg());
    remat_atomic_abort(&a);
    CHECK(exists(dead) && !exists(mine), "begin_swept sweeps nothing (its own file is aborted)");
    put_file(mine, "half");
    /* begin sweeps its own path's dead temporary files (mine is begin's own
     * name: it is truncated and used) */
    CHECK(remat_atomic_begin(&a, path_in("f.txt")) == REMAT_OK, "begin beside stale files");
    remat_atomic_abort(&a);
    CHECK(!exists(dead) && !exists(mine), "a dead writer's temporary file is deleted");
    CHECK(exists(live) && exists(x_dead) && exists("f.txt.tmp.") && exists("f.txt.tmp.9x") &&
          exists("other.tmp.1"), "a live writer's file and other names stay");
    remat_sweep_tmps(dir, x_tmp_pid, NULL);
    CHECK(!exists(x_dead) && exists(x_live) && exists(live), "the sweeper with a caller's naming");
    const char *rest[] = { live, x_live, "f.txt.tmp.", "f.txt.tmp.9x", "other.tmp.1", "f.txt", "g.txt", "w.txt" };
    for (size_t k = 0; k < sizeof rest / sizeof rest[0]; k++) unlink(path_in(rest[k]));
}

/* remat_read_file: sizes around the cap and its 4 KiB first guess, an empty
 * file, a pipe (no size to go by), a missing file, allocation failures */
static void test_read_file(void)
{
    char *b = (char *)&b;
    size_t n = 7;
    static char big[10001];
    for (int i = 0; i < 10000; i++) big[i] = (char)('a' + i % 26);
    put_file("r.txt", big);
    CHECK(remat_read_file(path_in("r.txt"), 10000, &b, &n) == REMAT_OK && n == 10000 && !memcmp(b, big, n) &&
          b[n] == 0, "a file of exactly max bytes, NUL-terminated: %s", remat_errmsg());
    free(b);
    CHECK(remat_read_file(path_in("r.txt"), 9999, &b, &n) == REMAT_ERR_FORMAT && !b && n == 0 &&
          strstr(remat_errmsg(), "r.txt") && strstr(remat_errmsg(), "larger than 9999 bytes"),
          "one byte over max: %s", remat_errmsg());
    CHECK(remat_read_file(path_in("r.txt"), 100, &b, &n) == REMAT_ERR_FORMAT && !b, "far over a small max");
    put_file("e.txt", "");
    CHECK(remat_read_file(path_in("e.txt"), 0, &b, &n) == REMAT_OK && b && n == 0 && b[0] == 0, "an empty file");
    free(b);
    CHECK(remat_read_file(path_in("none.txt"), 10, &b, &n) == REMAT_ERR_IO && !b && strstr(remat_errmsg(), "none.txt"),
          "a missing file: %s", remat_errmsg());
    CHECK(remat_read_file(NULL, 10, &b, &n) == REMAT_ERR_INVALID && remat_read_file(path_in("r.txt"), 10, NULL, &n) ==
          REMAT_ERR_INVALID, "NULL arguments");
    /* a pipe: its size is unknown, so the buffer grows */
    int fd[2];
    if (pipe(fd) == 0) {
        pid_t w = fork();
        if (w == 0) {
            close(fd[0]);
            for (size_t k = 0; k < 10000;) { ssize_t r = write(fd[1], big + k, 10000 - k); if (r <= 0) _exit(1); k += (size_t)r; }
            _exit(0);
        }
        close(fd[1]);
        char dev[64];
        snprintf(dev, sizeof dev, "/dev/fd/%d", fd[0]);
        CHECK(remat_read_file(dev, 20000, &b, &n) == REMAT_OK && n == 10000 && !memcmp(b, big, n), "a pipe: %s",
              remat_errmsg());
        free(b);
        close(fd[0]);
        if (w > 0) waitpid(w, NULL, 0);
    }
    int k, tried = 0;
    for (k = 1; k < 10; k++) {
        remat_mem_fail_at((uint64_t)k);
        remat_status st = remat_read_file(path_in("r.txt"), 10000, &b, &n);
        remat_mem_fail_at(0);
        if (st == REMAT_OK) { free(b); break; }
        tried++;
        CHECK(st == REMAT_ERR_NOMEM && !b, "failing allocation %d: %d", k, (int)st);
    }
    CHECK(tried >= 1 && k < 10, "read_file: %d allocations made to fail", tried);
    unlink(path_in("r.txt"));
    unlink(path_in("e.txt"));
}

static void test_median(void)
{
    double a[] = { 5, 1, 4 }, b[] = { 9, -1, 3, 2 }, c[] = { 7 }, d[] = { 2, 2, 1, 2, 2, 3 };
    CHECK(remat_median(a, 3) == 4 && a[0] == 1 && a[1] == 4 && a[2] == 5, "odd n, sorted in place");
    CHECK(remat_median(b, 4) == 2.5, "even n: the mean of the middle two");
    CHECK(remat_median(c, 1) == 7 && remat_median(NULL, 0) == 0, "one value; none");
    CHECK(remat_median(d, 6) == 2, "ties");
}

/* Two threads allocating at once: every allocation is counted exactly
 * once, and a failure injected N allocations ahead happens exactly once,
 * in whichever thread makes the N-th allocation. */
#define PER_THREAD 200000

static void test_alloc_counters_threads(void)
{
    uint64_t before = remat_mem_alloc_count();
    int nthreads = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp single
        nthreads = omp_get_num_threads();
        for (int i = 0; i < PER_THREAD; i++) free(remat_malloc(16));
    }
    uint64_t got = remat_mem_alloc_count() - before;
    CHECK(nthreads == 2 && got == 2ull * PER_THREAD, "%d threads: %llu allocations counted, %llu made", nthreads,
          (unsigned long long)got, 2ull * PER_THREAD);

    long failed = 0;
    remat_mem_fail_at(PER_THREAD + 12345);
#pragma omp parallel num_threads(2) reduction(+ : failed)
    for (int i = 0; i < PER_THREAD; i++) {
        void *p = remat_malloc(16);
        failed += p == NULL;
        free(p);
    }
    remat_mem_fail_at(0);
    CHECK(failed == 1, "one injected failure among two threads' allocations: %ld failed", failed);

    /* the accounting allocator counts through the same counter */
    remat_mem m[2];
    memset(m, 0, sizeof m);
    before = remat_mem_alloc_count();
#pragma omp parallel num_threads(2)
    {
        remat_mem *mine = &m[omp_get_thread_num()];   /* a remat_mem belongs to one thread */
        for (int i = 0; i < PER_THREAD / 4; i++) remat_mem_free(mine, REMAT_MEM_WORKSPACE,
                                                                remat_mem_alloc(mine, REMAT_MEM_WORKSPACE, 64), 64);
    }
    CHECK(remat_mem_alloc_count() - before == PER_THREAD / 2 && m[0].n_allocs + m[1].n_allocs == PER_THREAD / 2,
          "remat_mem allocations from two threads: %llu counted",
          (unsigned long long)(remat_mem_alloc_count() - before));
    remat_mem_release(&m[0]);
    remat_mem_release(&m[1]);
}

/* More blocks than the old fixed free list held (1024) are all cached and
 * all reused; the cached bytes are exact at every moment; frees never take
 * part in failure injection; trim gives every cached block back. */
#define NBLOCKS 3000

static size_t block_bytes(int i) { return (size_t)(i % 13) * 100 + 1 + (size_t)i % 3; }
static uint64_t rounded(size_t b) { return (b + 63) / 64 * 64; }

static void test_mem_cache(void)
{
    static void *p[NBLOCKS];
    remat_mem m;
    memset(&m, 0, sizeof m);
    uint64_t want_cached = 0, want_live = 0;
    int bad = 0;
    for (int i = 0; i < NBLOCKS; i++) {
        p[i] = remat_mem_alloc(&m, REMAT_MEM_ACTS, block_bytes(i));
        bad += !p[i];
        want_live += block_bytes(i);
    }
    CHECK(!bad && m.n_allocs == NBLOCKS && m.n_fresh == NBLOCKS && m.live[REMAT_MEM_ACTS] == want_live &&
          remat_mem_cached(&m) == 0, "%d blocks allocated fresh", NBLOCKS);
    /* frees: no allocation is counted, so an armed injection stays armed */
    uint64_t count0 = remat_mem_alloc_count();
    remat_mem_fail_at(1);
    for (int i = 0; i < NBLOCKS; i++) {
        remat_mem_free(&m, REMAT_MEM_ACTS, p[i], block_bytes(i));
        want_cached += REMAT_MEM_CACHING ? rounded(block_bytes(i)) : 0;
        bad += remat_mem_cached(&m) != want_cached;
    }
    remat_mem_fail_at(0);
    CHECK(remat_mem_alloc_count() == count0, "frees count no allocation");
    CHECK(!bad && m.live_total == 0 && remat_mem_cached(&m) == want_cached,
          "cached bytes exact after each free: %llu, want %llu", (unsigned long long)remat_mem_cached(&m),
          (unsigned long long)want_cached);
    /* the same sizes again (in another order): every block is a cached one */
    for (int i = NBLOCKS - 1; i >= 0; i--) {
        p[i] = remat_mem_alloc(&m, REMAT_MEM_ACTS, block_bytes(i));
        want_cached -= REMAT_MEM_CACHING ? rounded(block_bytes(i)) : 0;
        bad += !p[i] || remat_mem_cached(&m) != want_cached;
    }
    uint64_t want_fresh = REMAT_MEM_CACHING ? NBLOCKS : 2 * NBLOCKS;
    CHECK(!bad && m.n_allocs == 2 * NBLOCKS && m.n_fresh == want_fresh && remat_mem_cached(&m) == 0,
          "all %d blocks reused: %llu fresh of %llu allocations (want %llu fresh)", NBLOCKS,
          (unsigned long long)m.n_fresh, (unsigned long long)m.n_allocs, (unsigned long long)want_fresh);
    /* other categories are never cached */
    void *w = remat_mem_alloc(&m, REMAT_MEM_WORKSPACE, 1000);
    remat_mem_free(&m, REMAT_MEM_WORKSPACE, w, 1000);
    CHECK(remat_mem_cached(&m) == 0, "workspace blocks are freed, not cached");
    /* trim: the cache is empty, the allocator usable */
    for (int i = 0; i < NBLOCKS; i++) remat_mem_free(&m, REMAT_MEM_ACTS, p[i], block_bytes(i));
    remat_mem_trim(&m);
    CHECK(remat_mem_cached(&m) == 0 && m.ncache == 0 && m.live_total == 0, "trim");
    uint64_t fresh0 = m.n_fresh;
    void *q = remat_mem_alloc(&m, REMAT_MEM_ACTS, 100);
    CHECK(q && m.n_fresh == fresh0 + 1, "after trim, allocations are fresh");
    remat_mem_free(&m, REMAT_MEM_ACTS, q, 100);
    remat_mem_release(&m);
    CHECK(m.cache == NULL && m.cache_cap == 0 && remat_mem_cached(&m) == 0, "release");
}

/* Writes with fn into a memory stream; returns the text (malloc'd) and
 * remat_jsonw_finish's status in *st. */
static char *jsonw_text(void (*fn)(remat_jsonw *), unsigned flags, remat_status *st)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    remat_jsonw *w = NULL;
    *st = remat_jsonw_create(f, flags, &w);
    if (!*st) {
        fn(w);
        *st = remat_jsonw_finish(w);
    }
    remat_jsonw_free(w);
    fclose(f);
    return buf;
}

static void jw_values(remat_jsonw *w)
{
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "s", "q\"b\\n\nt\tc\001 \303\251 \377x \342\202 \355\240\200");
    remat_jsonw_str(w, "null", NULL);
    remat_jsonw_num(w, "tenth", 0.1);
    remat_jsonw_num(w, "third", 1.0 / 3);
    remat_jsonw_num(w, "big", 141091531099471872.0);
    remat_jsonw_num(w, "nan", NAN);
    remat_jsonw_float(w, "f", 0.1f);
    remat_jsonw_int(w, "i", INT64_MIN);
    remat_jsonw_uint(w, "u", UINT64_MAX);
    remat_jsonw_array(w, "a");
    remat_jsonw_bool(w, NULL, 1);
    remat_jsonw_null(w, NULL);
    remat_jsonw_newline(w);
    remat_jsonw_object(w, NULL);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
    remat_jsonw_int(w, NULL, 7);   /* a second top-level value: JSON Lines */
}

static void jw_key_in_array(remat_jsonw *w) { remat_jsonw_array(w, NULL); remat_jsonw_int(w, "k", 1); remat_jsonw_end(w); }
static void jw_no_key(remat_jsonw *w) { remat_jsonw_object(w, NULL); remat_jsonw_int(w, NULL, 1); remat_jsonw_end(w); }
static void jw_open(remat_jsonw *w) { remat_jsonw_object(w, NULL); remat_jsonw_array(w, "a"); }
static void jw_extra_end(remat_jsonw *w) { remat_jsonw_int(w, NULL, 1); remat_jsonw_end(w); }
static void jw_deep(remat_jsonw *w)
{
    for (int k = 0; k <= REMAT_JSONW_DEPTH; k++) remat_jsonw_array(w, NULL);
    for (int k = 0; k <= REMAT_JSONW_DEPTH; k++) remat_jsonw_end(w);
}

/* The JSON writer: exact numbers, escaped strings (invalid UTF-8 as
 * \u00XX), the two spacings, JSON Lines, and misuse reported. */
static void test_jsonw(void)
{
    remat_status st;
    char *t = jsonw_text(jw_values, 0, &st);
    const char *want =
        "{\"s\":\"q\\\"b\\\\n\\nt\\tc\\u0001 \303\251 \\u00ffx \\u00e2\\u0082 \\u00ed\\u00a0\\u0080\","
        "\"null\":null,\"tenth\":0.1,\"third\":0.3333333333333333,\"big\":1.4109153109947187e+17,\"nan\":null,"
        "\"f\":0.1,\"i\":-9223372036854775808,\"u\":18446744073709551615,\"a\":[true,null,\n{}]}\n7\n";
    CHECK(st == REMAT_OK && t && !strcmp(t, want), "jsonw values: %s\n  want: %s (%s)", t ? t : "(null)", want,
          remat_errmsg());
    free(t);
    t = jsonw_text(jw_no_key, REMAT_JSONW_SPACED, &st);
    CHECK(st == REMAT_ERR_STATE && t && !strcmp(t, "{"), "jsonw: a member without a key: %d '%s'", st, t ? t : "");
    free(t);
    t = jsonw_text(jw_key_in_array, REMAT_JSONW_SPACED, &st);
    CHECK(st == REMAT_ERR_STATE && strstr(remat_errmsg(), "key outside"), "jsonw: a key in an array: %d %s", st,
          remat_errmsg());
    free(t);
    t = jsonw_text(jw_open, 0, &st);
    CHECK(st == REMAT_ERR_STATE && strstr(remat_errmsg(), "left open"), "jsonw: left open: %s", remat_errmsg());
    free(t);
    t = jsonw_text(jw_extra_end, 0, &st);
    CHECK(st == REMAT_ERR_STATE && t && !strcmp(t, "1\n"), "jsonw: end() with nothing open: %d", st);
    free(t);
    t = jsonw_text(jw_deep, 0, &st);
    CHECK(st == REMAT_ERR_STATE && strstr(remat_errmsg(), "deeper"), "jsonw: too deep: %s", remat_errmsg());
    free(t);
    /* every double reads back as itself, in at most 17 digits */
    int bad = 0;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int k = 0; k < 20000; k++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof d);
        if (!isfinite(d)) continue;
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        remat_jsonw *w = NULL;
        if (!remat_jsonw_create(f, 0, &w)) remat_jsonw_num(w, NULL, d);
        remat_jsonw_free(w);
        fclose(f);
        if (!buf || strtod(buf, NULL) != d || strlen(buf) > 25) bad++;
        free(buf);
    }
    CHECK(bad == 0, "jsonw: %d of 20000 doubles did not read back", bad);
    remat_jsonw *w = NULL;
    CHECK(remat_jsonw_create(NULL, 0, &w) == REMAT_ERR_INVALID && !w, "jsonw_create without a FILE");
    remat_jsonw_free(NULL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/remat-test-core-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    test_endian();
    test_hash();
    test_atomic_files();
    test_read_file();
    test_median();
    test_alloc_counters_threads();
    test_mem_cache();
    test_jsonw();
    rmdir(dir);
    return TEST_REPORT();
}
