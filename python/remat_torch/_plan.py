"""_plan.py -- remat_torch.plan and remat_torch.apply: remat's planner on a
measured table, and its plan as torch.utils.checkpoint wrappers.

Everything a plan says comes from libremat (remat.h, "plans as checkpoint
trees"): the plan, its kept bytes with what the checkpoint calls hold, the
minimum (remat_table_optimal, remat_table_evaluate, remat_table_min_kept),
and the tree of checkpoints it is (remat_plan_tree, the compiler's own
moves).  Python reads no plan string and adds no bytes.

The tree, in chain order (Node):
  block i, keep "all"                 no checkpoint;
  block i, keep "none"                torch.utils.checkpoint of the block;
  block i, keep "expensive"/"cheap"   a selective checkpoint (torch >= 2.5):
                                      the ops measure() recorded as kept
                                      saved, the others recomputed;
  segment [a, m), children            blocks a .. m-1 as one checkpoint; the
                                      children are its re-run, in which the
                                      same moves nest (a block that keeps
                                      nothing there, or a segment, is a
                                      non-reentrant checkpoint inside it,
                                      on torch 1.13 too; its last block
                                      runs plainly).
The outermost checkpoints are non-reentrant (use_reentrant=False) where
torch has it; every tensor argument, keyword arguments too, is a checkpoint
input (so that a keyword tensor that needs a gradient, an encoder output as
ctx=, gets it once).

apply wraps each block it changes in a RematCheckpoint module, as torch's
checkpoint_wrapper does: the wrap shows in print(model), state_dict keys are
the unwrapped model's (the wrapper's prefix is stripped on save and added on
load), unapply puts the blocks back.  A wrapper runs its block plainly when
gradients are off or the model is in eval(): checkpointing is for training.
A segment runs its blocks inside the first one's wrapper, and the others
hand on its output: the model must call its blocks one after another, each
on the one before's output, with the same other arguments (checked as it
runs).  A block whose forward changes buffers (training-mode BatchNorm's
running statistics) would change them twice, in its forward and its re-run:
the re-run restores them (by value) to what they were before it.
"""
import functools
import gc
import re
import types
import weakref

import torch
import torch.nn as nn
import torch.utils.checkpoint as tuc

from . import _lib
from ._lib import RematError, byref
from ._wrapper import RematCheckpoint
from ._measure import as_args, default_loss, find_blocks, first_tensor, measure, storage_of, tensors_in, torch_version

