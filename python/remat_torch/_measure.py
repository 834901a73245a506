"""_measure.py -- remat_torch.measure: one training step of a torch model, watched.

What is measured (nothing here is estimated):
  - kept bytes: the storages autograd holds for the backward when the forward
    ends, on the model's device, each counted once (by its data pointer),
    parameters, buffers and the sample inputs left out (they exist before the
    step, and under every plan).  A saved tensor is seen by torch.autograd.graph.saved_tensors_hooks
    (the pack hook hands autograd a detached alias, so that what autograd
    frees dies: returning the tensor itself makes a cycle through the graph)
    and is kept when it is still alive after the forward;
  - who keeps it: the block whose forward was running when it was saved
    first (each block's forward is wrapped for the step), the ops before the
    chain, or those after it (the head);
  - the boundaries: each block's input and output storage, which must chain
    (block i + 1 runs on block i's output);
  - times, on the model's device (synchronised on CUDA): each block's
    forward, between its wrapper's entry and exit, and backward, between
    the gradients of its output and of its input (tensor hooks); the head's
    and the chain input's ops; the optimizer's step;
  - parameters, gradients and, with an optimizer, its state after a step;
  - the working sets (_work): one more step under the profiler's allocator
    events, marked at each block's exit and each gradient, gives what each
    block's backward, the head, the input's backward and the optimizer step
    allocate above what is live then (table version 3);
  - the other arguments only a checkpoint would hold (contexts): the blocks
    that take each, and the block that returned it first.
Several chains (blocks=["encoder", "decoder"]) are watched in one step as
one list of blocks: each chain's ops before it are the earlier chain's head
(the junction), and the result a later chain reads is the argument of its
blocks that autograd's graph makes from the earlier chain's last output.
The model is left as it was: gradients, parameters, optimizer state, the RNG.
"""
import json
import os
import re
import time
import weakref

import torch
import torch.nn as nn

from ._lib import RematError
from ._wrapper import RematCheckpoint

# the table format's version measure() writes (remat.h, "tables read from files"): 3, for the
# working sets (work_bytes) and the contexts the checkpoints hold
FORMAT_VERSION = 3
# Seeded faults, for tests only (tests/py_remat_torch_faults.py shows each makes the comparison of
# predicted and measured kept bytes fail): "rng_stash" (the checkpoint's RNG stash counted as 0
# bytes), "neighbour" (a block's saved tensors attributed to the block before it), "boundary" (the
# chain's input not counted as kept).  Empty in use.
FAULTS = set()
# attribute names a model's chain of blocks goes by (Hugging Face's, timm's, nanoGPT's)
CHAIN_NAMES = ("layers", "h", "blocks", "layer", "block")


def torch_version():
    """(major, minor) of the torch in use"""
    parts = torch.__version__.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def storage_of(t):
    """(data pointer, bytes) of t's storage"""
    if hasattr(t, "untyped_storage"):
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()
    s = t.storage()
    return s.data_ptr(), s.size() * s.element_size()


