#!/bin/sh
# The architecture is data (README, "Architecture"): the schedule compiler,
# the walker, the simulator, the planner, the cost model and the cluster
# planner read a table's structure and never name a model's tensors or
# parameters.  This test fails when src/schedule/ or src/planner/ (or the
# op dispatcher, src/ops/) names
#   - an id of a table's entries or of a parameter table (RT_QKV, RL_ATT,
#     GP_WTE, LP_QKVW, ...: the enums of src/table/tensors.h and params.h),
#   - a tensor's or a parameter's name as a string literal ("qkv", "att",
#     "wte", ...: every .name of src/table/*.c), or a Hugging Face name.
set -u
. "$(dirname "$0")/lib.sh"

dirs="src/schedule src/planner src/ops"
# the ids: enumerators of the tables' enums (not the generic RT_F_, RT_P_, ...)
sed -n '/^enum remat_tid {/,/^};/p; /^enum remat_llama_tid {/,/^};/p' src/table/tensors.h |
    grep -oE '\bR[TL]_[A-Z0-9_]+' | grep -vE '^RT_(X|NONE|COUNT)$' | sort -u > "$T/ids"
grep -oE '\b[GL]P_[A-Z0-9]+' src/table/params.h | grep -v '_COUNT$' | sort -u >> "$T/ids"
[ "$(wc -l < "$T/ids")" -gt 40 ] && ok || bad "found only $(wc -l < "$T/ids") table ids in src/table/*.h"
for id in $(cat "$T/ids"); do
    hits=$(grep -lw "$id" $(find $dirs -name '*.[ch]') 2>/dev/null | tr '\n' ' ')
    [ -z "$hits" ] && ok || bad "$id (a table's id) is named in $hits"
done

# the names: every entry's .name in the tensor tables, every parameter's
sed -n 's/.*\.name = "\([a-z_0-9]*\)".*/\1/p; s/.*GRAD(\(X##_[A-Z_]*, \)\{0,1\}"\([a-z_0-9]*\)".*/\2/p' \
    src/table/tensors.c src/table/frameworks.c src/table/frameworks_llama.c | sort -u > "$T/names"
sed -n 's/^ *\[[GL]P_[A-Z0-9]*\] = { "\([a-z_0-9]*\)".*/\1/p' src/table/params.c | sort -u >> "$T/names"
for want in qkv att res3 swiglu qk_rope scores d_qkv wte qkvw gateupw lmheadw; do
    grep -qx "$want" "$T/names" && ok || bad "the table names were not all found (no '$want'): fix this test's patterns"
done
for n in $(sort -u "$T/names"); do
    hits=$(grep -ln "\"$n\"" $(find $dirs -name '*.[ch]') 2>/dev/null | tr '\n' ' ')
    [ -z "$hits" ] && ok || bad "the tensor or parameter name \"$n\" is written in $hits"
done
hits=$(grep -ln '"model\.\|"transformer\.\|"h\.%d\|"lm_head' $(find $dirs -name '*.[ch]') | tr '\n' ' ')
[ -z "$hits" ] && ok || bad "a Hugging Face tensor name is written in $hits"
finish cli_arch_names
