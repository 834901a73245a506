#!/bin/sh
# End-to-end tests of `remat train`: determinism, learning, the JSON summary,
# help/version, and one-line errors for bad input.
set -u
. "$(dirname "$0")/lib.sh"
small="--layers 2 --dim 48 --heads 4 --seq 32 --batch 8 --threads 2"

# determinism: same seed twice -> identical losses and params_hash (dropout on)
$R train $small --steps 8 --dropout 0.1 --json --seed 7 > "$T/a.jsonl" || bad "train a failed"
$R train $small --steps 8 --dropout 0.1 --json --seed 7 > "$T/b.jsonl" || bad "train b failed"
/usr/bin/python3 - "$T/a.jsonl" "$T/b.jsonl" <<'PY' && ok || bad "determinism"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
la = [x["loss"] for x in a if x["type"] == "step"]; lb = [x["loss"] for x in b if x["type"] == "step"]
assert la == lb and len(la) == 8, (la, lb)
assert a[-1]["params_hash"] == b[-1]["params_hash"], "params_hash differs"
PY

# a different seed gives a different run
$R train $small --steps 2 --json --seed 8 > "$T/c.jsonl" || bad "train c failed"
/usr/bin/python3 - "$T/a.jsonl" "$T/c.jsonl" <<'PY' && ok || bad "seed changes the run"
import json, sys
a = json.loads(open(sys.argv[1]).readlines()[-1]); c = json.loads(open(sys.argv[2]).readlines()[-1])
assert a["params_hash"] != c["params_hash"]
PY

# learning on the embedded task, and the summary's documented fields
$R train $small --steps 60 --lr 2e-3 --json --eval-every 30 > "$T/l.jsonl" || bad "learning run failed"
/usr/bin/python3 - "$T/l.jsonl" <<'PY' && ok || bad "loss falls / summary fields"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
s = rows[-1]
need = ["loss_first", "loss_last", "val_loss", "step_ms_median", "tokens_per_s", "act_peak_bytes",
        "act_peak_pred_bytes", "act_stored_bytes", "act_workset_bytes", "params_bytes", "grads_bytes",
        "optim_bytes", "params_hash", "policy", "recompute_pct", "step_peak_bytes"]
missing = [k for k in need if k not in s]
assert not missing, missing
assert s["loss_last"] < s["loss_first"] - 1.5, (s["loss_first"], s["loss_last"])
assert s["val_loss"] < s["loss_first"] - 1.5
assert s["act_peak_bytes"] == s["act_peak_pred_bytes"]
assert len(s["params_hash"]) == 16
assert sum(1 for r in rows if r["type"] == "step") == 60
assert any("val_loss" in r for r in rows if r["type"] == "step")
PY

# a policy changes memory, not results
$R train $small --steps 3 --json --recompute full --verify-recompute > "$T/f.jsonl" || bad "full failed"
$R train $small --steps 3 --json > "$T/n.jsonl" || bad "none failed"
/usr/bin/python3 - "$T/f.jsonl" "$T/n.jsonl" <<'PY' && ok || bad "full == none bitwise, less memory"
import json, sys
f = json.loads(open(sys.argv[1]).readlines()[-1]); n = json.loads(open(sys.argv[2]).readlines()[-1])
assert f["params_hash"] == n["params_hash"] and f["loss_last"] == n["loss_last"]
assert f["act_peak_bytes"] < n["act_peak_bytes"] and f["recompute_pct"] > 0
PY

# text data, with a sample printed at the end
printf 'hello world, this is a tiny text file for remat.\n%.0s' $(seq 1 40) > "$T/text.txt"
$R train $small --data "$T/text.txt" --steps 3 --sample 8 > "$T/t.out" 2>&1 && grep -q '^sample: ' "$T/t.out" && ok || bad "text data + sample"

# help and version
$R --help | grep -q train && ok || bad "--help"
$R train --help | grep -q -- '--recompute' && ok || bad "train --help"
$R --version | grep -q '^remat [0-9]' && ok || bad "--version"

# bad input: exactly one line on stderr, non-zero exit, no crash
expect_err 'train --layers x' $R train --layers x
expect_err 'train --layers 0' $R train --layers 0
expect_err 'train --dim 128 --heads 3' $R train --dim 128 --heads 3
expect_err 'train --batch 99999999999' $R train --batch 99999999999
expect_err 'train --seq 4096 --batch 1048576 --dim 65536' $R train --seq 4096 --batch 1048576 --dim 65536
expect_err 'train --dropout 1.5' $R train --dropout 1.5
expect_err 'train --bogus' $R train --bogus
expect_err 'train --steps' $R train --steps
expect_err 'train --recompute bogus' $R train --recompute bogus
expect_err 'train --recompute every:0' $R train --recompute every:0
expect_err 'train --data does-not-exist' $R train --data "$T/does-not-exist"
expect_err 'train --data text.txt --vocab 50' $R train --data "$T/text.txt" --vocab 50
expect_err 'train --lr -1' $R train --lr -1
expect_err 'nosuchcommand' $R nosuchcommand
expect_err 'schedule --recompute revolve:1' $R schedule --recompute revolve:1

finish cli_train
