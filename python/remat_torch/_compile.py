"""_compile.py -- remat_torch.compile_budget: remat as the memory-budget solver of
torch.compile's partitioner (torch >= 2.5; issue 26).

    with remat_torch.compile_budget("6GiB") as cb:
        step = torch.compile(model, backend="inductor")
        loss = step(x, y)                       # compiled here, planned by remat
    loss.backward()
    print(cb.plans[0])                          # predicted peak, re-run FLOPs, per layer

The seam (torch 2.13, docs/pytorch.md, "torch.compile (issue 26)"): the partitioner
(torch/_functorch/partitioners.py, choose_saved_values_set) hands the
knapsack solver named by torch._functorch.config.activation_memory_budget_solver
-- an instance of torch._inductor.custom_graph_pass.CustomKnapsackSolver --
the joint forward + backward graph and its candidates, then reruns its
min-cut with the candidates the solver recomputes un-banned.  Inside the
context, that solver is remat's, and activation_memory_budget is a fraction
small enough that the partitioner calls it (it skips the solver at 0 and
1, and whenever a min-cut it tries first already meets the fraction).

What this file does, and no more: it converts the joint graph into
remat_graph_node rows (remat.h, "a joint graph's peak") -- one per storage,
views and getitems folded into the tensor they alias, bytes from the fake
tensors' storages, FLOPs from torch's flop counter, forward or backward
from the partitioner's NodeInfo, the layer from nn_module_stack -- hands
them to remat_graph_search with the budget, and tags each node with
torch's own checkpoint policy (node.meta["recompute"]: MUST_SAVE for what
remat keeps, MUST_RECOMPUTE for what it re-runs) so that the min-cut the
partitioner runs next saves exactly remat's set.  The peak, the search,
what is saved and re-run, and the sums per layer are libremat's
(remat_graph_search, remat_graph_states).

The budget: the peak of the bytes the compiled forward and backward
allocate over what is live before them (parameters, inputs, gradients that
exist): the activations, the backward's working set, the gradients it
returns, and the forward's outputs (counted live to the end of the
backward).  One graph, one budget: a model that graph-breaks into several
compiled graphs gets the budget for each.

Which nodes remat may recompute (remat_graph_node.candidate), from torch's
own classification of the graph:
  KEEP       the inputs, random ops and collectives (torch never re-runs them;
             it tags effectful ops MUST_SAVE itself), nodes the user tagged
             MUST_SAVE, what the forward returns, and each layer's output read
             by the next layer (the
             residual stream: saved, as a checkpoint of each layer saves its
             input -- re-running it is what makes the backward of
             pytorch#197838 recompute every layer up front);
  CANDIDATE  (searched) the partitioner's own candidates (the ops its min-cut
             bans from recomputation: matmuls, reductions, ...) and the ops
             torch's flop counter counts (attention on the CPU among them,
             which torch's partitioner calls cheap);
  ALWAYS     every other forward op (pointwise ops, cat, embedding...): torch's
             min-cut treats them as free to recompute, and so does remat:
             re-run when the backward needs them, never saved.
A layer is the first module of a node's nn_module_stack that is a numbered
child (a ModuleList's or Sequential's element); the ops before the chain
join its first layer, those after its last layer (the head, the loss) are
a group of their own, and ops between layers join the layer before them.
Then the graph is a chain of layers (remat.h, REMAT_GRAPH_EXACT_LAYERS):
each layer's recomputable ops are read by its own forward and its own
phase of the backward, and its input (the residual stream) is kept, so
remat_graph_search solves it exactly by a dynamic program over the layers
on every subset of each layer's searched ops (at most 14 each; a Llama
layer has 10).  A graph that is not such a chain gets the exact search
over unions of whole layers (at most 16) or the greedy (remat.h).
"""
import re

import torch

from . import _lib
from ._lib import RematError, byref
from ._plan import fmt_bytes, parse_size

# The fraction activation_memory_budget is set to inside the context: > 0
# (0 returns the inputs without the solver) and below any min-cut's ratio
# (the partitioner returns a min-cut that already meets it without the solver).
_FRACTION = 1e-9
# Seeded faults, for tests only (tests/py_compile_budget.py shows each fails it): "half_bytes"
# (the bytes of each forward tensor the backward reads halved in the conversion),
# "cross_layer_fusion" (inductor's horizontal fusions across layers allowed).  Empty in use.
FAULTS = set()
_CHAIN_ELEMENT = re.compile(r"\.(\d+)$")


