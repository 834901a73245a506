/*
 * io.h -- internals of remat's file formats (src/io/): the parse-from-memory
 * entry points the fuzz targets (fuzz/) and the tests use.  Not API; the
 * public side of each format is in remat.h.
 */
#ifndef REMAT_IO_H
#define REMAT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "remat.h"

/* ---- weights: llm.c checkpoints and safetensors (weights.c, llmc.c, safetensors.c) */

/* The largest safetensors JSON header accepted (the reference implementation's
 * limit). */
#define REMAT_SAFETENSORS_MAX_HEADER (100u << 20)

/* Parse a whole llm.c checkpoint or safetensors file held in memory (n bytes,
 * untrusted).  On success *shape holds the file's architecture (arch,
 * n_layer, n_embd, n_head, vocab, max_seq, and Llama's n_kv_head, head_dim,
 * ffn_dim, tie_embeddings; batch = seq = 1, dropout 0), and *params,
 * malloc'd (the caller free()s it), holds remat_config_num_params(shape)
 * floats in remat's layout (padded vocabulary rows zero).  n_head for a
 * safetensors file that does not record it: n_head_hint when > 0, else
 * C/64; a Llama file's max_seq (no shape holds it) is 1.  On failure
 * *params is NULL and the status is REMAT_ERR_FORMAT (or NOMEM, or INVALID
 * when the heads cannot be guessed) with a message. */
remat_status remat_llmc_parse(const void *buf, size_t n, remat_config *shape, float **params);
remat_status remat_safetensors_parse(const void *buf, size_t n, int n_head_hint, remat_config *shape,
                                     float **params);

/* Writes params (remat's layout for shape) to f in format (LLMC or
 * SAFETENSORS) with elements of dtype (bf16: safetensors only).
 * REMAT_ERR_IO when a write fails. */
remat_status remat_weights_write(FILE *f, const remat_config *shape, const float *params,
                                 remat_weights_format format, remat_dtype dtype);

/* ---- Hugging Face directories: config.json and the index (hfdir.c) ------- */

/* Parses a config.json held in memory (n bytes, untrusted) into *out: the
 * architecture and every size (batch = seq = 1), transformers' defaults for
 * absent keys, validated as a config.  REMAT_ERR_FORMAT (NOMEM) with a
 * one-line message that starts with src. */
remat_status remat_hf_config_parse(const void *buf, size_t n, const char *src, remat_config *out);
/* The same from the file path (config.json itself, not its directory). */
remat_status remat_hf_config_read(const char *path, remat_config *out);
/* config.json for config c with tensors of dtype dt: *text is malloc'd
 * JSON (free() it) that remat_hf_config_parse reads back as c's
 * architecture, every number exactly. */
remat_status remat_hf_config_dump(const remat_config *c, remat_dtype dt, char **text);

/* model.safetensors.index.json: its weight_map, tensor[i] in
 * shard[in[i]]; shards (distinct file names) in name order, tensors by name
 * within a shard; metadata.total_size when has_total. */
typedef struct remat_hf_index {
    char **shard;
    int nshard;
    char **tensor;
    int *in;
    size_t n;
    int has_total;
    uint64_t total_size;
} remat_hf_index;
/* Parses an index held in memory (untrusted): a non-empty weight_map of
 * shard file names (no '/', not starting with '.'), duplicate keys refused.
 * On failure *out holds nothing.  REMAT_ERR_FORMAT (NOMEM) with a message. */
remat_status remat_hf_index_parse(const void *buf, size_t n, const char *src, remat_hf_index *out);
/* The index as save_pretrained writes it (sorted keys, indent 2): *text
 * malloc'd, free() it. */
remat_status remat_hf_index_dump(const remat_hf_index *ix, char **text);
void remat_hf_index_clear(remat_hf_index *ix);

/* ---- training checkpoints (checkpoint.c) ------------------------------------ */

/* A parsed checkpoint.  info holds every header field (info.file and
 * info.warning are left ""); the three arrays point into the parsed buffer
 * and hold nparams little-endian float32 each. */
typedef struct remat_ckpt_view {
    remat_checkpoint_info info;
    uint64_t nparams;
    const unsigned char *params, *adam_m, *adam_v;
} remat_ckpt_view;

/* Skip the checksum (fuzz targets: reach the field checks behind it). */
#define REMAT_CKPT_NO_CHECKSUM 1

/* Parses and validates a whole checkpoint file held in memory (n bytes,
 * untrusted): magic, version, sizes (overflow-checked, against n), checksum,
 * config (remat_config_check), parameter count, optimizer settings, data
 * positions, strings, and that every float is finite (AdamW v >= 0).  Never
 * allocates and never reads outside buf[0, n).  REMAT_ERR_FORMAT (or
 * REMAT_ERR_RANGE for a config whose sizes overflow) with a message. */
