#!/usr/bin/python3
"""remat against PyTorch on the same model, training steps interleaved.

    bench/vs_torch.py [--arch gpt2|llama] [--layers L --dim C --heads NH
                      --kv-heads KV --ffn-dim F --vocab V --seq T --batch B]
                      [--dtype fp32,bf16] [--rounds R] [--steps S] [--threads N]
    bench/vs_torch.py --preset llama-s     (L12 C768 NH12 KV4 F2048 V32000 B4 T128)
    bench/vs_torch.py --preset 124m        (GPT-2 124M, B4 T64)

Each round runs, for each dtype, S timed training steps of the PyTorch model
(forward, loss, backward, AdamW; bf16: torch.autocast on the CPU, fp32
master weights, as remat's mixed precision) in this process, then
`remat bench --policies none --steps S --json` on the same shape in a
child process; the medians over rounds are printed with the median of the
per-round ratios torch/remat (the machine's speed drifts: a ratio from one
round compares like with like).

The PyTorch models are the plain eager ones people write: GPT-2 as nanoGPT
writes it (nn.Linear, F.layer_norm, causal attention, tanh GELU, tied
head), Llama as Hugging Face's eager LlamaForCausalLM computes it (RMSNorm
in fp32, rotate_half RoPE, repeat_kv for grouped-query attention, SwiGLU,
untied head).  The attention core is F.scaled_dot_product_attention where
torch has it (2.x) and matmul/softmax with a causal mask where it does not
(torch 1.13, Debian's).  Both are initialised as remat initialises them
(init_like_remat): N(0, 0.02), GPT-2's residual projections at
0.02/sqrt(2L), zero biases, unit norms, zero padded vocabulary rows.
nn.Embedding's default N(0, 1) on GPT-2's tied head made logits of std
~28 whose softmax backward ran on subnormals, which made torch's fp32 step
several times slower than the model people train (issue 29).
AdamW decays the matrices and embeddings only, as remat does.
Both sides use the same thread count.  OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE are left as the environment sets them; the output says
whether they were set (they slow OpenBLAS, which torch uses for fp32).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

PRESETS = {
    "llama-s": dict(arch="llama", layers=12, dim=768, heads=12, kv_heads=4, ffn_dim=2048, vocab=32000, seq=128, batch=4),
    "124m": dict(arch="gpt2", layers=12, dim=768, heads=12, kv_heads=12, ffn_dim=3072, vocab=50257, seq=64, batch=4),
    "s": dict(arch="gpt2", layers=6, dim=256, heads=8, kv_heads=8, ffn_dim=1024, vocab=512, seq=256, batch=8),
}


HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


def causal_attention(q, k, v):
    """(B, NH, T, hs) each -> (B, NH, T, hs): softmax(q k^T / sqrt(hs) + causal mask) v, in q's dtype"""
    if HAVE_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1, dtype=torch.float32).to(q.dtype)
    return att @ v


def init_like_remat(model, a):
    """remat's initialisation (src/engine/model.c, init_params; params.c says which tensor gets which)"""
    std, proj_std = 0.02, 0.02 / math.sqrt(2.0 * a.layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if p.dim() == 1:   # biases zero, norm weights one
                p.fill_(0.0 if leaf == "bias" else 1.0)
            else:
                p.normal_(0.0, proj_std if isinstance(model, GPT2) and (".proj." in name or ".fcproj." in name)
                          else std)
        for t in ((model.wte.weight,) if isinstance(model, GPT2) else (model.emb.weight, model.head.weight)):
            t[a.vocab:].zero_()   # padded vocabulary rows, unused


def adamw_of(model, fused=False):
    """torch.optim.AdamW with remat's settings: decay on matrices and embeddings, not on biases and norms"""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    kw = dict(lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if fused: kw["fused"] = True
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}], **kw)


class GPT2(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C, V = a.dim, (a.vocab + 63) // 64 * 64
        self.a = a
        self.wte = torch.nn.Embedding(V, C)
        self.wpe = torch.nn.Embedding(a.seq, C)
        self.blocks = torch.nn.ModuleList()
        for _ in range(a.layers):
            b = torch.nn.Module()
            b.ln1, b.ln2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
            b.qkv, b.proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
            b.fc, b.fcproj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)
            self.blocks.append(b)
        self.lnf = torch.nn.LayerNorm(C)

    def forward(self, idx, tgt):
        a = self.a
        B, T, C, NH = idx.shape[0], idx.shape[1], a.dim, a.heads
        hs = C // NH
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            q, k, v = b.qkv(b.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
            y = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
            x = x + b.proj(y)
            x = x + b.fcproj(F.gelu(b.fc(b.ln2(x)), approximate="tanh"))
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits[..., :a.vocab].reshape(-1, a.vocab).float(), tgt.reshape(-1))