def tensors_in(obj):
    """the tensors of a nest of tuples, lists and dicts, in order"""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            yield from tensors_in(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from tensors_in(x)


def first_tensor(obj):
    return next(iter(tensors_in(obj)), None)


def as_args(sample_inputs):
    return tuple(sample_inputs) if isinstance(sample_inputs, (tuple, list)) else (sample_inputs,)


def default_loss(out):
    """the output if it is a scalar, else its sum (a model output's .loss when it has one)"""
    loss = getattr(out, "loss", None)
    t = loss if isinstance(loss, torch.Tensor) else out if isinstance(out, torch.Tensor) else first_tensor(out)
    if t is None:
        raise RematError(-1, "invalid", "the model's output holds no tensor: give a loss_fn")
    return t if t.dim() == 0 else t.sum()


def _signature(block):
    """what must be equal for two blocks to be one table's: their modules' names and classes, their
    parameters' and buffers' shapes"""
    return tuple((n, type(m).__name__, tuple(tuple(p.shape) for p in m.parameters(recurse=False)),
                  tuple(tuple(b.shape) for b in m.buffers(recurse=False))) for n, m in block.named_modules())


def _chain_of(container):
    """(blocks, suffix, why not): the chain a ModuleList or Sequential holds -- all of it, or all
    but a first block that differs (a ResNet stage's, which downsamples) -- or why it holds none"""
    kids = list(container)
    if len(kids) < 2:
        return None, "", "%d module" % len(kids)
    classes = sorted({type(b).__name__ for b in kids})
    if len(classes) != 1:
        return None, "", "modules of %d classes (%s)" % (len(classes), ", ".join(classes[:4]))
    sig = [_signature(b) for b in kids]
    if len(set(sig)) == 1:
        return kids, "", None
    if len(set(sig[1:])) == 1 and len(kids) > 2:
        return kids[1:], "[1:]", None
    return None, "", "%s blocks of different shapes" % classes[0]


def _resolve(model, path):
    """the modules an attribute path names ("transformer.h", "layer3[1:]")"""
    m = re.fullmatch(r"(.*?)(\[([0-9]+):\])?", path)
    m_, base, skip = model, m.group(1), int(m.group(3) or 0)
    for part in base.split(".") if base else []:
        if not hasattr(m_, part):
            raise RematError(-1, "invalid", "the model has no %s (blocks=%r)" % (part, path))
        m_ = getattr(m_, part)
    return list(m_)[skip:]


def find_blocks(model, blocks=None):
    """The chain: (its blocks, its name).  blocks: None (the model's longest chain of blocks of one
    class and shape in a ModuleList or Sequential, preferring the names in CHAIN_NAMES; a ResNet
    stage without its first, downsampling block), an attribute path ("transformer.h"), or the
    modules themselves."""
    if isinstance(blocks, str):
        found, name = _resolve(model, blocks), blocks
    elif blocks is not None:
        found = list(blocks)
        names = {id(mod): n for n, mod in model.named_modules()}
        name = "blocks given" if not found else names.get(id(found[0]), "blocks given").rsplit(".", 1)[0]
    else:
        best, rejected = None, []
        for n, m in model.named_modules():
            if not isinstance(m, (nn.ModuleList, nn.Sequential)):
                continue
            kids, suffix, why = _chain_of(m)
            if why:
                rejected.append("%s (%s): %s" % (n or "the model", type(m).__name__, why))
                continue
            key = (len(kids), n.rsplit(".", 1)[-1] in CHAIN_NAMES, -n.count("."))
            if best is None or key > best[0]:
                best = (key, n + suffix, kids)
        if best is None:
            raise RematError(-1, "invalid", "no chain of blocks found (a ModuleList or Sequential of two or more "
                             "modules of one class and shape): %s; name one with blocks="
                             % ("; ".join(rejected[:6]) + (" ..." if len(rejected) > 6 else "")
                                if rejected else "the model has no ModuleList or Sequential"))
        found, name = best[2], best[1]
    if not found or not all(isinstance(b, nn.Module) for b in found):
        raise RematError(-1, "invalid", "blocks must be torch.nn.Modules, at least one")
    if len({type(b) for b in found}) != 1:
        raise RematError(-1, "invalid", "the blocks are not of one class (%s): remat plans a chain of identical "
                         "blocks" % ", ".join(sorted({type(b).__name__ for b in found})))
    if len({id(b) for b in found}) != len(found):
        raise RematError(-1, "invalid", "a block appears twice in the chain")
    return found, name


def _several(blocks):
    """whether blocks= names several chains: a list of attribute paths or of lists of modules"""
    return isinstance(blocks, (list, tuple)) and len(blocks) > 0 and \
        all(isinstance(b, (str, list, tuple)) for b in blocks)


def find_chains(model, blocks=None):
    """The chains of blocks measure() plans, in the order given: [(name, blocks)].  blocks: one
    chain as find_blocks takes it, or several -- a list of attribute paths or of lists of modules
    (["encoder.block", "decoder.block"]), whose forwards run in that order, each chain but the
    last read by a later one's blocks (remat.h, "tables read from files": version 2's chains)."""
    if not _several(blocks):
        found, name = find_blocks(model, blocks)
        return [(name, found)]
    if len(blocks) > 16:
        raise RematError(-1, "invalid", "%d chains: a table holds at most 16" % len(blocks))
    out = []
    for b in blocks:
        found, name = find_blocks(model, b)
        while any(name == n for n, _ in out):       # the table's chains have unique names
            name += "'"
        out.append((name, found))
    seen = set()
    for name, found in out:
        for b in found:
            if id(b) in seen:
                raise RematError(-1, "invalid", "a block is in two of the chains given (%s)" % name)
            seen.add(id(b))
    return out


class _Snapshot:
    """Everything a measurement touches, put back as it was when it ends: the RNG streams (CPU, and
    the model's CUDA device), every buffer and, with an optimizer, every parameter by value, the
    optimizer's state, and the gradients: each parameter's .grad is set to None for the
    measurement (so that its steps write fresh gradients, never into the caller's) and gets its
    own tensor back, untouched, at the end.  .changed: per buffer name, whether a forward changed
    it (compared with the values at entry, by changed_buffers)."""

    def __init__(self, model, optimizer, dev):
        self.model, self.optimizer, self.dev = model, optimizer, dev

    def __enter__(self):
        import copy
        m = self.model
        self.params = list(m.parameters())
        self.grads = [p.grad for p in self.params]
        for p in self.params:
            p.grad = None
        self.buffers = [(n, b, b.detach().clone()) for n, b in m.named_buffers()]
        self.values = [p.detach().clone() for p in self.params] if self.optimizer is not None else None
        self.opt = copy.deepcopy(self.optimizer.state_dict()) if self.optimizer is not None else None
        devs = [self.dev.index or 0] if self.dev.type == "cuda" else []
        self.rng = torch.random.fork_rng(devices=devs)
        self.rng.__enter__()
        return self

    def changed_buffers(self):
        return {n for n, b, v in self.buffers if not torch.equal(b.detach(), v)}

    def __exit__(self, *exc):
        self.rng.__exit__(*exc)
        with torch.no_grad():
            for _, b, v in self.buffers:
                b.data.copy_(v)
            if self.values is not None:
                for p, v in zip(self.params, self.values):
                    p.data.copy_(v)
        for p, g in zip(self.params, self.grads):
            p.grad = g
        if self.opt is not None:
            self.optimizer.load_state_dict(self.opt)
        return False


class Table:
    """A measured remat table: .data is its JSON (remat.h, "tables read from
    files"; README, "The table format"), .blocks the modules of
    the chain by their number in a plan (several chains: one chain, with None
    at each junction between two), .chain their name in the model (several:
    a list), .chains [(name, blocks)], .kept_bytes what the unwrapped model
    kept (measured)."""

    def __init__(self, data, blocks=None, chain=None, kept_bytes=None):
        self.data = data
        self.blocks = blocks
        self.chain = chain
        self.chains = None if blocks is None else [(chain, blocks)]
        self.junctions = []             # the plan's numbers of the junctions between chains
        self.kept_bytes = kept_bytes
        self.input_key = None           # measure() fills these three; a loaded table has none
        self.changing_buffers = None
        self.sac = None

    def json(self):
        return json.dumps(self.data, indent=1)

    def save(self, path):
        """writes the JSON to path atomically (a temporary file beside it, then a rename)"""
        tmp = "%s.tmp.%d" % (path, os.getpid())
        try:
            with open(tmp, "w") as f:
                f.write(self.json())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @classmethod
    def load(cls, path):
        with open(path) as f:
            return cls(json.load(f))

    def __repr__(self):
        d = self.data
        if "chains" in d:
            return "<remat table %s: %s>" % (d.get("name", "?"), ", ".join(
                "%s %d blocks" % (c.get("name", "?"), len(c.get("blocks", ()))) for c in d["chains"]))
        return "<remat table %s: %d blocks>" % (d.get("name", "?"), len(d.get("blocks", ())))


class _Wrapped:
    """Every block's forward wrapped for one step: calls, inputs, outputs,
    times; restored by close()."""

    def __init__(self, chain, sync, on_enter=None, on_exit=None, starts=(0,)):
        self.chain, self.sync = chain, sync
        self.starts = set(starts)       # the first block of each chain (several chains: one flat list)
        self.order = []                 # the blocks in the order their forwards ran
        self.on_enter, self.on_exit = on_enter, on_exit
        self.calls = [0] * len(chain)
        self.inp = [None] * len(chain)
        self.out = [None] * len(chain)
        self.outs = [[] for _ in chain]      # every tensor a block returned (what it hands later blocks)
        self.args = [[] for _ in chain]
        self.key = [None] * len(chain)
        self.t_in = [0.0] * len(chain)
        self.t_out = [0.0] * len(chain)
        self.saved = []
        for i, blk in enumerate(chain):
            self.saved.append(blk.__dict__.get("forward"))
            blk.forward = self._wrap(i, blk.forward)

    def _wrap(self, i, fwd):
        def forward(*args, **kwargs):
            self.calls[i] += 1
            if self.calls[i] > 1:
                raise RematError(-1, "invalid", "block %d ran twice in one forward: remat plans a chain in which "
                                 "each block runs once" % i)
            self.order.append(i)
            prev = self.out[i - 1] if i not in self.starts else None
            self.key[i] = None
            if args and isinstance(args[0], torch.Tensor):
                self.inp[i] = args[0]
            else:       # a keyword input: the one the block before's output is, else the first tensor
                k = next((k for k, v in kwargs.items() if v is prev and prev is not None),
                         next((k for k, v in kwargs.items() if isinstance(v, torch.Tensor)), None))
                self.key[i] = k
                self.inp[i] = kwargs[k] if k is not None else first_tensor(args)
            self.args[i] = [t for t in tensors_in((args, kwargs)) if t is not self.inp[i]]
            if self.on_enter:
                self.on_enter(i)
            self.t_in[i] = self.now()
            out = fwd(*args, **kwargs)
            self.t_out[i] = self.now()
            self.out[i] = first_tensor(out)
            self.outs[i] = list(tensors_in(out))
            if self.on_exit:
                self.on_exit(i)
            return out
        return forward

    def now(self):
        if self.sync:
            torch.cuda.synchronize()
        return time.perf_counter()

    def close(self):
        for blk, f in zip(self.chain, self.saved):
            if f is None:
                del blk.forward
            else:
                blk.forward = f


# ---- selective checkpointing: which op made each saved tensor (torch >= 2.5) ----------------

# the ops whose outputs a selective checkpoint keeps as "expensive": matrix products, convolutions,
# attention (aten names); every other op's saved outputs are "cheap"
EXPENSIVE_OPS = frozenset(("mm", "addmm", "bmm", "baddbmm", "matmul", "convolution", "_convolution",
                           "mkldnn_convolution", "cudnn_convolution", "_scaled_dot_product_flash_attention",
                           "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                           "_scaled_dot_product_cudnn_attention", "_flash_attention_forward",
                           "_efficient_attention_forward"))


def _op_name(func):
    """aten.addmm.default -> addmm"""
    return func._schema.name.split("::")[-1]


class _OpRecorder:
    """A TorchDispatchMode over one forward: inside block i, every op call, numbered per op as
    torch's selective checkpoint numbers them (SAC_IGNORED_OPS left out), and the storages its
    outputs allocate (outputs that alias an input are not new storages).  producer(storage) is the
    call that made it, (block, op, n); entries() turns the kept storages into each block's table
    entries and the keep-sets (Selective) apply installs."""

    def __init__(self, chain):
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils.checkpoint import SAC_IGNORED_OPS
        rec = self
        self.block = None
        self.made = {}                 # storage -> (block, op, n)
        self.outs = {}                 # (block, op, n) -> [storage, ...] it allocated
        self.count = [dict() for _ in chain]

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                i = rec.block
                if i is not None and func not in SAC_IGNORED_OPS:
                    n = rec.count[i].get(func, 0)
                    rec.count[i][func] = n + 1
                    if not any(r.alias_info is not None for r in func._schema.returns):
                        call = (i, func, n)
                        ins = {storage_of(t)[0] for t in tensors_in((args, kwargs))}
                        for t in tensors_in(out):
                            k = storage_of(t)[0]
                            if k and k not in ins:      # _unsafe_view and the like alias all the same
                                rec.made[k] = call
                                rec.outs.setdefault(call, []).append(k)
                return out
        self.mode = Mode()

    def __enter__(self):
        self.mode.__enter__()

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)

    def producer(self, storage):
        return self.made.get(storage)

    def entries(self, kept, bounds, L):
        """(per block its "saved" entries, one per op call: its kept storages' bytes, cheap unless an
        EXPENSIVE_OPS op; the Selective keep-sets).  A call is in its keep-set only when every
        storage it made is kept (a selective checkpoint caches all its outputs); the bytes of a call
        that made some storage nothing keeps are recomputed under either keep-set: such a table is
        refused."""
        calls = [dict() for _ in range(L)]
        for k, (nb, owner, call) in kept.items():
            if k in bounds or owner in ("before", "after"):
                continue
            if call is None or call[0] != owner:
                raise RematError(-1, "invalid", "block %d keeps a tensor no op of its own made (selective): "
                                 "measure it with selective=False" % owner)
            calls[owner][call] = calls[owner].get(call, 0) + nb
        out, keep = [], []
        for i in range(L):
            ent, sets = [], {"expensive": set(), "cheap": set()}
            for call, nb in calls[i].items():
                made = self.outs.get(call, [])
                if any(k not in kept and k not in bounds for k in made):
                    raise RematError(-1, "invalid", "block %d: op %s saves only part of what it returns, which "
                                     "a selective checkpoint cannot keep exactly: measure it with selective=False"
                                     % (i, _op_name(call[1])))
                cheap = _op_name(call[1]) not in EXPENSIVE_OPS
                ent.append({"bytes": nb, "cheap": cheap})
                sets["cheap" if cheap else "expensive"].add((call[1], call[2]))
            out.append(sorted(ent, key=lambda e: (e["cheap"], -e["bytes"])))
            keep.append(sets)
        return out, Selective(keep)


