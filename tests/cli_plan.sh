#!/bin/sh
# End-to-end tests of `remat plan`, `remat profile` and `remat train --budget`:
# the JSON shape, replaying the optimal plan (predicted peak = measured peak),
# budgets with units, the too-small-budget error, malformed budgets (one
# stderr line, non-zero exit, nothing on stdout), the Pareto front, maximize,
# and profiles in the cache (used when valid, ignored when corrupt).
set -u
. "$(dirname "$0")/lib.sh"
export REMAT_CACHE="$T/cache"
small="--layers 3 --dim 48 --heads 4 --seq 32 --batch 4 --threads 1"

# the JSON shape, and the optimum fits and is no slower than any fitting row
$R plan $small --budget 6MiB --json > "$T/p.json" 2> "$T/p.err" || bad "plan --json failed: $(cat "$T/p.err")"
/usr/bin/python3 - "$T/p.json" <<'PY' && ok || bad "plan JSON shape"
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"budget_bytes", "rows", "optimal"}, d.keys()
assert d["budget_bytes"] == 6 * 1024 * 1024
keys = {"policy", "peak_bytes", "stored_bytes", "workset_bytes", "overhead_pct", "step_ms_pred", "fits"}
names = [r["policy"] for r in d["rows"]]
for need in ["none", "full", "every:2", "sqrt", "selective", "pointwise", "every:2,selective", "revolve:3", "save:qkv+fch"]:
    assert need in names, (need, names)
assert any(n.startswith("first:") for n in names)
for r in d["rows"]:
    assert set(r) == keys, r.keys()
    assert isinstance(r["fits"], bool) and r["peak_bytes"] == r["stored_bytes"] + r["workset_bytes"]
o = d["optimal"]
assert set(o) == {"policy", "peak_bytes", "step_ms_pred"} and o["policy"].startswith("plan:")
fit = [r for r in d["rows"] if r["fits"]]
assert fit and all(o["step_ms_pred"] <= r["step_ms_pred"] * (1 + 1e-9) for r in fit)
open(sys.argv[1] + ".policy", "w").write(o["policy"])
print(o["peak_bytes"], file=open(sys.argv[1] + ".peak", "w"))
PY

# the optimal plan replays with remat train; measured peak == predicted peak
pol=$(cat "$T/p.json.policy")
$R train $small --recompute "$pol" --steps 2 --json --eval-every 0 > "$T/t.jsonl" 2> "$T/t.err" || bad "replay failed: $(cat "$T/t.err")"
/usr/bin/python3 - "$T/t.jsonl" "$(cat "$T/p.json.peak")" <<'PY' && ok || bad "replayed plan: measured peak = predicted"
import json, sys
s = json.loads(open(sys.argv[1]).readlines()[-1])
assert s["act_peak_bytes"] == int(sys.argv[2]) == s["act_peak_pred_bytes"], (s["act_peak_bytes"], sys.argv[2])
assert s["step_peak_bytes"] <= 6 * 1024 * 1024
PY

# remat train --budget picks a plan that fits (total memory, measured)
$R train $small --budget 6MiB --steps 2 --json --eval-every 0 > "$T/b.jsonl" 2> "$T/b.err" || bad "train --budget failed: $(cat "$T/b.err")"
/usr/bin/python3 - "$T/b.jsonl" <<'PY' && ok || bad "train --budget fits"
import json, sys
s = json.loads(open(sys.argv[1]).readlines()[-1])
assert s["policy"].startswith("plan:") and s["step_peak_bytes"] <= 6 * 1024 * 1024, s
PY
grep -q "plan:" "$T/b.err" && ok || bad "train --budget --json names its plan on stderr"
$R train $small --budget 6MiB --steps 1 --eval-every 0 --sample 0 > "$T/b.txt" 2>&1 && grep -q "^budget 6.00 MiB: plan plan:" "$T/b.txt" && ok || bad "train --budget prints the plan"

# units: the same budget written three ways
for b in 6MiB 6291456B 6291456 0.005859375GiB; do
    $R plan $small --budget $b --json 2>/dev/null | grep -q '"budget_bytes": 6291456,' || bad "budget $b"
done; ok
$R plan $small --budget 1GB --json | grep -q '"budget_bytes": 1000000000,' && ok || bad "1GB is 10^9 bytes"
$R plan $small --budget 2KiB --budget-activations 2KiB > /dev/null 2>&1 && bad "two budgets accepted" || ok

# too small a budget: one line naming the minimum and what dominates, exit 1
expect_err --rc 1 "small budget" $R plan $small --budget 100KiB
grep -q "minimum activations" "$T/stderr" && grep -q "is below the minimum" "$T/stderr" \
    && grep -q "parameters+optimizer" "$T/stderr" && ok || bad "small budget: the minimum: $(cat "$T/stderr")"
$R plan $small --budget 100KiB --json > "$T/s.json" 2>/dev/null
/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['optimal'] is None" "$T/s.json" && ok || bad "JSON optimal null"
expect_err "train --budget too small" $R train $small --budget 100KiB --steps 1
grep -q "is below the minimum" "$T/stderr" && [ ! -s "$T/stdout" ] && ok \
    || bad "train --budget too small: the minimum: $(cat "$T/stderr" "$T/stdout")"
