/*
 * cmd_export.c -- `remat export`: the weights of a training checkpoint as an
 * llm.c checkpoint or a safetensors file (remat_weights_save), and the shape
 * handling behind `remat train --init-from` (cli_init_shape).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"

typedef struct export_opts {
    const char *dir, *out;
    int format;                 /* remat_weights_format; AUTO: from out's name */
    remat_dtype dtype;
    int json;
    uint64_t shard;             /* --shard-size: hf's largest shard (0: Hugging Face's 5 GB) */
} export_opts;

static const cli_choice format_choices[] = {
    {"llmc", REMAT_WEIGHTS_LLMC, 0}, {"safetensors", REMAT_WEIGHTS_SAFETENSORS, 0}, {"hf", REMAT_WEIGHTS_HF, 0},
    {NULL, 0, 0},
};

#define O(field) offsetof(export_opts, field)
static const cli_flag flags[] = {
    {"--resume", "DIR", CLI_FLAG_STRING, O(dir), 0, 0, NULL, NULL, "checkpoint directory"},
    {"--out", "PATH", CLI_FLAG_STRING, O(out), 0, 0, NULL, NULL, "output file (a directory for --format hf)"},
    {"--format", "F", CLI_FLAG_CHOICE, O(format), 0, 0, format_choices, NULL,
     "llmc: llm.c's model checkpoint (train_gpt2.c, version 3; GPT-2 only);\n"
     "safetensors: one file, Hugging Face's names and layouts;\n"
     "hf: a Hugging Face model directory (config.json, model.safetensors or\n"
     "shards and model.safetensors.index.json), as save_pretrained writes it.\n"
     "Default: safetensors for *.safetensors, llmc for *.bin, hf for a\n"
     "directory (a name without '.', ending in '/', or one that exists)."},
    {"--shard-size", "SIZE", CLI_FLAG_BYTES, O(shard), 0, 0, NULL, NULL,
     "hf: the largest shard (default 5GB, Hugging Face's: decimal units\n"
     "KB MB GB or binary KiB MiB GiB)"},
    {"--dtype", "D", CLI_FLAG_CUSTOM, O(dtype), 0, 0, NULL, cli_parse_dtype,
     "fp32 (default: F32 tensors) or bf16 (safetensors BF16, rounded\n"
     "to nearest even; the training state stays fp32)"},
    CLI_FLAG_JSON(export_opts, json,
                  "one JSON object: {\"checkpoint\", \"step\", \"out\", \"format\", \"dtype\",\n"
                  "\"n_layer\", \"n_embd\", \"n_head\", \"vocab\", \"max_seq\"}"),
};
#undef O

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* a directory's name: one that ends in '/', is a directory already, or has
 * no '.' in its last component */
static int looks_like_dir(const char *p)
{
    struct stat sb;
    const char *base = strrchr(p, '/');
    if (ends_with(p, "/") || (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))) return 1;
    return !strchr(base ? base + 1 : p, '.');
}

