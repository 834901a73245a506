"""remat_torch.compile_budget under inductor: the step time with and without inductor's buffer reuse.

Inside compile_budget, inductor reuses no freed buffer (torch._inductor.config.allow_buffer_reuse
off; docs/pytorch.md, "torch.compile (issue 26)", says why).  This times that choice: the same
remat plan of bench/compile_budget.py's Llama-like model compiled twice, with
compile_budget(budget) and compile_budget(budget, buffer_reuse=True), and torch's default
partition as a probe in the same rounds; one step of each per round, the median of each.

    .venv/bin/python bench/compile_buffer_reuse.py [--layers 16] [--budget-mib 70] [--rounds 9]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compile_budget as cb  # noqa: E402  (the model, the step function, the measurements)

import torch  # noqa: E402
import torch._functorch.config  # noqa: E402

rt = cb.rt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--budget-mib", type=float, default=70.0)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    if a.layers < 1 or a.rounds < 1 or not a.budget_mib > 0:
        ap.error("--layers and --rounds must be at least 1, --budget-mib above 0")
    torch.manual_seed(0)
    torch._functorch.config.enable_autograd_cache = False
    model = cb.LlamaLike(a.layers, seq=256)
    inputs = (torch.randint(0, 1024, (2, 256)), torch.randint(0, 1024, (2, 256)))
    budget = int(a.budget_mib * 2 ** 20)
    runs = {}
    for name, reuse in (("reuse off (remat's default)", False), ("reuse on", True)):
        fn = torch.compile(cb.step_function(model, "r%d" % reuse), backend="inductor", fullgraph=True)
        with rt.compile_budget(budget, buffer_reuse=reuse) as ctx:
            fn(*inputs).backward()
        runs[name] = (fn, ctx.plans[0].peak_bytes)
    fn = torch.compile(cb.step_function(model, "default"), backend="inductor", fullgraph=True)
    fn(*inputs).backward()
    runs["torch's default partition"] = (fn, None)
    times = {k: [] for k in runs}
    for k, (f, _) in runs.items():
        cb.one_step(f, model, inputs)                        # a warm-up step each
    for _ in range(a.rounds):                                # interleaved: one step of each per round
        for k, (f, _) in runs.items():
            times[k].append(cb.one_step(f, model, inputs))
    print("torch %s, %d threads, %d layers, budget %.1f MiB, load %.1f %.1f %.1f" % (
        torch.__version__, torch.get_num_threads(), a.layers, a.budget_mib, *os.getloadavg()))
    for k, (f, pred) in runs.items():
        r = cb.Run("x", 0, k)
        r.fn = f
        peak = cb.measure_peak(r, model, inputs)
        print("%-28s step %7.1f ms (median of %d)  measured peak %s%s" % (
            k, 1e3 * statistics.median(times[k]), a.rounds, rt._plan.fmt_bytes(peak),
            "" if pred is None else ", predicted %s" % rt._plan.fmt_bytes(pred)))


if __name__ == "__main__":
    main()
