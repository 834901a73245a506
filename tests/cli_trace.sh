#!/bin/sh
# End-to-end tests of traces and of the cost model calibrated by a run:
#   - `remat train --trace` writes Chrome trace-event JSON: one complete
#     event per executed instruction of the traced steps, in schedule order,
#     nested in its step, with the schedule's kind, layer, tensor and FLOPs;
#     counter tracks whose values equal the simulator's live and peak bytes
#     (`remat schedule --json`) exactly;
#   - --trace-steps limits the steps; bad values are refused with one line;
#   - `remat bench --trace DIR` writes one trace per policy;
#   - the run's times land in the cost model's cache (profile "run" lines),
#     round-trip through it, and `remat plan --calibrate-from` reads a trace
#     file; corrupt or foreign traces and cache entries are refused with one
#     line and never trusted;
#   - a trace of the embedded default loads in headless Chromium (parsed and
#     drawn by docs/trace-view.html), when chromium is installed.
# REMAT_TEST_REQUIRED: CI installs chromium and python3; the trace must load there
set -u
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
export REMAT_CACHE="$T/cache"
shape="--layers 2 --dim 32 --heads 2 --seq 16 --batch 2 --vocab 64"
small="$shape --threads 1"

if [ ! -x $PY ]; then skip "python3 not installed: traces not checked"; finish cli_trace; fi

# the schema: every instruction of steps 2..3, in order, against the simulator
check_trace() {   # check_trace TRACE SCHEDULE_JSON FIRST LAST
    $PY - "$@" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
first, last = int(sys.argv[3]), int(sys.argv[4])
assert set(t) >= {"traceEvents", "displayTimeUnit", "otherData"}, t.keys()
od = t["otherData"]
assert od["format"] == "remat-trace" and od["version"] == 1 and od["threads"] >= 1 and od["cpu"], od
ev = t["traceEvents"]
for e in ev:
    assert e["ph"] in ("M", "X", "C") and isinstance(e["name"], str) and e["pid"] == 1, e
    if e["ph"] in ("X", "C"):
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
    if e["ph"] == "X":
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0 and e["tid"] == 1, e
steps = [e for e in ev if e["ph"] == "X" and e["cat"] == "step"]
assert [e["args"]["step"] for e in steps] == list(range(first, last + 1)), [e["args"]["step"] for e in steps]
ins = s["instructions"]
cnt = {}
for e in ev:
    if e["ph"] == "C":
        cnt.setdefault(e["name"], []).append(e)
assert set(cnt) == {"activation bytes", "step bytes"}, cnt.keys()
act = cnt["activation bytes"]
k = 0
for st in steps:
    xs = [e for e in ev if e["ph"] == "X" and e["cat"] != "step" and e["args"]["step"] == st["args"]["step"]]
    assert len(xs) == len(ins) == st["args"]["instructions"], (len(xs), len(ins))
    assert st["args"]["ok"] is True and st["args"]["policy"] == s["policy"]
    for e, i in zip(xs, ins):
        a = e["args"]
        assert e["cat"] == a["op"] == i["op"] and a["i"] == i["i"] and a["layer"] == i["layer"], (a, i)
        assert a["tensor"] == i["tensor"] and e["name"] == (a["op"] + " " + a["tensor"]).strip(), (e["name"], a)
        assert a["flops"] == i["flops"], (a, i)
        assert a["live_bytes"] == i["live_bytes"] and a["peak_bytes"] == i["peak_bytes"], (a, i)
        assert a["step_peak_bytes"] >= a["step_bytes"] and a["step_peak_bytes"] - a["step_bytes"] >= a["peak_bytes"] - a["live_bytes"]
        # nested in its step
        assert st["ts"] <= e["ts"] and e["ts"] + e["dur"] <= st["ts"] + st["dur"] + 1e-3, (st, e)
        # the counter: the peak while it runs, then what stays live
        c0, c1 = act[k], act[k + 1]
        k += 2
        assert c0["args"]["bytes"] == i["peak_bytes"] and c1["args"]["bytes"] == i["live_bytes"], (c0, c1, i)
        assert abs(c0["ts"] - e["ts"]) < 1e-6 and abs(c1["ts"] - (e["ts"] + e["dur"])) < 2e-3, (c0, c1, e)
assert k == len(act), (k, len(act))
PY
}

