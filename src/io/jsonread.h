/*
 * jsonread.h -- reading JSON with one kind of message (jsonread.c): a
 * Jansson parse error as one line, and the keys of an object.  Private to
 * src/io/.
 */
#ifndef REMAT_JSONREAD_H
#define REMAT_JSONREAD_H

#include <stddef.h>
#include <jansson.h>
#include "remat.h"

/* A Jansson parse error as one line: "SRC: malformed DOC: WHAT at byte N"
 * (REMAT_ERR_FORMAT; REMAT_ERR_NOMEM when Jansson ran out of memory). */
remat_status remat_json_fail(const char *src, const char *doc, const json_error_t *e);

/* ---- the keys of a JSON object (jsonread.c) ----------------------------------
 * An object being read, with where it is for messages: src (the file) and
 * where ("rope_scaling." inside that object, "" at the top).  Each reader
 * takes dflt when the key is absent or null, else refuses a value of
 * another type or out of range (REMAT_ERR_FORMAT, "SRC: WHEREkey must be
 * ..., got VALUE"). */
typedef struct remat_jobj { const json_t *o; const char *src, *where; } remat_jobj;
/* the value of key: NULL when absent or null */
const json_t *remat_jobj_val(const remat_jobj *h, const char *key);
/* v as JSON text for a message: one line, cut to n bytes */
void remat_jobj_show(const json_t *v, char *buf, size_t n);
remat_status remat_jobj_bad(const remat_jobj *h, const char *key, const char *want, const json_t *v);
/* an integer in [lo, hi] */
remat_status remat_jobj_ll(const remat_jobj *h, const char *key, long long dflt, long long lo, long long hi,
                           long long *out);
remat_status remat_jobj_int(const remat_jobj *h, const char *key, long long dflt, long long lo, long long hi, int *out);
/* a number in (lo, hi], and in [lo, hi] */
remat_status remat_jobj_num(const remat_jobj *h, const char *key, double dflt, double lo, double hi, double *out);
remat_status remat_jobj_range(const remat_jobj *h, const char *key, double dflt, double lo, double hi, double *out);
remat_status remat_jobj_bool(const remat_jobj *h, const char *key, int dflt, int *out);
remat_status remat_jobj_str(const remat_jobj *h, const char *key, const char *dflt, const char **out);

#endif
