"""What torch.compile's memory-budget partitioner hands a custom solver.

A probe for the issue "A budget that torch.compile keeps": it installs a
torch._inductor.custom_graph_pass.CustomKnapsackSolver that records its
arguments and answers as torch's greedy solver would, compiles a small
Llama-like stack of layers with backend aot_eager, and prints, per call,
how many candidate nodes the solver got, their bytes, whether each carries
the nn_module_stack that groups it by layer, and whether the joint graph is
reachable. It changes no plan of torch's. Needs torch >= 2.5.

    .venv/bin/python bench/compile_seam.py [layers]
"""
import sys

import torch
from torch import nn

if tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 5):
    print("SKIP: compile_seam needs torch >= 2.5 (has %s)" % torch.__version__)
    sys.exit(77)

from torch._functorch import config as fconfig
from torch._functorch.partitioners import _size_of
from torch._functorch._activation_checkpointing.knapsack import greedy_knapsack
from torch._inductor.custom_graph_pass import CustomKnapsackSolver


class Layer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a)
        return x + self.down(torch.nn.functional.silu(self.up(self.norm(x))))


class Probe(CustomKnapsackSolver):
    def __init__(self):
        self.calls = []

    def __call__(self, memory, joint_graph, max_memory, node_info, nodes):
        layers = {}
        for n in nodes:
            stack = n.meta.get("nn_module_stack") or {}
            paths = [v[0] for v in stack.values()]
            # the outermost entry is the compiled module; the next is the layer
            key = paths[min(1, len(paths) - 1)] if paths else "(none)"
            layers.setdefault(key, 0)
            layers[key] += 1
        self.calls.append({
            "graph_nodes": len(joint_graph.nodes),
            "candidates": len(nodes),
            "bytes": sum(_size_of(n) for n in nodes),
            "max_memory": max_memory,
            "normalised_sum": sum(memory),
            "with_stack": sum(1 for n in nodes if n.meta.get("nn_module_stack")),
            "fwd_inputs": len(node_info.inputs),
            "groups": layers,
        })
        runtimes = [1.0] * len(memory)
        _, saved, recomputed = greedy_knapsack(memory, runtimes, max_memory)
        return saved, recomputed

    def uuid(self):
        return None


def main():
    n_layers = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    torch.manual_seed(0)
    model = nn.Sequential(*[Layer(64) for _ in range(n_layers)])
    x = torch.randn(2, 32, 64, requires_grad=True)
    probe = Probe()
    with fconfig.patch(activation_memory_budget=0.1,
                       activation_memory_budget_solver=probe):
        torch.compile(model, backend="aot_eager")(x).sum().backward()
    for c in probe.calls:
        print("joint graph: %(graph_nodes)d nodes; candidates: %(candidates)d "
              "(%(bytes)d bytes, %(with_stack)d with nn_module_stack); "
              "forward inputs: %(fwd_inputs)d; max_memory %(max_memory).3f of "
              "normalised sum %(normalised_sum).3f" % c)
        for k, v in c["groups"].items():
            print("  layer %-30s %d candidates" % (k, v))
    if not probe.calls:
        print("the solver was not called (the min-cut alone met the budget)")


if __name__ == "__main__":
    main()
