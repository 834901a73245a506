/*
 * checkpoint.c -- training checkpoints: atomic save, validation, fallback
 * to the previous good one, exact resume (the "checkpoints" part of
 * remat.h; the file format byte by byte: README, "The checkpoint format").
 *
 * Why these pieces:
 *   - Atomicity.  A save writes DIR/ckpt-<step>.bin through the library's
 *     atomic writer (core/files.c): DIR/ckpt-<step>.bin.tmp.<pid>, fflush +
 *     fsync, rename(2) to the final name, fsync(DIR).  rename is atomic, so
 *     a final name holds either nothing or a complete, synced file; a
 *     SIGKILL mid-save leaves only a temporary file, which load never looks
 *     at and the next save (or remat_checkpoint_prepare) deletes once its
 *     writer is dead (also in the older name ckpt-<step>.<pid>.tmp).
 *   - Detection.  The last 8 bytes are a 64-bit hash of everything before
 *     them, and the header records the file's total size, so truncation
 *     (torn write) and any flipped byte are refused.  The hash is the one
 *     remat_hash_bytes computes (splitmix64 finaliser over little-endian
 *     words, seeded by the length): each step is a bijection of the state
 *     for a fixed word and of the word for a fixed state, so any change
 *     confined to one 8-byte word -- every single-byte flip -- always
 *     changes the result.  It is computed piecewise (remat_hash_update) as
 *     a file is written or read, so a file is never held in memory.
 *   - Untrusted input.  The same checks (check_sizes, check_fields,
 *     check_floats) serve remat_checkpoint_parse() on a buffer and the
 *     loader on a file: magic, version, overflow-checked sizes against the
 *     real length, the checksum, then every field (config via
 *     remat_config_check, parameter count, optimizer ranges, data positions,
 *     strings, finite floats).  Loading allocates the model only for a file
 *     that really holds that many parameters, and streams the parameters
 *     and AdamW moments straight into it (read_ckpt), so a resume needs the
 *     model's memory and no copy of the file; the model is handed out only
 *     once the checksum, read last, checks out.
 *   - Retention.  After a save, the new file and the newest older file that
 *     validates are kept (REMAT_CHECKPOINT_KEEP = 2); older files and
 *     corrupt newer ones are deleted.  Valid newer ones are left alone.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../core/core.h"
#include "../core/endian.h"
#include "../core/rng.h"
#include "../comm/comm.h"
#include "../engine/model.h"
#include "io.h"

#define CK_MAGIC "REMATCKP"
#define CK_VERSION 4u                /* 2: + data hash; 3: + dtype; 4: + the architecture record;
                                        versions 1 to 3 are still read */
#define CK_HEADER 256u
#define CK_MAX_PATH 4095u           /* string fields: they fit remat_checkpoint_info's arrays */
#define CK_MAX_POLICY 16383u
#define CK_NAME_MAX 48              /* "ckpt-" + up to 20 digits + ".bin" */

static uint64_t pad8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* ---- the checksum: remat_hash_bytes of everything before it ---------------- */

uint64_t remat_checkpoint_checksum(const void *buf, size_t n)
{
    return remat_hash_bytes(buf, n >= 8 ? n - 8 : 0);
}

void remat_checkpoint_seal(void *buf, size_t n)
{
    if (n >= 8) remat_put_le64((unsigned char *)buf + n - 8, remat_checkpoint_checksum(buf, n));
}

/* ---- header ------------------------------------------------------------------ */

/* Offsets (README, "The checkpoint format", lays them out too). */
enum {
    H_MAGIC = 0, H_VERSION = 8, H_HDRBYTES = 12, H_FILEBYTES = 16, H_STEP = 24, H_OPTSTEPS = 32,
    H_SEED = 40, H_NPARAMS = 48, H_CFG = 56, H_DROPOUT = 84, H_OPT = 88, H_TOKENS = 112,
    H_POS = 128, H_DATAKIND = 144, H_PATHLEN = 148, H_POLICYLEN = 152, H_ATTENTION = 156, H_LMHEAD = 160,
    H_END_V1 = 164, H_DTYPE = 164, H_DATAHASH = 168, H_FRAMEWORK = 176, H_MICRO = 192, H_VALLEN = 196,
    H_ARCHLEN = 200, H_END = 204
};

/* The architecture record (version 4): CK_ARCH bytes after the strings, 0
 * for GPT-2 (whose fields are all 0), so that a GPT-2 file is the same as
 * a version-3 one but for its version.  Little-endian:
 *   u32 arch, n_kv_head, ffn_dim, head_dim, tie_embeddings, rope type,
 *       original_max_position, 0;
 *   f64 rope_theta, norm_eps, rope factor, low_freq_factor, high_freq_factor
 * (doubles, bit for bit: a resumed run computes the same RoPE table). */
#define CK_ARCH 72u

/* The fields from H_END_V1 to H_END leave no gap (check_fields treats
 * every byte there as a field's): a gap needs its bytes checked for zero. */
_Static_assert(H_DTYPE + 4 == H_DATAHASH && H_DATAHASH + 8 == H_FRAMEWORK && H_FRAMEWORK + 16 == H_MICRO &&
               H_MICRO + 4 == H_VALLEN && H_VALLEN + 4 == H_ARCHLEN && H_ARCHLEN + 4 == H_END,
               "a gap between header fields: check its bytes are zero");

/* Every remat_config field is in the header: a new field must be added to
 * encode_header and remat_checkpoint_parse (and the format version bumped). */
_Static_assert(sizeof(remat_config) == 240,   /* 15 ints, then the architecture: 4 ints, theta, the scaling, eps, tie;
                                                 then table (in what was tail padding) and cp, then the experts'
                                                 6 ints, 2 doubles and qk_norm, then multi-latent attention's and
                                                 the dense prefix's 8 ints and the routing's scaling, which are 0 in
                                                 every config the engine runs (its framework, stored, is remat's,
                                                 which has neither context parallelism, experts nor MLA) and so are
                                                 not stored */
               "remat_config changed: store the new field in the checkpoint header or its architecture record");

/* Total file bytes for the given variable parts; 0 on overflow. */
static uint64_t file_bytes(uint64_t nparams, uint64_t pathlen, uint64_t policylen, uint64_t vallen, uint64_t archlen)
{
    int ok = 1;
    uint64_t n = remat_add(CK_HEADER, pad8(pathlen + policylen + vallen + archlen), &ok);
    n = remat_add(n, remat_mul(nparams, 12, &ok), &ok);
    n = remat_add(n, 8, &ok);
    return ok ? n : 0;
}

