"""oracle_lib.py -- what the PyTorch oracles share (it is not a test):
tests/py_torch_oracle.py (GPT-2) and tests/py_llama_oracle.py (Llama) each
write their model in float64 torch; this module runs $BUILD/tests/tool_oracle,
reads its dump (layout in tests/tool_oracle.c), and compares remat with the
model: the layout, the eval logits and loss, every parameter's gradient and
the global gradient norm of one step, then STEPS AdamW steps.

A model is an object with
  name                    the test's name (its summary line)
  param_names(d)          the parameter tensors in remat's order
  shapes(d)               their shapes, as remat_config_param_get gives them
  decay                   the names AdamW decays (remat's decay column must agree)
  padded(d)               the tensors whose rows V..Vp-1 are vocabulary padding
  parts(d)                {tensor: [(label, row0, row1)]}: stacked tensors
                          whose pieces are also checked on their own (rows
                          of each layer's matrix); may be {}
  check_config(d, cfg)    [(ok, message)]: the dump's resolved config is the
                          one asked for
  forward(P, d, x, y)     (logits (B,T,Vp), mean loss) from {name: tensor}
and each config a Config.  Every policy of a config runs remat once; the
torch reference is computed once and every dump is compared with it (and
with the first dump, which it must equal bit for bit).

A test imports this module, then calls require(its name), which skips it
(tests/harness.py, exit 77) when torch or numpy is missing, before it
imports torch itself.
"""
import collections
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

from harness import report, skip

try:
    import numpy as np
    import torch
    MISSING = None
    torch.set_num_threads(2)
except ImportError as e:
    MISSING = e


def require(name):
    """skips the test called name when torch or numpy is missing"""
    if MISSING is not None:
        skip(name, "the PyTorch oracle did not run: python3-torch/numpy missing (%s); "
             "install Debian's python3-torch and python3-numpy" % MISSING)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# remat's optimizer as tests/tool_oracle.c sets it
LR, BETAS, EPS, WD, CLIP = 1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0

# One run of tool_oracle per policy.  flags: tool_oracle's --name value
# pairs as a tuple of (name, value) (e.g. (("--arch", "llama"),)).
Config = collections.namedtuple("Config", "name L C NH V T B steps policies attention rows dtype flags")


def config(name, L, C, NH, V, T, B, steps, policies=("none",), attention="naive", rows=0, dtype="fp32", **flags):
    """A Config; flags by keyword: kv_heads=2 is --kv-heads 2."""
    fl = tuple(("--" + k.replace("_", "-"), str(v)) for k, v in flags.items())
    return Config(name, L, C, NH, V, T, B, steps, tuple(policies), attention, rows, dtype, fl)


# Tolerances: dict(logits, loss, grad, gnorm, train, param); param is per
# step (the bound after STEPS steps is param * STEPS).
Tol = collections.namedtuple("Tol", "logits loss grad gnorm train param")


def find_tool():
    build = os.environ.get("BUILD", "build")
    cands = [os.path.join(build, "tests", "tool_oracle")]
    if not os.path.isabs(build):
        cands.append(os.path.join(ROOT, build, "tests", "tool_oracle"))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    print("FAIL: %s not found (build it with `make`, or set BUILD)" % cands[0])
    sys.exit(1)


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, dtype, n):
        a = np.frombuffer(self.data, dtype=dtype, count=n, offset=self.pos)
        self.pos += a.nbytes
        return a

    def i32(self, n=1):
        return self.take("<i4", n)

    def f32(self, n=1):
        return self.take("<f4", n)

    def f64(self, n=1):
        return self.take("<f8", n)


