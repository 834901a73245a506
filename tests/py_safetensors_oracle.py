#!/usr/bin/python3
"""Safetensors oracle: remat's weight files, read by an independent reader
and run by an independent model, give remat's logits and loss.

For each config below, $BUILD/tests/tool_weights (env BUILD, default
"build") trains a small model for two steps (so biases and LayerNorm
weights are not 0 and 1), writes its weights with remat_weights_save, loads
the file back with remat_weights_load, and dumps the loaded model's eval
logits and loss on one batch (layout in tests/tool_weights.c).

This script reads the file itself -- safetensors with json + numpy (the
8-byte little-endian header length, the JSON header, raw little-endian
float32), checking the header as it goes -- and builds GPT-2 in PyTorch in
float64 the way Hugging Face's GPT2Model lays it out:

  wte.weight (V, C) unpadded, wpe.weight (maxT, C); per block h.{i}:
  ln_1, attn.c_attn and attn.c_proj, ln_2, mlp.c_fc and mlp.c_proj, where
  c_* are Conv1D: y = x @ weight + bias with weight stored (in, out);
  ln_f; logits = ln_f(h) @ wte.weight^T; GELU(approximate='tanh'); causal
  softmax attention scaled by 1/sqrt(C/NH), heads from __metadata__ n_head.

The same is done for the llm.c format (256 int32 header, then llm.c's
tensor order, Linear weights stored (out, in), wte with Vp rows).

Hugging Face model directories, both ways, values compared bit for bit:
  - remat writes (tool_weights hf-save: remat_weights_save_hf, then its
    parameters dumped with the parameter table), this script reads: the
    config.json keys and types transformers' LlamaConfig / GPT2Config read,
    the index against the shards (every tensor where weight_map says,
    total_size, the shard names, and huggingface_hub's greedy split redone
    on the file order), Llama's names and shapes (q_proj, k_proj, v_proj
    the rows of remat's qkvw, gate_proj and up_proj of gateupw, lm_head only
    untied, no padded vocabulary rows), every value equal to the dumped
    parameter (F32) or to it rounded to nearest even (BF16);
  - this script writes (its own shard boundaries and names, BF16 and F32
    tensors mixed, no remat metadata, header keys in another order, the
    rotary inv_freq buffers of older Llama checkpoints; GPT-2 with the
    "transformer." prefix, attn.bias buffers and the tied lm_head.weight),
    remat reads (tool_weights load): the loaded parameters equal the ones
    written.

Tolerances (remat computes in float32; the reference in float64): logits
max|d| / max|ref| <= 5e-6 over the first V columns, loss |d| <= 2e-6, the
same bounds as tests/py_torch_oracle.py.

Needs Debian's python3-torch and python3-numpy for /usr/bin/python3.
Without them it skips (exit 77, tests/harness.py), which tests/run_tests.sh
counts as a failure under CI=true, since this test is marked
REMAT_TEST_REQUIRED.
"""
# REMAT_TEST_REQUIRED: CI installs python3-torch; the independent reader must run there
import json
import os
import struct
import subprocess
import sys
import tempfile

# (name, L, C, NH, V, T, B)
CONFIGS = [
    ("a: L2 C64 NH4 V256 T16 B3", 2, 64, 4, 256, 16, 3),
    ("b: odd C36 NH1 V101 T5 B2", 2, 36, 1, 101, 5, 2),
    ("c: L3 C48 NH6 V77 T9 B2", 3, 48, 6, 77, 9, 2),
]
# Hugging Face directories: (name, arch, L, C, NH, KV, hs, F, V, maxT, tied, dtype, shard bytes); 0: default
HF_DIRS = [
    ("d: llama untied KV2<NH4 hs6!=C/NH, 3+ shards", "llama", 2, 16, 4, 2, 6, 20, 70, 32, 0, "fp32", 2000),
    ("e: llama tied KV1 hs8, bf16, one file", "llama", 2, 24, 3, 1, 8, 40, 77, 16, 1, "bf16", 0),
    ("f: llama untied KV=NH hs=C/NH F default, bf16 shards", "llama", 3, 32, 4, 0, 0, 0, 101, 64, 0, "bf16", 3000),
    ("g: gpt2, shards", "gpt2", 2, 32, 4, 0, 0, 0, 70, 16, 1, "fp32", 3000),
]
TOL_LOGITS = 5e-6
TOL_LOSS = 2e-6

