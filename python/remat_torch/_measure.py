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
  - parameters, gradients and, with an optimizer, its state after a step.
The model is left as it was: gradients, parameters, optimizer state, the RNG.
"""
import json
import os
import time
import weakref

import torch
import torch.nn as nn

from ._lib import RematError

FORMAT_VERSION = 1
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


def find_blocks(model, blocks=None):
    """The chain: (its blocks, its name).  blocks: None (the model's largest
    ModuleList of modules of one class, preferring the names in CHAIN_NAMES),
    an attribute path ("transformer.h"), or the modules themselves."""
    if isinstance(blocks, str):
        m = model
        for part in blocks.split("."):
            if not hasattr(m, part):
                raise RematError(-1, "invalid", "the model has no %s (blocks=%r)" % (part, blocks))
            m = getattr(m, part)
        found, name = list(m), blocks
    elif blocks is not None:
        found = list(blocks)
        names = {id(mod): n for n, mod in model.named_modules()}
        name = "blocks given" if not found else names.get(id(found[0]), "blocks given").rsplit(".", 1)[0]
    else:
        best = None
        for n, m in model.named_modules():
            if not isinstance(m, nn.ModuleList) or not len(m) or len({type(b) for b in m}) != 1:
                continue
            key = (len(m), n.rsplit(".", 1)[-1] in CHAIN_NAMES, -n.count("."))
            if best is None or key > best[0]:
                best = (key, n, m)
        if best is None:
            raise RematError(-1, "invalid", "no chain of blocks found (a ModuleList of modules of one class, such "
                             "as model.layers or transformer.h): name it with blocks=")
        found, name = list(best[2]), best[1]
    if not found or not all(isinstance(b, nn.Module) for b in found):
        raise RematError(-1, "invalid", "blocks must be torch.nn.Modules, at least one")
    if len({type(b) for b in found}) != 1:
        raise RematError(-1, "invalid", "the blocks are not of one class (%s): remat plans a chain of identical "
                         "blocks" % ", ".join(sorted({type(b).__name__ for b in found})))
    if len({id(b) for b in found}) != len(found):
        raise RematError(-1, "invalid", "a block appears twice in the chain")
    return found, name


class Table:
    """A measured remat table: .data is its JSON (remat.h, "tables read from
    files"; README, "The table format"), .blocks the modules of
    the chain, .chain their name in the model, .kept_bytes what the
    unwrapped model kept (measured)."""

    def __init__(self, data, blocks=None, chain=None, kept_bytes=None):
        self.data = data
        self.blocks = blocks
        self.chain = chain
        self.kept_bytes = kept_bytes

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
        return "<remat table %s: %d blocks>" % (d.get("name", "?"), len(d["blocks"]))


class _Wrapped:
    """Every block's forward wrapped for one step: calls, inputs, outputs,
    times; restored by close()."""

    def __init__(self, chain, sync, on_enter=None, on_exit=None):
        self.chain, self.sync = chain, sync
        self.on_enter, self.on_exit = on_enter, on_exit
        self.calls = [0] * len(chain)
        self.inp = [None] * len(chain)
        self.out = [None] * len(chain)
        self.args = [[] for _ in chain]
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
            self.inp[i] = args[0] if args and isinstance(args[0], torch.Tensor) else first_tensor((args, kwargs))
            self.args[i] = [t for t in tensors_in((args, kwargs)) if t is not self.inp[i]]
            if self.on_enter:
                self.on_enter(i)
            self.t_in[i] = self.now()
            out = fwd(*args, **kwargs)
            self.t_out[i] = self.now()
            self.out[i] = first_tensor(out)
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


def _excluded(model, args):
    """storage pointers that are not the step's: parameters, buffers, sample inputs"""
    ex = set()
    for t in list(model.parameters()) + list(model.buffers()) + list(tensors_in(args)):
        ex.add(storage_of(t)[0])
    ex.discard(0)
    return ex


def _memory(model, args, loss_fn, chain, excluded, sync, dev):
    """One forward under the pack hook: {storage: [bytes, owner]} of what is
    kept at its end (owner "before", a block index, or "after"), and the
    blocks' inputs, outputs and other arguments."""
    rec = {}
    phase = ["before"]
    # remat-hf (m4-pyhf): a block's other arguments made before it (Hugging Face's rotary cos/sin,
    # its masks) are the ops before the chain's, kept under every plan (by the blocks that save
    # them, or by the checkpoints that take them), not the first block that saves them
    given = set()

    def pack(t):
        d = t.detach()
        key, nb = storage_of(t)
        if key and key not in excluded and t.device == dev:
            e = rec.get(key)
            if e is None or not any(r() is not None for r in e[2]):
                rec.pop(key, None)           # a freed storage's address, reused: a new storage
                e = rec[key] = [nb, "before" if key in given else phase[0], []]
            e[2].append(weakref.ref(d))
        return d

    def enter(i):
        given.update(storage_of(t)[0] for t in w.args[i] if t.device == dev)   # remat-hf
        phase[0] = i

    def exit_(i):
        phase[0] = "after" if i == len(chain) - 1 else i

    w = _Wrapped(chain, sync, enter, exit_)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda d: d):
            loss = loss_fn(model(*args))
        kept = {k: e[:2] for k, e in rec.items() if any(r() is not None for r in e[2])}
        inp = [storage_of(t) if t is not None else (0, 0) for t in w.inp]
        out = [storage_of(t) if t is not None else (0, 0) for t in w.out]
        extra = [[storage_of(t) for t in a if t.device == dev] for a in w.args]
        calls = list(w.calls)
        del loss
    finally:
        w.close()
    for i, n in enumerate(calls):
        if n != 1:
            raise RematError(-1, "invalid", "block %d did not run in the forward: the chain must be the blocks the "
                             "model runs, in order" % i)
    return kept, inp, out, extra


