"""RematCheckpoint: the module remat_torch.apply puts in a block's place.

Its own file, below both _measure (which refuses to measure a model that
runs a plan) and _plan (which builds the wrappers), so that neither imports
the other's upper half.  It needs torch only.
"""
import torch
import torch.nn as nn

_PREFIX = "_checkpoint_wrapped_module."      # torch's checkpoint_wrapper's attribute, and prefix


class RematCheckpoint(nn.Module):
    """A block of a chain that a remat plan checkpoints (apply; unapply removes it).  Its block is
    ._checkpoint_wrapped_module, as torch's checkpoint_wrapper names it; state_dict keys are the
    block's own.  .remat says what it does."""

    def __init__(self, module, remat, run):
        super().__init__()
        self._checkpoint_wrapped_module = module
        self.remat = remat
        self._run = run
        self._register_state_dict_hook(_strip_prefix)
        self._register_load_state_dict_pre_hook(_add_prefix)

    def extra_repr(self):
        return "remat: " + self.remat

    def forward(self, *args, **kwargs):
        if not (self.training and torch.is_grad_enabled()):
            return self._checkpoint_wrapped_module(*args, **kwargs)
        return self._run(args, kwargs)

    def named_parameters(self, *args, **kwargs):
        for n, p in super().named_parameters(*args, **kwargs):
            yield n.replace(_PREFIX, ""), p


def _strip_prefix(module, state_dict, prefix, local_metadata):
    for k in [k for k in state_dict if k.startswith(prefix + _PREFIX)]:
        state_dict[prefix + k[len(prefix + _PREFIX):]] = state_dict.pop(k)
    return state_dict


def _add_prefix(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    for k in [k for k in state_dict if k.startswith(prefix) and not k.startswith(prefix + _PREFIX)]:
        state_dict[prefix + _PREFIX + k[len(prefix):]] = state_dict.pop(k)
