/*
 * profile_io.c -- profile files: save, load (untrusted input) and the
 * per-machine cache path.
 *
 * Profile files are plain text, one "key value" per line, validated on load
 * as untrusted input (see parse_profile).  They are keyed by the config, the
 * CPU model and the thread count, and written atomically.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "planner.h"
#include "../core/core.h"

#define PROFILE_MAGIC "remat-profile"
#define PROFILE_VERSION 3       /* 3: "run" lines (version 2 files, without them, are still read) */
#define PROFILE_MAX_BYTES 65536
#define PROFILE_MAX_LINE 512
/* A time as saved: 17 significant digits (C11's DBL_DECIMAL_DIG) print any
 * double so that strtod reads back the same bits.  Fewer would round a
 * measured or hand-written time, and a profile saved and loaded again
 * would no longer plan as the one that was saved. */
#define PROFILE_MS "%.17g"

/* ---- save, load, cache path ------------------------------------------------ */

/* the instruction kind of a "run" line: remat_instr_kind's names, and
 * "overhead" (the step's time outside its instructions) after them */
static const char *run_kind(int k)
{
    return k < REMAT_NKINDS ? remat_instr_kind_name((remat_instr_kind)k) : "overhead";
}

static int write_profile(FILE *f, const remat_profile *p)
{
    const remat_table *tb = remat_table_of(&p->cfg);
    char key[256];
    remat_profile_config_key(&p->cfg, key, sizeof key);
    fprintf(f, "%s %d\n", PROFILE_MAGIC, PROFILE_VERSION);
    fprintf(f, "measured %d\n", p->measured);
    fprintf(f, "cpu %s\n", p->cpu[0] ? p->cpu : "unknown");
    fprintf(f, "threads %d\n", p->threads);
    fprintf(f, "config %s\n", key);
    fprintf(f, "update " PROFILE_MS "\n", p->update_ms);
    fprintf(f, "cache %llu\n", (unsigned long long)p->cache_bytes);
    for (int t = 0; t < tb->first_grad; t++) {
        const char *nm = tb->defs[t].name;
        fprintf(f, "fwd %s " PROFILE_MS "\nfwdhot %s " PROFILE_MS "\n", nm, p->fwd_ms[t], nm, p->fwd_hot_ms[t]);
        if (tb->defs[t].has_bwd) fprintf(f, "bwd %s " PROFILE_MS "\nbwdhot %s " PROFILE_MS "\n", nm, p->bwd_ms[t], nm, p->bwd_hot_ms[t]);
    }
    /* a training run's times: run KIND TENSOR MS SAMPLES (the update and the
     * step's overhead have no tensor: '-') */
    for (int k = 0; k < REMAT_NKINDS; k++)
        for (int t = 0; t < RT_MAXT; t++)
            if (p->run_n[k][t])
                fprintf(f, "run %s %s " PROFILE_MS " %u\n", run_kind(k), k == REMAT_I_UPDATE ? "-" : tb->defs[t].name,
                        p->run_ms[k][t], p->run_n[k][t]);
    if (p->run_overhead_n) fprintf(f, "run overhead - " PROFILE_MS " %u\n", p->run_overhead_ms, p->run_overhead_n);
    return fprintf(f, "end\n") < 0 ? -1 : 0;
}

