/*
 * args.c -- strict flag parsing and small formatting helpers for the CLI.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli.h"

void (*cli_error_hook)(void);
const char *cli_error_tag = "";
static int defer;
static char deferred[1024];

void cli_defer_errors(int on)
{
    defer = on;
    if (on) deferred[0] = 0;
}
const char *cli_deferred_error(void) { return deferred; }

/* the message, kept (the first one only) when deferred, else "remat: error:
 * <tag><message><suffix>" on stderr */
static void error_line(const char *suffix, const char *fmt, va_list ap)
{
    if (defer) {
        if (!deferred[0]) {
            int k = vsnprintf(deferred, sizeof deferred, fmt, ap);
            if (k >= 0 && (size_t)k < sizeof deferred) snprintf(deferred + k, sizeof deferred - (size_t)k, "%s", suffix);
        }
        return;
    }
    if (cli_error_hook) cli_error_hook();
    fprintf(stderr, "remat: error: %s", cli_error_tag);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "%s\n", suffix);
    fflush(stderr);
}

int cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_line("", fmt, ap);
    va_end(ap);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, " (see 'remat %s --help')", cmd);
    va_list ap;
    va_start(ap, fmt);
    error_line(suffix, fmt, ap);
    va_end(ap);
    return 2;
}

int cli_input_error(remat_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_line("", fmt, ap);
    va_end(ap);
    return st == REMAT_ERR_INVALID || st == REMAT_ERR_IO || st == REMAT_ERR_FORMAT || st == REMAT_ERR_RANGE ||
           st == REMAT_ERR_POLICY ? 2 : 1;
}

const char *cli_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) { cli_error("%s needs a value", argv[*i]); return NULL; }
    return argv[++*i];
}

int cli_int(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi || isspace((unsigned char)*s)) {
        cli_error("%s expects a whole number in [%ld, %ld], got '%s'", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_u64(const char *flag, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s)) { cli_error("%s expects a non-negative whole number, got '%s'", flag, s); return 0; }
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno) { cli_error("%s expects a non-negative whole number, got '%s'", flag, s); return 0; }
    *out = v;
    return 1;
}

int cli_float(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < lo || v > hi || isspace((unsigned char)*s)) {
        cli_error("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s);
        return 0;
    }
    *out = v;
    return 1;
}

int cli_bytes(const char *flag, const char *s, uint64_t *out)
{
    static const struct { const char *u; double m; } units[] = {
        {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"", 1},
    };
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s) && *s != '.') goto bad;
    if (strpbrk(s, "xXpP")) goto bad;          /* strtod would take hex floats such as 0x10 */
    double v = strtod(s, &end);
    if (errno || !isfinite(v) || v < 0) goto bad;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if (!strcmp(end, units[k].u)) {
            double b = v * units[k].m;
            if (b > 9.0e18) goto bad;
            *out = (uint64_t)llround(b);
            return 1;
        }
bad:
    cli_error("%s expects a size such as 2GiB, 512MiB, 1.5GB or 1000000B, got '%s'", flag, s);
    return 0;
}

void cli_config_start(remat_config *c)
{
    remat_config_default(c);
    c->max_seq = 0;   /* no flag gives 0: cli_config_default_max_seq sees whether --max-seq was given */
}

void cli_config_default_max_seq(remat_config *c)
{
    if (!c->max_seq) c->max_seq = c->seq;
}

/* ---- flag tables ---------------------------------------------------------------- */

/* CHOICE fields are enums and ints alike */
_Static_assert(sizeof(remat_attention) == sizeof(int) && sizeof(remat_framework) == sizeof(int),
               "CLI_FLAG_CHOICE stores an int into enum fields");

/* "a, b or c": the choices a flag takes (aliases left out) */
static const char *choice_list(const cli_choice *ch, char *buf, size_t n)
{
    int count = 0, k = 0;
    size_t len = 0;
    buf[0] = 0;
    for (const cli_choice *c = ch; c->name; c++) count += !c->alias;
    for (const cli_choice *c = ch; c->name && len < n; c++) {
        if (c->alias) continue;
        len += (size_t)snprintf(buf + len, n - len, "%s%s", k == 0 ? "" : k == count - 1 ? " or " : ", ", c->name);
        k++;
    }
    return buf;
}