class Llama(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C, V, NH, KV, Fd = a.dim, (a.vocab + 63) // 64 * 64, a.heads, a.kv_heads, a.ffn_dim
        hs = C // NH
        self.a = a
        self.emb = torch.nn.Embedding(V, C)
        self.blocks = torch.nn.ModuleList()
        for _ in range(a.layers):
            b = torch.nn.Module()
            b.n1, b.n2 = torch.nn.Parameter(torch.ones(C)), torch.nn.Parameter(torch.ones(C))
            b.q = torch.nn.Linear(C, NH * hs, bias=False)
            b.k = torch.nn.Linear(C, KV * hs, bias=False)
            b.v = torch.nn.Linear(C, KV * hs, bias=False)
            b.o = torch.nn.Linear(NH * hs, C, bias=False)
            b.gate = torch.nn.Linear(C, Fd, bias=False)
            b.up = torch.nn.Linear(C, Fd, bias=False)
            b.down = torch.nn.Linear(Fd, C, bias=False)
            self.blocks.append(b)
        self.nf = torch.nn.Parameter(torch.ones(C))
        self.head = torch.nn.Linear(C, V, bias=False)
        inv = 1.0 / (10000.0 ** (torch.arange(0, hs, 2).float() / hs))
        ang = torch.outer(torch.arange(a.seq).float(), inv)
        emb = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    @staticmethod
    def rms(x, w, eps=1e-6):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        return w * x.to(dt)

    @staticmethod
    def rot(x):
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], dim=-1)

    def forward(self, idx, tgt):
        a = self.a
        B, T, C, NH, KV = idx.shape[0], idx.shape[1], a.dim, a.heads, a.kv_heads
        hs = C // NH
        x = self.emb(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for b in self.blocks:
            h = self.rms(x, b.n1)
            q = b.q(h).view(B, T, NH, hs).transpose(1, 2)
            k = b.k(h).view(B, T, KV, hs).transpose(1, 2)
            v = b.v(h).view(B, T, KV, hs).transpose(1, 2)
            q, k = q * cos + self.rot(q) * sin, k * cos + self.rot(k) * sin
            k = k.repeat_interleave(NH // KV, dim=1)
            v = v.repeat_interleave(NH // KV, dim=1)
            x = x + b.o(causal_attention(q, k, v).transpose(1, 2).reshape(B, T, NH * hs))
            h = self.rms(x, b.n2)
            x = x + b.down(F.silu(b.gate(h)) * b.up(h))
        logits = self.head(self.rms(x, self.nf))
        return F.cross_entropy(logits[..., :a.vocab].reshape(-1, a.vocab).float(), tgt.reshape(-1))


def torch_steps(model, opt, idx, tgt, dtype, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def remat_steps(remat, a, dtype, n, threads):
    cmd = [remat, "bench", "--arch", a.arch, "--layers", str(a.layers), "--dim", str(a.dim), "--heads", str(a.heads),
           "--vocab", str(a.vocab), "--seq", str(a.seq), "--batch", str(a.batch), "--dtype", dtype,
           "--policies", "none", "--steps", str(n), "--warmup", "1", "--no-rss", "--json",
           "--threads", str(threads)]
    if a.arch == "llama":
        cmd += ["--kv-heads", str(a.kv_heads), "--ffn-dim", str(a.ffn_dim)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        r = json.loads(line)
        for row in r.get("rows", []):
            if row.get("policy") == "none":
                return row["step_ms_median"]
    raise SystemExit("vs_torch: no 'none' row in remat bench's JSON:\n" + out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS))
    for k, v in (("arch", "gpt2"), ("layers", 4), ("dim", 128), ("heads", 4), ("kv_heads", 0), ("ffn_dim", 0),
                 ("vocab", 256), ("seq", 64), ("batch", 16)):
        p.add_argument("--" + k.replace("_", "-"), type=type(v), default=None)
    p.add_argument("--dtype", default="fp32,bf16")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--remat", default=os.path.join(os.environ.get("BUILD", "build"), "remat"))
    a = p.parse_args()
    base = dict(PRESETS[a.preset]) if a.preset else dict(arch="gpt2", layers=4, dim=128, heads=4, kv_heads=0,
                                                          ffn_dim=0, vocab=256, seq=64, batch=16)
    for k in base:
        if getattr(a, k) is not None: base[k] = getattr(a, k)
    for k, v in base.items(): setattr(a, k, v)
    if not a.kv_heads: a.kv_heads = a.heads
    if not a.ffn_dim: a.ffn_dim = 4 * a.dim if a.arch == "gpt2" else (8 * a.dim // 3 + 255) // 256 * 256
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = (Llama if a.arch == "llama" else GPT2)(a)
    init_like_remat(model, a)
    opt = adamw_of(model)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq))
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq))
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print("vs_torch: %s L%d C%d NH%d KV%d F%d V%d B%d T%d, %d threads, torch %s, %d rounds of %d steps; %s" %
          (a.arch, a.layers, a.dim, a.heads, a.kv_heads, a.ffn_dim, a.vocab, a.batch, a.seq, a.threads,
           torch.__version__, a.rounds, a.steps,
           ", ".join("%s=%s" % (k, v) for k, v in env.items() if v) or "OPENBLAS_CORETYPE/L2_SIZE not set"))
    dtypes = a.dtype.split(",")
    res = {d: {"torch": [], "remat": [], "ratio": []} for d in dtypes}
    for d in dtypes: torch_steps(model, opt, idx, tgt, d, 1)   # warm-up
    for r in range(a.rounds):
        for d in dtypes:
            t = torch_steps(model, opt, idx, tgt, d, a.steps)
            m = remat_steps(a.remat, a, d, a.steps, a.threads)
            res[d]["torch"].append(t); res[d]["remat"].append(m); res[d]["ratio"].append(t / m)
            print("  round %d %s: torch %.1f ms, remat %.1f ms, torch/remat %.2f" % (r + 1, d, t, m, t / m), flush=True)
    for d in dtypes:
        x = res[d]
        print("%s: torch %.1f ms, remat %.1f ms (medians); torch/remat %.2f (median of the rounds' ratios, range %.2f-%.2f)"
              % (d, statistics.median(x["torch"]), statistics.median(x["remat"]), statistics.median(x["ratio"]),
                 min(x["ratio"]), max(x["ratio"])))


if __name__ == "__main__":
    main()