int cmd_export(int argc, char **argv)
{
    export_opts o = { NULL, NULL, REMAT_WEIGHTS_AUTO, REMAT_DTYPE_FP32, 0, 0 };
    cli_flag_group groups[] = { { NULL, CLI_FLAGS(flags), &o } };
    cli_command cmd = {
        "export",
        "usage: remat export --resume DIR --out PATH [--format llmc|safetensors|hf] [--dtype fp32|bf16] [--json]\n\n"
        "Writes the parameters of the newest valid training checkpoint in DIR (see\n"
        "'remat train --save') to PATH, atomically: a file is either left as it was or\n"
        "holds the whole export (a directory's files each so).\n\n",
        "Each loads with 'remat train --init-from PATH'.\n", groups, 1, NULL, NULL, { 0 },
    };
    int r = cli_parse(&cmd, argc, argv);
    if (r <= 0) return r < 0 ? 2 : 0;
    const char *dir = o.dir, *out = o.out;
    if (!dir || !out) return cli_usage_error("export", "needs --resume DIR and --out FILE");
    remat_weights_format fmt = (remat_weights_format)o.format;
    if (fmt == REMAT_WEIGHTS_AUTO)
        fmt = ends_with(out, ".safetensors") ? REMAT_WEIGHTS_SAFETENSORS : ends_with(out, ".bin") ? REMAT_WEIGHTS_LLMC
              : looks_like_dir(out) ? REMAT_WEIGHTS_HF : REMAT_WEIGHTS_AUTO;
    if (fmt == REMAT_WEIGHTS_AUTO)
        return cli_usage_error("export", "--format llmc, safetensors or hf is needed for '%s'", out);
    if (o.shard && fmt != REMAT_WEIGHTS_HF) return cli_usage_error("export", "--shard-size is for --format hf");
    const char *format = fmt == REMAT_WEIGHTS_LLMC ? "llmc" : fmt == REMAT_WEIGHTS_HF ? "hf" : "safetensors";
    const char *dtype = cli_dtype_name(o.dtype);
    remat_dtype dt = o.dtype;
    int json = o.json;
    if (dt == REMAT_DTYPE_BF16 && fmt == REMAT_WEIGHTS_LLMC)
        return cli_usage_error("export", "--dtype bf16 needs --format safetensors (llm.c files are written as float32)");

    remat_model *m = NULL;
    remat_checkpoint_info *ci = calloc(1, sizeof *ci);
    int rc = 1;
    if (!ci) { cli_error("out of memory"); goto done; }
    remat_status st = remat_checkpoint_load(dir, NULL, &m, NULL, ci);
    if (st) {
        rc = cli_input_error(st, "cannot export from '%s': %s", dir, remat_errmsg());
        goto done;
    }
    if (ci->warning[0]) fprintf(stderr, "remat: warning: %s\n", ci->warning);
    if (fmt == REMAT_WEIGHTS_HF ? remat_weights_save_hf(m, out, dt, o.shard) : remat_weights_save_as(m, out, fmt, dt)) {
        cli_error("%s", remat_errmsg());
        goto done;
    }
    const remat_config *c = remat_model_config(m);
    if (json) {
        remat_jsonw *w = cli_json_open(stdout, REMAT_JSONW_SPACED);
        remat_jsonw_object(w, NULL);
        remat_jsonw_str(w, "checkpoint", ci->file);
        remat_jsonw_uint(w, "step", ci->step);
        remat_jsonw_str(w, "out", out);
        remat_jsonw_str(w, "format", format);
        remat_jsonw_str(w, "dtype", dtype);
        remat_jsonw_int(w, "n_layer", c->n_layer);
        remat_jsonw_int(w, "n_embd", c->n_embd);
        remat_jsonw_int(w, "n_head", c->n_head);
        cli_json_arch(w, c);
        remat_jsonw_int(w, "vocab", c->vocab);
        remat_jsonw_int(w, "max_seq", c->max_seq);
        remat_jsonw_end(w);
        rc = cli_json_close(w);
        goto done;
    }
    printf("exported %s (step %llu: %d layers, dim %d, %d heads, vocab %d, max_seq %d) to %s (%s, %s)\n", ci->file,
           (unsigned long long)ci->step, c->n_layer, c->n_embd, c->n_head, c->vocab, c->max_seq, out, format, dtype);
    rc = 0;
done:
    remat_model_free(m);
    free(ci);
    return rc;
}

/* The model's shape from a weights file or directory: what the file holds
 * decides (a flag that contradicts it is refused), what it does not hold
 * comes from the flags (a bare safetensors file has no heads unless remat
 * wrote it; an llm.c file and GPT-2 safetensors no architecture fields). */