/* Parses v, the value of f, into field; 1, or 0 (reported). */
static int apply(const cli_flag *f, const char *v, void *field)
{
    long x;
    double d;
    char list[256];
    switch (f->kind) {
    case CLI_FLAG_SWITCH: *(int *)field = 1; return 1;
    case CLI_FLAG_INT:
        if (!cli_int(f->name, v, (long)f->lo, (long)f->hi, &x)) return 0;
        *(int *)field = (int)x;
        return 1;
    case CLI_FLAG_LONG: return cli_int(f->name, v, (long)f->lo, (long)f->hi, (long *)field);
    case CLI_FLAG_U64: return cli_u64(f->name, v, (uint64_t *)field);
    case CLI_FLAG_FLOAT:
        if (!cli_float(f->name, v, f->lo, f->hi, &d)) return 0;
        *(float *)field = (float)d;
        return 1;
    case CLI_FLAG_DOUBLE: return cli_float(f->name, v, f->lo, f->hi, (double *)field);
    case CLI_FLAG_BYTES: return cli_bytes(f->name, v, (uint64_t *)field);
    case CLI_FLAG_BUDGET:
        if (!cli_budget(f->name, v, (uint64_t *)field)) return 0;
        if (!*(uint64_t *)field) { cli_error("%s must be positive", f->name); return 0; }
        return 1;
    case CLI_FLAG_STRING: *(const char **)field = v; return 1;
    case CLI_FLAG_CHOICE:
        for (const cli_choice *c = f->choices; c->name; c++)
            if (!strcmp(v, c->name)) { *(int *)field = c->value; return 1; }
        cli_error("%s expects %s, got '%s'", f->name, choice_list(f->choices, list, sizeof list), v);
        return 0;
    case CLI_FLAG_CUSTOM: return f->parse(f->name, v, field);
    }
    return 0;
}

/* the flag named name in cmd's groups (the first group that has it):
 * *g its group; NULL when none has it */
static const cli_flag *find(const cli_command *cmd, const char *name, int *g)
{
    for (int k = 0; k < cmd->ngroups; k++)
        for (size_t j = 0; j < cmd->groups[k].n; j++)
            if (!strcmp(cmd->groups[k].flags[j].name, name)) { *g = k; return &cmd->groups[k].flags[j]; }
    return NULL;
}

static int unknown(const cli_command *cmd, const char *flag)
{
    const char *why = cmd->unknown ? cmd->unknown(flag) : NULL;
    if (why) cli_usage_error(cmd->name, "%s", why);
    else cli_usage_error(cmd->name, "unknown flag '%s'%s", flag, cmd->unknown_suffix ? cmd->unknown_suffix : "");
    return -1;
}

int cli_parse(cli_command *cmd, int argc, char **argv)
{
    int g;
    memset(cmd->given, 0, sizeof cmd->given);
    /* the names first: an unknown flag is an error even beside --help */
    int help = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help = 1; continue; }
        const cli_flag *f = find(cmd, argv[i], &g);
        if (!f) return unknown(cmd, argv[i]);
        if (f->arg) i++;   /* its value, whatever it looks like */
    }
    if (help) { cli_help(stdout, cmd); return 0; }
    for (int i = 1; i < argc; i++) {
        const cli_flag *f = find(cmd, argv[i], &g);
        const char *v = NULL;
        if (f->arg && !(v = cli_value(argc, argv, &i))) return -1;
        if (!apply(f, v, (char *)cmd->groups[g].base + f->off)) return -1;
        cmd->given[g] |= 1ULL << (f - cmd->groups[g].flags);
    }
    return 1;
}

int cli_given(const cli_command *cmd, const char *flag)
{
    int g;
    const cli_flag *f = find(cmd, flag, &g);
    return f && (cmd->given[g] >> (f - cmd->groups[g].flags) & 1);
}

