#!/usr/bin/python3
"""py_compile_budget.py -- remat_torch.compile_budget, measured (issue 26).

A Llama written in plain torch (tests/torch_models.py: explicit attention,
RMSNorm, SwiGLU; 4 layers, C 64, T 64, batch 4) is compiled with backend
aot_eager -- torch's partitioner, run eagerly, through a backend that records
the compiled graphs -- under compile_budget at budgets from the least remat
finds to more than the peak of recomputing nothing.  For each:
  - the loss and every gradient bit for bit those of the same model compiled
    with torch's default partitioner (the same aten kernels on the same
    inputs: recomputation changes no bit);
  - the compiled backward's inputs (what torch saved), through their aliases
    (plan.tensor_of), are exactly the tensors remat's plan saves;
  - the peak the allocator sees over the forward and backward (the CPU
    profiler's memory events, as remat_torch.step_peak counts them) at most
    2% over the budget, and within 2% of the plan's predicted peak;
  - the plan has a row for each of the 4 layers and one for the head (what
    comes after the chain), re-run FLOPs, and the exact search by layers
    (remat_graph_search's REMAT_GRAPH_EXACT_LAYERS).
The same count, remat_torch._compile.predict, of the partition torch's
default partitioner makes (what it saves recorded from
choose_saved_values_set) is within 2% of that plan's measured peak too.
A budget of 1 byte and one a byte below the least are refused in one line
naming the least peak (RematError).  A seeded fault -- the bytes of each
forward tensor the backward reads halved in the conversion
(remat_torch._compile.FAULTS) -- must fail
the prediction check (it is run and its failures counted, not reported as
this test's).
Inductor is tests/py_compile_inductor.py's.  Torch >= 2.5 only
(CustomKnapsackSolver).
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
    skip("py_compile_budget", "torch is not installed for this interpreter")
rt = import_remat_torch()
if not rt._compile._torch_ok():
    skip("py_compile_budget", "torch %s has no CustomKnapsackSolver (torch >= 2.5)" % torch.__version__)

from torch._dynamo.backends.common import aot_autograd  # noqa: E402
from torch._dynamo.backends.debugging import boxed_nop  # noqa: E402
from torch._functorch.partitioners import min_cut_rematerialization_partition  # noqa: E402
from torch_models import Llama  # noqa: E402

GRAPHS = {}
SAVED = []          # (joint graph, node info, saved nodes) of each partition, for predict()


def _record(kind):
    def compiler(gm, example_inputs):
        GRAPHS[kind] = gm
        return boxed_nop(gm, example_inputs)      # aot_eager's own compiler (boxed: frees as it goes)
    return compiler


# aot_eager (torch/_dynamo/backends/debugging.py), with the graphs recorded
BACKEND = aot_autograd(fw_compiler=_record("fw"), bw_compiler=_record("bw"),
                       partition_fn=min_cut_rematerialization_partition, keep_inference_input_mutations=True)


def compiled(model, budget):
    """a fresh compile of model (compiled at its first call, under compile_budget(budget) unless None):
    (function, plan or None, loss and gradients of that first call)"""
    torch._dynamo.reset()
    GRAPHS.clear()
    f = torch.compile(model, backend=BACKEND)
    model.zero_grad(set_to_none=True)
    if budget is None:
        loss = f(*INPUTS)
        plan = None
    else:
        with rt.compile_budget(budget) as cb:
            loss = f(*INPUTS)
        plan = cb.plans[0] if cb.plans else None
    loss.backward()
    return f, plan, (loss.detach().clone(), [p.grad.clone() for p in model.parameters()])


def measured_peak(f):
    """the allocator's peak over a forward and backward, above what was live before it"""
    peak, before = rt.step_peak(f, INPUTS, None, loss_fn=lambda out: out)
    return peak - before