_UNITS = {"B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12}


def parse_size(s):
    """bytes of a size: an int, or "8GiB", "512MB", "1.5 GiB", "4096" (units B KiB MiB GiB TiB KB MB GB TB)"""
    if isinstance(s, int) and not isinstance(s, bool):
        if s <= 0:
            raise RematError(1, "invalid argument", "a budget must be positive, got %d" % s)
        return s
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*", str(s))
    unit = m.group(2).upper() if m else None
    if not m or (unit and unit not in _UNITS):
        raise RematError(1, "invalid argument", "a budget is a size such as 8GiB or 512MB (units B KiB MiB GiB TiB "
                         "KB MB GB TB) or a number of bytes, got %r" % (s,))
    v = int(float(m.group(1)) * _UNITS[unit or "B"])
    if v <= 0:
        raise RematError(1, "invalid argument", "a budget must be positive, got %r" % (s,))
    return v


def fmt_bytes(b):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(b) >= k:
            return "%.2f %s" % (b / k, unit)
    return "%d B" % b


# ---- plans as trees (remat_plan_tree) ---------------------------------------------

class Node:
    """one node of a plan's checkpoint tree: kind "block" or "segment", the blocks [first, end),
    keep ("all", "none", "expensive", "cheap", "some"), offload (the mask of what goes to the
    host, 0 none), last (a re-run's last block), depth, children (a segment's re-run)"""

    __slots__ = ("kind", "first", "end", "keep", "keep_mask", "offload", "last", "depth", "children")

    def __init__(self, c):
        self.kind = _lib.NODE_KINDS[c.kind]
        self.first, self.end, self.depth, self.last = c.first, c.end, c.depth, bool(c.last)
        self.keep, self.keep_mask, self.offload = _lib.KEEPS[c.keep], c.keep_mask, c.offload_mask
        self.children = []

    def __eq__(self, o):
        return isinstance(o, Node) and all(getattr(self, k) == getattr(o, k) for k in self.__slots__)

    def __repr__(self):
        if self.kind == "segment":
            return "segment(%d-%d: %s)" % (self.first, self.end - 1, ", ".join(map(repr, self.children)))
        return "block(%d %s%s%s)" % (self.first, self.keep, ", last" if self.last else "",
                                     ", offload %x" % self.offload if self.offload else "")


def plan_tree(cfg, policy):
    """the checkpoint tree of policy under a loaded table's cfg: its top nodes (remat_plan_tree)"""
    lib = _lib.load()
    n = _lib.c_size_t()
    lib.remat_plan_tree(byref(cfg), policy.encode(), None, 0, byref(n))
    arr = (_lib.PlanNode * max(1, n.value))()
    lib.remat_plan_tree(byref(cfg), policy.encode(), arr, n.value, None)
    nodes = [Node(arr[i]) for i in range(n.value)]
    top = []
    for i in range(n.value):
        (nodes[arr[i].parent].children if arr[i].parent >= 0 else top).append(nodes[i])
    return top


def _walk(tree):
    for nd in tree:
        yield nd
        yield from _walk(nd.children)


# ---- the plan -----------------------------------------------------------------

class _Loaded:
    """a table loaded into libremat (remat_table_read): its config and profile, unloaded once"""

    def __init__(self, table):
        lib = _lib.load()
        text = table.json().encode()
        self.cfg, self.prof = _lib.Config(), _lib.c_void_p()
        lib.remat_table_read(text, len(text), byref(self.cfg), byref(self.prof))
        self.lib = lib

    def __del__(self):
        if getattr(self, "lib", None) is not None and _lib._lib is not None:
            self.lib.remat_profile_free(self.prof)
            self.lib.remat_table_unload(byref(self.cfg))
            self.lib = None


def _row(loaded, call, *args):
    """a remat_table_row from one of remat_table_evaluate/optimal/min_kept, as a dict"""
    r = _lib.TableRow()
    getattr(loaded.lib, call)(byref(loaded.cfg), loaded.prof, *args, byref(r))
    try:
        return {"policy": _lib.row_policy(r.row), "kept_bytes": r.kept_bytes, "peak_bytes": r.peak_bytes,
                # issue 25 item 5: the step's peak on the device
                "device_peak_bytes": loaded.lib.remat_table_row_device_peak(byref(r)),
                "checkpoint_bytes": r.checkpoint_bytes, "checkpoint_calls": r.checkpoint_calls,
                "step_ms": r.row.step_ms_pred, "overhead": r.row.overhead_pct / 100.0}
    finally:
        loaded.lib.remat_table_row_clear(byref(r))


class Plan:
    """remat's fastest plan for a budget of kept bytes.

    policy        the plan:TOKENS string remat's planner returned
    kept_bytes    predicted: what autograd and the checkpoints hold when the forward ends
    peak_bytes    the simulated activation peak (kept bytes + one block's backward, or more)
    device_peak_bytes  the step's peak on the device: peak_bytes + parameters, gradients and optimizer
                  state (remat_table_row_device_peak), what budget= bounds
    overhead      predicted recomputation, as a fraction of the step without it
    step_ms       the predicted step time (the table's times)
    checkpointed  the blocks re-run in the backward
    segments      (start, stop) of every segment of two or more blocks checkpointed as one
    tree          the plan's checkpoint tree (Node, remat_plan_tree)
    checkpoint_calls  checkpoint calls alive when the forward ends (nested ones too)
    budget        the budget it was planned for, in bytes
    table         the measured table (remat_torch.Table)
    """

    def __init__(self, table, budget, loaded, row):
        self.table, self.budget, self._loaded = table, budget, loaded
        self.policy = row["policy"]
        self.kept_bytes, self.peak_bytes = row["kept_bytes"], row["peak_bytes"]
        self.device_peak_bytes = row["device_peak_bytes"]          # remat-hf
        self.checkpoint_calls = row["checkpoint_calls"]
        self.overhead, self.step_ms = row["overhead"], row["step_ms"]
        self.tree = plan_tree(loaded.cfg, self.policy)
        self.checkpointed = _recomputed(loaded.cfg, self.policy)
        self.segments = [(n.first, n.end) for n in _walk(self.tree) if n.kind == "segment" and n.end - n.first > 1]

    def explain(self):
        """what the plan does with each layer, and its checkpoint tree: remat plan --explain's text
        (remat_plan_explain)"""
        lib, cfg = _lib.load(), self._loaded.cfg
        n = _lib.c_size_t()
        lib.remat_plan_explain(byref(cfg), self.policy.encode(), None, 0, byref(n))
        buf = _lib.ctypes.create_string_buffer(n.value + 1)
        lib.remat_plan_explain(byref(cfg), self.policy.encode(), buf, n.value + 1, None)
        return buf.value.decode()

    def evaluate(self, policy):
        """remat's prediction for another policy of the same table (any remat policy: plan:TOKENS,
        none, full, every:K ...): {"kept_bytes", "peak_bytes", "step_ms", "overhead", ...}"""
        return _row(self._loaded, "remat_table_evaluate", policy.encode())

    def __repr__(self):
        return "<remat plan %s: kept %s, overhead %.1f%%>" % (self.policy, fmt_bytes(self.kept_bytes),
                                                             100 * self.overhead)


def _recomputed(cfg, policy):
    """the blocks a policy re-runs in the backward (remat_schedule_layers)"""
    lib = _lib.load()
    s = _lib.c_void_p()
    lib.remat_schedule_create(byref(cfg), policy.encode(), byref(s))
    try:
        li = (_lib.LayerInfo * cfg.n_layer)()
        lib.remat_schedule_layers(s, li)
        return [i for i in range(cfg.n_layer) if li[i].recomputed]
    finally:
        lib.remat_schedule_free(s)


def plan_table(table, budget=None, policy=None, kept_budget=None):
    """remat's fastest plan for a measured table whose step peaks within budget on the device
    (Plan.device_peak_bytes; 8GiB when neither budget is given), or whose kept bytes fit
    kept_budget; with policy (any remat policy), that policy's plan instead, whatever it keeps"""
    # issue 25 item 5: budget= is device memory, kept_budget= kept bytes
    if budget is not None and kept_budget is not None:
        raise RematError(1, "invalid argument", "give budget= (the step's peak on the device) or kept_budget= "
                         "(what the forward keeps), not both")
    device = kept_budget is None
    K = parse_size(kept_budget if not device else "8GiB" if budget is None else budget)
    loaded = _Loaded(table)
    if policy is not None:
        return Plan(table, K, loaded, _row(loaded, "remat_table_evaluate", policy.encode()))
    if device:
        return Plan(table, K, loaded, _row(loaded, "remat_table_optimal_device", _lib.c_uint64(K)))
    return Plan(table, K, loaded, _row(loaded, "remat_table_optimal", _lib.c_uint64(K)))


def min_kept(table):
    """the least any plan of the table keeps, and that plan: (bytes, policy) (remat_table_min_kept)"""
    r = _row(_Loaded(table), "remat_table_min_kept")
    return r["kept_bytes"], r["policy"]


def plan(model, sample_inputs, budget=None, loss_fn=None, blocks=None, optimizer=None, table=None, policy=None,
         kept_budget=None, **measure_kw):
    """The fastest plan whose step peaks within budget on the device (a size string or bytes; 8GiB
    when neither is given) -- parameters, gradients, optimizer state (measure it with optimizer=),
    activations -- or whose kept bytes fit kept_budget, for the model's chain of blocks as measured
    (table: a remat_torch.Table measured before, else measure() runs; policy: that remat policy's
    plan instead of the fastest, e.g. "every:2").  sample_inputs a dict: the model's keyword inputs,
    a Hugging Face model's batch (remat_torch.hf.plan, its GradientCheckpointingLayer's)."""
    if table is None:
        table = measure(model, sample_inputs, loss_fn, blocks, optimizer, **measure_kw)
    elif table.blocks is None:
        table.blocks, table.chain = find_blocks(model, blocks)
    return plan_table(table, budget, policy, kept_budget=kept_budget)


# ---- applying a plan: the wrapper -------------------------------------------------

class _Slot:
    __slots__ = ("i",)

    def __init__(self, i):
        self.i = i


def _flatten(args, kwargs):
    """(the tensors of args and kwargs, nested in tuples, lists and dicts; rebuild(tensors) ->
    (args, kwargs) with those tensors in their places)"""
    leaves = []

    def walk(o):
        if isinstance(o, torch.Tensor):
            leaves.append(o)
            return _Slot(len(leaves) - 1)
        if type(o) in (tuple, list):
            return type(o)(walk(x) for x in o)
        if type(o) is dict:
            return {k: walk(v) for k, v in o.items()}
        return o
    spec = walk((tuple(args), dict(kwargs)))

    def rebuild(ts):
        def put(o):
            if isinstance(o, _Slot):
                return ts[o.i]
            if type(o) in (tuple, list):
                return type(o)(put(x) for x in o)
            if type(o) is dict:
                return {k: put(v) for k, v in o.items()}
            return o
        return put(spec)
    return leaves, rebuild


def _input_of(args, kwargs, key):
    """the block input: the first positional argument, or keyword key (the first tensor keyword
    when key is None)"""
    if args and isinstance(args[0], torch.Tensor):
        return args[0]
    if key is not None and key in kwargs:
        return kwargs[key]
    return next((v for v in kwargs.values() if isinstance(v, torch.Tensor)), None)


def _with_input(args, kwargs, key, x):
    """args, kwargs with the block input replaced by x"""
    if args and isinstance(args[0], torch.Tensor):
        return (x,) + tuple(args[1:]), kwargs
    key = key if key is not None and key in kwargs else next(k for k, v in kwargs.items() if isinstance(v, torch.Tensor))
    kw = dict(kwargs)
    kw[key] = x
    return args, kw


def _restoring(fn, mods, names):
    """fn, whose second and later calls (re-runs in the backward) put back, by value, the buffers
    of mods that a forward changes (names: per module, the buffer names measure saw change; None:
    all of them, in modules in training mode)"""
    bufs = []
    for m, keep in zip(mods, names):
        for n, b in m.named_buffers():
            if (n in keep) if keep is not None else m.training:
                bufs.append(b)
    calls = [0]

    def run(*ts):
        calls[0] += 1
        if calls[0] == 1 or not bufs:
            return fn(*ts)
        saved = [b.detach().clone() for b in bufs]
        try:
            return fn(*ts)
        finally:
            for b, v in zip(bufs, saved):
                b.data.copy_(v)        # .data: no version bump under the graph that saved it
    return run


# A checkpoint inside a segment's re-run is non-reentrant, as the outermost ones are, on every torch
# that has use_reentrant=False (1.11).  A reentrant one there was what made torch 1.13's gradients
# differ in their last bits: its backward re-runs the block on detached inputs and calls
# torch.autograd.backward on that sub-graph alone (torch 1.13.1, torch/utils/checkpoint.py:137 and
# 157-159), so the gradient of an input several blocks share (an encoder output given as ctx=, a
# position bias) comes back as that checkpoint's own partial sum (the detached input's .grad) and is
# added to the other blocks' contributions afterwards: the unwrapped model's sum in another order.
# Non-reentrant, the backward runs the first forward's graph and the re-run only refills its saved
# tensors (checkpoint.py:326-419), so every sum is the unwrapped model's, bit for bit; 1.13 nests
# it (each checkpoint's hooks are a stack: the inner one's tensors never reach the outer's).
_NESTED_REENTRANT = False


def _ckpt(fn, flat, reentrant, context_fn=None):
    """torch.utils.checkpoint of fn(*flat), the RNG state preserved (torch's default)"""
    if reentrant or torch_version() < (1, 11):
        if not any(t.requires_grad for t in flat):
            raise RematError(1, "invalid argument", "a checkpoint inside a segment's re-run has no input that needs "
                             "a gradient (the model's own input): torch's reentrant checkpoint cannot nest there; "
                             "plan with another budget or policy")
        return tuc.checkpoint(fn, *flat, use_reentrant=True)
    extra = {"context_fn": context_fn} if context_fn is not None else {}
    return tuc.checkpoint(fn, *flat, use_reentrant=False, preserve_rng_state=True, **extra)


def apply(model, plan):
    """Wraps the blocks plan checkpoints (RematCheckpoint; the model is changed in place and
    returned).  Losses and gradients are those of the model without it, bit for bit on the CPU;
    under dropout too, the RNG state being preserved as torch.utils.checkpoint does.  A plan of a
    Hugging Face model's layers (remat_torch.hf) applies through their GradientCheckpointingLayer."""
    unapply(model)
    chain = plan.table.chain
    blocks = find_blocks(model, chain if isinstance(chain, str) and chain != "blocks given"
                         else plan.table.blocks)[0]
    if len(blocks) != len(plan.table.data["blocks"]):
        raise RematError(1, "invalid argument", "the plan is for %d blocks, the model has %d"
                         % (len(plan.table.data["blocks"]), len(blocks)))
    key = getattr(plan.table, "input_key", None)
    changing = getattr(plan.table, "changing_buffers", None) or [None] * len(blocks)
    sac = getattr(plan.table, "sac", None)
    for nd in _walk(plan.tree):
        if nd.keep == "some" or (nd.keep in ("expensive", "cheap") and (nd.depth or sac is None)):
            raise RematError(1, "invalid argument", "block %d keeps a selective set%s: remat_torch applies "
                             "selective keep-sets only at the top of a plan, measured with measure(selective=True) "
                             "on torch >= 2.5" % (nd.first, " inside a segment's re-run" if nd.depth else ""))
    names = {id(m): n for n, m in model.named_modules()}
    parents = {}
    for n, m in model.named_modules():
        for k, c in m._modules.items():
            if c is not None:
                parents.setdefault(id(c), (m, k))

    def run_items(items, args, kwargs):
        """a segment's blocks as its re-run decides (inside its checkpoint)"""
        out = None
        for nd in items:
            i = nd.first
            if nd.kind == "block" and (nd.keep == "all" or nd.last):
                out = blocks[i](*args, **kwargs)
            elif nd.kind == "block":
                flat, rebuild = _flatten(args, kwargs)
                f = _restoring(_module_fn(blocks[i], rebuild), [blocks[i]], [changing[i]])
                out = _ckpt(f, flat, _NESTED_REENTRANT)
            else:
                flat, rebuild = _flatten(args, kwargs)
                f = _restoring(_items_fn(nd.children, run_items, rebuild), blocks[nd.first:nd.end],
                               changing[nd.first:nd.end])
                out = _ckpt(f, flat, _NESTED_REENTRANT)
            args, kwargs = _with_input(args, kwargs, key, first_tensor(out))
        return out

    wrap = {}
    for nd in plan.tree:
        i = nd.first
        if nd.kind == "block":
            if nd.keep == "all" and not nd.offload:
                continue
            if nd.keep == "all":
                wrap[i] = ("offloaded to the host", _offload_run(blocks[i]))
            else:
                ctx = sac.context(i, nd.keep) if nd.keep in ("expensive", "cheap") else None
                wrap[i] = ("checkpoint" + (" (selective: keep %s)" % nd.keep if ctx else ""),
                           _top_run(blocks[i], None, ctx, changing[i], None, key))
        else:
            a, m = nd.first, nd.end
            shared = {}
            what = "segment of blocks %d-%d" % (a, m - 1)
            # a segment of one block hands its output to no other (nothing may keep it after the step)
            wrap[a] = ("checkpoint, " + what if m > a + 1 else "checkpoint",
                       _top_run(blocks[a], (nd.children, run_items, blocks[a:m], changing[a:m]), None, None,
                                shared if m > a + 1 else None, key))
            for k in range(a + 1, m):
                wrap[k] = ("in the checkpoint of the %s" % what, _passthrough(shared, k, k == m - 1, key))
    for i, (what, run) in wrap.items():
        b = blocks[i]
        if id(b) not in parents:
            raise RematError(1, "invalid argument", "block %d (%s) is no attribute of a module of the model: "
                             "apply cannot wrap it" % (i, names.get(id(b), "?")))
        parent, k = parents[id(b)]
        parent._modules[k] = RematCheckpoint(b, what, run)
    return model


def _module_fn(mod, rebuild):
    def fn(*ts):
        a, k = rebuild(ts)
        return mod(*a, **k)
    return fn


def _items_fn(items, run_items, rebuild):
    def fn(*ts):
        a, k = rebuild(ts)
        return run_items(items, a, k)
    return fn


def _top_run(block, segment, context_fn, changing, shared, key):
    """an outermost checkpoint: of a block, or of a segment (its output handed to the rest of it)"""
    def run(args, kwargs):
        flat, rebuild = _flatten(args, kwargs)
        if segment is None:
            f = _restoring(_module_fn(block, rebuild), [block], [changing])
        else:
            items, run_items, mods, names = segment
            f = _restoring(_items_fn(items, run_items, rebuild), mods, names)
        out = _ckpt(f, flat, False, context_fn)
        if shared is not None:
            x = _input_of(args, kwargs, key)
            shared["out"], shared["args"] = out, [t for t in flat if t is not x]
        return out
    return run


def _offload_run(block):
    def run(args, kwargs):
        with torch.autograd.graph.save_on_cpu():
            return block(*args, **kwargs)
    return run


def _passthrough(shared, k, last, key):
    """block k inside a segment: the segment ran it; it hands on the segment's output (forgotten
    by the last of them: a step holds no tensor after it)"""
    def run(args, kwargs):
        out = shared.pop("out", None) if last else shared.get("out")
        seg_args = shared.pop("args", None) if last else shared.get("args")
        x = _input_of(args, kwargs, key)
        flat = _flatten(args, kwargs)[0]
        if out is None or x is not first_tensor(out):
            raise RematError(1, "invalid argument", "block %d of a checkpointed segment was called on something "
                             "else than the block before's output: the model must call its blocks one after "
                             "another, each on the one before's output" % k)
        others = [t for t in flat if t is not x]
        if len(others) != len(seg_args) or any(a is not b for a, b in zip(others, seg_args)):
            raise RematError(1, "invalid argument", "block %d of a checkpointed segment got other tensor arguments "
                             "than the segment's first block: a segment runs its blocks with the first one's" % k)
        return out
    return run


def unapply(model):
    """Undoes apply: every block back in its place, unwrapped."""
    for m in list(model.modules()):
        for k, c in list(m._modules.items()):
            if isinstance(c, RematCheckpoint):
                m._modules[k] = c._checkpoint_wrapped_module
    return model


# ---- measuring what a (wrapped) model keeps ---------------------------------------

def _checkpoint_held():
    """the tensors torch.utils.checkpoint's live objects hold: the closures of its functions (the
    non-reentrant checkpoint's inputs and RNG state), the attributes of its objects and of the
    reentrant checkpoint's autograd nodes (ctx: the RNG state; the inputs it saves are saved tensors)"""
    out = []
    import warnings

    def take(v, depth=0):
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            for x in v:
                take(x, depth)
        elif isinstance(v, dict):
            for x in v.values():
                take(x, depth)
        elif isinstance(v, (types.FunctionType, functools.partial)) and depth < 3:
            f = v.func if isinstance(v, functools.partial) else v
            if isinstance(v, functools.partial):
                take(v.args, depth + 1)
                take(v.keywords, depth + 1)
            for c in getattr(f, "__closure__", None) or ():
                try:
                    take(c.cell_contents, depth + 1)
                except ValueError:
                    pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # some torch objects warn when looked at
        for o in gc.get_objects():
            if isinstance(o, types.FunctionType):
                if o.__module__ == tuc.__name__ and o.__closure__:
                    take(o)
            elif type(o).__module__ == tuc.__name__ or type(o).__name__ == "CheckpointFunctionBackward":
                take(list(getattr(o, "__dict__", {}).values()))
    return out


def _kept_hooks(model, args, loss_fn, dev):
    ex = {storage_of(t)[0] for t in list(model.parameters()) + list(model.buffers()) + list(tensors_in(args))}
    refs = []

    def pack(t):
        d = t.detach()
        refs.append((storage_of(t), t.device, weakref.ref(d)))
        return d
    gc.collect()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda d: d):
        loss = loss_fn(model(*args))
    got = {}
    for (k, nb), d, r in refs:
        if k and k not in ex and d == dev and r() is not None:
            got[k] = nb
    for t in _checkpoint_held():
        k, nb = storage_of(t)
        if k and k not in ex and t.device == dev:
            got[k] = nb
    _release(loss)
    return sum(got.values())