static void encode_header(unsigned char h[CK_HEADER], const remat_checkpoint_info *ci, uint64_t nparams,
                          uint64_t total)
{
    const remat_config *c = &ci->cfg;
    const remat_optim *o = &ci->opt;
    memset(h, 0, CK_HEADER);
    memcpy(h + H_MAGIC, CK_MAGIC, 8);
    remat_put_le32(h + H_VERSION, CK_VERSION);
    remat_put_le32(h + H_HDRBYTES, CK_HEADER);
    remat_put_le64(h + H_FILEBYTES, total);
    remat_put_le64(h + H_STEP, ci->step);
    remat_put_le64(h + H_OPTSTEPS, ci->opt_steps);
    remat_put_le64(h + H_SEED, ci->seed);
    remat_put_le64(h + H_NPARAMS, nparams);
    int cf[7] = { c->n_layer, c->n_embd, c->n_head, c->vocab, c->max_seq, c->batch, c->seq };
    for (int k = 0; k < 7; k++) remat_put_le32(h + H_CFG + 4 * k, (uint32_t)cf[k]);
    remat_put_lef32(h + H_DROPOUT, c->dropout);
    float of[6] = { o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->grad_clip };
    for (int k = 0; k < 6; k++) remat_put_lef32(h + H_OPT + 4 * k, of[k]);
    for (int k = 0; k < 2; k++) {
        remat_put_le64(h + H_TOKENS + 8 * k, ci->data_tokens[k]);
        remat_put_le64(h + H_POS + 8 * k, ci->data_pos[k]);
    }
    remat_put_le32(h + H_DATAKIND, ci->data[0] ? 1u : 0u);
    remat_put_le32(h + H_PATHLEN, (uint32_t)strlen(ci->data));
    remat_put_le32(h + H_POLICYLEN, (uint32_t)strlen(ci->policy));
    remat_put_le32(h + H_ATTENTION, (uint32_t)c->attention);
    remat_put_le32(h + H_LMHEAD, (uint32_t)c->lmhead_chunk);
    remat_put_le32(h + H_DTYPE, (uint32_t)c->dtype);
    remat_put_le64(h + H_DATAHASH, ci->data_hash);
    /* framework, tp - 1, sp, stage: all zero for every config the engine
     * runs, so the file is the same as before these fields (no new version) */
    int fw[4] = { (int)c->framework, remat_config_tp(c) - 1, c->sp, c->stage };
    for (int k = 0; k < 4; k++) remat_put_le32(h + H_FRAMEWORK + 4 * k, (uint32_t)fw[k]);
    /* micro-batch and validation set: zero (the file as before them) unless used */
    remat_put_le32(h + H_MICRO, (uint32_t)ci->micro_batch);
    remat_put_le32(h + H_VALLEN, (uint32_t)strlen(ci->val_data));
    remat_put_le32(h + H_ARCHLEN, c->arch == REMAT_ARCH_GPT2 ? 0u : CK_ARCH);
}

static void put_f64(unsigned char *p, double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    remat_put_le64(p, u);
}
static double get_f64(const unsigned char *p)
{
    uint64_t u = remat_get_le64(p);
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* the architecture record of c (CK_ARCH bytes) */
static void encode_arch(unsigned char *a, const remat_config *c)
{
    const remat_rope_scaling *r = &c->rope_scaling;
    uint32_t u[8] = { (uint32_t)c->arch, (uint32_t)c->n_kv_head, (uint32_t)c->ffn_dim, (uint32_t)c->head_dim,
                      (uint32_t)c->tie_embeddings, (uint32_t)r->type, (uint32_t)r->original_max_position, 0 };
    double d[5] = { c->rope_theta, c->norm_eps, r->factor, r->low_freq_factor, r->high_freq_factor };
    for (int k = 0; k < 8; k++) remat_put_le32(a + 4 * k, u[k]);
    for (int k = 0; k < 5; k++) put_f64(a + 32 + 8 * k, d[k]);
}

/* its fields into c (checked with the rest of the config by the caller) */
static int decode_arch(const unsigned char *a, remat_config *c)
{
    uint32_t u[8];
    for (int k = 0; k < 8; k++) u[k] = remat_get_le32(a + 4 * k);
    if (u[7] || u[0] > 255 || u[1] > 1u << 20 || u[2] > 1u << 24 || u[3] > 1u << 20 || u[4] > 1 || u[5] > 255 ||
        u[6] > 1u << 30)
        return 0;
    c->arch = (remat_arch)u[0]; c->n_kv_head = (int)u[1]; c->ffn_dim = (int)u[2]; c->head_dim = (int)u[3];
    c->tie_embeddings = (int)u[4];
    c->rope_scaling.type = (remat_rope_type)u[5];
    c->rope_scaling.original_max_position = (int)u[6];
    c->rope_theta = get_f64(a + 32);
    c->norm_eps = get_f64(a + 40);
    c->rope_scaling.factor = get_f64(a + 48);
    c->rope_scaling.low_freq_factor = get_f64(a + 56);
    c->rope_scaling.high_freq_factor = get_f64(a + 64);
    for (int k = 0; k < 5; k++)
        if (!isfinite(get_f64(a + 32 + 8 * k))) return 0;
    return 1;
}

/* Checks a string field: no NULs; copies it, NUL-terminated, into dst. */
static int take_string(char *dst, const unsigned char *src, uint32_t len)
{
    if (memchr(src, 0, len)) return 0;
    memcpy(dst, src, len);
    dst[len] = 0;
    return 1;
}

/* Checks the finite-ness of n little-endian floats (and >= 0 when nonneg);
 * returns the index of the first bad one, or n. */
static uint64_t first_bad_float(const unsigned char *p, uint64_t n, int nonneg)
{
    for (uint64_t i = 0; i < n; i++) {
        float f = remat_get_lef32(p + 4 * i);
        if (!isfinite(f) || (nonneg && f < 0)) return i;
    }
    return n;
}

/* What the fixed header says about the file's layout, once its sizes check
 * out. */
typedef struct ck_sizes {
    uint32_t version, pathlen, policylen, vallen, archlen;
    uint64_t nparams, total;
} ck_sizes;

/* Bytes of the strings region (data path, policy, validation path, the
 * architecture record, zero padding). */
static uint64_t strings_bytes(const ck_sizes *z)
{
    return pad8((uint64_t)z->pathlen + z->policylen + z->vallen + z->archlen);
}

/* The checks that come before the checksum: magic, version, header size,
 * string lengths, and sizes that agree with each other and with the real
 * length n.  b holds the file's first min(n, CK_HEADER) bytes. */
static remat_status check_sizes(const unsigned char *b, uint64_t n, ck_sizes *z)
{
    if (n < 8 || memcmp(b, CK_MAGIC, 8))
        return remat_fail(REMAT_ERR_FORMAT, "not a remat checkpoint (it does not start with \"%s\")", CK_MAGIC);
    if (n < CK_HEADER)
        return remat_fail(REMAT_ERR_FORMAT, "truncated: %llu bytes, shorter than the %u-byte header (torn write?)",
                          (unsigned long long)n, CK_HEADER);
    uint32_t version = remat_get_le32(b + H_VERSION);
    if (version < 1 || version > CK_VERSION)
        return remat_fail(REMAT_ERR_FORMAT, "checkpoint format version %u; this remat reads versions 1 to %u",
                          version, CK_VERSION);
    if (remat_get_le32(b + H_HDRBYTES) != CK_HEADER)
        return remat_fail(REMAT_ERR_FORMAT, "header size %u, version %u has %u: the header is corrupt",
                          remat_get_le32(b + H_HDRBYTES), version, CK_HEADER);
    uint64_t total = remat_get_le64(b + H_FILEBYTES), nparams = remat_get_le64(b + H_NPARAMS);
    uint32_t pathlen = remat_get_le32(b + H_PATHLEN), policylen = remat_get_le32(b + H_POLICYLEN);
    uint32_t vallen = remat_get_le32(b + H_VALLEN), archlen = version >= 4 ? remat_get_le32(b + H_ARCHLEN) : 0;
    if (pathlen > CK_MAX_PATH || policylen > CK_MAX_POLICY || vallen > CK_MAX_PATH)
        return remat_fail(REMAT_ERR_FORMAT, "header claims a %u-byte data path, a %u-byte policy and a %u-byte "
                          "validation path (at most %u, %u and %u): the header is corrupt", pathlen, policylen, vallen,
                          CK_MAX_PATH, CK_MAX_POLICY, CK_MAX_PATH);
    if (archlen != 0 && archlen != CK_ARCH)
        return remat_fail(REMAT_ERR_FORMAT, "header claims a %u-byte architecture record (%u, or 0 for gpt2): the "
                          "header is corrupt", archlen, CK_ARCH);
    uint64_t expect = file_bytes(nparams, pathlen, policylen, vallen, archlen);
    if (expect == 0 || expect != total)
        return remat_fail(REMAT_ERR_FORMAT, "header sizes disagree (%llu parameters and strings make %llu bytes, "
                          "the header says %llu): the header is corrupt", (unsigned long long)nparams,
                          (unsigned long long)expect, (unsigned long long)total);
    if (n != total)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, the header says %llu (torn write?)",
                          n < total ? "truncated" : "trailing bytes", (unsigned long long)n, (unsigned long long)total);
    *z = (ck_sizes){ version, pathlen, policylen, vallen, archlen, nparams, total };
    return REMAT_OK;
}

