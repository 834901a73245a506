#!/bin/sh
# Each command's flags and its --help are one list (src/cli/args.c parses
# them from the tables --help is printed from).  The binary says which flags
# a command takes: `remat CMD --help FLAG` exits 0 when CMD takes FLAG, and
# fails with "unknown flag" when it does not (every name is checked before
# --help is looked at).  So, for every command:
#   - every flag its --help lists is taken;
#   - every other flag name any command lists, or the CLI's sources spell,
#     is refused: no command takes a flag its help leaves out.
# Then the shared flags behave alike everywhere: --budget auto (bench too),
# the pair --budget / --budget-activations, --threads' range.
set -u
. "$(dirname "$0")/lib.sh"

cmds="train|schedule|plan|plan --framework megatron|plan --table F|profile|bench|report|export"
# the flags a help lists: its lines that start with "  --name"
help_flags() { $R $1 --help 2>/dev/null | sed -n 's/^  \(--[a-z][a-z0-9-]*\).*/\1/p' | sort -u; }

: > "$T/all"
IFS='|'
for c in $cmds; do
    unset IFS
    name=$(echo "$c" | tr ' ' _)
    help_flags "$c" > "$T/h.$name"
    [ -s "$T/h.$name" ] && ok || bad "remat $c --help lists no flags"
    cat "$T/h.$name" >> "$T/all"
    IFS='|'
done
unset IFS
grep -oh '"--[a-z][a-z0-9-]*' src/cli/*.c | tr -d '"' >> "$T/all"
sort -u "$T/all" | grep -v -x -e --help > "$T/cands"

IFS='|'
for c in $cmds; do
    unset IFS
    name=$(echo "$c" | tr ' ' _)
    missing= extra=
    while read -r f; do
        if grep -q -x -e "$f" "$T/h.$name"; then
            $R $c --help "$f" > /dev/null 2> "$T/err" || missing="$missing $f"
        else
            $R $c --help "$f" > /dev/null 2> "$T/err" && extra="$extra $f"
        fi
    done < "$T/cands"
    [ -z "$missing" ] && ok || bad "remat $c --help lists flags it refuses:$missing"
    [ -z "$extra" ] && ok || bad "remat $c takes flags its --help leaves out:$extra"
    IFS='|'
done
unset IFS
expect_err --rc 2 "an unknown flag beside --help" $R train --help --no-such-flag
grep -q "unknown flag '--no-such-flag'" "$T/stderr" && ok || bad "unknown flag message: $(cat "$T/stderr")"

# plan's help lists what plan takes (these four were missing)
for f in --dtype --gemm --model --tp; do
    grep -q -x -e "$f" "$T/h.plan" && ok || bad "plan --help does not list $f"
done

# --budget auto: train, plan and bench alike (the memory available, here stood in for)
small="--layers 2 --dim 32 --heads 2 --seq 16 --batch 4 --threads 1"
REMAT_MEM_AVAILABLE=64MiB $R bench $small --policies none --steps 1 --warmup 0 --no-rss --sgemm-n 16 --budget auto --json \
    > "$T/b.json" 2> "$T/b.err" || bad "bench --budget auto: $(cat "$T/b.err")"
REMAT_MEM_AVAILABLE=64MiB $R plan $small --no-profile --budget-activations auto --json > "$T/p.json" 2> "$T/p.err" \
    || bad "plan --budget-activations auto: $(cat "$T/p.err")"
/usr/bin/python3 - "$T/b.json" "$T/p.json" <<'PY' && ok || bad "--budget auto is the available memory"
import json, sys
b, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert b["config"]["budget_bytes"] == 64 << 20 and not b["config"]["activations_only"], b["config"]
assert any(r["optimal"] for r in b["rows"]), "no optimum row"
assert p["budget_bytes"] == 64 << 20
PY
for c in train plan bench; do
    expect_err --rc 2 "$c --budget and --budget-activations" $R $c $small --budget 1GiB --budget-activations 1GiB
    grep -q "give one of --budget and --budget-activations" "$T/stderr" && ok || bad "$c: both budgets: $(cat "$T/stderr")"
    expect_err --rc 2 "$c --budget 0" $R $c $small --budget 0
done
# --threads: one declaration, one range, one message
for c in train plan profile bench; do
    expect_err --rc 2 "$c --threads 1025" $R $c --threads 1025
    cat "$T/stderr" >> "$T/threads"
done
[ "$(sort -u "$T/threads" | wc -l)" = 1 ] && ok || bad "--threads errors differ: $(sort -u "$T/threads")"

finish cli_flags
