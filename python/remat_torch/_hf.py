"""_hf.py -- remat plans on Hugging Face transformers models (remat_torch.hf).

    import remat_torch.hf as rhf
    plan = rhf.enable(model, batch, budget="6GiB")      # measure, plan, apply: one step
    Trainer(model=model, args=TrainingArguments(..., gradient_checkpointing=False), ...).train()

A transformers 5.x model's decoder (or encoder) layers are
GradientCheckpointingLayer's (transformers/modeling_layers.py): when a
layer's gradient_checkpointing is set and it is training, its __call__ runs
self._gradient_checkpointing_func(partial(super().__call__, **kwargs),
*args) instead of itself.  That is the seam model.gradient_checkpointing_enable()
uses, and the one a plan is applied through: every layer the plan touches gets
the flag and a function of the plan's (_Layer), so that Trainer, PEFT and the
model's own loop run unchanged.  What each layer's function does:
  - a layer the plan keeps whole: nothing (the flag stays off);
  - a layer that keeps nothing: torch.utils.checkpoint of it, non-reentrant,
    as gradient_checkpointing_enable() does;
  - a segment of layers a .. m-1 checkpointed as one: one non-reentrant
    checkpoint frame opened when layer a is called and closed when layer
    m-1 returns (torch.utils.checkpoint's own frame, its generator form),
    the layers called by the model in between run inside it, each with the
    arguments the model gives it (Gemma 3's sliding and global layers get
    different masks, T5's later layers the position bias its first one
    makes); each layer's arguments other than its input are recorded, and
    the frame's re-run in the backward replays the layers on them, taking
    what a layer of the segment made from the re-run (_Frame).  Inside the
    segment (in its first forward and in its re-run alike, so that both
    save the same tensors in the same order), a layer the re-run
    checkpoints is a non-reentrant torch.utils.checkpoint of it, and a
    segment nested in it a frame of its own, each layer with its own
    arguments.
  - several chains (T5's encoder.block and decoder.block) are measured in
    one step and planned as one table of chains (remat.h, "tables read
    from files"): the plan numbers their blocks one after another, with a
    junction between two that no checkpoint holds.
The prediction of what this keeps is remat_torch's (Plan.kept_bytes): the
frame holds what torch.utils.checkpoint of the segment would, and the
arguments made before it that nothing else keeps (the table's contexts).

HF's own checkpointing and a plan do not both run: apply() after
gradient_checkpointing_enable() takes over (HF's is disabled first), and
gradient_checkpointing_enable() on a model that runs a plan is refused with
one line (remat_torch.hf.unapply(model) first).  measure() runs with HF's
checkpointing off, whatever it was, and puts it back.

transformers needs torch >= 2.5 (5.x refuses torch 1.13 and runs without
its models); this module needs transformers only to find the layers.
"""
import functools
import weakref

import torch
import torch.nn as nn
import torch.utils.checkpoint as tuc

from . import _plan
from ._lib import RematError
from ._measure import first_tensor, measure as _measure_model, tensors_in

_MARK = "_remat_torch_plan"


def _gcl_class():
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError as e:
        raise RematError(1, "invalid argument", "remat_torch.hf needs transformers with GradientCheckpointingLayer "
                         "(5.x, on torch >= 2.5): %s" % e)
    return GradientCheckpointingLayer


def chains(model):
    """[(name, [layers])]: the model's lists of GradientCheckpointingLayer's (a ModuleList or an
    nn.Sequential every module of which is one), in the model's order: a decoder's layers, or
    T5's encoder.block and decoder.block"""
    G = _gcl_class()
    out = []
    for name, m in model.named_modules():
        if isinstance(m, (nn.ModuleList, nn.Sequential)) and len(m) and all(isinstance(b, G) for b in m):
            out.append((name, list(m)))
    return out


