"""remat_torch.compile_budget under inductor: loss and gradients against torch's default partition.

tests/py_compile_budget.py checks remat's plans bit for bit under aot_eager,
where every partition runs the same aten kernels.  Under inductor each
partition is compiled into its own fused kernels, so bitwise equality is not
expected; this prints how far apart they are.  The model is the test's Llama
(4 layers, C 64, T 64, batch 4), compiled with backend="inductor" under
torch's default partitioner, and under compile_budget at the peak of
recomputing nothing, half way, and remat's least peak (docs/pytorch.md,
"torch.compile (issue 26)").

    .venv/bin/python bench/compile_inductor_grads.py
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
os.environ.setdefault("REMAT_LIB", os.path.join(ROOT, "build", "libremat.so"))

import torch  # noqa: E402

import remat_torch as rt  # noqa: E402
from torch_models import Llama  # noqa: E402


def main():
    if not rt._compile._torch_ok():
        print("SKIP: compile_budget needs torch >= 2.5 (has %s)" % torch.__version__)
        return 77
    torch.manual_seed(26)
    torch.set_num_threads(2)
    model = Llama(4, 64, 4, 2, 16, 160, 64, 64)
    inputs = (torch.randint(0, 64, (4, 64)), torch.randint(0, 64, (4, 64)))

    def run(budget):
        torch._dynamo.reset()
        f = torch.compile(model, backend="inductor")
        model.zero_grad(set_to_none=True)
        plan = None
        if budget is None:
            loss = f(*inputs)
        else:
            with rt.compile_budget(budget) as cb:
                loss = f(*inputs)
            plan = cb.plans[0]
        loss.backward()
        return plan, loss.detach().clone(), [p.grad.clone() for p in model.parameters()]

    _, loss0, grads0 = run(None)
    try:
        run(1)
        print("a budget of 1 byte was not refused")
        return 1
    except rt.RematError as e:
        least = int(e.message.split("least peak found is ")[1].split()[0])
    top = run(1 << 40)[0].peak_bytes
    for budget in (top, (least + top) // 2, least):
        plan, loss, grads = run(budget)
        same = torch.equal(loss, loss0) and all(torch.equal(a, b) for a, b in zip(grads, grads0))
        diff = max(float((a - b).abs().max()) for a, b in zip(grads, grads0))
        rel = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(grads, grads0))
        print("inductor, budget %d: predicted peak %d; loss %r (default partition %r); gradients bitwise %s, "
              "largest difference %.3g (%.3g of the tensor's largest)" % (
                  budget, plan.peak_bytes, loss.item(), loss0.item(), same, diff, rel), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
