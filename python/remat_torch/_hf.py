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
    different masks); each layer's arguments other than its input are
    recorded, and the frame's re-run in the backward replays the layers on
    them.  Inside the segment (in its first forward and in its re-run
    alike, so that both save the same tensors in the same order), a layer
    the re-run checkpoints is a reentrant torch.utils.checkpoint of it, and
    a segment nested in it one reentrant checkpoint of its layers, which
    then must get the same arguments (refused in one line when they do not).
The prediction of what this keeps is remat_torch's (Plan.kept_bytes): the
frame holds what torch.utils.checkpoint of the segment would.

HF's own checkpointing and a plan do not both run: apply() after
gradient_checkpointing_enable() takes over (HF's is disabled first), and
gradient_checkpointing_enable() on a model that runs a plan is refused with
one line (remat_torch.hf.unapply(model) first).  measure() runs with HF's
checkpointing off, whatever it was, and puts it back.

transformers needs torch >= 2.5 (5.x refuses torch 1.13 and runs without
its models); this module needs transformers only to find the layers.
"""
import functools

import torch
import torch.nn as nn
import torch.utils.checkpoint as tuc

from . import _plan
from ._lib import RematError
from ._measure import first_tensor, measure as _measure_model

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


def _chain(model, chain=None):
    found = chains(model)
    if chain is not None:
        for name, layers in found:
            if name == chain:
                return name, layers
        raise RematError(1, "invalid argument", "no chain %r of GradientCheckpointingLayer's in %s (found: %s)"
                         % (chain, type(model).__name__, ", ".join(n for n, _ in found) or "none"))
    if not found:
        raise RematError(1, "invalid argument", "%s has no list of GradientCheckpointingLayer's (transformers 5.x "
                         "layers): use remat_torch.plan with blocks=" % type(model).__name__)
    if len(found) > 1:
        raise RematError(1, "invalid argument", "%s has %d chains (%s): remat_torch does not measure a table of "
                         "several chains yet; name one with chain=" % (type(model).__name__, len(found),
                                                               ", ".join(n for n, _ in found)))
    return found[0]


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
    name, layers = _chain(model, chain)
    call, values = as_call(model, batch)
    with _hf_checkpointing_off(model):
        table = _measure_model(call, values, blocks=layers, optimizer=optimizer, **kw)
    # layers that differ (Gemma 3's sliding and global ones) make a table of version 2, each block its
    # own entries (remat.h, "tables read from files"); alike, version 1 (which refuses blocks that differ)
    d = table.data
    if any((b["saved"], b["output_bytes"]) != (d["blocks"][0]["saved"], d["blocks"][0]["output_bytes"])
           for b in d["blocks"]) or d["input"]["bytes"] != d["blocks"][0]["output_bytes"]:
        d["version"] = 2
        if kw.get("path"):
            table.save(kw["path"])
    table.blocks, table.chain = layers, name
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
    layers = plan.table.blocks
    G = _gcl_class()
    if not layers or not all(isinstance(b, G) for b in layers):
        raise RematError(1, "invalid argument", "the plan's blocks are not GradientCheckpointingLayer's: apply "
                         "it with remat_torch.apply")
    mine = {id(m) for m in model.modules()}
    if not all(id(b) in mine for b in layers):
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


class _Frame:
    """one segment's non-reentrant checkpoint frame (torch.utils.checkpoint's generator), open
    from its first layer's call to its last layer's return"""

    def __init__(self, layers, item, x):
        self.layers, self.item = layers, item
        self.a, self.m, self.sub = item.first, item.end, item.children
        self.next = self.a
        self.calls = {}                   # layer -> (its nn.Module.__call__, other positional args, kwargs)
        self.last = None                  # the output of the layer run last (its first tensor chains on)
        self.nested = None                # (its last layer, its output) while a nested segment hands on
        self.nested_head = None
        # the re-run as a partial over the recorded calls: what it holds is then in plain sight of
        # remat_torch.kept_bytes (its "hooks" method reads torch.utils.checkpoint's closures)
        rerun = functools.partial(_rerun, self, self.calls)
        self.gen = tuc._checkpoint_without_reentrant_generator(rerun, True, tuc.noop_context_fn,
                                                               "default", False, True, x)
        next(self.gen)

    def forward(self, k, fn, args):
        if k > self.a and (self.last is None or args[0] is not first_tensor(self.last)):
            raise RematError(1, "invalid argument", "layer %d of a checkpointed segment was called on something else "
                             "than layer %d's output: the model must call its layers one after another, each on the "
                             "one before's output" % (k, k - 1))
        self.calls[k] = (fn.func, args[1:], fn.keywords)
        self.next = k + 1
        self.last = self._run(k, lambda i: self.calls[i], args[0], streaming=True)
        return self.last

    def _run(self, k, call_of, x, streaming):
        """layer k as the segment's re-run decides, in the first forward or in the re-run"""
        items = _items_at(self.sub, k)
        func, rest, kw = call_of(k)
        if self.nested is not None:               # a nested segment ran layer k already: hand its output on
            last, out = self.nested
            if streaming:
                head = call_of(self.nested_head)
                if rest != head[1] or kw.keys() != head[2].keys() or \
                        any(kw[n] is not head[2][n] for n in kw):
                    raise RematError(1, "invalid argument", "layer %d gets other arguments than layer %d, with "
                                     "which a nested checkpointed segment runs it: plan with another budget"
                                     % (k, self.nested_head))
            if k == last:
                self.nested = None
            return out
        if items is None or (items.kind == "block" and (items.keep == "all" or items.last)):
            return func(x, *rest, **kw)
        if items.kind == "block":
            if items.keep != "none":
                raise RematError(1, "invalid argument", "a selective keep-set inside a segment's re-run: torch "
                                 "cannot nest a selective checkpoint in a reentrant one")
            return _reentrant(functools.partial(_call_kw, func, kw), x, rest)
        c, d, sub2 = items.first, items.end, items.children
        layers_fn = [self.layers[i] for i in range(c, d)]

        def seg(h, *r):
            return _run_nested(sub2, c, layers_fn, func, kw, h, r)
        out = _reentrant(seg, x, rest)
        if d - 1 > k:
            self.nested, self.nested_head = (d - 1, out), c
        return out

    def _recompute(self, x):
        h, out = x, None
        for k in range(self.a, self.m):
            out = self._run(k, lambda i: self.calls[i], h, streaming=False)
            h = first_tensor(out)
        return out

    def close(self):
        # the last output holds the graph, whose saved tensors hold torch's frame, which holds
        # self._recompute: a cycle through autograd's nodes that gc cannot see (a forward without
        # a backward would never be freed)
        self.last = None
        try:
            next(self.gen)
        except StopIteration:
            return
        raise RematError(1, "invalid argument", "torch.utils.checkpoint's frame did not end")

    def fail(self):
        self.last = self.nested = None
        self.gen.close()