def _torch_ok():
    try:
        from torch._inductor.custom_graph_pass import CustomKnapsackSolver  # noqa: F401
        return True
    except ImportError:
        return False


def _storage(t):
    """an id of a (fake) tensor's storage, None when it has none"""
    try:
        if not torch._C._has_storage(t):
            return None
        return t.untyped_storage()._cdata
    except Exception:
        return None


def _nbytes(t):
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:
        return int(t.numel()) * t.element_size()


def _tensors(val):
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return []


def _layer_of(node, backward=False):
    """the path of the first module in the node's nn_module_stack that is an element of a chain
    (a ModuleList's or Sequential's numbered child), None when it was made by none.  backward: a
    backward node's too (AOTAutograd copies its forward op's stack to fwd_nn_module_stack)"""
    stack = node.meta.get("nn_module_stack") or (backward and node.meta.get("fwd_nn_module_stack")) or {}
    for v in stack.values():
        path = v[0] if isinstance(v, tuple) else str(v)
        if _CHAIN_ELEMENT.search(path):
            return path
    return None


def _flops(node, flop_registry):
    """torch's flop counter's formula for the op (torch/utils/flop_counter.py, flop_registry), by
    the fake tensors' shapes; CPU flash attention, which the registry lacks, by the formula of the
    op with the same arguments (_scaled_dot_product_flash_attention); one per output element for
    the ops the counter does not count (pointwise ops, reductions)"""
    aten = torch.ops.aten
    packet = getattr(node.target, "overloadpacket", None)
    if packet is aten._scaled_dot_product_flash_attention_for_cpu:
        packet = aten._scaled_dot_product_flash_attention
    f = flop_registry.get(packet)
    if f is not None:
        def val(a):
            return a.meta.get("val") if isinstance(a, torch.fx.Node) else a
        args = torch.utils._pytree.tree_map(val, node.args)
        kwargs = torch.utils._pytree.tree_map(val, node.kwargs)
        try:
            return float(f(*args, **kwargs, out_val=node.meta.get("val")))
        except Exception:
            pass
    return float(sum(t.numel() for t in _tensors(node.meta.get("val"))))