def _chains(model, chain=None):
    """[(name, layers)]: the chains to measure -- chain= (a name, or a list of names), else every
    list of GradientCheckpointingLayer's the model has (T5: its encoder's and its decoder's)"""
    found = chains(model)
    if chain is not None:
        want = [chain] if isinstance(chain, str) else list(chain)
        byname = dict(found)
        for n in want:
            if n not in byname:
                raise RematError(1, "invalid argument", "no chain %r of GradientCheckpointingLayer's in %s (found: %s)"
                                 % (n, type(model).__name__, ", ".join(m for m, _ in found) or "none"))
        return [(n, byname[n]) for n in want]
    if not found:
        raise RematError(1, "invalid argument", "%s has no list of GradientCheckpointingLayer's (transformers 5.x "
                         "layers): use remat_torch.plan with blocks=" % type(model).__name__)
    return found


class _Call(nn.Module):
    """model(**batch) called as model(*values): measure's and kept_bytes' calling convention"""

    def __init__(self, model, keys):
        super().__init__()
        self.model = model
        self.keys = keys

    def forward(self, *values):
        return self.model(**dict(zip(self.keys, values)))


def as_call(model, batch):
    """(a module that runs model(**batch) from positional values, those values): for
    remat_torch.measure, kept_bytes and step_peak, which call model(*sample_inputs)"""
    if not isinstance(batch, dict):
        raise RematError(1, "invalid argument", "batch is a dict of the model's keyword inputs (input_ids=, "
                         "labels=, ...), got %s" % type(batch).__name__)
    keys = list(batch)
    return _Call(model, keys), tuple(batch[k] for k in keys)


class _hf_checkpointing_off:
    """HF's gradient_checkpointing flags off for a while, then as they were"""

    def __init__(self, model):
        self.saved = [(m, m.__dict__.get("gradient_checkpointing")) for m in model.modules()
                      if hasattr(m, "gradient_checkpointing")]

    def __enter__(self):
        for m, _ in self.saved:
            m.gradient_checkpointing = False

    def __exit__(self, *exc):
        for m, v in self.saved:
            if v is None:
                m.__dict__.pop("gradient_checkpointing", None)
            else:
                m.gradient_checkpointing = v


def applied(model):
    """the plan model runs (remat_torch.hf.apply), or None"""
    return model.__dict__.get(_MARK)


def measure(model, batch, optimizer=None, chain=None, **kw):
    """remat_torch.measure of model(**batch) (the loss its output's .loss: give labels=), its chain
    of GradientCheckpointingLayer's, with HF's own checkpointing off while it runs"""
    if applied(model) is not None:
        raise RematError(1, "invalid argument", "the model runs a remat plan: measure it after "
                         "remat_torch.hf.unapply(model)")
    found = _chains(model, chain)
    call, values = as_call(model, batch)
    blocks = found[0][1] if len(found) == 1 else [layers for _, layers in found]
    with _hf_checkpointing_off(model):
        table = _measure_model(call, values, blocks=blocks, optimizer=optimizer, **kw)
    # layers that differ (Gemma 3's sliding and global ones) have each their own entries (remat.h,
    # "tables read from files", from version 2); several chains (T5's encoder and decoder) are
    # "chains", named as the model names them
    d = table.data
    if len(found) > 1:
        for c, (name, _) in enumerate(found):
            d["chains"][c]["name"] = name
            d["chains"][c]["reads"] = [found[[n for n, _ in table.chains].index(r)][0] for r in d["chains"][c]["reads"]]
    d["name"] = "%s.%s" % (type(model).__name__, "+".join(n for n, _ in found))
    if kw.get("path"):
        table.save(kw["path"])
    table.chains = found
    table.chain = found[0][0] if len(found) == 1 else [n for n, _ in found]
    table.hf = True                       # remat_torch.apply applies it through GradientCheckpointingLayer
    return table