remat_status remat_profile_save(const remat_profile *p, const char *path)
{
    if (!p || !path || !*path) return remat_fail(REMAT_ERR_INVALID, "remat_profile_save: NULL argument");
    size_t len = strlen(path);
    if (len > 4000) return remat_fail(REMAT_ERR_RANGE, "profile path too long");
    if (remat_mkdirs(path, 1)) return remat_fail(REMAT_ERR_IO, "cannot create the directory of %s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path);
    int bad = write_profile(f, p);
    if (fclose(f) || bad) { free(buf); return remat_fail(REMAT_ERR_NOMEM, "out of memory writing %s", path); }
    remat_status st = remat_write_file_atomic(path, buf, n);   /* path.tmp.PID, fsync, rename */
    free(buf);
    return st;
}

/* strict number: the whole token, finite, in [lo, hi] */
static int num(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    if (!*s) return 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v) || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static remat_status parse_profile(const remat_table *tb, const char *path, const char *text, size_t len,
                                  remat_profile *p)
{
    int line_no = 0, seen_end = 0, have[7] = { 0 }, version = 0;
    uint8_t seen[4][RT_MAXT] = { { 0 } };      /* fwd, bwd, fwdhot, bwdhot */
    uint8_t seen_run[REMAT_NKINDS + 1][RT_MAXT] = { { 0 } };
    char key[256] = "";
    const char *c = text, *e = text + len;
    memset(p, 0, sizeof *p);
#define BAD(...) do { char m_[1100]; snprintf(m_, sizeof m_, __VA_ARGS__); \
        return remat_fail(REMAT_ERR_FORMAT, "profile %s line %d: %s", path, line_no, m_); } while (0)
    while (c < e) {
        const char *nl = memchr(c, '\n', (size_t)(e - c));
        size_t n = nl ? (size_t)(nl - c) : (size_t)(e - c);
        line_no++;
        if (!nl) BAD("no newline at the end of the file (truncated?)");
        if (n >= PROFILE_MAX_LINE) BAD("line longer than %d bytes", PROFILE_MAX_LINE);
        char line[PROFILE_MAX_LINE];
        memcpy(line, c, n);
        line[n] = 0;
        c = nl + 1;
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)line[i] < 32 || (unsigned char)line[i] > 126) BAD("non-printable byte 0x%02x", (unsigned char)line[i]);
        if (seen_end) BAD("text after 'end'");
        char *sp = strchr(line, ' ');
        char *val = sp ? sp + 1 : line + n;
        if (sp) *sp = 0;
        double d;
        if (line_no == 1) {
            if (strcmp(line, PROFILE_MAGIC)) BAD("not a remat profile (expected '%s %d')", PROFILE_MAGIC, PROFILE_VERSION);
            if (!num(val, 0, 1e6, &d) || (d != PROFILE_VERSION && d != 2))
                BAD("unsupported profile version '%s' (expected %d)", val, PROFILE_VERSION);
            version = (int)d;
            have[0] = 1;
        } else if (!strcmp(line, "measured")) {
            if (have[1]++ || !num(val, 0, 1, &d) || (d != 0 && d != 1)) BAD("bad or repeated 'measured'");
            p->measured = (int)d;
        } else if (!strcmp(line, "cpu")) {
            if (have[2]++ || !*val || strlen(val) >= sizeof p->cpu) BAD("bad or repeated 'cpu'");
            snprintf(p->cpu, sizeof p->cpu, "%s", val);
        } else if (!strcmp(line, "threads")) {
            if (have[3]++ || !num(val, 1, 4096, &d) || d != floor(d)) BAD("bad or repeated 'threads'");
            p->threads = (int)d;
        } else if (!strcmp(line, "config")) {
            if (have[4]++ || strlen(val) >= sizeof key) BAD("bad or repeated 'config'");
            snprintf(key, sizeof key, "%s", val);
        } else if (!strcmp(line, "update")) {
            if (have[5]++ || !num(val, 0, 1e9, &d)) BAD("bad or repeated 'update' time");
            p->update_ms = d;
        } else if (!strcmp(line, "cache")) {
            if (have[6]++ || !num(val, 0, 1e15, &d) || d != floor(d)) BAD("bad or repeated 'cache' (bytes)");
            p->cache_bytes = (uint64_t)d;
        } else if (!strcmp(line, "fwd") || !strcmp(line, "bwd") || !strcmp(line, "fwdhot") || !strcmp(line, "bwdhot")) {
            int bw = line[0] == 'b', hot = line[3] == 'h', k = bw + 2 * hot;
            char *sp2 = strchr(val, ' ');
            if (!sp2) BAD("expected '%s NAME MS'", line);
            *sp2 = 0;
            int t = remat_table_find(tb, val);
            if (t < 0 || t >= tb->first_grad || (bw && !tb->defs[t].has_bwd)) BAD("unknown op '%s %s'", line, val);
            if (seen[k][t]++) BAD("repeated '%s %s'", line, val);
            if (!num(sp2 + 1, 0, 1e9, &d)) BAD("bad time '%s' for %s %s (milliseconds, >= 0)", sp2 + 1, line, val);
            double *dst[4] = { p->fwd_ms, p->bwd_ms, p->fwd_hot_ms, p->bwd_hot_ms };
            dst[k][t] = d;
        } else if (!strcmp(line, "run") && version >= 3) {
            /* run KIND TENSOR MS SAMPLES */
            char kind[16], name[64], ms[64], cnt[32], extra[2];
            if (sscanf(val, "%15s %63s %63s %31s %1s", kind, name, ms, cnt, extra) != 4)
                BAD("expected 'run KIND TENSOR MS SAMPLES'");
            int k = -1, t = -1;
            for (int q = 0; q <= REMAT_NKINDS; q++)
                if (!strcmp(kind, run_kind(q))) k = q;
            if (k < 0) BAD("unknown instruction kind '%s' in a run line", kind);
            if (k >= REMAT_I_UPDATE) {
                if (strcmp(name, "-")) BAD("'run %s' takes '-' for its tensor, not '%s'", kind, name);
                t = 0;
            } else {
                t = remat_table_find(tb, name);
                if (t < 0 || t >= tb->first_grad || (k == REMAT_I_BACKWARD && !tb->defs[t].has_bwd)) BAD("no instruction '%s %s'", kind, name);
            }
            double n;
            if (seen_run[k][t]++) BAD("repeated 'run %s %s'", kind, name);
            if (!num(ms, 0, 1e9, &d)) BAD("bad time '%s' for run %s %s (milliseconds, >= 0)", ms, kind, name);
            if (!num(cnt, 1, 4e9, &n) || n != floor(n)) BAD("bad sample count '%s' for run %s %s", cnt, kind, name);
            if (k == REMAT_NKINDS) { p->run_overhead_ms = d; p->run_overhead_n = (uint32_t)n; }
            else { p->run_ms[k][t] = d; p->run_n[k][t] = (uint32_t)n; }
        } else if (!strcmp(line, "end") && !sp) {
            seen_end = 1;
        } else {
            BAD("unknown key '%s'", line);
        }
    }
    line_no++;
    if (!have[0]) BAD("empty file");
    if (!seen_end) BAD("missing 'end' (truncated?)");
    for (int i = 1; i < 7; i++) if (!have[i]) BAD("missing a required key (measured, cpu, threads, config, update, cache)");
    for (int t = 0; t < tb->first_grad; t++)
        for (int k = 0; k < 4; k++)
            if (!seen[k][t] && (!(k & 1) || tb->defs[t].has_bwd))
                BAD("missing the %s time of %s's %s", k & 2 ? "warm" : "cold", tb->defs[t].name,
                    k & 1 ? "backward" : "forward");
    for (int t = 0; t < tb->first_grad; t++)
        if (p->fwd_hot_ms[t] > p->fwd_ms[t] || p->bwd_hot_ms[t] > p->bwd_ms[t])
            BAD("the warm time of %s exceeds its cold time", tb->defs[t].name);
    /* the config, as text; compared with the caller's by remat_profile_load */
    snprintf(p->desc, sizeof p->desc, "%s", key);