def load(path):
    """tool_oracle's file (version 2) -> dict"""
    with open(path, "rb") as f:
        r = Reader(f.read())
    magic, version = r.i32(2)
    assert magic == 0x4C43524F and version == 2, "bad oracle file header (magic %#x, version %d; want 2)" \
        % (magic, version)
    L, C, NH, V, Vp, T, B, STEPS, NP, NT = (int(x) for x in r.i32(10))
    d = dict(L=L, C=C, NH=NH, V=V, Vp=Vp, T=T, B=B, STEPS=STEPS, NP=NP)
    keys = ("arch", "KV", "F", "hs", "tied", "rope_type", "rope_orig", "dtype")
    d.update(zip(keys, (int(x) for x in r.i32(len(keys)))))
    keys = ("rope_theta", "norm_eps", "rope_factor", "rope_low", "rope_high")
    d.update(zip(keys, (float(x) for x in r.f64(len(keys)))))
    d["layout"] = []
    for _ in range(NT):
        raw = bytes(r.take("u1", 16))
        name = raw.split(b"\0", 1)[0].decode("ascii")
        off, s0, s1, s2, per_layer, decay = (int(x) for x in r.i32(6))
        d["layout"].append((name, off, tuple(s for s in (s0, s1, s2) if s), per_layer, decay))
    N = B * T
    d["inputs"] = r.i32(N).reshape(B, T).astype(np.int64)
    d["targets"] = r.i32(N).reshape(B, T).astype(np.int64)
    d["params"] = r.f32(NP)
    d["logits"] = r.f32(N * Vp).reshape(B, T, Vp)
    d["eval_loss"] = float(r.f32()[0])
    d["grad_loss"], d["grad_norm"] = (float(x) for x in r.f32(2))
    d["grads"] = r.f32(NP)
    d["losses"] = r.f32(STEPS)
    d["final_params"] = r.f32(NP)
    assert r.pos == len(r.data), "trailing bytes in the oracle file"
    return d


def split(flat, d):
    """flat remat vector -> {name: float64 tensor} (a copy)"""
    out = {}
    for name, off, shape, _, _ in d["layout"]:
        n = int(np.prod(shape))
        out[name] = torch.from_numpy(flat[off:off + n].astype(np.float64).reshape(shape))
    return out


def rel(a, ref):
    """max|a - ref| / (max|ref| + 1e-12)"""
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - ref))) / (float(np.max(np.abs(ref))) + 1e-12)


def cross_entropy(logits, targets, V):
    """mean cross-entropy over the first V columns (the rest is padding)"""
    return torch.nn.functional.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))