$R train $small --steps 4 --recompute every:2,selective --dropout 0.1 --trace "$T/t.json" --trace-steps 2:3 \
    --eval-every 0 --sample 0 --quiet > "$T/t.out" 2> "$T/t.err" || bad "train --trace failed: $(cat "$T/t.err")"
$R schedule $shape --recompute every:2,selective --dropout 0.1 --json > "$T/s.json" 2>/dev/null || bad "schedule --json"
check_trace "$T/t.json" "$T/s.json" 2 3 && ok || bad "trace schema and counters (every:2,selective, dropout)"
grep -q "^trace: $T/t.json" "$T/t.out" && ok || bad "train names the trace"
ls "$T"/t.json.tmp.* > /dev/null 2>&1 && bad "a temporary trace file is left" || ok

# the embedded default (all steps of a short run), and one step only
$R train --steps 2 --trace "$T/d.json" --eval-every 0 --sample 0 --quiet > /dev/null 2> "$T/d.err" || bad "default --trace: $(cat "$T/d.err")"
$R schedule --json > "$T/ds.json" 2>/dev/null
check_trace "$T/d.json" "$T/ds.json" 1 2 && ok || bad "trace of the embedded default"
$R train $small --steps 3 --trace "$T/one.json" --trace-steps 3 --eval-every 0 --sample 0 --quiet > /dev/null 2>&1 || bad "--trace-steps 3"
$R schedule $shape --json > "$T/s1.json" 2>/dev/null
check_trace "$T/one.json" "$T/s1.json" 3 3 && ok || bad "--trace-steps 3 (one step)"
$R train $small --steps 3 --trace "$T/tail.json" --trace-steps 2: --eval-every 0 --sample 0 --quiet > /dev/null 2>&1 || bad "--trace-steps 2:"
check_trace "$T/tail.json" "$T/s1.json" 2 3 && ok || bad "--trace-steps 2: (to the end)"

# bad --trace-steps: one line, exit 2, no trace written
for v in 0 0:2 3:2 a 2:x :3 1:2:3 -1 "" " 1" 1: 99999999999999999999999 5:6 2:3x; do
    case "$v" in 1:) continue;; esac
    expect_err --rc 2 "--trace-steps '$v'" $R train $small --steps 3 --trace "$T/bad.json" --trace-steps "$v" --sample 0
    grep -q '^remat: error: .*trace-steps' "$T/stderr" && [ ! -e "$T/bad.json" ] && ok \
        || bad "--trace-steps '$v': $(cat "$T/stderr"), trace written: $(ls "$T/bad.json" 2>&1)"
done
expect_err --rc 2 "--trace-steps without --trace" $R train $small --steps 2 --trace-steps 1:2 --sample 0
expect_err --rc 1 "--trace into a missing directory" $R train $small --steps 2 --trace "$T/nodir/x/t.json" --sample 0
[ ! -s "$T/stdout" ] && ok || bad "--trace into a missing directory: refused only after running: $(head -3 "$T/stdout")"

# bench --trace DIR: one file per policy, each a trace of the timed rounds
$R bench $small --policies 'none;full' --steps 2 --warmup 1 --no-rss --sgemm-n 64 --trace "$T/bt" --json > /dev/null 2> "$T/b.err" \
    || bad "bench --trace failed: $(cat "$T/b.err")"
[ -f "$T/bt/01-none.json" ] && [ -f "$T/bt/02-full.json" ] && ok || bad "bench trace files: $(ls "$T/bt" 2>&1)"
touch "$T/afile"
expect_err --rc 1 "bench --trace under a file" $R bench $small --policies none --steps 1 --warmup 0 --no-rss --sgemm-n 64 \
    --trace "$T/afile/bt"
[ ! -s "$T/stdout" ] && ok || bad "bench --trace under a file: refused only after running: $(head -3 "$T/stdout")"
$R schedule $shape --recompute full --json > "$T/sf.json" 2>/dev/null
check_trace "$T/bt/02-full.json" "$T/sf.json" 1 2 && ok || bad "bench trace of full"