def plan(model, batch, budget=None, kept_budget=None, optimizer=None, chain=None, table=None, policy=None, **kw):
    """remat_torch.plan for model(**batch): the fastest plan whose step peaks within budget (device
    memory: parameters, gradients, optimizer state and activations) or keeps within kept_budget"""
    if table is None:
        table = measure(model, batch, optimizer=optimizer, chain=chain, **kw)
    return _plan.plan_table(table, budget, policy, kept_budget=kept_budget)


def enable(model, batch, budget=None, kept_budget=None, optimizer=None, chain=None, **kw):
    """plan() then apply(): the one step a Trainer user takes before trainer.train(); the plan"""
    p = plan(model, batch, budget=budget, kept_budget=kept_budget, optimizer=optimizer, chain=chain, **kw)
    apply(model, p)
    return p


# ---- applying a plan through GradientCheckpointingLayer -----------------------------------

def _refuse_hf(*args, **kwargs):
    raise RematError(1, "invalid argument", "this model runs a remat plan (remat_torch.hf.apply): call "
                     "remat_torch.hf.unapply(model) before gradient_checkpointing_enable(), or leave "
                     "gradient checkpointing to the plan (TrainingArguments(gradient_checkpointing=False))")


def apply(model, plan):
    """Applies plan to model through its layers' GradientCheckpointingLayer seam (see the module's
    notes); takes over from HF's own gradient checkpointing when it is on.  Returns model."""
    layers = plan.table.blocks             # by their number in the plan: None at a junction of two chains
    G = _gcl_class()
    if not layers or not all(isinstance(b, G) for b in layers if b is not None):
        raise RematError(1, "invalid argument", "the plan's blocks are not GradientCheckpointingLayer's: apply "
                         "it with remat_torch.apply")
    mine = {id(m) for m in model.modules()}
    if not all(id(b) in mine for b in layers if b is not None):
        raise RematError(1, "invalid argument", "the plan's layers are not this model's (plan it on this model)")
    _plan.unapply(model)                  # a plan of either kind: RematCheckpoint's,
    unapply(model)                        # or this module's
    if getattr(model, "is_gradient_checkpointing", False) and hasattr(model, "gradient_checkpointing_disable"):
        model.gradient_checkpointing_disable()          # HF's own: the plan takes over
    state = _State(layers, plan.tree)
    for k, layer in enumerate(layers):
        if state.top[k] is None:
            continue
        layer.gradient_checkpointing = True
        layer._gradient_checkpointing_func = _Layer(state, k)
    model.__dict__[_MARK] = plan
    if hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable = _refuse_hf
    return model


def unapply(model):
    """Undoes apply: the layers' flags off, HF's gradient_checkpointing_enable back.  Returns model."""
    for m in model.modules():
        f = m.__dict__.get("_gradient_checkpointing_func")
        if isinstance(f, _Layer):
            m.gradient_checkpointing = False
            del m._gradient_checkpointing_func
    model.__dict__.pop(_MARK, None)
    if model.__dict__.get("gradient_checkpointing_enable") is _refuse_hf:
        del model.gradient_checkpointing_enable
    return model


def _call_kw(func, kwargs, x, *rest):
    return func(x, *rest, **kwargs)


class _State:
    """what the plan does with each layer: top[k] the outermost item holding layer k (None: kept
    whole, not in a segment), and the open segment frame"""

    def __init__(self, layers, tree):
        self.layers = layers
        self.top = [None] * len(layers)
        for nd in tree:                       # remat_torch.Node's (remat_plan_tree)
            if nd.offload:
                raise RematError(1, "invalid argument", "the plan offloads block %d: remat_torch.hf does not "
                                 "apply offloading" % nd.first)
            if nd.kind == "block":
                if nd.keep != "all":
                    self.top[nd.first] = nd
            else:
                for k in range(nd.first, nd.end):
                    self.top[k] = nd
        self.frame = None