/* The checks after the checksum: every header field of b and the strings
 * region str (strings_bytes(z) bytes), into *ci (file and warning left
 * alone). */
static remat_status check_fields(const unsigned char *b, const ck_sizes *z, const unsigned char *str,
                                 remat_checkpoint_info *ci)
{
    for (size_t k = H_END_V1; k < CK_HEADER; k++)
        if (b[k] && (z->version == 1 || (z->version == 2 && k < H_DATAHASH) || (z->version < 4 && k >= H_ARCHLEN) ||
                     k >= H_END))
            return remat_fail(REMAT_ERR_FORMAT, "reserved header byte %zu is not zero", k);
    remat_config *c = &ci->cfg;
    int cf[7];
    for (int k = 0; k < 7; k++) cf[k] = (int)remat_get_le32(b + H_CFG + 4 * k);
    c->n_layer = cf[0]; c->n_embd = cf[1]; c->n_head = cf[2]; c->vocab = cf[3];
    c->max_seq = cf[4]; c->batch = cf[5]; c->seq = cf[6];
    c->dropout = remat_get_lef32(b + H_DROPOUT);
    c->attention = (int)remat_get_le32(b + H_ATTENTION);
    c->lmhead_chunk = (int)remat_get_le32(b + H_LMHEAD);
    c->dtype = z->version >= 3 ? (remat_dtype)remat_get_le32(b + H_DTYPE) : REMAT_DTYPE_FP32;
    c->framework = (remat_framework)remat_get_le32(b + H_FRAMEWORK);   /* zero bytes in older files: remat, tp 1 */
    uint32_t tpm1 = remat_get_le32(b + H_FRAMEWORK + 4);
    c->tp = tpm1 < 1024 ? (int)tpm1 + 1 : -1;
    c->sp = (int)remat_get_le32(b + H_FRAMEWORK + 8);
    c->stage = (int)remat_get_le32(b + H_FRAMEWORK + 12);
    if (z->archlen && !decode_arch(str + z->pathlen + z->policylen + z->vallen, c))
        return remat_fail(REMAT_ERR_FORMAT, "the architecture record is corrupt");
    if (z->archlen && c->arch == REMAT_ARCH_GPT2)
        return remat_fail(REMAT_ERR_FORMAT, "an architecture record for gpt2 (its files have none)");
    remat_status st = remat_config_check(c);
    if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s", remat_errmsg());
        return remat_fail(st == REMAT_ERR_RANGE ? REMAT_ERR_RANGE : REMAT_ERR_FORMAT,
                          "the checkpoint's config is invalid: %s", why);
    }
    if (c->framework != REMAT_FRAMEWORK_REMAT || c->stage != REMAT_STAGE_WHOLE)
        return remat_fail(REMAT_ERR_FORMAT, "the checkpoint's config is for framework %d, stage %d; remat "
                          "checkpoints hold runs of remat's own engine (framework 0, stage 0)", (int)c->framework,
                          c->stage);
    if (remat_config_num_params(c) != z->nparams)
        return remat_fail(REMAT_ERR_FORMAT, "the header says %llu parameters, its config has %llu",
                          (unsigned long long)z->nparams, (unsigned long long)remat_config_num_params(c));
    remat_optim *o = &ci->opt;
    o->lr = remat_get_lef32(b + H_OPT);
    o->beta1 = remat_get_lef32(b + H_OPT + 4);
    o->beta2 = remat_get_lef32(b + H_OPT + 8);
    o->eps = remat_get_lef32(b + H_OPT + 12);
    o->weight_decay = remat_get_lef32(b + H_OPT + 16);
    o->grad_clip = remat_get_lef32(b + H_OPT + 20);
    if (!(o->lr >= 0 && o->lr < 10) || !(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1) ||
        !(o->eps > 0 && isfinite(o->eps)) || !(o->weight_decay >= 0 && o->weight_decay < 1) ||
        !isfinite(o->grad_clip))
        return remat_fail(REMAT_ERR_FORMAT, "optimizer settings out of range");
    ci->step = remat_get_le64(b + H_STEP);
    ci->opt_steps = remat_get_le64(b + H_OPTSTEPS);
    ci->seed = remat_get_le64(b + H_SEED);
    if (ci->opt_steps > ci->step || ci->opt_steps >= INT_MAX || ci->step > (uint64_t)INT64_MAX)
        return remat_fail(REMAT_ERR_FORMAT, "step counts out of range (%llu optimizer steps, %llu steps)",
                          (unsigned long long)ci->opt_steps, (unsigned long long)ci->step);
    uint32_t kind = remat_get_le32(b + H_DATAKIND);
    if (kind > 1 || (kind == 0) != (z->pathlen == 0))
        return remat_fail(REMAT_ERR_FORMAT, "data kind %u with a %u-byte path", kind, z->pathlen);
    ci->data_hash = z->version >= 2 ? remat_get_le64(b + H_DATAHASH) : 0;
    for (int k = 0; k < 2; k++) {
        ci->data_tokens[k] = remat_get_le64(b + H_TOKENS + 8 * k);
        ci->data_pos[k] = remat_get_le64(b + H_POS + 8 * k);
        if (ci->data_tokens[k] < 2 || ci->data_pos[k] >= ci->data_tokens[k])
            return remat_fail(REMAT_ERR_FORMAT, "%s data position %llu of %llu tokens is out of range",
                              k ? "validation" : "training", (unsigned long long)ci->data_pos[k],
                              (unsigned long long)ci->data_tokens[k]);
    }
    if (!take_string(ci->data, str, z->pathlen) || !take_string(ci->policy, str + z->pathlen, z->policylen) ||
        !take_string(ci->val_data, str + z->pathlen + z->policylen, z->vallen))
        return remat_fail(REMAT_ERR_FORMAT, "the data path, policy or validation path holds a NUL byte");
    if (z->vallen && !z->pathlen)
        return remat_fail(REMAT_ERR_FORMAT, "a validation path without a data path");
    ci->micro_batch = (int)remat_get_le32(b + H_MICRO);
    if (ci->micro_batch < 0 || ci->micro_batch > c->batch || (ci->micro_batch && c->batch % ci->micro_batch))
        return remat_fail(REMAT_ERR_FORMAT, "micro-batch %d does not divide the batch %d", ci->micro_batch, c->batch);
    for (uint64_t k = (uint64_t)z->pathlen + z->policylen + z->vallen + z->archlen; k < strings_bytes(z); k++)
        if (str[k]) return remat_fail(REMAT_ERR_FORMAT, "string padding is not zero");
    return REMAT_OK;
}