class Selective:
    """The keep-sets of a selective table, per block: {"expensive": {(op, n)}, "cheap": ...};
    context(i, keep) is the context_fn of block i's selective checkpoint that saves those calls'
    outputs and recomputes the others (create_selective_checkpoint_contexts)."""

    def __init__(self, keep):
        self.keep = keep

    def context(self, i, which):
        from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
        from torch.utils.checkpoint import SAC_IGNORED_OPS
        want = self.keep[i][which]

        def make():
            seen = {True: {}, False: {}}

            def policy(ctx, func, *args, **kwargs):
                if func in SAC_IGNORED_OPS:
                    return CheckpointPolicy.PREFER_RECOMPUTE
                c = seen[bool(getattr(ctx, "is_recompute", False))]
                n = c.get(func, 0)
                c[func] = n + 1
                return CheckpointPolicy.MUST_SAVE if (func, n) in want else CheckpointPolicy.PREFER_RECOMPUTE
            return create_selective_checkpoint_contexts(policy)
        return make



def _excluded(model, args):
    """storage pointers that are not the step's: parameters, buffers, sample inputs"""
    ex = set()
    for t in list(model.parameters()) + list(model.buffers()) + list(tensors_in(args)):
        ex.add(storage_of(t)[0])
    ex.discard(0)
    return ex


