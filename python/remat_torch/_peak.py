"""_peak.py -- a training step's peak as the allocator sees it, measured.

plan(..., budget=) bounds this peak (README, "Using remat from PyTorch"):
parameters, gradients, optimizer state, what the forward keeps and the
backward's working set, including one block's re-run.  Its prediction is
C's (remat_plan_optimal's total_bytes: the simulator's peak plus the table's
static bytes, with what the checkpoints hold besides); this file only
measures, so that the two can be set side by side.

The step measured is the steady one: the optimizer has stepped before (its
state exists), the gradients exist (zeroed in place, or accumulating), so
that what the table calls static is live for the whole step, as the
simulator assumes.  A loop that sets its gradients to None
(optimizer.zero_grad() in torch 2.x) peaks lower by at most the gradients'
bytes: those of the blocks the backward has not reached yet are not there.

  CPU   torch.profiler with profile_memory=True: the allocator's events
        ([memory], + for an allocation, - for a free) in order over the step;
        the peak is what was live before it plus the highest running sum.
        What was live before it is counted from the storages the step
        starts with (parameters, buffers, gradients, optimizer state, the
        sample inputs, each once).
  CUDA  torch.cuda.max_memory_allocated() after reset_peak_memory_stats(),
        which starts from what is allocated then.  Written, not run: the
        machine this was written on has no GPU.
"""
import gc

import torch

from ._lib import RematError
from ._measure import as_args, default_loss, storage_of, tensors_in


def _live_bytes(tensors, dev):
    seen = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device == dev:
            k, nb = storage_of(t)
            if k:
                seen[k] = nb
    return sum(seen.values())


def _events_peak(prof, dev):
    """the highest running sum of the profiler's allocator events on dev's kind of device, in time order"""
    want = "cuda" if dev.type == "cuda" else "cpu"
    events = prof.profiler.kineto_results.events()
    # torch 1.13's events have start_us() only (its kineto_results has no start_ns)
    when = (lambda e: e.start_ns()) if events and hasattr(events[0], "start_ns") else (lambda e: e.start_us())
    mem = [(when(e), e.nbytes()) for e in events
           if e.name() == "[memory]" and want in str(e.device_type()).lower()]
    mem.sort(key=lambda m: m[0])
    run = high = 0
    for _, nb in mem:
        run += nb
        high = max(high, run)
    return high


def step_peak(model, sample_inputs, optimizer, loss_fn=None):
    """The peak bytes of one training step -- loss_fn(model(*sample_inputs)), its backward, the
    optimizer's step -- as the allocator sees it (see the module's notes).  The model and the
    optimizer are changed as a step changes them: give copies, or restore them after.  Returns
    (peak bytes, bytes live before the step)."""
    args = as_args(sample_inputs)
    loss_fn = loss_fn or default_loss
    params = list(model.parameters())
    if not params:
        raise RematError(1, "invalid argument", "the model has no parameters")
    dev = params[0].device
    for p in params:                    # the steady state: the gradients exist (zeroed, as they are kept)
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)
    if optimizer is not None and not optimizer.state:
        raise RematError(1, "invalid argument", "step_peak measures a steady step: step the optimizer once first "
                         "(its state is what the table's optimizer_bytes counts)")
    opt_state = [] if optimizer is None else [t for st in optimizer.state.values() for t in st.values()]

    def step():
        loss = loss_fn(model(*args))
        loss.backward()
        del loss
        if optimizer is not None:
            optimizer.step()

    gc.collect()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        before = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        step()
        torch.cuda.synchronize(dev)
        return torch.cuda.max_memory_allocated(dev), before
    before = _live_bytes(list(params) + [p.grad for p in params] + list(model.buffers()) + opt_state +
                         list(tensors_in(args)), dev)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    return before + _events_peak(prof, dev), before
