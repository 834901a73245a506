"""_plan.py -- remat_torch.plan and remat_torch.apply: remat's planner on a
measured table, and its plan as torch.utils.checkpoint wrappers.

A plan is remat's plan:TOKENS string (the planner's, unchanged), read the way
remat's compiler reads it (src/schedule/compile.c, solve): at block a of
the first forward,
  A<keep>  block a keeps what <keep> says -- all of it (no checkpoint),
           nothing but its output (torch.utils.checkpoint of the block), or,
           in a selective table, one of expensive and cheap (a selective
           checkpoint, torch >= 2.5) -- and the rest of the chain follows;
  C<j>     blocks a .. a+j-1 run as one checkpointed segment (their re-run in
           the backward follows the tokens after the rest of the chain's).
Inside a segment's re-run the same two moves nest: a block that keeps
nothing there, or a segment inside it, is a reentrant torch.utils.checkpoint
(it saves nothing in the first forward, where the segment's own checkpoint
is the one that runs, and re-runs once more in its own backward, as remat's
schedule does).  The outermost checkpoints are non-reentrant
(use_reentrant=False) where torch has it.

A block is wrapped by replacing its forward on the instance (its class, its
parameters and its state_dict stay as they are); a segment runs its blocks
inside the first one's forward, and the others return its output: the model
must call its blocks one after another, each on the one before's output
(measure checks that it does, and the wrappers that it still does).
"""
import functools
import gc
import inspect
import re
import types
import weakref

import torch
import torch.utils.checkpoint as tuc

from . import _lib
from ._lib import RematError, byref
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


# ---- plans as trees -----------------------------------------------------------

def _keep_name(mask, selective):
    full = 3 if selective else 1          # the saved entries' bits; the output's is implied
    if mask & ~(full | (full + 1)):
        raise RematError(6, "bad policy", "plan: keep mask %x names no block tensor of this table" % mask)
    mask &= full
    return "all" if mask == full else "none" if mask == 0 else "expensive" if mask == 1 else "cheap"


def parse_plan(policy, L, selective=False):
    """plan:TOKENS as a tree, in chain order: ("block", i, keep) with keep "all" (no checkpoint),
    "none" (checkpointed), "expensive" or "cheap" (selective); ("segment", a, m, items), items its
    re-run; inside a re-run, ("leaf", i), the last block of one (re-run inside its own backward)."""
    if not policy.startswith("plan:"):
        raise RematError(6, "bad policy", "not a plan:TOKENS string: %r" % policy)
    toks = policy[5:].split(".")
    pos = [0]

    def tok():
        if pos[0] >= len(toks) or not re.fullmatch(r"A[0-9a-f]+|C[0-9]+", toks[pos[0]]):
            raise RematError(6, "bad policy", "plan: too few or malformed tokens in %r" % policy)
        t = toks[pos[0]]
        pos[0] += 1
        return t[0], int(t[1:], 16 if t[0] == "A" else 10)

    def solve(a, b, top):
        if a == L:
            return []
        kind, v = tok()
        if kind == "A":
            if not top and a + 1 == b:
                return [("leaf", a)]
            return [("block", a, _keep_name(v, selective))] + solve(a + 1, b, top)
        if v < 1 or a + v >= b:
            raise RematError(6, "bad policy", "plan: split C%d out of range at block %d in %r" % (v, a, policy))
        m = a + v
        rest = solve(m, b, top)
        return [("segment", a, m, solve(a, m, False))] + rest

    items = solve(0, L + 1, True)
    if pos[0] != len(toks):
        raise RematError(6, "bad policy", "plan: unused tokens in %r" % policy)
    return items


def policy_tree(policy, L, selective=False):
    """the tree of a plan:TOKENS string, or of none, full and every:K as remat compiles them"""
    if policy.startswith("plan:"):
        return parse_plan(policy, L, selective)
    if policy == "none":
        return [("block", i, "all") for i in range(L)]
    m = re.fullmatch(r"every:([1-9][0-9]*)", policy)
    k = 1 if policy == "full" else int(m.group(1)) if m else 0
    if not k:
        raise RematError(6, "bad policy", "remat_torch follows plan:TOKENS, none, full and every:K, not %r" % policy)
    return [("segment", a, min(a + k, L), [("block", i, "all") for i in range(a, min(a + k, L) - 1)] +
             [("leaf", min(a + k, L) - 1)]) for a in range(0, L, k)]