def saved_by_torch(plan):
    """the tensors the compiled backward takes from the forward (its inputs that are neither
    parameters nor the incoming gradient), as remat names them"""
    names = [n.name for n in GRAPHS["bw"].graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    return {plan.tensor_of.get(n, n) for n in names} - {n for n in plan.tensor_of.values() if n.startswith("primals")}


def checks_of(check, plan, f, ref, got, budget, label):
    """the checks of one compiled plan (returns how many failed)"""
    bad0 = check.bad
    check(torch.equal(ref[0], got[0]) and all(torch.equal(a, b) for a, b in zip(ref[1], got[1])),
          "%s: loss or gradients differ from the default partitioner's" % label)
    saved = saved_by_torch(plan)
    check(saved == set(plan.saved), "%s: torch saved %s, remat's plan %s (differ: %s)" % (
        label, sorted(saved), sorted(plan.saved), sorted(saved ^ set(plan.saved))))
    meas = measured_peak(f)
    check(meas <= budget * 1.02, "%s: measured peak %d over the budget %d by more than 2%%" % (label, meas, budget))
    check(abs(meas - plan.peak_bytes) <= 0.02 * plan.peak_bytes,
          "%s: measured peak %d, predicted %d (%.2f%%)" % (label, meas, plan.peak_bytes,
                                                          100.0 * (meas - plan.peak_bytes) / plan.peak_bytes))
    check(len(plan.layers) == 5 and plan.layers[-1].name == "(after the chain)" and
          all(re.search(r"layers\.%d$" % k, plan.layers[k].name) for k in range(4)) and
          plan.method == "exact, by layers" and plan.recompute_flops >= 0, "%s: plan %r, layers %s" % (
              label, plan, [x.name for x in plan.layers]))
    print("%-24s budget %9d  predicted %9d  measured %9d  re-run %.3g FLOPs  saved %d tensors" % (
        label, budget, plan.peak_bytes, meas, plan.recompute_flops, len(plan.saved)))
    return check.bad - bad0


def main():
    global INPUTS, SAVED
    check = Checks()
    torch.manual_seed(26)
    model = Llama(4, 64, 4, 2, 16, 160, 64, 64)
    INPUTS = (torch.randint(0, 64, (4, 64)), torch.randint(0, 64, (4, 64)))
    SAVED = rt._compile.record_partitions()
    f, _, ref = compiled(model, None)
    pred, _ = rt._compile.predict(*SAVED[-1])
    meas = measured_peak(f)
    check(abs(meas - pred) <= 0.02 * pred, "torch's default partition: measured peak %d, remat predicts %d" % (
        meas, pred))
    print("%-24s budget %9s  predicted %9d  measured %9d" % ("default partitioner", "-", pred, meas))
    # more than the peak of recomputing nothing
    f, top, got = compiled(model, 1 << 40)
    checks_of(check, top, f, ref, got, 1 << 40, "budget 1 TiB")
    check(top.recompute_flops > 0 and top.layers[0].saved, "nothing saved at a large budget: %r" % top)
    # the least: a refusal names it, in one line
    least = None
    try:
        compiled(model, 1)
        check(False, "a budget of 1 byte was not refused")
    except rt.RematError as e:
        m = re.search(r"least peak found is (\d+) bytes", e.message)
        check(m is not None and "\n" not in e.message, "the refusal of 1 byte: %r" % e.message)
        least = int(m.group(1)) if m else None
    if least is None:
        return report("py_compile_budget", check.good, check.bad)
    try:
        compiled(model, least - 1)
        check(False, "a byte below the least peak (%d) was not refused" % least)
    except rt.RematError as e:
        check("least peak found is %d bytes" % least in e.message and "\n" not in e.message,
              "the refusal of %d bytes: %r" % (least - 1, e.message))
    budgets = [least, least + (top.peak_bytes - least) // 3, least + 2 * (top.peak_bytes - least) // 3]
    peaks = []
    for b in budgets:
        f, plan, got = compiled(model, b)
        checks_of(check, plan, f, ref, got, b, "budget %d" % b)
        check(plan.peak_bytes <= b, "budget %d: predicted peak %d over it" % (b, plan.peak_bytes))
        peaks.append(plan.peak_bytes)
    check(peaks[0] < peaks[-1] < top.peak_bytes, "the peaks %s do not grow with the budgets %s" % (peaks, budgets))
    # the seeded fault: the prediction check must catch it
    rt._compile.FAULTS.add("half_bytes")
    try:
        f, plan, got = compiled(model, budgets[1])
        caught = Caught()
        failed = checks_of(caught, plan, f, ref, got, budgets[1], "fault: half bytes")
        check(failed > 0, "the seeded fault (saved tensors' bytes halved) passed every check")
        print("the seeded fault fails %d of %d checks" % (failed, caught.good + caught.bad))
    finally:
        rt._compile.FAULTS.clear()
    return report("py_compile_budget", check.good, check.bad)


if __name__ == "__main__":
    sys.exit(main())