int cli_reapply(const cli_command *cmd, int group, void *base, int argc, char **argv)
{
    int g;
    for (int i = 1; i < argc; i++) {
        const cli_flag *f = find(cmd, argv[i], &g);
        if (!f) continue;
        const char *v = f->arg ? argv[++i] : NULL;
        if (g == group && !apply(f, v, (char *)base + f->off)) return 0;
    }
    return 1;
}

/* The help's flag column: "  --name ARG", then the text from column 26 (on
 * the next line when the column is full); '\n' in a text starts a line at
 * column 26. */
#define HELP_COL 26

void cli_help(FILE *out, const cli_command *cmd)
{
    int titles = 0;
    fputs(cmd->usage, out);
    for (int k = 0; k < cmd->ngroups; k++) {
        const cli_flag_group *gr = &cmd->groups[k];
        int shown = 0;
        for (size_t j = 0; j < gr->n; j++) {
            const cli_flag *f = &gr->flags[j];
            int g;
            if (find(cmd, f->name, &g) != f) continue;   /* an earlier group's flag of that name is the one */
            if (!shown++ && gr->title) fprintf(out, "%s%s\n", titles++ ? "\n" : "", gr->title);
            int w = fprintf(out, "  %s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
            if (w >= HELP_COL - 1) { fputc('\n', out); w = 0; }
            fprintf(out, "%*s", HELP_COL - w, "");
            for (const char *p = f->help; *p; p++) {
                fputc(*p, out);
                if (*p == '\n' && p[1]) fprintf(out, "%*s", HELP_COL, "");
            }
            fputc('\n', out);
        }
    }
    if (cmd->notes) fputs(cmd->notes, out);
}

int cli_budget_pick(const char *cmd, uint64_t total, uint64_t act_budget, uint64_t *budget, int *act)
{
    if (total && act_budget) {
        cli_usage_error(cmd, "give one of --budget and --budget-activations");
        return 0;
    }
    *budget = total ? total : act_budget;
    *act = act_budget != 0;
    return 1;
}

/* ---- the flags shared by the commands ------------------------------------------------ */

static int parse_lmhead(const char *flag, const char *v, void *field)
{
    long x;
    int *chunk = field;
    if (!strcmp(v, "full")) *chunk = 0;
    else if (!strcmp(v, "chunked")) *chunk = 128;
    else if (!strncmp(v, "chunked:", 8)) {
        if (!cli_int("--lmhead chunked:ROWS", v + 8, 1, 1 << 30, &x)) return 0;
        *chunk = (int)x;
    } else { cli_error("%s expects full, chunked or chunked:ROWS, got '%s'", flag, v); return 0; }
    return 1;
}

/* the GEMM engine is process-wide: set at once */
static int parse_gemm(const char *flag, const char *v, void *field)
{
    remat_gemm_engine e;
    if (!strcmp(v, "onednn")) e = REMAT_GEMM_ONEDNN;
    else if (!strcmp(v, "cblas")) e = REMAT_GEMM_CBLAS;
    else { cli_error("%s expects onednn or cblas, got '%s'", flag, v); return 0; }
    if (remat_gemm_set(e)) { cli_error("%s %s: %s", flag, v, remat_errmsg()); return 0; }
    return 1;
}

int cli_parse_dtype(const char *flag, const char *v, void *field)
{
    if (!cli_dtype_parse(v, strlen(v), field)) { cli_error("%s expects fp32 or bf16, got '%s'", flag, v); return 0; }
    return 1;
}

static int parse_model(const char *flag, const char *v, void *field)
{
    remat_config *c = field;
    const remat_model_preset *p = remat_model_preset_find(v);
    if (!p) {
        char list[256];
        cli_error("%s expects one of %s, got '%s'", flag, cli_preset_names(0, list, sizeof list), v);
        return 0;
    }
    remat_model_preset_apply(p, c);
    return 1;
}

/* --model-config FILE: a Hugging Face config.json sets the architecture */
static int parse_model_config(const char *flag, const char *v, void *field)
{
    if (remat_weights_probe(v, field, NULL)) {
        cli_error("%s %s: %s", flag, v, remat_errmsg());
        return 0;
    }
    return 1;
}

int cli_parse_policy(const char *flag, const char *v, void *field)
{
    cli_policies *l = field;
    if (l->n == CLI_MAX_POLICIES) { cli_error("at most %d %s policies", CLI_MAX_POLICIES, flag); return 0; }
    l->v[l->n++] = v;
    return 1;
}

/* --rope-scaling llama3:FACTOR:LOW:HIGH:ORIG (Hugging Face's rope_scaling of
 * type "llama3": factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings), or none */
static int parse_rope_scaling(const char *flag, const char *v, void *field)
{
    remat_rope_scaling *r = field;
    memset(r, 0, sizeof *r);
    if (!strcmp(v, "none")) return 1;
    double f, lo, hi;
    int orig, n = 0;
    if (sscanf(v, "llama3:%lf:%lf:%lf:%d%n", &f, &lo, &hi, &orig, &n) == 4 && !v[n]) {
        *r = (remat_rope_scaling){ REMAT_ROPE_LLAMA3, f, lo, hi, orig };
        return 1;
    }
    cli_error("%s expects none or llama3:FACTOR:LOW_FREQ_FACTOR:HIGH_FREQ_FACTOR:ORIGINAL_MAX_POSITION "
              "(e.g. llama3:8:1:4:8192), got '%s'", flag, v);
    return 0;
}

static const cli_choice arch_choices[] = {
    {"gpt2", REMAT_ARCH_GPT2, 0}, {"llama", REMAT_ARCH_LLAMA, 0}, {NULL, 0, 0},
};
static const cli_choice attention_choices[] = {
    {"naive", REMAT_ATTENTION_NAIVE, 0}, {"flash", REMAT_ATTENTION_FLASH, 0},
    {"unfused", REMAT_ATTENTION_NAIVE, 1},   /* the framework tables' name for naive */
    {NULL, 0, 0},
};
static const cli_choice framework_choices[] = {
    {"remat", REMAT_FRAMEWORK_REMAT, 0}, {"megatron", REMAT_FRAMEWORK_MEGATRON, 0},
    {"pytorch", REMAT_FRAMEWORK_PYTORCH, 0}, {NULL, 0, 0},
};

#define CFG(field) offsetof(remat_config, field)
static const cli_flag config_flags[] = {
    {"--layers", "N", CLI_FLAG_INT, CFG(n_layer), 1, REMAT_MAX_LAYERS, NULL, NULL, "blocks (default 4)"},
    {"--dim", "C", CLI_FLAG_INT, CFG(n_embd), 1, REMAT_MAX_EMBD, NULL, NULL, "width (default 128)"},
    {"--heads", "H", CLI_FLAG_INT, CFG(n_head), 1, REMAT_MAX_EMBD, NULL, NULL, "attention heads (default 4)"},
    {"--vocab", "V", CLI_FLAG_INT, CFG(vocab), REMAT_MIN_VOCAB, REMAT_MAX_VOCAB, NULL, NULL,
     "vocabulary (default 256; remat train: from the data)"},
    {"--seq", "T", CLI_FLAG_INT, CFG(seq), 1, REMAT_MAX_SEQ, NULL, NULL, "sequence length (default 64)"},
    {"--max-seq", "M", CLI_FLAG_INT, CFG(max_seq), 1, REMAT_MAX_SEQ, NULL, NULL, "position table size (default T)"},
    {"--batch", "B", CLI_FLAG_INT, CFG(batch), 1, REMAT_MAX_BATCH, NULL, NULL, "sequences per step (default 16)"},
    {"--model", "NAME", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_model,
     "a preset shape: 22b 175b 530b 1t (Korthikanti et al. 2022, Table 3),\n"
     "gpt2 gpt2-medium gpt2-large gpt2-xl, llama3-8b llama3-70b llama3-405b\n"
     "llama3.2-1b llama3.2-3b (the architecture and seq); later config flags\n"
     "override it"},
    {"--model-config", "FILE", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_model_config,
     "a Hugging Face config.json: the architecture and every size it has\n"
     "(model_type llama or gpt2); later config flags override it"},
    {"--dropout", "P", CLI_FLAG_FLOAT, CFG(dropout), 0, 0.999, NULL, NULL,
     "dropout on attention probabilities and residual branches (default 0)"},
    {"--attention", "K", CLI_FLAG_CHOICE, CFG(attention), 0, 0, attention_choices, NULL,
     "naive (stores the T x T probabilities; 'unfused' too) or flash (tiled,\n"
     "online softmax, stores only the logsumexp; default naive, flash for\n"
     "--framework megatron --arch llama)"},
    {"--lmhead", "K", CLI_FLAG_CUSTOM, CFG(lmhead_chunk), 0, 0, NULL, parse_lmhead,
     "full (B x T x V logits) or chunked[:ROWS] (logits, loss and gradient\n"
     "ROWS at a time; default ROWS 128)"},
    {"--dtype", "D", CLI_FLAG_CUSTOM, CFG(dtype), 0, 0, NULL, cli_parse_dtype,
     "fp32 (default) or bf16: mixed precision as autocast, bf16 activations\n"
     "and GEMM operands, fp32 weights, gradients, AdamW state and residual stream"},
    {"--gemm", "E", CLI_FLAG_CUSTOM, 0, 0, 0, NULL, parse_gemm,
     "GEMM engine: onednn (the default build's default) or cblas (fp32 only)"},
    {"--framework", "F", CLI_FLAG_CHOICE, CFG(framework), 0, 0, framework_choices, NULL,
     "the tensor table: remat (default), megatron or pytorch; 'remat plan\n"
     "--framework megatron --help' plans a GPU cluster run (train, bench\n"
     "and profile run remat's own table only)"},
    {"--tp", "T", CLI_FLAG_INT, CFG(tp), 1, REMAT_MAX_TP, NULL, NULL, "tensor parallelism over T GPUs (with --framework)"},
    {"--arch", "A", CLI_FLAG_CHOICE, CFG(arch), 0, 0, arch_choices, NULL,
     "the model family: gpt2 (default) or llama (RMSNorm, RoPE, SwiGLU,\n"
     "grouped-query attention, no biases, the head tied or not)"},
    {"--kv-heads", "KV", CLI_FLAG_INT, CFG(n_kv_head), 1, REMAT_MAX_EMBD, NULL, NULL,
     "llama: key/value heads, dividing --heads (default: --heads)"},
    {"--ffn-dim", "F", CLI_FLAG_INT, CFG(ffn_dim), 1, 1 << 20, NULL, NULL,
     "llama: the MLP width (default 256 ceil(8C/3 / 256))"},
    {"--head-dim", "HS", CLI_FLAG_INT, CFG(head_dim), 2, 65536, NULL, NULL, "llama: the head size, even (default C/H)"},
    {"--rope-theta", "X", CLI_FLAG_DOUBLE, CFG(rope_theta), 1e-6, 1e12, NULL, NULL, "llama: the RoPE base (default 10000)"},
    {"--rope-scaling", "S", CLI_FLAG_CUSTOM, CFG(rope_scaling), 0, 0, NULL, parse_rope_scaling,
     "llama: none (default) or llama3:FACTOR:LOW:HIGH:ORIG, Llama 3.1's\n"
     "frequency scaling (e.g. llama3:8:1:4:8192)"},
    {"--norm-eps", "E", CLI_FLAG_DOUBLE, CFG(norm_eps), 1e-30, 0.5, NULL, NULL,
     "the norm's epsilon (default 1e-5 gpt2, 1e-6 llama)"},
    {"--tie-embeddings", NULL, CLI_FLAG_SWITCH, CFG(tie_embeddings), 0, 0, NULL, NULL,
     "llama: the LM head is the token embedding (gpt2 always is)"},
    {"--sp", NULL, CLI_FLAG_SWITCH, CFG(sp), 0, 0, NULL, NULL, "sequence parallelism (with --framework and --tp)"},
    {"--cp", "CP", CLI_FLAG_INT, CFG(cp), 1, REMAT_MAX_CP, NULL, NULL,
     "context parallelism over CP GPUs (--framework megatron, llama, flash:\n"
     "Megatron's --context-parallel-size; seq divisible by 2 CP)"},
    /* mixture of experts (issue 27): Megatron's flags' names where they are short */
    {"--num-experts", "E", CLI_FLAG_INT, CFG(n_experts), 1, 4096, NULL, NULL,
     "llama, --framework megatron: a routed mixture of E experts in every layer"},
    {"--moe-topk", "K", CLI_FLAG_INT, CFG(moe_topk), 1, 4096, NULL, NULL, "experts per token (--moe-router-topk)"},
    {"--moe-ffn-dim", "F", CLI_FLAG_INT, CFG(moe_ffn_dim), 1, 1 << 20, NULL, NULL, "one expert's width (--moe-ffn-hidden-size)"},
    {"--moe-shared-dim", "F", CLI_FLAG_INT, CFG(moe_shared_dim), 0, 1 << 20, NULL, NULL,
     "the shared experts' width (--moe-shared-expert-intermediate-size; default 0: none)"},
    {"--ep", "EP", CLI_FLAG_INT, CFG(ep), 1, 4096, NULL, NULL, "expert parallelism (--expert-model-parallel-size)"},
    {"--etp", "ETP", CLI_FLAG_INT, CFG(etp), 1, REMAT_MAX_TP, NULL, NULL,
     "expert tensor parallelism (--expert-tensor-parallel-size; default --tp)"},
    {"--moe-load", "F", CLI_FLAG_DOUBLE, CFG(moe_load), 1, 4096, NULL, NULL,
     "dropless routing's planned load: the busiest expert's tokens over the\n"
     "balanced share (default 2, README 'Mixture of experts')"},
    {"--qk-norm", NULL, CLI_FLAG_SWITCH, CFG(qk_norm), 0, 0, NULL, NULL,
     "RMSNorm on each head's q and k before RoPE (Qwen3; Megatron --qk-layernorm)"},
    {"--capacity-factor", "X", CLI_FLAG_DOUBLE, CFG(moe_capacity), 0.01, 4096, NULL, NULL,
     "token dropping at X times the balanced share (--moe-expert-capacity-factor,\n"
     "padded to it): the exact bound, used instead of --moe-load"},
    /* DeepSeek-V3 (issue 27): multi-latent attention, dense first layers, its routing */
    {"--q-lora-rank", "LQ", CLI_FLAG_INT, CFG(q_lora_rank), 1, 65536, NULL, NULL,
     "multi-latent attention: q's low rank (--q-lora-rank)"},
    {"--kv-lora-rank", "LKV", CLI_FLAG_INT, CFG(kv_lora_rank), 1, 65536, NULL, NULL,
     "multi-latent attention (DeepSeek-V3) instead of grouped-query: k and v's\n"
     "low rank (--kv-lora-rank)"},
    {"--qk-nope-dim", "DN", CLI_FLAG_INT, CFG(qk_nope_dim), 1, 65536, NULL, NULL,
     "MLA: q and k's head part without RoPE (Megatron --qk-head-dim)"},
    {"--qk-rope-dim", "DR", CLI_FLAG_INT, CFG(qk_rope_dim), 2, 65536, NULL, NULL,
     "MLA: q and k's head part with RoPE, even (--qk-pos-emb-head-dim)"},
    {"--v-head-dim", "DV", CLI_FLAG_INT, CFG(v_head_dim), 1, 65536, NULL, NULL, "MLA: v's head size (--v-head-dim)"},
    {"--moe-first-dense", "N", CLI_FLAG_INT, CFG(moe_first_dense), 1, REMAT_MAX_LAYERS, NULL, NULL,
     "the first N layers dense (width --ffn-dim), the rest routed (DeepSeek's\n"
     "first_k_dense_replace; --moe-layer-freq \"([0]*N+[1]*(L-N))\")"},
    {"--moe-groups", "G", CLI_FLAG_INT, CFG(moe_groups), 1, 4096, NULL, NULL,
     "group-limited routing over G expert groups (--moe-router-num-groups)"},
    {"--moe-group-topk", "K", CLI_FLAG_INT, CFG(moe_group_topk), 1, 4096, NULL, NULL,
     "groups each token routes to (--moe-router-group-topk)"},
    {"--moe-scaling", "X", CLI_FLAG_DOUBLE, CFG(moe_scaling), 1e-6, 1e6, NULL, NULL,
     "the routed weights' scale (--moe-router-topk-scaling-factor)"},
};
#undef CFG

cli_flag_group cli_config_group(remat_config *c)
{
    cli_flag_group g = { "model and step shape (config flags):", config_flags, sizeof config_flags / sizeof config_flags[0], c };
    return g;
}

int cli_config_flag(remat_config *c, int argc, char **argv, int *i)
{
    cli_flag_group g = cli_config_group(c);
    for (size_t k = 0; k < g.n; k++) {
        const cli_flag *f = &g.flags[k];
        if (strcmp(argv[*i], f->name)) continue;
        const char *v = NULL;
        if (f->arg && !(v = cli_value(argc, argv, i))) return -1;
        return apply(f, v, (char *)c + f->off) ? 1 : -1;
    }
    return 0;
}

void cli_config_print(FILE *f, const remat_config *c)
{
    fprintf(f, "model: %s%d layers, dim %d, %d heads", c->arch == REMAT_ARCH_GPT2 ? "" : "llama, ", c->n_layer, c->n_embd,
            c->n_head);
    if (c->arch != REMAT_ARCH_GPT2 && c->kv_lora_rank > 0)
        fprintf(f, " (multi-latent), ffn %d, %s", remat_config_ffn_dim(c), remat_config_tied(c) ? "tied" : "untied");
    else if (c->arch != REMAT_ARCH_GPT2)
        fprintf(f, " (%d kv, head dim %d), ffn %d, %s", remat_config_kv_heads(c), remat_config_head_dim(c),
                remat_config_ffn_dim(c), remat_config_tied(c) ? "tied" : "untied");
    fprintf(f, ", vocab %d (padded %d), %llu params | step: batch %d x seq %d, dropout %g",
            c->vocab, remat_config_padded_vocab(c),
            (unsigned long long)remat_config_num_params(c), c->batch, c->seq, (double)c->dropout);
    if (c->attention == REMAT_ATTENTION_FLASH) fprintf(f, ", flash attention");
    if (c->lmhead_chunk > 0) fprintf(f, ", lm head chunked by %d rows", c->lmhead_chunk);
    if (c->dtype == REMAT_DTYPE_BF16) fprintf(f, ", bf16 mixed precision");
    if (c->framework != REMAT_FRAMEWORK_REMAT) {
        char cp[32] = "";
        if (remat_config_cp(c) > 1) snprintf(cp, sizeof cp, ", context parallel %d", remat_config_cp(c));
        fprintf(f, " | %s table, tp %d%s%s%s", c->framework == REMAT_FRAMEWORK_MEGATRON ? "megatron" : "pytorch", c->tp,
                c->sp ? ", sequence parallel" : "", cp, c->stage == REMAT_STAGE_FIRST ? ", first pipeline stage" : "");
        if (c->n_experts > 0)
            fprintf(f, " | %d experts, top-%d, width %d, shared %d, ep %d, etp %d, a GPU's routed load %gx balance",
                    c->n_experts, c->moe_topk, c->moe_ffn_dim, c->moe_shared_dim, c->ep > 1 ? c->ep : 1,
                    remat_config_etp(c), remat_config_moe_rank_load(c));
        if (c->moe_first_dense > 0) fprintf(f, ", the first %d layers dense", c->moe_first_dense);
        if (c->kv_lora_rank > 0)
            fprintf(f, " | multi-latent attention: q rank %d, kv rank %d, qk %d + rope %d, v %d", c->q_lora_rank,
                    c->kv_lora_rank, c->qk_nope_dim, c->qk_rope_dim, c->v_head_dim);
    }
    fputc('\n', f);
}

void cli_json_arch(remat_jsonw *w, const remat_config *c)
{
    remat_jsonw_str(w, "arch", remat_arch_name(c->arch));
    remat_jsonw_int(w, "n_kv_head", remat_config_kv_heads(c));
    remat_jsonw_int(w, "head_dim", remat_config_head_dim(c));
    remat_jsonw_int(w, "ffn_dim", remat_config_ffn_dim(c));
    remat_jsonw_int(w, "tie_embeddings", remat_config_tied(c));
    if (c->arch != REMAT_ARCH_GPT2) {
        remat_jsonw_num(w, "rope_theta", remat_config_rope_theta(c));
        remat_jsonw_num(w, "norm_eps", remat_config_norm_eps(c));
    }
}

const char *cli_dtype_name(remat_dtype d) { return d == REMAT_DTYPE_BF16 ? "bf16" : "fp32"; }

int cli_dtype_parse(const char *s, size_t len, remat_dtype *out)
{
    static const remat_dtype all[] = { REMAT_DTYPE_FP32, REMAT_DTYPE_BF16 };
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
        const char *name = cli_dtype_name(all[k]);
        if (len == strlen(name) && !strncmp(s, name, len)) { *out = all[k]; return 1; }
    }
    return 0;
}

