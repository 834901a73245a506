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
    return report("py_safetensors_oracle", passed, failed)


if __name__ == "__main__":
    sys.exit(main())
