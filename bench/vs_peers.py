#!/usr/bin/env python3
"""remat against the PyTorch people run today, on the same model, rounds interleaved.

    bench/vs_peers.py [--shapes 124m,llama-s,llama-long] [--dtype fp32,bf16]
                      [--peers remat,eager,compiled,hf,t113] [--rounds R]
                      [--steps S] [--threads N] [--json FILE]

The peers, each a persistent child process that keeps its model, optimizer
and (for torch.compile) compiled graphs between rounds:
  remat      `remat bench --policies none` on the shape (a child per round);
             on the long-context shape also `remat-flash` (--attention flash)
  eager      torch 2.x (this interpreter): bench/vs_torch.py's plain model,
             F.scaled_dot_product_attention
  compiled   the same model under torch.compile (inductor, default mode)
  hf         transformers' GPT2LMHeadModel / LlamaForCausalLM built from a
             config (random weights, attn_implementation "sdpa"), eager
  t113       Debian's torch 1.13 (/usr/bin/python3) running the plain model
             (matmul/softmax attention: 1.13 has no SDPA), where installed
Every torch model is initialised as remat initialises it
(vs_torch.init_like_remat; HF's own init is the same N(0, 0.02) with
GPT-2's scaled residual projections).  A step is forward, loss, backward,
clip_grad_norm_(1.0), AdamW (decay on matrices only), zero_grad; bf16 is
torch.autocast on the CPU with fp32 master weights, as remat's --dtype bf16.

A round runs, for each dtype, S timed steps of every peer in turn
(A B C D A B C D ...), all with the same thread count.  The medians over
rounds are printed with the median of the per-round ratios peer/remat (the
machine's speed drifts; a ratio within a round compares like with like).
Each torch peer's first step per dtype (warm-up, before round 1) is
reported apart: for `compiled` it is the compile time (inductor compiles
again when autocast changes the graph).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

SHAPES = {
    "124m": dict(arch="gpt2", layers=12, dim=768, heads=12, kv_heads=12, ffn_dim=3072, vocab=50257, seq=64, batch=4),
    "llama-s": dict(arch="llama", layers=12, dim=768, heads=12, kv_heads=4, ffn_dim=2048, vocab=32000, seq=128,
                    batch=4),
    "llama-long": dict(arch="llama", layers=12, dim=768, heads=12, kv_heads=4, ffn_dim=2048, vocab=32000, seq=2048,
                       batch=1),
    "tiny": dict(arch="gpt2", layers=2, dim=64, heads=2, kv_heads=2, ffn_dim=256, vocab=256, seq=32, batch=2),
    "tiny-llama": dict(arch="llama", layers=2, dim=64, heads=4, kv_heads=2, ffn_dim=128, vocab=256, seq=32, batch=2),
}
TORCH_PEERS = ("eager", "compiled", "hf", "t113")
T113_PYTHON = "/usr/bin/python3"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"): return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# ---- one peer (the child) ----------------------------------------------------------

def build_peer(peer, a):
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    import vs_torch
    torch.manual_seed(0)
    Vp = (a.vocab + 63) // 64 * 64
    if peer == "hf":
        import transformers
        if a.arch == "gpt2":
            cfg = transformers.GPT2Config(n_layer=a.layers, n_embd=a.dim, n_head=a.heads, vocab_size=a.vocab,
                                          n_positions=a.seq, n_inner=a.ffn_dim, activation_function="gelu_new",
                                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                          eos_token_id=0, attn_implementation="sdpa")
            model = transformers.GPT2LMHeadModel(cfg)
        else:
            cfg = transformers.LlamaConfig(hidden_size=a.dim, intermediate_size=a.ffn_dim, num_hidden_layers=a.layers,
                                           num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                                           vocab_size=a.vocab, max_position_embeddings=a.seq, rms_norm_eps=1e-6,
                                           tie_word_embeddings=False, bos_token_id=0, eos_token_id=0,
                                           attn_implementation="sdpa")
            model = transformers.LlamaForCausalLM(cfg)
        model.train()

        def loss_of(idx, tgt):
            logits = model(input_ids=idx).logits
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1))
        fn = loss_of
    else:
        model = (vs_torch.Llama if a.arch == "llama" else vs_torch.GPT2)(a)
        vs_torch.init_like_remat(model, a)
        fn = torch.compile(model) if peer == "compiled" else model
    fused = a.fused and tuple(int(x) for x in torch.__version__.split(".")[:2]) >= (2, 4)
    opt = vs_torch.adamw_of(model, fused=fused)
    del Vp
    return torch, model, fn, opt


def serve(a):
    """one peer: reads "DTYPE STEPS" lines, answers each with a JSON line of its step times"""
    import_t0 = time.perf_counter()
    torch, model, fn, opt = build_peer(a.serve, a)
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    params = [p for p in model.parameters()]
    print(json.dumps({"ready": True, "torch": torch.__version__, "build_s": time.perf_counter() - import_t0,
                      "sdpa": hasattr(torch.nn.functional, "scaled_dot_product_attention"),
                      "params": sum(p.numel() for p in params)}), flush=True)
    for line in sys.stdin:
        dtype, n = line.split()
        times, losses = [], []
        for _ in range(int(n)):
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
                loss = fn(idx, tgt)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            times.append((time.perf_counter() - t0) * 1e3)
            losses.append(loss.item())
        print(json.dumps({"ms": times, "loss": losses}), flush=True)


class TorchPeer:
    def __init__(self, name, a, shape_args):
        py = T113_PYTHON if name == "t113" else sys.executable
        self.name = name
        self.p = subprocess.Popen([py, os.path.abspath(__file__), "--serve", "eager" if name == "t113" else name,
                                   "--threads", str(a.threads)] + shape_args + (["--no-fused"] if not a.fused else []),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.hello = self._read()

    def _read(self):
        line = self.p.stdout.readline()
        if not line: raise SystemExit("vs_peers: peer %s died (its stderr is above)" % self.name)
        return json.loads(line)

    def steps(self, dtype, n):
        self.p.stdin.write("%s %d\n" % (dtype, n))
        self.p.stdin.flush()
        return self._read()

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def remat_steps(a, s, dtype, n, attention):
    cmd = [a.remat, "bench", "--arch", s["arch"], "--layers", str(s["layers"]), "--dim", str(s["dim"]),
           "--heads", str(s["heads"]), "--vocab", str(s["vocab"]), "--seq", str(s["seq"]), "--batch",
           str(s["batch"]), "--dtype", dtype, "--policies", "none", "--steps", str(n), "--warmup", "1", "--no-rss",
           "--json", "--threads", str(a.threads), "--attention", attention]
    if s["arch"] == "llama":
        cmd += ["--kv-heads", str(s["kv_heads"]), "--ffn-dim", str(s["ffn_dim"])]
    else:
        cmd += ["--ffn-dim", str(s["ffn_dim"])] if s["ffn_dim"] != 4 * s["dim"] else []
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        r = json.loads(line)
        for row in r.get("rows", []):
            if row.get("policy") == "none":
                return row["step_ms_median"], r
    raise SystemExit("vs_peers: no 'none' row in remat bench's JSON:\n" + out)


def onednn_isa(py):
    """the ISA line torch's oneDNN prints under ONEDNN_VERBOSE for a bf16 product, or None"""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1")
    code = ("import torch; a=torch.randn(64,64).bfloat16(); torch.nn.functional.linear(a,a); "
            "torch.nn.functional.linear(a.float(),a.float())")
    try:
        out = subprocess.run([py, "-c", code], env=env, capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if ",isa:" in line or "cpu,isa" in line: return line.split("isa:", 1)[-1].strip()
    return None


def run_shape(a, name, res):
    s = dict(SHAPES[name])
    shape_args = []
    for k, v in s.items(): shape_args += ["--" + k.replace("_", "-"), str(v)]
    peers = [p for p in a.peers if p in TORCH_PEERS]
    if "t113" in peers and not (os.path.exists(T113_PYTHON) and
                                subprocess.run([T113_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0):
        print("vs_peers: no torch under %s: t113 left out" % T113_PYTHON)
        peers.remove("t113")
    if "hf" in peers and s["arch"] not in ("gpt2", "llama"): peers.remove("hf")
    attns = ["naive"] + (["flash"] if s["seq"] >= 1024 or a.flash else [])
    rematp = ["remat" if at == "naive" else "remat-flash" for at in attns] if "remat" in a.peers else []
    print("\n== %s: %s L%d C%d NH%d KV%d F%d V%d B%d T%d" % (name, s["arch"], s["layers"], s["dim"], s["heads"],
                                                            s["kv_heads"], s["ffn_dim"], s["vocab"], s["batch"],
                                                            s["seq"]), flush=True)
    live = {}
    for p in peers:
        t0 = time.perf_counter()
        live[p] = TorchPeer(p, a, shape_args)
        print("  %s: torch %s, %d params, SDPA %s, built in %.1f s" % (p, live[p].hello["torch"], live[p].hello["params"],
                                                                      "yes" if live[p].hello["sdpa"] else "no",
                                                                      time.perf_counter() - t0), flush=True)
    out = res.setdefault(name, {"shape": s, "dtypes": {}})
    for d in a.dtypes:
        o = out["dtypes"].setdefault(d, {"ms": {}, "ratio": {}, "first_ms": {}})
        for p in peers:   # warm-up: the first step, compilation included
            r = live[p].steps(d, 1)
            o["first_ms"][p] = r["ms"][0]
            print("  warm-up %s %s: first step %.0f ms (loss %.3f)" % (d, p, r["ms"][0], r["loss"][0]), flush=True)
    order = rematp + peers
    for rnd in range(a.rounds):
        for d in a.dtypes:
            o = out["dtypes"][d]
            got = {}
            for p in order:
                if p.startswith("remat"):
                    got[p], j = remat_steps(a, s, d, a.steps, "flash" if p == "remat-flash" else "naive")
                    out.setdefault("remat_isa", j.get("gemm_isa"))
                else:
                    got[p] = statistics.median(live[p].steps(d, a.steps)["ms"])
                o["ms"].setdefault(p, []).append(got[p])
            base = got.get("remat")
            for p in order:
                if base: o["ratio"].setdefault(p, []).append(got[p] / base)
            print("  round %d %s: %s" % (rnd + 1, d, ", ".join("%s %.0f ms" % (p, got[p]) for p in order)), flush=True)
    for p in live.values(): p.close()
    for d in a.dtypes:
        o = out["dtypes"][d]
        print("  %s %s:" % (name, d))
        for p in order:
            ms, rt = o["ms"][p], o["ratio"].get(p, [])
            comp = o["first_ms"].get(p)
            print("    %-11s %9.1f ms (median, %s)%s%s" % (
                p, statistics.median(ms), " ".join("%.0f" % x for x in ms),
                "  %s/remat %.2f (%.2f-%.2f)" % (p, statistics.median(rt), min(rt), max(rt)) if rt and p != "remat"
                else "", "  first step %.1f s" % (comp / 1e3) if comp is not None else ""), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="124m,llama-s")
    p.add_argument("--dtype", default="fp32,bf16")
    p.add_argument("--peers", default="remat,eager,compiled,hf,t113")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--flash", action="store_true", help="remat-flash on every shape, not only the long ones")
    p.add_argument("--no-fused", dest="fused", action="store_false",
                   help="torch's AdamW without fused=True (the default where torch >= 2.4 has it)")
    p.add_argument("--remat", default=os.path.join(os.environ.get("BUILD", "build"), "remat"))
    p.add_argument("--json", help="write the results here")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    for k in ("arch", "layers", "dim", "heads", "kv_heads", "ffn_dim", "vocab", "seq", "batch"):
        p.add_argument("--" + k.replace("_", "-"), type=str if k == "arch" else int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve:
        return serve(a)
    a.dtypes, a.peers = a.dtype.split(","), a.peers.split(",")
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")   # idle peers sleep, not spin
    import torch
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OMP_WAIT_POLICY")}
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = -1
    isa113 = onednn_isa(T113_PYTHON) if "t113" in a.peers and os.path.exists(T113_PYTHON) else None
    head = {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": a.threads, "torch": torch.__version__,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_onednn_isa": onednn_isa(sys.executable),
            "t113_onednn_isa": isa113, "env": env, "load_avg_start": load, "rounds": a.rounds, "steps": a.steps,
            "fused_adamw": a.fused}
    print("vs_peers: %s, %d cores, %d threads | torch %s (capability %s; oneDNN: %s) | torch 1.13's oneDNN: %s | %s | "
          "load %.1f | %d rounds of %d steps" % (
              head["cpu"], head["cores"], a.threads, head["torch"], head["torch_cpu_capability"],
              head["torch_onednn_isa"], isa113, ", ".join("%s=%s" % (k, v) for k, v in env.items() if v) or "-",
              load, a.rounds, a.steps), flush=True)
    res = {}
    for name in a.shapes.split(","):
        run_shape(a, name, res)
        if name in res and res[name].get("remat_isa"):
            print("  remat's oneDNN ISA: %s" % res[name]["remat_isa"], flush=True)
    head["load_avg_end"] = os.getloadavg()[0]
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f: json.dump({"machine": head, "shapes": res}, f, indent=1)
        os.replace(tmp, a.json)


if __name__ == "__main__":
    main()