int cli_init_shape(const char *path, const remat_config *given, remat_config *c)
{
    remat_config f;
    remat_weights_format fmt;
    memset(&f, 0, sizeof f);
    f.n_head = given->n_head > 0 ? given->n_head : 0;   /* solves KV and hs where the file holds no heads */
    remat_status st = remat_weights_probe(path, &f, &fmt);
    if (st) return cli_input_error(st, "--init-from: %s", remat_errmsg());
    int hf = fmt == REMAT_WEIGHTS_HF;
    struct { const char *flag; int given, have; int *dst; } shape[] = {
        {"--layers", given->n_layer, f.n_layer, &c->n_layer}, {"--dim", given->n_embd, f.n_embd, &c->n_embd},
        {"--vocab", given->vocab, f.vocab, &c->vocab}, {"--max-seq", given->max_seq, f.max_seq, &c->max_seq},
        {"--heads", given->n_head, f.n_head, &c->n_head}, {"--kv-heads", given->n_kv_head, f.n_kv_head, &c->n_kv_head},
        {"--ffn-dim", given->ffn_dim, f.ffn_dim, &c->ffn_dim}, {"--head-dim", given->head_dim, f.head_dim, &c->head_dim},
    };
    if (given->arch != (remat_arch)-1 && given->arch != f.arch) {
        cli_error("--arch %s contradicts '%s' (%s); the architecture comes from the weights, drop the flag",
                  remat_arch_name(given->arch), path, remat_arch_name(f.arch));
        return 2;
    }
    c->arch = f.arch;
    /* Llama has no position table (RoPE): the positions the weights were
     * configured for (max_position_embeddings) bound nothing the weights
     * hold, so a longer run goes ahead, with a note; GPT-2's wpe has that
     * many rows */
    int rope = f.arch == REMAT_ARCH_LLAMA;
    for (size_t k = 0; k < sizeof shape / sizeof shape[0]; k++) {
        if (rope && shape[k].dst == &c->max_seq && shape[k].given > shape[k].have) {
            if (given->seq == -1 || given->seq <= shape[k].have)   /* else the --seq note below says it */
                fprintf(stderr, "remat: note: a Llama has no position table (RoPE): --max-seq %d is not needed for a "
                        "--seq past the %d positions '%s' was configured for, and changes nothing at --seq %d\n",
                        shape[k].given, shape[k].have, path, given->seq == -1 ? c->seq : given->seq);
            *shape[k].dst = shape[k].have;   /* the run's seq raises it where it passes (below) */
            continue;
        }
        if (shape[k].have && shape[k].given != -1 && shape[k].given != shape[k].have) {
            cli_error("%s %d contradicts '%s' (%d); the model's shape comes from the weights, drop the flag",
                      shape[k].flag, shape[k].given, path, shape[k].have);
            return 2;
        }
        if (shape[k].have) *shape[k].dst = shape[k].have;
    }
    if (f.arch == REMAT_ARCH_LLAMA) {   /* the weights say whether the head is tied */
        if (given->tie_embeddings == 1 && !f.tie_embeddings) {
            cli_error("--tie-embeddings contradicts '%s', which has its own lm_head; drop the flag", path);
            return 2;
        }
        c->tie_embeddings = f.tie_embeddings;
    }
    if (hf) {   /* config.json's numbers decide too */
        struct { const char *flag; double given, have; double *dst; } d[] = {
            {"--rope-theta", given->rope_theta, f.rope_theta, &c->rope_theta},
            {"--norm-eps", given->norm_eps, f.norm_eps, &c->norm_eps},
        };
        for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) {
            if (d[k].given == d[k].given && d[k].have && d[k].given != d[k].have) {   /* not given: NaN */
                cli_error("%s %g contradicts '%s' (%g); it comes from config.json, drop the flag", d[k].flag,
                          d[k].given, path, d[k].have);
                return 2;
            }
            *d[k].dst = d[k].have;
        }
        if (given->rope_scaling.type != (remat_rope_type)-1 &&
            memcmp(&given->rope_scaling, &f.rope_scaling, sizeof f.rope_scaling)) {
            cli_error("--rope-scaling contradicts '%s'; it comes from config.json, drop the flag", path);
            return 2;
        }
        c->rope_scaling = f.rope_scaling;
    }
    if (!f.max_seq && given->max_seq == -1) c->max_seq = c->seq > c->max_seq ? c->seq : c->max_seq;
    if (!f.n_head && given->n_head == -1) {
        c->n_head = f.arch == REMAT_ARCH_GPT2 && f.n_embd % 64 == 0 ? f.n_embd / 64 : 0;
        if (!c->n_head) {
            cli_error("'%s' does not record the number of heads%s: give --heads", path,
                      f.arch == REMAT_ARCH_GPT2 ? " and its width is not a multiple of 64" : "");
            return 2;
        }
    }
    if (c->seq > c->max_seq && rope && given->seq != -1) {
        fprintf(stderr, "remat: note: --seq %d is past the %d positions '%s' was configured for; a Llama has no "
                "position table (RoPE), so the run goes ahead\n", c->seq, c->max_seq, path);
        c->max_seq = given->max_seq > c->seq ? given->max_seq : c->seq;
    }
    if (c->seq > c->max_seq) {
        if (given->seq != -1) {
            cli_error("--seq %d is longer than the %d positions of '%s'", c->seq, c->max_seq, path);
            return 2;
        }
        c->seq = c->max_seq;
    }
    return 0;
}
