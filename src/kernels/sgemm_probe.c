/*
 * sgemm_probe.c -- what the BLAS can do on this machine: a timed square
 * SGEMM (the yardstick `remat bench` divides its achieved GFLOP/s by), the
 * BLAS's own description of itself, and the CPU's model name.  Contract in remat.h (utilities).
 *
 * Legend: n the side of the square matrices; C (n,n) = A (n,n) @ B (n,n).
 * One SGEMM is 2 n^3 floating-point operations (a multiply-add counts 2,
 * as everywhere in remat's FLOP model).
 */
#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "../core/core.h"

#ifdef REMAT_OPENBLAS
char *openblas_get_config(void);
char *openblas_get_corename(void);
#endif

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best of `reps` timed calls after one untimed call (which pages the
 * buffers in and wakes the BLAS threads).  The buffers go through the
 * accounting allocator like every other remat allocation. */
double remat_sgemm_gflops(int n, int reps)
{
    if (n < 1 || n > 16384 || reps < 1) {
        remat_fail(REMAT_ERR_INVALID, "remat_sgemm_gflops: n must be in [1, 16384] and reps >= 1 (got %d, %d)", n, reps);
        return 0.0;
    }
    remat_mem mem;
    memset(&mem, 0, sizeof mem);
    size_t bytes = (size_t)n * (size_t)n * sizeof(float);
    float *a = remat_mem_alloc(&mem, REMAT_MEM_WORKSPACE, bytes);
    float *b = remat_mem_alloc(&mem, REMAT_MEM_WORKSPACE, bytes);
    float *c = remat_mem_alloc(&mem, REMAT_MEM_WORKSPACE, bytes);
    double best = 0.0;
    if (!a || !b || !c) {
        remat_fail(REMAT_ERR_NOMEM, "out of memory for a %dx%d SGEMM probe", n, n);
        goto out;
    }
    /* small, exactly representable values: no denormals, no overflow */
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
        a[i] = (float)((int)(i % 7) - 3) * 0.125f;
        b[i] = (float)((int)(i % 5) - 2) * 0.25f;
    }
    memset(c, 0, bytes);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double flops = 2.0 * (double)n * (double)n * (double)n;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = now_s() - t0;
        if (dt > 0 && flops / dt / 1e9 > best) best = flops / dt / 1e9;
    }
out:
    remat_mem_free(&mem, REMAT_MEM_WORKSPACE, a, bytes);
    remat_mem_free(&mem, REMAT_MEM_WORKSPACE, b, bytes);
    remat_mem_free(&mem, REMAT_MEM_WORKSPACE, c, bytes);
    return best;
}

const char *remat_blas_info(void)
{
#ifdef REMAT_OPENBLAS
    const char *s = openblas_get_config();
    return s && *s ? s : "OpenBLAS";
#else
    return "CBLAS (unknown implementation)";
#endif
}

const char *remat_blas_core(void)
{
#ifdef REMAT_OPENBLAS
    const char *s = openblas_get_corename();
    return s ? s : "";
#else
    return "";
#endif
}

void remat_machine_cpu(char *buf, size_t n)
{
    if (!buf || !n) return;
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *c = strchr(line, ':');
        if (!c) break;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        size_t k = 0;
        for (; *c && *c != '\n' && k + 1 < n; c++) buf[k++] = (*c >= 32 && *c < 127) ? *c : '?';
        while (k > 0 && buf[k - 1] == ' ') k--;
        buf[k] = 0;
        if (!k) snprintf(buf, n, "unknown");
        break;
    }
    fclose(f);
}

