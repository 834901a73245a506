"""torch.compile's memory budget: torch's knapsack solvers against remat's (issue 26).

pytorch#197838 reports that, on a Llama-like model, the peak torch.compile
reaches under activation_memory_budget is not monotonic in the budget: at
0.05 the backward recomputes every layer up front and holds the results.
This benchmark compiles a Llama-like stack of the same shape on the CPU and,
for each depth and backend asked:
  - torch's solvers ("dp", "greedy", and "ilp" when scipy is installed) at
    the fractions 0.05 0.1 0.15 0.2 0.3 0.5 0.9;
  - remat_torch.compile_budget at 7 byte budgets from the least peak remat
    finds (its refusal names it) to the peak of recomputing nothing;
and for each plan prints the measured peak (the allocator's, over one
forward and backward, above what was live before: remat_torch.step_peak's
CPU count), the predicted peak (remat's, remat_torch._compile.predict: for
torch's plans the same liveness count over the saved set torch chose), the
step time (forward + backward, the median of --rounds steps, the plans
interleaved: one step of each per round), and the re-run FLOPs (the same
count for every plan: torch's flop counter, one per element for the ops it
does not count).

The model: the Llama-like layer of pytorch#197838 as far as the report
states it -- hidden 256, RMSNorm, attention through scaled_dot_product_attention
with rotary embeddings, a SwiGLU MLP -- with 4 heads, an MLP of 688, a
vocabulary of 1024 and batch 2; the report scales the sequence with the
depth (512 tokens at 16 layers, 1024 at 32); this machine's 2 cores take
--seq (default 256) at every depth.  Each plan is its own compiled step
function (a code object of its own, so that dynamo keeps every plan's
compiled code and the plans can be timed in turns), compiled fullgraph.

The instrumentation, for this benchmark only: torch's
choose_saved_values_set is wrapped to record the joint graph and the saved
set it returns (what every solver's plan finally is), which predict()
prices and which, for remat's plans, is checked against the plan's own.

    .venv/bin/python bench/compile_budget.py --layers 16 --backend aot_eager
    .venv/bin/python bench/compile_budget.py --layers 32 --backend aot_eager --rounds 3
    .venv/bin/python bench/compile_budget.py --layers 16 --backend inductor
Each run adds its rows to docs/compile-budget.json (replacing rows of the
same depth, backend and solver) and rewrites docs/compile-budget.md (the
table, and issue 26's targets checked per depth and backend) and
docs/compile-budget.svg (peak against budget, both solvers).
    .venv/bin/python bench/compile_budget.py --report      # the .md and .svg again from the .json
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("REMAT_LIB", os.path.join(ROOT, "build", "libremat.so"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import remat_torch as rt  # noqa: E402
from remat_torch import _compile  # noqa: E402

FRACTIONS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.9)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.wq, self.wk = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.wv, self.wo = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, D = x.shape
        hd = D // self.heads

        def heads(t):                                        # (B, T, D) -> (B, heads, T, hd)
            return t.view(B, T, self.heads, hd).transpose(1, 2)

        def rope(t):                                         # rotate halves by the position's angle
            a, b = t[..., :hd // 2], t[..., hd // 2:]
            return torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
        q, k, v = rope(heads(self.wq(x))), rope(heads(self.wk(x))), heads(self.wv(x))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, D))


class Layer(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.attn_norm, self.attn = nn.RMSNorm(d), Attention(d, heads)
        self.mlp_norm = nn.RMSNorm(d)
        self.w1, self.w3 = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.w2 = nn.Linear(ffn, d, bias=False)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class LlamaLike(nn.Module):
    def __init__(self, layers, d=256, heads=4, ffn=688, vocab=1024, seq=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(Layer(d, heads, ffn) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)
        hd = d // heads
        inv = 1.0 / 10000 ** (torch.arange(hd // 2, dtype=torch.float32) / (hd // 2))
        ang = torch.arange(seq, dtype=torch.float32)[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def forward(self, ids, targets):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---- the instrumentation: what the partitioner finally saves -------------------------------------
RECORDS = []        # remat_torch._compile.record_partitions(), installed by main()


def step_function(model, tag):
    """a step function with a code object of its own (dynamo caches compiled code per code object)"""
    src = "def step_%s(ids, targets):\n    return model(ids, targets)\n" % tag
    scope = {"model": model}
    exec(compile(src, "<compile_budget %s>" % tag, "exec"), scope)
    return scope["step_" + tag]


class Run:
    """one plan: its compiled step, and what was recorded of it"""

    def __init__(self, solver, budget, label):
        self.solver, self.budget, self.label = solver, budget, label
        self.fn = None
        self.plan = None
        self.refused = None
        self.times = []


def compile_run(model, inputs, backend, run, tag):
    from torch._functorch import config as fconfig
    fn = torch.compile(step_function(model, tag), backend=backend, fullgraph=True)
    n0 = len(RECORDS)
    t0 = time.perf_counter()
    model.zero_grad(set_to_none=False)
    if run.solver == "remat":
        try:
            with rt.compile_budget(run.budget) as cb:
                loss = fn(*inputs)
        except rt.RematError as e:
            run.refused = e.message
            return
        run.plan = cb.plans[0] if cb.plans else None
    else:
        with fconfig.patch(activation_memory_budget=run.budget, activation_memory_budget_solver=run.solver):
            loss = fn(*inputs)
    loss.backward()
    run.compile_s = time.perf_counter() - t0
    run.fn = fn
    rec = RECORDS[n0:]
    if not rec:
        raise RuntimeError("%s %s: torch did not partition the graph (a cache served it?)" % (run.solver, run.label))
    joint, info, saved = rec[-1]
    run.predicted, run.flops = _compile.predict(joint, info, saved)
    if run.plan is not None:
        tensor_of = run.plan.tensor_of
        mine = {tensor_of.get(n.name, n.name) for n in saved if not n.name.startswith("primals")}
        mine = {n for n in mine if not n.startswith("primals")}
        run.same_set = mine == set(run.plan.saved) - set(run.plan.returned)   # torch lists no output as saved
        run.plan_peak = run.plan.peak_bytes


class Step(nn.Module):
    """a compiled step as a module, for remat_torch.step_peak (it reads the parameters)"""

    def __init__(self, fn, model):
        super().__init__()
        self.fn, self.model = fn, model

    def forward(self, *inputs):
        return self.fn(*inputs)


def measure_peak(run, model, inputs):
    peak, before = rt.step_peak(Step(run.fn, model), inputs, None, loss_fn=lambda out: out)
    return peak - before


def one_step(fn, model, inputs):
    model.zero_grad(set_to_none=False)
    t = time.perf_counter()
    fn(*inputs).backward()
    return time.perf_counter() - t


def bench(layers, backend, rounds, seq, solvers):
    torch.manual_seed(0)
    torch._dynamo.config.cache_size_limit = 256
    # every plan must be partitioned (and recorded) anew: AOTAutograd's cache would hand back a
    # partition made for another plan of the same graph (under inductor, torch's greedy at 0.05
    # was served dp's and never reached the partitioner)
    torch._functorch.config.enable_autograd_cache = False
    model = LlamaLike(layers, seq=seq)
    inputs = (torch.randint(0, 1024, (2, seq)), torch.randint(0, 1024, (2, seq)))
    runs = []
    tag = 0
    for s in solvers:
        for fr in FRACTIONS:
            runs.append(Run(s, fr, "%.2f" % fr))
    # remat's range: the peak of recomputing nothing, and the least remat finds
    probe = Run("remat", 1 << 50, "")
    compile_run(model, inputs, backend, probe, "probe")
    top = probe.plan.peak_bytes
    low = Run("remat", 1, "")
    compile_run(model, inputs, backend, low, "low")
    least = int(low.refused.split("least peak found is ")[1].split()[0])
    print("depth %d, %s: remat's least peak %s, the peak of recomputing nothing %s (%s)" % (
        layers, backend, rt._plan.fmt_bytes(least), rt._plan.fmt_bytes(top), low.refused), flush=True)
    for k in range(7):
        b = least + (top - least) * k // 6
        runs.append(Run("remat", b, "%.1f MiB" % (b / 2 ** 20)))
    for r in runs:
        tag += 1
        compile_run(model, inputs, backend, r, "p%d" % tag)
        if r.fn is None:
            print("  %s %s: refused: %s" % (r.solver, r.label, r.refused), flush=True)
            continue
        r.peak = measure_peak(r, model, inputs)
        print("  %-6s %-10s compiled in %5.1f s: measured %s, predicted %s, re-run %.3g FLOPs%s" % (
            r.solver, r.label, r.compile_s, rt._plan.fmt_bytes(r.peak), rt._plan.fmt_bytes(r.predicted), r.flops,
            "" if r.plan is None else ", plan %s, torch saved the plan's set: %s" % (
                rt._plan.fmt_bytes(r.plan_peak), r.same_set)), flush=True)
    live = [r for r in runs if r.fn is not None]
    for r in live:                       # a warm-up step each
        one_step(r.fn, model, inputs)
    for k in range(rounds):              # interleaved: one step of each plan per round
        for r in live:
            r.times.append(one_step(r.fn, model, inputs))
    rows = []
    for r in runs:
        row = {"depth": layers, "backend": backend, "seq": seq, "solver": r.solver, "budget": r.budget}
        if r.fn is None:
            row["refused"] = r.refused
        else:
            row.update(measured=r.peak, predicted=r.predicted, flops=r.flops, step_ms=1e3 * statistics.median(r.times),
                       compile_s=round(r.compile_s, 1))
            if r.plan is not None:
                row.update(plan_peak=r.plan_peak, same_set=r.same_set, method=r.plan.method)
        rows.append(row)
    return rows


# ---- the table and the plot ------------------------------------------------------------------------

def mib(b):
    return b / 2 ** 20


def table(rows):
    out = ["| depth | backend | solver | budget | measured peak | predicted peak | error | step | re-run FLOPs |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        budget = ("%.2f" % r["budget"]) if r["solver"] != "remat" else "%.1f MiB" % mib(r["budget"])
        if "refused" in r:
            out.append("| %d | %s | %s | %s | refused | | | | |" % (r["depth"], r["backend"], r["solver"], budget))
            continue
        err = 100.0 * (r["predicted"] - r["measured"]) / r["measured"]
        out.append("| %d | %s | %s | %s | %.1f MiB | %.1f MiB | %+.1f%% | %.0f ms | %.3g |" % (
            r["depth"], r["backend"], r["solver"], budget, mib(r["measured"]), mib(r["predicted"]), err,
            r["step_ms"], r["flops"]))
    return "\n".join(out)


def targets(rows):
    """issue 26's targets, per depth and backend, in words (a markdown list)"""
    out = []
    for depth, backend in sorted({(r["depth"], r["backend"]) for r in rows}):
        rs = [r for r in rows if (r["depth"], r["backend"]) == (depth, backend) and "measured" in r]
        rem = sorted((r for r in rs if r["solver"] == "remat"), key=lambda r: r["budget"])
        tor = [r for r in rs if r["solver"] != "remat"]
        if not rem:
            continue
        over = max(100.0 * (r["measured"] - r["budget"]) / r["budget"] for r in rem)
        mono = all(a["measured"] <= b["measured"] for a, b in zip(rem, rem[1:]))
        err = max(abs(100.0 * (r["predicted"] - r["measured"]) / r["measured"]) for r in rem)
        terr = max([abs(100.0 * (r["predicted"] - r["measured"]) / r["measured"]) for r in tor] or [0])
        miss = []
        for t in tor:
            ok = [r for r in rem if r["measured"] <= t["measured"]]
            fast = [r for r in ok if r["step_ms"] <= 1.03 * t["step_ms"]]
            flop = [r for r in ok if r["flops"] <= t["flops"]]
            if not fast:
                miss.append("%s %.2f (%s)" % (t["solver"], t["budget"], "no remat point with a peak as low" if not ok
                            else "lowest-peak-enough remat point %.0f ms against %.0f ms; by re-run FLOPs %s" % (
                                min(r["step_ms"] for r in ok), t["step_ms"],
                                "covered" if flop else "not covered")))
        small = [t for t in tor if t["budget"] == min(x["budget"] for x in tor)]
        low = min(rem, key=lambda r: r["measured"])
        out.append("- %d layers, %s: remat's measured peak at most %+.2f%% over its budget, %s in the budget; "
                   "predicted within %.2f%% of measured (torch's plans, by the same count: %.2f%%); torch's %d points "
                   "covered within 3%% of step time: %d%s; at %.2f, torch's peaks %s against remat's least %.1f MiB "
                   "(%s)." % (
                       depth, backend, over, "monotone" if mono else "NOT monotone", err, terr, len(tor),
                       len(tor) - len(miss), (" (not: " + "; ".join(miss) + ")") if miss else "",
                       small[0]["budget"] if small else 0,
                       ", ".join("%s %.1f MiB" % (t["solver"], mib(t["measured"])) for t in small),
                       mib(low["measured"]),
                       ", ".join("%.0f%% lower than %s" % (100.0 * (1 - low["measured"] / t["measured"]), t["solver"])
                                 for t in small)))
    return "\n".join(out)


