#!/usr/bin/python3
"""py_megatron_config.py -- the Megatron-LM flags remat prints, checked by Megatron.

For a sweep of layouts (Llama-3 8B/70B/405B, Mixtral-8x7B, Qwen3-235B-A22B,
DeepSeek-V3 with multi-latent attention and its dense first layers;
tp/sp/pp/vpp/cp/ep/etp, uneven first and last stages, recompute and
offload answers) runs `remat plan --framework megatron ... --json`, takes
every flag string in the answer (the run's "megatron_args" with each row's
"megatron_flags", and each row's whole "command", whose leading NAME=value
words must be the row's "env") and:

  1. requires every flag to be known: either mapped to a field of
     megatron-core's TransformerConfig (FLAG_FIELD below, as
     megatron/training/arguments.py's core_transformer_config_from_args
     and its ArgumentGroupFactory(TransformerConfig) turn them into one),
     or listed in TRAINING_ONLY with the line of arguments.py that
     declares or consumes it.  An unknown flag fails the test, so a flag
     added to remat's output must be added here;
  2. builds TransformerConfig(**fields) from megatron-core (PyPI,
     python/requirements-test.txt) and requires __post_init__ to accept it
     (MLATransformerConfig when MLA flags appear);
  3. checks the rules of megatron/training/arguments.py's validate_args,
     which megatron-core's wheel does not ship, as written down in validate_args_rules()
     below with their line numbers at NVIDIA/Megatron-LM commit
     d98e8a64ddf34856e74b24714e3bedb2f5a39553 (the commit megatron_args in
     src/cli/plan_framework.c cites).

Seeded faults prove the checks can fail: an unknown flag, a flag set
Megatron's validate_args rejects, and one TransformerConfig rejects.

Needs torch 2 and megatron-core: elsewhere it skips (exit 77).
"""
# REMAT_TEST_TORCH: 2
# REMAT_TEST_REQUIRED: CI's torch 2.13 environment installs megatron-core from python/requirements-test.txt; remat's Megatron answers must be accepted by it
import dataclasses
import json
import os
import subprocess
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checks, report, skip  # noqa: E402

NAME = "py_megatron_config"
REMAT = os.environ.get("REMAT", "build/remat")
COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"

try:
    warnings.simplefilter("ignore")
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig, MLATransformerConfig
    from megatron.core.transformer.enums import AttnBackend
except Exception as e:  # noqa: BLE001 -- any import failure is a skip, said why
    skip(NAME, "megatron-core does not import here (%s: %s); pip install -r python/requirements-test.txt"
         % (type(e).__name__, e))

FIELDS = {f.name for f in dataclasses.fields(MLATransformerConfig)}