def checkpoint_calls(items):
    """the torch.utils.checkpoint calls of a plan tree alive when the first forward ends: the
    outermost ones and, inside segments, the nested ones (whose first forward runs too)"""
    n = 0
    for it in items:
        if it[0] == "segment":
            n += 1 + checkpoint_calls(it[3])
        elif it[0] == "block" and it[2] != "all":
            n += 1
    return n


def _has_reentrant_choice():
    return "use_reentrant" in inspect.signature(tuc.checkpoint).parameters


def _ckpt(fn, x, args, kwargs, reentrant, context_fn=None):
    """torch.utils.checkpoint of fn(x, *args, **kwargs), the RNG state preserved (torch's default)"""
    if reentrant or not _has_reentrant_choice():
        if not x.requires_grad:
            raise RematError(1, "invalid argument", "a checkpoint inside a segment re-runs from an input that needs "
                             "no gradient (the model's own input): this plan nests checkpoints there, which torch's "
                             "reentrant checkpoint cannot do; plan with another budget")
        part = functools.partial(_call, fn, kwargs)
        return tuc.checkpoint(part, x, *args, use_reentrant=True) if _has_reentrant_choice() \
            else tuc.checkpoint(part, x, *args)
    extra = {"context_fn": context_fn} if context_fn is not None else {}
    return tuc.checkpoint(fn, x, *args, use_reentrant=False, preserve_rng_state=True, **extra, **kwargs)


def _call(fn, kwargs, x, *args):
    return fn(x, *args, **kwargs)


def _predict(tree, row, info):
    """kept bytes of a plan: the table's (stored + outside) and what torch.utils.checkpoint holds
    besides: the context once, its stash per call"""
    calls = checkpoint_calls(tree)
    extra = (info.context_bytes if calls else 0) + info.call_bytes * calls
    return row.stored_bytes + info.outside_bytes + extra, extra


# ---- the plan -----------------------------------------------------------------

class Plan:
    """remat's fastest plan for a budget of kept bytes.

    policy        the plan:TOKENS string remat's planner returned
    kept_bytes    predicted: what autograd and the checkpoints hold when the forward ends
    peak_bytes    the simulated activation peak (kept bytes + one block's backward, or more)
    overhead      predicted recomputation, as a fraction of the step without it
    step_ms       the predicted step time (the table's times)
    checkpointed  the blocks re-run in the backward
    segments      (start, stop) of every segment of two or more blocks checkpointed as one
    tree          the plan as parse_plan reads it
    budget        the budget it was planned for, in bytes
    table         the measured table (remat_torch.Table)
    """

    def __init__(self, table, budget, row, info, cfg, prof):
        self._cfg = None                 # owns cfg's table and prof only once made
        self.table = table
        self.budget = budget
        self.policy = _lib.row_policy(row)
        self.tree = policy_tree(self.policy, len(table.data["blocks"]), bool(table.data.get("selective")))
        self.checkpointed = _recomputed(cfg, self.policy)
        self.segments = [(it[1], it[2]) for it in self.tree if it[0] == "segment" and it[2] - it[1] > 1]
        self.kept_bytes, extra = _predict(self.tree, row, info)
        self.peak_bytes = row.peak_bytes + extra
        # remat-hf (m4-pyhf, issue 25 item 5): the step's peak on the device, C's total_bytes (the
        # simulated peak + the table's static bytes: parameters, gradients, optimizer state)
        self.device_peak_bytes = row.total_bytes + extra
        self.overhead = row.overhead_pct / 100.0
        self.step_ms = row.step_ms_pred
        self._cfg, self._prof = cfg, prof

    def explain(self):
        """what the plan does with each layer: remat plan --explain's text (remat_plan_explain)"""
        lib = _lib.load()
        n = _lib.c_size_t()
        lib.remat_plan_explain(byref(self._cfg), self.policy.encode(), None, 0, byref(n))
        buf = _lib.ctypes.create_string_buffer(n.value + 1)
        lib.remat_plan_explain(byref(self._cfg), self.policy.encode(), buf, n.value + 1, None)
        return buf.value.decode()

    def evaluate(self, policy):
        """remat's prediction for another policy of the same table (plan:TOKENS, none, full,
        every:K): {"kept_bytes", "peak_bytes", "step_ms", "overhead"}"""
        return _evaluate(self._cfg, self._prof, policy, bool(self.table.data.get("selective")))

    def __repr__(self):
        return "<remat plan %s: kept %s, overhead %.1f%%>" % (self.policy, fmt_bytes(self.kept_bytes),
                                                             100 * self.overhead)

    def __del__(self):
        lib = _lib._lib
        if lib is not None and getattr(self, "_cfg", None) is not None:
            lib.remat_profile_free(self._prof)
            lib.remat_table_unload(byref(self._cfg))
            self._cfg = None


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


