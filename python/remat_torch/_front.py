"""The public entry points, remat_torch.plan, apply, unapply and kept_bytes:
a Hugging Face model's batch (a dict of its keyword inputs) or plan goes to
_hf (its GradientCheckpointingLayer seam), anything else to _plan
(RematCheckpoint wrappers).  Above both, so that neither imports the other
back: _hf builds on _plan, and this file only dispatches.
"""
from . import _hf, _plan


def plan(model, sample_inputs, budget=None, loss_fn=None, blocks=None, optimizer=None, table=None, policy=None,
         kept_budget=None, **measure_kw):
    if isinstance(sample_inputs, dict):
        return _hf.plan(model, sample_inputs, budget=budget, kept_budget=kept_budget, optimizer=optimizer,
                        table=table, policy=policy, chain=blocks, loss_fn=loss_fn, **measure_kw)
    return _plan.plan(model, sample_inputs, budget=budget, loss_fn=loss_fn, blocks=blocks, optimizer=optimizer,
                      table=table, policy=policy, kept_budget=kept_budget, **measure_kw)


def apply(model, plan):
    if getattr(plan.table, "hf", False):
        return _hf.apply(model, plan)
    _hf.unapply(model)
    return _plan.apply(model, plan)


def unapply(model):
    _hf.unapply(model)
    return _plan.unapply(model)


def kept_bytes(model, sample_inputs, loss_fn=None, method="hooks"):
    if isinstance(sample_inputs, dict):
        model, sample_inputs = _hf.as_call(model, sample_inputs)
    return _plan.kept_bytes(model, sample_inputs, loss_fn=loss_fn, method=method)


for _f in (plan, apply, unapply, kept_bytes):
    _f.__doc__ = getattr(_plan, _f.__name__).__doc__
