"""harness.py -- the Python tests' half of tests/harness.h and tests/lib.sh
(it is not a test): the exit code of a skipped test and the summary line
that tests/run_tests.sh reads.

  skip(name, why)              print "SKIP: why" and the summary, exit 77
  Checks()                     a counter of checks for report()
  import_remat_torch()         python/remat_torch over $BUILD/libremat.so
  report(name, passed, failed) print "name: N passed, N failed, 0 skipped";
                               returns the exit code: 1 when anything failed,
                               or when no check ran (a test that checks
                               nothing cannot fail), else 0

77 is the automake convention for "skipped": run_tests.sh counts it as a
skip, never as a pass, and as a failure under CI=true when the test is
marked required (see run_tests.sh).
"""
import os
import sys

EXIT_SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))


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


class Checks:
    """check(ok, msg): counts ok, prints "FAIL: msg" when not; returns ok.
    .good and .bad are the counts for report(), .rows a table a test prints."""

    def __init__(self):
        self.good = self.bad = 0
        self.rows = []

    def __call__(self, ok, msg):
        if ok:
            self.good += 1
        else:
            self.bad += 1
            print("FAIL: " + msg)
        return ok


class Caught(Checks):
    """the checks of a seeded fault: a failure is the fault caught, printed as such (its failures
    are counted by the test that seeded it, not reported as the test's own)"""

    def __call__(self, ok, msg):
        if not ok:
            print("caught: " + msg)
        self.good, self.bad = self.good + bool(ok), self.bad + (not ok)
        return ok


def import_remat_torch():
    """python/remat_torch of this checkout, loading $BUILD/libremat.so (REMAT_LIB unless set)"""
    os.environ.setdefault("REMAT_LIB", os.path.join(os.environ.get("BUILD", "build"), "libremat.so"))
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import remat_torch
    return remat_torch
