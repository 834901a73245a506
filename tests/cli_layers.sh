#!/bin/sh
# The folder layout is the architecture: dependencies run one way, from the
# CLI down to the table.  Every #include "../DIR/..." in src/ must name a
# folder of a lower layer (README, "Architecture"):
#   0 core  1 kernels table data comm  2 ops schedule  3 engine planner  4 io  5 cli
# and the CLI includes no library header but remat.h (and remat_testing.h).
set -u
. "$(dirname "$0")/lib.sh"
rank() {
    case $1 in
    core) echo 0;; kernels|table|data|comm) echo 1;; ops|schedule) echo 2;;
    engine|planner) echo 3;; io) echo 4;; cli) echo 5;; *) echo 99;;
    esac
}
for f in src/*/*.c src/*/*.h; do
    dir=$(basename "$(dirname "$f")")
    r=$(rank "$dir")
    [ "$r" = 99 ] && { bad "$f: folder $dir has no layer; add it to tests/cli_layers.sh and the README"; continue; }
    for inc in $(sed -n 's|^#include "\.\./\([a-z_]*\)/.*|\1|p' "$f"); do
        ri=$(rank "$inc")
        if [ "$ri" -ge "$r" ]; then bad "$f (layer $r, $dir) includes ../$inc (layer $ri)"; else ok; fi
    done
done
# the CLI uses the public API only
for f in src/cli/*.c src/cli/*.h; do
    if grep -n '^#include "\.\./' "$f" >/dev/null; then bad "$f includes a library internal"; else ok; fi
done
finish cli_layers