BLOCK = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
         "mlp.c_proj.weight", "mlp.c_proj.bias"]


from harness import report, skip

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover
    skip("py_safetensors_oracle",
         "PyTorch/numpy not available for /usr/bin/python3 (%s); install python3-torch" % e)


def read_safetensors(path):
    """Returns ({name: float64 ndarray}, metadata), checking the header."""
    b = open(path, "rb").read()
    assert len(b) >= 8, "file shorter than the header length"
    (n,) = struct.unpack("<Q", b[:8])
    assert 8 + n <= len(b), "header length past the end"
    assert (8 + n) % 8 == 0, "data region not 8-byte aligned"
    hdr = json.loads(b[8:8 + n].decode("utf-8"))
    meta = hdr.pop("__metadata__", {})
    data = b[8 + n:]
    spans = []
    out = {}
    for name, e in hdr.items():
        assert set(e) == {"dtype", "shape", "data_offsets"}, (name, e)
        assert e["dtype"] == "F32", (name, e["dtype"])
        b0, b1 = e["data_offsets"]
        count = int(np.prod(e["shape"])) if e["shape"] else 1
        assert b1 - b0 == 4 * count, (name, e)
        spans.append((b0, b1))
        out[name] = np.frombuffer(data[b0:b1], dtype="<f4").reshape(e["shape"]).astype(np.float64)
    spans.sort()
    at = 0
    for b0, b1 in spans:
        assert b0 == at, "tensors leave a gap or overlap at %d" % at
        at = b1
    assert at == len(data), "data region not fully covered"
    return out, meta


def read_llmc(path):
    """Returns the HF-named tensors (Linear weights transposed to Conv1D's
    (in, out)) and n_head, from an llm.c version-3 checkpoint."""
    b = open(path, "rb").read()
    h = struct.unpack("<256i", b[:1024])
    assert h[0] == 20240326 and h[1] == 3, h[:2]
    maxT, V, L, NH, C, Vp = h[2:8]
    p = np.frombuffer(b[1024:], dtype="<f4").astype(np.float64)
    shapes = [("wte", (Vp, C)), ("wpe", (maxT, C)), ("ln1w", (L, C)), ("ln1b", (L, C)), ("qkvw", (L, 3 * C, C)),
              ("qkvb", (L, 3 * C)), ("attprojw", (L, C, C)), ("attprojb", (L, C)), ("ln2w", (L, C)),
              ("ln2b", (L, C)), ("fcw", (L, 4 * C, C)), ("fcb", (L, 4 * C)), ("fcprojw", (L, C, 4 * C)),
              ("fcprojb", (L, C)), ("lnfw", (C,)), ("lnfb", (C,))]
    t, off = {}, 0
    for name, s in shapes:
        k = int(np.prod(s))
        t[name] = p[off:off + k].reshape(s)
        off += k
    assert off == p.size, "llm.c file size does not match its header"
    out = {"wte.weight": t["wte"][:V], "wpe.weight": t["wpe"], "ln_f.weight": t["lnfw"], "ln_f.bias": t["lnfb"]}
    for i in range(L):
        vals = [t["ln1w"][i], t["ln1b"][i], t["qkvw"][i].T, t["qkvb"][i], t["attprojw"][i].T, t["attprojb"][i],
                t["ln2w"][i], t["ln2b"][i], t["fcw"][i].T, t["fcb"][i], t["fcprojw"][i].T, t["fcprojb"][i]]
        for k, v in zip(BLOCK, vals):
            out["h.%d.%s" % (i, k)] = v
    assert not np.any(t["wte"][V:]), "padded vocabulary rows are not zero"
    return out, {"n_head": str(NH)}