def _times(model, args, loss_fn, chain, sync, optimizer):
    """One step, timed: per block (forward ms, backward ms), the chain input's
    and the head's (forward, backward), the optimizer step's ms (or 0)."""
    L = len(chain)
    grad_t = {}

    def exit_(i):
        y = w.out[i]
        if y is not None and y.requires_grad:
            y.register_hook(lambda g, i=i: grad_t.__setitem__(i, w.now()))
        if i == 0 and w.inp[0] is not None and w.inp[0].requires_grad:
            w.inp[0].register_hook(lambda g: grad_t.__setitem__(-1, w.now()))

    w = _Wrapped(chain, sync, None, exit_)
    try:
        t0 = w.now()
        loss = loss_fn(model(*args))
        t1 = w.now()
        loss.backward()
        t2 = w.now()
        t_in0, t_out = w.t_in[0], list(w.t_out)
        f_blocks = [w.t_out[i] - w.t_in[i] for i in range(L)]
    finally:
        w.close()
    if any(i not in grad_t for i in range(L)):
        raise RematError(-1, "invalid", "a block's output got no gradient in the backward: the loss must depend on "
                         "every block")
    start0 = grad_t.get(-1, t2)
    b_blocks = [(grad_t[i - 1] if i else start0) - grad_t[i] for i in range(L)]
    opt_ms = 0.0
    if optimizer is not None:
        ts = w.now()
        optimizer.step()
        opt_ms = (w.now() - ts) * 1e3
    ms = lambda s: max(s, 0.0) * 1e3
    return ([ms(f) for f in f_blocks], [ms(b) for b in b_blocks], (ms(t_in0 - t0), ms(t2 - start0)),
            (ms(t1 - t_out[-1]), ms(grad_t[L - 1] - t1)), opt_ms)


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
    loss.backward(), and returns the remat table of the model's chain of
    blocks (written to path too when given); see the module's notes."""
    args = as_args(sample_inputs)
    loss_fn = loss_fn or default_loss
    if selective and torch_version() < (2, 5):
        raise RematError(-1, "invalid", "selective checkpointing needs torch >= 2.5 "
                         "(torch.utils.checkpoint.create_selective_checkpoint_contexts); this is torch %s"
                         % torch.__version__)
    chain, name = find_blocks(model, blocks)
    if any(getattr(b.__dict__.get("forward"), "_remat_torch", False) for b in model.modules()):
        raise RematError(-1, "invalid", "the model runs a plan (remat_torch.apply): measure it without, after "
                         "remat_torch.unapply(model)")
    params = [p for p in model.parameters()]
    dev = (params[0].device if params else (first_tensor(args).device if first_tensor(args) is not None
                                              else torch.device("cpu")))
    sync = dev.type == "cuda"
    excluded = _excluded(model, args)
    grads = [p.grad for p in params]
    snap = None
    if optimizer is not None:
        import copy
        snap = ([p.detach().clone() for p in params], copy.deepcopy(optimizer.state_dict()))
    devices = [dev.index or 0] if sync else []
    try:
        with torch.random.fork_rng(devices=devices):
            rng = torch.get_rng_state(), (torch.cuda.get_rng_state(dev) if sync else None)
            kept, inp, out, extra = _memory(model, args, loss_fn, chain, excluded, sync, dev)
            runs = []
            for r in range(max(1, reps)):
                torch.set_rng_state(rng[0])
                if sync:
                    torch.cuda.set_rng_state(rng[1], dev)
                runs.append(_times(model, args, loss_fn, chain, sync, optimizer if r == reps - 1 else None))
            grads_bytes = _state_bytes(p.grad for p in params if p.grad is not None)
            opt_bytes = 0
            if optimizer is not None:
                opt_bytes = _state_bytes(t for st in optimizer.state.values() for t in st.values())
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        if snap is not None:
            with torch.no_grad():
                for p, v in zip(params, snap[0]):
                    p.copy_(v)
            optimizer.load_state_dict(snap[1])
    L = len(chain)
    # the boundaries: block i + 1 runs on block i's output, and each is kept
    for i in range(L - 1):
        if out[i][0] != inp[i + 1][0]:
            raise RematError(-1, "invalid", "block %d does not run on block %d's output: remat plans a chain in "
                             "which each block takes the one before's output" % (i + 1, i))
    for i in range(1, L):
        if inp[i][0] not in kept:
            raise RematError(-1, "invalid", "block %d does not keep its input for the backward (nothing in it "
                             "saves it): remat's chains keep every block's input; name blocks that begin with an "
                             "op that saves its input (a norm, a linear layer)" % i)
    x0_kept = inp[0][0] not in excluded
    if x0_kept and inp[0][0] not in kept:
        raise RematError(-1, "invalid", "block 0 does not keep its input for the backward: remat's chains keep "
                         "every block's input")
    bounds = {inp[0][0]} | {o[0] for o in out}
    saved = [[] for _ in range(L)]
    before = after = 0
    for k, (nb, owner) in kept.items():
        if k in bounds:
            continue
        if owner == "before":
            before += nb
        elif owner == "after":
            after += nb
        else:
            saved[owner].append(nb)
    ctx = {}
    for i in range(L):
        for k, nb in extra[i]:
            if k and k not in excluded and k not in kept and k not in bounds:
                ctx[k] = nb
    total = sum(nb for k, (nb, _) in kept.items())
    fwd = [_median([r[0][i] for r in runs]) for i in range(L)]
    bwd = [_median([r[1][i] for r in runs]) for i in range(L)]
    data = {
        "format": "remat-table",
        "version": FORMAT_VERSION,
        "name": "%s.%s" % (type(model).__name__, name),
        "source": "remat_torch, torch %s" % torch.__version__,
        "device": torch.cuda.get_device_name(dev) if sync else "cpu (torch, %d threads)" % torch.get_num_threads(),
        "selective": bool(selective),
        "input": {"bytes": inp[0][1], "kept": x0_kept, "saved_bytes": before,
                  "forward_ms": _median([r[2][0] for r in runs]), "backward_ms": _median([r[2][1] for r in runs])},
        "blocks": [{"saved": [{"bytes": nb, "cheap": False} for nb in sorted(saved[i], reverse=True)],
                    "output_bytes": out[i][1], "forward_ms": fwd[i], "backward_ms": bwd[i]} for i in range(L)],
        "head": {"saved_bytes": after, "keeps_input": out[L - 1][0] in kept,
                 "forward_ms": _median([r[3][0] for r in runs]), "backward_ms": _median([r[3][1] for r in runs])},
        "params_bytes": _state_bytes(params),
        "grads_bytes": grads_bytes,
        "optimizer_bytes": opt_bytes,
        "optimizer_ms": runs[-1][4],
        # what torch.utils.checkpoint holds besides the blocks' inputs: the other arguments nothing else
        # keeps, and per call the RNG state it preserves (a CPU tensor: device memory on the CPU only)
        "checkpoint": {"context_bytes": sum(ctx.values()),
                       "call_bytes": 0 if sync else storage_of(torch.get_rng_state())[1]},
    }
    table = Table(data, chain, name, total)
    if path:
        table.save(path)
    return table
