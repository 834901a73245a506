#!/bin/sh
# remat plan --table FILE.json: a chain of blocks a file describes (remat.h,
# "tables read from files"), planned on kept bytes.  The seed corpus of
# fuzz_table holds the files: a toy chain (selective too) and two that
# remat_torch.measure wrote.  Checks: the rows' kept bytes are the file's
# numbers, the optimal plan keeps at most the budget and is no slower than
# the named policies that keep no more, --budget counts the file's
# parameters, gradients and optimizer state, --pareto and --explain, and
# each bad file, bad budget and bad flag refused in one line (exit status 2
# for what was given, 1 when nothing fits).
set -u
. "$(dirname "$0")/lib.sh"
C=fuzz/corpus/table

$R plan --table $C/toy.json --budget-activations 600KiB > "$T/toy.txt" && ok || bad "toy table: $(cat "$T/toy.txt")"
grep -q "^table: toy ($C/toy.json): 6 blocks, each saving 208.0 KiB, output 16.0 KiB" "$T/toy.txt" && ok ||
    bad "the header: $(head -n 1 "$T/toy.txt")"
grep -q "^optimal plan: plan:" "$T/toy.txt" && grep -q "^  layer" "$T/toy.txt" && ok || bad "no optimal plan explained"
for f in toy toy-selective remat-torch-mlp remat-torch-gpt2; do
    $R plan --table $C/$f.json --budget-activations 400KiB --json > "$T/$f.json" 2> "$T/$f.err"
    /usr/bin/python3 - "$C/$f.json" "$T/$f.json" <<'PY' && ok || bad "$f: $(cat "$T/$f.err")"
import json, sys
t, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
x, L = t["blocks"][0]["output_bytes"], len(t["blocks"])
e = sum(s["bytes"] for s in t["blocks"][0]["saved"])
outside = t["input"].get("saved_bytes", 0) + t["head"]["saved_bytes"] - (0 if t["input"].get("kept", True) else x) \
    - (0 if t["head"].get("keeps_input", True) else x)
rows = {r["policy"]: r for r in d["rows"]}
assert rows["none"]["kept_bytes"] == (L + 1) * x + L * e + outside, (rows["none"], (L + 1) * x + L * e + outside)
ck = t.get("checkpoint", {"context_bytes": 0, "call_bytes": 0})     # what each checkpoint call holds, as torch's
assert rows["full"]["kept_bytes"] == (L + 1) * x + outside + ck["context_bytes"] + L * ck["call_bytes"], rows["full"]
for r in d["rows"]:
    assert r["kept_bytes"] == r["stored_bytes"] + d["outside_bytes"] + r["checkpoint_bytes"], r
opt = d["optimal"]
if opt is not None:
    assert opt["kept_bytes"] <= 400 * 1024
    for r in d["rows"]:
        if r["peak_bytes"] <= 400 * 1024 + d["reserve_bytes"]:
            assert opt["step_ms_pred"] <= r["step_ms_pred"] * (1 + 1e-12), (opt, r)
PY
done
# --budget: kept bytes + parameters, gradients and optimizer state (4 MB in toy.json)
$R plan --table $C/toy.json --budget 4600KiB --json > "$T/total.json" && /usr/bin/python3 - "$T/total.json" <<'PY' && ok || bad "--budget"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["static_bytes"] == 4000000 and not d["budget_total"] is False
assert d["optimal"]["kept_bytes"] + d["static_bytes"] <= 4600 * 1024
PY
$R plan --table $C/toy.json --pareto > "$T/p.txt" && grep -q "^Pareto front: [0-9]* plans" "$T/p.txt" && ok || bad "--pareto"
$R plan --table $C/toy.json --recompute every:3 --explain | grep -q "^every:3:" && ok || bad "--explain"
$R plan --table $C/toy-selective.json --recompute plan:A1.A2.A3.A0.A1.A3 --explain > "$T/sel.txt" &&
    grep -q "keep all but cheap; recompute cheap in the backward" "$T/sel.txt" &&
    grep -q "keep all but expensive; recompute expensive in the backward" "$T/sel.txt" &&
    ok || bad "selective keep-sets: $(cat "$T/sel.txt")"

# version 2: a uniform file (toy.json as version 2) plans exactly as version 1, in every row, the optimum, the
# front and the explanation
for args in "--budget-activations 400KiB --json" "--budget 4600KiB --json" "--pareto --json" "--budget-activations 300KiB --explain"; do
    $R plan --table $C/toy.json $args > "$T/v1.out" 2>&1; r1=$?
    $R plan --table $C/v2-uniform-toy.json $args > "$T/v2.out" 2>&1; r2=$?
    sed -i "s|$C/v2-uniform-toy.json|$C/toy.json|g" "$T/v2.out"
    [ $r1 = 0 ] && [ $r2 = 0 ] && cmp -s "$T/v1.out" "$T/v2.out" && ok || bad "uniform version 2, $args: $(diff "$T/v1.out" "$T/v2.out" | head -n 5)"