def _rerun(frame, calls, x):
    return frame._recompute(x)


def _items_at(items, k):
    """the item of a re-run's items that begins at layer k (None: inside a nested segment)"""
    for nd in items:
        if nd.first == k:
            return nd
    return None


def _reentrant(fn, x, rest):
    if not x.requires_grad:
        raise RematError(1, "invalid argument", "a checkpoint inside a segment's re-run starts from an input that "
                         "needs no gradient: torch's reentrant checkpoint cannot; plan with another budget")
    return tuc.checkpoint(fn, x, *rest, use_reentrant=True)


def _run_nested(items, c, layers, head_func, kw, x, rest):
    """a nested segment's layers, as its re-run decides, all with its first layer's arguments"""
    out = None
    for nd in items:
        i = nd.first
        func = head_func if i == c else functools.partial(nn.Module.__call__, layers[i - c])
        if nd.kind == "block" and (nd.keep == "all" or nd.last):
            out = func(x, *rest, **kw)
        elif nd.kind == "block" and nd.keep == "none":
            out = _reentrant(functools.partial(_call_kw, func, kw), x, rest)
        elif nd.kind == "block":
            raise RematError(1, "invalid argument", "a selective keep-set inside a segment's re-run: torch cannot "
                             "nest a selective checkpoint in a reentrant one")
        else:
            sub = [layers[j - c] for j in range(nd.first, nd.end)]
            out = _reentrant(functools.partial(_nest2, nd.children, nd.first, sub, func, kw), x, rest)
        x = first_tensor(out)
    return out


def _nest2(items, c, layers, func, kw, x, *rest):
    return _run_nested(items, c, layers, func, kw, x, rest)
