/*
 * llmc.c -- llm.c's model checkpoint (train_gpt2.c, gpt2_build_from_checkpoint),
 * read into a layout and written (the shared parts are in weights.c).
 *
 * 256 little-endian int32
 *   [0] 20240326  [1] 3 (fp32, padded vocab)  [2] maxT  [3] V  [4] L  [5] NH
 *   [6] C  [7] Vp, the rest 0; then the 16 tensors in llm.c order, float32,
 *   wte with Vp rows.  The file is exactly 1024 + 4 * nparams(Vp) bytes.
 *   remat pads V to a multiple of 64 and llm.c's scripts to 128: any file
 *   Vp >= V loads, keeping rows [0, V) (the others are never read).
 */
#include <stdio.h>
#include <string.h>
#include "../core/core.h"
#include "../core/endian.h"
#include "weights.h"

#define LLMC_VERSION 3
#define LLMC_HEADER_INTS 256
#define LLMC_HEADER_BYTES (LLMC_HEADER_INTS * 4)

remat_status remat_llmc_config(const remat_wlayout *ly, const char *name, remat_config *out)
{
    remat_config c = ly->shape;   /* an llm.c header holds every size */
    c.batch = 1;
    c.seq = 1;
    c.dropout = 0.0f;
    remat_status st = remat_config_check(&c);
    if (st) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", remat_errmsg());
        return remat_fail(REMAT_ERR_FORMAT, "%s: the model it describes is invalid: %s", name, msg);
    }
    *out = c;
    return REMAT_OK;
}

remat_status remat_llmc_layout(const remat_wsrc *s, remat_wlayout *ly)
{
    unsigned char hb[LLMC_HEADER_BYTES];
    memset(ly, 0, sizeof *ly);
    if (s->size < LLMC_HEADER_BYTES)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, shorter than the %d-byte llm.c header; the file is "
                          "truncated", s->name, (unsigned long long)s->size, LLMC_HEADER_BYTES);
    remat_status st = remat_wsrc_read(s, 0, hb, sizeof hb);
    if (st) return st;
    int32_t h[8];
    for (int i = 0; i < 8; i++) h[i] = (int32_t)remat_get_le32(hb + 4 * i);
    if (h[0] != REMAT_LLMC_MAGIC)
        return remat_fail(REMAT_ERR_FORMAT, "%s: bad magic %d, expected %d (an llm.c model checkpoint)", s->name,
                          (int)h[0], REMAT_LLMC_MAGIC);
    if (h[1] == 5)   /* llm.c's train_gpt2.cu writes its bfloat16 weights as version 5 */
        return remat_fail(REMAT_ERR_FORMAT, "%s: llm.c checkpoint version 5 holds bfloat16 weights, and llm.c files "
                          "are read as version 3 (float32); export the model as safetensors (BF16 is read there)",
                          s->name);
    if (h[1] != LLMC_VERSION)
        return remat_fail(REMAT_ERR_FORMAT, "%s: llm.c checkpoint version %d; only version 3 (float32, padded "
                          "vocabulary) is supported", s->name, (int)h[1]);
    int maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vpf = h[7];
    if (maxT < 1 || V < REMAT_MIN_VOCAB || L < 1 || NH < 1 || C < 1 || Vpf < V || Vpf > REMAT_MAX_VOCAB + 64)
        return remat_fail(REMAT_ERR_FORMAT, "%s: corrupt llm.c header: maxT %d, V %d, L %d, NH %d, C %d, "
                          "padded V %d", s->name, maxT, V, L, NH, C, Vpf);
    ly->format = REMAT_WEIGHTS_LLMC;
    ly->shape.n_layer = L;
    ly->shape.n_embd = C;
    ly->shape.n_head = NH;
    ly->shape.vocab = V;
    ly->shape.max_seq = maxT;
    remat_config c;
    if ((st = remat_llmc_config(ly, s->name, &c))) return st;
    /* the file's parameter count, with its own padding */
    uint64_t np_remat = remat_config_num_params(&c);
    uint64_t Vp = (uint64_t)remat_config_padded_vocab(&c);
    int ok = 1;
    uint64_t np_file = remat_add(np_remat - Vp * (uint64_t)C, remat_mul((uint64_t)Vpf, (uint64_t)C, &ok), &ok);
    uint64_t expect = remat_add(LLMC_HEADER_BYTES, remat_mul(np_file, 4, &ok), &ok);
    if (!ok || s->size != expect)
        return remat_fail(REMAT_ERR_FORMAT, "%s: %llu bytes, expected %llu (header + %llu float32 parameters of "
                          "L %d, C %d, V %d, maxT %d): the file is %s", s->name, (unsigned long long)s->size,
                          (unsigned long long)expect, (unsigned long long)np_file, L, C, V, maxT,
                          s->size < expect ? "truncated" : "followed by extra bytes");
    ly->p = remat_calloc(2, sizeof *ly->p);
    if (!ly->p) return remat_fail(REMAT_ERR_NOMEM, "out of memory reading %s", s->name);
    ly->np = 2;
    /* wte: the first V of the file's Vpf rows; then everything else, whose
     * layout is the same in both */
    ly->p[0] = (remat_wpiece){ LLMC_HEADER_BYTES, 0, (size_t)V, (size_t)C, 0, 0, 0 };
    ly->p[1] = (remat_wpiece){ LLMC_HEADER_BYTES + (uint64_t)Vpf * C * 4, (size_t)(Vp * C), (size_t)(np_remat - Vp * C),
                         1, 0, 0, 0 };
    return REMAT_OK;
}

remat_status remat_llmc_write(FILE *f, const remat_config *c, const float *params)
{
    unsigned char hb[LLMC_HEADER_BYTES];
    memset(hb, 0, sizeof hb);
    int32_t h[8] = { REMAT_LLMC_MAGIC, LLMC_VERSION, c->max_seq, c->vocab, c->n_layer, c->n_head, c->n_embd,
                     remat_config_padded_vocab(c) };
    for (int i = 0; i < 8; i++) remat_put_le32(hb + 4 * i, (uint32_t)h[i]);
    if (fwrite(hb, 1, sizeof hb, f) != sizeof hb) return REMAT_ERR_IO;
    size_t n = (size_t)remat_config_num_params(c);
    if (remat_host_is_le()) return fwrite(params, sizeof(float), n, f) == n ? REMAT_OK : REMAT_ERR_IO;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4];
        remat_put_lef32(b, params[i]);
        if (fwrite(b, 1, 4, f) != 4) return REMAT_ERR_IO;
    }
    return REMAT_OK;
}
