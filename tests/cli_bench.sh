#!/bin/sh
# End-to-end tests of `remat bench` and `remat report`: the JSON and CSV
# rows and fields, the planner's optimum under --budget, the two SVG plots
# (well-formed, axes, labels, one point per policy, the front line, the
# timeline's maximum = the measured peak), report.html (well-formed, loads
# in headless Chromium when installed), the progress line (only on a
# terminal, never with --json), and one-line errors.  Without chromium or
# script(1) those checks are skipped, and the test exits 77 (skipped).
# REMAT_TEST_REQUIRED: CI installs chromium; the browser check must run there
set -u
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
tiny="--layers 2 --dim 32 --heads 2 --vocab 64 --seq 16 --batch 2 --threads 1 --sgemm-n 64 --warmup 1 --steps 2"

# JSON: one row per policy (none first), the documented fields, plots
$R bench $tiny --policies 'none;full;every:2,selective' --json --timeline-policy full \
    --svg-pareto "$T/p.svg" --svg-timeline "$T/t.svg" > "$T/b.json" 2> "$T/b.err" || bad "bench --json failed: $(cat "$T/b.err")"
[ -s "$T/b.err" ] && bad "bench --json wrote to stderr: $(cat "$T/b.err")"
$PY - "$T/b.json" <<'PY' && ok || bad "JSON rows and fields"
import json, math, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert [r["policy"] for r in rows] == ["none", "full", "every:2,selective"], [r["policy"] for r in rows]
need = ["policy", "step_ms_median", "ratio_vs_none", "tokens_per_s", "act_peak_bytes", "act_peak_pred_bytes",
        "act_stored_bytes", "act_workset_bytes", "rss_peak_bytes", "gflops", "gemm_frac", "gemm_gflops", "dtype", "gemm"]
for r in rows:
    missing = [k for k in need if k not in r]
    assert not missing, (r["policy"], missing)
    assert r["act_peak_bytes"] == r["act_peak_pred_bytes"], r
    assert r["act_peak_bytes"] == r["act_stored_bytes"] + r["act_workset_bytes"], r
    assert r["step_ms_median"] > 0 and r["tokens_per_s"] > 0 and r["gflops"] > 0, r
    assert r["rss_peak_bytes"] and r["rss_peak_bytes"] > r["act_peak_bytes"], r
    assert math.isclose(r["gemm_frac"], r["gflops"] / d["gemm_gflops"], rel_tol=1e-3), r
    assert r["dtype"] == "fp32" and r["gemm"] == d["gemm"], r
    assert len(r["step_ms"]) == 2, r
    assert r["step_ms_pred"] is not None and r["step_ms_pred"] > 0, r
assert rows[0]["ratio_vs_none"] == 1.0
assert rows[1]["act_peak_bytes"] < rows[0]["act_peak_bytes"]
assert d["gemm_gflops"] > 0 and [p["dtype"] for p in d["precisions"]] == ["fp32"]
assert len(d["front"]) >= 2 and d["planner_error"] is None, d["planner_error"]
peaks = [f["peak_bytes"] for f in d["front"]]
assert peaks == sorted(peaks), peaks
for k in ("n_layer", "n_embd", "n_head", "vocab", "seq", "batch", "steps"):
    assert k in d["config"], k
for k in ("cpu", "threads", "blas", "blas_core"):
    assert k in d["machine"], k
assert d["machine"]["threads"] == 1 and d["config"]["n_layer"] == 2
assert d["timeline_policy"] == "full"
PY

# bf16 on a CPU where oneDNN makes no bf16 matmul (below AVX-512): the JSON
# says so ("bf16_native"), and so does remat train's header, which tells the
# user the products run on fp32 copies (slower than fp32 there); never in fp32
tt="--layers 2 --dim 32 --heads 2 --vocab 64 --seq 16 --batch 2 --threads 1 --steps 1"
$R train $tt --dtype bf16 > "$T/h16.txt" 2>&1 || bad "train --dtype bf16: $(cat "$T/h16.txt")"
$R train $tt > "$T/h32.txt" 2>&1 || bad "train fp32: $(cat "$T/h32.txt")"
$R train $tt --dtype bf16 --json 2>/dev/null | tail -n 1 > "$T/h16.json"
$PY - "$T/b.json" "$T/h16.txt" "$T/h32.txt" "$T/h16.json" <<'PY' && ok || bad "bf16_native: the JSON and the train header agree"
import json, sys
d = json.load(open(sys.argv[1]))
h16, h32 = open(sys.argv[2]).read(), open(sys.argv[3]).read()
t = json.loads(open(sys.argv[4]).read())
native = d["bf16_native"]
assert native in (True, False) and t["bf16_native"] == native, (native, t.get("bf16_native"))
note = "has no bf16 matmul: bf16 products run on fp32 copies"
assert (note in h16) == (not native), h16.splitlines()[:2]
assert note not in h32, h32.splitlines()[:2]
if not native:
    assert "oneDNN %s has no" % d["gemm_isa"] in h16, h16.splitlines()[:2]
