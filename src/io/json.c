/*
 * json.c -- the small JSON reader of the safetensors header (json.h).
 *
 * A cursor over a JSON text with one function per token a caller expects
 * next; the caller spells out its grammar with them (safetensors.c).  Strict
 * RFC 8259 strings (escapes, UTF-16 surrogate pairs, valid UTF-8, no
 * control characters) decoded to NUL-terminated UTF-8 without embedded NULs,
 * and unsigned integers only -- exactly what a safetensors header holds.
 * Every error is REMAT_ERR_FORMAT with the byte offset in the text.
 */
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "json.h"

void remat_json_init(remat_json *j, const char *text, size_t n, const char *src, const char *doc)
{
    j->base = j->p = text;
    j->end = text + n;
    j->src = src;
    j->doc = doc;
}

int remat_json_at_end(remat_json *j)
{
    remat_json_ws(j);
    return j->p == j->end;
}

remat_status remat_json_error(const remat_json *j, const char *what)
{
    return remat_fail(REMAT_ERR_FORMAT, "%s: malformed %s: %s at byte %zu of the JSON", j->src, j->doc, what,
                      (size_t)(j->p - j->base));
}

void remat_json_ws(remat_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

int remat_json_eat(remat_json *j, char c)
{
    remat_json_ws(j);
    if (j->p < j->end && *j->p == c) { j->p++; return 1; }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        unsigned min;
        if ((c & 0xe0) == 0xc0) { k = 1; min = 0x80; c &= 0x1f; }
        else if ((c & 0xf0) == 0xe0) { k = 2; min = 0x800; c &= 0x0f; }
        else if ((c & 0xf8) == 0xf0) { k = 3; min = 0x10000; c &= 0x07; }
        else return 0;
        if (n - i - 1 < k) return 0;
        for (size_t m = 1; m <= k; m++) {
            unsigned b = s[i + m];
            if ((b & 0xc0) != 0x80) return 0;
            c = (c << 6) | (b & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
        i += k + 1;
    }
    return 1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static int read_u4(const char *p, const char *end, unsigned *out)
{
    if (end - p < 4) return 0;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0) return 0;
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 1;
}

/* A JSON string, decoded to a NUL-terminated malloc'd UTF-8 string with no
 * embedded NUL. */
remat_status remat_json_string(remat_json *j, char **out)
{
    *out = NULL;
    remat_json_ws(j);
    if (j->p >= j->end || *j->p != '"') return remat_json_error(j, "expected a string");
    const char *q = ++j->p;
    while (q < j->end && *q != '"') {   /* find the end; the decoded text is no longer */
        if (*q == '\\') { if (++q >= j->end) break; }
        q++;
    }
    if (q >= j->end) return remat_json_error(j, "unterminated string");
    char *o = remat_malloc((size_t)(q - j->p) + 1);
    if (!o) return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing a %s", j->doc);
    size_t n = 0;
    while (*j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c < 0x20) { free(o); return remat_json_error(j, "control character in a string"); }
        if (c != '\\') { o[n++] = (char)c; j->p++; continue; }
        char e = *++j->p;
        j->p++;
        switch (e) {
        case '"': o[n++] = '"'; break;
        case '\\': o[n++] = '\\'; break;
        case '/': o[n++] = '/'; break;
        case 'b': o[n++] = '\b'; break;
        case 'f': o[n++] = '\f'; break;
        case 'n': o[n++] = '\n'; break;
        case 'r': o[n++] = '\r'; break;
        case 't': o[n++] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!read_u4(j->p, q, &cp)) { free(o); return remat_json_error(j, "bad \\u escape"); }
            j->p += 4;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (q - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !read_u4(j->p + 2, q, &lo) ||
                    lo < 0xdc00 || lo > 0xdfff) {
                    free(o);
                    return remat_json_error(j, "unpaired UTF-16 surrogate");
                }
                j->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                free(o);
                return remat_json_error(j, "unpaired UTF-16 surrogate");
            }
            if (cp == 0) { free(o); return remat_json_error(j, "NUL character in a string"); }
            n += put_utf8(o + n, cp);
            break;
        }
        default: free(o); j->p--; return remat_json_error(j, "bad escape");
        }
    }
    j->p++;
    o[n] = 0;
    if (!utf8_valid((const unsigned char *)o, n)) { free(o); return remat_json_error(j, "invalid UTF-8 in a string"); }
    *out = o;
    return REMAT_OK;
}

/* An unsigned integer without sign, fraction, exponent or leading zeros,
 * at most 2^63 - 1. */
remat_status remat_json_uint(remat_json *j, uint64_t *out)
{
    remat_json_ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return remat_json_error(j, "expected an unsigned integer");
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return remat_json_error(j, "leading zero in a number");
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (UINT64_C(0x7fffffffffffffff) - (uint64_t)(*j->p - '0')) / 10)
            return remat_json_error(j, "number too large");
        v = v * 10 + (uint64_t)(*j->p - '0');
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return remat_json_error(j, "expected a whole number");
    *out = v;
    return REMAT_OK;
}

/* [u, u, ...] with at most max elements */
remat_status remat_json_uint_array(remat_json *j, uint64_t *v, int max, int *n)
{
    remat_status st;
    *n = 0;
    if (!remat_json_eat(j, '[')) return remat_json_error(j, "expected '['");
    if (remat_json_eat(j, ']')) return REMAT_OK;
    do {
        if (*n >= max) return remat_json_error(j, "too many elements in an array");
        if ((st = remat_json_uint(j, &v[(*n)++]))) return st;
    } while (remat_json_eat(j, ','));
    if (!remat_json_eat(j, ']')) return remat_json_error(j, "expected ',' or ']'");
    return REMAT_OK;
}