#undef BAD
    return REMAT_OK;
}

remat_status remat_profile_load(const remat_config *cfg, const char *path, remat_profile **out)
{
    remat_status st;
    char *text = NULL;
    remat_profile *p = NULL;
    size_t len;
    if (!out || !path) return remat_fail(REMAT_ERR_INVALID, "remat_profile_load: NULL argument");
    *out = NULL;
    if ((st = remat_config_check(cfg))) return st;
    if ((st = remat_read_file(path, PROFILE_MAX_BYTES, &text, &len))) {
        if (st == REMAT_ERR_FORMAT)
            st = remat_fail(st, "profile %s is larger than %d bytes", path, PROFILE_MAX_BYTES);
        return st;
    }
    if (!(p = remat_malloc(sizeof *p))) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory"); goto out; }
    if ((st = parse_profile(remat_table_of(cfg), path, text, len, p))) goto out;
    char want[256], cpu[128];
    remat_profile_config_key(cfg, want, sizeof want);
    remat_machine_cpu(cpu, sizeof cpu);
    if (strcmp(p->desc, want)) {
        st = remat_fail(REMAT_ERR_INVALID, "profile %s is for config '%s', not '%s' (layers dim heads vocab "
                        "max_seq batch seq dropout attention lmhead-chunk dtype); run 'remat profile' for this config", path, p->desc, want);
        goto out;
    }
    int runs = remat_profile_run_ops(p) > 0 || p->run_overhead_n > 0;
    if ((p->measured || runs) && (strcmp(p->cpu, cpu) || p->threads != remat_get_threads())) {
        st = remat_fail(REMAT_ERR_INVALID, "profile %s was measured on '%s' with %d threads, this is '%s' with %d; "
                        "run 'remat profile' here", path, p->cpu, p->threads, cpu, remat_get_threads());
        goto out;
    }
    p->cfg = *cfg;
    if (p->measured)
        snprintf(p->desc, sizeof p->desc, "measured on %s, %d threads%s (%s)", p->cpu, p->threads,
                 runs ? ", and run times from a training step" : "", path);
    else
        snprintf(p->desc, sizeof p->desc, "%s (%s)", runs ? "run times from a training step, the FLOP model for the rest"
                                                            : "saved model times", path);
    *out = p;
    p = NULL;
out:
    free(text);
    free(p);
    return st;
}


remat_status remat_profile_default_path(const remat_config *cfg, char *buf, size_t n)
{
    remat_status st;
    if (!buf || n == 0) return remat_fail(REMAT_ERR_INVALID, "remat_profile_default_path: NULL buffer");
    buf[0] = 0;
    if ((st = remat_config_check(cfg))) return st;
    char key[512], cpu[128];
    remat_profile_config_key(cfg, key, 256);
    remat_machine_cpu(cpu, sizeof cpu);
    size_t k = strlen(key);
    snprintf(key + k, sizeof key - k, "|%s|%d", cpu, remat_get_threads());
    uint64_t h = remat_hash_bytes(key, strlen(key));
    const char *dir = getenv("REMAT_CACHE"), *home = getenv("HOME");
    int w;
    if (dir && *dir) w = snprintf(buf, n, "%s/profile-%016llx.txt", dir, (unsigned long long)h);
    else if (home && *home) w = snprintf(buf, n, "%s/.cache/remat/profile-%016llx.txt", home, (unsigned long long)h);
    else return remat_fail(REMAT_ERR_INVALID, "neither REMAT_CACHE nor HOME is set; pass a profile path");
    if (w < 0 || (size_t)w >= n) { buf[0] = 0; return remat_fail(REMAT_ERR_RANGE, "profile path too long"); }
    return REMAT_OK;
}