def svg(rows):
    """peak against budget: per depth and backend a panel; torch's solvers against the fraction
    (bottom axis), remat's against its byte budget (top axis, the same panel's range), measured
    peaks on a common vertical axis"""
    groups = sorted({(r["depth"], r["backend"]) for r in rows})
    W, H, PAD = 420, 300, 55
    colors = {"dp": "#1f77b4", "greedy": "#2ca02c", "ilp": "#9467bd", "remat": "#d62728"}
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
             'font-size="11">' % (W * len(groups), H + 40)]
    for gi, (depth, backend) in enumerate(groups):
        ox = gi * W
        rs = [r for r in rows if (r["depth"], r["backend"]) == (depth, backend) and "measured" in r]
        if not rs:
            continue
        ymax = max(r["measured"] for r in rs) * 1.05
        rem = [r for r in rs if r["solver"] == "remat"]
        bmax = max([r["budget"] for r in rem] + [1]) * 1.05

        def X(v, vmax):
            return ox + PAD + (W - PAD - 15) * v / vmax

        def Y(v):
            return 20 + (H - 40) * (1 - v / ymax)
        parts.append('<text x="%d" y="14" font-weight="bold">%d layers, %s</text>' % (ox + PAD, depth, backend))
        parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ox + PAD, Y(0), X(1, 1), Y(0)))
        parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ox + PAD, Y(0), ox + PAD, Y(ymax)))
        for k in range(5):
            v = ymax * k / 4
            parts.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (ox + PAD - 4, Y(v) + 4, mib(v)))
        parts.append('<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">measured peak, MiB'
                     '</text>' % (ox + 14, H // 2, ox + 14, H // 2))
        for k in range(6):
            v = k / 5
            parts.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.1f</text>' % (X(v, 1), H - 4, v))
            parts.append('<text x="%.1f" y="%d" text-anchor="middle" fill="%s">%.0f</text>' % (
                X(v * bmax, bmax), H + 10, colors["remat"], mib(v * bmax)))
        parts.append('<text x="%d" y="%d" fill="#555">torch: budget fraction</text>' % (ox + PAD, H + 24))
        parts.append('<text x="%d" y="%d" fill="%s">remat: budget, MiB (y = x dashed)</text>' % (
            ox + PAD, H + 36, colors["remat"]))
        parts.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>' % (
            X(0, bmax), Y(0), X(min(bmax, ymax), bmax), Y(min(bmax, ymax)), colors["remat"]))
        for s in sorted({r["solver"] for r in rs}):
            pts = sorted((r["budget"], r["measured"]) for r in rs if r["solver"] == s)
            xs = [(X(b, bmax) if s == "remat" else X(b, 1), Y(m)) for b, m in pts]
            parts.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (
                colors.get(s, "black"), " ".join("%.1f,%.1f" % p for p in xs)))
            for x, y in xs:
                parts.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (x, y, colors.get(s, "black")))
        ly = 30
        for s in sorted({r["solver"] for r in rs}):
            parts.append('<text x="%d" y="%d" fill="%s">%s</text>' % (ox + W - 70, ly, colors.get(s, "black"), s))
            ly += 13
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