def _evaluate(cfg, prof, policy, selective):
    lib = _lib.load()
    info = _lib.TableInfo()
    lib.remat_table_get_info(byref(cfg), byref(info))
    tree = policy_tree(policy, cfg.n_layer, selective)
    row = _lib.PlanRow()
    lib.remat_plan_evaluate(byref(cfg), prof, policy.encode(), 0, 1, byref(row))
    try:
        kept, extra = _predict(tree, row, info)
        return {"kept_bytes": kept, "peak_bytes": row.peak_bytes + extra, "step_ms": row.step_ms_pred,
                "device_peak_bytes": row.total_bytes + extra,                  # remat-hf
                "overhead": row.overhead_pct / 100.0}
    finally:
        lib.remat_plan_row_clear(byref(row))


def _min_plan(cfg):
    """the plan of the smallest activation peak"""
    lib = _lib.load()
    minp = _lib.c_uint64()
    lib.remat_plan_min_peak(byref(cfg), byref(minp))
    row = _lib.PlanRow()
    lib.remat_plan_optimal(byref(cfg), None, minp.value, 1, byref(row))
    try:
        return _lib.row_policy(row)
    finally:
        lib.remat_plan_row_clear(byref(row))


def plan_table(table, budget=None, policy=None, kept_budget=None):
    """remat's fastest plan for a measured table whose step peaks within budget on the device
    (Plan.device_peak_bytes: parameters, gradients, optimizer state, activations), or whose kept
    bytes fit kept_budget; with policy (plan:TOKENS, none, full, every:K), that policy's plan
    instead, whatever it keeps"""
    lib = _lib.load()
    # remat-hf (m4-pyhf, issue 25 item 5): budget= is device memory, kept_budget= kept bytes
    if budget is not None and kept_budget is not None:
        raise RematError(1, "invalid argument", "give budget= (the step's peak on the device) or kept_budget= "
                         "(what the forward keeps), not both")
    device = kept_budget is None
    K = parse_size(kept_budget if not device else "8GiB" if budget is None else budget)
    selective = bool(table.data.get("selective"))
    text = table.json().encode()
    cfg, prof = _lib.Config(), _lib.c_void_p()
    lib.remat_table_read(text, len(text), byref(cfg), byref(prof))
    ok = False
    try:
        info = _lib.TableInfo()
        lib.remat_table_get_info(byref(cfg), byref(info))
        if policy is not None:
            policy_tree(policy, cfg.n_layer, selective)          # one remat_torch can apply
            row = _lib.PlanRow()
            lib.remat_plan_evaluate(byref(cfg), prof, policy.encode(), 0, 1, byref(row))
            try:
                p = Plan(table, K, row, info, cfg, prof)
            finally:
                lib.remat_plan_row_clear(byref(row))
            ok = True
            return p
        none = _evaluate(cfg, prof, "none", selective)["kept_bytes"]
        minp = _lib.c_uint64()
        lib.remat_plan_min_peak(byref(cfg), byref(minp))
        least = minp.value - info.reserve_bytes        # the least the table's plans keep
        if device:
            least = minp.value + info.static_bytes      # remat-hf: the least step peak
        # Kept bytes K is an activation budget of K + the reserve (remat.h).  What the checkpoints
        # hold besides (the context, a stash per call) the table does not see: a plan that keeps
        # more than K with it is planned again with that much less room.
        room = K
        for _ in range(8):
            if room < least:
                break
            row = _lib.PlanRow()
            try:
                lib.remat_plan_optimal(byref(cfg), prof, room if device else room + info.reserve_bytes,
                                       0 if device else 1, byref(row))
            except RematError as e:
                if e.status != 10:
                    raise
                break
            try:
                p = Plan(table, K, row, info, cfg, prof)
            finally:
                lib.remat_plan_row_clear(byref(row))
            got = p.device_peak_bytes if device else p.kept_bytes
            if got <= K:
                ok = True
                return p
            room -= got - K
            p._cfg = None          # does not fit once the checkpoints' own bytes are counted
        if device:
            fewest = _evaluate(cfg, prof, _min_plan(cfg), selective)["device_peak_bytes"]
            raise RematError(10, "nothing fits", "budget %s is below the minimum %s of the step's peak (parameters, "
                             "gradients and optimizer state %s, and the least any plan's activations peak at)"
                             % (fmt_bytes(K), fmt_bytes(fewest), fmt_bytes(info.static_bytes)))
        fewest = _evaluate(cfg, prof, _min_plan(cfg), selective)["kept_bytes"]
        raise RematError(10, "nothing fits", "budget %s is below the minimum %s of kept bytes (the least any plan "
                         "keeps; the model without checkpoints keeps %s)"
                         % (fmt_bytes(K), fmt_bytes(min(fewest, none)), fmt_bytes(none)))
    finally:
        if not ok:
            lib.remat_profile_free(prof)
            lib.remat_table_unload(byref(cfg))


