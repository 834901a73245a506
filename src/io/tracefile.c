/*
 * tracefile.c -- a profile calibrated by a training run: from a trace in
 * memory (remat_profile_calibrate) or from a trace file that
 * remat_trace_save wrote (remat_profile_calibrate_file).
 *
 * This is where the engine's recorder (engine/trace.c) and the planner's
 * calibration (planner/calibrate.c) meet; they pass run times in the
 * neutral form of schedule/runtimes.h.
 *
 * Trace files are untrusted input.  The JSON is parsed by Jansson (Debian's
 * libjansson; depth-limited, duplicate keys refused); then every field this
 * reader uses is checked: the otherData block ("format": "remat-trace",
 * version 1, the config, CPU and thread count), and each complete event's
 * kind, tensor (by name, against the config's table), layer, step and
 * duration (with one thread "tdur", the thread's CPU time, as profiles
 * time ops).  Events of other phases (metadata, counters) are skipped.  A
 * step's overhead is its duration less its instructions'.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io.h"
#include "../core/core.h"
#include "../engine/trace.h"
#include "../planner/planner.h"

#define TRACE_MAX_BYTES ((size_t)256 << 20)

remat_status remat_profile_calibrate(remat_profile *p, const remat_trace *t)
{
    if (!p || !t) return remat_fail(REMAT_ERR_INVALID, "remat_profile_calibrate: NULL argument");
    remat_run_times *rt = remat_malloc(sizeof *rt);
    if (!rt) return remat_fail(REMAT_ERR_NOMEM, "out of memory calibrating");
    remat_status st = remat_trace_run_times(t, rt);
    if (!st) st = remat_profile_apply_run(p, rt);
    free(rt);
    return st;
}

/* ---- reading a trace file --------------------------------------------------- */

typedef struct tstep {
    long long step;
    double dur_us, inside_us;
    int ok;
} tstep;

static int cmp_step(const void *a, const void *b)
{
    long long x = ((const tstep *)a)->step, y = ((const tstep *)b)->step;
    return (x > y) - (x < y);
}

/* an integer field in [lo, hi] */
static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return 0;
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

/* a finite number field in [lo, hi] */
static int get_num(const json_t *o, const char *key, double lo, double hi, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) return 0;
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

static const char *get_str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

#define BAD(...) do { st = remat_fail(REMAT_ERR_FORMAT, __VA_ARGS__); goto out; } while (0)

static remat_status read_header(const json_t *root, remat_run_times *rt)
{
    remat_status st = REMAT_OK;
    long long v[8];
    double drop;
    const json_t *od = json_object_get(root, "otherData");
    const char *fmt = od ? get_str(od, "format") : NULL;
    if (!json_is_object(od) || !fmt || strcmp(fmt, "remat-trace"))
        BAD("not a remat trace (no otherData with \"format\": \"remat-trace\")");
    if (!get_int(od, "version", 1, 1, &v[0])) BAD("unsupported remat trace version (expected 1)");
    const json_t *c = json_object_get(od, "config");
    if (!json_is_object(c)) BAD("otherData has no config object");
    static const char *keys[] = { "n_layer", "n_embd", "n_head", "vocab", "max_seq", "batch", "seq", "lmhead_chunk" };
    for (int i = 0; i < 8; i++)
        if (!get_int(c, keys[i], i == 7 ? 0 : 1, INT32_MAX, &v[i])) BAD("config field %s missing or out of range", keys[i]);
    if (!get_num(c, "dropout", 0, 1, &drop)) BAD("config field dropout missing or out of range");
    const char *att = get_str(c, "attention"), *dt = get_str(c, "dtype"), *cpu = get_str(od, "cpu");
    if (!att || (strcmp(att, "naive") && strcmp(att, "flash"))) BAD("config field attention is not naive or flash");
    if (!dt || (strcmp(dt, "fp32") && strcmp(dt, "bf16"))) BAD("config field dtype is not fp32 or bf16");
    remat_config *cf = &rt->cfg;
    memset(cf, 0, sizeof *cf);
    cf->n_layer = (int)v[0]; cf->n_embd = (int)v[1]; cf->n_head = (int)v[2]; cf->vocab = (int)v[3];
    cf->max_seq = (int)v[4]; cf->batch = (int)v[5]; cf->seq = (int)v[6]; cf->lmhead_chunk = (int)v[7];
    cf->dropout = (float)drop;
    cf->attention = strcmp(att, "flash") ? REMAT_ATTENTION_NAIVE : REMAT_ATTENTION_FLASH;
    cf->dtype = strcmp(dt, "bf16") ? REMAT_DTYPE_FP32 : REMAT_DTYPE_BF16;
    if (remat_config_check(cf)) BAD("its config is invalid: %s", remat_errmsg());
    if (!cpu || !*cpu || strlen(cpu) >= sizeof rt->cpu) BAD("otherData has no valid cpu");
    snprintf(rt->cpu, sizeof rt->cpu, "%s", cpu);
    if (!get_int(od, "threads", 1, 4096, &v[0])) BAD("otherData has no valid thread count");
    rt->threads = (int)v[0];
out:
    return st;
}

