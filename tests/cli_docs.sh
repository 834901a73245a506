#!/bin/sh
# The documents against the tree they describe, where a fact can go stale:
#   - every README section that a source file cites (README, "Name") is a
#     heading: a section (##) whose title starts with the name, or a
#     subsection (###) whose title is the name;
#   - the README's opening names each library the Makefile links;
#   - a count of the PyTorch oracle's configs in the README, if it states
#     one, is the length of tests/py_torch_oracle.py's CONFIGS;
#   - a size of a policy string stated in examples/ or include/ is
#     REMAT_POLICY_MAX's.
set -u
. "$(dirname "$0")/lib.sh"

# ---- README citations resolve ------------------------------------------------------
# the headings: their level (2 or 3), a space, the title without backticks
sed -n -e 's/^## /2 /p' -e 's/^### /3 /p' README.md | tr -d '`' > "$T/headings"
grep -rhoE 'README,? "[^"]+"' src include tests examples bench fuzz Makefile scripts 2>/dev/null | grep -v '"Name"$' |
    sed 's/^README,\{0,1\} "\(.*\)"$/\1/' | sort -u > "$T/cited"
[ -s "$T/cited" ] && ok || bad "no README citation found in the sources (the pattern is wrong?)"
while IFS= read -r sec; do
    if awk -v s="$sec" '{ t = substr($0, 3) } ($1 == 2 && index(t, s) == 1) || t == s { found = 1 }
                        END { exit !found }' "$T/headings"; then ok; else
        bad "a source cites README, \"$sec\": no such section ($(grep -rlF "\"$sec\"" src include tests examples bench fuzz 2>/dev/null | grep -v cli_docs | head -n 3 | tr '\n' ' '))"
    fi
done < "$T/cited"

# ---- the opening names the libraries -----------------------------------------------
# the text before the first section; each library the Makefile links
awk '/^## / { exit } { print }' README.md > "$T/opening"
for pair in -ldnnl:oneDNN openblas:OpenBLAS -fopenmp:OpenMP -ljansson:Jansson -lmpi:OpenMPI; do
    flag=${pair%%:*}; name=${pair#*:}
    grep -q -e "$flag" Makefile || continue
    grep -q "$name" "$T/opening" && ok || bad "the Makefile links $flag, but the README's opening does not name $name"
done

# ---- the oracle's configs ----------------------------------------------------------------
# (one entry a line: oracle_lib.config("name", ...))
n=$(awk '/^CONFIGS = \[/ { on = 1; next } on && /^]/ { exit } on && /^ *ol\.config\("/ { n++ } END { print n + 0 }' \
    tests/py_torch_oracle.py)
[ "$n" -gt 0 ] && ok || bad "no configs found in tests/py_torch_oracle.py's CONFIGS"
# the README's bullet on the oracle, up to the next bullet
awk '/^- `py_torch_oracle`/ { on = 1; print; next } on && /^(- |$)/ { exit } on { print }' README.md |
    tr '\n' ' ' > "$T/oracle"
[ -s "$T/oracle" ] && ok || bad "the README has no bullet on py_torch_oracle"
said=$(grep -oiE '\b(one|two|three|four|five|six|seven|eight|nine|ten|[0-9]+) configs' "$T/oracle" | head -n 1)
if [ -n "$said" ]; then
    w=$(echo "$said" | awk '{ print tolower($1) }')
    case $w in one) w=1;; two) w=2;; three) w=3;; four) w=4;; five) w=5;; six) w=6;; seven) w=7;; eight) w=8;;
        nine) w=9;; ten) w=10;; esac
    [ "$w" = "$n" ] && ok || bad "the README says the oracle runs \"$said\"; CONFIGS has $n"
fi

# ---- the size of a policy string -----------------------------------------------------------
max=$(sed -n 's/^#define REMAT_POLICY_MAX \([0-9]*\).*/\1/p' include/remat.h)
[ -n "$max" ] && ok || bad "REMAT_POLICY_MAX not found in include/remat.h"
grep -rniE 'polic.*[0-9]+ ?KiB' examples include > "$T/kib"
while IFS= read -r line; do
    k=$(echo "$line" | grep -oiE '[0-9]+ ?KiB' | head -n 1 | tr -dc 0-9)
    [ "$((k * 1024))" = "$max" ] && ok || bad "REMAT_POLICY_MAX is $max bytes, not $k KiB: $line"
done < "$T/kib"

finish cli_docs
