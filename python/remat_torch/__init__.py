"""remat_torch -- remat's checkpointing planner for any torch.nn.Module.

    import remat_torch
    plan = remat_torch.plan(model, (batch,), budget="6GiB")   # measure, then plan
    remat_torch.apply(model, plan)                            # torch.utils.checkpoint where it says
    print(plan.kept_bytes, plan.overhead, plan.checkpointed)
    print(plan.explain())

measure() runs one training step of the model and records, for its chain of
blocks, what autograd keeps, the boundaries and the op times: a remat table
(remat.h, "tables read from files").  plan() hands it to remat's planner
(libremat.so, through ctypes) and returns the fastest plan whose kept bytes
fit the budget (its tree of checkpoints and its bytes, libremat's).
apply() wraps the blocks it checkpoints in RematCheckpoint modules; kept_bytes()
measures what a model (wrapped or not) keeps, two ways.  Everything the
library refuses is a RematError.  Not named remat: Meta's torch_remat is
imported under that name.
"""
from ._lib import RematError, version as library_version
from ._measure import Table, find_blocks, find_chains, measure
from ._plan import Node, Plan, min_kept, parse_size
from ._wrapper import RematCheckpoint
from ._front import apply, kept_bytes, plan, unapply
from ._peak import step_peak
from ._compile import CompiledPlan, compile_budget
from . import _hf as hf          # Hugging Face transformers models: remat_torch.hf.enable(model, batch, budget=)

__version__ = "0.1.0"
__all__ = ["RematError", "Table", "Plan", "Node", "RematCheckpoint", "measure", "plan", "apply", "unapply",
           "kept_bytes", "min_kept", "find_blocks", "find_chains", "parse_size", "library_version", "step_peak", "hf",
           "compile_budget", "CompiledPlan"]