def plan(model, sample_inputs, budget=None, loss_fn=None, blocks=None, optimizer=None, table=None, policy=None,
         kept_budget=None, **measure_kw):
    """The fastest plan whose step peaks within budget on the device (a size string or bytes; 8GiB
    when neither is given) -- parameters, gradients, optimizer state (measure it with optimizer=),
    activations -- or whose kept bytes fit kept_budget, for the model's chain of blocks as measured
    (table: a remat_torch.Table measured before, else measure() runs; policy: that remat policy's
    plan instead of the fastest, e.g. "every:2")."""
    if table is None:
        table = measure(model, sample_inputs, loss_fn, blocks, optimizer, **measure_kw)
    elif table.blocks is None:
        table.blocks, table.chain = find_blocks(model, blocks)
    return plan_table(table, budget, policy, kept_budget=kept_budget)


# ---- applying a plan -------------------------------------------------------------

# matrix products and convolutions: what a selective checkpoint keeps when it keeps "expensive"
_EXPENSIVE_OPS = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention",
                  "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")


def _sac_context(keep_expensive):
    """a selective checkpoint's context_fn (torch >= 2.5): save the outputs of the expensive ops or
    of the others, recompute the rest"""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    ops = {getattr(torch.ops.aten, n).default for n in _EXPENSIVE_OPS if hasattr(torch.ops.aten, n)}

    def policy(ctx, op, *args, **kwargs):
        hit = op in ops
        return CheckpointPolicy.MUST_SAVE if hit == keep_expensive else CheckpointPolicy.PREFER_RECOMPUTE
    return functools.partial(create_selective_checkpoint_contexts, policy)