done
# blocks of their own: each row's kept bytes counted from each block's numbers, the optimum within the budget and no
# slower than the named policies that fit, the kinds of block explained
for f in v2-alternating v2-stages; do
    $R plan --table $C/$f.json --budget-activations 500KiB --json > "$T/$f.json" 2> "$T/$f.err"
    /usr/bin/python3 - "$C/$f.json" "$T/$f.json" <<'PY' && ok || bad "$f: $(cat "$T/$f.err")"
import json, sys
t, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
b = t["blocks"]
outside = t["input"].get("saved_bytes", 0) + t["head"]["saved_bytes"] - (0 if t["input"].get("kept", True) else t["input"]["bytes"]) \
    - (0 if t["head"].get("keeps_input", True) else b[-1]["output_bytes"])
bounds = t["input"]["bytes"] + sum(x["output_bytes"] for x in b)
rows = {r["policy"]: r for r in d["rows"]}
assert rows["none"]["kept_bytes"] == bounds + sum(s["bytes"] for x in b for s in x["saved"]) + outside, rows["none"]
assert rows["full"]["kept_bytes"] == bounds + outside, rows["full"]
opt = d["optimal"]
assert opt["kept_bytes"] <= 500 * 1024, opt
for r in d["rows"]:
    if r["peak_bytes"] <= 500 * 1024 + d["reserve_bytes"]:
        assert opt["step_ms_pred"] <= r["step_ms_pred"] * (1 + 1e-12), (opt, r)
PY
    $R plan --table $C/$f.json --recompute full --explain > "$T/$f.txt" && grep -q "^  blocks of [24] kinds:" "$T/$f.txt" &&
        grep -q "^    blocks\{0,1\} 2\(, 5\)\{0,1\}: saving" "$T/$f.txt" && ok || bad "$f: the kinds of block: $(cat "$T/$f.txt")"
done
# two chains under one budget (an encoder and a decoder that reads its result): kept bytes counted from the file, the
# junction between them kept whole by every plan, named or planned; a plan that checkpoints it is refused
$R plan --table $C/v2-t5.json --budget-activations 200KiB --json > "$T/t5.json" 2> "$T/t5.err"
/usr/bin/python3 - "$C/v2-t5.json" "$T/t5.json" <<'PY' && ok || bad "v2-t5: $(cat "$T/t5.err")"
import json, sys
t, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
none = full = 0
for k, c in enumerate(t["chains"]):
    b, i, h = c["blocks"], c["input"], c["head"]
    base = i["bytes"] * i.get("kept", True) + i.get("saved_bytes", 0) + h.get("saved_bytes", 0) \
        - (0 if h.get("keeps_input", True) else b[-1]["output_bytes"]) + sum(x["output_bytes"] for x in b)
    if k + 1 < len(t["chains"]):
        base += h.get("output_bytes", b[-1]["output_bytes"])
    none += base + sum(s["bytes"] for x in b for s in x["saved"])
    full += base
rows = {r["policy"]: r for r in d["rows"]}
assert rows["none"]["kept_bytes"] == none, (rows["none"], none)
ck = t["checkpoint"]          # every block but the junction's checkpointed: six calls
assert rows["full"]["kept_bytes"] == full + ck["context_bytes"] + 6 * ck["call_bytes"], (rows["full"], full)
assert d["blocks"] == 7 and d["optimal"]["kept_bytes"] <= 200 * 1024, d["optimal"]
PY
$R plan --table $C/v2-t5.json --recompute full --explain > "$T/t5.txt" &&
    grep -q "^  chains: encoder blocks 0-2, block 3 joins them (encoder's head and result, decoder's input: kept whole), decoder blocks 4-6$" "$T/t5.txt" &&
    grep -q "^  layer  3: keep all" "$T/t5.txt" && ok || bad "v2-t5 explained: $(cat "$T/t5.txt")"
expect_err --rc 2 "a plan that checkpoints a junction" $R plan --table $C/v2-t5.json --recompute plan:A0.A0.A0.A0.A0.A0.A0
expect_err --rc 2 "a segment over a junction" $R plan --table $C/v2-t5.json --recompute plan:A0.A0.C2.A1.A1.A0.A1.A0

# refusals, one line each
for f in $C/bad-*.json; do expect_err --rc 2 "$(basename "$f")" $R plan --table "$f" --budget-activations 1MiB; done
expect_err --rc 1 "budget below the minimum" $R plan --table $C/toy.json --budget-activations 20KiB
grep -q "below the minimum" "$T/stderr" && ok || bad "the minimum is not stated: $(cat "$T/stderr")"
expect_err --rc 2 "missing file" $R plan --table "$T/none.json"
expect_err --rc 2 "a config flag" $R plan --table $C/toy.json --layers 4
expect_err --rc 2 "no file" $R plan --table
expect_err --rc 2 "both budgets" $R plan --table $C/toy.json --budget 1GiB --budget-activations 1MiB
expect_err --rc 2 "--pareto with a budget" $R plan --table $C/toy.json --pareto --budget 1GiB
expect_err --rc 2 "a policy the table has no tensor for" $R plan --table $C/toy.json --recompute save:qkv
expect_err --rc 2 "a keep mask of no tensor" $R plan --table $C/toy.json --recompute plan:A1.A1.A1.A1.A1.A4
finish cli_table