static const char *const ck_arrays[3] = { "parameter", "AdamW m", "AdamW v" };

/* Checks n little-endian floats at p, element first of array a (0 params,
 * 1 AdamW m, 2 AdamW v: also >= 0): finite.  REMAT_ERR_FORMAT names the
 * first bad one. */
static remat_status check_floats(int a, const unsigned char *p, uint64_t n, uint64_t first)
{
    uint64_t i = first_bad_float(p, n, a == 2);
    if (i == n) return REMAT_OK;
    return remat_fail(REMAT_ERR_FORMAT, "%s %llu is %g, not a finite%s number", ck_arrays[a],
                      (unsigned long long)(first + i), (double)remat_get_lef32(p + 4 * i), a == 2 ? " non-negative" : "");
}

remat_status remat_checkpoint_parse(const void *buf, size_t n, int flags, remat_ckpt_view *v)
{
    remat_status st;
    const unsigned char *b = buf;
    ck_sizes z = { 0, 0, 0, 0, 0, 0, 0 };
    if (!v) return remat_fail(REMAT_ERR_INVALID, "remat_checkpoint_parse: out is NULL");
    memset(v, 0, sizeof *v);
    if (!b && n) return remat_fail(REMAT_ERR_INVALID, "remat_checkpoint_parse: buffer is NULL");
    if ((st = check_sizes(b, n, &z))) return st;
    if (!(flags & REMAT_CKPT_NO_CHECKSUM)) {
        uint64_t stored = remat_get_le64(b + n - 8), calc = remat_checkpoint_checksum(b, n);
        if (stored != calc)
            return remat_fail(REMAT_ERR_FORMAT, "checksum mismatch (stored %016llx, computed %016llx): the file "
                              "is corrupt", (unsigned long long)stored, (unsigned long long)calc);
    }
    if ((st = check_fields(b, &z, b + CK_HEADER, &v->info))) { memset(v, 0, sizeof *v); return st; }
    const unsigned char *p = b + CK_HEADER + strings_bytes(&z);
    v->nparams = z.nparams;
    v->params = p;
    v->adam_m = p + 4 * z.nparams;
    v->adam_v = p + 8 * z.nparams;
    const unsigned char *arr[3] = { v->params, v->adam_m, v->adam_v };
    for (int a = 0; a < 3; a++)
        if ((st = check_floats(a, arr[a], z.nparams, 0))) { memset(v, 0, sizeof *v); return st; }
    return REMAT_OK;
}

/* ---- directory listing --------------------------------------------------------- */

/* "ckpt-<digits>.bin" -> 1 and *step; anything else -> 0. */
static int parse_ckpt_name(const char *name, uint64_t *step)
{
    if (strncmp(name, "ckpt-", 5)) return 0;
    const char *p = name + 5;
    uint64_t s = 0;
    int nd = 0;
    for (; *p >= '0' && *p <= '9'; p++, nd++) {
        if (nd >= 19) return 0;
        s = s * 10 + (uint64_t)(*p - '0');
    }
    if (!nd || strcmp(p, ".bin")) return 0;
    *step = s;
    return 1;
}

/* A save's temporary file -> its writer's pid, else 0: "ckpt-<digits>.bin.tmp.<pid>"
 * (remat_atomic_begin's name for ckpt-<digits>.bin), or the older form
 * "ckpt-<digits>.<pid>.tmp" that saves before the shared writer used. */
static long ckpt_tmp_pid(const char *name, const void *unused)
{
    (void)unused;
    if (strncmp(name, "ckpt-", 5)) return 0;
    const char *p = name + 5;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    if (!strncmp(p, ".bin.tmp.", 9)) return remat_tmp_suffix_pid(p + 4);
    if (*p++ != '.' || *p < '0' || *p > '9') return 0;
    long v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > 100000000) return 0;
        v = v * 10 + (*p - '0');
    }
    return strcmp(p, ".tmp") ? 0 : v;
}

typedef struct ck_entry {
    uint64_t step;
    char name[CK_NAME_MAX];
} ck_entry;

typedef struct ck_list {
    remat_mem mem;
    ck_entry *e;
    size_t n, cap;
} ck_list;

static int entry_cmp_desc(const void *a, const void *b)
{
    uint64_t x = ((const ck_entry *)a)->step, y = ((const ck_entry *)b)->step;
    if (x != y) return x < y ? 1 : -1;
    return strcmp(((const ck_entry *)a)->name, ((const ck_entry *)b)->name);
}

static void list_free(ck_list *l)
{
    remat_mem_free(&l->mem, REMAT_MEM_WORKSPACE, l->e, l->cap * sizeof *l->e);
    remat_mem_release(&l->mem);
    l->e = NULL;
    l->n = l->cap = 0;
}

/* The ckpt-*.bin files of dir, newest first.  REMAT_ERR_IO when dir cannot
 * be read. */
static remat_status list_ckpts(const char *dir, ck_list *l)
{
    memset(l, 0, sizeof *l);
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir(dir);
        if (!d) return remat_fail(REMAT_ERR_IO, "cannot read checkpoint directory '%s': %s", dir, strerror(errno));
        struct dirent *de;
        size_t n = 0;
        uint64_t step;
        while ((de = readdir(d)))
            if (parse_ckpt_name(de->d_name, &step) && strlen(de->d_name) < CK_NAME_MAX) {
                if (pass == 1 && n < l->cap) {
                    l->e[n].step = step;
                    memcpy(l->e[n].name, de->d_name, strlen(de->d_name) + 1);
                }
                n++;
            }
        closedir(d);
        if (pass == 0) {
            l->cap = n + 1;
            l->e = remat_mem_alloc(&l->mem, REMAT_MEM_WORKSPACE, l->cap * sizeof *l->e);
            if (!l->e) { l->cap = 0; return remat_fail(REMAT_ERR_NOMEM, "out of memory listing '%s'", dir); }
        } else {
            l->n = n < l->cap ? n : l->cap;
        }
    }
    qsort(l->e, l->n, sizeof *l->e, entry_cmp_desc);
    return REMAT_OK;
}

