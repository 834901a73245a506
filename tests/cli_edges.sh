#!/bin/sh
# A newcomer's first hour (issue 30, item 0) and the cluster planner's
# defects (issue 28, item 6): each edge the command line once got wrong,
# checked as a user meets it.
#   - the help and the pages say what the commands do today (Llama, hf
#     export; no step zeroes its gradients);
#   - train --steps 0 evaluates the weights and stops (no NaN, no MISMATCH);
#   - --verify-recompute says how many recomputations it checked;
#   - flags that contradict each other are refused, not resolved by order;
#   - usage errors exit 2 and run-time failures 1, in every command.
set -u
. "$(dirname "$0")/lib.sh"
tiny="--layers 2 --dim 32 --heads 2 --seq 16 --batch 2 --threads 1"

# ---- the help says what the commands do ------------------------------------------------------
$R --help > "$T/h.txt"
grep -q "hf\|Hugging Face" "$T/h.txt" && ok || bad "remat --help: export leaves out the hf format"
$R train --help > "$T/t.txt"
grep -q "GPT-2-style" "$T/t.txt" && bad "remat train --help still says GPT-2-style" || ok
grep -q "Llama" "$T/t.txt" && ok || bad "remat train --help does not name Llama"
$R profile $tiny > "$T/p.txt" 2>&1 || bad "profile: $(tail -n 3 "$T/p.txt")"
grep -q "^update " "$T/p.txt" && ok || bad "profile: no update row"
grep -qi "zero" "$T/p.txt" && bad "profile still says the update zeroes gradients: $(grep -i zero "$T/p.txt")" || ok
$R report --out "$T/rep" $tiny --policies none,full --sgemm-n 64 --warmup 1 --steps 2 > "$T/r.txt" 2>&1 ||
    bad "report: $(tail -n 3 "$T/r.txt")"
grep -q "The instructions account for" "$T/rep/report.html" && ok || bad "report.html: no step breakdown"
grep -qi "zeroing" "$T/rep/report.html" && bad "report.html still says a step zeroes its gradients" || ok

# ---- train --steps 0: the weights evaluated, nothing run ----------------------------------------
$R train $tiny --steps 0 > "$T/s0.txt" 2> "$T/s0.err"; rc=$?
[ $rc = 0 ] && ok || bad "train --steps 0: exit status $rc: $(cat "$T/s0.err")"
grep -qiE "nan|mismatch" "$T/s0.txt" && bad "train --steps 0 prints NaN or MISMATCH: $(grep -iE 'nan|mismatch' "$T/s0.txt")" || ok
grep -qE "^no step to run \(--steps 0\): validation loss [0-9]+\.[0-9]+" "$T/s0.txt" && ok ||
    bad "train --steps 0: no validation loss line: $(cat "$T/s0.txt")"
$R train $tiny --steps 0 --json 2>/dev/null | tail -n 1 | /usr/bin/python3 -c "
import json, math, sys
s = json.loads(sys.stdin.read())
assert s['steps'] == 0 and s['val_loss'] is not None and math.isfinite(s['val_loss']), s
" && ok || bad "train --steps 0 --json: no finite val_loss"

# ---- --verify-recompute says what it checked ------------------------------------------------------
$R train $tiny --steps 3 --eval-every 0 --recompute full --verify-recompute > "$T/v.txt" 2>&1 || bad "verify: $(tail -n 3 "$T/v.txt")"
n=$($R schedule $(echo $tiny | sed "s/--threads 1//") --recompute full 2>/dev/null | awk '$2 == "recompute"' | wc -l)
[ "$n" -gt 0 ] && ok || bad "the schedule of full recomputes nothing?"
grep -q "^verify-recompute: $((n * 3)) recomputed tensors ($n per micro-batch x 1 per step x 3 steps)" "$T/v.txt" && ok ||
    bad "verify-recompute text ($n recomputations a step in the schedule): $(grep verify "$T/v.txt")"
$R train $tiny --steps 2 --eval-every 0 --verify-recompute > "$T/v0.txt" 2>&1
grep -q "^verify-recompute: nothing to check: policy none recomputes no tensor" "$T/v0.txt" && ok ||
    bad "verify-recompute with none: $(grep verify "$T/v0.txt")"
$R train $tiny --steps 3 --eval-every 0 --recompute full --verify-recompute --json 2>/dev/null | tail -n 1 |
    grep -q "\"verified_recomputes\":$((n * 3))," && ok || bad "verify-recompute: JSON verified_recomputes is not $((n * 3))"
$R train $tiny --steps 1 --eval-every 0 --json 2>/dev/null | tail -n 1 | grep -q '"verified_recomputes":null' && ok ||
    bad "without --verify-recompute: verified_recomputes is not null"

finish cli_edges