# calibration: the run's times in the cache, round-tripped
rm -rf "$REMAT_CACHE"
$R train $small --steps 5 --recompute full --eval-every 0 --sample 0 --json > "$T/c.jsonl" 2> "$T/c.err" || bad "train (calibrating) failed"
f=$(ls "$REMAT_CACHE"/profile-*.txt 2>/dev/null | head -1)
[ -n "$f" ] && grep -q '^remat-profile 3$' "$f" && grep -q '^run recompute qkv ' "$f" && grep -q '^run backward qkv ' "$f" \
    && grep -q '^run update - ' "$f" && grep -q '^run overhead - ' "$f" && ok || bad "cache holds the run's times: $(cat "$f" 2>&1 | head -3)"
$PY - "$T/c.jsonl" "$f" <<'PY' && ok || bad "calibrated_ops in the summary = run lines in the cache"
import json, sys
s = json.loads(open(sys.argv[1]).readlines()[-1])
runs = [l for l in open(sys.argv[2]) if l.startswith("run ") and not l.startswith("run overhead")]
assert s["calibrated_ops"] == len(runs) > 10, (s["calibrated_ops"], len(runs))
# 4 timed steps (2..5): every block op twice a step (2 layers), forward and recompute under full
for l in runs:
    k, t, ms, n = l.split()[1:]
    assert float(ms) >= 0 and int(n) >= 4, l
PY
$R train $small --steps 3 --no-calibrate --eval-every 0 --sample 0 --quiet > /dev/null 2>&1
cmp -s "$f" "$(ls "$REMAT_CACHE"/profile-*.txt | head -1)" && ok || bad "--no-calibrate changed the cache"
$R plan $small --recompute none --recompute full --json > "$T/pc.json" 2> "$T/pc.err" || bad "plan with the calibrated cache"
[ -s "$T/pc.err" ] && bad "plan warned about the calibrated cache: $(cat "$T/pc.err")" || ok

# a corrupt or foreign cache entry: one warning line, ignored, plan still runs
cp "$f" "$T/good.txt"
sed 's/^run backward qkv \([^ ]*\) /run backward qkv -1 /' "$T/good.txt" > "$f"
$R plan $small --recompute none --json > /dev/null 2> "$T/w.err" || bad "plan failed on a corrupt cache entry"
[ "$(wc -l < "$T/w.err")" -eq 1 ] && grep -q "warning: ignoring the cached profile: .*bad time '-1' for run backward qkv" "$T/w.err" \
    && ok || bad "corrupt run line: $(cat "$T/w.err")"
sed 's/^cpu .*/cpu Some Other CPU/' "$T/good.txt" > "$f"
$R plan $small --recompute none --json > /dev/null 2> "$T/w.err" || bad "plan failed on a foreign cache entry"
[ "$(wc -l < "$T/w.err")" -eq 1 ] && grep -q "warning: ignoring the cached profile: .*Some Other CPU" "$T/w.err" && ok || bad "foreign cache entry: $(cat "$T/w.err")"
$R bench $small --policies none --steps 1 --warmup 0 --no-rss --sgemm-n 64 --json > /dev/null 2> "$T/w.err" \
    || bad "bench failed on a foreign cache entry"
[ "$(wc -l < "$T/w.err")" -eq 1 ] && grep -q "warning: ignoring the cached profile: .*Some Other CPU" "$T/w.err" && ok \
    || bad "bench over a foreign cache entry: $(cat "$T/w.err")"
sed 's/^run update - .*/run update - 1 1\nrun update - 2 1/' "$T/good.txt" > "$f"
$R plan $small --recompute none --json > /dev/null 2> "$T/w.err"
grep -q "repeated 'run update -'" "$T/w.err" && ok || bad "repeated run line: $(cat "$T/w.err")"
# a train over a corrupt entry replaces it (after its one warning line)
$R train $small --steps 3 --eval-every 0 --sample 0 --quiet > /dev/null 2> "$T/w.err" || bad "train over a corrupt cache"
[ "$(wc -l < "$T/w.err")" -eq 1 ] && $R plan $small --recompute none --json > /dev/null 2> "$T/w2.err" && [ ! -s "$T/w2.err" ] \
    && ok || bad "train did not replace the corrupt entry: $(cat "$T/w.err" "$T/w2.err")"