def reference(model, d, steps):
    """The float64 model on the dump's parameters: the first step (logits,
    loss, gradients, gradient norm) and STEPS AdamW steps with global-norm
    clipping (torch.optim.AdamW, decay on model.decay only)."""
    names = [n for n, _, _, _, _ in d["layout"]]
    P0 = split(d["params"], d)
    inputs, targets = torch.from_numpy(d["inputs"]), torch.from_numpy(d["targets"])
    P = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
    logits, loss = model.forward(P, d, inputs, targets)
    loss.backward()
    ref = dict(logits=logits.detach().numpy(), loss=loss.item(), grads={n: P[n].grad.numpy() for n in names})
    ref["grad_norm"] = math.sqrt(sum(float((P[n].grad ** 2).sum()) for n in names))

    P = {k: torch.nn.Parameter(v.clone()) for k, v in P0.items()}
    opt = torch.optim.AdamW([
        {"params": [P[n] for n in names if n in model.decay], "weight_decay": WD},
        {"params": [P[n] for n in names if n not in model.decay], "weight_decay": 0.0},
    ], lr=LR, betas=BETAS, eps=EPS)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        _, loss = model.forward(P, d, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([P[n] for n in names], CLIP)
        opt.step()
        losses.append(loss.item())
    ref["losses"] = np.array(losses)
    ref["final"] = {n: P[n].detach().numpy() for n in names}
    return ref


def compare(model, d, ref, tol, check):
    """Checks one dump against the reference; returns its measurements
    {what: (error, where)}."""
    V, STEPS = d["V"], d["STEPS"]
    meas = {}
    e = rel(d["logits"][..., :V], ref["logits"][..., :V])
    meas["logits_rel"] = (e, "")
    check(e <= tol.logits, "eval logits (first V cols): max rel err %.2e <= %.0e" % (e, tol.logits))
    check(bool(np.all(d["logits"][..., V:] == 0)), "eval logits: padded columns V..Vp-1 are exactly 0")
    lref = ref["loss"]
    e1, e2 = abs(d["eval_loss"] - lref), abs(d["grad_loss"] - lref)
    meas["loss_abs"] = (max(e1, e2), "")
    check(e1 <= tol.loss, "eval loss %.7f vs torch %.7f: abs err %.2e <= %.0e" % (d["eval_loss"], lref, e1, tol.loss))
    check(e2 <= tol.loss, "step loss %.7f vs torch %.7f: abs err %.2e <= %.0e" % (d["grad_loss"], lref, e2, tol.loss))

    G = split(d["grads"], d)
    parts = model.parts(d)
    worst = (0.0, "")
    for name in G:
        pieces = [(name, None, None)] + [("%s.%s" % (name, lab), r0, r1) for lab, r0, r1 in parts.get(name, [])]
        for label, r0, r1 in pieces:
            g, gr = G[name].numpy(), ref["grads"][name]
            if r0 is not None:
                g, gr = g[..., r0:r1, :], gr[..., r0:r1, :]
            da = float(np.max(np.abs(g - gr)))
            er = rel(g, gr)
            if er >= worst[0]:
                worst = (er, label)
            check(er <= tol.grad, "grad %-14s max abs err %.2e, max|ref| %.2e, rel %.2e <= %.0e"
                  % (label, da, float(np.max(np.abs(gr))), er, tol.grad))
    meas["grad_rel"] = worst
    for name in model.padded(d):
        check(bool((G[name][V:] == 0).all()), "grad of padded %s rows is exactly 0" % name)
    e = abs(d["grad_norm"] - ref["grad_norm"]) / ref["grad_norm"]
    meas["gnorm_rel"] = (e, "")
    check(e <= tol.gnorm, "grad norm %.6f vs torch %.6f: rel err %.2e <= %.0e"
          % (d["grad_norm"], ref["grad_norm"], e, tol.gnorm))

    errs = np.abs(d["losses"].astype(np.float64) - ref["losses"]) / np.abs(ref["losses"])
    meas["train_loss_rel"] = (float(errs.max()), "")
    print("      step  remat        torch        rel err")
    for i in range(STEPS):
        print("      %4d  %.7f  %.7f  %.2e" % (i + 1, d["losses"][i], ref["losses"][i], errs[i]))
    check(float(errs.max()) <= tol.train, "%d training losses: max rel err %.2e <= %.0e"
          % (STEPS, float(errs.max()), tol.train))
    check(ref["losses"][-1] < ref["losses"][0],
          "training lowers the loss (%.4f -> %.4f)" % (ref["losses"][0], ref["losses"][-1]))
    FP = split(d["final_params"], d)
    tol_p = tol.param * STEPS * (LR / 1e-3)
    worst = (0.0, "")
    for name in FP:
        da = float(np.max(np.abs(FP[name].numpy() - ref["final"][name])))
        if da >= worst[0]:
            worst = (da, name)
    meas["param_abs"] = worst
    check(worst[0] <= tol_p, "params after %d steps: max abs err %.2e (%s) <= %.0e" % (STEPS, worst[0], worst[1], tol_p))
    for name in model.padded(d):
        check(bool((FP[name][V:] == 0).all()), "padded %s rows are still 0 after training" % name)
    return meas


def check_layout(model, cfg, d, check):
    """The header, the parameter table (names, shapes, decay, contiguous)
    and the batch."""
    L, C, NH, V, T, B = cfg.L, cfg.C, cfg.NH, cfg.V, cfg.T, cfg.B
    check((d["L"], d["C"], d["NH"], d["V"], d["T"], d["B"], d["STEPS"]) == (L, C, NH, V, T, B, cfg.steps)
          and d["Vp"] == (V + 63) // 64 * 64,
          "header: L C NH V T B = %d %d %d %d %d %d, Vp = %d" % (L, C, NH, V, T, B, d["Vp"]))
    check(d["dtype"] == (1 if cfg.dtype == "bf16" else 0), "dtype %s" % cfg.dtype)
    for ok, msg in model.check_config(d, cfg):
        check(ok, msg)
    names = [n for n, _, _, _, _ in d["layout"]]
    shapes = [s for _, _, s, _, _ in d["layout"]]
    offs = [o for _, o, _, _, _ in d["layout"]]
    contiguous = all(offs[i + 1] == offs[i] + int(np.prod(shapes[i])) for i in range(len(offs) - 1)) and \
        offs[0] == 0 and offs[-1] + int(np.prod(shapes[-1])) == d["NP"]
    check(names == model.param_names(d), "parameter names, in order: %s" % " ".join(names))
    check(shapes == model.shapes(d) and contiguous, "parameter shapes %s, contiguous" % shapes)
    decay = [n for n, _, _, _, dec in d["layout"] if dec]
    check(set(decay) == set(model.decay) & set(names), "remat decays exactly %s" % " ".join(decay))
    P0 = split(d["params"], d)
    for name in model.padded(d):
        check(bool((P0[name][V:] == 0).all()), "initial padded %s rows (%s) are zero"
              % (name, "%d..%d" % (V, d["Vp"] - 1) if d["Vp"] > V else "none: V = Vp"))
    check(bool(np.all(d["inputs"] < V) and np.all(d["inputs"] >= 0) and np.all(d["targets"] < V)
               and np.all(d["targets"] >= 0)), "tokens in [0, V)")


def tool_cmd(tool, path, cfg, policy):
    cmd = [tool, path] + [str(x) for x in (cfg.L, cfg.C, cfg.NH, cfg.V, cfg.T, cfg.B, cfg.steps)]
    cmd += [policy, cfg.attention, str(cfg.rows), cfg.dtype]
    for k, v in cfg.flags:
        cmd += [k, v]
    return cmd


def run_config(model, cfg, tol, tool, tmp):
    """Runs every policy of cfg and checks it: (failures, measurements)."""
    fails = []

    def check(ok, msg):
        print("    %s %s" % ("ok  " if ok else "FAIL", msg))
        if not ok:
            fails.append(msg)

    print("== config %s" % cfg.name)
    first, ref, meas = None, None, {}
    for policy in cfg.policies:
        path = os.path.join(tmp, "oracle.bin")
        cmd = tool_cmd(tool, path, cfg, policy)
        print("-- policy %s\n   %s" % (policy, " ".join(cmd[:1] + ["OUT"] + cmd[2:])))
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if p.returncode != 0:
            check(False, "tool_oracle exited %d: %s" % (p.returncode, p.stdout.strip()))
            continue
        d = load(path)
        if first is None:
            check_layout(model, cfg, d, check)
            first = (policy, d)
            ref = reference(model, d, cfg.steps)
        else:
            same = all(np.array_equal(d[k], first[1][k]) for k in
                       ("params", "logits", "grads", "losses", "final_params")) and \
                all(d[k] == first[1][k] for k in ("eval_loss", "grad_loss", "grad_norm"))
            check(same, "policy %s: every number bit-identical to policy %s%s"
                  % (policy, first[0], " (so its errors are those above)" if same else ""))
            if same:
                continue
        for k, v in compare(model, d, ref, tol, check).items():  # the worst over the policies
            if k not in meas or v[0] > meas[k][0]:
                meas[k] = v
    return fails, meas


def main(model, configs, tols):
    """Runs the configs (tols: {dtype: Tol}) and prints the summary; the
    exit code (tests/harness.py's report).  REMAT_ORACLE_DTYPES=fp32 (make
    test-cblas) keeps the configs of those dtypes only."""
    t0 = time.time()
    tool = find_tool()
    print("PyTorch oracle (%s): torch %s, numpy %s, reference in float64; tool %s"
          % (model.name, torch.__version__, np.__version__, tool))
    dtypes = os.environ.get("REMAT_ORACLE_DTYPES", "fp32,bf16").split(",")
    results = []
    with tempfile.TemporaryDirectory(prefix="remat_oracle_") as tmp:
        for cfg in configs:
            if cfg.dtype not in dtypes:
                continue
            try:
                fails, meas = run_config(model, cfg, tols[cfg.dtype], tool, tmp)
            except Exception as ex:  # a malformed file or a torch error is a failure, not a crash
                traceback.print_exc()
                fails, meas = ["exception: %r" % ex], {}
            results.append((cfg, fails, meas))
    print("\n== summary (%.1f s)" % (time.time() - t0))
    nfail = 0
    for cfg, fails, m in results:
        if m:
            detail = ("logits rel %.1e, loss abs %.1e, grad rel %.1e (%s), gnorm rel %.1e, "
                      "train loss rel %.1e, params abs %.1e (%s)" %
                      (m["logits_rel"][0], m["loss_abs"][0], m["grad_rel"][0], m["grad_rel"][1], m["gnorm_rel"][0],
                       m["train_loss_rel"][0], m["param_abs"][0], m["param_abs"][1]))
        else:
            detail = "no measurements"
        print("%s  %-38s %s" % ("PASS" if not fails else "FAIL", cfg.name, detail))
        for f in fails:
            print("      failed: %s" % f)
        nfail += bool(fails)
    print("%d of %d configs passed" % (len(results) - nfail, len(results)))
    return report(model.name, len(results) - nfail, nfail)
