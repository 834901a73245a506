#!/usr/bin/python3
"""py_compile_inductor.py -- remat_torch.compile_budget under inductor, measured (issue 26).

tests/py_compile_budget.py's Llama (tests/torch_models.py: explicit
attention, RMSNorm, SwiGLU, RoPE; 4 layers, C 64, T 64, batch 4) compiled
with backend "inductor", which generates its own fused C++ kernels, under
compile_budget at a budget above the peak of recomputing nothing and half
way down to inductor's least peak (named by the refusal of a budget of 1
byte).  For each plan:
  - torch's partition saves remat's set (recorded from
    choose_saved_values_set, through plan.tensor_of; the loss, which the
    forward returns, is not among what torch lists as saved);
  - the search is the exact one by layers (inductor's decompositions make
    scalar constants every layer reads; they are kept, so that the graph
    stays a chain of layers);
  - the peak the allocator sees over the forward and backward (the CPU
    profiler's memory events, remat_torch.step_peak) is within 4% of the
    plan's prediction, and at most 4% over the budget;
  - the loss and every gradient are within 1e-5 (of each tensor's largest)
    of eager torch's: inductor's fused kernels sum in other orders.
The 4%, not the issue's 2%: inductor's scheduler orders some ops otherwise
than torch's partition (a layer's recomputed attention before the gradient
of its output projection), which measures +1.1% to +3.1% over remat's
count on this small model (+0.3% at most on bench/compile_budget.py's 16
layers, docs/pytorch.md).  Inside the context inductor reuses no freed
buffer and fuses no two ops of different layers horizontally
(python/remat_torch/_compile.py says why); the seeded faults undo each and
must fail: buffer reuse (compile_budget(..., buffer_reuse=True)) at the
large budget (+5.4% here), the cross-layer fusions (FAULTS
"cross_layer_fusion") half way (+11%).  Torch >= 2.5 only.  The C compiler
inductor runs is spawned without the sanitizer build's preloaded runtimes
(they are this process's, for libremat.so).
"""
# REMAT_TEST_TORCH: 2
# REMAT_TEST_IN_PROCESS: it loads libremat.so into the interpreter (tests/python_in_process.sh)
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Caught, Checks, import_remat_torch, report, skip

try:
    import torch
except ImportError:
    skip("py_compile_inductor", "torch is not installed for this interpreter")
rt = import_remat_torch()
if not rt._compile._torch_ok():
    skip("py_compile_inductor", "torch %s has no CustomKnapsackSolver (torch >= 2.5)" % torch.__version__)

from torch_models import Llama  # noqa: E402

os.environ.pop("LD_PRELOAD", None)      # inductor's g++ runs uninstrumented (see above)
SAVED = []


def compiled(model, budget, buffer_reuse=False):
    """a fresh inductor compile of model under compile_budget(budget): (function, plan, loss and
    gradients of its first call, the nodes torch's partition saved)"""
    torch._dynamo.reset()
    f = torch.compile(model, backend="inductor")
    model.zero_grad(set_to_none=True)
    with rt.compile_budget(budget, buffer_reuse=buffer_reuse) as cb:
        loss = f(*INPUTS)
    loss.backward()
    return f, cb.plans[0], (loss.detach().clone(), [p.grad.clone() for p in model.parameters()]), SAVED[-1][2]


def measured_peak(f):
    """the allocator's peak over a forward and backward, above what was live before it"""
    peak, before = rt.step_peak(f, INPUTS, None, loss_fn=lambda out: out)
    return peak - before


def checks_of(check, plan, f, ref, got, saved, budget, label):
    """the checks of one plan (returns how many failed)"""
    bad0 = check.bad
    worst = max(((a - b).abs().max() / a.abs().max().clamp_min(1e-30)).item()
                for a, b in zip([ref[0]] + ref[1], [got[0]] + got[1]))
    check(worst <= 1e-5, "%s: loss or gradients %.3g (of each tensor's largest) from eager's" % (label, worst))
    mine = {plan.tensor_of.get(n.name, n.name) for n in saved if not n.name.startswith("primals")}
    want = set(plan.saved) - set(plan.returned)
    check(mine == want, "%s: torch saved %s, remat's plan %s" % (label, sorted(mine), sorted(want)))
    meas = measured_peak(f)
    check(meas <= budget * 1.04, "%s: measured peak %d over the budget %d by more than 4%%" % (label, meas, budget))
    check(abs(meas - plan.peak_bytes) <= 0.04 * plan.peak_bytes,
          "%s: measured peak %d, predicted %d (%+.2f%%)" % (label, meas, plan.peak_bytes,
                                                           100.0 * (meas - plan.peak_bytes) / plan.peak_bytes))
    print("%-26s budget %9d  predicted %9d  measured %9d (%+.2f%%)  gradients within %.2g" % (
        label, budget, plan.peak_bytes, meas, 100.0 * (meas - plan.peak_bytes) / plan.peak_bytes, worst))
    return check.bad - bad0


def main():
    global INPUTS, SAVED
    check = Checks()
    torch.manual_seed(26)
    model = Llama(4, 64, 4, 2, 16, 160, 64, 64)
    INPUTS = (torch.randint(0, 64, (4, 64)), torch.randint(0, 64, (4, 64)))
    SAVED = rt._compile.record_partitions()
    model.zero_grad(set_to_none=True)
    loss = model(*INPUTS)
    loss.backward()
    ref = (loss.detach().clone(), [p.grad.clone() for p in model.parameters()])
    least = None
    try:
        compiled(model, 1)
        check(False, "a budget of 1 byte was not refused")
    except rt.RematError as e:
        m = re.search(r"least peak found is (\d+) bytes", e.message)
        check(m is not None and "\n" not in e.message, "the refusal of 1 byte: %r" % e.message)
        least = int(m.group(1)) if m else None
    if least is None:
        return report("py_compile_inductor", check.good, check.bad)
    f, top, got, saved = compiled(model, 1 << 40)
    checks_of(check, top, f, ref, got, saved, 1 << 40, "budget 1 TiB")
    mid = least + (top.peak_bytes - least) // 2
    f, plan, got, saved = compiled(model, mid)
    checks_of(check, plan, f, ref, got, saved, mid, "budget %d" % mid)
    for p in (top, plan):
        check(p.method == "exact, by layers", "not the exact search by layers: %r" % p)
    check(plan.peak_bytes <= mid < top.peak_bytes, "half way: %r, the top %r" % (plan, top))
    for fault, b in (("buffer reuse", 1 << 40), ("cross-layer fusion", mid)):
        if fault == "cross-layer fusion":
            rt._compile.FAULTS.add("cross_layer_fusion")
        try:
            f, p, got, saved = compiled(model, b, buffer_reuse=fault == "buffer reuse")
            caught = Caught()
            failed = checks_of(caught, p, f, ref, got, saved, b, "fault: " + fault)
            check(failed > 0, "the seeded fault (%s) passed every check" % fault)
            print("the seeded fault (%s) fails %d of %d checks" % (fault, failed, caught.good + caught.bad))
        finally:
            rt._compile.FAULTS.clear()
    return report("py_compile_inductor", check.good, check.bad)


if __name__ == "__main__":
    sys.exit(main())
