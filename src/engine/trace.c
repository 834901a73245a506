/*
 * trace.c -- the trace recorder (remat.h, "traces"; trace.h): every
 * instruction of a traced training step timed by two reads of the
 * monotonic clock, with the memory the accounting allocator measured, and
 * the Chrome trace-event JSON writer.
 *
 * The format is the Trace Event Format's JSON object form (Google, "Trace
 * Event Format", 2016): {"traceEvents": [...], "displayTimeUnit": "ms",
 * "otherData": {...}}, times in microseconds.  Steps and instructions are
 * complete events ("ph": "X") on one thread track, so an instruction nests
 * inside its step; memory is two counter tracks ("ph": "C").  PyTorch's
 * profiler shows its memory timeline beside its op timeline the same way.
 *
 * Recording never allocates: a step reserves room for all of its
 * instructions when it begins (remat_trace_step_begin), so a failure to
 * record is a clean REMAT_ERR_NOMEM before the step runs, never a
 * half-recorded step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "trace.h"
#include "model.h"

typedef struct tev {
    uint64_t t0, t1;               /* ns from the trace's epoch */
    uint64_t cpu;                  /* the thread's CPU time in it (ns; one thread only) */
    double flops;
    uint64_t live, peak;           /* activation bytes after it, highest inside it */
    uint64_t total, total_peak;    /* everything live: after it, highest inside it */
    uint32_t i;                    /* index in the schedule */
    int32_t layer;
    int8_t kind, tid;
} tev;

typedef struct tstep {
    uint64_t step, t0, t1;
    uint64_t c0, c1;               /* the thread's CPU clock (ns; one thread only) */
    size_t first, count;
    size_t policy;                 /* index into pol */
    int ok;
} tstep;

struct remat_trace {
    int have_cfg;
    remat_config cfg;              /* of the first step recorded: every step's */
    char cpu[128];
    int threads;                   /* 1: the thread's CPU time is read too */
    remat_gemm_engine gemm;
    uint64_t epoch;                /* the clock at the first step (ns) */
    tev *ev;
    size_t nev, capev;
    tstep *st;
    size_t nst, capst;
    char **pol;                    /* the policies of the steps, each once */
    size_t npol, cappol;
};


static uint64_t now_ns(void) { return remat_clock_ns(0); }

/* With one thread, the thread's CPU time as well: what the wall time is on
 * an idle machine, without the time other processes take on a shared one
 * (profile.c times ops the same way).  With several, CPU time would add
 * the threads up. */
static uint64_t cpu_ns(const remat_trace *t) { return t->threads == 1 ? remat_clock_ns(1) : 0; }

remat_status remat_trace_create(remat_trace **out)
{
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_trace_create: out is NULL");
    *out = remat_calloc(1, sizeof **out);
    return *out ? REMAT_OK : remat_fail(REMAT_ERR_NOMEM, "out of memory creating a trace");
}

void remat_trace_free(remat_trace *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->npol; i++) free(t->pol[i]);
    free(t->pol);
    free(t->ev);
    free(t->st);
    free(t);
}

int remat_trace_accepts(const remat_trace *t, const remat_config *cfg)
{
    return !t->have_cfg || remat_config_same(&t->cfg, cfg);
}

remat_status remat_model_set_trace(remat_model *m, remat_trace *t, uint64_t step)
{
    if (!m) return remat_fail(REMAT_ERR_INVALID, "remat_model_set_trace: model is NULL");
    if (t && !remat_trace_accepts(t, &m->cfg))
        return remat_fail(REMAT_ERR_INVALID, "this trace holds steps of another config (%d layers, dim %d, batch %d x "
                          "seq %d); use one trace per config", t->cfg.n_layer, t->cfg.n_embd, t->cfg.batch, t->cfg.seq);
    m->trace = t;
    m->trace_step = step;
    return REMAT_OK;
}

/* grows *p (elements of size sz) to hold need */
static remat_status reserve(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap) return REMAT_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = remat_realloc(*p, c * sz);
    if (!q) return remat_fail(REMAT_ERR_NOMEM, "out of memory recording a trace");
    *p = q;
    *cap = c;
    return REMAT_OK;
}