def _chain_index(starts, L):
    """per block of the flat list, the chain it is of"""
    c, out = -1, []
    for i in range(L):
        if i in starts:
            c += 1
        out.append(c)
    return out


def _region(c):
    """the ops before chain c: the chain input's for chain 0 ("before"), else those after chain c-1
    (its head; the junction of the two chains, table version 2)"""
    return "before" if c == 0 else ("head", c - 1)


def _results(w, chain_of, starts, dev):
    """Which earlier chain's result each later chain's blocks read: {c: {storage: bytes}} of the
    tensors a block of a later chain gets as an argument (not its input) whose autograd graph reaches
    chain c's last output -- the latest such chain: T5's decoder layers get the encoder's output,
    made from its last layer's by the final norm -- and reads[d], the chains chain d reads."""
    nc = len(starts)
    last = [starts[c + 1] - 1 if c + 1 < nc else len(chain_of) - 1 for c in range(nc)]
    target = {}
    for c in range(nc - 1):
        y = w.out[last[c]]
        if y is not None and y.grad_fn is not None:
            target[id(y.grad_fn)] = (c, y.grad_fn)
    results, reads = {c: {} for c in range(nc)}, [set() for _ in range(nc)]
    done = {}
    for i, d in enumerate(chain_of):
        if d == 0:
            continue
        for t in w.args[i]:
            if t.device != dev or not t.requires_grad or id(t) in done:
                continue
            hit, seen, keep, stack = -1, set(), [], [t.grad_fn]
            while stack:                      # the graph behind t, not past a chain's last output
                n = stack.pop()
                if n is None or id(n) in seen:
                    continue
                seen.add(id(n))
                keep.append(n)                # held while walking, so that no id is reused
                if id(n) in target:
                    hit = max(hit, target[id(n)][0])
                    continue
                stack.extend(f for f, _ in n.next_functions)
            done[id(t)] = hit
            if 0 <= hit < d:
                k, nb = storage_of(t)
                results[hit][k] = nb
                reads[d].add(hit)
    return results, reads


