/*
 * args.c -- strict flag parsing and small formatting helpers for the CLI.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"

void (*cli_error_hook)(void);
const char *cli_error_tag = "";
static int defer;
static char deferred[1024];

void cli_defer_errors(int on)
{
    defer = on;
    if (on) deferred[0] = 0;
}
const char *cli_deferred_error(void) { return deferred; }

/* the message, kept (the first one only) when deferred, else "remat: error:
 * <tag><message><suffix>" on stderr */
static void error_line(const char *suffix, const char *fmt, va_list ap)
{
    if (defer) {
        if (!deferred[0]) {
            int k = vsnprintf(deferred, sizeof deferred, fmt, ap);
            if (k >= 0 && (size_t)k < sizeof deferred) snprintf(deferred + k, sizeof deferred - (size_t)k, "%s", suffix);
        }
        return;
    }
    if (cli_error_hook) cli_error_hook();
    fprintf(stderr, "remat: error: %s", cli_error_tag);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "%s\n", suffix);
    fflush(stderr);
}

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_line("", fmt, ap);
    va_end(ap);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, " (see 'remat %s --help')", cmd);
    va_list ap;
    va_start(ap, fmt);
    error_line(suffix, fmt, ap);
    va_end(ap);
    return 2;
}

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) { cli_error("%s needs a value", argv[*i]); return NULL; }
    return argv[++*i];
}

int cli_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi || isspace((unsigned char)*s)) {
        cli_error("%s expects a whole number in [%ld, %ld], got '%s'", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_u64(const char *flag, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s)) { cli_error("%s expects a non-negative whole number, got '%s'", flag, s); return 0; }
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) { cli_error("%s expects a non-negative whole number, got '%s'", flag, s); return 0; }
    *out = v;
    return 1;
}

int cli_float(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi || isspace((unsigned char)*s)) {
        cli_error("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_bytes(const char *flag, const char *s, uint64_t *out)
{
    static const struct { const char *u; double m; } units[] = {
        {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"", 1},
    };
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s) && *s != '.') goto bad;
    if (strpbrk(s, "xXpP")) goto bad;          /* strtod would take hex floats such as 0x10 */
    double v = strtod(s, &end);
    if (errno || !isfinite(v) || v < 0) goto bad;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if (!strcmp(end, units[k].u)) {
            double b = v * units[k].m;
            if (b > 9.0e18) goto bad;
            *out = (uint64_t)llround(b);
            return 1;
        }
bad:
    cli_error("%s expects a size such as 2GiB, 512MiB, 1.5GB or 1000000B, got '%s'", flag, s);
    return 0;
}

void cli_config_default_max_seq(remat_config *c)
{
    if (!c->max_seq) c->max_seq = c->seq;
}

int cli_config_flag(remat_config *c, int argc, char **argv, int *i)
{
    const char *f = argv[*i], *v;
    long x;
    double d;
    struct { const char *name; int *field; long lo, hi; } ints[] = {
        {"--layers", &c->n_layer, 1, REMAT_MAX_LAYERS}, {"--dim", &c->n_embd, 1, REMAT_MAX_EMBD},
        {"--heads", &c->n_head, 1, REMAT_MAX_EMBD}, {"--vocab", &c->vocab, REMAT_MIN_VOCAB, REMAT_MAX_VOCAB},
        {"--seq", &c->seq, 1, REMAT_MAX_SEQ}, {"--max-seq", &c->max_seq, 1, REMAT_MAX_SEQ},
        {"--batch", &c->batch, 1, REMAT_MAX_BATCH},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if (!strcmp(f, ints[k].name)) {
            if (!(v = cli_value(argc, argv, i)) || !cli_int(f, v, ints[k].lo, ints[k].hi, &x)) return -1;
            *ints[k].field = (int)x;
            return 1;
        }
    if (!strcmp(f, "--attention")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!strcmp(v, "naive")) c->attention = REMAT_ATTENTION_NAIVE;
        else if (!strcmp(v, "flash")) c->attention = REMAT_ATTENTION_FLASH;
        else { cli_error("--attention expects naive or flash, got '%s'", v); return -1; }
        return 1;
    }
    if (!strcmp(f, "--lmhead")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!strcmp(v, "full")) c->lmhead_chunk = 0;
        else if (!strcmp(v, "chunked")) c->lmhead_chunk = 128;
        else if (!strncmp(v, "chunked:", 8)) {
            if (!cli_int("--lmhead chunked:ROWS", v + 8, 1, 1 << 30, &x)) return -1;
            c->lmhead_chunk = (int)x;
        } else { cli_error("--lmhead expects full, chunked or chunked:ROWS, got '%s'", v); return -1; }
        return 1;
    }
    if (!strcmp(f, "--gemm")) {   /* the engine is process-wide: set at once */
        if (!(v = cli_value(argc, argv, i))) return -1;
        remat_gemm_engine e;
        if (!strcmp(v, "onednn")) e = REMAT_GEMM_ONEDNN;
        else if (!strcmp(v, "cblas")) e = REMAT_GEMM_CBLAS;
        else { cli_error("--gemm expects onednn or cblas, got '%s'", v); return -1; }
        if (remat_gemm_set(e)) { cli_error("--gemm %s: %s", v, remat_errmsg()); return -1; }
        return 1;
    }
    if (!strcmp(f, "--dtype")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!cli_dtype_parse(v, strlen(v), &c->dtype)) { cli_error("--dtype expects fp32 or bf16, got '%s'", v); return -1; }
        return 1;
    }
    if (!strcmp(f, "--framework")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        if (!strcmp(v, "remat")) c->framework = REMAT_FRAMEWORK_REMAT;
        else if (!strcmp(v, "megatron")) c->framework = REMAT_FRAMEWORK_MEGATRON;
        else if (!strcmp(v, "pytorch")) c->framework = REMAT_FRAMEWORK_PYTORCH;
        else { cli_error("--framework expects remat, megatron or pytorch, got '%s'", v); return -1; }
        return 1;
    }
    if (!strcmp(f, "--tp")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_int(f, v, 1, REMAT_MAX_TP, &x)) return -1;
        c->tp = (int)x;
        return 1;
    }
    if (!strcmp(f, "--sp")) { c->sp = 1; return 1; }
    if (!strcmp(f, "--model")) {
        if (!(v = cli_value(argc, argv, i))) return -1;
        const remat_model_preset *p = remat_model_preset_find(v);
        if (!p) {
            char list[256];
            cli_error("--model expects one of %s, got '%s'", cli_preset_names(0, list, sizeof list), v);
            return -1;
        }
        c->n_layer = p->n_layer; c->n_embd = p->n_embd; c->n_head = p->n_head; c->vocab = p->vocab; c->seq = p->seq;
        return 1;
    }
    if (!strcmp(f, "--dropout")) {
        if (!(v = cli_value(argc, argv, i)) || !cli_float(f, v, 0.0, 0.999, &d)) return -1;
        c->dropout = (float)d;
        return 1;
    }
    return 0;
}