remat_status remat_trace_step_begin(remat_trace_run *r, remat_trace *t, uint64_t step, const remat_schedule *s)
{
    remat_status st;
    memset(r, 0, sizeof *r);
    if (!remat_trace_accepts(t, &s->cfg))
        return remat_fail(REMAT_ERR_INVALID, "this trace holds steps of another config");
    if ((st = reserve((void **)&t->ev, &t->capev, t->nev + s->n, sizeof *t->ev)) ||
        (st = reserve((void **)&t->st, &t->capst, t->nst + 1, sizeof *t->st)))
        return st;
    size_t pol = t->npol;
    if (!t->npol || strcmp(t->pol[t->npol - 1], s->policy)) {
        if ((st = reserve((void **)&t->pol, &t->cappol, t->npol + 1, sizeof *t->pol))) return st;
        if (!(t->pol[t->npol] = remat_strdup(s->policy))) return remat_fail(REMAT_ERR_NOMEM, "out of memory recording a trace");
        t->npol++;
    } else {
        pol = t->npol - 1;
    }
    if (!t->have_cfg) {
        t->have_cfg = 1;
        t->cfg = s->cfg;
        remat_machine_cpu(t->cpu, sizeof t->cpu);
        t->threads = remat_get_threads();
        t->gemm = remat_gemm_get();
        t->epoch = now_ns();
    }
    r->t = t;
    r->s = s;
    r->step = t->nst;
    tstep *ts = &t->st[t->nst++];
    memset(ts, 0, sizeof *ts);
    ts->step = step;
    ts->first = t->nev;
    ts->policy = pol;
    ts->c0 = cpu_ns(t);
    ts->t0 = now_ns() - t->epoch;
    return REMAT_OK;
}

/* ---- the wrapped hooks --------------------------------------------------- */

static remat_status w_begin(void *arg, size_t i, const remat_instr *in)
{
    remat_trace_run *r = arg;
    remat_mem *m = r->mem;
    /* the instruction's own high-water marks: from what is live now */
    r->acts_peak = m->peak[REMAT_MEM_ACTS];
    r->total_peak = m->peak_total;
    m->peak[REMAT_MEM_ACTS] = m->live[REMAT_MEM_ACTS];
    m->peak_total = m->live_total;
    r->open = 1;
    r->c_begin = cpu_ns(r->t);
    r->t_begin = now_ns();
    return r->inner->begin ? r->inner->begin(r->inner->arg, i, in) : REMAT_OK;
}

/* puts the step's high-water marks back, raised by the instruction's */
static void close_instr(remat_trace_run *r)
{
    remat_mem *m = r->mem;
    if (m->peak[REMAT_MEM_ACTS] < r->acts_peak) m->peak[REMAT_MEM_ACTS] = r->acts_peak;
    if (m->peak_total < r->total_peak) m->peak_total = r->total_peak;
    r->open = 0;
}

static void w_end(void *arg, size_t i, const remat_instr *in, uint64_t live, uint64_t peak, double flops)
{
    remat_trace_run *r = arg;
    if (r->inner->end) r->inner->end(r->inner->arg, i, in, live, peak, flops);
    uint64_t t1 = now_ns();
    remat_trace *t = r->t;
    uint64_t c1 = cpu_ns(t);
    remat_mem *m = r->mem;
    tev *e = &t->ev[t->nev++];   /* room reserved by remat_trace_step_begin */
    e->t0 = r->t_begin - t->epoch;
    e->t1 = t1 - t->epoch;
    e->cpu = c1 - r->c_begin;
    e->flops = flops;
    e->live = m->live[REMAT_MEM_ACTS] - r->act0;
    e->peak = m->peak[REMAT_MEM_ACTS] - r->act0;
    e->total = m->live_total;
    e->total_peak = m->peak_total;
    e->i = (uint32_t)i;
    e->layer = in->layer;
    e->kind = (int8_t)in->kind;
    e->tid = in->tid;
    t->st[r->step].count++;
    close_instr(r);
}

static remat_status w_alloc(void *arg, int slot, int t, uint64_t bytes, int zero)
{
    const remat_walk_hooks *h = ((remat_trace_run *)arg)->inner;
    return h->alloc(h->arg, slot, t, bytes, zero);
}

static void w_release(void *arg, int slot, int t, uint64_t bytes)
{
    const remat_walk_hooks *h = ((remat_trace_run *)arg)->inner;
    h->release(h->arg, slot, t, bytes);
}