class _Layer:
    """a layer's _gradient_checkpointing_func: called by GradientCheckpointingLayer.__call__ as
    func(partial(nn.Module.__call__ of the layer, **kwargs), *args)"""

    def __init__(self, state, k):
        self.state, self.k = state, k

    def __repr__(self):
        return "<remat plan, layer %d>" % self.k

    def __call__(self, fn, *args):
        it = self.state.top[self.k]
        if not torch.is_grad_enabled():
            return fn(*args)                     # evaluation: nothing to keep, nothing to re-run
        if it.kind == "block":
            if it.keep != "none":
                raise RematError(1, "invalid argument", "the plan keeps a selective set in layer %d: remat_torch.hf "
                                 "applies whole-layer checkpoints and segments (measure without selective=)" % self.k)
            return tuc.checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=True)
        st = self.state
        if self.k == it.first:
            if st.frame is not None:
                # a frame still open: the forward that opened it raised between two of its layers
                # (the model's code, not a layer); closing it pops torch's hooks it pushed
                st.frame.fail()
                st.frame = None
            st.frame = _Frame(st.layers, it, args[0])
        f = st.frame
        if f is None or f.item is not it or f.next != self.k:
            raise RematError(1, "invalid argument", "layer %d of a checkpointed segment was called out of order: the "
                             "model must call its layers one after another, each once" % self.k)
        try:
            out = f.forward(self.k, fn, args)
        except BaseException:
            st.frame = None
            f.fail()
            raise
        if self.k == it.end - 1:
            st.frame = None
            f.close()
        return out


class _Ref:
    """in a recorded call: the tensor the segment's layer j returned at position n (a position
    bias T5's first layer makes and hands the others), which a re-run takes from the layer's re-run"""
    __slots__ = ("j", "n")

    def __init__(self, j, n):
        self.j, self.n = j, n


