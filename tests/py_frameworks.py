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
predicted activation peak; docs/cluster.md, "GPT-2: checked against
PyTorch's own memory", explains the gap.

Then the same for Llama (remat's pytorch tables for --arch llama): a model
written op for op as Hugging Face transformers' LlamaForCausalLM runs it
(models/llama/modeling_llama.py at 5dd4a63: LlamaRMSNorm's fp32 statistics,
q_proj/k_proj/v_proj, apply_rotary_pos_emb with rotate_half, repeat_kv,
eager_attention_forward's fp32 softmax, LlamaMLP, ForCausalLMLoss's shifted
labels), on five shapes (grouped-query with 2 and 3 query heads per key/value
head, one key/value head, plain multi-head with attention dropout, head
size != C/NH, tied and untied), under the same four policies, each within 1%.
--attention naive (eager) is measured as it runs.  --attention flash is
SDPA's flash backend, which torch 1.13 on a CPU does not have: the attention
core is replaced by an autograd.Function that saves what
_scaled_dot_product_flash_attention saves for its backward in PyTorch's
derivatives.yaml (query, key and value as given -- KV heads, enable_gqa --,
the output in flash's (B,T,NH,HS) layout, the fp32 logsumexp); everything
around it (the projections, RoPE, o_proj reading the output's storage, the
MLP, the head) is measured.

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
    # torch 2 names the start in ns (start_ns), torch 1.13 in us (start_us): only the order matters
    ev = sorted(((e.start_ns() if hasattr(e, "start_ns") else e.start_us()), i, e.nbytes())
                for i, e in enumerate(prof.profiler.kineto_results.events()) if e.name() == "[memory]")
    cur = peak = 0
    for _, _, n in ev:
        cur += n
        peak = max(peak, cur)
    return peak


def policies_of(L):
    """the policies checked, each with its checkpointing segment (0: none)"""
    return [("none", 0), ("full", 1), ("every:2", 2), ("sqrt", math.ceil(math.sqrt(L)))]


def predicted_rows(cmd, policies):
    """remat plan's rows for cmd with one --recompute per policy, or None (reported)"""
    cmd = cmd + ["--json"] + [a for pol, _ in policies for a in ("--recompute", pol)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        print("FAIL: %s: %s" % (" ".join(cmd), out.stderr.strip()))
        return None
    return json.loads(out.stdout)["rows"]


def compare(model, idx, tg, seg, row):
    """the bytes autograd saves under segment seg against row's prediction:
    (saved, predicted, relative error, within 1%)"""
    got, _ = saved_bytes(model, idx, tg, seg)
    pred = row["stored_bytes"]
    err = (pred - got) / got
    return got, pred, err, abs(err) <= 0.01


# ---- Llama as Hugging Face runs it ------------------------------------------------


def mean_saves_input():
    """torch 1.13's mean() keeps its input for the backward (MeanBackward1's
    _saved_self); torch 2 keeps only its sizes"""
    x = torch.zeros(1, 2, requires_grad=True)
    return hasattr(x.pow(2).mean(-1, keepdim=True).grad_fn, "_saved_self")


MEAN_SAVES_INPUT = mean_saves_input()


class RMSNorm(nn.Module):
    """LlamaRMSNorm: statistics in fp32, the weight applied in the input's
    dtype.  Where mean() keeps its input (torch 1.13) the mean is written as
    sum / C, which keeps only sizes, as mean does on the torch 2 that GPU runs
    use: the table models torch 2."""

    def __init__(self, C, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        h = x.to(torch.float32)
        sq = h.pow(2)
        var = sq.sum(-1, keepdim=True).div(h.shape[-1]) if MEAN_SAVES_INPUT else sq.mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + self.eps)
        return self.weight * h.to(dt)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(x, n):
    if n == 1:
        return x
    b, kv, t, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n, t, d).reshape(b, kv * n, t, d)


class FlashSDPA(torch.autograd.Function):
    """SDPA's flash backend (no such kernel in torch 1.13 on a CPU): the
    forward's math, and for the backward what
    _scaled_dot_product_flash_attention saves (derivatives.yaml): q, k, v as
    given, the output -- allocated (B,T,NH,HS), returned transposed -- and
    the logsumexp (B,NH,T) fp32"""

    @staticmethod
    def forward(ctx, q, k, v, n_rep, scale):
        T = q.shape[2]
        kr, vr = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        s = (q @ kr.transpose(-2, -1)) * scale + torch.full((T, T), float("-inf")).triu(1)
        lse = torch.logsumexp(s, dim=-1)
        B, NH, _, hs = q.shape
        out = torch.empty(B, T, NH, hs).transpose(1, 2)
        out.copy_(torch.exp(s - lse[..., None]) @ vr)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.n_rep, ctx.scale = n_rep, scale
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, _, _ = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
            T = q.shape[2]
            kr, vr = repeat_kv(k, ctx.n_rep), repeat_kv(v, ctx.n_rep)
            s = (q @ kr.transpose(-2, -1)) * ctx.scale + torch.full((T, T), float("-inf")).triu(1)
            o = torch.softmax(s, dim=-1) @ vr
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), dout)
        return dq, dk, dv, None, None