remat_jsonw *cli_json_open(FILE *f, unsigned flags)
{
    remat_jsonw *w = NULL;
    if (remat_jsonw_create(f, flags, &w)) cli_error("%s", remat_errmsg());
    return w;
}

int cli_json_close(remat_jsonw *w)
{
    if (!w) return 1;
    remat_status st = remat_jsonw_finish(w);
    remat_jsonw_free(w);
    return st ? cli_error("%s", remat_errmsg()) : 0;
}

const char *cli_fmt_bytes(uint64_t b, char *buf, size_t n)
{
    if (b >= (1ULL << 30)) snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
    else if (b >= (1ULL << 20)) snprintf(buf, n, "%.2f MiB", b / 1048576.0);
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else snprintf(buf, n, "%llu B", (unsigned long long)b);
    return buf;
}

double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double cli_median(const double *x, int n)
{
    if (n <= 0) return 0;
    double *c = malloc(sizeof(double) * (size_t)n);
    if (!c) return x[0];
    memcpy(c, x, sizeof(double) * (size_t)n);
    double m = remat_median(c, (size_t)n);
    free(c);
    return m;
}

int cli_available_memory(uint64_t *bytes, const char **source)
{
    const char *env = getenv("REMAT_MEM_AVAILABLE");
    if (env && *env) {
        if (!cli_bytes("REMAT_MEM_AVAILABLE", env, bytes)) return 0;
        if (source) *source = "REMAT_MEM_AVAILABLE";
        return 1;
    }
    if (remat_memory_available(bytes, source)) { cli_error("%s", remat_errmsg()); return 0; }
    return 1;
}

