/*
 * cmd_export.c -- `remat export`: the weights of a training checkpoint as an
 * llm.c checkpoint or a safetensors file (remat_weights_save), and the shape
 * handling behind `remat train --init-from` (cli_init_shape).
 */
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static void help(void)
{
    printf(
"usage: remat export --resume DIR --out FILE [--format llmc|safetensors] [--dtype fp32|bf16] [--json]\n\n"
"Writes the parameters of the newest valid training checkpoint in DIR (see\n"
"'remat train --save') to FILE, atomically: FILE is either left as it was or\n"
"holds the whole export.\n\n"
"  --resume DIR      checkpoint directory\n"
"  --out FILE        output file\n"
"  --format F        llmc: llm.c's model checkpoint (train_gpt2.c, version 3);\n"
"                    safetensors: Hugging Face GPT-2 names and layouts.\n"
"                    Default: safetensors for *.safetensors, llmc for *.bin.\n"
"  --dtype D         fp32 (default: F32 tensors) or bf16 (safetensors BF16, rounded\n"
"                    to nearest even; the training state stays fp32)\n"
"  --json            one JSON object: {\"checkpoint\", \"step\", \"out\", \"format\", \"dtype\",\n"
"                    \"n_layer\", \"n_embd\", \"n_head\", \"vocab\", \"max_seq\"}\n"
"Either file loads with 'remat train --init-from FILE'.\n");
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

int cmd_export(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL, *format = NULL, *dtype = "fp32";
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) { help(); return 0; }
        if (!strcmp(f, "--resume")) { if (!(dir = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(f, "--out")) { if (!(out = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(f, "--format")) { if (!(format = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(f, "--dtype")) { if (!(dtype = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(f, "--json")) json = 1;
        else return cli_usage_error("export", "unknown flag '%s'", f);
    }
    if (!dir || !out) return cli_usage_error("export", "needs --resume DIR and --out FILE");
    remat_weights_format fmt;
    if (!format) format = ends_with(out, ".safetensors") ? "safetensors" : ends_with(out, ".bin") ? "llmc" : NULL;
    if (!format) return cli_usage_error("export", "--format llmc or safetensors is needed for '%s'", out);
    if (!strcmp(format, "llmc")) fmt = REMAT_WEIGHTS_LLMC;
    else if (!strcmp(format, "safetensors")) fmt = REMAT_WEIGHTS_SAFETENSORS;
    else return cli_usage_error("export", "--format expects llmc or safetensors, got '%s'", format);
    remat_dtype dt;
    if (!cli_dtype_parse(dtype, strlen(dtype), &dt))
        return cli_usage_error("export", "--dtype expects fp32 or bf16, got '%s'", dtype);
    if (dt == REMAT_DTYPE_BF16 && fmt == REMAT_WEIGHTS_LLMC)
        return cli_usage_error("export", "--dtype bf16 needs --format safetensors (llm.c files are written as float32)");

    remat_model *m = NULL;
    remat_checkpoint_info *ci = calloc(1, sizeof *ci);
    int rc = 1;
    if (!ci) { cli_error("out of memory"); goto done; }
    if (remat_checkpoint_load(dir, NULL, &m, NULL, ci)) {
        cli_error("cannot export from '%s': %s", dir, remat_errmsg());
        goto done;
    }
    if (ci->warning[0]) fprintf(stderr, "remat: warning: %s\n", ci->warning);
    if (remat_weights_save_as(m, out, fmt, dt)) { cli_error("%s", remat_errmsg()); goto done; }
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

int cli_init_shape(const char *path, const remat_config *given, remat_config *c)
{
    remat_config f;
    memset(&f, 0, sizeof f);
    if (remat_weights_probe(path, &f, NULL)) { cli_error("--init-from: %s", remat_errmsg()); return 1; }
    struct { const char *flag; int given, have; } shape[] = {
        {"--layers", given->n_layer, f.n_layer}, {"--dim", given->n_embd, f.n_embd},
        {"--vocab", given->vocab, f.vocab}, {"--max-seq", given->max_seq, f.max_seq},
        {"--heads", given->n_head, f.n_head ? f.n_head : given->n_head},
    };
    for (size_t k = 0; k < sizeof shape / sizeof shape[0]; k++)
        if (shape[k].given != -1 && shape[k].given != shape[k].have) {
            cli_error("%s %d contradicts '%s' (%d); the model's shape comes from the weights file, drop the flag",
                      shape[k].flag, shape[k].given, path, shape[k].have);
            return 2;
        }
    c->n_layer = f.n_layer;
    c->n_embd = f.n_embd;
    c->vocab = f.vocab;
    c->max_seq = f.max_seq;
    c->n_head = f.n_head ? f.n_head : given->n_head != -1 ? given->n_head : f.n_embd % 64 == 0 ? f.n_embd / 64 : 0;
    if (!c->n_head) {
        cli_error("'%s' does not record the number of heads and its width %d is not a multiple of 64: give --heads",
                  path, f.n_embd);
        return 2;
    }
    if (c->seq > f.max_seq) {
        if (given->seq != -1) {
            cli_error("--seq %d is longer than the %d positions of '%s'", c->seq, f.max_seq, path);
            return 2;
        }
        c->seq = f.max_seq;
    }
    return 0;
}
