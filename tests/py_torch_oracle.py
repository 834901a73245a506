#!/usr/bin/python3
"""PyTorch oracle: remat's forward, loss, every parameter gradient and ten
AdamW steps, checked against the same GPT-2 written in PyTorch.

For each config below, $BUILD/tests/tool_oracle (env BUILD, default "build")
dumps remat's initial parameters, eval logits and loss, one step's gradients,
and the losses of STEPS training steps (layout in tests/tool_oracle.c).  This
script rebuilds the model in torch in float64 from the same parameters, so
the measured differences are remat's float32 rounding (and any bug), not the
reference's:

  token embedding wte (Vp x C; rows V..Vp-1 are zero padding), learned
  position embedding wpe; pre-LN blocks: ln_1 (eps 1e-5), qkv = Linear(C,3C),
  causal softmax attention with scale 1/sqrt(hs), proj Linear(C,C),
  residual; ln_2, Linear(C,4C), GELU(approximate='tanh'), Linear(4C,C),
  residual; ln_f; logits = ln_f(x) @ wte^T over Vp columns, cross-entropy
  over the first V columns only; loss = mean.  The LM head is tied: one
  Parameter is used by the embedding and the head, so autograd sums the two
  gradient contributions, as remat does.

Then torch.optim.AdamW (decay 0.1 on wte wpe qkvw attprojw fcw fcprojw, 0 on
biases and LayerNorm weights; lr 1e-3, betas (0.9, 0.95), eps 1e-8) with
clip_grad_norm_(1.0) for STEPS steps on the same batch, compared with remat's
losses and its final parameters.

Needs Debian's python3-torch for /usr/bin/python3.  Without torch it skips
(exit 77, tests/harness.py), which tests/run_tests.sh counts as a failure
under CI=true, since this test is marked REMAT_TEST_REQUIRED.
"""
# REMAT_TEST_REQUIRED: CI installs python3-torch; the oracle of every gradient must run there
import math
import os
import struct
import subprocess
import sys
import tempfile
import time

# (name, L, C, NH, V, T, B, STEPS, policy[, attention, lmhead rows[, dtype]])
CONFIGS = [
    ("a: L2 C64 NH4 V256 T16 B3", 2, 64, 4, 256, 16, 3, 10, None),
    # C not a multiple of 8, one head, T = 1, V not a multiple of 64
    ("b: odd C36 NH1 V101 T1 B2", 2, 36, 1, 101, 1, 2, 10, None),
    # full recomputation (with --verify-recompute on) must give the same numbers
    ("c: L3 C48 NH6 V77 T9 B2 full", 3, 48, 6, 77, 9, 2, 10, "full"),
    # segments with the modifiers: recomputed att, ln1, ln2, fch_gelu
    ("d: L4 C32 NH2 V70 T8 B2 every:2,sel,pw", 4, 32, 2, 70, 8, 2, 10, "every:2,selective,pointwise"),
    # flash attention over more than one 64-row tile (T = 70) and the LM head
    # in chunks of 9 rows (not dividing B*T = 140), under full recomputation
    ("e: L2 C48 NH3 V90 T70 B2 flash,chunk:9,full", 2, 48, 3, 90, 70, 2, 10, "full", "flash", 9),
    # bf16 mixed precision (at the bf16 tolerances below): naive attention,
    # the whole LM head, under selective recomputation; then flash attention
    # over two tiles with the chunked head under full recomputation
    ("f: L2 C64 NH4 V256 T16 B3 bf16 selective", 2, 64, 4, 256, 16, 3, 10, "selective", "naive", 0, "bf16"),
    ("g: L2 C48 NH3 V90 T70 B2 bf16 flash,chunk:9,full", 2, 48, 3, 90, 70, 2, 10, "full", "flash", 9, "bf16"),
]
# Too slow for make test (a float64 124M model in torch, about a minute a
# config here); run by hand with REMAT_ORACLE_CONFIGS=124m-bf16,124m-fp32
# (README, "--dtype bf16"): the GPT-2 124M shape, B4 T64.  What they are
# for is the first step: logits, loss, gradients.  The parameter check
# after training (tolerance per step, set on the small configs) fails here
# in both precisions: AdamW's first steps move every weight by about lr
# times the sign of its gradient, and among 124M gradients some are so
# small that float32 rounding changes m/sqrt(v) visibly (5.7e-5 in fp32).
EXTRA_CONFIGS = {
    "124m-bf16": ("h: GPT-2 124M B4 T64 bf16", 12, 768, 12, 50257, 64, 4, 2, None, "naive", 0, "bf16"),
    "124m-fp32": ("i: GPT-2 124M B4 T64 fp32", 12, 768, 12, 50257, 64, 4, 2, None, "naive", 0, "fp32"),
}

