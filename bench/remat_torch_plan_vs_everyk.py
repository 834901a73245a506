#!/usr/bin/env python3
"""bench/remat_torch_plan_vs_everyk.py -- the measured wall time of remat_torch's plan against every:K
at the same budget (issue 25, item 7).  Not a test: it prints figures.

A GPT-2 written in plain torch (tests/torch_models.py), large enough to time
on a CPU (default L=8 C=256 T=256 B=8).  It measures the table, takes the
budget as a share of what the unwrapped model keeps (--budget 0.5), plans
it (remat_torch.plan), and lists every every:K whose predicted kept bytes
fit the same budget.  Then it times training steps (forward + backward,
loss and gradients, no optimizer) of each, interleaved -- plan, every:K1,
every:K2, ..., plan, ... -- for --rounds rounds after one untimed warm-up
round, and prints per policy the median, the plan's ratio to each every:K
in the same run, and the kept bytes measured (hooks) against predicted.
The machine it ran on may be shared: the ratios, from interleaved rounds,
are what to read, not the absolute times.

    REMAT_LIB=build/libremat.so .venv/bin/python bench/remat_torch_plan_vs_everyk.py
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
os.environ.setdefault("REMAT_LIB", os.path.join(HERE, "..", "build", "libremat.so"))
import torch  # noqa: E402
import remat_torch as rt  # noqa: E402
from torch_models import GPT2  # noqa: E402


def timed_step(model, inputs):
    for p in model.parameters():
        p.grad = None
    t0 = time.perf_counter()
    model(*inputs).backward()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--budget", type=float, default=0.5, help="share of the unwrapped model's kept bytes")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    V = 512
    model = GPT2(a.layers, a.width, a.heads, V, a.seq)
    idx, tg = torch.randint(0, V, (a.batch, a.seq)), torch.randint(0, V, (a.batch, a.seq))
    inputs = (idx, tg)
    table = rt.measure(model, inputs)
    budget = int(a.budget * table.kept_bytes)
    best = rt.plan(model, inputs, kept_budget=budget, table=table)
    plans = [("plan", best)]
    for K in range(1, a.layers + 1):
        e = best.evaluate("every:%d" % K)
        if e["kept_bytes"] <= budget:
            plans.append(("every:%d" % K, rt.plan(model, inputs, kept_budget=budget, table=table, policy="every:%d" % K)))
    print("torch %s, %d threads, %s; GPT-2 L%d C%d T%d B%d; budget %d B (%.0f%% of %d kept unwrapped)"
          % (torch.__version__, a.threads, table.data["device"], a.layers, a.width, a.seq, a.batch, budget,
             100 * a.budget, table.kept_bytes))
    print("plan: %s" % best.policy)
    times = {n: [] for n, _ in plans}
    kept = {}
    for r in range(a.rounds + 1):
        for n, p in plans:
            rt.apply(model, p)
            t = timed_step(model, inputs)
            if r == 0:
                kept[n] = rt.kept_bytes(model, inputs)
            else:
                times[n].append(t)
            rt.unapply(model)
    med = {n: statistics.median(v) for n, v in times.items()}
    print("\n%-10s %12s %12s %10s %10s %12s  %s" % ("policy", "median ms", "predicted ms", "vs plan", "kept", "predicted",
                                                   "all rounds ms"))
    for n, p in plans:
        print("%-10s %12.1f %12.1f %9.3fx %10d %12d  %s" % (n, 1e3 * med[n], p.step_ms, med[n] / med["plan"], kept[n],
                                                           p.kept_bytes, " ".join("%.0f" % (1e3 * t) for t in times[n])))
    print("\n(interleaved %d rounds after a warm-up; 'vs plan' = every:K's median / the plan's, > 1: the plan is "
          "faster; the machine may be shared)" % a.rounds)


if __name__ == "__main__":
    main()