static remat_status w_temp_alloc(void *arg, uint64_t bytes)
{
    const remat_walk_hooks *h = ((remat_trace_run *)arg)->inner;
    return h->temp_alloc(h->arg, bytes);
}

static void w_temp_release(void *arg, uint64_t bytes)
{
    const remat_walk_hooks *h = ((remat_trace_run *)arg)->inner;
    h->temp_release(h->arg, bytes);
}

static remat_status w_exec(void *arg, size_t i, const remat_instr *in, const remat_operands *o)
{
    const remat_walk_hooks *h = ((remat_trace_run *)arg)->inner;
    return h->exec(h->arg, i, in, o);
}

const remat_walk_hooks *remat_trace_wrap(remat_trace_run *r, const remat_walk_hooks *inner, remat_mem *mem,
                                         uint64_t act0)
{
    r->inner = inner;
    r->mem = mem;
    r->act0 = act0;
    remat_walk_hooks *h = &r->hooks;
    memset(h, 0, sizeof *h);
    h->arg = r;
    h->begin = w_begin;
    h->end = w_end;
    if (inner->alloc) h->alloc = w_alloc;
    if (inner->release) h->release = w_release;
    if (inner->temp_alloc) h->temp_alloc = w_temp_alloc;
    if (inner->temp_release) h->temp_release = w_temp_release;
    if (inner->exec) h->exec = w_exec;
    return h;
}

void remat_trace_step_end(remat_trace_run *r, int ok)
{
    if (!r->t) return;
    if (r->open && r->mem) close_instr(r);   /* an instruction failed half-way */
    tstep *ts = &r->t->st[r->step];
    ts->t1 = now_ns() - r->t->epoch;
    ts->c1 = cpu_ns(r->t);
    ts->ok = ok;
}

/* ---- reading it ------------------------------------------------------------- */

size_t remat_trace_steps(const remat_trace *t) { return t ? t->nst : 0; }
size_t remat_trace_events(const remat_trace *t) { return t ? t->nev : 0; }

remat_status remat_trace_step_get(const remat_trace *t, size_t k, remat_trace_step *out)
{
    if (!t || !out || k >= t->nst) return remat_fail(REMAT_ERR_INVALID, "trace step %zu out of range", k);
    const tstep *s = &t->st[k];
    out->step = s->step;
    out->policy = t->pol[s->policy];
    out->start_ms = (double)s->t0 / 1e6;
    out->dur_ms = (double)(s->t1 - s->t0) / 1e6;
    out->first = s->first;
    out->count = s->count;
    out->ok = s->ok;
    return REMAT_OK;
}

/* the step record of event k */
static const tstep *step_of(const remat_trace *t, size_t k)
{
    size_t lo = 0, hi = t->nst;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t->st[mid].first <= k) lo = mid; else hi = mid;
    }
    return &t->st[lo];
}

static const char *tensor_name(const remat_trace *t, const tev *e)
{
    return e->kind == REMAT_I_UPDATE ? "" : remat_table_of(&t->cfg)->defs[e->tid].name;
}

remat_status remat_trace_event_get(const remat_trace *t, size_t k, remat_trace_event *out)
{
    if (!t || !out || k >= t->nev) return remat_fail(REMAT_ERR_INVALID, "trace event %zu out of range", k);
    const tev *e = &t->ev[k];
    out->step = step_of(t, k)->step;
    out->index = e->i;
    out->kind = (remat_instr_kind)e->kind;
    out->layer = e->layer;
    out->tensor = tensor_name(t, e);
    out->start_ms = (double)e->t0 / 1e6;
    out->dur_ms = (double)(e->t1 - e->t0) / 1e6;
    out->cpu_ms = (double)e->cpu / 1e6;
    out->flops = e->flops;
    out->live_bytes = e->live;
    out->peak_bytes = e->peak;
    out->step_bytes = e->total;
    out->step_peak_bytes = e->total_peak;
    return REMAT_OK;
}