# Tolerances.  remat computes in float32 (unit roundoff u = 6e-8) with
# double accumulators in LayerNorm statistics, softmax sums and the loss; the
# reference is float64, so its own error (1e-16) is negligible and what is
# measured is remat's rounding.  Measured on these configs (x86-64,
# OpenBLAS), and the bounds, about 5-10x the measured error:
#   logits   max|d| / max|ref| over the first V cols   measured <= 5e-7, tol 5e-6
#   loss     |d| (eval and step)     measured <= 2e-7 (loss ~ 4: ulp 5e-7), tol 2e-6
#   grads    max|d| / max|ref| per tensor              measured <= 6e-7, tol 5e-6
#   grad norm |d| / ref                                 measured <= 7e-8, tol 1e-6
# Training: AdamW normalises each gradient element, so float32 noise in a
# gradient becomes an O(noise/|g|) change in that element's update, and the
# two trajectories drift apart slowly:
#   losses   |d| / ref per step                         measured <= 6e-8, tol 2e-6
#   params   max|d| after STEPS steps    measured <= 1.8e-5 (config d, with the vectorised exp), tol 5e-6 * STEPS
#            (an update moves an element by at most ~lr = 1e-3 per step)
# The bounds are tight on purpose.  With the brief's looser suggestions
# (rel 1e-4) these seeded engine bugs passed: no weight decay on wpe (train
# loss rel err up to 8.6e-6), clip coefficient 1/(norm+1e-2) instead of
# 1/(norm+1e-6) (2.5e-5).  They fail now, as do an off-by-one AdamW step
# count, softmax over the padded vocabulary and attention scaled by
# 1/sqrt(C) (errors 1e-3..1e-1).
TOL_LOGITS_REL = 5e-6
TOL_LOSS_ABS = 2e-6
TOL_GRAD_REL = 5e-6
TOL_GNORM_REL = 1e-6
TOL_TRAIN_LOSS_REL = 2e-6
TOL_PARAM_ABS_PER_STEP = 5e-6
# bf16 (configs f, g): operands rounded to 8 bits of mantissa (u = 3.9e-3),
# the residual stream, statistics, sums and the loss in fp32.  Measured
# here (oneDNN), and the bounds, about 5x:
#   logits rel     measured <= 3.3e-3   tol 2e-2     loss abs   measured <= 5.8e-5   tol 5e-4
#   grads rel      measured <= 6.1e-3   tol 3e-2     grad norm  measured <= 2.7e-4   tol 2e-3
#   train losses   measured <= 1.3e-4   tol 1e-3     params abs measured <= 7.5e-4 per step, tol 4e-3
BF16_TOL = dict(logits=2e-2, loss=5e-4, grad=3e-2, gnorm=2e-3, train=1e-3, param=4e-3)

LR, BETAS, EPS, WD, CLIP = 1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0
PARAM_NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
               "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
DECAY = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}

from harness import report, skip

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    skip("py_torch_oracle", "the PyTorch oracle did not run: python3-torch/numpy missing (%s); "
         "install Debian's python3-torch and python3-numpy" % e)