PY

# the SVGs: well-formed, titled, axes with ticks and titles, one labelled
# point per policy, the front line; the timeline's maximum = measured peak
$PY - "$T/p.svg" "$T/t.svg" "$T/b.json" <<'PY' && ok || bad "SVG plots"
import json, sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
d = json.load(open(sys.argv[3]))
names = [r["policy"] for r in d["rows"]]
def axes(root, what):
    assert root.find(NS + "title").text, what
    for ax in ("axis x", "axis y"):
        g = [e for e in root.iter(NS + "g") if e.get("class") == ax]
        assert len(g) == 1, (what, ax)
        texts = [t.text for t in g[0].iter(NS + "text")]
        ticks = [t for t in g[0].iter(NS + "text") if t.get("class") == "tick"]
        assert len(ticks) >= 3, (what, ax, texts)
        assert any(t.get("class") == "axis-title" and t.text for t in g[0].iter(NS + "text")), (what, ax)
    assert [e for e in root.iter(NS + "g") if e.get("class") == "legend"], what
p = ET.parse(sys.argv[1]).getroot()
axes(p, "pareto")
pts = [e.get("data-policy") for e in p.iter(NS + "g") if e.get("class") == "point"]
assert pts == names, (pts, names)
labels = [e.text for e in p.iter(NS + "text") if e.get("class") == "label"]
assert labels == names, (labels, names)
front = [e for e in p.iter(NS + "polyline") if e.get("class") == "front"]
assert len(front) == 1 and len(front[0].get("points").split()) == len(d["front"]) >= 2
t = ET.parse(sys.argv[2]).getroot()
axes(t, "timeline")
total = [e for e in t.iter(NS + "polyline") if e.get("class") == "total"]
assert len(total) == 1
full = [r for r in d["rows"] if r["policy"] == "full"][0]
mx = max(int(x) for x in total[0].get("data-bytes").split())
assert mx == full["act_peak_bytes"], (mx, full["act_peak_bytes"])
bands = [e.get("data-tensor") for e in t.iter(NS + "path") if e.get("class") == "band"]
assert "qkv" in bands and "emb" in bands and "d_res" in bands, bands
phases = {e.get("class") for e in t.iter(NS + "rect") if (e.get("class") or "").startswith("phase")}
assert phases == {"phase forward", "phase backward", "phase recompute"}, phases
PY

# CSV, `all`: one row per named policy, the same columns
$R bench $tiny --policies all --csv --no-rss > "$T/b.csv" 2> "$T/c.err" || bad "bench --csv failed: $(cat "$T/c.err")"
$PY - "$T/b.csv" <<'PY' && ok || bad "CSV rows and fields"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = [r["policy"] for r in rows]
assert names == ["none", "full", "every:2", "sqrt", "first:1", "selective", "pointwise", "save:qkv+fch",
                 "revolve:3", "every:2,selective", "every:2,selective,pointwise"], names
for r in rows:
    for k in ("step_ms_median", "ratio_vs_none", "tokens_per_s", "act_peak_bytes", "act_peak_pred_bytes",
              "act_stored_bytes", "act_workset_bytes", "rss_peak_bytes", "gflops", "gemm_frac", "dtype", "gemm"):
        assert k in r, k
    assert r["act_peak_bytes"] == r["act_peak_pred_bytes"], r
    assert float(r["step_ms_median"]) > 0 and r["rss_peak_bytes"] == "", r   # --no-rss: empty
PY

# --dtype fp32,bf16: every (precision, policy) pair, each precision against
# its own none with its own GEMM probe and front; both fronts in the plot;
# bf16 stores about half of fp32's activation bytes
$R bench $tiny --policies none,full --dtype fp32,bf16 --budget-activations 1GiB --json --no-rss \
    --svg-pareto "$T/pd.svg" > "$T/d.json" 2> "$T/d.err" || bad "bench --dtype fp32,bf16 failed: $(cat "$T/d.err")"
$PY - "$T/d.json" "$T/pd.svg" <<'PY' && ok || bad "bench across two precisions"
import json, math, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1]))
rows = d["rows"]
pairs = [(r["dtype"], r["policy"]) for r in rows]
assert pairs == [("fp32", "none"), ("fp32", "full"), ("fp32", "optimal"),
                 ("bf16", "none"), ("bf16", "full"), ("bf16", "optimal")], pairs