static remat_status join(char *out, size_t cap, const char *dir, const char *name)
{
    int k = snprintf(out, cap, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= cap)
        return remat_fail(REMAT_ERR_INVALID, "checkpoint directory path '%.200s...' is too long", dir);
    return REMAT_OK;
}

/* Creates dir when missing; checks that it is a directory. */
static remat_status ensure_dir(const char *dir)
{
    struct stat sb;
    if (!dir || !*dir) return remat_fail(REMAT_ERR_INVALID, "checkpoint directory is empty");
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return remat_fail(REMAT_ERR_IO, "checkpoint directory '%s' exists and is not a directory", dir);
        return REMAT_OK;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return remat_fail(REMAT_ERR_IO, "cannot create checkpoint directory '%s': %s", dir, strerror(errno));
    return REMAT_OK;
}

remat_status remat_checkpoint_prepare(const char *dir, int *count, uint64_t *newest_step)
{
    remat_status st;
    char probe[4200];
    if (count) *count = 0;
    if (newest_step) *newest_step = 0;
    if ((st = ensure_dir(dir))) return st;
    remat_sweep_tmps(dir, ckpt_tmp_pid, NULL);
    /* begin a save that is never committed: its temporary file is named like
     * any save's, so a kill right here leaves nothing a later run would keep */
    remat_atomic_file a;
    if ((st = join(probe, sizeof probe, dir, "ckpt-00000000.bin"))) return st;
    if ((st = remat_atomic_begin_swept(&a, probe))) {   /* swept just above */
        char why[512];
        snprintf(why, sizeof why, "%s", remat_errmsg());
        return remat_fail(st, "checkpoint directory '%s' is not writable: %s", dir, why);
    }
    remat_atomic_abort(&a);
    ck_list l;
    if ((st = list_ckpts(dir, &l))) return st;
    if (count) *count = (int)(l.n > INT_MAX ? INT_MAX : l.n);
    if (newest_step && l.n) *newest_step = l.e[0].step;
    list_free(&l);
    return REMAT_OK;
}

/* ---- reading a file, streamed ------------------------------------------------------ */

#define CK_CHUNK ((size_t)4 << 20)   /* bytes read into a model's buffers at a time */

typedef struct ck_reader {
    FILE *f;
    remat_hash h;
} ck_reader;

/* n bytes of the file into dst, hashed. */
static remat_status r_bytes(ck_reader *r, void *dst, size_t n)
{
    if (fread(dst, 1, n, r->f) != n)
        return remat_fail(REMAT_ERR_IO, "cannot read: %s", ferror(r->f) ? strerror(errno) : "the file shrank");
    remat_hash_update(&r->h, dst, n);
    return REMAT_OK;
}

/* Validates the checkpoint file at path, named for step, with the checks of
 * remat_checkpoint_parse and the same precedence among them (sizes, then
 * the checksum, then the fields, then the floats), reading the file once in
 * bounded pieces: the header, the strings, then the three float arrays --
 * straight into a new model's buffers, CK_CHUNK bytes at a time, when
 * model_out is not NULL and the fields check out, else through a 64 KiB
 * buffer.  So a resume holds the model's state and nothing more.  Fills *ci
 * (file and warning ""); *model_out gets a model with the file's config,
 * seed, parameters, AdamW moments and optimizer step (the caller installs
 * the optimizer settings and the policy).  *fatal is set when the failure
 * is not the file's (out of memory): then no older file should be tried.
 * par (may be NULL): the new model is set up for data parallelism before
 * its state is read, and only its slice of the AdamW moments is kept. */
typedef struct ck_par {
    remat_comm *comm;
    int micro_batch, zero;
} ck_par;