torch.set_num_threads(2)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def load(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    magic, version = r.i32(2)
    assert magic == 0x4C43524F and version == 1, "bad oracle file header"
    L, C, NH, V, Vp, T, B, STEPS, NP, NT = (int(x) for x in r.i32(10))
    d = dict(L=L, C=C, NH=NH, V=V, Vp=Vp, T=T, B=B, STEPS=STEPS, NP=NP)
    assert NT == len(PARAM_NAMES)
    d["layout"] = [(int(t[0]), tuple(int(s) for s in t[1:] if s)) for t in r.i32(4 * NT).reshape(NT, 4)]
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


def expected_shapes(d):
    L, C, V, Vp, T = d["L"], d["C"], d["V"], d["Vp"], d["T"]
    return [(Vp, C), (T, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
            (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]


def split(flat, d):
    """flat remat vector -> {name: float64 tensor} (views into a copy)."""
    out = {}
    for name, (off, shape) in zip(PARAM_NAMES, d["layout"]):
        n = int(np.prod(shape))
        out[name] = torch.from_numpy(flat[off:off + n].astype(np.float64).reshape(shape))
    return out


def forward(P, d, inputs, targets):
    L, C, NH, V, T, B = d["L"], d["C"], d["NH"], d["V"], d["T"], d["B"]
    hs = C // NH
    x = P["wte"][inputs] + P["wpe"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        h = F.layer_norm(x, (C,), P["ln1w"][l], P["ln1b"][l], 1e-5)
        qkv = F.linear(h, P["qkvw"][l], P["qkvb"][l])
        q, k, v = qkv.split(C, dim=2)
        q, k, v = (t.reshape(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        s = s.masked_fill(~mask, float("-inf"))
        y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, P["attprojw"][l], P["attprojb"][l])
        h = F.layer_norm(x, (C,), P["ln2w"][l], P["ln2b"][l], 1e-5)
        h = F.gelu(F.linear(h, P["fcw"][l], P["fcb"][l]), approximate="tanh")
        x = x + F.linear(h, P["fcprojw"][l], P["fcprojb"][l])
    x = F.layer_norm(x, (C,), P["lnfw"], P["lnfb"], 1e-5)
    logits = x @ P["wte"].t()                       # (B, T, Vp), tied head
    loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
    return logits, loss


def rel(a, ref):
    """max|a - ref| / (max|ref| + 1e-12)"""
    a, ref = np.asarray(a, np.float64), np.asarray(ref, np.float64)
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a - ref))) / (float(np.max(np.abs(ref))) + 1e-12)


def run_config(name, L, C, NH, V, T, B, STEPS, policy, attention=None, lmhead_rows=0, dtype="fp32", tool=None,
               tmp=None):
    fails = []
    bf = dtype == "bf16"
    tol_logits = BF16_TOL["logits"] if bf else TOL_LOGITS_REL
    tol_loss = BF16_TOL["loss"] if bf else TOL_LOSS_ABS
    tol_grad = BF16_TOL["grad"] if bf else TOL_GRAD_REL
    tol_gnorm = BF16_TOL["gnorm"] if bf else TOL_GNORM_REL
    tol_train = BF16_TOL["train"] if bf else TOL_TRAIN_LOSS_REL
    tol_param = BF16_TOL["param"] if bf else TOL_PARAM_ABS_PER_STEP

    def check(ok, msg):
        print("    %s %s" % ("ok  " if ok else "FAIL", msg))
        if not ok:
            fails.append(msg)

    path = os.path.join(tmp, "oracle.bin")
    cmd = [tool, path] + [str(x) for x in (L, C, NH, V, T, B, STEPS)] + [policy or "none"]
    if attention:
        cmd += [attention, str(lmhead_rows)]
    if bf:
        cmd += [dtype]
    print("== config %s\n   %s" % (name, " ".join(cmd[:1] + ["OUT"] + cmd[2:])))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    if p.returncode != 0:
        check(False, "tool_oracle exited %d: %s" % (p.returncode, p.stdout.strip()))
        return fails, {}
    d = load(path)
    Vp = d["Vp"]

    # -- the file and the parameter layout
    check((d["L"], d["C"], d["NH"], d["V"], d["T"], d["B"]) == (L, C, NH, V, T, B) and Vp == (V + 63) // 64 * 64,
          "header: L C NH V T B = %d %d %d %d %d %d, Vp = %d" % (L, C, NH, V, T, B, Vp))
    shapes = [s for _, s in d["layout"]]
    offs = [o for o, _ in d["layout"]]
    contiguous = all(offs[i + 1] == offs[i] + int(np.prod(shapes[i])) for i in range(len(offs) - 1)) and \
        offs[0] == 0 and offs[-1] + int(np.prod(shapes[-1])) == d["NP"]
    check(shapes == expected_shapes(d) and contiguous, "parameter layout: llm.c order, shapes, contiguous")
    P0 = split(d["params"], d)
    check(bool((P0["wte"][V:] == 0).all()),
          "initial padded wte rows (%s) are zero" % ("%d..%d" % (V, Vp - 1) if Vp > V else "none: V = Vp"))
    check(bool(np.all(d["inputs"] < V) and np.all(d["inputs"] >= 0) and np.all(d["targets"] < V)
               and np.all(d["targets"] >= 0)), "tokens in [0, V)")

    # -- forward, loss and gradients in float64
    inputs = torch.from_numpy(d["inputs"])
    targets = torch.from_numpy(d["targets"])
    P = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
    logits, loss = forward(P, d, inputs, targets)
    loss.backward()
    meas = {}

    e = rel(d["logits"][..., :V], logits.detach()[..., :V].numpy())
    meas["logits_rel"] = e
    check(e <= tol_logits, "eval logits (first V cols): max rel err %.2e <= %.0e" % (e, tol_logits))
    check(bool(np.all(d["logits"][..., V:] == 0)), "eval logits: padded columns V..Vp-1 are exactly 0")
    lref = loss.item()
    e1, e2 = abs(d["eval_loss"] - lref), abs(d["grad_loss"] - lref)
    meas["loss_abs"] = max(e1, e2)
    check(e1 <= tol_loss, "eval loss %.7f vs torch %.7f: abs err %.2e <= %.0e" % (d["eval_loss"], lref, e1, tol_loss))
    check(e2 <= tol_loss, "step loss %.7f vs torch %.7f: abs err %.2e <= %.0e" % (d["grad_loss"], lref, e2, tol_loss))

    G = split(d["grads"], d)
    worst_rel, worst_name = 0.0, ""
    for nm in PARAM_NAMES:
        ref = P[nm].grad.numpy()
        da = float(np.max(np.abs(G[nm].numpy() - ref)))
        er = rel(G[nm].numpy(), ref)
        if er >= worst_rel:
            worst_rel, worst_name = er, nm
        check(er <= tol_grad, "grad %-8s max abs err %.2e, max|ref| %.2e, rel %.2e <= %.0e"
              % (nm, da, float(np.max(np.abs(ref))), er, tol_grad))
    meas["grad_rel"] = (worst_rel, worst_name)
    check(bool((G["wte"][V:] == 0).all()), "grad of padded wte rows is exactly 0")
    gn_ref = math.sqrt(sum(float((p.grad ** 2).sum()) for p in P.values()))
    e = abs(d["grad_norm"] - gn_ref) / gn_ref
    meas["gnorm_rel"] = e
    check(e <= tol_gnorm, "grad norm %.6f vs torch %.6f: rel err %.2e <= %.0e" % (d["grad_norm"], gn_ref, e, tol_gnorm))

    # -- STEPS AdamW steps with global-norm clipping, tied wte
    P = {k: torch.nn.Parameter(v.clone()) for k, v in P0.items()}
    opt = torch.optim.AdamW([
        {"params": [P[n] for n in PARAM_NAMES if n in DECAY], "weight_decay": WD},
        {"params": [P[n] for n in PARAM_NAMES if n not in DECAY], "weight_decay": 0.0},
    ], lr=LR, betas=BETAS, eps=EPS)
    ref_losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        _, loss = forward(P, d, inputs, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([P[n] for n in PARAM_NAMES], CLIP)
        opt.step()
        ref_losses.append(loss.item())
    ref_losses = np.array(ref_losses)
    errs = np.abs(d["losses"].astype(np.float64) - ref_losses) / np.abs(ref_losses)
    meas["train_loss_rel"] = float(errs.max())
    print("      step  remat        torch        rel err")
    for i in range(STEPS):
        print("      %4d  %.7f  %.7f  %.2e" % (i + 1, d["losses"][i], ref_losses[i], errs[i]))
    check(float(errs.max()) <= tol_train, "%d training losses: max rel err %.2e <= %.0e"
          % (STEPS, float(errs.max()), tol_train))
    check(ref_losses[-1] < ref_losses[0], "training lowers the loss (%.4f -> %.4f)" % (ref_losses[0], ref_losses[-1]))
    FP = split(d["final_params"], d)
    tol_p = tol_param * STEPS * (LR / 1e-3)
    worst, worst_name = 0.0, ""
    for nm in PARAM_NAMES:
        da = float(np.max(np.abs(FP[nm].numpy() - P[nm].detach().numpy())))
        if da >= worst:
            worst, worst_name = da, nm
    meas["param_abs"] = (worst, worst_name)
    check(worst <= tol_p, "params after %d steps: max abs err %.2e (%s) <= %.0e" % (STEPS, worst, worst_name, tol_p))
    check(bool((FP["wte"][V:] == 0).all()), "padded wte rows are still 0 after training")
    return fails, meas


def main():
    t0 = time.time()
    tool = find_tool()
    print("PyTorch oracle: torch %s, numpy %s, reference in float64; tool %s" % (torch.__version__, np.__version__, tool))
    results = []
    with tempfile.TemporaryDirectory(prefix="remat_oracle_") as tmp:
        # REMAT_ORACLE_DTYPES=fp32 (make test-cblas): only the configs of those dtypes
        dtypes = os.environ.get("REMAT_ORACLE_DTYPES", "fp32,bf16").split(",")
        configs = CONFIGS
        if os.environ.get("REMAT_ORACLE_CONFIGS"):
            configs = [EXTRA_CONFIGS[k] for k in os.environ["REMAT_ORACLE_CONFIGS"].split(",")]
        for cfg in configs:
            if (cfg[11] if len(cfg) > 11 else "fp32") not in dtypes:
                continue
            try:
                fails, meas = run_config(*cfg, tool=tool, tmp=tmp)
            except Exception as ex:  # a malformed file or a torch error is a failure, not a crash
                import traceback
                traceback.print_exc()
                fails, meas = ["exception: %r" % ex], {}
            results.append((cfg[0], fails, meas))
    print("\n== summary (%.1f s)" % (time.time() - t0))
    nfail = 0
    for name, fails, m in results:
        if m:
            detail = ("logits rel %.1e, loss abs %.1e, grad rel %.1e (%s), gnorm rel %.1e, "
                      "train loss rel %.1e, params abs %.1e (%s)" %
                      (m["logits_rel"], m["loss_abs"], m["grad_rel"][0], m["grad_rel"][1], m["gnorm_rel"],
                       m["train_loss_rel"], m["param_abs"][0], m["param_abs"][1]))
        else:
            detail = "no measurements"
        print("%s  %-38s %s" % ("PASS" if not fails else "FAIL", name, detail))
        for f in fails:
            print("      failed: %s" % f)
        nfail += bool(fails)
    print("%d of %d configs passed" % (len(results) - nfail, len(results)))
    return report("py_torch_oracle", len(results) - nfail, nfail)


if __name__ == "__main__":
    sys.exit(main())