def _memory(model, args, loss_fn, chain, excluded, sync, dev, ops=None, starts=(0,)):
    """One forward under the pack hook: {storage: [bytes, owner, producer]} of
    what is kept at its end (owner "before", a block index, ("head", c) for
    the ops after chain c but the last, or "after"; producer the op call that
    made it, with ops, an _OpRecorder, else None), the blocks' inputs, outputs
    and other arguments, the keyword each block's input came as (None: the
    first positional argument), and, with several chains (starts: the first
    block of each), the results each chain's blocks read (_results)."""
    rec = {}
    phase = ["before"]
    L = len(chain)
    chain_of = _chain_index(set(starts), L)
    ends = {(starts[c + 1] - 1 if c + 1 < len(starts) else L - 1): c for c in range(len(starts))}
    # Hugging Face: a block's other arguments made before it (Hugging Face's rotary cos/sin,
    # its masks) are the ops before its chain's, kept under every plan (by the blocks that save
    # them, or by the checkpoints that take them), not the first block that saves them
    given = {}

    def pack(t):
        d = t.detach()
        key, nb = storage_of(t)
        if key and key not in excluded and t.device == dev:
            e = rec.get(key)
            if e is None or not any(r() is not None for r in e[2]):
                rec.pop(key, None)           # a freed storage's address, reused: a new storage
                e = rec[key] = [nb, given.get(key, phase[0]), [],
                                ops.producer(key) if ops is not None else None, set()]
            e[2].append(weakref.ref(d))
            e[4].add(phase[0])
        return d

    def enter(i):
        for t in w.args[i]:                       # remat-hf
            if t.device == dev:
                given.setdefault(storage_of(t)[0], _region(chain_of[i]))
        if "neighbour" not in FAULTS:
            phase[0] = i
        if ops is not None:
            ops.block = i

    def exit_(i):
        c = ends.get(i)
        phase[0] = i if c is None else "after" if i == L - 1 else ("head", c)
        if ops is not None:
            ops.block = None

    w = _Wrapped(chain, sync, enter, exit_, starts)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda d: d):
            if ops is not None:
                with ops:
                    loss = loss_fn(model(*args))
            else:
                loss = loss_fn(model(*args))
        kept = {k: [e[0], e[1], e[3]] for k, e in rec.items() if any(r() is not None for r in e[2])}
        savers = {k: e[4] for k, e in rec.items() if k in kept}
        inp = [storage_of(t) if t is not None else (0, 0) for t in w.inp]
        out = [storage_of(t) if t is not None else (0, 0) for t in w.out]
        extra = [[storage_of(t) for t in a if t.device == dev] for a in w.args]
        made = {}                           # storage -> the first block that returned it
        for i in range(L):
            for t in w.outs[i]:
                made.setdefault(storage_of(t)[0], i)
        calls, keys, order = list(w.calls), list(w.key), list(w.order)
        results, reads = _results(w, chain_of, list(starts), dev) if len(starts) > 1 else ({0: {}}, [set()])
        del loss
    finally:
        w.close()
    for i, n in enumerate(calls):
        if n != 1:
            raise RematError(-1, "invalid", "block %d did not run in the forward: the chain must be the blocks the "
                             "model runs, in order" % i)
    if order != sorted(order):
        c = chain_of[next(b for a, b in zip(order, order[1:]) if b < a)]
        raise RematError(-1, "invalid", "the chains' blocks did not run in the order given (chain %d ran before a "
                         "block of an earlier one): give the chains in the order the forward runs them" % c)
    return kept, inp, out, extra, keys, savers, results, reads, made


def _mark(name):
    """a marker in the profiler's timeline (_work)"""
    with torch.profiler.record_function("remat:" + name):
        pass