class Graph:
    """a joint graph as remat_graph_node rows (see the module's notes): .nodes (the ctypes array),
    .fx (each row's fx node, the tensor's producer), .names, .layers (group id -> layer path)"""

    def __init__(self, joint_graph, node_info, candidates, price_only=False):
        from torch.utils.checkpoint import CheckpointPolicy
        from torch.utils.flop_counter import flop_registry
        from torch._functorch.partitioners import get_default_op_list
        op_types = get_default_op_list()
        searched = set(candidates)
        root = {}            # storage id -> row
        row_of = {}          # fx node -> row (its storage's producer)
        rows = []            # (fx node, backward, bytes)
        fwd, bwd = [], []
        output = None
        for node in joint_graph.nodes:
            if node.op == "output":
                output = node
                continue
            is_fw = node.op == "placeholder" and "tangents" not in str(node.target) or \
                node.op != "placeholder" and node_info.is_required_fw(node)
            (fwd if is_fw else bwd).append(node)
        fwd_set = set(fwd)
        tangents = [n for n in bwd if n.op == "placeholder"]
        order = fwd + tangents + [n for n in bwd if n.op != "placeholder"] + [output]
        for node in order:
            if node is output:               # what the graph returns lives to its end
                row_of[node] = len(rows)
                rows.append([node, True, 0])
                continue
            ts = _tensors(node.meta.get("val"))
            keys = [_storage(t) for t in ts]
            known = [root[k] for k in keys if k is not None and k in root]
            if known:                       # a view, a getitem, a detach: the tensor it aliases
                row_of[node] = known[0]
                continue
            if not ts:
                continue                    # a symbolic size, None: no memory
            r = len(rows)
            b = 0
            for t, k in zip(ts, keys):
                if k is not None:
                    root[k] = r
                    b += _nbytes(t)
            if node.op == "placeholder" and "tangents" not in str(node.target):
                b = 0                       # a parameter or input: live before the step
            rows.append([node, node not in fwd_set, b])
            row_of[node] = r
        self.row_of = row_of
        n_fwd = sum(1 for r in rows if not r[1])
        # groups: each forward row's layer; the rows before the chain join its first layer, those
        # after it (the head) are a group of their own, and rows between layers join the one before
        self.layers = []
        layer_id = {}
        group = [0] * len(rows)
        pending, cur = [], None
        last = max((i for i in range(n_fwd) if rows[i][0].op != "placeholder" and _layer_of(rows[i][0])),
                   default=-1)
        for i in range(n_fwd):
            path = _layer_of(rows[i][0]) if rows[i][0].op != "placeholder" else None
            if path is None and i > last >= 0 and rows[i][0].op != "placeholder":
                path = "(after the chain)"
            if path is not None and path not in layer_id:
                layer_id[path] = len(self.layers)
                self.layers.append(path)
            if path is not None:
                cur = layer_id[path]
                for j in pending:
                    group[j] = cur
                pending = []
            if cur is None:
                pending.append(i)
            else:
                group[i] = cur if path is None else layer_id[path]
        if not self.layers:
            self.layers.append("(graph)")
        # inputs: the rows of every node read, through the aliases
        ins = []
        for i, (node, back, b) in enumerate(rows):
            seen = set()
            for a in node.all_input_nodes:     # reading an alias reads its tensor (row_of)
                r = row_of.get(a)
                if r is not None and r != i:
                    seen.add(r)
            ins.append(sorted(seen))
        # what reads each row (for the residual stream: read by another layer's forward rows)
        other_layer = [False] * len(rows)
        for i in range(n_fwd):
            for r in ins[i]:
                if r < n_fwd and group[r] != group[i] and rows[r][0].op != "placeholder":
                    other_layer[r] = True
        outputs = set(ins[len(rows) - 1]) if rows and rows[-1][0] is output else set()
        # the forward's rows the graph returns (the loss): kept, not re-run, whatever the partition saves
        self.returned = {r for r in outputs if r < n_fwd and rows[r][0].op != "placeholder"}
        read_back = [False] * len(rows)            # (for the seeded fault)
        for i in range(n_fwd, len(rows)):
            for r in ins[i]:
                read_back[r] = True
        # constants: forward ops that read nothing (inductor's decompositions make scalars such as
        # full([], -inf) and full([], 0.0), read by every layer's forward or backward).  One read by
        # the backward or by another layer's forward (other_layer) is kept to the step's end, as the
        # loss is: re-run, it would tie those layers to the group that made it; kept only to its last
        # reader, a re-run of a layer reading it could come after that (a few bytes either way)
        constants = {i for i in range(n_fwd) if not ins[i] and rows[i][0].op == "call_function" and rows[i][2]
                     and (read_back[i] or other_layer[i])}
        if constants and rows and rows[-1][0] is output:
            ins[len(rows) - 1] = sorted(set(ins[len(rows) - 1]) | constants)
        self.n = len(rows)
        self.nodes = (_lib.GraphNode * self.n)()
        self._inputs = []
        self.fx = [r[0] for r in rows]
        self.names = [r[0].name for r in rows]
        self.kind = []
        for i, (node, back, b) in enumerate(rows):
            g = self.nodes[i]
            g.bytes = b
            arr = (_lib.c_uint32 * max(1, len(ins[i])))(*ins[i])
            self._inputs.append(arr)
            g.inputs = arr
            g.n_inputs = len(ins[i])
            g.backward = 1 if back else 0
            g.group = group[i] if not back else 0
            kind = _lib.GRAPH_KEEP
            if not back and node.op == "call_function" and price_only:
                g.flops = _flops(node, flop_registry)
                kind = _lib.GRAPH_CANDIDATE     # any forward op, to price a partition made elsewhere
            elif not back and node.op == "call_function":
                g.flops = _flops(node, flop_registry)
                tag = node.meta.get("recompute")
                collective = isinstance(node.target, torch._ops.OpOverload) and \
                    node.target.namespace == "_c10d_functional"
                if tag == CheckpointPolicy.MUST_SAVE or op_types.is_random(node) or collective:
                    kind = _lib.GRAPH_KEEP
                elif tag in (CheckpointPolicy.MUST_RECOMPUTE, CheckpointPolicy.PREFER_RECOMPUTE):
                    kind = _lib.GRAPH_ALWAYS
                elif other_layer[i]:
                    kind = _lib.GRAPH_KEEP      # a layer's input: saved, as a checkpoint of each layer saves it
                elif i in outputs:
                    kind = _lib.GRAPH_KEEP      # what the forward returns (the loss): not recomputed
                elif i in constants:
                    kind = _lib.GRAPH_KEEP      # a constant several layers read (below)
                elif node in searched or (
                        getattr(node.target, "overloadpacket", None) in flop_registry or
                        getattr(node.target, "overloadpacket", None) is
                        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu):
                    kind = _lib.GRAPH_CANDIDATE
                else:
                    kind = _lib.GRAPH_ALWAYS
            g.candidate = kind
            self.kind.append(kind)
        if "half_bytes" in FAULTS:
            for i in range(n_fwd):
                if read_back[i]:
                    self.nodes[i].bytes //= 2
        self.n_candidates = sum(1 for k in self.kind if k == _lib.GRAPH_CANDIDATE)

    def search(self, budget):
        """remat_graph_search: (recompute flags, peak, flops, method)"""
        lib = _lib.load()
        rec = (_lib.c_uint8 * self.n)()
        peak, fl, how = _lib.c_uint64(), _lib.c_double(), _lib.c_int()
        lib.remat_graph_search(self.nodes, self.n, budget, rec, byref(peak), byref(fl), byref(how))
        return rec, peak.value, fl.value, _lib.GRAPH_METHODS[how.value]

    def peak(self, rec=None):
        """remat_graph_peak: (peak, flops)"""
        lib = _lib.load()
        peak, fl = _lib.c_uint64(), _lib.c_double()
        lib.remat_graph_peak(self.nodes, self.n, rec, byref(peak), byref(fl))
        return peak.value, fl.value

    def states(self, rec):
        """remat_graph_states: (each row's state, [GraphGroup])"""
        lib = _lib.load()
        state = (_lib.c_uint8 * self.n)()
        cap = len(self.layers)
        groups = (_lib.GraphGroup * cap)()
        ng = _lib.c_size_t()
        lib.remat_graph_states(self.nodes, self.n, rec, state, groups, cap, byref(ng))
        return list(state), [groups[i] for i in range(ng.value)]