# flag -> (TransformerConfig field, how the value is read).  A value of
# None means a switch (no value; the field is set to True, or to the
# constant given as the third element).
I, S, FL = int, str, float
FLAG_FIELD = {
    "--num-layers": ("num_layers", I),
    "--hidden-size": ("hidden_size", I),
    "--num-attention-heads": ("num_attention_heads", I),
    "--ffn-hidden-size": ("ffn_hidden_size", I),
    "--num-query-groups": ("num_query_groups", I),
    "--kv-channels": ("kv_channels", I),
    "--normalization": ("normalization", S),
    "--swiglu": ("gated_linear_unit", None, True),       # and activation_func=silu: arguments.py, core_transformer_config_from_args
    "--disable-bias-linear": ("add_bias_linear", None, False),
    "--attention-backend": ("attention_backend", lambda v: AttnBackend[v]),
    "--attention-dropout": ("attention_dropout", FL),
    "--hidden-dropout": ("hidden_dropout", FL),
    "--qk-layernorm": ("qk_layernorm", None, True),
    "--num-experts": ("num_moe_experts", I),              # arguments.py:3518 declares it under this name
    "--moe-router-topk": ("moe_router_topk", I),
    "--moe-ffn-hidden-size": ("moe_ffn_hidden_size", I),
    "--moe-shared-expert-intermediate-size": ("moe_shared_expert_intermediate_size", I),
    "--moe-token-dispatcher-type": ("moe_token_dispatcher_type", S),
    "--moe-grouped-gemm": ("moe_grouped_gemm", None, True),
    "--moe-router-dtype": ("moe_router_dtype", S),
    "--moe-aux-loss-coeff": ("moe_aux_loss_coeff", FL),
    "--moe-expert-capacity-factor": ("moe_expert_capacity_factor", FL),
    "--moe-pad-expert-input-to-capacity": ("moe_pad_expert_input_to_capacity", None, True),
    # an int, or a Python list expression as the recipes write it ('([0]*3+[1]*58)', shell-quoted)
    "--moe-layer-freq": ("moe_layer_freq", lambda v: eval(v.strip("'\""), {}) if v.strip("'\"")[:1] in "([" else int(v)),  # noqa: S307
    "--moe-router-score-function": ("moe_router_score_function", S),
    "--moe-router-enable-expert-bias": ("moe_router_enable_expert_bias", None, True),
    "--moe-router-load-balancing-type": ("moe_router_load_balancing_type", S),
    "--moe-router-num-groups": ("moe_router_num_groups", I),
    "--moe-router-group-topk": ("moe_router_group_topk", I),
    "--moe-router-topk-scaling-factor": ("moe_router_topk_scaling_factor", FL),
    "--expert-model-parallel-size": ("expert_model_parallel_size", I),
    "--expert-tensor-parallel-size": ("expert_tensor_parallel_size", I),
    "--tensor-model-parallel-size": ("tensor_model_parallel_size", I),
    "--sequence-parallel": ("sequence_parallel", None, True),
    "--pipeline-model-parallel-size": ("pipeline_model_parallel_size", I),
    "--context-parallel-size": ("context_parallel_size", I),
    "--decoder-first-pipeline-num-layers": ("num_layers_in_first_pipeline_stage", I),
    "--decoder-last-pipeline-num-layers": ("num_layers_in_last_pipeline_stage", I),
    "--bf16": ("bf16", None, True),
    "--recompute-granularity": ("recompute_granularity", S),
    "--recompute-method": ("recompute_method", S),
    "--recompute-num-layers": ("recompute_num_layers", I),
    "--recompute-modules": ("recompute_modules", "list"),
    "--cpu-offloading-num-layers": ("cpu_offloading_num_layers", I),
    "--fine-grained-activation-offloading": ("fine_grained_activation_offloading", None, True),
    "--offload-modules": ("offload_modules", "list"),
    "--tp-comm-overlap": ("tp_comm_overlap", None, True),
    "--multi-latent-attention": ("multi_latent_attention", None, True),
    "--q-lora-rank": ("q_lora_rank", I),
    "--kv-lora-rank": ("kv_lora_rank", I),
    "--qk-head-dim": ("qk_head_dim", I),
    "--qk-pos-emb-head-dim": ("qk_pos_emb_head_dim", I),
    "--v-head-dim": ("v_head_dim", I),
}

# Flags no TransformerConfig field takes: the line of arguments.py (at
# COMMIT) that declares them, and whether they take a value.
TRAINING_ONLY = {
    "--seq-length": (3305, True),
    "--max-position-embeddings": (2394, True),
    "--position-embedding-type": (2397, True),
    "--group-query-attention": (2382, False),
    "--untie-embeddings-and-output-weights": (2460, False),
    "--rotary-base": (2418, True),
    "--use-rope-scaling": (2424, False),
    "--rope-scaling-factor": (2426, True),
    "--num-layers-per-virtual-pipeline-stage": (3114, True),
    "--overlap-grad-reduce": (3121, False),
    "--overlap-param-gather": (3148, False),
    "--use-distributed-optimizer": (3156, False),
    "--grad-reduce-in-bf16": (3053, False),
    "--micro-batch-size": (2863, True),    # TrainingConfig's fields, through ArgumentGroupFactory at this line
    "--global-batch-size": (2863, True),
}


def tokens(s):
    return s.split()