def apply(model, plan):
    """Wraps the blocks plan checkpoints (torch.utils.checkpoint; the model is changed in place and
    returned).  Losses and gradients are those of the model without it, bit for bit on the CPU;
    under dropout too, the RNG state being preserved as torch.utils.checkpoint does."""
    unapply(model)
    chain = plan.table.chain
    blocks = find_blocks(model, chain if isinstance(chain, str) and chain != "blocks given"
                         else plan.table.blocks)[0]
    if len(blocks) != len(plan.table.data["blocks"]):
        raise RematError(1, "invalid argument", "the plan is for %d blocks, the model has %d"
                         % (len(plan.table.data["blocks"]), len(blocks)))
    orig = [b.forward for b in blocks]

    def run_items(items, x, args, kwargs):
        """a segment's blocks, as its re-run decides (inside its checkpoint)"""
        out = None
        for it in items:
            if it[0] == "leaf" or (it[0] == "block" and it[2] == "all"):
                out = orig[it[1]](x, *args, **kwargs)
            elif it[0] == "block" and it[2] == "none":
                out = _ckpt(orig[it[1]], x, args, kwargs, True)
            elif it[0] == "block":
                raise RematError(1, "invalid argument", "a selective keep-set inside a segment's re-run: torch "
                                 "cannot nest a selective checkpoint in a reentrant one")
            else:
                out = _ckpt(functools.partial(_segment_fn, it[3], run_items), x, args, kwargs, True)
            x = first_tensor(out)
        return out

    for it in plan.tree:
        if it[0] == "block":
            i, keep = it[1], it[2]
            if keep == "all":
                continue
            ctx = None
            if keep != "none":
                if torch_version() < (2, 5):
                    raise RematError(1, "invalid argument", "the plan checkpoints block %d selectively, which needs "
                                     "torch >= 2.5" % i)
                ctx = _sac_context(keep == "expensive")
            blocks[i].forward = _top(orig[i], ctx)
        else:
            a, m, sub = it[1], it[2], it[3]
            shared = {}
            blocks[a].forward = _top(functools.partial(_segment_fn, sub, run_items), None, shared if m > a + 1 else None)
            for k in range(a + 1, m):
                blocks[k].forward = _passthrough(shared, k, k == m - 1)
    return model


def _segment_fn(items, run_items, x, *args, **kwargs):
    return run_items(items, x, args, kwargs)


def _top(fn, context_fn, shared=None):
    """an outermost checkpoint: of a block, or of a segment (its output handed to the rest of it)"""
    def forward(*args, **kwargs):
        out = _ckpt(fn, args[0], args[1:], kwargs, False, context_fn)
        if shared is not None:
            shared["out"] = out
        return out
    forward._remat_torch = True
    return forward


def _passthrough(shared, k, last):
    """block k inside a segment: the segment ran it; it hands on the segment's output (forgotten
    by the last of them: a step holds no tensor after it)"""
    def forward(*args, **kwargs):
        out = shared.pop("out", None) if last else shared.get("out")
        if out is None or (args and first_tensor(out) is not args[0]):
            raise RematError(1, "invalid argument", "block %d of a checkpointed segment was called on something "
                             "else than the block before's output: the model must call its blocks one after "
                             "another, each on the one before's output" % k)
        return out
    forward._remat_torch = True
    return forward


def unapply(model):
    """Undoes apply: every block's own forward back."""
    for m in model.modules():
        f = m.__dict__.get("forward")
        if f is not None and getattr(f, "_remat_torch", False):
            del m.forward
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
    del loss
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
    forward runs once, without a backward; the RNG state is left as it was."""
    args = as_args(sample_inputs)
    loss_fn = loss_fn or default_loss
    dev = next((p.device for p in model.parameters()), torch.device("cpu"))
    devices = [dev.index or 0] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        if method == "hooks":
            return _kept_hooks(model, args, loss_fn, dev)
        if method != "profiler":
            raise RematError(1, "invalid argument", "method is 'hooks' or 'profiler', got %r" % (method,))
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        gc.collect()
        with profile(activities=acts, profile_memory=True) as prof:
            loss = loss_fn(model(*args))
        net = _net_bytes(prof, dev)
        del loss
        return net


def _net_bytes(prof, dev):
    """the sum of the profiler's allocation (+) and free (-) events on dev's kind of device"""
    want = "cuda" if dev.type == "cuda" else "cpu"
    try:
        events = prof.profiler.kineto_results.events()
    except AttributeError:   # another torch's profiler: the events' own memory
        key = "self_cuda_memory_usage" if dev.type == "cuda" else "self_cpu_memory_usage"
        return sum(getattr(e, key, 0) for e in prof.events())
    return sum(e.nbytes() for e in events if e.name() == "[memory]" and want in str(e.device_type()).lower())
