/*
 * wlayout.c -- what every weights format shares (wlayout.h): sources (a
 * file or a memory buffer), clearing a layout, and safetensors' dtypes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "wlayout.h"
#include "../core/core.h"

/* ---- sources: a file or a memory buffer ------------------------------------ */

remat_status remat_wsrc_read(const remat_wsrc *s, uint64_t off, void *dst, size_t n)
{
    if (off > s->size || n > s->size - off)
        return remat_fail(REMAT_ERR_FORMAT, "%s: truncated: %zu bytes at offset %llu run past the end "
                          "(%llu bytes)", s->name, n, (unsigned long long)off, (unsigned long long)s->size);
    if (n == 0) return REMAT_OK;
    if (s->mem) { memcpy(dst, s->mem + off, n); return REMAT_OK; }
    if (off > (uint64_t)INT64_MAX || fseeko(s->f, (off_t)off, SEEK_SET) != 0 || fread(dst, 1, n, s->f) != n)
        return remat_fail(REMAT_ERR_IO, "cannot read '%s': %s", s->name,
                          ferror(s->f) ? strerror(errno) : "the file shrank while being read");
    return REMAT_OK;
}

remat_status remat_wsrc_open(const char *path, remat_wsrc *s)
{
    memset(s, 0, sizeof *s);
    s->name = path;
    if (!path) return remat_fail(REMAT_ERR_INVALID, "weights path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return remat_fail(REMAT_ERR_IO, "cannot open weights file '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return remat_fail(REMAT_ERR_IO, "weights path '%s' is not a regular file", path);
    }
    s->f = f;
    s->size = (uint64_t)sb.st_size;
    return REMAT_OK;
}

/* ---- layouts ------------------------------------------------------------------ */

void remat_wlayout_clear(remat_wlayout *ly)
{
    free(ly->p);
    for (size_t i = 0; i < ly->nt; i++) free(ly->t[i].name);
    free(ly->t);
    for (int i = 0; i < ly->nsrc; i++) free(ly->srcs[i]);
    free(ly->srcs);
    free(ly->srcsize);
    memset(ly, 0, sizeof *ly);
}

/* ---- safetensors dtypes ------------------------------------------------------- */

static const struct { const char *name; int size; } st_dtypes[] = {
    [REMAT_ST_BF16] = {"BF16", 2}, [REMAT_ST_F32] = {"F32", 4},
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},
    {"F16", 2}, {"I32", 4}, {"U32", 4}, {"F64", 8}, {"I64", 8}, {"U64", 8},
};
_Static_assert(sizeof st_dtypes / sizeof st_dtypes[0] == REMAT_ST_NDTYPES, "REMAT_ST_NDTYPES counts st_dtypes");

const char *remat_st_dtype_name(int dt) { return dt >= 0 && dt < REMAT_ST_NDTYPES ? st_dtypes[dt].name : "?"; }
int remat_st_dtype_size(int dt) { return dt >= 0 && dt < REMAT_ST_NDTYPES ? st_dtypes[dt].size : 0; }
