#!/bin/sh
# Replays every fuzz seed corpus fuzz/corpus/<name>/ through its target
# fuzz/fuzz_<name>.c, built without libFuzzer as $BUILD/fuzz/fuzz_<name>
# (fuzz/replay.c): every input must run without a crash or a failed
# property (under ASan and UBSan in `make test-sanitize`).  Every corpus
# holds at least one file (the replay refuses an empty one), and every
# corpus has its target: one without would never be replayed.
BUILD=${BUILD:-build}
n=0
for dir in fuzz/corpus/*/; do
    name=$(basename "$dir")
    [ -f "fuzz/fuzz_$name.c" ] || { echo "FAIL: corpus $dir has no target fuzz/fuzz_$name.c"; exit 1; }
done
for src in fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    corpus=fuzz/corpus/${name#fuzz_}
    bin=$BUILD/fuzz/$name
    [ -x "$bin" ] || { echo "FAIL: $bin is not built (make BUILD=$BUILD all)"; exit 1; }
    [ -d "$corpus" ] || { echo "FAIL: no seed corpus $corpus"; exit 1; }
    "$bin" "$corpus" 2>"$BUILD/tests/replay-$name.err" || {
        echo "FAIL: $name crashed or failed a property on its corpus:"; tail -n 20 "$BUILD/tests/replay-$name.err"; exit 1; }
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "FAIL: no fuzz targets"; exit 1; }
echo "corpora replayed: $n"
echo "cli_fuzz_replay: $n passed, 0 failed, 0 skipped"