class _Frame:
    """one segment's non-reentrant checkpoint frame (torch.utils.checkpoint's generator), open
    from its first layer's call to its last layer's return.

    The layers run as the model calls them, each with its own arguments, recorded (calls) so that
    the frame's re-run replays them -- but a tensor a layer of the segment returned is recorded as
    a _Ref, and the re-run gives that layer's re-run output instead (T5's first layer makes the
    position bias the others take): the frame holds no tensor the segment made (the first
    forward's would outlive a forward without a backward, through autograd's graph, where gc
    cannot see them), only the arguments made before it, as a checkpoint holds its inputs.
    Inside the frame, a layer the plan's re-run checkpoints is a non-reentrant checkpoint of it,
    and a segment nested in it a _Frame of its own, opened at its first layer and closed at its
    last, in the first forward and in the re-run alike (so that both save the same tensors in the
    same order); it records its layers' calls itself, holding what was made before it."""

    def __init__(self, layers, item, x):
        self.layers, self.item = layers, item
        self.a, self.m, self.sub = item.first, item.end, item.children
        self.next = self.a
        self.calls = {}                   # layer -> (its nn.Module.__call__, args, kwargs), as recorded
        self.made = {}                    # id(tensor) -> (weakref, layer, position) of the layers' outputs
        self.last = None                  # the output of the layer run last (its first tensor chains on)
        self.child = None                 # an open nested segment
        # the re-run as a partial over the recorded calls: what it holds is then in plain sight of
        # remat_torch.kept_bytes (its "hooks" method reads torch.utils.checkpoint's closures)
        rerun = functools.partial(_rerun, self, self.calls)
        self.gen = tuc._checkpoint_without_reentrant_generator(rerun, True, tuc.noop_context_fn,
                                                               "default", False, True, x)
        next(self.gen)

    def forward(self, k, fn, args):
        """layer k as the model calls it (the outermost frame, in the first forward)"""
        if k > self.a and (self.last is None or args[0] is not first_tensor(self.last)):
            raise RematError(1, "invalid argument", "layer %d of a checkpointed segment was called on something else "
                             "than layer %d's output: the model must call its layers one after another, each on the "
                             "one before's output" % (k, k - 1))
        return self.run_layer(k, fn.func, args[1:], fn.keywords, args[0])

    def run_layer(self, k, func, rest, kw, x):
        """layer k, run by this frame: recorded for its re-run, then run as the re-run decides"""
        self.calls[k] = (func, self._record(rest), self._record(kw))
        self.next = k + 1
        out = self._step(k, func, rest, kw, x)
        for n, t in enumerate(_tensors(out)):
            self.made[id(t)] = (weakref.ref(t), k, n)
        self.last = out
        return out

    def _record(self, obj):
        """obj with every tensor an earlier layer of this frame returned replaced by its _Ref"""
        def sub(t):
            e = self.made.get(id(t)) if isinstance(t, torch.Tensor) else None
            return _Ref(e[1], e[2]) if e is not None and e[0]() is t else t
        if isinstance(obj, dict):
            return {k: sub(v) for k, v in obj.items()}
        return tuple(sub(v) for v in obj)

    @staticmethod
    def _replay(obj, outs):
        def put(v):
            return outs[v.j][v.n] if isinstance(v, _Ref) else v
        if isinstance(obj, dict):
            return {k: put(v) for k, v in obj.items()}
        return tuple(put(v) for v in obj)

    def _step(self, k, func, rest, kw, x):
        """layer k as the segment's re-run decides, in the first forward or in the re-run"""
        if self.child is not None:                # a nested segment is open: layer k is its
            out = self.child.run_layer(k, func, rest, kw, x)
            if k == self.child.m - 1:
                child, self.child = self.child, None
                child.close()
            return out
        it = _items_at(self.sub, k)
        if it is None or (it.kind == "block" and (it.keep == "all" or it.last)):
            return func(x, *rest, **kw)
        if it.kind == "block":
            if it.keep != "none":
                raise RematError(1, "invalid argument", "a selective keep-set inside a segment's re-run: remat_torch.hf "
                                 "applies whole-layer checkpoints and segments there")
            return tuc.checkpoint(functools.partial(_call_kw, func, kw), x, *rest, use_reentrant=False,
                                  preserve_rng_state=True)
        self.child = _Frame(self.layers, it, x)
        # a checkpoint nested in a re-run holds its input in the first forward, as remat_torch's wrappers'
        # nested checkpoints do and as libremat counts (remat_table_row: one block output per such
        # input); torch's frame alone would take it from the outer re-run instead
        self.child.calls["held"] = x      # (in its re-run's records: in sight of kept_bytes' hooks method)
        return self._step(k, func, rest, kw, x)

    def _recompute(self, x):
        """the re-run: the layers from their recorded calls, the segment's own tensors its re-run's"""
        h, out, outs = x, None, {}
        try:
            for k in range(self.a, self.m):
                func, rest, kw = self.calls[k]
                out = self._step(k, func, self._replay(rest, outs), self._replay(kw, outs), h)
                outs[k] = _tensors(out)
                h = first_tensor(out)
        finally:
            if self.child is not None:
                child, self.child = self.child, None
                child.fail()
        return out

    def close(self):
        # the last output holds the graph, whose saved tensors hold torch's frame, which holds
        # self._recompute: a cycle through autograd's nodes that gc cannot see (a forward without
        # a backward would never be freed)
        self.last = None
        self.made.clear()
        if self.child is not None:
            child, self.child = self.child, None
            child.fail()
        try:
            next(self.gen)
        except StopIteration:
            return
        raise RematError(1, "invalid argument", "torch.utils.checkpoint's frame did not end")

    def fail(self):
        self.last = None
        self.made.clear()
        if self.child is not None:
            child, self.child = self.child, None
            child.fail()
        self.gen.close()


def _tensors(out):
    return list(tensors_in(out))


def _rerun(frame, calls, x):
    return frame._recompute(x)


def _items_at(items, k):
    """the item of a re-run's items that begins at layer k (None: inside a nested segment)"""
    for nd in items:
        if nd.first == k:
            return nd
    return None