def predict(joint_graph, node_info, saved_values):
    """remat's prediction of a partition of a joint graph that torch made (or anyone): the saved
    fx nodes given, every other forward tensor the backward needs re-run there.  Returns
    (peak bytes, re-run FLOPs), remat_graph_peak's (the same count as a plan's)."""
    g = Graph(joint_graph, node_info, [], price_only=True)
    kept = {g.row_of[n] for n in saved_values if n in g.row_of} | g.returned
    rec = (_lib.c_uint8 * g.n)(*[1 if g.kind[i] == _lib.GRAPH_CANDIDATE and i not in kept else 0
                                   for i in range(g.n)])
    return g.peak(rec)


def record_partitions():
    """a list that, from now on in this process, receives (joint graph, node info, saved nodes) for
    every partition torch's min-cut makes (partitioners.choose_saved_values_set wrapped): what any
    solver's plan finally is, for predict().  Installed once; later calls return the same list."""
    from torch._functorch import partitioners
    original = partitioners.choose_saved_values_set
    if hasattr(original, "remat_records"):
        return original.remat_records
    records = []

    def recorded(joint_graph, node_info, memory_budget=1):
        saved = original(joint_graph, node_info, memory_budget=memory_budget)
        records.append((joint_graph, node_info, list(saved)))
        return saved
    recorded.remat_records = records
    partitioners.choose_saved_values_set = recorded
    return records


class Layer:
    """one layer's share of a plan: .name (its module path), .saved / .recomputed (the names of the
    graph's nodes kept for the backward / re-run there), .saved_bytes, .recompute_flops"""

    def __init__(self, name, saved, recomputed, saved_bytes, recompute_flops):
        self.name, self.saved, self.recomputed = name, saved, recomputed
        self.saved_bytes, self.recompute_flops = saved_bytes, recompute_flops

    def __repr__(self):
        return "%s: saved %d (%s), re-run %d (%.3g FLOPs)" % (self.name, len(self.saved), fmt_bytes(self.saved_bytes),
                                                           len(self.recomputed), self.recompute_flops)