prec = {p["dtype"]: p for p in d["precisions"]}
assert set(prec) == {"fp32", "bf16"} and all(p["gemm_gflops"] > 0 and len(p["front"]) >= 2 for p in prec.values())
for r in rows:
    assert r["act_peak_bytes"] == r["act_peak_pred_bytes"], r
    assert math.isclose(r["gemm_frac"], r["gflops"] / prec[r["dtype"]]["gemm_gflops"], rel_tol=1e-3), r
    assert r["gemm_gflops"] == prec[r["dtype"]]["gemm_gflops"], r
by = {(r["dtype"], r["policy"]): r for r in rows}
assert by[("fp32", "none")]["ratio_vs_none"] == 1.0 and by[("bf16", "none")]["ratio_vs_none"] == 1.0
# the stored activations (the peak also holds the kernels' workspace, which on a machine
# that emulates bf16 products holds their fp32 copies)
a32, a16 = by[("fp32", "none")]["act_stored_bytes"], by[("bf16", "none")]["act_stored_bytes"]
assert a16 < 0.7 * a32, (a16, a32)
NS = "{http://www.w3.org/2000/svg}"
p = ET.parse(sys.argv[2]).getroot()
fronts = sorted(e.get("data-dtype") for e in p.iter(NS + "polyline") if e.get("class") == "front")
assert fronts == ["bf16", "fp32"], fronts
assert sorted(g.get("data-dtype") for g in p.iter(NS + "g") if g.get("class") == "point") == ["bf16"] * 3 + ["fp32"] * 3
PY
# --dtype bf16,fp32 (bf16 first): the plot's legend, labels and front lines
# name each marker's and line's own precision
$R bench $tiny --policies none --dtype bf16,fp32 --no-rss --svg-pareto "$T/pr.svg" > /dev/null 2> "$T/r.err" \
    || bad "bench --dtype bf16,fp32 failed: $(cat "$T/r.err")"
$PY - "$T/pr.svg" <<'PY' && ok || bad "plot labels of bench --dtype bf16,fp32"
import sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
p = ET.parse(sys.argv[1]).getroot()
# each measured point's marker: circle or square, by its precision
shape = {}
for g in p.iter(NS + "g"):
    if g.get("class") == "point":
        shape[g.get("data-dtype")] = g[0].tag[len(NS):]
assert shape == {"bf16": "circle", "fp32": "rect"}, shape
labels = [t.text for t in p.iter(NS + "text") if t.get("class") == "label"]
assert labels == ["bf16 none", "fp32 none"], labels
legend = [e for g in p.iter(NS + "g") if g.get("class") == "legend" for e in g]
said = {}   # the legend's text after each marker or line
for i, e in enumerate(legend[:-1]):
    nxt = legend[i + 1] if legend[i + 1].tag == NS + "text" else legend[i + 2]
    if e.tag in (NS + "circle", NS + "rect") and (nxt.text or "").startswith("measured, "):
        said[e.tag[len(NS):]] = nxt.text
    if e.tag == NS + "line":
        said[e.get("stroke")] = nxt.text
assert said["circle"] == "measured, %s (median)" % [d for d, s in shape.items() if s == "circle"][0], said
assert said["rect"] == "measured, %s (median)" % [d for d, s in shape.items() if s == "rect"][0], said
for l in p.iter(NS + "polyline"):
    if l.get("class") == "front":
        assert said[l.get("stroke")].endswith("front, " + l.get("data-dtype")), (l.get("data-dtype"), said)
PY
for bad_dt in fp8 fp32,fp32 fp32, "fp32,bf16,fp32"; do
    expect_err --rc 2 "bench --dtype $bad_dt" $R bench $tiny --dtype "$bad_dt" --no-rss
    [ ! -s "$T/stdout" ] && ok || bad "bench --dtype $bad_dt: output on stdout"
done

# --budget: the planner's optimum is a row, fits, and is the default timeline
budget=$($PY -c "import json,sys; d=json.load(open(sys.argv[1])); r=d['rows']; print((r[0]['act_peak_bytes']+r[1]['act_peak_bytes'])//2)" "$T/b.json")
$R bench $tiny --policies none,full --budget-activations "${budget}B" --json --no-rss \
    --svg-timeline "$T/tb.svg" > "$T/o.json" || bad "bench --budget failed"
$PY - "$T/o.json" "$T/tb.svg" "$budget" <<'PY' && ok || bad "budget optimum"
import json, sys, xml.etree.ElementTree as ET
d = json.load(open(sys.argv[1])); budget = int(sys.argv[3])
opt = [r for r in d["rows"] if r["optimal"]]
assert len(opt) == 1 and opt[0]["policy"] == "optimal", d["rows"]
assert opt[0]["act_peak_bytes"] <= budget and opt[0]["fits"], (opt[0]["act_peak_bytes"], budget)
assert d["timeline_policy"] == "optimal" and d["config"]["budget_bytes"] == budget
t = ET.parse(sys.argv[2]).getroot()
NS = "{http://www.w3.org/2000/svg}"
assert [e for e in t.iter(NS + "line") if e.get("class") == "budget"], "no budget line"
total = [e for e in t.iter(NS + "polyline") if e.get("class") == "total"][0]
assert max(int(x) for x in total.get("data-bytes").split()) == opt[0]["act_peak_bytes"]
PY