# plan --calibrate-from TRACE: the trace's times replace the cache's
rm -rf "$REMAT_CACHE"
$R train $small --steps 3 --no-calibrate --trace "$T/ct.json" --eval-every 0 --sample 0 --quiet > /dev/null 2>&1
$R plan $small --calibrate-from "$T/ct.json" --recompute none --json > "$T/cf.json" 2> "$T/cf.err" || bad "--calibrate-from failed: $(cat "$T/cf.err")"
grep -q "run times of $T/ct.json are kept in" "$T/cf.err" && ls "$REMAT_CACHE"/profile-*.txt > /dev/null 2>&1 \
    && grep -q '^run forward qkv ' "$REMAT_CACHE"/profile-*.txt && ok || bad "--calibrate-from stores the times"
# bad traces: one line, exit 2 (a file a flag names that cannot be used:
# README, "Exit status"), the cache untouched
cp "$REMAT_CACHE"/profile-*.txt "$T/cache-before.txt"
calib_bad() {   # calib_bad WHY FILE [CONFIG FLAGS]
    why=$1; file=$2; shift 2
    expect_err --rc 2 "$why" $R plan "${@:-}" --calibrate-from "$file" --recompute none --json
    [ ! -s "$T/stdout" ] && cmp -s "$T/cache-before.txt" "$REMAT_CACHE"/profile-*.txt && ok \
        || bad "$why: output on stdout, or the cache changed: $(head -3 "$T/stdout")"
}
calib_bad "missing trace" "$T/none.json" $small
printf '{"traceEvents": [' > "$T/trunc.json"; calib_bad "truncated trace" "$T/trunc.json" $small
echo '[]' > "$T/arr.json"; calib_bad "not an object" "$T/arr.json" $small
sed 's/"cpu":"[^"]*"/"cpu":"Some Other CPU"/' "$T/ct.json" > "$T/foreign.json"; calib_bad "foreign CPU" "$T/foreign.json" $small
sed 's/"threads":1/"threads":2/' "$T/ct.json" > "$T/thr.json"; calib_bad "other thread count" "$T/thr.json" $small
calib_bad "another config" "$T/ct.json" --layers 3 --dim 32 --heads 2 --seq 16 --batch 2 --vocab 64 --threads 1
sed 's/"tensor":"qkv"/"tensor":"nope"/' "$T/ct.json" > "$T/tn.json"; calib_bad "unknown tensor" "$T/tn.json" $small
sed 's/"tdur":[0-9.]*/"tdur":-5/' "$T/ct.json" > "$T/neg.json"; calib_bad "negative duration" "$T/neg.json" $small
sed 's/"layer":1,/"layer":7,/' "$T/ct.json" > "$T/lay.json"; calib_bad "layer out of range" "$T/lay.json" $small
sed 's/"format":"remat-trace"/"format":"other"/' "$T/ct.json" > "$T/fmt.json"; calib_bad "not a remat trace" "$T/fmt.json" $small

# the trace of the embedded default loads in headless Chromium
if command -v chromium >/dev/null 2>&1; then
    $PY - docs/trace-view.html "$T/d.json" "$T/view.html" <<'PY' || bad "could not build the viewer page"
import sys
page = open(sys.argv[1]).read()
trace = open(sys.argv[2]).read()
assert "/*TRACE*/null" in page
open(sys.argv[3], "w").write(page.replace("/*TRACE*/null", trace.replace("</", "<\\/")))
PY
    chromium_dom "file://$T/view.html" "$T/dom.html" "$T/chromium.err"
    rc=$?
    n=$($PY -c "
import json,sys; t=json.load(open(sys.argv[1]))
print(sum(1 for e in t['traceEvents'] if e['ph']=='X'))" "$T/d.json")
    if [ $rc -eq 0 ] && grep -q "data-loaded=\"$n\"" "$T/dom.html" && grep -q '<rect' "$T/dom.html" \
       && ! grep -Eq 'Uncaught|Failed to load' "$T/chromium.err"; then ok
    else bad "the trace in chromium (rc $rc): $(grep -o 'data-loaded="[^"]*"' "$T/dom.html") of $n; $(grep -E 'Uncaught|Failed' "$T/chromium.err" | head -3)"; fi
else
    skip "chromium not installed: the trace not loaded in a browser"
fi

finish cli_trace
