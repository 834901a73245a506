#!/bin/sh
# The documents against the tree they describe, where a fact can go stale:
#   - every README section that a source file cites (README, "Name") is a
#     heading: a section (##) whose title starts with the name, or a
#     subsection (###) whose title is the name;
#   - every section of a page in docs/ that a source file cites
#     (docs/PAGE.md, "Name") is a heading of that page (## or ###) whose
#     title is the name;
#   - every relative link in README.md and docs/*.md names a file that
#     exists and, after a #, a heading of it;
#   - the README's opening names each library the Makefile links;
#   - a count of the PyTorch oracle's configs in the README, if it states
#     one, is the length of tests/py_torch_oracle.py's CONFIGS;
#   - a size of a policy string stated in examples/ or include/ is
#     REMAT_POLICY_MAX's;
#   - the README quotes no run's measured losses or times: they go stale
#     with every change of bits or machine, so they live in docs/ with
#     their machine and date (issue 30).
set -u
. "$(dirname "$0")/lib.sh"

# ---- README citations resolve ------------------------------------------------------
# the headings: their level (2 or 3), a space, the title without backticks
sed -n -e 's/^## /2 /p' -e 's/^### /3 /p' README.md | tr -d '`' > "$T/headings"
# (a citation may break its line inside the name: sources are read with
# their comment leaders and line breaks folded into spaces, as below)
fold_src() { sed -e 's/^[[:space:]]*\(\*\|#\|\/\/\)[[:space:]]\{0,1\}//' "$1" | tr '\n' ' '; }
for f in $(grep -rlE 'README' src include tests examples bench fuzz python Makefile scripts 2>/dev/null); do
    fold_src "$f" | grep -oE 'README,? "[^"]+"' | grep -v '"Name"$'
done | sed -e 's/  */ /g' -e 's/^README,\{0,1\} "\(.*\)"$/\1/' | sort -u > "$T/cited"
[ -s "$T/cited" ] && ok || bad "no README citation found in the sources (the pattern is wrong?)"
while IFS= read -r sec; do
    if awk -v s="$sec" '{ t = substr($0, 3) } ($1 == 2 && index(t, s) == 1) || t == s { found = 1 }
                        END { exit !found }' "$T/headings"; then ok; else
        bad "a source cites README, \"$sec\": no such section ($(grep -rlF "\"$sec\"" src include tests examples bench fuzz python 2>/dev/null | grep -v cli_docs | head -n 3 | tr '\n' ' '))"
    fi
done < "$T/cited"

# ---- docs/ citations resolve ---------------------------------------------------------
for f in $(grep -rlE 'docs/[a-z0-9-]+\.md' src include tests examples bench fuzz python Makefile scripts 2>/dev/null); do
    fold_src "$f" | grep -oE 'docs/[a-z0-9-]+\.md,? "[^"]+"' | grep -v '"Name"$'
done | sed 's/  */ /g' | sort -u > "$T/dcited"
n_dcited=0
while IFS= read -r c; do
    n_dcited=$((n_dcited + 1))
    page=${c%%.md*}.md
    sec=$(echo "$c" | sed 's/^[^"]*"\(.*\)"$/\1/')
    if [ ! -f "$page" ]; then bad "a source cites $page, which does not exist"; continue; fi
    sed -n -e 's/^##\{1,2\} //p' "$page" | tr -d '`' | grep -qxF "$sec" && ok ||
        bad "a source cites $page, \"$sec\": no such heading there"
done < "$T/dcited"
[ "$n_dcited" -gt 0 ] && ok || bad "no docs/ citation found in the sources (the pattern is wrong?)"

# ---- links resolve -------------------------------------------------------------------
# a heading's anchor as GitHub makes it: lower case, backticks and
# punctuation but - and _ dropped, spaces turned into -
anchors() {
    awk '/^```/ { code = !code; next } !code && /^#+ / {
             t = tolower($0); sub(/^#+ /, "", t); gsub(/[^a-z0-9 _-]/, "", t); gsub(/ /, "-", t); print t }' "$1"
}
for doc in README.md docs/*.md; do
    dir=$(dirname "$doc")
    awk '/^```/ { code = !code; next } !code' "$doc" | grep -oE '\]\([^)]+\)' |
        sed 's/^](\(.*\))$/\1/' | grep -vE '^(https?|mailto):' > "$T/links"
    while IFS= read -r link; do
        file=${link%%#*}; anchor=
        case $link in *'#'*) anchor=${link#*#};; esac
        if [ -n "$file" ]; then target=$dir/$file; else target=$doc; fi
        if [ ! -f "$target" ]; then bad "$doc links to $link: no file $target"; continue; fi
        if [ -n "$anchor" ]; then
            case $target in *.md) ;; *) bad "$doc links to $link: an anchor into a file that is not Markdown"; continue;; esac
            anchors "$target" | grep -qxF "$anchor" && ok || bad "$doc links to $link: $target has no heading with that anchor"
        else
            ok
        fi
    done < "$T/links"
done

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

# ---- no measured run in the README -----------------------------------------------------------
if grep -nE '^step +[0-9]+/[0-9]+ \| loss|loss \*\*[0-9]|loss [0-9.]+ -> [0-9.]+ \(val|median step [0-9]' README.md > "$T/runs"; then
    bad "README.md quotes a run's measured figures (put them in docs/ with the machine and date): $(head -n 2 "$T/runs")"
else ok; fi

finish cli_docs