HEADER = """# torch.compile's memory budget: torch's solvers against remat

Made by `bench/compile_budget.py` (its docstring says what each column is;
docs/pytorch.md, "torch.compile (issue 26)", what the figures say and on which
machine).  torch's budgets are `activation_memory_budget` fractions, remat's
the bytes given to `remat_torch.compile_budget`; peaks in MiB of 2^20 bytes,
above what was live before the step; the step is the median of the
interleaved rounds.

"""


def write(rows, outdir):
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "compile-budget.json")
    old = []
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    keys = {(r["depth"], r["backend"], r["solver"]) for r in rows}
    merged = [r for r in old if (r["depth"], r["backend"], r["solver"]) not in keys] + rows
    merged.sort(key=lambda r: (r["backend"] != "aot_eager", r["depth"], r["solver"] == "remat", r["solver"],
                               r["budget"]))
    for name, text in (("compile-budget.json", json.dumps(merged, indent=1) + "\n"),
                       ("compile-budget.md", HEADER + table(merged) + "\n\n" + targets(merged) + "\n"),
                       ("compile-budget.svg", svg(merged))):
        tmp = os.path.join(outdir, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(outdir, name))            # written atomically
    return merged


def main():
    global RECORDS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--backend", default="aot_eager", choices=("aot_eager", "inductor"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--solvers", default="dp,greedy,ilp")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs"))
    ap.add_argument("--report", action="store_true", help="rewrite the table and plot from the .json, run nothing")
    a = ap.parse_args()
    if a.report:
        merged = write([], a.out)
        print(table(merged))
        print(targets(merged))
        return 0
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 5):
        print("SKIP: compile_budget needs torch >= 2.5 (has %s)" % torch.__version__)
        return 77
    solvers = [s for s in a.solvers.split(",") if s]
    if "ilp" in solvers:
        try:
            import scipy  # noqa: F401
        except ImportError:
            print("ilp: scipy is not installed: left out")
            solvers.remove("ilp")
    RECORDS = _compile.record_partitions()
    print("torch %s, %d threads, OPENBLAS_CORETYPE=%s, load average %s" % (
        torch.__version__, torch.get_num_threads(), os.environ.get("OPENBLAS_CORETYPE", "(unset)"),
        " ".join("%.1f" % v for v in os.getloadavg())), flush=True)
    rows = bench(a.layers, a.backend, a.rounds, a.seq, solvers)
    write(rows, a.out)
    print(table(rows))
    print(targets(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
