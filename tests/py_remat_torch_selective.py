#!/usr/bin/python3
"""py_remat_torch_selective.py -- per-op selective checkpointing, measured (issue 25, item 4).

On torch >= 2.5: measure(selective=True) records, with a dispatch mode, the
aten op that made each saved tensor, so that a block's saved tensors are
real subsets -- "expensive" (matrix products, attention) and "cheap" (the
rest) -- and apply installs the keep-set a plan picks with
create_selective_checkpoint_contexts, saving exactly those op calls'
outputs.  For a GPT-2 and a Llama (tests/torch_models.py): both sets
non-empty; under keep-expensive, keep-cheap, a mix with full checkpoints,
and the planner's plans at 40% and 70% of what the unwrapped model keeps,
the kept bytes measured two ways (hooks, allocator) within 1% and a few
bytes per checkpoint call of the prediction, and the loss, the gradients
and the buffers bit for bit the unwrapped model's.  A selective table read
back from its file (no op record) is refused by apply, in one line: a
policy that was not measured is never applied.
On torch < 2.5: measure(selective=True) refuses in one line naming the
version, and a selective plan is never applied.
"""
# REMAT_TEST_REQUIRED: CI installs torch; selective checkpointing must be checked against torch there
# REMAT_TEST_IN_PROCESS: it loads libremat.so into the interpreter (tests/python_in_process.sh)
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Checks, import_remat_torch, report, skip

try:
    import torch
except ImportError:
    skip("py_remat_torch_selective", "torch is not installed for this interpreter")

rt = import_remat_torch()
from torch_models import GPT2, Llama, kept_ok, same_step, step  # noqa: E402


def refused(check, what, run, words):
    """run() must raise a one-line RematError naming every one of words"""
    try:
        run()
        check(False, "%s was not refused" % what)
    except rt.RematError as e:
        check(all(w in e.message for w in words) and "\n" not in e.message, "%s: the refusal says %r" % (what, e.message))


def old_torch(check, model, inputs):
    refused(check, "torch %s: measure(selective=True)" % torch.__version__,
            lambda: rt.measure(model, inputs, selective=True), ("2.5", torch.__version__))


def refused_plan(check, what, model, inputs, table, pol, words):
    """a plan of table that apply must refuse: the model is left unwrapped"""
    p = rt.plan(model, inputs, kept_budget=1 << 30, table=table, policy=pol)
    refused(check, what, lambda: rt.apply(model, p), words)
    rt.unapply(model)


def handmade_selective(check, model, inputs):
    """a selective table made by hand from a measured one (its saved tensors split by size): its
    selective plans are refused by apply, whatever the torch"""
    import copy
    t = rt.measure(model, inputs)
    d = copy.deepcopy(t.data)
    d["selective"] = True
    for b in d["blocks"]:
        for k, e in enumerate(b["saved"]):
            e["cheap"] = k % 2 == 1
    t2 = rt.Table(d, t.blocks, t.chain, t.kept_bytes)
    refused_plan(check, "a selective plan that was never measured", model, inputs, t2,
                 "plan:" + ".".join(["A1"] * len(d["blocks"])), ("selective",))


def refused_unmeasured(check, model, inputs, table, pol):
    """a selective table without its op record (read back from the file) is not applied"""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.json")
        table.save(path)
        t2 = rt.Table.load(path)
    t2.blocks, t2.chain = table.blocks, table.chain
    refused_plan(check, "a selective plan of a table without its op record", model, inputs, t2, pol,
                 ("measure(selective=True)",))


def selective(check, name, model, inputs, rows):
    base = step(model, inputs, 1)
    t = rt.measure(model, inputs, selective=True)
    L = len(t.data["blocks"])
    sv = t.data["blocks"][0]["saved"]
    exp, chp = [e for e in sv if not e["cheap"]], [e for e in sv if e["cheap"]]
    check(t.data["selective"] and exp and chp, "%s: the saved tensors are not split (%d expensive, %d cheap)"
          % (name, len(exp), len(chp)))
    # A1: keep expensive, A2: keep cheap, A3: all, A0: only the output (a selective table's masks)
    pols = ["plan:" + ".".join(["A1"] * L), "plan:" + ".".join(["A2"] * L),
            "plan:" + ".".join((["A1", "A2", "A0", "A3"] * L)[:L])]
    for frac in (0.4, 0.7):
        pols.append(frac)
    seen_selective = 0
    for pol in pols:
        if isinstance(pol, float):
            p = rt.plan(model, inputs, kept_budget=int(pol * t.kept_bytes), table=t)
        else:
            p = rt.plan(model, inputs, kept_budget=1 << 30, table=t, policy=pol)
        seen_selective += any(n.keep in ("expensive", "cheap") for n in p.tree)
        rt.apply(model, p)
        got = step(model, inputs, 1)
        hooks = rt.kept_bytes(model, inputs)
        prof = rt.kept_bytes(model, inputs, method="profiler")
        rt.unapply(model)
        check(same_step(base, got), "%s %s: losses, gradients or buffers differ" % (name, p.policy))
        check(kept_ok(p.kept_bytes, hooks, p.checkpoint_calls) and kept_ok(p.kept_bytes, prof, p.checkpoint_calls),
              "%s %s: predicted %d, hooks %d, profiler %d" % (name, p.policy, p.kept_bytes, hooks, prof))
        rows.append((name, pol if isinstance(pol, float) else "", p.policy, p.kept_bytes, hooks, prof))
    check(seen_selective >= 3, "%s: only %d plans keep a selective set" % (name, seen_selective))
    refused_unmeasured(check, model, inputs, t, pols[0])


def main():
    check = Checks()
    torch.manual_seed(0)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    V, T, B = 64, 32, 4
    idx, tg = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    gpt = GPT2(4, 64, 4, V, T)
    if rt._measure.torch_version() < (2, 5):
        old_torch(check, gpt, (idx, tg))
        handmade_selective(check, gpt, (idx, tg))
        print("torch %s: selective checkpointing is refused (it needs torch >= 2.5)" % torch.__version__)
        return report("py_remat_torch_selective", check.good, check.bad)
    rows = []
    handmade_selective(check, gpt, (idx, tg))
    selective(check, "gpt2 L4 C64", gpt, (idx, tg), rows)
    selective(check, "llama L4 C64 KV2", Llama(4, 64, 4, 2, 16, 160, V, T), (idx, tg), rows)
    print("\n%-18s %6s %-26s %10s %10s %10s" % ("model", "budget", "plan", "predicted", "hooks", "profiler"))
    for r in rows:
        print("%-18s %6s %-26s %10d %10d %10d" % (r[0], "%d%%" % (100 * r[1]) if r[1] else "", r[2], r[3], r[4],
                                                  r[5]))
    return report("py_remat_torch_selective", check.good, check.bad)


if __name__ == "__main__":
    sys.exit(main())