def _work(model, args, loss_fn, chain, sync, dev, optimizer, starts=(0,)):
    """The working sets of one step of the model as it is: the allocator's events (the profiler's,
    profile_memory=True) between markers set at each block's exit, at each gradient of a block's
    output and of a chain's input, at the loss, at the backward's end and after the optimizer's step.
    What the table keeps is live for a while; these are what the ops allocate beyond it, the
    most the live bytes rise (remat.h, "tables read from files", version 3):
      block i       over its backward, above the level when its output's gradient arrives;
      head          (the last chain's) over its forward and backward, above the level when the
                    forward ends;
      head of c     (a chain before the last: the ops between two chains) over their backward, above
                    the level when the next chain's input gets its gradient;
      input         (the first chain's) over its backward; and, for each chain, the step's live
                    bytes when its input gets its gradient (grad_live_bytes: beyond that gradient and
                    what the ops before the chain keep, what the backward holds to its end, a tied
                    embedding's gradient waiting for the embedding's own);
      optimizer     over its step, above the level when the backward ends.
    Measured in a steady step: the gradients exist (zeroed) as they do from the second step on, so
    that a backward accumulates into them instead of keeping new ones.  Returns (per block, per
    chain (input, head), optimizer), 0 where a moment has no marker (an input that needs no
    gradient)."""
    L, nc = len(chain), len(starts)
    lasts = [starts[c + 1] - 1 if c + 1 < nc else L - 1 for c in range(nc)]
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.grad = torch.zeros_like(p)

    def exit_(i):
        _mark("e%d" % i)
        y = w.out[i]
        if y is not None and y.requires_grad:
            y.register_hook(lambda g, i=i: _mark("b%d" % i))
        if i in starts and w.inp[i] is not None and w.inp[i].requires_grad:
            c = starts.index(i)
            w.inp[i].register_hook(lambda g, c=c: _mark("i%d" % c))
        # the wrapper holds no tensor of the step past here: each lives as long as the model holds it
        w.inp[i], w.args[i], w.outs[i] = None, [], []
        if i and i not in starts:
            w.out[i - 1] = None
        if i in lasts:
            w.out[i] = None

    from torch.profiler import ProfilerActivity, profile
    w = _Wrapped(chain, sync, None, exit_, starts)
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            loss = loss_fn(model(*args))
            _mark("loss")
            loss.backward()
            _mark("bend")
            del loss
            if optimizer is not None:
                optimizer.step()
            _mark("opt")
    finally:
        w.close()
    want = "cuda" if dev.type == "cuda" else "cpu"
    ev = []
    for k, e in enumerate(prof.profiler.kineto_results.events()):
        t = e.start_ns() if hasattr(e, "start_ns") else e.start_us() * 1000   # torch 1.13: microseconds
        if e.name() == "[memory]" and want in str(e.device_type()).lower():
            ev.append((t, k, e.nbytes()))
        elif e.name().startswith("remat:"):
            ev.append((t, k, e.name()[6:]))
    ev.sort(key=lambda x: (x[0], x[1]))
    # the timeline as (marker, level there, the most the level reaches before the next marker)
    marks, run = [], 0
    for _, _, v in ev:
        if isinstance(v, str):
            marks.append([v, run, run])
        else:
            run += v
            if marks:
                marks[-1][2] = max(marks[-1][2], run)
    at = {m[0]: k for k, m in enumerate(marks)}

    def rise(name, ends, base=None):
        """the most the level rises from marker name until the next marker of ends (above base)"""
        k = at.get(name)
        if k is None:
            return 0
        lo, hi = marks[k][1] if base is None else base, marks[k][2]
        for m in marks[k + 1:]:
            if m[0] in ends or m[0][0] in ends:
                break
            hi = max(hi, m[2])
        return max(0, hi - lo)
    backs = ("b", "i", "bend", "opt")
    blocks = [rise("b%d" % i, backs) for i in range(L)]
    kept = marks[at["loss"]][1] if "loss" in at else 0
    heads = [rise("i%d" % (c + 1), backs) for c in range(nc - 1)]
    heads.append(rise("e%d" % (L - 1), ("b%d" % (L - 1), "bend", "opt"), base=kept))
    inputs = [rise("i0", backs)] + [0] * (nc - 1)
    live = [marks[at["i%d" % c]][1] if "i%d" % c in at else 0 for c in range(nc)]
    opt = rise("bend", ("opt",))
    return blocks, list(zip(inputs, heads, live)), opt


def _times(model, args, loss_fn, chain, sync, optimizer, starts=(0,)):
    """One step, timed: per block (forward ms, backward ms), per chain its input's and its head's
    (forward, backward) -- the ops between two chains are the earlier one's head -- and the
    optimizer step's ms (or 0)."""
    L = len(chain)
    nc = len(starts)
    lasts = [starts[c + 1] - 1 if c + 1 < nc else L - 1 for c in range(nc)]
    grad_t, grad_in = {}, {}

    def exit_(i):
        y = w.out[i]
        if y is not None and y.requires_grad:
            y.register_hook(lambda g, i=i: grad_t.__setitem__(i, w.now()))
        if i in starts and w.inp[i] is not None and w.inp[i].requires_grad:
            c = starts.index(i)
            w.inp[i].register_hook(lambda g, c=c: grad_in.__setitem__(c, w.now()))

    w = _Wrapped(chain, sync, None, exit_, starts)
    try:
        t0 = w.now()
        loss = loss_fn(model(*args))
        t1 = w.now()
        loss.backward()
        t2 = w.now()
        t_in, t_out = list(w.t_in), list(w.t_out)
        f_blocks = [w.t_out[i] - w.t_in[i] for i in range(L)]
    finally:
        w.close()
    if any(i not in grad_t for i in range(L)):
        raise RematError(-1, "invalid", "a block's output got no gradient in the backward: the loss must depend on "
                         "every block")
    # a chain's first block ends its backward when its input gets its gradient (the step's end when
    # that input needs none: token embeddings of a sample input do)
    start = [grad_in.get(c, t2) for c in range(nc)]
    b_blocks = [(grad_t[i - 1] if i not in starts else start[starts.index(i)]) - grad_t[i] for i in range(L)]
    opt_ms = 0.0
    if optimizer is not None:
        ts = w.now()
        optimizer.step()
        opt_ms = (w.now() - ts) * 1e3
    ms = lambda s: max(s, 0.0) * 1e3
    ins = [(ms(t_in[0] - t0), ms(t2 - start[0]))] + [(0.0, 0.0)] * (nc - 1)
    heads = [(ms(t_in[starts[c + 1]] - t_out[lasts[c]]), ms(grad_t[lasts[c]] - start[c + 1])) for c in range(nc - 1)]
    heads.append((ms(t1 - t_out[-1]), ms(grad_t[L - 1] - t1)))
    return [ms(f) for f in f_blocks], [ms(b) for b in b_blocks], ins, heads, opt_ms