# ... and for one rank stepping micro-batches, train refuses a budget with plan's words: below what a
# rank holds besides activations, then too little left for them
dp1="--layers 1 --dim 64 --heads 2 --seq 16 --micro-batch 2 --batch 4"
for b in 1MiB 1.33MiB; do
    $R plan $dp1 --budget $b > /dev/null 2> "$T/dp.err"
    expect_err --rc 1 "train --micro-batch 2 --budget $b" $R train $dp1 --budget $b --steps 1
    [ ! -s "$T/stdout" ] && cmp -s "$T/dp.err" "$T/stderr" && ok \
        || bad "train --micro-batch 2 --budget $b: $(cat "$T/stderr") (plan: $(cat "$T/dp.err"))"
done
grep -q "activation budget 42.3 KiB is below" "$T/stderr" && ok || bad "the activations' share: $(cat "$T/stderr")"
$R plan $small --budget-activations 1KiB 2> "$T/a.err" > /dev/null; rc=$?
[ $rc = 1 ] && grep -q "minimum activations" "$T/a.err" && ok || bad "activation budget too small"

# malformed budgets: exit 2, one stderr line, nothing on stdout
for b in 2XB -1GiB GiB 1.5.5MiB "" "12 MiB" 0 nan 1e999GiB 0x10MiB; do
    for cmd in plan train; do
        [ $cmd = plan ] && set -- || set -- --steps 1
        expect_err --rc 2 "$cmd --budget '$b'" $R $cmd $small --budget "$b" "$@"
        [ ! -s "$T/stdout" ] && ok || bad "$cmd --budget '$b': output on stdout: $(head -3 "$T/stdout")"
    done
done

# the Pareto front: sorted by peak, time strictly falling; CSV and JSON agree
# (the default FLOP model is calibrated by a GEMM probe at each run, whose
# times differ from run to run: the unprobed model keeps the two the same)
$R plan $small --pareto --csv --no-profile > "$T/f.csv" || bad "pareto csv"
$R plan $small --pareto --json --no-profile > "$T/f.json" || bad "pareto json"
/usr/bin/python3 - "$T/f.csv" "$T/f.json" <<'PY' && ok || bad "pareto front"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
js = json.load(open(sys.argv[2]))["rows"]
assert len(rows) == len(js) > 5
pk = [int(r["peak_bytes"]) for r in rows]; ms = [float(r["step_ms_pred"]) for r in rows]
assert pk == sorted(pk) and len(set(pk)) == len(pk)
assert all(a > b for a, b in zip(ms, ms[1:]))
assert [r["policy"] for r in rows] == [r["policy"] for r in js]
PY
$R plan $small --pareto | grep -q "Pareto front" && ok || bad "pareto table"

# maximize: the optimum reaches at least as far as every named policy
$R plan $small --maximize seq --budget 12MiB --json > "$T/x.json" || bad "maximize"
/usr/bin/python3 - "$T/x.json" <<'PY' && ok || bad "maximize JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dim"] == "seq" and d["optimal"]["max"] >= max(r["max"] for r in d["rows"])
assert d["optimal"]["total_bytes"] <= 12 * 1024 * 1024
PY
$R plan $small --maximize batch --budget 12MiB | grep -q "^optimal" && ok || bad "maximize batch table"
$R plan $small --maximize depth --budget 1GiB > /dev/null 2>&1; [ $? = 2 ] && ok || bad "maximize depth"
$R plan $small --maximize seq > /dev/null 2>&1; [ $? = 2 ] && ok || bad "maximize without a budget"

# profiles: measured, cached, used; a corrupt cache is ignored with a warning
$R profile $small --reps 1 > "$T/prof.txt" 2>&1 || bad "profile: $(cat "$T/prof.txt")"
n=$(ls "$REMAT_CACHE" | wc -l); [ "$n" = 1 ] && ok || bad "one cached profile, found $n"
$R plan $small --budget 6MiB | grep -q "cost model: measured on" && ok || bad "plan uses the cached profile"
$R plan $small --budget 6MiB --no-profile | grep -q "cost model: FLOP" && ok || bad "--no-profile"
f=$(ls "$REMAT_CACHE"/*)
$R plan $small --budget 6MiB --profile "$f" | grep -q "measured on" && ok || bad "--profile FILE"
expect_err --rc 2 "profile for another config" $R plan --layers 2 --budget 6MiB --profile "$f"
sed -i 's/^fwd qkv .*/fwd qkv banana/' "$f"
$R plan $small --budget 6MiB > "$T/pc.out" 2> "$T/pc.err"; rc=$?
[ $rc = 0 ] && grep -q "ignoring the cached profile" "$T/pc.err" && grep -q "cost model: FLOP" "$T/pc.out" && ok || bad "corrupt cache: rc=$rc"
$R plan $small --budget 6MiB --profile "$f" > /dev/null 2> "$T/pf.err"; rc=$?
[ $rc = 2 ] && grep -q "line" "$T/pf.err" && ok || bad "corrupt --profile: rc=$rc $(cat "$T/pf.err")"
$R profile $small --reps 0 > /dev/null 2>&1; [ $? = 2 ] && ok || bad "profile --reps 0"
$R plan --bogus > /dev/null 2>&1; [ $? = 2 ] && ok || bad "unknown flag"

finish cli_plan