static remat_status read_ckpt(const char *path, uint64_t step, remat_checkpoint_info *ci, remat_model **model_out,
                              const ck_par *par, int *fatal)
{
    remat_status st, deferred = REMAT_OK;   /* deferred: a field or float error, reported after the checksum */
    char why[512] = "";
    unsigned char hdr[CK_HEADER], buf[1 << 16], trailer[8];
    remat_model *m = NULL;
    ck_reader r;
    ck_sizes z = { 0, 0, 0, 0, 0, 0, 0 };
    struct stat sb;
    *fatal = 0;
    memset(ci, 0, sizeof *ci);
    if (model_out) *model_out = NULL;
    if (!(r.f = fopen(path, "rb"))) return remat_fail(REMAT_ERR_IO, "cannot open: %s", strerror(errno));
    if (fstat(fileno(r.f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < 0) {
        st = remat_fail(REMAT_ERR_IO, "not a regular file");
        goto out;
    }
    uint64_t n = (uint64_t)sb.st_size;
    size_t have = n < CK_HEADER ? (size_t)n : CK_HEADER;
    if (fread(hdr, 1, have, r.f) != have) {
        st = remat_fail(REMAT_ERR_IO, "cannot read: %s", ferror(r.f) ? strerror(errno) : "the file shrank");
        goto out;
    }
    if ((st = check_sizes(hdr, n, &z))) goto out;
    remat_hash_init(&r.h, n - 8);
    remat_hash_update(&r.h, hdr, CK_HEADER);
    if ((st = r_bytes(&r, buf, (size_t)strings_bytes(&z)))) goto out;   /* at most 20 KiB */
    if (!(deferred = check_fields(hdr, &z, buf, ci)) && ci->step != step)
        deferred = remat_fail(REMAT_ERR_FORMAT, "it holds step %llu, its name says %llu", (unsigned long long)ci->step,
                              (unsigned long long)step);
    if (deferred) snprintf(why, sizeof why, "%s", remat_errmsg());
    if (!deferred && model_out) {
        if ((st = remat_model_create(&ci->cfg, ci->seed, &m))) { *fatal = 1; goto out; }
        if (par) {
            int b = par->micro_batch ? par->micro_batch : ci->micro_batch ? ci->micro_batch : ci->cfg.batch;
            if ((st = remat_model_set_parallel(m, par->comm, b, par->zero))) {
                snprintf(why, sizeof why, "%s", remat_model_error(m));
                st = remat_fail(st, "%s%s", why, par->micro_batch || !ci->micro_batch ? "" :
                                " (the checkpoint's micro-batch; --micro-batch chooses another, which changes "
                                "the bits of the sums)");
                *fatal = 1;
                goto out;
            }
        }
    }
    for (int a = 0; a < 3; a++) {
        float *dst = !m ? NULL : a == 0 ? m->params : a == 1 ? m->adam_m : m->adam_v;
        /* the elements [lo, hi) kept (dst[0] is element lo): the AdamW
         * moments of a rank's slice under ZeRO-1, else everything */
        uint64_t lo = dst && a ? m->optim_lo : 0, hi = !dst ? 0 : a ? m->optim_lo + m->optim_n : z.nparams;
        for (uint64_t i = 0; i < z.nparams;) {
            int inside = dst && i >= lo && i < hi;
            uint64_t lim = inside ? hi : dst && i < lo ? lo : z.nparams;
            size_t per = (inside ? CK_CHUNK : sizeof buf) / 4;
            size_t k = lim - i < per ? (size_t)(lim - i) : per;
            unsigned char *p = inside ? (unsigned char *)(dst + (i - lo)) : buf;
            if ((st = r_bytes(&r, p, 4 * k))) goto out;
            if (!deferred && (deferred = check_floats(a, p, k, i))) snprintf(why, sizeof why, "%s", remat_errmsg());
            if (inside) remat_le_f32_swap(dst + (i - lo), k);
            i += k;
        }
    }
    if (fread(trailer, 1, 8, r.f) != 8) {
        st = remat_fail(REMAT_ERR_IO, "cannot read: %s", ferror(r.f) ? strerror(errno) : "the file shrank");
        goto out;
    }
    uint64_t stored = remat_get_le64(trailer), calc = remat_hash_final(&r.h);
    if (stored != calc) {
        st = remat_fail(REMAT_ERR_FORMAT, "checksum mismatch (stored %016llx, computed %016llx): the file is corrupt",
                        (unsigned long long)stored, (unsigned long long)calc);
        goto out;
    }
    if (deferred) { st = remat_fail(deferred, "%s", why); goto out; }
    if (m) {
        m->t = ci->opt_steps;
        remat_model_touch_params(m);   /* written behind the model's back: its bf16 copy is stale */
        *model_out = m;
        m = NULL;
    }
out:
    fclose(r.f);
    remat_model_free(m);
    return st;
}

/* 1 when the checkpoint file at path (named for step) validates, streamed
 * (no allocation). */
static int file_checks_out(const char *path, uint64_t step)
{
    remat_checkpoint_info ci;
    int fatal;
    return read_ckpt(path, step, &ci, NULL, NULL, &fatal) == REMAT_OK;
}

/* ---- save -------------------------------------------------------------------------- */

typedef struct ck_writer {
    FILE *f;
    remat_hash h;
    int err;        /* errno of the first failed write */
} ck_writer;

static void w_bytes(ck_writer *w, const void *p, size_t n)
{
    if (w->err || !n) return;
    remat_hash_update(&w->h, p, n);
    errno = 0;
    if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
}

static void w_floats(ck_writer *w, const float *x, size_t n)
{
    if (remat_host_is_le()) { w_bytes(w, x, n * sizeof *x); return; }
    float buf[1024];
    while (n) {
        size_t k = n < sizeof buf / 4 ? n : sizeof buf / 4;
        memcpy(buf, x, 4 * k);
        remat_le_f32_swap(buf, k);
        w_bytes(w, buf, 4 * k);
        x += k;
        n -= k;
    }
}

/* ---- saving a data-parallel model: rank 0 writes, the others send ----------------------
 * Rank 0 announces whether it could begin the file (status broadcast),
 * then receives each AdamW moment slice by slice, in slice order, from
 * the slice's owner, 4 MiB at a time, and writes it; at the end it
 * broadcasts whether the file was committed.  The others send their
 * slices (ZeRO-1; without it rank 0 holds the whole state) in between.
 * Every rank's answer is rank 0's. */

/* comm of a model run over several ranks, else NULL */
static remat_comm *group_of(const remat_model *m)
{
    return m->dp.comm && m->dp.comm->size > 1 ? m->dp.comm : NULL;
}

/* Rank 0 tells the others st (an announcement of the begin or the end). */
static remat_status announce(remat_comm *c, remat_status st)
{
    int32_t v = (int32_t)st;
    return c ? remat_comm_bcast(c, &v, sizeof v, 0) : REMAT_OK;
}

/* One AdamW moment, gathered: its slices in order, each from its owner. */
static remat_status w_moment(ck_writer *w, const remat_model *m, const float *mine, float *chunk)
{
    const remat_dp_layout *l = &m->dp.l;
    remat_comm *c = group_of(m);
    if (!c || !l->zero) {
        w_floats(w, mine, m->nparams);
        return REMAT_OK;
    }
    for (int k = 0; k < l->R; k++) {
        int owner = remat_dp_bitrev(k, l->logR);
        size_t lo = remat_dp_slice_lo(l, k), n = remat_dp_slice_lo(l, k + 1) - lo;
        if (owner == c->rank) { w_floats(w, mine, n); continue; }
        for (size_t i = 0; i < n; i += CK_CHUNK / 4) {
            size_t q = n - i < CK_CHUNK / 4 ? n - i : CK_CHUNK / 4;
            remat_status st = remat_comm_recv(c, owner, chunk, q * sizeof(float));
            if (st) return st;
            w_floats(w, chunk, q);
        }
    }
    return REMAT_OK;
}

/* A rank other than 0: its part of a save. */
static remat_status save_follower(const remat_model *m)
{
    remat_comm *c = group_of(m);
    int32_t v;
    remat_status st;
    if ((st = remat_comm_bcast(c, &v, sizeof v, 0))) return st;
    if (v) return remat_fail((remat_status)v, "rank 0 could not write the checkpoint (its message says why)");
    if (m->dp.l.zero) {
        const float *arr[2] = { m->adam_m, m->adam_v };
        for (int a = 0; a < 2; a++)
            for (size_t i = 0; i < m->optim_n; i += CK_CHUNK / 4) {
                size_t q = m->optim_n - i < CK_CHUNK / 4 ? m->optim_n - i : CK_CHUNK / 4;
                if ((st = remat_comm_send(c, 0, arr[a] + i, q * sizeof(float)))) return st;
            }
    }
    if ((st = remat_comm_bcast(c, &v, sizeof v, 0))) return st;
    if (v) return remat_fail((remat_status)v, "rank 0 could not write the checkpoint (its message says why)");
    return REMAT_OK;
}

/* Writes the checkpoint to path atomically (remat_atomic_begin_swept/commit:
 * the caller has swept path's directory of dead saves' temporary files).
 * For a model over several ranks (rank 0 only) it announces the begin
 * (*announced: 1 when it could begin, 2 when not) and gathers the AdamW
 * slices. */
static remat_status write_file(const char *path, const remat_checkpoint_info *ci, const remat_model *m, int *announced)
{
    remat_status st, st2;
    remat_comm *c = group_of(m);
    uint64_t pl = strlen(ci->data), ql = strlen(ci->policy), vl = strlen(ci->val_data);
    uint64_t al = ci->cfg.arch == REMAT_ARCH_GPT2 ? 0 : CK_ARCH;
    uint64_t total = file_bytes(m->nparams, pl, ql, vl, al);
    if (!total) return remat_fail(REMAT_ERR_RANGE, "checkpoint size overflows");
    float *chunk = NULL;
    if (c && m->dp.l.zero && !(chunk = remat_malloc(CK_CHUNK)))
        return remat_fail(REMAT_ERR_NOMEM, "out of memory gathering the AdamW state");
    unsigned char hdr[CK_HEADER], trailer[8], zeros[8] = { 0 };
    encode_header(hdr, ci, m->nparams, total);
    remat_atomic_file a;
    st = remat_atomic_begin_swept(&a, path);
    *announced = st ? 2 : 1;
    if ((st2 = announce(c, st))) {
        if (!st) remat_atomic_abort(&a);
        free(chunk);
        return st2;
    }
    if (st) { free(chunk); return st; }
    ck_writer w = { a.f, { 0, { 0 }, 0 }, 0 };
    remat_hash_init(&w.h, total - 8);
    w_bytes(&w, hdr, sizeof hdr);
    w_bytes(&w, ci->data, pl);
    w_bytes(&w, ci->policy, ql);
    w_bytes(&w, ci->val_data, vl);
    unsigned char arch[CK_ARCH];
    encode_arch(arch, &ci->cfg);
    w_bytes(&w, arch, al);
    w_bytes(&w, zeros, pad8(pl + ql + vl + al) - (pl + ql + vl + al));
    w_floats(&w, m->params, m->nparams);
    if (!(st = w_moment(&w, m, m->adam_m, chunk))) st = w_moment(&w, m, m->adam_v, chunk);
    free(chunk);
    if (st) { remat_atomic_abort(&a); return st; }   /* an exchange failed: the job is ending */
    remat_put_le64(trailer, remat_hash_final(&w.h));
    w_bytes(&w, trailer, 8);
    if (!w.err) return remat_atomic_commit(&a);
    remat_atomic_abort(&a);
    return remat_fail(REMAT_ERR_IO, "cannot write '%s': %s", path, strerror(w.err));
}

/* After writing `step`: keep it and the newest older checkpoint that checks
 * out; delete older ones and corrupt newer ones. */
static void prune(const char *dir, uint64_t step, const char *keep_name)
{
    ck_list l;
    char path[4200];
    if (list_ckpts(dir, &l)) return;
    int kept_older = 0;
    for (size_t i = 0; i < l.n; i++) {
        const ck_entry *e = &l.e[i];
        if (join(path, sizeof path, dir, e->name)) continue;
        if (!strcmp(e->name, keep_name)) continue;
        if (e->step > step) {
            if (!file_checks_out(path, e->step)) unlink(path);
        } else if (e->step < step && !kept_older && file_checks_out(path, e->step)) {
            kept_older = 1;
        } else {
            unlink(path);
        }
    }
    list_free(&l);
}

remat_status remat_checkpoint_tidy(const char *dir, const remat_checkpoint_info *ci)
{
    if (!dir || !ci) return remat_fail(REMAT_ERR_INVALID, "remat_checkpoint_tidy: NULL dir or info");
    const char *slash = strrchr(ci->file, '/');
    const char *name = slash ? slash + 1 : ci->file;
    uint64_t step;
    if (!parse_ckpt_name(name, &step) || step != ci->step)
        return remat_fail(REMAT_ERR_INVALID, "remat_checkpoint_tidy: '%.300s' is not the checkpoint of step %llu", ci->file,
                          (unsigned long long)ci->step);
    ck_list l;
    remat_status st = list_ckpts(dir, &l);   /* only to report an unreadable dir */
    if (st) return st;
    list_free(&l);
    prune(dir, ci->step, name);
    return REMAT_OK;
}

/* An absolute form of a data path or pattern, so that a resume from another
 * directory finds it: realpath for a file, the working directory prefixed
 * to a relative glob pattern.  REMAT_ERR_INVALID when empty or too long. */
static remat_status abs_source(const char *path, char *out, size_t cap)
{
    char *abs = realpath(path, NULL), cwd[4096];
    int k;
    if (abs) k = snprintf(out, cap, "%s", abs);
    else if (path[0] == '/' || !getcwd(cwd, sizeof cwd)) k = snprintf(out, cap, "%s", path);
    else k = snprintf(out, cap, "%s/%s", cwd, path);
    free(abs);
    if (!*path || k < 0 || (size_t)k >= cap || (size_t)k > CK_MAX_PATH)
        return remat_fail(REMAT_ERR_INVALID, "data path '%.200s' is empty or longer than %u bytes", path, CK_MAX_PATH);
    return REMAT_OK;
}

remat_status remat_checkpoint_save(const remat_model *m, const remat_data *d, const char *data_path, uint64_t step,
                                   const char *dir)
{
    remat_status st;
    int announced = 0;   /* write_file's: 0 nothing said yet, 1 begun, 2 could not begin */
    if (!m || !d || !dir) return remat_fail(REMAT_ERR_INVALID, "remat_checkpoint_save: NULL model, data or dir");
    if (step < m->t || step > (uint64_t)INT64_MAX)
        return remat_fail(REMAT_ERR_INVALID, "checkpoint step %llu is below the model's %llu optimizer steps",
                          (unsigned long long)step, (unsigned long long)m->t);
    remat_comm *c = group_of(m);
    if (c && c->rank != 0) return save_follower(m);
    remat_checkpoint_info *ci = remat_calloc(1, sizeof *ci);
    if (!ci) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory saving a checkpoint"); goto out; }
    ci->step = step;
    ci->opt_steps = m->t;
    ci->seed = m->seed;
    ci->cfg = m->cfg;
    ci->opt = m->opt;
    ci->micro_batch = m->mcfg.batch != m->cfg.batch ? m->mcfg.batch : 0;
    for (int k = 0; k < 2; k++) {
        ci->data_tokens[k] = remat_data_tokens(d, k);
        ci->data_pos[k] = remat_data_position(d, k);
    }
    ci->data_hash = remat_data_hash(d);
    if (data_path && (st = abs_source(data_path, ci->data, sizeof ci->data))) goto out;
    const char *val = remat_data_val_path(d);
    if (val && (st = abs_source(val, ci->val_data, sizeof ci->val_data))) goto out;
    const char *pol = m->sched ? remat_schedule_policy(m->sched) : "";
    if (!pol || !strcmp(pol, "none")) pol = "";
    if (strlen(pol) > CK_MAX_POLICY) {
        st = remat_fail(REMAT_ERR_INVALID, "a policy longer than %u bytes cannot be checkpointed", CK_MAX_POLICY);
        goto out;
    }
    memcpy(ci->policy, pol, strlen(pol) + 1);

    if ((st = ensure_dir(dir))) goto out;
    remat_sweep_tmps(dir, ckpt_tmp_pid, NULL);   /* of killed saves of any step */
    char name[CK_NAME_MAX], final[4200];
    snprintf(name, sizeof name, "ckpt-%08llu.bin", (unsigned long long)step);
    if ((st = join(final, sizeof final, dir, name)) || (st = write_file(final, ci, m, &announced))) goto out;
    prune(dir, step, name);
out:
    free(ci);
    /* the followers wait for the begin when it never came (a failure before
     * the file), or for the end after a begun file; an exchange that failed
     * ends the job anyway */
    if (c && st != REMAT_ERR_COMM && announced != 2) {
        remat_status st2 = announce(c, st);
        if (st2) return st2;
    }
    return st;
}

/* ---- load -------------------------------------------------------------------------- */

/* Same file: equal strings, or both resolve to the same real path. */
static int same_path(const char *a, const char *b)
{
    char abs[4200];
    if (!strcmp(a, b) || (!abs_source(a, abs, sizeof abs) && !strcmp(abs, b))) return 1;
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb && !strcmp(ra, rb);
    free(ra);
    free(rb);
    return same;
}

/* A --data or --val-data given on resume (given, may be NULL) must be the
 * source the checkpoint recorded (recorded, NULL when none). */
static remat_status same_source(const remat_checkpoint_info *ci, const char *given, const char *recorded,
                                const char *flag, const char *none, const char *was)
{
    if (!given) return REMAT_OK;
    if (!recorded)
        return remat_fail(REMAT_ERR_INVALID, "%s was %s, not '%.200s'; resume without --%s", ci->file, none, given,
                          flag);
    if (!same_path(given, recorded))
        return remat_fail(REMAT_ERR_INVALID, "%s was %s '%.200s', not '%.200s'; resume with that %s (or without "
                          "--%s)", ci->file, was, recorded, given, flag, flag);
    return REMAT_OK;
}

static remat_status open_data(const remat_checkpoint_info *ci, const char *data_path, const char *val_path,
                              remat_data **out)
{
    remat_status st;
    remat_data *d = NULL;
    const char *path = ci->data[0] ? ci->data : NULL, *val = ci->val_data[0] ? ci->val_data : NULL;
    if ((st = same_source(ci, data_path, path, "data", "trained on the embedded task", "trained on")) ||
        (st = same_source(ci, val_path, val, "val-data", "trained without a validation set (its validation "
                          "split is cut from the data)", "validated on")))
        return st;
    if ((st = remat_data_open_val(path, val, ci->cfg.vocab, &d))) {
        char why[512];
        snprintf(why, sizeof why, "%s", remat_errmsg());
        return remat_fail(st, "the data of %s: %s", ci->file, why);
    }
    for (int k = 0; k < 2; k++)
        if (remat_data_tokens(d, k) != ci->data_tokens[k]) {
            st = remat_fail(REMAT_ERR_INVALID, "the data '%.200s' now has %zu %s tokens, %llu when %s was written: "
                            "it changed, so the run cannot continue exactly", path ? path : "embedded",
                            remat_data_tokens(d, k), k ? "validation" : "training",
                            (unsigned long long)ci->data_tokens[k], ci->file);
            goto out;
        }
    if (ci->data_hash && remat_data_hash(d) != ci->data_hash) {
        st = remat_fail(REMAT_ERR_INVALID, "the data '%.200s' has the same size but other contents than when %s was "
                        "written (hash %016llx, then %016llx): the run cannot continue exactly",
                        path ? path : "embedded", ci->file, (unsigned long long)remat_data_hash(d),
                        (unsigned long long)ci->data_hash);
        goto out;
    }
    for (int k = 0; k < 2; k++)
        if ((st = remat_data_seek(d, k, ci->data_pos[k]))) goto out;
    *out = d;
    d = NULL;
out:
    remat_data_free(d);
    return st;
}

/* Installs the optimizer settings and the policy of ci in m, read from it. */
static remat_status install_settings(remat_model *m, const remat_checkpoint_info *ci)
{
    remat_status st;
    if ((st = remat_model_set_optim(m, &ci->opt))) return st;
    if ((st = remat_model_set_policy(m, ci->policy[0] ? ci->policy : NULL))) {
        char why[512];
        snprintf(why, sizeof why, "%s", remat_errmsg());
        return remat_fail(st, "the policy of %s: %s", ci->file, why);
    }
    return REMAT_OK;
}

remat_status remat_checkpoint_load(const char *dir, const char *data_path, remat_model **model_out,
                                   remat_data **data_out, remat_checkpoint_info *info)
{
    return remat_checkpoint_load_parallel(dir, data_path, NULL, NULL, 0, -1, model_out, data_out, info);
}

remat_status remat_checkpoint_load_parallel(const char *dir, const char *data_path, const char *val_path,
                                            remat_comm *comm, int micro_batch, int zero, remat_model **model_out,
                                            remat_data **data_out, remat_checkpoint_info *info)
{
    ck_par par = { comm, micro_batch, zero };
    remat_status st;
    ck_list l;
    remat_checkpoint_info *ci = NULL;
    remat_model *m = NULL;
    remat_data *d = NULL;
    char first_bad[512] = "", path[4200];
    int nbad = 0, found = 0, fatal = 0;
    memset(&l, 0, sizeof l);
    if (model_out) *model_out = NULL;
    if (data_out) *data_out = NULL;
    if (!dir) return remat_fail(REMAT_ERR_INVALID, "remat_checkpoint_load: dir is NULL");
    if ((st = list_ckpts(dir, &l))) return st;
    if (!l.n) {
        st = remat_fail(REMAT_ERR_IO, "no checkpoint (ckpt-*.bin) in '%s'", dir);
        goto out;
    }
    ci = remat_calloc(1, sizeof *ci);
    if (!ci) { st = remat_fail(REMAT_ERR_NOMEM, "out of memory loading a checkpoint"); goto out; }
    for (size_t i = 0; i < l.n && !found; i++) {   /* newest first */
        if ((st = join(path, sizeof path, dir, l.e[i].name))) goto out;
        st = read_ckpt(path, l.e[i].step, ci, model_out ? &m : NULL, &par, &fatal);
        if (!st) { found = 1; break; }
        if (fatal) goto out;
        if (!nbad++) snprintf(first_bad, sizeof first_bad, "%.300s: %s", path, remat_errmsg());
    }
    if (!found) {
        st = remat_fail(REMAT_ERR_FORMAT, "no valid checkpoint in '%.200s': %s%s", dir, first_bad,
                        nbad > 1 ? " (and every older one is invalid too)" : "");
        goto out;
    }
    snprintf(ci->file, sizeof ci->file, "%.4000s", path);
    if (nbad)
        snprintf(ci->warning, sizeof ci->warning, "skipped %d newer checkpoint%s that did not validate "
                 "(%.500s); resumed from %.300s", nbad, nbad > 1 ? "s" : "", first_bad, path);
    if (model_out && (st = install_settings(m, ci))) goto out;
    if (data_out && (st = open_data(ci, data_path, val_path, &d))) goto out;
    if (info) *info = *ci;
    if (model_out) { *model_out = m; m = NULL; }
    if (data_out) { *data_out = d; d = NULL; }
    st = REMAT_OK;
out:
    list_free(&l);
    free(ci);
    remat_model_free(m);
    remat_data_free(d);
    return st;
}
