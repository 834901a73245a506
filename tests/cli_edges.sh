#!/bin/sh
# A newcomer's first hour (issue 30, item 0) and the cluster planner's
# defects (issue 28, item 6): each edge the command line once got wrong,
# checked as a user meets it.
#   - the help and the pages say what the commands do today (Llama, hf
#     export; no step zeroes its gradients);
#   - train --steps 0 evaluates the weights and stops (no NaN, no MISMATCH);
#   - --verify-recompute says how many recomputations it checked;
#   - flags that contradict each other are refused, not resolved by order;
#   - the cluster planner: --host-mem 0, its advice, --help's devices and
#     defaults, one unit per column, whole policies, what --explain says
#     Megatron keeps, and --framework pytorch in PyTorch's terms;
#   - a size that overflows names the longest seq;
#   - usage errors exit 2 and run-time failures 1, in every command
#     (README, "Exit status");
#   - Hugging Face edges: max_position_embeddings is the configured maximum,
#     a Llama runs past it with a note, a vocabulary that cannot hold the
#     data is said so.
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

# ---- the cluster planner (issue 28, item 6; issue 30, item 0) -------------------------------------
expect_err --rc 2 "plan --framework: --batch beside --micro-batch" $R plan --framework megatron --batch 4 --micro-batch 2
grep -q -- "--batch and --micro-batch" "$T/stderr" && ok || bad "--batch with --micro-batch: $(cat "$T/stderr")"
# --host-mem 0: no host memory, so nothing that fits offloads (0 was read as "the device's")
l8="--framework megatron --model llama3-8b --tp 2 --sp --device h100-80gb --layers 8 --device-mem 30GiB"
$R plan $l8 --json 2>/dev/null | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['optimal']['memory']['host'] > 0, 'the fixture offloads'" && ok || bad "fixture: the optimum at 30GiB offloads"
$R plan $l8 --host-mem 0 --json 2>/dev/null | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['host_mem_bytes'] == 0 and d['optimal']['memory']['host'] == 0, (d['host_mem_bytes'], d['optimal'])
assert not [r for r in d['rows'] if r['memory']['host'] and r['fits']]" && ok || bad "--host-mem 0 still offloads"
# "...or use --distributed-optimizer" only where it is off
m175="--framework megatron --model 175b --tp 8 --sp --pp 8 --device-mem 40GiB"
expect_err --rc 1 "nothing fits" $R plan $m175
grep -q -- "--distributed-optimizer" "$T/stderr" && ok || bad "nothing fits: no word of --distributed-optimizer: $(cat "$T/stderr")"
expect_err --rc 1 "nothing fits, distributed optimizer on" $R plan $m175 --device-mem 20GiB --distributed-optimizer --dp 2
grep -q -- "--distributed-optimizer" "$T/stderr" && bad "suggests --distributed-optimizer when it is on: $(cat "$T/stderr")" || ok
# --help: every device, both tables' architectures, the framework's own defaults
$R plan --framework megatron --help > "$T/fh.txt"
$R plan --framework megatron --device nosuch 2>&1 | sed -n 's/.*expects one of \(.*\), got.*/\1/p' | tr -d ',' | tr ' ' '\n' > "$T/devs"
[ "$(wc -l < "$T/devs")" -ge 5 ] && ok || bad "the device list: $(cat "$T/devs")"
for d in $(cat "$T/devs"); do
    grep -q -- "--device NAME .*$d" "$T/fh.txt" && ok || bad "plan --framework --help leaves out --device $d"