def kept_bytes(model, sample_inputs, loss_fn=None, method="hooks"):
    """What the model keeps for the backward when the forward ends, measured, in bytes of its
    device's memory:
      method "hooks"     the storages saved_tensors_hooks sees that are alive then, and those that
                         torch.utils.checkpoint's objects hold (an applied plan's checkpoints: their
                         inputs and RNG state), each once;
      method "profiler"  the allocator's net bytes over the forward (torch.profiler with
                         profile_memory=True): what it allocated and still holds at its end.
    Parameters, buffers and the sample inputs are not counted (they exist before the step).  The
    forward runs once, without a backward; the RNG state and every buffer are left as they were."""
    from ._measure import _Snapshot
    args = as_args(sample_inputs)
    loss_fn = loss_fn or default_loss
    dev = next((p.device for p in model.parameters()), torch.device("cpu"))
    if method not in ("hooks", "profiler"):
        raise RematError(1, "invalid argument", "method is 'hooks' or 'profiler', got %r" % (method,))
    with _Snapshot(model, None, dev):
        if method == "hooks":
            return _kept_hooks(model, args, loss_fn, dev)
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        gc.collect()
        gc.disable()    # earlier steps' cyclic garbage freed inside the window would count against it
        try:
            with profile(activities=acts, profile_memory=True) as prof:
                loss = loss_fn(model(*args))
        finally:
            gc.enable()
        net = _net_bytes(prof, dev)
        _release(loss)
        return net


def _release(loss):
    """ends a measured forward: nothing of it is kept (gc: torch's checkpoints make cycles)"""
    del loss
    gc.collect()


def _net_bytes(prof, dev):
    """the sum of the profiler's allocation (+) and free (-) events on dev's kind of device"""
    want = "cuda" if dev.type == "cuda" else "cpu"
    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError:   # another torch's profiler: the events' own memory
        key = "self_cuda_memory_usage" if dev.type == "cuda" else "self_cpu_memory_usage"
        return sum(getattr(e, key, 0) for e in prof.events())
    return sum(e.nbytes() for e in events if e.name() == "[memory]" and want in str(e.device_type()).lower())
