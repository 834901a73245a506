#!/usr/bin/python3
"""PyTorch oracle: remat's forward, loss, every parameter gradient and ten
AdamW steps, checked against the same GPT-2 written in PyTorch.

For each config below, $BUILD/tests/tool_oracle (env BUILD, default "build")
dumps remat's initial parameters, eval logits and loss, one step's gradients,
and the losses of STEPS training steps (layout in tests/tool_oracle.c;
tests/oracle_lib.py runs it and compares, as for tests/py_llama_oracle.py).
This script rebuilds the model in torch in float64 from the same
parameters, so the measured differences are remat's float32 rounding (and
any bug), not the reference's:

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
import sys

import oracle_lib as ol

ol.require("py_torch_oracle")
import torch  # noqa: E402 (after the skip for a missing torch)
import torch.nn.functional as F  # noqa: E402

CONFIGS = [
    ol.config("a: L2 C64 NH4 V256 T16 B3", 2, 64, 4, 256, 16, 3, 10),
    # C not a multiple of 8, one head, T = 1, V not a multiple of 64
    ol.config("b: odd C36 NH1 V101 T1 B2", 2, 36, 1, 101, 1, 2, 10),
    # full recomputation (with --verify-recompute on) must give the same numbers
    ol.config("c: L3 C48 NH6 V77 T9 B2 full", 3, 48, 6, 77, 9, 2, 10, ["full"]),
    # segments with the modifiers: recomputed att, ln1, ln2, fch_gelu
    ol.config("d: L4 C32 NH2 V70 T8 B2 every:2,sel,pw", 4, 32, 2, 70, 8, 2, 10, ["every:2,selective,pointwise"]),
    # flash attention over more than one 64-row tile (T = 70) and the LM head
    # in chunks of 9 rows (not dividing B*T = 140), under full recomputation
    ol.config("e: L2 C48 NH3 V90 T70 B2 flash,chunk:9,full", 2, 48, 3, 90, 70, 2, 10, ["full"], "flash", 9),
    # bf16 mixed precision (at the bf16 tolerances below): naive attention,
    # the whole LM head, under selective recomputation; then flash attention
    # over two tiles with the chunked head under full recomputation
    ol.config("f: L2 C64 NH4 V256 T16 B3 bf16 selective", 2, 64, 4, 256, 16, 3, 10, ["selective"], dtype="bf16"),
    ol.config("g: L2 C48 NH3 V90 T70 B2 bf16 flash,chunk:9,full", 2, 48, 3, 90, 70, 2, 10, ["full"], "flash", 9,
              "bf16"),
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
    "124m-bf16": ol.config("h: GPT-2 124M B4 T64 bf16", 12, 768, 12, 50257, 64, 4, 2, dtype="bf16"),
    "124m-fp32": ol.config("i: GPT-2 124M B4 T64 fp32", 12, 768, 12, 50257, 64, 4, 2),
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
FP32_TOL = ol.Tol(logits=5e-6, loss=2e-6, grad=5e-6, gnorm=1e-6, train=2e-6, param=5e-6)
# bf16 (configs f, g): operands rounded to 8 bits of mantissa (u = 3.9e-3),
# the residual stream, statistics, sums and the loss in fp32.  Measured
# here (oneDNN), and the bounds, about 5x:
#   logits rel     measured <= 3.3e-3   tol 2e-2     loss abs   measured <= 5.8e-5   tol 5e-4
#   grads rel      measured <= 6.1e-3   tol 3e-2     grad norm  measured <= 2.7e-4   tol 2e-3
#   train losses   measured <= 1.3e-4   tol 1e-3     params abs measured <= 7.5e-4 per step, tol 4e-3
BF16_TOL = ol.Tol(logits=2e-2, loss=5e-4, grad=3e-2, gnorm=2e-3, train=1e-3, param=4e-3)


class GPT2:
    """the model oracle_lib compares remat with"""
    name = "py_torch_oracle"
    names = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
             "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
    decay = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}

    def param_names(self, d):
        return self.names

    def shapes(self, d):
        L, C, Vp, T = d["L"], d["C"], d["Vp"], d["T"]
        return [(Vp, C), (T, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
                (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]

    def padded(self, d):
        return ["wte"]

    def parts(self, d):
        return {}

    def check_config(self, d, cfg):
        C, NH = d["C"], d["NH"]
        return [((d["arch"], d["KV"], d["F"], d["hs"], d["tied"], d["rope_type"]) == (0, NH, 4 * C, C // NH, 1, 0)
                 and d["norm_eps"] == 1e-5, "gpt2: KV = NH, F = 4C, hs = C/NH, tied, no RoPE, LayerNorm eps 1e-5")]

    def forward(self, P, d, inputs, targets):
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
        return logits, ol.cross_entropy(logits, targets, V)


def main():
    configs = CONFIGS
    if os.environ.get("REMAT_ORACLE_CONFIGS"):
        configs = [EXTRA_CONFIGS[k] for k in os.environ["REMAT_ORACLE_CONFIGS"].split(",")]
    return ol.main(GPT2(), configs, {"fp32": FP32_TOL, "bf16": BF16_TOL})


if __name__ == "__main__":
    sys.exit(main())