remat_status remat_checkpoint_parse(const void *buf, size_t n, int flags, remat_ckpt_view *out);
/* The checksum of a checkpoint of n >= 8 bytes: the 64-bit hash of its first
 * n - 8 bytes (remat_hash_bytes's function, fed little-endian words). */
uint64_t remat_checkpoint_checksum(const void *buf, size_t n);
/* Rewrites the trailing checksum of a checkpoint held in memory, so tests and
 * fuzz seeds can edit a field and still pass the checksum. */
void remat_checkpoint_seal(void *buf, size_t n);

/* ---- tables read from files (tablefile.c) ----------------------------------- */

/* A table file as read: every key (absent optional ones as their defaults),
 * checked: version 1, 2 or 3 (remat.h, "tables read from files"), values in
 * range; in version 1 every block the same as block 0 (times aside) and the
 * chain's input the size of a block's output. */
typedef struct remat_tabfile_saved { uint64_t bytes; int cheap; } remat_tabfile_saved;
typedef struct remat_tabfile_block {
    remat_tabfile_saved *saved;
    size_t nsaved;
    uint64_t output_bytes;
    double forward_ms, backward_ms, cheap_forward_ms;
    uint64_t work_bytes;            /* version 3: what its backward allocates for a while */
} remat_tabfile_block;
/* version 3's "contexts": a tensor the blocks take besides their input that only checkpoints hold */
typedef struct remat_tabfile_context {
    uint64_t bytes;
    int made_by;                    /* the block (plan numbering) that makes it, -1 before the first */
    int *blocks, nblocks;           /* the blocks (plan numbering) that take it, increasing */
} remat_tabfile_context;
typedef struct remat_tabfile_chain {
    char *name;                     /* NULL for the one chain of the top level */
    int *reads;                     /* indices of the earlier chains it reads (nreads) */
    int nreads;
    uint64_t input_bytes, input_saved;
    int input_kept;
    double input_fwd, input_bwd;
    remat_tabfile_block *block;
    int nblock;
    uint64_t head_saved;
    uint64_t head_output;           /* head.output_bytes as given (version 2; 0: absent) */
    int head_keeps_input;
    double head_fwd, head_bwd;
    uint64_t input_work, head_work; /* version 3: input.work_bytes, head.work_bytes */
    uint64_t input_live;            /* version 3: input.grad_live_bytes */
} remat_tabfile_chain;
typedef struct remat_tabfile {
    int version;                    /* 1, 2 or 3 */
    int chains_key;                 /* 1: the chains were given as "chains" (version 2) */
    char *name, *source, *device;   /* NULL when absent */
    int selective;
    remat_tabfile_chain *chain;     /* nchain >= 1, in forward order */
    int nchain;
    uint64_t params_bytes, grads_bytes, optimizer_bytes, context_bytes, call_bytes;
    double optimizer_ms;
    int has_work;                   /* version 3: a key of the step's measured bytes was given (work_bytes,
                                       grad_live_bytes, optimizer_work_bytes, inputs_bytes) */
    uint64_t optimizer_work;        /* version 3: optimizer_work_bytes */
    uint64_t inputs_bytes;          /* version 3: inputs_bytes */
    remat_tabfile_context *ctx;     /* version 3: "contexts" (nctx) */
    int nctx;
} remat_tabfile;
/* Parses a table held in memory (n bytes, untrusted; src names it in
 * messages).  REMAT_ERR_FORMAT (NOMEM) with a one-line message; *out then
 * holds nothing. */
remat_status remat_tabfile_parse(const void *buf, size_t n, const char *src, remat_tabfile *out);
/* t as JSON that parses back to t, every number exactly: *text malloc'd. */
remat_status remat_tabfile_dump(const remat_tabfile *t, char **text);
void remat_tabfile_clear(remat_tabfile *t);
/* 1 when t is one chain of identical blocks (times aside) whose input is a
 * block's output: the chain version 1 describes; else 0 with why[] the
 * first difference (or the second chain). */
int remat_tabfile_uniform(const remat_tabfile *t, char *why, size_t n);
/* The numbers of t's table (tablefile.c says what each becomes): several
 * chains, or one whose blocks differ, as one chain of blocks with their own
 * numbers (s->per, and the chains' names: free them with
 * remat_tabfile_spec_clear). */
struct remat_table_spec;
remat_status remat_tabfile_spec(const remat_tabfile *t, struct remat_table_spec *s);
void remat_tabfile_spec_clear(struct remat_table_spec *s);

/* ---- trace files (tracefile.c) ---------------------------------------------- */

struct remat_run_times;
/* Parses a trace file held in memory (n bytes, untrusted; what
 * remat_trace_save writes) into the run times of its completed steps, with
 * the config, CPU and thread count it records.  REMAT_ERR_FORMAT with a
 * message saying what is wrong. */
remat_status remat_trace_parse(const void *buf, size_t n, struct remat_run_times *out);

#endif
