#!/bin/sh
# Every command's --json output is parsed (python3's json module), and values
# are checked to come back exactly: numbers a command derives from others in
# the same output are recomputed here with the same IEEE operations and
# compared with ==, model_flops against the exact whole number of its
# formula, and file names with a quote, a backslash, a tab, a non-ASCII
# letter and a byte that is not UTF-8 in them come back as they were given.
set -u
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
small="--layers 2 --dim 32 --heads 2 --seq 16 --batch 4"
# a directory name with ", \, a tab and e-acute (UTF-8), and one with a byte
# that is not UTF-8 (0xff)
odd="$T/$(printf 'a"b\\c\td\303\251')"
bad8="$T/$(printf 'x\377y')"
mkdir -p "$odd" "$bad8" || bad "mkdir of the odd names"

# train: JSON Lines; the summary's median and tokens/s from the steps' ms
$R train $small --steps 5 --threads 1 --eval-every 0 --sample 0 --no-calibrate --json --save "$odd/ck" > "$T/t.jsonl" 2> "$T/t.err" \
    || bad "train --json: $(cat "$T/t.err")"
$PY - "$T/t.jsonl" <<'PY' && ok || bad "train JSON"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps, s = rows[:-1], rows[-1]
assert [r["type"] for r in steps] == ["step"] * 5 and s["type"] == "summary"
ms = [r["ms"] for r in steps]
assert s["step_ms_median"] == statistics.median(ms), (s["step_ms_median"], ms)
N = s["batch"] * s["seq"]
assert s["tokens_per_s"] == N / (s["step_ms_median"] / 1000.0), s["tokens_per_s"]
for r in steps:
    assert r["tokens_per_s"] == N / (r["ms"] / 1000.0), r
assert s["loss_first"] == steps[0]["loss"] and s["loss_last"] == steps[-1]["loss"]
open(sys.argv[1] + ".pred", "w").write("%d %r" % (s["act_peak_pred_bytes"], s["flops_per_step"]))
PY

# schedule: the simulator's figures, as train reported them
$R schedule $small --json > "$T/s.json" 2> "$T/s.err" || bad "schedule --json: $(cat "$T/s.err")"
$PY - "$T/s.json" "$T/t.jsonl.pred" <<'PY' && ok || bad "schedule JSON"
import json, sys
d = json.load(open(sys.argv[1]))
peak, flops = open(sys.argv[2]).read().split()
assert d["peak_bytes"] == int(peak) and d["flops"] == float(flops), (d["peak_bytes"], d["flops"], peak, flops)
assert d["peak_bytes"] == max(i["peak_bytes"] for i in d["instructions"])
assert d["flops"] == sum(i["flops"] for i in d["instructions"])
PY

# export: the checkpoint's and the output's names, intact
$R export --resume "$odd/ck" --out "$odd/w.safetensors" --json > "$T/e.json" 2> "$T/e.err" || bad "export --json: $(cat "$T/e.err")"
$PY - "$T/e.json" "$odd" <<'PY' && ok || bad "export JSON: the names"
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
assert d["out"] == sys.argv[2] + "/w.safetensors", (d["out"], sys.argv[2])
assert d["checkpoint"].startswith(sys.argv[2] + "/ck/"), d["checkpoint"]
assert d["step"] == 5 and d["format"] == "safetensors" and d["n_layer"] == 2
PY

# profile: its file's name (and one that is not UTF-8: still valid JSON,
# the byte read as Latin-1), and its predictions as plan and bench make them
prof="$odd/p.prof"
$R profile $small --reps 1 --threads 1 --out "$prof" --json > "$T/p.json" 2> "$T/p.err" || bad "profile --json: $(cat "$T/p.err")"
$R profile $small --reps 1 --threads 1 --out "$bad8/p.prof" --json > "$T/p8.json" 2> "$T/p8.err" || bad "profile --json (0xff): $(cat "$T/p8.err")"
$PY - "$T/p.json" "$prof" "$T/p8.json" "$bad8/p.prof" <<'PY' && ok || bad "profile JSON: the names"
import json, os, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
assert d["path"] == sys.argv[2], (d["path"], sys.argv[2])
e = json.load(open(sys.argv[3], encoding="utf-8"))
assert e["path"] == os.fsencode(sys.argv[4]).decode("latin-1"), (e["path"], sys.argv[4])
assert all(k in d["step_ms_pred"] for k in ("none", "full"))
PY
$R plan $small --threads 1 --profile "$prof" --budget 1GiB --recompute none --recompute full --json > "$T/pl.json" 2> "$T/pl.err" \
    || bad "plan --json: $(cat "$T/pl.err")"
