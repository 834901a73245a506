/*
 * json.h -- a small reader of untrusted JSON text (json.c), for the
 * safetensors header.  Not a general JSON library: strings and unsigned
 * integers are the only values it decodes, which is all that header holds.
 * The caller walks its grammar token by token:
 *
 *     remat_json j;
 *     remat_json_init(&j, text, n, "model.safetensors", "safetensors header");
 *     if (!remat_json_eat(&j, '{')) return remat_json_error(&j, "expected '{'");
 *     char *key;
 *     if ((st = remat_json_string(&j, &key))) return st;
 *     ...
 *
 * Errors are REMAT_ERR_FORMAT (REMAT_ERR_NOMEM for a string that cannot be
 * allocated) with the message "SRC: malformed DOC: WHAT at byte N of the
 * JSON".  Nothing reads outside [text, text + n); text need not be
 * NUL-terminated.
 */
#ifndef REMAT_JSON_H
#define REMAT_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "remat.h"

typedef struct remat_json {
    const char *base, *p, *end;   /* the text, the cursor, its end */
    const char *src;              /* the file's name, for messages */
    const char *doc;              /* what the text is, e.g. "safetensors header" */
} remat_json;

void remat_json_init(remat_json *j, const char *text, size_t n, const char *src, const char *doc);
/* Records "SRC: malformed DOC: WHAT at byte N of the JSON" and returns
 * REMAT_ERR_FORMAT. */
remat_status remat_json_error(const remat_json *j, const char *what);
/* Skips white space (space, tab, newline, carriage return). */
void remat_json_ws(remat_json *j);
/* Skips white space, then consumes c when it comes next: 1, else 0. */
int remat_json_eat(remat_json *j, char c);
/* Skips white space: 1 when nothing else is left. */
int remat_json_at_end(remat_json *j);
/* A string, decoded to a NUL-terminated malloc'd (remat_malloc) UTF-8
 * string without embedded NULs; *out NULL on failure.  The caller free()s it. */
remat_status remat_json_string(remat_json *j, char **out);
/* An unsigned integer without sign, fraction, exponent or leading zeros,
 * at most 2^63 - 1. */
remat_status remat_json_uint(remat_json *j, uint64_t *out);
/* [u, u, ...] of at most max unsigned integers into v; *n gets the count. */
remat_status remat_json_uint_array(remat_json *j, uint64_t *v, int max, int *n);

#endif