static tstep *find_step(tstep *s, size_t n, long long step)
{
    tstep key = { .step = step };
    return bsearch(&key, s, n, sizeof *s, cmp_step);
}

remat_status remat_trace_parse(const void *buf, size_t len, remat_run_times *rt)
{
    remat_status st = REMAT_OK;
    json_error_t err;
    remat_run_samples sm;
    tstep *steps = NULL;
    size_t nsteps = 0, used = 0;
    memset(&sm, 0, sizeof sm);
    memset(rt, 0, sizeof *rt);
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        st = remat_fail(REMAT_ERR_FORMAT, "not valid JSON: %s (line %d, column %d)", err.text, err.line, err.column);
        goto out;
    }
    if (!json_is_object(root)) BAD("the top level is not an object");
    if ((st = read_header(root, rt))) goto out;
    const json_t *ev = json_object_get(root, "traceEvents");
    if (!json_is_array(ev)) BAD("no traceEvents array");
    size_t n = json_array_size(ev);
    const remat_table *tb = remat_table_of(&rt->cfg);
    /* with one thread the thread's CPU time, the clock profiles use */
    const char *dkey = rt->threads == 1 ? "tdur" : "dur";
    /* the steps first: every instruction names its step */
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(ev, i), *args;
        if (!json_is_object(e)) BAD("traceEvents[%zu] is not an object", i);
        const char *ph = get_str(e, "ph"), *cat = get_str(e, "cat");
        if (!ph) BAD("traceEvents[%zu] has no phase (ph)", i);
        if (strcmp(ph, "X") || !cat || strcmp(cat, "step")) continue;
        long long sn;
        double dur;
        if (!json_is_object(args = json_object_get(e, "args")) || !get_int(args, "step", 0, INT64_MAX, &sn))
            BAD("traceEvents[%zu]: a step without args.step", i);
        if (!get_num(e, dkey, 0, 1e15, &dur)) BAD("traceEvents[%zu]: step %lld has no valid %s", i, sn, dkey);
        const json_t *ok = json_object_get(args, "ok");
        if (!json_is_boolean(ok)) BAD("traceEvents[%zu]: step %lld has no args.ok", i, sn);
        tstep *s2 = remat_realloc(steps, (nsteps + 1) * sizeof *steps);
        if (!s2) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading a trace"); goto out; }
        steps = s2;
        steps[nsteps++] = (tstep){ sn, dur, 0, json_is_true(ok) };
    }
    if (!nsteps) BAD("the trace holds no step");
    qsort(steps, nsteps, sizeof *steps, cmp_step);
    for (size_t i = 1; i < nsteps; i++)
        if (steps[i].step == steps[i - 1].step) BAD("step %lld appears twice", steps[i].step);
    for (size_t i = 0; i < n && !st; i++) {
        const json_t *e = json_array_get(ev, i), *args;
        const char *ph = get_str(e, "ph"), *cat = get_str(e, "cat");
        if (strcmp(ph, "X") || (cat && !strcmp(cat, "step"))) continue;
        int k = -1, t = -1;
        for (int q = 0; q < REMAT_NKINDS && cat; q++)
            if (!strcmp(cat, remat_instr_kind_name((remat_instr_kind)q))) k = q;
        if (k < 0) BAD("traceEvents[%zu]: unknown instruction kind '%.40s'", i, cat ? cat : "");
        if (!json_is_object(args = json_object_get(e, "args"))) BAD("traceEvents[%zu] has no args", i);
        const char *op = get_str(args, "op"), *tn = get_str(args, "tensor");
        long long sn, layer;
        double dur;
        if (!op || strcmp(op, cat)) BAD("traceEvents[%zu]: args.op is not its category", i);
        if (!tn) BAD("traceEvents[%zu] has no args.tensor", i);
        if (k == REMAT_I_UPDATE) {
            if (*tn) BAD("traceEvents[%zu]: the update names a tensor", i);
            t = 0;
        } else {
            for (int q = 0; q < tb->first_grad; q++)
                if (!strcmp(tb->defs[q].name, tn)) t = q;
            if (t < 0 || (k == REMAT_I_BACKWARD && !tb->defs[t].has_bwd))
                BAD("traceEvents[%zu]: no instruction '%s %.40s'", i, cat, tn);
        }
        int per_layer = k != REMAT_I_UPDATE && tb->defs[t].cls == RT_CLASS_BLOCK;
        if (!get_int(args, "layer", per_layer ? 0 : -1, per_layer ? rt->cfg.n_layer - 1 : -1, &layer))
            BAD("traceEvents[%zu]: args.layer missing or out of range", i);
        if (!get_int(args, "step", 0, INT64_MAX, &sn)) BAD("traceEvents[%zu] has no args.step", i);
        if (!get_num(e, dkey, 0, 1e15, &dur)) BAD("traceEvents[%zu] has no valid %s", i, dkey);
        tstep *s = find_step(steps, nsteps, sn);
        if (!s) BAD("traceEvents[%zu]: step %lld has no step event", i, sn);
        if (!s->ok) continue;
        if (k != REMAT_I_FREE) s->inside_us += dur;   /* frees count as overhead (calibrate.c) */
        st = remat_run_samples_add(&sm, k, t, dur / 1000.0);
    }
    if (st) goto out;
    for (size_t i = 0; i < nsteps && !st; i++) {
        if (!steps[i].ok) continue;
        if (steps[i].inside_us > steps[i].dur_us * (1 + 1e-9) + 1e-3)
            BAD("step %lld: its instructions take longer than the step", steps[i].step);
        st = remat_run_samples_add(&sm, -1, 0, (steps[i].dur_us - steps[i].inside_us) / 1000.0);
        used++;
    }
    if (st) goto out;
    if (!used) BAD("the trace holds no completed step");
    remat_run_samples_finish(&sm, rt);
out:
    json_decref(root);
    remat_run_samples_free(&sm);
    free(steps);
    return st;
}

#undef BAD

remat_status remat_profile_calibrate_file(remat_profile *p, const char *path)
{
    remat_status st;
    char *buf = NULL;
    remat_run_times *rt = NULL;
    if (!p || !path) return remat_fail(REMAT_ERR_INVALID, "remat_profile_calibrate_file: NULL argument");
    size_t len;
    if ((st = remat_read_file(path, TRACE_MAX_BYTES, &buf, &len))) {
        if (st == REMAT_ERR_FORMAT)   /* over the cap */
            st = remat_fail(REMAT_ERR_FORMAT, "trace %s is larger than %zu MiB; trace fewer steps (--trace-steps)",
                            path, TRACE_MAX_BYTES >> 20);
        goto out;
    }
    if (!(rt = remat_malloc(sizeof *rt))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory reading trace %s", path); goto out; }
    if ((st = remat_trace_parse(buf, len, rt))) {
        char why[600];
        snprintf(why, sizeof why, "%s", remat_errmsg());
        st = remat_fail(st, "trace %s: %s", path, why);
        goto out;
    }
    st = remat_profile_apply_run(p, rt);
out:
    free(buf);
    free(rt);
    return st;
}
