/*
 * runtimes.c -- samples of a run's instruction times, and their medians
 * (see runtimes.h).
 */
#include <stdlib.h>
#include <string.h>
#include "runtimes.h"
#include "../core/core.h"

static remat_status push(double **v, size_t *n, size_t *cap, double x)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        double *w = remat_realloc(*v, c * sizeof *w);
        if (!w) return remat_fail(REMAT_ERR_NOMEM, "out of memory collecting instruction times");
        *v = w;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return REMAT_OK;
}

remat_status remat_run_samples_add(remat_run_samples *s, int k, int t, double ms)
{
    if (k == -1) return push(&s->over, &s->n_over, &s->cap_over, ms);
    if (k < 0 || k >= REMAT_NKINDS || t < 0 || t >= RT_MAXT)
        return remat_fail(REMAT_ERR_INVALID, "instruction kind %d, tensor %d out of range", k, t);
    return push(&s->v[k][t], &s->n[k][t], &s->cap[k][t], ms);
}

void remat_run_samples_finish(remat_run_samples *s, remat_run_times *rt)
{
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++) {
            size_t n = s->n[k][t];
            rt->n[k][t] = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
            rt->ms[k][t] = n ? remat_median(s->v[k][t], n) : 0;
        }
    rt->n_overhead = s->n_over > UINT32_MAX ? UINT32_MAX : (uint32_t)s->n_over;
    rt->overhead_ms = s->n_over ? remat_median(s->over, s->n_over) : 0;
}

void remat_run_samples_free(remat_run_samples *s)
{
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++) free(s->v[k][t]);
    free(s->over);
    memset(s, 0, sizeof *s);
}