$R bench $small --threads 1 --policies none,full --steps 3 --warmup 1 --no-rss --profile "$prof" --sgemm-n 64 --json \
    > "$T/b.json" 2> "$T/b.err" || bad "bench --json: $(cat "$T/b.err")"
$PY - "$T/p.json" "$T/pl.json" "$T/b.json" <<'PY' && ok || bad "profile, plan and bench agree; bench's derived figures"
import json, statistics, sys
p, pl, b = (json.load(open(f, encoding="utf-8")) for f in sys.argv[1:4])
plan = {r["policy"]: r for r in pl["rows"]}
rows = {r["policy"]: r for r in b["rows"]}
for pol in ("none", "full"):
    # plan and bench price with the profile as read from its file; profile
    # with the one it measured, which the file keeps to its own precision
    assert plan[pol]["step_ms_pred"] == rows[pol]["step_ms_pred"], pol
    assert abs(p["step_ms_pred"][pol] / plan[pol]["step_ms_pred"] - 1) < 1e-8, pol
none = rows["none"]
for r in b["rows"]:
    assert r["step_ms_median"] == statistics.median(r["step_ms"]), r
    ratio = [a / n for a, n in zip(r["step_ms"], none["step_ms"])]
    assert r["ratio_vs_none"] == (1.0 if r is none else statistics.median(ratio)), r
    assert r["gflops"] == r["flops_per_step"] / (r["step_ms_median"] * 1e6), r
    assert r["tokens_per_s"] == 4 * 16 / (r["step_ms_median"] / 1000.0), r
    assert r["gemm_frac"] == r["gflops"] / r["gemm_gflops"], r
PY

# plan --pareto and --maximize
$R plan $small --no-profile --pareto --json > "$T/pp.json" 2> "$T/pp.err" || bad "plan --pareto --json: $(cat "$T/pp.err")"
$R plan $small --no-profile --maximize seq --budget 64MiB --json > "$T/pm.json" 2> "$T/pm.err" || bad "plan --maximize --json: $(cat "$T/pm.err")"
$R plan $small --no-profile --ranks 2 --net-bw 1e9 --net-latency 1e-5 --budget 1GiB --json > "$T/pd.json" 2> "$T/pd.err" \
    || bad "plan --ranks --json: $(cat "$T/pd.err")"
$PY - "$T/pp.json" "$T/pm.json" "$T/pd.json" <<'PY' && ok || bad "plan --pareto / --maximize / --ranks JSON"
import json, sys
pp, pm, pd = (json.load(open(f)) for f in sys.argv[1:4])
assert pp["rows"] and all(isinstance(r["step_ms_pred"], float) for r in pp["rows"])
assert pm["dim"] == "seq" and pm["rows"] and pm["optimal"]["max"] >= 16
assert pd["parallel"]["ranks"] == 2 and pd["parallel"]["comm_ms_pred"] > 0
PY

# plan --framework: model_flops is the formula's whole number (Korthikanti
# et al. 2022, Appendix A), to the FLOP
$R plan --framework megatron --model 175b --tp 8 --sp --pp 8 --global-batch 64 --json > "$T/f.json" 2> "$T/f.err" \
    || bad "plan --framework --json: $(cat "$T/f.err")"
$PY - "$T/f.json" <<'PY' && ok || bad "plan --framework: model_flops exact"
import json, sys
d = json.load(open(sys.argv[1]))
G, L, s, h, V = 64, 96, 2048, 12288, 51200          # 175b; V already a multiple of 128 x tp 8
exact = 72 * G * L * s * h * h + 12 * G * L * s * s * h + 6 * G * s * h * V
assert d["model_flops"] == float(exact), (d["model_flops"], exact)
assert d["optimal"]["hardware_flops"] >= d["model_flops"] / (8 * 8)    # per GPU of a tp 8 x pp 8 run, at least
PY

# report --json: the bench's JSON, also kept in the page
$R report $small --threads 1 --policies none --steps 2 --warmup 0 --no-rss --sgemm-n 64 --out "$odd/r" --json > "$T/r.json" 2> "$T/r.err" \
    || bad "report --json: $(cat "$T/r.err")"
$PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['rows'][0]['policy'] == 'none'" "$T/r.json" && ok || bad "report JSON"

finish cli_json