remat_status remat_trace_run_times(const remat_trace *t, remat_run_times *out)
{
    remat_run_samples sm;
    remat_status st = REMAT_OK;
    size_t used = 0;
    int cpu = t->threads == 1;   /* times in the clock the profile uses (profile.c) */
    memset(&sm, 0, sizeof sm);
    memset(out, 0, sizeof *out);
    for (size_t k = 0; k < t->nst && !st; k++) {
        const tstep *s = &t->st[k];
        if (!s->ok) continue;
        uint64_t inside = 0;
        for (size_t j = s->first; j < s->first + s->count && !st; j++) {
            const tev *e = &t->ev[j];
            uint64_t d = cpu ? e->cpu : e->t1 - e->t0;
            if (e->kind != REMAT_I_FREE) inside += d;   /* frees count as overhead (calibrate.c) */
            st = remat_run_samples_add(&sm, e->kind, e->kind == REMAT_I_UPDATE ? 0 : e->tid, (double)d / 1e6);
        }
        uint64_t all = cpu ? s->c1 - s->c0 : s->t1 - s->t0;
        if (!st) st = remat_run_samples_add(&sm, -1, 0, all > inside ? (double)(all - inside) / 1e6 : 0.0);
        used++;
    }
    if (!st && !used) st = remat_fail(REMAT_ERR_STATE, "the trace holds no completed training step");
    if (!st) {
        remat_run_samples_finish(&sm, out);
        out->cfg = t->cfg;
        snprintf(out->cpu, sizeof out->cpu, "%s", t->cpu);
        out->threads = t->threads;
    }
    remat_run_samples_free(&sm);
    return st;
}

/* ---- Chrome trace-event JSON ------------------------------------------------ */

/* a time in microseconds, from nanoseconds */
static void us(remat_jsonw *w, const char *key, uint64_t ns) { remat_jsonw_num(w, key, (double)ns / 1e3); }

static void counter(remat_jsonw *w, const char *name, uint64_t ns, uint64_t v)
{
    remat_jsonw_newline(w);
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "name", name);
    remat_jsonw_str(w, "ph", "C");
    remat_jsonw_int(w, "pid", 1);
    us(w, "ts", ns);
    remat_jsonw_object(w, "args");
    remat_jsonw_uint(w, "bytes", v);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
}

/* the metadata event naming the process or its thread */
static void meta(remat_jsonw *w, const char *name, const char *value)
{
    remat_jsonw_newline(w);
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "name", name);
    remat_jsonw_str(w, "ph", "M");
    remat_jsonw_int(w, "pid", 1);
    remat_jsonw_int(w, "tid", 1);
    remat_jsonw_object(w, "args");
    remat_jsonw_str(w, "name", value);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
}

/* a complete event ("ph": "X") on the one thread track; its args are left
 * open for the caller */
static void complete(remat_jsonw *w, const remat_trace *t, const char *name, const char *cat, uint64_t t0,
                     uint64_t t1, uint64_t cpu)
{
    remat_jsonw_newline(w);
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "name", name);
    remat_jsonw_str(w, "cat", cat);
    remat_jsonw_str(w, "ph", "X");
    remat_jsonw_int(w, "pid", 1);
    remat_jsonw_int(w, "tid", 1);
    us(w, "ts", t0);
    us(w, "dur", t1 - t0);
    if (t->threads == 1) us(w, "tdur", cpu);
    remat_jsonw_object(w, "args");
}