class CompiledPlan:
    """what remat chose for one compiled graph: .budget, .peak_bytes (the predicted peak),
    .recompute_flops, .method (remat_graph_search's: "exact, by layers" on a chain of layers), .layers ([Layer]),
    .saved / .recomputed (node names), .returned (the forward's outputs among .saved: kept, but not
    for the backward), .graph_nodes, .candidates, .searched (candidates searched)"""

    def __repr__(self):
        return ("CompiledPlan(budget %s: predicted peak %s, %.4g FLOPs re-run, %s search over %d candidates of %d "
                "nodes, %d layers)" % (fmt_bytes(self.budget), fmt_bytes(self.peak_bytes), self.recompute_flops,
                                       self.method, self.searched, self.graph_nodes, len(self.layers)))

    def explain(self):
        return "\n".join([repr(self)] + ["  " + repr(layer) for layer in self.layers])


def _choices_class():
    """inductor's fusion choices, less one: no horizontal fusion (of two ops neither reads the
    other's result) of ops from different layers.  Inductor fuses such ops when they read a
    buffer in common (RoPE's cos and sin tables, in every layer) and are within 64 nodes
    (InductorChoices.can_fuse_horizontal, Scheduler.are_long_distant_nodes); in a backward that
    pulls a layer's recomputation into the stretch of the layer after it, whose working set is
    then held with it: 11% over remat's count on tests/py_compile_budget.py's Llama
    (docs/pytorch.md).  Fusions within a layer, and vertical ones, are inductor's as before."""
    from torch._inductor.choices import InductorChoices

    def layers(snode):
        out = set()
        for n in snode.get_nodes():
            for o in getattr(getattr(n, "node", None), "origins", None) or ():
                path = _layer_of(o, backward=True)
                if path is not None:
                    out.add(path)
        return out

    class RematChoices(InductorChoices):
        @staticmethod
        def can_fuse_horizontal(scheduler, node1, node2, shared_data_score):
            a, b = layers(node1), layers(node2)
            if a and b and not (a & b) and "cross_layer_fusion" not in FAULTS:
                return False
            return InductorChoices.can_fuse_horizontal(scheduler, node1, node2, shared_data_score)

    return RematChoices


def _solver_class():
    from torch._inductor.custom_graph_pass import CustomKnapsackSolver

    class RematKnapsackSolver(CustomKnapsackSolver):
        """torch's knapsack seam, answered by remat (see the module's notes)"""

        def __init__(self, owner):
            self.owner = owner

        def __call__(self, memory, joint_graph, max_memory, node_info, all_recomputable_banned_nodes):
            return self.owner._solve(joint_graph, node_info, all_recomputable_banned_nodes)

        def uuid(self):
            return None                     # the answer depends on the byte budget: bypass AOTAutograd's cache

        def __deepcopy__(self, memo):       # torch copies its config; the solver is one object
            return self

    return RematKnapsackSolver