done
grep -q "plain PyTorch GPT-2 block$" "$T/fh.txt" && bad "--help: the pytorch table is GPT-2 only" || ok
[ "$(grep -c "Llama" "$T/fh.txt")" -ge 2 ] && ok || bad "--help does not name Llama for both tables"
grep -A1 -- "^  --batch B" "$T/fh.txt" | grep -q "default 16" && bad "--help: --batch default 16 (the CPU trainer's)" || ok
grep -- "^  --dtype D" "$T/fh.txt" | grep -q "bf16 for megatron" && ok || bad "--help: --dtype's default is not Megatron's"
# one unit per column; whole policies
$R plan --framework megatron --model 175b --tp 8 --sp --pp 8 --global-batch 64 --recompute full > "$T/u.txt" 2>&1
grep -E "^(optimal|best|full) " "$T/u.txt" > "$T/ans"
[ "$(wc -l < "$T/ans")" -eq 4 ] && ok || bad "the answers: $(cat "$T/ans")"
grep -qE "[0-9] s( |,|$)" "$T/u.txt" && bad "times in seconds beside milliseconds: $(grep -E '[0-9] s( |,|$)' "$T/u.txt" | head -n 2)" || ok
[ "$(grep -oE '[0-9] (MiB|GiB)' "$T/ans" | cut -c3- | sort -u | wc -l)" -eq 1 ] && ok || bad "bytes in two units: $(cat "$T/ans")"
long="--framework megatron --model llama3-8b --tp 1 --device h100-80gb --seq 8192 --distributed-optimizer --dp 8 --layers 40"
pol=$($R plan $long --json 2>/dev/null | /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['optimal']['policy'])")
[ "${#pol}" -gt 200 ] && ok || bad "fixture: a policy over 200 characters (${#pol})"
$R plan $long 2>/dev/null | grep -qxF "                   remat policy: $pol" && ok || bad "the text cuts the optimal policy"
# --explain: what Megatron's full recompute keeps is each layer's input
$R plan --framework megatron --model llama3-8b --tp 4 --sp --recompute full --explain 2>/dev/null > "$T/x.txt"
grep -q "keep only its input; recompute the whole layer" "$T/x.txt" && ok || bad "--explain full: $(grep 'recompute the whole' "$T/x.txt" | head -n 1)"
grep -q "keep only its output" "$T/x.txt" && bad "--explain says Megatron keeps a layer's output" || ok
# --framework pytorch answers in PyTorch's terms
p1="--framework pytorch --model llama3.2-1b --device h100-80gb"
$R plan $p1 --tp 2 --sp --recompute full --recompute first:3 --recompute every:2 > "$T/pt.txt" 2>&1 || bad "pytorch: $(tail -n 2 "$T/pt.txt")"
grep -q "Megatron" "$T/pt.txt" && bad "--framework pytorch speaks Megatron: $(grep Megatron "$T/pt.txt" | head -n 2)" || ok
grep -q "^PyTorch: tp 2: torch.distributed.tensor.parallel .*SequenceParallel" "$T/pt.txt" && ok || bad "pytorch --tp --sp unexplained"
grep -A3 "^full " "$T/pt.txt" | grep -q 'PyTorch: every block in torch.utils.checkpoint: .*gradient_checkpointing_enable' && ok ||
    bad "pytorch full: no gradient_checkpointing_enable"
grep -A3 "^first:3 " "$T/pt.txt" | grep -q 'PyTorch: torch.utils.checkpoint .* on blocks 0-2$' && ok || bad "pytorch first:3: the blocks to wrap"
grep -A3 "^every:2 " "$T/pt.txt" | grep -q 'on the segments of blocks 0-1, 2-3,' && ok || bad "pytorch every:2: the segments"
$R plan $p1 --recompute full --recompute first:3 --json 2>/dev/null | /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['best_megatron'] is None, 'best_megatron in pytorch mode'
assert all(isinstance(r.get('pytorch'), str) and r['pytorch'] for r in d['rows'] + [d['optimal']]), 'a row without pytorch'
full, first = d['rows'][0], d['rows'][1]
assert full['policy'] == 'full' and 'gradient_checkpointing_enable' in full['pytorch'], full['pytorch']
assert first['pytorch'].endswith('on blocks 0-2'), first['pytorch']" && ok || bad "pytorch --json: not in PyTorch's terms"
$R plan --framework megatron --model llama3-8b --tp 4 --sp --json 2>/dev/null | grep -q '"pytorch"' && bad "megatron --json has pytorch rows" || ok

# ---- a size that overflows names the longest seq ------------------------------------------------
big="--layers 2 --dim 64 --heads 4 --batch 1 --seq 600000"
for cmd in plan schedule train profile bench; do
    expect_err --rc 2 "$cmd at seq 600000" $R $cmd $big
    lim=$(sed -n 's/.*the longest seq these sizes allow is \([0-9]*\)).*/\1/p' "$T/stderr")
    [ -n "$lim" ] && [ "$lim" -lt 600000 ] && ok || bad "$cmd --seq 600000: the limit is not named: $(cat "$T/stderr")"
done
$R plan --layers 2 --dim 64 --heads 4 --batch 1 --seq "$lim" --no-profile > /dev/null 2>&1 && ok || bad "plan at the named limit $lim fails"
expect_err --rc 2 "plan one past the limit" $R plan --layers 2 --dim 64 --heads 4 --batch 1 --seq $((lim + 1)) --no-profile
expect_err --rc 2 "framework at seq 600000" $R plan --framework megatron --model llama3-8b --tp 8 --sp --seq 600000
grep -q "the longest seq these sizes allow is" "$T/stderr" && ok || bad "framework: the limit is not named: $(cat "$T/stderr")"

# ---- exit status: 2 for what was given, 1 for a run that fails (README, "Exit status") --------------
for cmd in train schedule plan profile bench report export; do
    expect_err --rc 2 "$cmd: unknown flag" $R $cmd --frobnicate
    expect_err --rc 2 "$cmd: a flag without its value" $R $cmd --layers
    expect_err --rc 2 "$cmd: a bad value" $R $cmd --layers x
done
for cmd in train schedule plan profile bench; do
    expect_err --rc 2 "$cmd: a shape that cannot be" $R $cmd --dim 32 --heads 3
