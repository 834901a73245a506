#!/usr/bin/python3
"""py_frameworks.py -- remat's `pytorch` tensor table against PyTorch's own memory.

Builds the GPT-2 model the table describes (nn.Linear, F.layer_norm through
nn.LayerNorm, explicit softmax attention, F.gelu(approximate='tanh'), dropout
as nn.Dropout runs on a GPU: torch.native_dropout, which keeps a bool mask;
on the CPU nn.Dropout keeps a float mask instead) in torch on the CPU, and
measures the bytes autograd saves for the backward with
torch.autograd.graph.saved_tensors_hooks, each storage once, parameters left
out: for no checkpointing, per-block torch.utils.checkpoint, segments of 2
blocks and of ceil(sqrt(L)) blocks, on four shapes (one odd, one with
dropout).  `remat plan --framework pytorch ... --json` must predict every
case within 1% (its rows' stored_bytes).  The step's real peak (forward and
backward, from the profiler's allocation events) is printed beside remat's
predicted activation peak; the README explains the gap.

Without torch it skips (exit 77, tests/harness.py); CI installs it.
"""
# REMAT_TEST_REQUIRED: CI installs python3-torch; the pytorch table's check against autograd must run there
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import report, skip

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.utils.checkpoint as ckpt
    from torch.profiler import profile, ProfilerActivity
except ImportError:
    skip("py_frameworks", "torch is not installed for /usr/bin/python3 (apt-get install python3-torch)")

REMAT = os.environ.get("REMAT", "build/remat")


class Drop(nn.Module):
    """nn.Dropout as it runs on a GPU (native_dropout: a bool mask)."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0:
            return x
        return torch.native_dropout(x, self.p, True)[0]


class Block(nn.Module):
    def __init__(self, C, nh, p):
        super().__init__()
        self.nh = nh
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.drop_att, self.drop_res, self.drop_mlp = Drop(p), Drop(p), Drop(p)

    def forward(self, x, bias):
        B, T, C = x.shape
        hs = C // self.nh
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.nh, hs).transpose(1, 2)
        k = k.view(B, T, self.nh, hs).transpose(1, 2)
        v = v.view(B, T, self.nh, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs)) + bias
        att = self.drop_att(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.drop_res(self.c_proj(y))
        return x + self.drop_mlp(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, L, C, nh, V, T, p):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.drop = Drop(p)
        self.h = nn.ModuleList([Block(C, nh, p) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight          # tied

    def forward(self, idx, targets, segment):
        """segment 0: no checkpointing; K: torch.utils.checkpoint over segments of K blocks"""
        B, T = idx.shape
        # the causal mask as an additive bias (a closure, not a checkpoint input)
        bias = torch.full((T, T), float("-inf")).triu(1)
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T)))
        L = len(self.h)
        for a in range(0, L, segment or L):
            blocks = self.h[a:a + segment] if segment else self.h

            def run(x, blocks=blocks):
                for blk in blocks:
                    x = blk(x, bias)
                return x
            x = ckpt.checkpoint(run, x) if segment else run(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def saved_bytes(model, idx, tg, segment):
    params = {p.data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.storage()
        if st.data_ptr() not in params:
            seen[st.data_ptr()] = st.size() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(idx, tg, segment)
    return sum(seen.values()), loss


def step_peak(model, idx, tg, segment):
    """forward + backward: the most bytes allocated at once above what was live before (profiler events)"""
    for p in model.parameters():
        p.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model(idx, tg, segment).backward()
    ev = sorted((e.start_us(), i, e.nbytes()) for i, e in enumerate(prof.profiler.kineto_results.events())
                if e.name() == "[memory]")
    cur = peak = 0
    for _, _, n in ev:
        cur += n
        peak = max(peak, cur)
    return peak


def main():
    torch.manual_seed(0)
    shapes = [  # L, C, heads, V, T, B, dropout
        (2, 32, 4, 64, 16, 2, 0.0),
        (3, 36, 3, 101, 7, 3, 0.0),      # odd: C 36, T 7, V 101
        (4, 64, 4, 128, 32, 2, 0.0),
        (5, 48, 2, 80, 12, 2, 0.1),      # dropout: bool masks
    ]
    bad = good = 0
    for L, C, nh, V, T, B, p in shapes:
        model = GPT(L, C, nh, V, T, p)
        idx = torch.randint(0, V, (B, T))
        tg = torch.randint(0, V, (B, T))
        policies = [("none", 0), ("full", 1), ("every:2", 2), ("sqrt", math.ceil(math.sqrt(L)))]
        cmd = [REMAT, "plan", "--framework", "pytorch", "--layers", str(L), "--dim", str(C), "--heads", str(nh),
               "--vocab", str(V), "--seq", str(T), "--batch", str(B), "--dropout", str(p), "--json"]
        for pol, _ in policies:
            cmd += ["--recompute", pol]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print("FAIL: %s: %s" % (" ".join(cmd), out.stderr.strip()))
            bad += 1
            continue
        rows = json.loads(out.stdout)["rows"]
        for k, (pol, seg) in enumerate(policies):
            got, _ = saved_bytes(model, idx, tg, seg)
            pred = rows[k]["stored_bytes"]
            err = (pred - got) / got
            ok = abs(err) <= 0.01
            bad += not ok
            good += ok
            # torch's real peak: the activations remat predicts, plus the
            # parameter gradients autograd allocates as the backward reaches
            # each layer (and the tied embedding's second contribution): between
            # the two bounds (README, "Cluster planning")
            peak = step_peak(model, idx, tg, seg)
            grads = 4 * sum(q.numel() for q in model.parameters())
            if not rows[k]["peak_bytes"] <= peak <= rows[k]["peak_bytes"] + grads:
                print("FAIL: step peak %d outside [%d, %d]" % (peak, rows[k]["peak_bytes"], rows[k]["peak_bytes"] + grads))
                bad += 1
            print("%s L%d C%d H%d V%d T%d B%d p%g %-8s saved %8d predicted %8d (%+d B, %+.3f%%) | "
                  "step peak %8d, predicted activation peak %8d, gradients %d"
                  % ("ok  " if ok else "FAIL", L, C, nh, V, T, B, p, pol, got, pred, pred - got, 100 * err, peak,
                     rows[k]["peak_bytes"], grads))
    return report("py_frameworks", good, bad)


if __name__ == "__main__":
    sys.exit(main())