def parse(flags):
    """flags (one string) -> ({flag: value or True}, [unknown flags])"""
    out, unknown, t = {}, [], tokens(flags)
    i = 0
    while i < len(t):
        f = t[i]
        i += 1
        if not f.startswith("--"):
            unknown.append(f)
            continue
        if f in FLAG_FIELD:
            spec = FLAG_FIELD[f]
            if spec[1] is None:
                out[f] = True
            elif spec[1] == "list":
                vals = []
                while i < len(t) and not t[i].startswith("--"):
                    vals.append(t[i])
                    i += 1
                out[f] = vals
            else:
                out[f] = t[i]
                i += 1
        elif f in TRAINING_ONLY:
            if TRAINING_ONLY[f][1]:
                out[f] = t[i]
                i += 1
            else:
                out[f] = True
        else:
            unknown.append(f)
    return out, unknown


def config_kwargs(a):
    kw = {}
    for f, v in a.items():
        if f not in FLAG_FIELD:
            continue
        spec = FLAG_FIELD[f]
        if spec[1] is None:
            kw[spec[0]] = spec[2]
        elif spec[1] == "list":
            kw[spec[0]] = v
        else:
            kw[spec[0]] = spec[1](v)
    if a.get("--swiglu"):
        kw["activation_func"] = F.silu
    if a.get("--bf16"):
        kw["params_dtype"] = torch.bfloat16
    if int(a.get("--pipeline-model-parallel-size", 1)) > 1:   # core_transformer_config_from_args: pipeline_dtype = params_dtype
        kw["pipeline_dtype"] = kw.get("params_dtype", torch.float32)
    if "--cpu-offloading-num-layers" in a and int(a["--cpu-offloading-num-layers"]) > 0:
        kw["cpu_offloading"] = True                # arguments.py:1950
    L, pp = int(a.get("--num-layers", 1)), int(a.get("--pipeline-model-parallel-size", 1))
    if "--num-layers-per-virtual-pipeline-stage" in a:   # arguments.py:972-975: the derived degree
        v = (L // pp) // int(a["--num-layers-per-virtual-pipeline-stage"])
        if v > 1:
            kw["virtual_pipeline_model_parallel_size"] = v
    return kw


def validate_args_rules(a, env):
    """megatron/training/arguments.py's validate_args at COMMIT, the rules
    remat's flags meet: a list of the rules broken ("line: what")"""
    bad = []
    L = int(a.get("--num-layers", 1))
    pp = int(a.get("--pipeline-model-parallel-size", 1))
    tp = int(a.get("--tensor-model-parallel-size", 1))
    cp = int(a.get("--context-parallel-size", 1))
    uneven = "--decoder-first-pipeline-num-layers" in a or "--decoder-last-pipeline-num-layers" in a
    if "--moe-layer-freq" in a:      # megatron-core 0.16.1 models/gpt/gpt_layer_specs.py:589, building the layers
        freq = FLAG_FIELD["--moe-layer-freq"][1](a["--moe-layer-freq"])
        if isinstance(freq, list) and len(freq) != L:
            bad.append("gpt_layer_specs.py:589: moe_layer_freq lists %d layers of %d" % (len(freq), L))
    if "--num-layers-per-virtual-pipeline-stage" in a:
        n = int(a["--num-layers-per-virtual-pipeline-stage"])
        if uneven:
            bad.append("955: --num-layers-per-virtual-pipeline-stage with uneven first/last stages")
        if L % pp:
            bad.append("968: layers %d not divisible by pp %d" % (L, pp))
        elif (L // pp) % n:
            bad.append("972: layers per stage %d not divisible by %d per virtual stage" % (L // pp, n))
    elif not uneven and L % pp:
        bad.append("997: layers %d not divisible by pp %d" % (L, pp))
    if uneven:   # megatron/core/transformer/transformer_config.py checks the middle stages' split too (built below)
        rest = L - int(a.get("--decoder-first-pipeline-num-layers", 0)) - int(a.get("--decoder-last-pipeline-num-layers", 0))
        if rest < 0:
            bad.append("uneven stages take more than %d layers" % L)
    if a.get("--overlap-param-gather"):
        if not a.get("--use-distributed-optimizer"):
            bad.append("1025: --overlap-param-gather needs --use-distributed-optimizer")
        if not a.get("--overlap-grad-reduce"):
            bad.append("1028: --overlap-param-gather needs --overlap-grad-reduce")
    if a.get("--grad-reduce-in-bf16") and not a.get("--bf16"):
        bad.append("1213: --grad-reduce-in-bf16 is read only with --bf16")
    if a.get("--recompute-granularity") == "selective" and "--recompute-method" in a:
        bad.append("1426: --recompute-method with selective granularity")
    if a.get("--sequence-parallel") and tp == 1:
        bad.append("1433: --sequence-parallel with tp 1 is silently dropped")
    if a.get("--tp-comm-overlap") and not a.get("--sequence-parallel"):
        bad.append("1442: --tp-comm-overlap needs --sequence-parallel")
    if env is not None and (tp > 1 or cp > 1) and env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
        bad.append("1477: tp or cp > 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1")
    return bad


def build(a):
    """None when TransformerConfig accepts the flags, else why not"""
    kw = config_kwargs(a)
    missing = [k for k in kw if k not in FIELDS]
    if missing:
        return "no TransformerConfig field %s" % missing
    cls = MLATransformerConfig if kw.get("multi_latent_attention") else TransformerConfig
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls(**kw)
    except Exception as e:  # noqa: BLE001 -- __post_init__ raises ValueError, AssertionError, ...
        return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
    return None


def check_flags(flags, env=None):
    """the reasons Megatron would not take this flag string (empty: accepted)"""
    a, unknown = parse(flags)
    why = ["unknown flag %s" % u for u in unknown]
    why += validate_args_rules(a, env)
    b = build(a)
    if b:
        why.append(b)
    return why


def split_env(command):
    """"A=1 B=2 --flags ..." -> ({A: 1, B: 2}, "--flags ...")"""
    t, env = command.split(), {}
    while t and "=" in t[0] and not t[0].startswith("--"):
        k, v = t.pop(0).split("=", 1)
        env[k] = v
    return env, " ".join(t)


def flag_strings(j):
    """(run args, [(row key, flags, env or None, whole)]) of one JSON answer, every
    nesting: each row's megatron_flags (whole False: the run args go first) and
    its command (whole True), with the row's "env" object"""
    rows = []

    def walk(o, key):
        if isinstance(o, dict):
            env = o.get("env") if isinstance(o.get("env"), dict) else None
            for k, v in o.items():
                if k == "megatron_flags" and isinstance(v, str):
                    rows.append((key, v, env, False))
                elif k == "command" and isinstance(v, str):
                    rows.append((key, v, env, True))
                elif k != "env":
                    walk(v, k)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, "%s[%d]" % (key, i))
    walk(j, "")
    return j.get("megatron_args", ""), rows


SWEEP = [
    # model, extra arguments
    ("llama3-8b", "--tp 1 --pp 1 --dp 8 --seq 8192 --micro-batch 1 --distributed-optimizer"),
    ("llama3-8b", "--tp 2 --sp --pp 2 --dp 2 --seq 8192 --micro-batch 2"),
    ("llama3-8b", "--tp 4 --sp --cp 2 --pp 1 --dp 1 --seq 32768 --micro-batch 1"),
    # NVIDIA's 8B recipe (docs/cluster.md): bf16 gradients
    ("llama3-8b", "--tp 1 --cp 2 --dp 4 --seq 8192 --micro-batch 1 --global-batch 128 --distributed-optimizer --grad-reduce-in-bf16"),
    ("llama3-70b", "--tp 8 --sp --pp 4 --dp 2 --seq 8192 --micro-batch 1"),
    ("llama3-70b", "--tp 8 --sp --pp 4 --interleave 5 --dp 2 --seq 8192 --micro-batch 1 --global-batch 64"),
    ("llama3-70b", "--tp 4 --sp --cp 2 --pp 4 --interleave 5 --dp 2 --seq 32768 --micro-batch 1 --global-batch 64 --distributed-optimizer"),
    ("llama3-70b", "--tp 8 --sp --pp 2 --dp 4 --seq 8192 --micro-batch 1 --device-mem 40GiB"),
    ("llama3-70b", "--tp 8 --sp --pp 3 --first-stage-layers 22 --last-stage-layers 22 --dp 2 --seq 8192 --micro-batch 1"),
    ("llama3-405b", "--tp 8 --sp --pp 9 --dp 8 --seq 8192 --micro-batch 1 --distributed-optimizer"),
    ("llama3-405b", "--tp 8 --sp --pp 9 --interleave 7 --cp 2 --dp 4 --seq 16384 --micro-batch 1 --global-batch 72 --distributed-optimizer"),
    ("llama3-405b", "--tp 8 --sp --pp 16 --first-stage-layers 7 --last-stage-layers 7 --dp 4 --seq 8192 --micro-batch 1 --distributed-optimizer"),
    ("mixtral-8x7b", "--tp 1 --pp 4 --ep 8 --dp 8 --seq 4096 --micro-batch 1"),
    ("mixtral-8x7b", "--tp 2 --sp --pp 4 --ep 4 --etp 1 --dp 4 --seq 4096 --micro-batch 1 --distributed-optimizer"),
    ("qwen3-235b-a22b", "--tp 2 --sp --pp 8 --first-stage-layers 11 --last-stage-layers 11 --ep 32 --dp 32 --seq 4096 --micro-batch 1 --distributed-optimizer"),
    ("qwen3-235b-a22b", "--tp 4 --sp --pp 4 --first-stage-layers 23 --last-stage-layers 23 --ep 8 --etp 1 --dp 8 --seq 4096 --micro-batch 1 --distributed-optimizer"),
    # DeepSeek-V3: multi-latent attention, 3 dense layers then routed ones, planned stage by stage
    ("deepseek-v3", "--tp 2 --sp --pp 8 --first-stage-layers 7 --last-stage-layers 6 --ep 64 --etp 1 --dp 64 --seq 4096 --micro-batch 1 --global-batch 8192 --distributed-optimizer"),
    ("deepseek-v3", "--tp 4 --sp --pp 16 --first-stage-layers 1 --last-stage-layers 4 --ep 32 --etp 1 --dp 16 --seq 4096 --micro-batch 1 --global-batch 2048 --distributed-optimizer"),
]
COMMON = ["--device", "h100-80gb", "--device-mem", "80GiB", "--json"]
# the layout search (--gpus): every answer of its top layouts.  The first is
# issue 28's "done when" (Llama-3-70B, 64 H100s, 32k, 512 sequences)
SEARCH = [
    ("llama3-70b", "--gpus 64 --seq 32768 --global-batch 512 --device h100-80gb --top 5"),
    ("llama3-405b", "--gpus 1024 --seq 8192 --global-batch 2048 --device h100-80gb --top 5"),
    ("llama3-8b", "--gpus 16 --seq 8192 --global-batch 64 --device h100-80gb --device-mem 40GiB --top 5"),
    ("mixtral-8x7b", "--gpus 64 --seq 4096 --global-batch 256 --device h100-80gb --top 5"),
    # a dense prefix, planned stage by stage: MLA's flags, --moe-layer-freq, uneven splits
    ("deepseek-v3", "--gpus 1024 --seq 4096 --global-batch 8192 --device h100-80gb --top 5"),
]


def main():
    c = Checks()
    # seeded faults: the checks must reject these
    base = ("--num-layers 80 --hidden-size 8192 --num-attention-heads 64 --ffn-hidden-size 28672 --swiglu "
            "--normalization RMSNorm --disable-bias-linear --tensor-model-parallel-size 8 --sequence-parallel "
            "--pipeline-model-parallel-size 4 --bf16")
    c(not check_flags(base), "seed: the base flags must be accepted: %s" % check_flags(base))
    seeds = [
        ("--no-such-megatron-flag", "unknown flag"),
        ("--num-layers-per-virtual-pipeline-stage 3", "972"),             # 20 layers a stage, 3 a virtual stage
        ("--decoder-first-pipeline-num-layers 18 --num-layers-per-virtual-pipeline-stage 2", "955"),
        ("--recompute-granularity selective --recompute-method uniform", "1426"),
        ("--overlap-grad-reduce --overlap-param-gather", "1025"),
        ("--recompute-granularity full", "recompute"),                    # TransformerConfig: full needs a method
        ("--cpu-offloading-num-layers 80", "offload"),                     # TransformerConfig: offloading every layer
        ("--recompute-granularity selective --recompute-modules mla_up_proj", "mla_up_proj"),   # without MLA
        ("--num-experts 8 --moe-router-topk 2 --moe-layer-freq '([0]*3+[1]*76)'", "moe_layer_freq"),  # 79 of 80 layers
    ]
    for extra, want in seeds:
        why = check_flags(base + " " + extra)
        c(bool(why) and any(want in w for w in why), "seed: %r must be rejected (%s), got %s" % (extra, want, why))
    c(bool(check_flags(base, env={})), "seed: tp 8 without CUDA_DEVICE_MAX_CONNECTIONS=1 must be rejected")

    answers = commands = 0
    for model, extra in SWEEP:
        cmd = [REMAT, "plan", "--framework", "megatron", "--model", model] + extra.split() + COMMON
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not c(p.returncode == 0, "%s: rc %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[:300])):
            continue
        j = json.loads(p.stdout)
        run_args, rows = flag_strings(j)
        c(bool(run_args), "%s %s: no megatron_args" % (model, extra))
        for key, flags, env, whole in rows:
            if whole:      # the command alone: its environment first, then every flag
                cenv, full = split_env(flags)
                c(cenv == env, "%s %s [%s]: the command's environment %s is not the row's env %s"
                  % (model, extra, key, cenv, env))
                fine = "--fine-grained-activation-offloading" in full.split()
                c((cenv.get("NVTE_CPU_OFFLOAD_V1") == "1") == fine,   # arguments.py:1939 (TE >= 2.10)
                  "%s %s [%s]: NVTE_CPU_OFFLOAD_V1=1 %s fine-grained offloading" % (model, extra, key, cenv))
                commands += 1
            else:
                full = run_args + " " + flags
            why = check_flags(full, env)
            answers += 1
            c(not why, "%s %s [%s]: Megatron would reject %r: %s" % (model, extra, key, flags, why))
    # the layout search: each top layout's run arguments and every answer's command, as above
    searched = 0
    for model, extra in SEARCH:
        cmd = [REMAT, "plan", "--framework", "megatron", "--model", model] + extra.split() + ["--json"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not c(p.returncode == 0, "%s: rc %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[:300])):
            continue
        j = json.loads(p.stdout)
        c(len(j["layouts"]) == 5, "%s %s: %d layouts, not 5" % (model, extra, len(j["layouts"])))
        for lay in j["layouts"]:
            run_args, rows = flag_strings(lay)
            c(bool(run_args) and len(rows) >= 2,
              "%s %s rank %d: no megatron_args or no answer" % (model, extra, lay["rank"]))
            for key, flags, env, whole in rows:
                if whole:
                    cenv, full = split_env(flags)
                    c(cenv == env, "%s rank %d [%s]: the command's environment %s is not the row's env %s"
                      % (model, lay["rank"], key, cenv, env))
                else:
                    full = run_args + " " + flags
                why = check_flags(full, env)
                searched += 1
                c(not why, "%s %s rank %d [%s]: Megatron would reject %r: %s" % (model, extra, lay["rank"], key, full, why))
    c(searched >= len(SEARCH) * 5 * 2, "only %d flag sets from the search" % searched)
    c(answers >= len(SWEEP), "only %d answers for %d layouts" % (answers, len(SWEEP)))
    c(commands * 2 == answers, "%d whole commands for %d answers: each row's flags need its command" % (commands, answers))
    print("%d layouts, %d answers checked against megatron-core and arguments.py@%s; the search's top layouts: %d flag sets"
          % (len(SWEEP), answers, COMMIT[:7], searched))
    return report(NAME, c.good, c.bad)


if __name__ == "__main__":
    sys.exit(main())