int cli_budget(const char *flag, const char *s, uint64_t *out)
{
    if (!strcmp(s, "auto")) return cli_available_memory(out, NULL);
    return cli_bytes(flag, s, out);
}

const char *cli_preset_names(int devices, char *buf, size_t n)
{
    size_t k = 0;
    int count = devices ? remat_device_count() : remat_model_preset_count();
    buf[0] = 0;
    for (int j = 0; j < count && k < n; j++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", j ? ", " : "",
                              devices ? remat_device_get(j)->name : remat_model_preset_get(j)->name);
    return buf;
}

/* The longest seq at which c's sizes stay within what remat_config_check
 * takes (its REMAT_ERR_RANGE bounds, asked of the check itself: the limit
 * is its own), max_seq following seq unless it was larger; 0: none. */
static int longest_seq(const remat_config *c)
{
    remat_config t = *c;
    int lo = 0, hi = c->seq;    /* lo passes (0: none yet), hi overflows */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        t.seq = mid;
        t.max_seq = c->max_seq > c->seq ? c->max_seq : mid;
        if (remat_config_check(&t) == REMAT_ERR_RANGE) hi = mid;
        else lo = mid;
    }
    return lo;
}

int cli_config_check(const remat_config *c)
{
    remat_status st = remat_config_check(c);
    if (!st) return 0;
    char msg[600];
    snprintf(msg, sizeof msg, "%s", remat_errmsg());
    int best = st == REMAT_ERR_RANGE && c->seq > 1 ? longest_seq(c) : 0;
    if (best > 0 && best < c->seq)
        return cli_error("%s (at batch %d the longest seq these sizes allow is %d)", msg, c->batch, best) + 1;
    return cli_error("%s", msg) + 1;
}