def hf_gpt2_forward(w, n_head, inputs):
    """GPT2Model + tied LM head, float64, from HF-layout tensors."""
    T = inputs.shape[1]
    L = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("h."))
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in w.items()}
    C = t["wte.weight"].shape[1]
    hs = C // n_head
    idx = torch.from_numpy(np.array(inputs)).long()
    x = t["wte.weight"][idx] + t["wpe.weight"][:T]
    ln = lambda a, i: torch.nn.functional.layer_norm(a, (C,), t[i + ".weight"], t[i + ".bias"], eps=1e-5)
    conv1d = lambda a, i: a @ t[i + ".weight"] + t[i + ".bias"]   # Conv1D: weight is (in, out)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        p = "h.%d." % i
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=-1)
        sh = lambda a: a.view(a.shape[0], T, n_head, hs).transpose(1, 2)
        q, k, v = sh(q), sh(k), sh(v)
        att = (q @ k.transpose(-2, -1)) / (hs ** 0.5)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(x.shape)
        x = x + conv1d(y, p + "attn.c_proj")
        f = torch.nn.functional.gelu(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh")
        x = x + conv1d(f, p + "mlp.c_proj")
    return ln(x, "ln_f") @ t["wte.weight"].T


def read_dump(path):
    b = open(path, "rb").read()
    magic, ver, B, T, V, Vp = struct.unpack("<6i", b[:24])
    assert magic == 0x54485357 and ver == 1, (magic, ver)
    N = B * T
    o = 24
    inputs = np.frombuffer(b[o:o + 4 * N], dtype="<i4").reshape(B, T); o += 4 * N
    targets = np.frombuffer(b[o:o + 4 * N], dtype="<i4").reshape(B, T); o += 4 * N
    logits = np.frombuffer(b[o:o + 4 * N * Vp], dtype="<f4").reshape(B, T, Vp).astype(np.float64); o += 4 * N * Vp
    (loss,) = struct.unpack("<f", b[o:o + 4])
    assert o + 4 == len(b)
    return inputs, targets, logits[:, :, :V], loss, V


def check(name, fmt, cfg, tool, tmp):
    L, C, NH, V, T, B = cfg
    wpath = os.path.join(tmp, "w." + ("safetensors" if fmt == "safetensors" else "bin"))
    dpath = os.path.join(tmp, "dump.bin")
    r = subprocess.run([tool, fmt, wpath, str(L), str(C), str(NH), str(V), str(T), str(B), dpath],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s [%s]: tool_weights: %s" % (name, fmt, r.stderr.strip()))
        return False
    w, meta = read_safetensors(wpath) if fmt == "safetensors" else read_llmc(wpath)
    want = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"} | {"h.%d.%s" % (i, k) for i in range(L)
                                                                       for k in BLOCK}
    ok = True
    if set(w) != want:
        print("FAIL %s [%s]: tensor names differ from HF GPT-2: extra %s, missing %s"
              % (name, fmt, sorted(set(w) - want)[:5], sorted(want - set(w))[:5]))
        return False
    shapes = {"wte.weight": (V, C), "wpe.weight": (T + 3, C), "h.0.attn.c_attn.weight": (C, 3 * C),
              "h.0.attn.c_proj.weight": (C, C), "h.0.mlp.c_fc.weight": (C, 4 * C),
              "h.0.mlp.c_proj.weight": (4 * C, C), "h.0.mlp.c_fc.bias": (4 * C,)}
    for k, s in shapes.items():
        if tuple(w[k].shape) != s:
            print("FAIL %s [%s]: %s has shape %s, HF GPT-2 has %s" % (name, fmt, k, w[k].shape, s))
            ok = False
    n_head = int(meta.get("n_head", "0"))
    if n_head != NH:
        print("FAIL %s [%s]: n_head %d recorded, want %d" % (name, fmt, n_head, NH))
        return False
    inputs, targets, logits, loss, Vd = read_dump(dpath)
    ref = hf_gpt2_forward(w, n_head, inputs)
    ref_loss = torch.nn.functional.cross_entropy(ref.reshape(-1, V), torch.from_numpy(np.array(targets)).long().reshape(-1))
    d_logits = float(np.abs(ref.numpy() - logits).max() / np.abs(ref.numpy()).max())
    d_loss = abs(float(ref_loss) - loss)
    good = d_logits <= TOL_LOGITS and d_loss <= TOL_LOSS
    print("%s %s [%s]: logits rel %.2e (tol %.0e), loss %.6f vs %.6f |d| %.2e (tol %.0e)"
          % ("ok  " if good else "FAIL", name, fmt, d_logits, TOL_LOGITS, loss, float(ref_loss), d_loss, TOL_LOSS))
    return ok and good


# ---- Hugging Face directories ---------------------------------------------------------------

def read_params(path):
    """A tool_weights PARAMS dump: (config dict, {name: array shaped as remat lays it out}, flat f32)."""
    b = open(path, "rb").read()
    h = struct.unpack("<14i", b[:56])
    assert h[0] == 0x4d525052 and h[1] == 1, h[:2]
    d = struct.unpack("<5d", b[56:96])
    keys = ["arch", "L", "C", "NH", "KV", "hs", "F", "V", "maxT", "tied", "rope_type", "rope_orig"]
    cfg = dict(zip(keys, h[2:]))
    cfg.update(zip(["rope_theta", "norm_eps", "rope_factor", "rope_low", "rope_high"], d))
    (count,) = struct.unpack("<i", b[96:100])
    o = 100
    tabs = []
    for _ in range(count):
        name = b[o:o + 16].split(b"\0")[0].decode()
        off, numel = struct.unpack("<2q", b[o + 16:o + 32])
        shape = [x for x in struct.unpack("<3i", b[o + 32:o + 44]) if x]
        tabs.append((name, off, numel, shape))
        o += 44
    (n,) = struct.unpack("<q", b[o:o + 8])
    flat = np.frombuffer(b[o + 8:o + 8 + 4 * n], dtype="<f4")
    assert o + 8 + 4 * n == len(b)
    P = {}
    for name, off, numel, shape in tabs:
        assert int(np.prod(shape)) == numel, (name, shape, numel)
        P[name] = flat[off:off + numel].reshape(shape)
    assert sum(t[2] for t in tabs) == n, "the tensors cover the vector"
    return cfg, P, flat


def bf16_bits(x):
    """float32 array -> its bfloat16 bits, rounded to nearest even (uint16)."""
    u = np.ascontiguousarray(x, dtype="<f4").view("<u4").astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype("<u2")


def read_st_raw(path):
    """{name: (dtype, shape, raw bytes)}, (metadata, order by offset), checking the header."""
    b = open(path, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    assert (8 + n) % 8 == 0 and 8 + n <= len(b)
    hdr = json.loads(b[8:8 + n].decode("utf-8"))
    meta = hdr.pop("__metadata__", {})
    data = b[8 + n:]
    out, spans = {}, []
    for name, e in hdr.items():
        assert set(e) == {"dtype", "shape", "data_offsets"}, (name, e)
        assert e["dtype"] in ("F32", "BF16"), (name, e["dtype"])
        b0, b1 = e["data_offsets"]
        size = {"F32": 4, "BF16": 2}[e["dtype"]]
        assert b1 - b0 == size * int(np.prod(e["shape"])), (name, e)
        out[name] = (e["dtype"], tuple(e["shape"]), data[b0:b1])
        spans.append((b0, b1, name))
    spans.sort()
    at = 0
    for b0, b1, _ in spans:
        assert b0 == at, "gap or overlap"
        at = b1
    assert at == len(data), "data region not covered"
    return out, meta, [s[2] for s in spans]


def hf_split(sizes, limit):
    """huggingface_hub's split_state_dict_into_shards, redone: shard index per tensor."""
    shards, cur, cur_size = [], [], 0
    for i, size in enumerate(sizes):
        if size > limit:
            shards.append([i])
            continue
        if cur_size + size > limit:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append(i)
        cur_size += size
    if cur:
        shards.append(cur)
    of = [None] * len(sizes)
    for k, members in enumerate(shards):
        for i in members:
            of[i] = k
    return of


LLAMA_BLOCK = ["input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
               "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
               "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"]


def model_order(config):
    """The tensors in the order remat writes them (its parameter table's)."""
    if config["model_type"] == "llama":
        L = config["num_hidden_layers"]
        return (["model.embed_tokens.weight"] + ["model.layers.%d.%s" % (l, k) for l in range(L) for k in LLAMA_BLOCK] +
                ["model.norm.weight", "lm_head.weight"])
    L = config["n_layer"]
    return ["wte.weight", "wpe.weight"] + ["h.%d.%s" % (l, k) for l in range(L) for k in BLOCK] + ["ln_f.weight",
                                                                                                  "ln_f.bias"]


def read_hf_dir(d, limit, fails):
    """config.json and {name: (dtype, shape, bytes)} of a directory remat wrote, with its index checked."""
    config = json.load(open(os.path.join(d, "config.json")))
    single = os.path.join(d, "model.safetensors")
    index = os.path.join(d, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(single):
        if os.path.exists(index):
            fails.append("both model.safetensors and the index")
        t, meta, _ = read_st_raw(single)
        tensors.update(t)
        return config, tensors, meta
    ix = json.load(open(index))
    wm = ix["weight_map"]
    files = sorted(set(wm.values()))
    N = len(files)
    want_files = ["model-%05d-of-%05d.safetensors" % (k + 1, N) for k in range(N)]
    if files != want_files:
        fails.append("shard names %s, want %s" % (files[:3], want_files[:3]))
    order, total, meta = [], 0, {}
    for k, f in enumerate(files):
        t, meta, by_off = read_st_raw(os.path.join(d, f))
        for name in by_off:
            if wm.get(name) != f:
                fails.append("%s is in %s, the index says %s" % (name, f, wm.get(name)))
            order.append((name, len(t[name][2]), k))
            total += len(t[name][2])
        tensors.update(t)
    if set(tensors) != set(wm):
        fails.append("the index and the shards hold different tensors")
    if ix["metadata"].get("total_size") != total:
        fails.append("total_size %s, the shards hold %d" % (ix["metadata"].get("total_size"), total))
    # the model's order: remat's parameter table (the globals before the
    # blocks, each block's tensors, the globals after)
    rank = {n: i for i, n in enumerate(model_order(config))}
    order.sort(key=lambda t: rank.get(t[0], -1))
    if [k for _, _, k in order] != hf_split([s for _, s, _ in order], limit):
        fails.append("the shards are not huggingface_hub's split of the tensors in the model's order")
    if len(files) < 3:
        fails.append("only %d shards with a %d-byte limit" % (len(files), limit))
    return config, tensors, meta


def llama_hf(cfg, P):
    """LlamaForCausalLM's state dict (HF names, shapes) from remat's parameters."""
    L, NH, KV, hs, F, V = cfg["L"], cfg["NH"], cfg["KV"], cfg["hs"], cfg["F"], cfg["V"]
    out = {"model.embed_tokens.weight": P["wte"][:V], "model.norm.weight": P["lnfw"]}
    if not cfg["tied"]:
        out["lm_head.weight"] = P["lmheadw"][:V]
    for l in range(L):
        p = "model.layers.%d." % l
        qkv, gu = P["qkvw"][l], P["gateupw"][l]
        out[p + "input_layernorm.weight"] = P["ln1w"][l]
        out[p + "self_attn.q_proj.weight"] = qkv[:NH * hs]
        out[p + "self_attn.k_proj.weight"] = qkv[NH * hs:(NH + KV) * hs]
        out[p + "self_attn.v_proj.weight"] = qkv[(NH + KV) * hs:]
        out[p + "self_attn.o_proj.weight"] = P["attprojw"][l]
        out[p + "post_attention_layernorm.weight"] = P["ln2w"][l]
        out[p + "mlp.gate_proj.weight"] = gu[:F]
        out[p + "mlp.up_proj.weight"] = gu[F:]
        out[p + "mlp.down_proj.weight"] = P["fcprojw"][l]
    return out


def gpt2_hf(cfg, P):
    """GPT2Model's state dict: Conv1D weights (in, out), the transpose of remat's (out, in)."""
    out = {"wte.weight": P["wte"][:cfg["V"]], "wpe.weight": P["wpe"], "ln_f.weight": P["lnfw"], "ln_f.bias": P["lnfb"]}
    for l in range(cfg["L"]):
        vals = [P["ln1w"][l], P["ln1b"][l], P["qkvw"][l].T, P["qkvb"][l], P["attprojw"][l].T, P["attprojb"][l],
                P["ln2w"][l], P["ln2b"][l], P["fcw"][l].T, P["fcb"][l], P["fcprojw"][l].T, P["fcprojb"][l]]
        for k, v in zip(BLOCK, vals):
            out["h.%d.%s" % (l, k)] = v
    return out


def check_config_json(config, cfg, arch, dtype, fails):
    """The keys transformers reads, with the types it expects."""
    if arch == "llama":
        want = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": cfg["C"],
                "intermediate_size": cfg["F"], "num_hidden_layers": cfg["L"], "num_attention_heads": cfg["NH"],
                "num_key_value_heads": cfg["KV"], "head_dim": cfg["hs"], "vocab_size": cfg["V"],
                "max_position_embeddings": cfg["maxT"], "rms_norm_eps": cfg["norm_eps"],
                "rope_theta": cfg["rope_theta"], "rope_scaling": None, "tie_word_embeddings": bool(cfg["tied"]),
                "hidden_act": "silu", "attention_bias": False, "mlp_bias": False}
        floats = ["rms_norm_eps", "rope_theta"]
    else:
        want = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": cfg["C"], "n_layer": cfg["L"],
                "n_head": cfg["NH"], "n_positions": cfg["maxT"], "vocab_size": cfg["V"], "n_inner": None,
                "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
        floats = ["layer_norm_epsilon"]
    want["torch_dtype"] = "bfloat16" if dtype == "bf16" else "float32"
    for k, v in want.items():
        if k not in config or config[k] != v or type(config[k]) is not type(v):
            fails.append("config.json %s = %r, want %r" % (k, config.get(k, "(absent)"), v))
    for k in floats:
        if not isinstance(config.get(k), float):
            fails.append("config.json %s is not a float" % k)


def compare_tensors(got, want, dtype, fails):
    """got: {name: (dtype, shape, bytes)} from a file; want: {name: float32 array}; bit for bit."""
    if set(got) != set(want):
        fails.append("names: extra %s, missing %s" % (sorted(set(got) - set(want))[:4], sorted(set(want) - set(got))[:4]))
        return
    for name, arr in want.items():
        dt, shape, raw = got[name]
        if tuple(shape) != tuple(arr.shape):
            fails.append("%s has shape %s, want %s" % (name, shape, arr.shape))
            continue
        if dt == "F32":
            same = raw == np.ascontiguousarray(arr, dtype="<f4").tobytes()
        else:
            same = raw == bf16_bits(arr).tobytes()
        if dt != ("BF16" if dtype == "bf16" else "F32") or not same:
            fails.append("%s: %s values differ from the parameters" % (name, dt))


def check_hf_save(case, tool, tmp):
    name, arch, L, C, NH, KV, hs, F, V, maxT, tied, dtype, shard = case
    d = os.path.join(tmp, "hf-" + name[0])
    pp = os.path.join(tmp, "params-" + name[0])
    r = subprocess.run([tool, "hf-save", d, arch] + [str(x) for x in (L, C, NH, KV, hs, F, V, maxT, tied)] +
                       [dtype, str(shard), pp], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s: tool_weights hf-save: %s" % (name, r.stderr.strip()))
        return False
    cfg, P, _ = read_params(pp)
    fails = []
    config, tensors, meta = read_hf_dir(d, shard, fails)
    check_config_json(config, cfg, arch, dtype, fails)
    for v in ("wte", "lmheadw"):
        if v in P and np.any(P[v][cfg["V"]:]):
            fails.append("%s's padded vocabulary rows are not zero" % v)
    compare_tensors(tensors, llama_hf(cfg, P) if arch == "llama" else gpt2_hf(cfg, P), dtype, fails)
    if meta.get("format") != "pt" or meta.get("n_head") != str(cfg["NH"]):
        fails.append("metadata %s" % meta)
    if arch == "llama" and (meta.get("n_kv_head") != str(cfg["KV"]) or meta.get("head_dim") != str(cfg["hs"])):
        fails.append("llama metadata %s" % meta)
    for f in fails[:6]:
        print("FAIL %s [remat writes]: %s" % (name, f))
    if not fails:
        print("ok   %s [remat writes]: %d tensors, config.json, index and values checked" % (name, len(tensors)))
    return not fails, cfg, P


def write_st(path, tensors, pad=5):
    """safetensors of {name: (dtype, array)}, header keys in reverse order, padded with spaces."""
    hdr, blobs, at = {}, [], 0
    for name, (dt, arr) in tensors.items():
        raw = bf16_bits(arr).tobytes() if dt == "BF16" else np.ascontiguousarray(arr, dtype="<f4").tobytes()
        hdr[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(dict(reversed(list(hdr.items())))).encode() + b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16_value(arr):
    """the float32 values of arr rounded to bfloat16"""
    return (bf16_bits(arr).astype("<u4") << 16).view("<f4")


def check_hf_read(case, cfg, P, tool, tmp):
    """This script writes a directory its own way; remat must load exactly what it wrote."""
    name, arch = case[0], case[1]
    d = os.path.join(tmp, "py-" + name[0])
    os.makedirs(d)
    hf = llama_hf(cfg, P) if arch == "llama" else gpt2_hf(cfg, P)
    # every other tensor in BF16 (rounded here), the rest F32
    typed = {}
    for i, (k, v) in enumerate(hf.items()):
        typed[k] = ("BF16", v) if i % 2 else ("F32", v)
    expect = {}
    for k, (dt, v) in typed.items():
        expect[k] = bf16_value(v).reshape(v.shape) if dt == "BF16" else np.asarray(v, dtype="<f4")
    if arch == "llama":
        config = {"model_type": "llama", "hidden_size": cfg["C"], "intermediate_size": cfg["F"],
                  "num_hidden_layers": cfg["L"], "num_attention_heads": cfg["NH"], "num_key_value_heads": cfg["KV"],
                  "vocab_size": cfg["V"], "max_position_embeddings": cfg["maxT"], "rms_norm_eps": 1e-5,
                  "rope_theta": 500000.0, "tie_word_embeddings": bool(cfg["tied"]), "torch_dtype": "bfloat16",
                  "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8}}
        if cfg["hs"] * cfg["NH"] != cfg["C"]:
            config["head_dim"] = cfg["hs"]
        for l in range(cfg["L"]):   # older checkpoints' rotary buffers
            typed["model.layers.%d.self_attn.rotary_emb.inv_freq" % l] = ("F32", np.ones(cfg["hs"] // 2, "<f4"))
        # a shard per block, the globals in the last
        groups = {}
        for k in typed:
            g = int(k.split(".")[2]) if k.startswith("model.layers.") else cfg["L"]
            groups.setdefault(g, {})[k] = typed[k]
        files = sorted(groups)
        wm = {}
        for i, g in enumerate(files):
            fn = "model-%05d-of-%05d.safetensors" % (i + 1, len(files))
            write_st(os.path.join(d, fn), groups[g], pad=i + 1)
            wm.update({k: fn for k in groups[g]})
        json.dump({"metadata": {"total_size": 0}, "weight_map": wm}, open(os.path.join(d, "model.safetensors.index.json"), "w"),
                  indent=2, sort_keys=True)
    else:
        config = {"model_type": "gpt2", "n_embd": cfg["C"], "n_layer": cfg["L"], "n_head": cfg["NH"],
                  "n_positions": cfg["maxT"], "vocab_size": cfg["V"]}
        full = {"transformer." + k: v for k, v in typed.items()}
        for l in range(cfg["L"]):
            full["transformer.h.%d.attn.bias" % l] = ("F32", np.ones((1, 1, cfg["maxT"], cfg["maxT"]), "<f4"))
        full["lm_head.weight"] = typed["wte.weight"]
        write_st(os.path.join(d, "model.safetensors"), full)
    json.dump(config, open(os.path.join(d, "config.json"), "w"), indent=2)
    pp = os.path.join(tmp, "loaded-" + name[0])
    r = subprocess.run([tool, "load", d, pp], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL %s [remat reads]: tool_weights load: %s" % (name, r.stderr.strip()))
        return False
    lcfg, LP, _ = read_params(pp)
    fails = []
    for k in ("arch", "L", "C", "NH", "KV", "hs", "F", "V", "maxT", "tied"):
        if lcfg[k] != cfg[k]:
            fails.append("%s %s, wrote %s" % (k, lcfg[k], cfg[k]))
    if arch == "llama" and (lcfg["rope_theta"] != 500000.0 or lcfg["norm_eps"] != 1e-5 or lcfg["rope_type"] != 1 or
                            lcfg["rope_factor"] != 8.0 or lcfg["rope_orig"] != 8):
        fails.append("rope and norm settings %s" % lcfg)
    got = llama_hf(lcfg, LP) if arch == "llama" else gpt2_hf(lcfg, LP)
    for k, v in expect.items():
        if k not in got or got[k].shape != v.shape or got[k].astype("<f4").tobytes() != v.tobytes():
            fails.append("%s: loaded values differ from the ones written" % k)
    for f in fails[:6]:
        print("FAIL %s [remat reads]: %s" % (name, f))
    if not fails:
        print("ok   %s [remat reads]: %d tensors (F32 and BF16), loaded bit for bit" % (name, len(expect)))
    return not fails


def main():
    build = os.environ.get("BUILD", "build")
    tool = os.path.join(build, "tests", "tool_weights")
    if not os.path.exists(tool):
        print("FAIL: %s not built (make BUILD=%s all)" % (tool, build))
        return 1
    torch.set_num_threads(1)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, *cfg in CONFIGS:
            for fmt in ("safetensors", "llmc"):
                if check(name, fmt, cfg, tool, tmp):
                    passed += 1
                else:
                    failed += 1
        for case in HF_DIRS:
            ok, cfg, P = check_hf_save(case, tool, tmp)
            passed, failed = passed + ok, failed + (not ok)
            ok = check_hf_read(case, cfg, P, tool, tmp)
            passed, failed = passed + ok, failed + (not ok)
    return report("py_safetensors_oracle", passed, failed)


if __name__ == "__main__":
    sys.exit(main())
