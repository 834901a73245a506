/*
 * jsonread.c -- reading the keys of a JSON object (Jansson) with one kind
 * of message for every file remat reads as JSON: config.json (hfdir.c) and
 * tables (tablefile.c).  A value of the wrong type or out of range is
 * refused as "SRC: WHEREkey must be WANT, got VALUE", one line; so is a
 * file that is not JSON (remat_json_fail: safetensors headers too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../core/core.h"
#include "jsonread.h"

remat_status remat_json_fail(const char *src, const char *doc, const json_error_t *e)
{
    if (json_error_code(e) == json_error_out_of_memory)
        return remat_fail(REMAT_ERR_NOMEM, "out of memory parsing %s's %s", src, doc);
    /* Jansson quotes the text near the error: keep the message one line */
    char what[JSON_ERROR_TEXT_LENGTH];
    size_t i = 0;
    for (; e->text[i] && i < sizeof what - 1; i++)
        what[i] = (unsigned char)e->text[i] < 0x20 || (unsigned char)e->text[i] >= 0x7f ? '?' : e->text[i];
    what[i] = 0;
    return remat_fail(REMAT_ERR_FORMAT, "%s: malformed %s: %s at byte %d of the JSON", src, doc, what, e->position);
}

const json_t *remat_jobj_val(const remat_jobj *h, const char *key)
{
    const json_t *v = json_object_get(h->o, key);
    return json_is_null(v) ? NULL : v;
}

void remat_jobj_show(const json_t *v, char *buf, size_t n)
{
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    size_t i = 0;
    for (; t && t[i] && i + 1 < n; i++) buf[i] = (unsigned char)t[i] < 0x20 || (unsigned char)t[i] >= 0x7f ? '?' : t[i];
    buf[i] = 0;
    if (t && strlen(t) >= n && n > 4) strcpy(buf + n - 4, "...");
    free(t);
}

remat_status remat_jobj_bad(const remat_jobj *h, const char *key, const char *want, const json_t *v)
{
    char got[48] = "";
    if (v) remat_jobj_show(v, got, sizeof got);
    return remat_fail(REMAT_ERR_FORMAT, "%s: %s%s must be %s, got %s", h->src, h->where, key, want, v ? got : "nothing");
}

remat_status remat_jobj_ll(const remat_jobj *h, const char *key, long long dflt, long long lo, long long hi,
                           long long *out)
{
    const json_t *v = remat_jobj_val(h, key);
    char want[96];
    if (!v) { *out = dflt; return REMAT_OK; }
    snprintf(want, sizeof want, "a whole number in [%lld, %lld]", lo, hi);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return remat_jobj_bad(h, key, want, v);
    *out = json_integer_value(v);
    return REMAT_OK;
}

remat_status remat_jobj_int(const remat_jobj *h, const char *key, long long dflt, long long lo, long long hi, int *out)
{
    long long x;
    remat_status st = remat_jobj_ll(h, key, dflt, lo, hi, &x);
    if (!st) *out = (int)x;
    return st;
}

static remat_status number(const remat_jobj *h, const char *key, double dflt, double lo, double hi, int closed,
                           double *out)
{
    const json_t *v = remat_jobj_val(h, key);
    char want[96];
    if (!v) { *out = dflt; return REMAT_OK; }
    snprintf(want, sizeof want, "a number in %c%g, %g]", closed ? '[' : '(', lo, hi);
    double x = json_is_number(v) ? json_number_value(v) : 0;
    if (!json_is_number(v) || !((closed ? x >= lo : x > lo) && x <= hi)) return remat_jobj_bad(h, key, want, v);
    *out = x;
    return REMAT_OK;
}

remat_status remat_jobj_num(const remat_jobj *h, const char *key, double dflt, double lo, double hi, double *out)
{
    return number(h, key, dflt, lo, hi, 0, out);
}

remat_status remat_jobj_range(const remat_jobj *h, const char *key, double dflt, double lo, double hi, double *out)
{
    return number(h, key, dflt, lo, hi, 1, out);
}

remat_status remat_jobj_bool(const remat_jobj *h, const char *key, int dflt, int *out)
{
    const json_t *v = remat_jobj_val(h, key);
    if (!v) { *out = dflt; return REMAT_OK; }
    if (!json_is_boolean(v)) return remat_jobj_bad(h, key, "true or false", v);
    *out = json_is_true(v);
    return REMAT_OK;
}

remat_status remat_jobj_str(const remat_jobj *h, const char *key, const char *dflt, const char **out)
{
    const json_t *v = remat_jobj_val(h, key);
    if (!v) { *out = dflt; return REMAT_OK; }
    if (!json_is_string(v)) return remat_jobj_bad(h, key, "a string", v);
    *out = json_string_value(v);
    return REMAT_OK;
}