class LlamaLayer(nn.Module):
    def __init__(self, C, nh, kv, hs, F_, p, flash):
        super().__init__()
        self.nh, self.kv, self.hs, self.flash = nh, kv, hs, flash
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(C), RMSNorm(C)
        self.q_proj = nn.Linear(C, nh * hs, bias=False)
        self.k_proj = nn.Linear(C, kv * hs, bias=False)
        self.v_proj = nn.Linear(C, kv * hs, bias=False)
        self.o_proj = nn.Linear(nh * hs, C, bias=False)
        self.gate_proj = nn.Linear(C, F_, bias=False)
        self.up_proj = nn.Linear(C, F_, bias=False)
        self.down_proj = nn.Linear(F_, C, bias=False)
        self.act_fn = nn.SiLU()
        self.drop = Drop(p)

    def attention(self, x, cos, sin):
        B, T, _ = x.shape
        shape = (B, T, -1, self.hs)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = (q * c) + (rotate_half(q) * s), (k * c) + (rotate_half(k) * s)
        n, scale = self.nh // self.kv, self.hs ** -0.5
        if self.flash:
            o = FlashSDPA.apply(q, k, v, n, scale)
        else:
            k, v = repeat_kv(k, n), repeat_kv(v, n)
            w = torch.matmul(q, k.transpose(2, 3)) * scale
            w = w + torch.full((T, T), torch.finfo(x.dtype).min).triu(1)[None, None]
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(self.drop(w), v)
        o = o.transpose(1, 2).contiguous().reshape(B, T, -1).contiguous()
        return self.o_proj(o)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(self.act_fn(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, L, C, nh, kv, hs, F_, V, p, flash, tied):
        super().__init__()
        self.hs = hs
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList([LlamaLayer(C, nh, kv, hs, F_, p, flash) for _ in range(L)])
        self.norm = RMSNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        if tied:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(self, idx, labels, segment):
        B, T = idx.shape
        x = self.embed_tokens(idx)
        with torch.no_grad():          # LlamaRotaryEmbedding: position_ids (1, T), once per forward
            inv = 1.0 / (10000.0 ** (torch.arange(0, self.hs, 2).float() / self.hs))
            fr = torch.arange(T).float()[None, :, None] * inv[None, None, :]
            emb = torch.cat((fr, fr), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        L = len(self.layers)
        for a in range(0, L, segment or L):
            layers = self.layers[a:a + segment] if segment else self.layers

            def run(x, cos, sin, layers=layers):
                for layer in layers:
                    x = layer(x, cos, sin)
                return x
            # cos and sin are arguments, as torch.utils.checkpoint saves them
            x = ckpt.checkpoint(run, x, cos, sin) if segment else run(x, cos, sin)
        logits = self.lm_head(self.norm(x)).float()
        shift = F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()     # ForCausalLMLoss
        return F.cross_entropy(logits.view(-1, logits.size(-1)), shift.view(-1), ignore_index=-100)


def llama_cases():
    """the Llama shapes: each case's saved bytes against remat's prediction"""
    shapes = [  # L, C, heads, kv heads, head size, F, V, T, B, dropout, tied
        (2, 32, 4, 2, 8, 48, 64, 16, 2, 0.0, 0),     # GQA, 2 query heads per key/value head
        (3, 36, 6, 2, 6, 40, 101, 7, 3, 0.0, 0),     # odd: 3 per group, V 101, T 7
        (4, 48, 4, 1, 12, 64, 80, 12, 2, 0.0, 1),    # one key/value head, tied
        (2, 32, 4, 4, 8, 48, 64, 9, 2, 0.1, 0),      # plain multi-head, attention dropout
        (2, 40, 4, 2, 12, 56, 96, 10, 2, 0.0, 0),    # head size 12 != C/NH = 10
    ]
    bad = good = 0
    for flash in (0, 1):
        for L, C, nh, kv, hs, F_, V, T, B, p, tied in shapes:
            if flash and p:
                continue                  # flash's dropout keeps no mask: nothing new to measure
            model = Llama(L, C, nh, kv, hs, F_, V, p, flash, tied)
            idx = torch.randint(0, V, (B, T))
            tg = torch.randint(0, V, (B, T))
            policies = policies_of(L)
            rows = predicted_rows([REMAT, "plan", "--framework", "pytorch", "--arch", "llama", "--layers", str(L),
                                   "--dim", str(C), "--heads", str(nh), "--kv-heads", str(kv), "--head-dim", str(hs),
                                   "--ffn-dim", str(F_), "--vocab", str(V), "--seq", str(T), "--batch", str(B),
                                   "--dropout", str(p), "--attention", "flash" if flash else "unfused"] +
                                  (["--tie-embeddings"] if tied else []), policies)
            if rows is None:
                bad += 1
                continue
            for k, (pol, seg) in enumerate(policies):
                got, pred, err, ok = compare(model, idx, tg, seg, rows[k])
                bad += not ok
                good += ok
                print("%s llama %-5s L%d C%d H%d KV%d hs%d F%d V%d T%d B%d p%g %s %-8s saved %8d predicted %8d "
                      "(%+d B, %+.3f%%)" % ("ok  " if ok else "FAIL", "flash" if flash else "eager", L, C, nh, kv, hs,
                                             F_, V, T, B, p, "tied" if tied else "untied", pol, got, pred, pred - got,
                                             100 * err))
    return good, bad


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
        policies = policies_of(L)
        rows = predicted_rows([REMAT, "plan", "--framework", "pytorch", "--layers", str(L), "--dim", str(C), "--heads",
                               str(nh), "--vocab", str(V), "--seq", str(T), "--batch", str(B), "--dropout", str(p)],
                              policies)
        if rows is None:
            bad += 1
            continue
        for k, (pol, seg) in enumerate(policies):
            got, pred, err, ok = compare(model, idx, tg, seg, rows[k])
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
    g2, b2 = llama_cases()
    return report("py_frameworks", good + g2, bad + b2)


if __name__ == "__main__":
    sys.exit(main())