# report.html: written atomically, well-formed, plots and table inline
$R report --out "$T/rep/sub" $tiny --policies none,full,selective --budget-activations "${budget}B" \
    > "$T/r.out" 2> "$T/r.err" || bad "report failed: $(cat "$T/r.err")"
grep -q "report: $T/rep/sub/report.html" "$T/r.out" && ok || bad "report does not name its file"
[ -z "$(ls "$T/rep/sub" | grep -v '^report.html$')" ] && ok || bad "report left files behind: $(ls "$T/rep/sub")"
$PY - "$T/rep/sub/report.html" <<'PY' && ok || bad "report.html content"
import sys, xml.etree.ElementTree as ET
src = open(sys.argv[1], encoding="utf-8").read()
assert "http://" not in src.replace("http://www.w3.org/", ""), "external reference"
assert "<script" not in src and "src=" not in src and "href=" not in src, "not self-contained"
root = ET.fromstring(src)
X = "{http://www.w3.org/1999/xhtml}"; S = "{http://www.w3.org/2000/svg}"
svgs = list(root.iter(S + "svg"))
assert len(svgs) == 2, len(svgs)
rows = [tr.get("data-policy") for tr in root.iter(X + "tr") if tr.get("data-policy")]
assert rows == ["none", "full", "selective", "optimal"], rows
text = "".join(root.itertext())
for s in ("CPU", "BLAS", "BLAS core type", "SGEMM", "layers", "Memory timeline", "Activation memory vs step time"):
    assert s in text, s
PY
if command -v chromium >/dev/null 2>&1; then
    chromium_dom "file://$T/rep/sub/report.html" "$T/dom.html" "$T/chromium.err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q "remat report" "$T/dom.html" && [ "$(grep -c '<svg' "$T/dom.html")" -eq 2 ] \
       && grep -q 'data-policy="optimal"' "$T/dom.html" && ! grep -Eq 'CONSOLE|Uncaught|Failed to load' "$T/chromium.err"; then
        ok
    else
        bad "report.html in chromium (rc $rc): $(grep -E 'CONSOLE|Uncaught|Failed' "$T/chromium.err" | head -3)"
    fi
else
    skip "chromium not installed: report.html not loaded in a browser"
fi

# progress: on a terminal's stderr only, never with --json
if command -v script >/dev/null 2>&1; then
    script -qec "$R bench $tiny --policies none,full --no-rss > $T/tty.out" "$T/tty.log" > /dev/null 2>&1
    grep -q "bench: .*round .*, policy none | .*left" "$T/tty.log" && ok || bad "no progress line on a terminal"
    grep -q "time left\|s left" "$T/tty.out" && bad "progress line on stdout"
    script -qec "$R bench $tiny --policies none,full --no-rss --json > $T/tty.json" "$T/tty2.log" > /dev/null 2>&1
    grep -q "time left\|s left" "$T/tty2.log" && bad "progress line with --json" || ok
    script -qec "$R train --layers 1 --dim 16 --heads 2 --seq 8 --batch 2 --steps 3 --quiet --sample 0 > $T/tr.out" \
        "$T/tr.log" > /dev/null 2>&1
    grep -q "train (none): step" "$T/tr.log" && ok || bad "no train progress line on a terminal"
else
    skip "script(1) not installed: the progress lines on a terminal not checked"
fi
$R bench $tiny --policies none --no-rss > /dev/null 2> "$T/pipe.err"
[ -s "$T/pipe.err" ] && bad "stderr not a terminal, yet: $(cat "$T/pipe.err")" || ok

# one-line errors, exit 2 for bad usage
expect_err --rc 2 "bad policy" $R bench $tiny --policies none,bogus:3
expect_err --rc 2 "unknown flag" $R bench --frobnicate
expect_err --rc 2 "json and csv" $R bench --json --csv
expect_err --rc 2 "steps 0" $R bench --steps 0
expect_err --rc 2 "report without --out" $R report $tiny
expect_err --rc 2 "zero budget" $R bench --budget 0
expect_err --rc 1 "unwritable svg" $R bench $tiny --policies none --no-rss --svg-pareto /nonexistent/dir/p.svg
[ ! -s "$T/stdout" ] && ok || bad "unwritable svg: refused only after the run: $(head -3 "$T/stdout")"
$R bench --help > /dev/null && $R report --help > /dev/null && ok || bad "--help"

finish cli_bench