class compile_budget:
    """A context in which torch.compile's partitioner plans with remat to a peak of `budget` bytes
    (an int, or a size such as "6GiB") over the compiled forward and backward.  Compile (call the
    compiled function the first time) inside it.  .plans: a CompiledPlan per graph planned.  A
    budget below the least peak remat finds is refused, as a RematError naming that least peak,
    when the context exits (or from the compiling call, wrapped by torch's compiler).

    buffer_reuse: inductor's reuse of a freed buffer for a later one of its size
    (torch._inductor.config.allow_buffer_reuse), off inside the context unless True.  Inductor
    allows a reuse when it keeps its own estimate of the graph's peak, which counts the buffers
    the graph allocates but not its inputs; in a backward whose inputs are the saved activations
    a reuse can hold a freed buffer across the step's peak, at the backward's start (+4.7% over
    the plan at 16 layers, docs/pytorch.md).  aot_eager is not affected.  Inside the context the
    backward is compiled with the forward (torch._functorch.config.force_non_lazy_backward_lowering),
    so that the setting reaches it."""

    def __init__(self, budget, buffer_reuse=False):
        if not _torch_ok():
            raise RematError(1, "invalid argument", "compile_budget needs torch >= 2.5 (torch %s has no "
                             "CustomKnapsackSolver)" % torch.__version__)
        self.budget = parse_size(budget)
        self.buffer_reuse = bool(buffer_reuse)
        self.plans = []
        self.refused = None
        self._solver = _solver_class()(self)
        self._patch = None

    def __enter__(self):
        from torch._functorch import config as fconfig
        from torch._inductor import config as iconfig
        # the backward compiled with the forward (torch compiles it at the first backward otherwise,
        # maybe outside the context and without its inductor setting)
        self._patch = fconfig.patch(activation_memory_budget=_FRACTION, activation_memory_budget_solver=self._solver,
                                    force_non_lazy_backward_lowering=True)
        # inductor's compiled-graph cache keys neither the fusion rule nor the budget: off inside
        self._ipatch = iconfig.patch(allow_buffer_reuse=self.buffer_reuse and iconfig.allow_buffer_reuse,
                                     fx_graph_cache=False)
        self._patch.__enter__()
        self._ipatch.__enter__()
        from torch._inductor.virtualized import V
        self._choices = V.set_choices_handler(_choices_class()())
        self._choices.__enter__()
        return self

    def __exit__(self, et, ev, tb):
        self._choices.__exit__(et, ev, tb)
        self._ipatch.__exit__(et, ev, tb)
        self._patch.__exit__(et, ev, tb)
        self._patch = self._ipatch = self._choices = None
        if ev is not None and not isinstance(ev, RematError) and self.refused is not None:
            inner = ev
            while inner is not None and not isinstance(inner, RematError):
                inner = getattr(inner, "inner_exception", None) or inner.__cause__
            if isinstance(inner, RematError):
                raise inner from None
        return False

    def _solve(self, joint_graph, node_info, candidates):
        from torch.utils.checkpoint import CheckpointPolicy
        g = Graph(joint_graph, node_info, candidates)
        try:
            rec, peak, flops, method = g.search(self.budget)
        except RematError as e:
            self.refused = e
            raise
        state, groups = g.states(rec)
        plan = CompiledPlan()
        plan.budget, plan.peak_bytes, plan.recompute_flops, plan.method = self.budget, peak, flops, method
        plan.graph_nodes, plan.candidates, plan.searched = g.n, len(candidates), g.n_candidates
        plan.saved = [g.names[i] for i in range(g.n) if state[i] == _lib.GRAPH_SAVED and g.nodes[i].bytes]
        plan.recomputed = [g.names[i] for i in range(g.n) if state[i] == _lib.GRAPH_RERUN]
        plan.returned = [g.names[i] for i in sorted(g.returned)]
        plan.layers = []
        for gr in groups:
            rows = [i for i in range(g.n) if not g.nodes[i].backward and g.nodes[i].group == gr.group]
            plan.layers.append(Layer(g.layers[gr.group],
                                     [g.names[i] for i in rows if state[i] == _lib.GRAPH_SAVED and g.nodes[i].bytes],
                                     [g.names[i] for i in rows if state[i] == _lib.GRAPH_RERUN],
                                     gr.saved_bytes, gr.rerun_flops))
        plan.tensor_of = {n.name: g.names[r] for n, r in g.row_of.items() if n.op != "output"}
        # torch's checkpoint policy, so that the min-cut run next saves remat's set
        for i in range(g.n):
            node = g.fx[i]
            if node.op != "call_function" or node.meta.get("recompute") is not None:
                continue
            if not g.nodes[i].backward:
                if state[i] == _lib.GRAPH_SAVED:
                    node.meta["recompute"] = CheckpointPolicy.MUST_SAVE
                elif state[i] == _lib.GRAPH_RERUN:
                    node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
            elif not node_info.is_required_bw(node):
                # computed only for the backward, from forward tensors: keep it there (the min-cut could
                # otherwise save it in place of what it reads)
                node.meta["recompute"] = CheckpointPolicy.MUST_RECOMPUTE
        self.plans.append(plan)
        row = {id(n): i for i, n in enumerate(g.fx)}
        saved_idx, recomp_idx = [], []
        for k, node in enumerate(candidates):
            i = row.get(id(node))
            (recomp_idx if i is not None and rec[i] else saved_idx).append(k)
        return saved_idx, recomp_idx
