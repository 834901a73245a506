#!/bin/sh
# Runs every libFuzzer target built by `make fuzz` (BUILDDIR/fuzz/lf_fuzz_*)
# for FUZZ_SECONDS each, starting from its seed corpus fuzz/corpus/<name>/
# (copied: new inputs go to BUILDDIR/fuzz-corpus/<name>/, the repository's
# seeds stay small), and prints one line per target: executions, new corpus
# size, crashes.  A crash leaves its input in BUILDDIR/fuzz-artifacts/ and
# makes the script exit non-zero; reproduce it with
#   BUILDDIR/fuzz/lf_fuzz_<name> BUILDDIR/fuzz-artifacts/<name>-crash-...
# and add the input to fuzz/corpus/<name>/ once fixed.
B=${1:-build-fuzz}
S=${FUZZ_SECONDS:-60}
total_crash=0
mkdir -p "$B/fuzz-artifacts" "$B/fuzz-corpus"
for bin in "$B"/fuzz/lf_fuzz_*; do
    [ -x "$bin" ] || continue
    t=$(basename "$bin"); t=${t#lf_fuzz_}
    work=$B/fuzz-corpus/$t
    mkdir -p "$work"
    case $t in shard|llmc|safetensors|checkpoint) maxlen=16384;; trace) maxlen=32768;; profile|hfconfig|hfindex|table) maxlen=4096;; *) maxlen=1024;; esac
    log=$B/fuzz-$t.log
    before=$(ls "$B/fuzz-artifacts" | grep -c "^$t-" || true)
    "$bin" -max_total_time="$S" -print_final_stats=1 -close_fd_mask=3 -timeout=10 -rss_limit_mb=4096 \
        -max_len=$maxlen -artifact_prefix="$B/fuzz-artifacts/$t-" "$work" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    after=$(ls "$B/fuzz-artifacts" | grep -c "^$t-" || true)
    crashes=$((after - before))
    [ $rc -ne 0 ] && [ $crashes -eq 0 ] && crashes=1
    total_crash=$((total_crash + crashes))
    printf '%-12s %10s executions in %ss, %4s new inputs, %d crashes%s\n' "$t" "${execs:-?}" "$S" \
        "$(ls "$work" | wc -l)" "$crashes" "$([ $crashes -gt 0 ] && echo " (see $log)")"
done
[ "$total_crash" -eq 0 ]
