/*
 * jsonw.c -- the JSON writer (remat.h, "JSON output"): the trace files
 * (engine/trace.c) and the CLI's --json output go through these functions,
 * so that numbers keep their full precision and strings are escaped in one
 * place.  (The safetensors header, io/safetensors.c, is still printed by
 * its own code: names, dtypes and integers only.)
 *
 * Jansson (which parses the trace files, io/tracefile.c) writes JSON too,
 * but from a tree built first: a trace of a long run would be held whole
 * in memory to be printed.  This writer streams, and its number format is
 * chosen here: the shortest decimal that strtod reads back as the same
 * double (RFC 8259 section 6 leaves precision to the implementation; a
 * reader with IEEE doubles gets the exact value back).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

struct remat_jsonw {
    FILE *f;
    unsigned flags;
    int depth;                            /* open objects and arrays */
    char open[REMAT_JSONW_DEPTH];         /* '{' or '[' at each depth */
    int items[REMAT_JSONW_DEPTH + 1];     /* items written at each depth (0: top level) */
    int newline;                          /* the next item starts on a new line */
    remat_status st;                      /* the first misuse */
    char why[160];
};

remat_status remat_jsonw_create(FILE *f, unsigned flags, remat_jsonw **out)
{
    if (!out) return remat_fail(REMAT_ERR_INVALID, "remat_jsonw_create: out is NULL");
    *out = NULL;
    if (!f) return remat_fail(REMAT_ERR_INVALID, "remat_jsonw_create: no FILE to write to");
    remat_jsonw *w = remat_calloc(1, sizeof *w);
    if (!w) return remat_fail(REMAT_ERR_NOMEM, "out of memory creating a JSON writer");
    w->f = f;
    w->flags = flags;
    *out = w;
    return REMAT_OK;
}

void remat_jsonw_free(remat_jsonw *w) { free(w); }

static int misuse(remat_jsonw *w, const char *why)
{
    if (!w->st) {
        w->st = REMAT_ERR_STATE;
        snprintf(w->why, sizeof w->why, "%s", why);
    }
    return 0;
}

/* A string literal: valid UTF-8 as it is, other bytes as \u00XX. */
static void put_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') { fputc('\\', f); fputc((int)c, f); p++; continue; }
        if (c < 0x20) {
            const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
            if (e) fputs(e, f); else fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        if (c < 0x80) { fputc((int)c, f); p++; continue; }
        /* the length of a well-formed sequence (RFC 3629: no overlong forms,
         * no surrogates, nothing past U+10FFFF), 0 when it is not one */
        int n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        for (int k = 1; k < n; k++) {
            unsigned d = p[k];
            if ((d & 0xc0) != 0x80 ||
                (k == 1 && ((c == 0xe0 && d < 0xa0) || (c == 0xed && d > 0x9f) || (c == 0xf0 && d < 0x90) ||
                            (c == 0xf4 && d > 0x8f))))
                n = 0;
        }
        if (n) { fwrite(p, 1, (size_t)n, f); p += n; }
        else { fprintf(f, "\\u%04x", c); p++; }
    }
    fputc('"', f);
}

/* The separator and key before an item; 0 (nothing written) on misuse. */
static int item(remat_jsonw *w, const char *key)
{
    if (!w || w->st) return 0;
    int in_object = w->depth > 0 && w->open[w->depth - 1] == '{';
    if (in_object && !key) return misuse(w, "a member of an object without a key");
    if (!in_object && key) return misuse(w, "a key outside an object");
    int spaced = w->flags & REMAT_JSONW_SPACED;
    if (w->depth > 0 && w->items[w->depth]) fputc(',', w->f);
    if (w->newline) fputc('\n', w->f);
    else if (spaced && w->depth > 0 && w->items[w->depth]) fputc(' ', w->f);
    w->newline = 0;
    w->items[w->depth]++;
    if (key) {
        put_string(w->f, key);
        fputs(spaced ? ": " : ":", w->f);
    }
    return 1;
}

/* after a value: a completed top-level value ends its line */
static void done(remat_jsonw *w)
{
    if (w->depth == 0) fputc('\n', w->f);
}

static void open_(remat_jsonw *w, const char *key, char c)
{
    if (w && !w->st && w->depth == REMAT_JSONW_DEPTH) { misuse(w, "nesting deeper than REMAT_JSONW_DEPTH"); return; }
    if (!item(w, key)) return;
    fputc(c, w->f);
    w->open[w->depth++] = c;
    w->items[w->depth] = 0;
}

void remat_jsonw_object(remat_jsonw *w, const char *key) { open_(w, key, '{'); }
void remat_jsonw_array(remat_jsonw *w, const char *key) { open_(w, key, '['); }

void remat_jsonw_end(remat_jsonw *w)
{
    if (!w || w->st) return;
    if (!w->depth) { misuse(w, "end() with no object or array open"); return; }
    if (w->newline) fputc('\n', w->f);
    w->newline = 0;
    fputc(w->open[--w->depth] == '{' ? '}' : ']', w->f);
    done(w);
}

void remat_jsonw_newline(remat_jsonw *w)
{
    if (w && !w->st) w->newline = 1;
}

void remat_jsonw_str(remat_jsonw *w, const char *key, const char *s)
{
    if (!item(w, key)) return;
    if (s) put_string(w->f, s); else fputs("null", w->f);
    done(w);
}

void remat_jsonw_num(remat_jsonw *w, const char *key, double x)
{
    if (!item(w, key)) return;
    char buf[40];
    if (!isfinite(x)) snprintf(buf, sizeof buf, "null");
    else
        for (int p = 15; p <= 17; p++) {
            snprintf(buf, sizeof buf, "%.*g", p, x);
            if (strtod(buf, NULL) == x) break;   /* %.17g always reads back */
        }
    fputs(buf, w->f);
    done(w);
}

void remat_jsonw_float(remat_jsonw *w, const char *key, float x)
{
    if (!item(w, key)) return;
    char buf[40];
    if (!isfinite(x)) snprintf(buf, sizeof buf, "null");
    else
        for (int p = 6; p <= 9; p++) {
            snprintf(buf, sizeof buf, "%.*g", p, (double)x);
            if (strtof(buf, NULL) == x) break;   /* %.9g always reads back */
        }
    fputs(buf, w->f);
    done(w);
}

void remat_jsonw_int(remat_jsonw *w, const char *key, int64_t x)
{
    if (!item(w, key)) return;
    fprintf(w->f, "%lld", (long long)x);
    done(w);
}

void remat_jsonw_uint(remat_jsonw *w, const char *key, uint64_t x)
{
    if (!item(w, key)) return;
    fprintf(w->f, "%llu", (unsigned long long)x);
    done(w);
}

void remat_jsonw_bool(remat_jsonw *w, const char *key, int b)
{
    if (!item(w, key)) return;
    fputs(b ? "true" : "false", w->f);
    done(w);
}

void remat_jsonw_null(remat_jsonw *w, const char *key)
{
    if (!item(w, key)) return;
    fputs("null", w->f);
    done(w);
}

remat_status remat_jsonw_finish(remat_jsonw *w)
{
    if (!w) return remat_fail(REMAT_ERR_INVALID, "remat_jsonw_finish: writer is NULL");
    if (w->st) return remat_fail(w->st, "JSON writer: %s", w->why);
    if (w->depth) return remat_fail(REMAT_ERR_STATE, "JSON writer: %d object(s) or array(s) left open", w->depth);
    if (ferror(w->f)) return remat_fail(REMAT_ERR_IO, "JSON writer: the output could not be written");
    return REMAT_OK;
}
