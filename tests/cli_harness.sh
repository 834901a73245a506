#!/bin/sh
# Self-tests of the test machinery: a test that cannot fail is worse than no
# test, so each way a test could pass without checking anything is tried
# here, and must fail.
#   - a skip goes through the harness (TEST_SKIP, skip, harness.skip), where
#     it is counted; one printed by hand is a pass with a note.
set -u
. "$(dirname "$0")/lib.sh"

# ---- skips are counted ---------------------------------------------------------
# the harness files print the counted skips; this file names the pattern
hand=$(grep -n -E '(printf|puts|print|echo)[ (].*SKIP' tests/*.c tests/*.py tests/*.sh fuzz/*.c fuzz/*.sh 2>/dev/null |
       grep -v -E '^tests/(harness\.py|lib\.sh|run_tests\.sh|cli_harness\.sh):')
[ -z "$hand" ] && ok || bad "a skip printed by hand is never counted (use TEST_SKIP, skip or harness.skip): $hand"

finish cli_harness