void cli_config_print(FILE *f, const remat_config *c)
{
    fprintf(f, "model: %d layers, dim %d, %d heads, vocab %d (padded %d), %llu params | step: batch %d x seq %d, dropout %g",
            c->n_layer, c->n_embd, c->n_head, c->vocab, remat_config_padded_vocab(c),
            (unsigned long long)remat_config_num_params(c), c->batch, c->seq, (double)c->dropout);
    if (c->attention == REMAT_ATTENTION_FLASH) fprintf(f, ", flash attention");
    if (c->lmhead_chunk > 0) fprintf(f, ", lm head chunked by %d rows", c->lmhead_chunk);
    if (c->dtype == REMAT_DTYPE_BF16) fprintf(f, ", bf16 mixed precision");
    if (c->framework != REMAT_FRAMEWORK_REMAT)
        fprintf(f, " | %s table, tp %d%s%s", c->framework == REMAT_FRAMEWORK_MEGATRON ? "megatron" : "pytorch", c->tp,
                c->sp ? ", sequence parallel" : "", c->stage == REMAT_STAGE_FIRST ? ", first pipeline stage" : "");
    fputc('\n', f);
}

const char *cli_dtype_name(remat_dtype d) { return d == REMAT_DTYPE_BF16 ? "bf16" : "fp32"; }

int cli_dtype_parse(const char *s, size_t len, remat_dtype *out)
{
    static const remat_dtype all[] = { REMAT_DTYPE_FP32, REMAT_DTYPE_BF16 };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        const char *name = cli_dtype_name(all[k]);
        if (len == strlen(name) && !strncmp(s, name, len)) { *out = all[k]; return 1; }
    }
    return 0;
}

remat_jsonw *cli_json_open(FILE *f, unsigned flags)
{
    remat_jsonw *w = NULL;
    if (remat_jsonw_create(f, flags, &w)) cli_error("%s", remat_errmsg());
    return w;
}

int cli_json_close(remat_jsonw *w)
{
    if (!w) return 1;
    remat_status st = remat_jsonw_finish(w);
    remat_jsonw_free(w);
    return st ? cli_error("%s", remat_errmsg()) : 0;
}

const char *cli_fmt_bytes(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ULL << 30)) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ULL << 20)) snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
    return buf;
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double cli_median(const double *x, int n)
{
    if (n <= 0) return 0;
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!c) return x[0];
    memcpy(c, x, sizeof(double) * (size_t)n);
    double m = remat_median(c, (size_t)n);
    free(c);
    return m;
}

int cli_available_memory(uint64_t *bytes, const char **source)
{
    const char *env = getenv("REMAT_MEM_AVAILABLE");
    if (env && *env) {
        if (!cli_bytes("REMAT_MEM_AVAILABLE", env, bytes)) return 0;
        if (source) *source = "REMAT_MEM_AVAILABLE";
        return 1;
    }
    if (remat_memory_available(bytes, source)) { cli_error("%s", remat_errmsg()); return 0; }
    return 1;
}

int cli_budget(const char *flag, const char *s, uint64_t *out)
{
    if (!strcmp(s, "auto")) return cli_available_memory(out, NULL);
    return cli_bytes(flag, s, out);
}

const char *cli_preset_names(int devices, char *buf, size_t n)
{
    size_t k = 0;
    int count = devices ? remat_device_count() : remat_model_preset_count();
    buf[0] = 0;
    for (int j = 0; j < count && k < n; j++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", j ? ", " : "",
                              devices ? remat_device_get(j)->name : remat_model_preset_get(j)->name);
    return buf;
}