def _state_bytes(tensors):
    seen = {}
    for t in tensors:
        if isinstance(t, torch.Tensor):
            k, nb = storage_of(t)
            if k:
                seen[k] = nb
    return sum(seen.values())


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def measure(model, sample_inputs, loss_fn=None, blocks=None, optimizer=None, path=None, reps=3, selective=False):
    """Measures one training step, loss = loss_fn(model(*sample_inputs)) then
    loss.backward(), and returns the remat table (version 3) of the model's
    chain of blocks, or of its chains (blocks=, a list of them: find_chains),
    written to path too when given; see the module's notes."""
    args = as_args(sample_inputs)
    loss_fn = loss_fn or default_loss
    if selective and torch_version() < (2, 5):
        raise RematError(-1, "invalid", "selective checkpointing needs torch >= 2.5 (a dispatch mode records the op "
                         "of each saved tensor, create_selective_checkpoint_contexts applies it); this is torch %s"
                         % torch.__version__)
    if any(isinstance(m, RematCheckpoint) for m in model.modules()):
        raise RematError(-1, "invalid", "the model runs a plan (remat_torch.apply): measure it without, after "
                         "remat_torch.unapply(model)")
    chains = find_chains(model, blocks)
    if selective and len(chains) > 1:
        raise RematError(-1, "invalid", "selective checkpointing of several chains is not measured: measure with "
                         "selective=False, or one chain (blocks=)")
    chain = [b for _, bl in chains for b in bl]
    starts = [sum(len(bl) for _, bl in chains[:c]) for c in range(len(chains))]
    nc = len(chains)
    params = [p for p in model.parameters()]
    dev = (params[0].device if params else (first_tensor(args).device if first_tensor(args) is not None
                                              else torch.device("cpu")))
    sync = dev.type == "cuda"
    excluded = _excluded(model, args)
    with _Snapshot(model, optimizer, dev) as snap:
        rng = torch.get_rng_state(), (torch.cuda.get_rng_state(dev) if sync else None)
        ops = _OpRecorder(chain) if selective else None
        kept, inp, out, extra, keys, savers, results, reads, made = _memory(model, args, loss_fn, chain, excluded,
                                                                            sync, dev, ops, starts)
        changed = snap.changed_buffers()
        runs = []
        for r in range(max(1, reps)):
            torch.set_rng_state(rng[0])
            if sync:
                torch.cuda.set_rng_state(rng[1], dev)
            for p in params:
                p.grad = None
            runs.append(_times(model, args, loss_fn, chain, sync, optimizer if r == reps - 1 else None, starts))
        grads_bytes = _state_bytes(p.grad for p in params if p.grad is not None)
        torch.set_rng_state(rng[0])
        if sync:
            torch.cuda.set_rng_state(rng[1], dev)
        works = _work(model, args, loss_fn, chain, sync, dev, optimizer, starts)
        opt_bytes = 0
        if optimizer is not None:
            opt_bytes = _state_bytes(t for st in optimizer.state.values() for t in st.values())
    L = len(chain)
    lasts = [starts[c + 1] - 1 if c + 1 < nc else L - 1 for c in range(nc)]
    firsts = set(starts)
    # the boundaries: block i + 1 runs on block i's output, and each is kept
    for i in range(L - 1):
        if i + 1 not in firsts and out[i][0] != inp[i + 1][0]:
            raise RematError(-1, "invalid", "block %d does not run on block %d's output: remat plans a chain in "
                             "which each block takes the one before's output" % (i + 1, i))
    for i in range(1, L):
        if i not in firsts and inp[i][0] not in kept:
            raise RematError(-1, "invalid", "block %d does not keep its input for the backward (nothing in it "
                             "saves it): remat's chains keep every block's input; name blocks that begin with an "
                             "op that saves its input (a norm, a linear layer)" % i)
    # several chains: each but the last is read by a later one's blocks (T5's decoder layers read the
    # encoder's output); the results are live from their chain's head to the end of its backward
    for c in range(nc - 1):
        if not any(c in r for r in reads):
            raise RematError(-1, "invalid", "chain %s is read by no later chain's blocks (no argument of theirs "
                             "is made from its output): remat plans several chains when each but the last is read "
                             "by a later one, as T5's decoder reads its encoder; measure one chain (blocks=)"
                             % chains[c][0])
    in_kept = []
    for c, i in enumerate(starts):
        x_kept = inp[i][0] not in excluded and "boundary" not in FAULTS
        if x_kept and inp[i][0] not in kept:
            raise RematError(-1, "invalid", "block %d does not keep its input for the backward: remat's chains keep "
                             "every block's input" % i)
        in_kept.append(x_kept)
    result_keys = {k for c in results for k in results[c]}
    bounds = {inp[i][0] for i in starts} | {o[0] for o in out} | result_keys
    saved = [[] for _ in range(L)]
    before, heads = 0, [0] * nc
    for k, (nb, owner, _) in kept.items():
        if k in bounds:
            continue
        if owner == "before":
            before += nb
        elif owner == "after":
            heads[nc - 1] += nb
        elif isinstance(owner, tuple):
            heads[owner[1]] += nb
        else:
            saved[owner].append(nb)
    sac = None
    if ops is not None:        # per block, its saved tensors by the op call that made them
        entries, sac = ops.entries(kept, bounds, L)
        saved = None
    else:
        entries = [[{"bytes": nb, "cheap": False} for nb in sorted(saved[i], reverse=True)] for i in range(L)]
    # what the checkpoints of the blocks hold besides their inputs: the other arguments nothing else
    # keeps (masks, position tables, a position bias the first block makes), each with the blocks that
    # take it and the block that made it (one that returned it), numbered as plans number blocks
    pnum = [i + c for i, c in enumerate(_chain_index(firsts, L))]
    ctx = {}
    for i in range(L):
        for k, nb in extra[i]:
            if k and k not in excluded and k not in kept and k not in bounds:
                x = ctx.setdefault(k, {"bytes": nb, "made_by": pnum[made[k]] if k in made else -1, "blocks": []})
                if pnum[i] not in x["blocks"]:
                    x["blocks"].append(pnum[i])
    for x in ctx.values():
        if x["made_by"] >= min(x["blocks"]):     # given back to a block before the one that made it: before all
            x["made_by"] = -1
    total = sum(e[0] for e in kept.values())
    fwd = [_median([r[0][i] for r in runs]) for i in range(L)]
    bwd = [_median([r[1][i] for r in runs]) for i in range(L)]
    med = lambda part, c, k: _median([r[part][c][k] for r in runs])

    w_blocks, w_chains, w_opt = works

    def chain_data(c):
        a, z = starts[c], lasts[c]
        # the head "keeps" the last block's output when anything saves it: an op after the chain, or the
        # block's own last op (a ReLU its result), which a checkpoint of the block alone drops -- table
        # version 1 cannot tell the two apart (table.last_output_saved_by_head says which it was); a
        # result read by later chains is counted as that (head.output_bytes), not twice
        d = {"input": {"bytes": inp[a][1], "kept": in_kept[c], "saved_bytes": before if c == 0 else 0,
                       "forward_ms": med(2, c, 0), "backward_ms": med(2, c, 1), "work_bytes": w_chains[c][0],
                       "grad_live_bytes": w_chains[c][2]},
             "blocks": [{"saved": entries[i], "output_bytes": out[i][1], "forward_ms": fwd[i], "backward_ms": bwd[i],
                         "work_bytes": w_blocks[i]} for i in range(a, z + 1)],
             "head": {"saved_bytes": heads[c], "keeps_input": out[z][0] in kept and out[z][0] not in results[c],
                      "forward_ms": med(3, c, 0), "backward_ms": med(3, c, 1), "work_bytes": w_chains[c][1]}}
        if nc > 1:
            if results[c]:
                d["head"]["output_bytes"] = sum(results[c].values())
            d = dict({"name": chains[c][0], "reads": [chains[e][0] for e in sorted(reads[c])]}, **d)
        return d
    data = {
        "format": "remat-table",
        "version": FORMAT_VERSION,
        "name": "%s.%s" % (type(model).__name__, "+".join(n for n, _ in chains)),
        "source": "remat_torch, torch %s" % torch.__version__,
        "device": torch.cuda.get_device_name(dev) if sync else "cpu (torch, %d threads)" % torch.get_num_threads(),
        "selective": bool(selective)}
    if nc == 1:
        data.update(chain_data(0))
    else:
        data["chains"] = [chain_data(c) for c in range(nc)]
    data.update({
        "params_bytes": _state_bytes(params),
        "grads_bytes": grads_bytes,
        "optimizer_bytes": opt_bytes,
        "optimizer_ms": runs[-1][4],
        # what torch.utils.checkpoint holds besides the blocks' inputs: the other arguments nothing else
        # keeps, and per call the RNG state it preserves (a CPU tensor: device memory on the CPU only)
        "checkpoint": {"context_bytes": 0,
                       "call_bytes": 0 if sync or "rng_stash" in FAULTS else storage_of(torch.get_rng_state())[1]},
        "optimizer_work_bytes": w_opt,
        # live for the whole step besides parameters, gradients and optimizer state: the sample inputs and
        # the model's buffers (the device peak counts them)
        "inputs_bytes": _state_bytes([t for t in list(model.buffers()) + list(tensors_in(args)) if t.device == dev
                                      and storage_of(t)[0] not in {storage_of(q)[0] for q in params}]),
        "contexts": sorted(ctx.values(), key=lambda x: (x["blocks"][0], x["made_by"], -x["bytes"])),
    })
    # the blocks by their number in a plan: several chains are one, with a junction (None) between two
    at = [starts[c] + c for c in range(nc)]
    plan_blocks = []
    for c, (_, bl) in enumerate(chains):
        plan_blocks += ([None] if c else []) + list(bl)
    table = Table(data, plan_blocks, chains[0][0] if nc == 1 else [n for n, _ in chains], total)
    table.chains = chains
    # what apply needs besides the file: the keyword the blocks' input comes as (None: the first
    # positional argument), per block the buffers its forward changes (restored around a re-run),
    # and, selective, the op calls each keep-set saves
    table.input_key = keys[0] if len(set(keys)) == 1 else None
    prefix = {id(b): n for n, b in model.named_modules()}
    table.changing_buffers = [None if b is None else
                              {n for n, _ in b.named_buffers() if ".".join(filter(None, (prefix[id(b)], n))) in changed}
                              for b in plan_blocks]
    table.sac = sac
    table.last_output_saved_by_head = "after" in savers.get(out[L - 1][0], ())
    table.junctions = [at[c] - 1 for c in range(1, nc)]
    if path:
        table.save(path)
    return table
