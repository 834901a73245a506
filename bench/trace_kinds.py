#!/usr/bin/python3
"""Where a traced step goes, by kind of instruction.

    bench/trace_kinds.py TRACE.json [...]

Reads `remat train --trace` files and prints, for each traced step, its
time and the sums of its instructions' durations (forward, recompute and
backward together) in five kinds:
  products   the linear layers and the head (qkv, the two residual
             projections res2/res3, fch, gate_up, logits)
  attention  the attention core (att: scores and softmax; atty: P V)
  pointwise  the norms, GELU/SwiGLU, RoPE, the embedding
  update     the update instruction (gradient norm and AdamW, the bf16 copy)
  other      frees and the walker's time between instructions (the step less
             the rest)
"""
import json
import sys

PRODUCTS = {"qkv", "res2", "res3", "fch", "gate_up", "logits"}
ATTENTION = {"att", "atty"}


def kinds(path):
    ev = json.load(open(path))["traceEvents"]
    steps = {}
    for e in ev:
        if e.get("ph") != "X": continue
        a = e.get("args", {})
        s = steps.setdefault(a.get("step"), {"step": 0.0, "products": 0.0, "attention": 0.0, "pointwise": 0.0,
                                            "update": 0.0, "flops_products": 0.0})
        ms = e["dur"] / 1e3
        cat = e.get("cat")
        if cat == "step": s["step"] = ms
        elif cat == "update": s["update"] += ms
        elif cat in ("forward", "backward", "recompute"):
            t = a.get("tensor", "")
            k = "products" if t in PRODUCTS else "attention" if t in ATTENTION else "pointwise"
            s[k] += ms
            if k == "products": s["flops_products"] += a.get("flops", 0)
    for s in steps.values():
        s["other"] = s["step"] - s["products"] - s["attention"] - s["pointwise"] - s["update"]
    return steps


def main():
    for path in sys.argv[1:]:
        for n, s in sorted(kinds(path).items()):
            g = s["flops_products"] / (s["products"] * 1e6) if s["products"] else 0
            print("%s step %s: %.1f ms | products %.1f (%.0f GFLOP/s) | attention %.1f | pointwise %.1f | update %.1f"
                  " | other %.1f" % (path, n, s["step"], s["products"], g, s["attention"], s["pointwise"],
                                     s["update"], s["other"]))


if __name__ == "__main__":
    main()
