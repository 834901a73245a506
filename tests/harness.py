"""harness.py -- the Python tests' half of tests/harness.h and tests/lib.sh
(it is not a test): the exit code of a skipped test and the summary line
that tests/run_tests.sh reads.

  skip(name, why)              print "SKIP: why" and the summary, exit 77
  report(name, passed, failed) print "name: N passed, N failed, 0 skipped";
                               returns the exit code: 1 when anything failed,
                               or when no check ran (a test that checks
                               nothing cannot fail), else 0

77 is the automake convention for "skipped": run_tests.sh counts it as a
skip, never as a pass, and as a failure under CI=true when the test is
marked required (see run_tests.sh).
"""
import sys

EXIT_SKIP = 77


def skip(name, why):
    print("SKIP: " + why)
    print("%s: 0 passed, 0 failed, 1 skipped" % name)
    sys.exit(EXIT_SKIP)


def report(name, passed, failed):
    print("%s: %d passed, %d failed, 0 skipped" % (name, passed, failed))
    if passed + failed == 0:
        print("FAIL: %s: no check ran" % name)
        return 1
    return 1 if failed else 0