static void write_json(remat_jsonw *w, const remat_trace *t, uint64_t first, uint64_t last)
{
    const remat_config *c = &t->cfg;
    uint64_t t0 = UINT64_MAX;   /* times from the first step written */
    for (size_t k = 0; k < t->nst; k++)
        if (t->st[k].step >= first && t->st[k].step <= last && t->st[k].t0 < t0) t0 = t->st[k].t0;
    remat_jsonw_object(w, NULL);
    remat_jsonw_str(w, "displayTimeUnit", "ms");
    remat_jsonw_newline(w);
    remat_jsonw_object(w, "otherData");
    remat_jsonw_str(w, "format", "remat-trace");
    remat_jsonw_int(w, "version", 1);
    remat_jsonw_str(w, "remat", remat_version());
    remat_jsonw_object(w, "config");
    remat_jsonw_int(w, "n_layer", c->n_layer);
    remat_jsonw_int(w, "n_embd", c->n_embd);
    remat_jsonw_int(w, "n_head", c->n_head);
    remat_jsonw_int(w, "vocab", c->vocab);
    remat_jsonw_int(w, "max_seq", c->max_seq);
    remat_jsonw_int(w, "batch", c->batch);
    remat_jsonw_int(w, "seq", c->seq);
    remat_jsonw_float(w, "dropout", c->dropout);
    remat_jsonw_str(w, "attention", c->attention == REMAT_ATTENTION_FLASH ? "flash" : "naive");
    remat_jsonw_int(w, "lmhead_chunk", c->lmhead_chunk);
    remat_jsonw_str(w, "dtype", c->dtype == REMAT_DTYPE_BF16 ? "bf16" : "fp32");
    remat_jsonw_end(w);
    remat_jsonw_str(w, "cpu", t->cpu);
    remat_jsonw_int(w, "threads", t->threads);
    remat_jsonw_str(w, "gemm", remat_gemm_name(t->gemm));
    remat_jsonw_end(w);
    remat_jsonw_newline(w);
    remat_jsonw_array(w, "traceEvents");
    meta(w, "process_name", "remat");
    meta(w, "thread_name", "schedule");
    /* with one thread, "tdur" is the thread's CPU time (Trace Event Format's
     * thread clock), which calibration prefers */
    const remat_table *tb = remat_table_of(c);
    for (size_t k = 0; k < t->nst; k++) {
        const tstep *s = &t->st[k];
        if (s->step < first || s->step > last) continue;
        char name[160];
        snprintf(name, sizeof name, "step %llu", (unsigned long long)s->step);
        complete(w, t, name, "step", s->t0 - t0, s->t1 - t0, s->c1 - s->c0);
        remat_jsonw_uint(w, "step", s->step);
        remat_jsonw_str(w, "policy", t->pol[s->policy]);
        remat_jsonw_uint(w, "instructions", s->count);
        remat_jsonw_bool(w, "ok", s->ok);
        remat_jsonw_end(w);
        remat_jsonw_end(w);
        for (size_t j = s->first; j < s->first + s->count; j++) {
            const tev *e = &t->ev[j];
            const char *kn = remat_instr_kind_name((remat_instr_kind)e->kind), *tn = e->kind == REMAT_I_UPDATE ? "" : tb->defs[e->tid].name;
            snprintf(name, sizeof name, "%s%s%s", kn, *tn ? " " : "", tn);
            complete(w, t, name, kn, e->t0 - t0, e->t1 - t0, e->cpu);
            remat_jsonw_uint(w, "step", s->step);
            remat_jsonw_uint(w, "i", e->i);
            remat_jsonw_str(w, "op", kn);
            remat_jsonw_str(w, "tensor", tn);
            remat_jsonw_int(w, "layer", e->layer);
            remat_jsonw_num(w, "flops", e->flops);
            remat_jsonw_uint(w, "live_bytes", e->live);
            remat_jsonw_uint(w, "peak_bytes", e->peak);
            remat_jsonw_uint(w, "step_bytes", e->total);
            remat_jsonw_uint(w, "step_peak_bytes", e->total_peak);
            remat_jsonw_end(w);
            remat_jsonw_end(w);
            /* memory: the peak while it runs, then what stays live */
            counter(w, "activation bytes", e->t0 - t0, e->peak);
            counter(w, "step bytes", e->t0 - t0, e->total_peak);
            counter(w, "activation bytes", e->t1 - t0, e->live);
            counter(w, "step bytes", e->t1 - t0, e->total);
        }
    }
    remat_jsonw_newline(w);
    remat_jsonw_end(w);
    remat_jsonw_end(w);
}

remat_status remat_trace_save(const remat_trace *t, uint64_t first, uint64_t last, const char *path)
{
    if (!t || !path || !*path) return remat_fail(REMAT_ERR_INVALID, "remat_trace_save: NULL argument");
    if (!t->have_cfg) return remat_fail(REMAT_ERR_STATE, "the trace recorded no step; nothing to write to %s", path);
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path);
    remat_jsonw *w = NULL;
    remat_status st = remat_jsonw_create(f, 0, &w);
    if (!st) {
        write_json(w, t, first, last);
        st = remat_jsonw_finish(w);
        remat_jsonw_free(w);
    }
    if (fclose(f) && !st) st = remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path);
    if (st) { free(buf); return st; }
    st = remat_write_file_atomic(path, buf, n);
    free(buf);
    return st;
}