done
expect_err --rc 2 "unknown command" $R frobnicate
expect_err --rc 2 "train: --budget with --recompute" $R train $tiny --budget 1MiB --recompute full --steps 1
expect_err --rc 2 "train: a missing --data" $R train $tiny --data "$T/none.txt" --steps 1
expect_err --rc 2 "train: a missing --resume" $R train $tiny --resume "$T/none" --steps 1
expect_err --rc 2 "train: a missing --init-from" $R train --init-from "$T/none.bin" --steps 1
expect_err --rc 2 "export: a missing --resume" $R export --resume "$T/none" --out "$T/x.safetensors"
expect_err --rc 2 "plan: a missing --profile" $R plan $tiny --profile "$T/none.txt"
expect_err --rc 2 "plan: a missing --calibrate-from" $R plan $tiny --calibrate-from "$T/none.json"
expect_err --rc 2 "plan: a missing --model-config" $R plan --model-config "$T/none.json"
expect_err --rc 1 "train: a budget nothing fits" $R train $tiny --budget 1KiB --steps 1
expect_err --rc 1 "plan: a budget nothing fits" $R plan $tiny --budget 1KiB --no-profile
expect_err --rc 1 "bench: an unwritable output" $R bench $tiny --policies none --no-rss --steps 1 --warmup 0 --svg-pareto "$T/none/p.svg"
: > "$T/file"
expect_err --rc 1 "train: an unwritable --save" $R train $tiny --steps 1 --save "$T/file/ck"

# ---- Hugging Face edges ---------------------------------------------------------------------------
lt="--arch llama --layers 2 --dim 32 --heads 2 --batch 2 --threads 1 --steps 1 --quiet"
$R train $lt --seq 16 --max-seq 48 --save "$T/ll" > /dev/null 2>&1 && $R export --resume "$T/ll" --format hf --out "$T/llhf" > /dev/null \
    && grep -q '"max_position_embeddings": 48,' "$T/llhf/config.json" && ok || bad "export hf: max_position_embeddings is not the configured 48"
# RoPE has no position table: a longer run goes ahead, with a note, and exports its own maximum
$R train --init-from "$T/llhf" --seq 64 --batch 2 --threads 1 --steps 1 --quiet --save "$T/ll2" > /dev/null 2> "$T/l.err" && ok ||
    bad "llama --init-from at seq 64 > 48 positions refused: $(cat "$T/l.err")"
grep -q "^remat: note: --seq 64 is past the 48 positions" "$T/l.err" && ok || bad "no note for the longer run: $(cat "$T/l.err")"
$R train --init-from "$T/llhf" --seq 16 --max-seq 96 --batch 2 --threads 1 --steps 1 --quiet > /dev/null 2> "$T/l2.err" && ok ||
    bad "llama --init-from --max-seq 96 refused: $(cat "$T/l2.err")"
grep -q "^remat: note: a Llama has no position table (RoPE): --max-seq 96" "$T/l2.err" && ok || bad "no note for --max-seq 96"
$R train --init-from "$T/llhf" --seq 64 --max-seq 80 --batch 2 --threads 1 --steps 1 --quiet --save "$T/ll3" > /dev/null 2>&1 &&
    $R export --resume "$T/ll3" --format hf --out "$T/ll3hf" > /dev/null && grep -q '"max_position_embeddings": 80,' "$T/ll3hf/config.json" \
    && ok || bad "--seq 64 --max-seq 80: the export's max_position_embeddings is not 80"
$R export --resume "$T/ll2" --format hf --out "$T/ll2hf" > /dev/null && grep -q '"max_position_embeddings": 64,' "$T/ll2hf/config.json" \
    && ok || bad "the longer run's export: $(grep max_position "$T/ll2hf/config.json")"
# GPT-2's wpe has that many rows: still refused
$R train $tiny --max-seq 16 --steps 1 --quiet --save "$T/g" > /dev/null 2>&1 && $R export --resume "$T/g" --out "$T/g.safetensors" > /dev/null
expect_err --rc 2 "gpt2 --init-from past its positions" $R train --init-from "$T/g.safetensors" --seq 32 --batch 2 --steps 1
# the weights' vocabulary cannot hold the data: no advice to change --vocab
$R train $tiny --vocab 64 --steps 1 --quiet --save "$T/v" > /dev/null 2>&1 && $R export --resume "$T/v" --out "$T/v.safetensors" > /dev/null
i=0; while [ $i -lt 100 ]; do echo "hello world, some text"; i=$((i + 1)); done > "$T/text.txt"
expect_err --rc 2 "--init-from: a vocabulary that cannot hold the data" $R train --init-from "$T/v.safetensors" --data "$T/text.txt" --steps 1
grep -q "the weights of '$T/v.safetensors' have a vocabulary of 64, which cannot hold this data" "$T/stderr" && ok ||
    bad "the vocabulary error: $(cat "$T/stderr")"
grep -q -- "--vocab" "$T/stderr" && bad "the vocabulary error suggests --vocab, which --init-from refuses" || ok

finish cli_edges
