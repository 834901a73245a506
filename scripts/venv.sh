#!/bin/sh
# scripts/venv.sh DIR: makes DIR a virtual environment over Debian's
# /usr/bin/python3 holding python/requirements-test.txt (torch 2.13, the
# current one, transformers and megatron-core), unless it already does.  make test then
# runs every Python test under it as well as under Debian's torch 1.13
# (tests/run_tests.sh).  Nothing is loaded from a model hub: the tests build
# their models from configs.
#
# When the environment cannot be made (no network, no python3-venv) it says
# so in one line; under CI=true that is a failure (exit 1), elsewhere the
# torch 2.13 runs of the Python tests are reported as skipped.
dir=${1:-.venv}
req=$(dirname "$0")/../python/requirements-test.txt
py=$dir/bin/python
want=$(sed -n 's/^\(torch\|transformers\|megatron-core\)==\(.*\)/\1 \2/p' "$req" | tr '\n' ' ')
check() {
    "$py" - "$want" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
w = sys.argv[1].split()
sys.exit(0 if all(md.version(w[i]).split("+")[0] == w[i + 1] for i in range(0, len(w), 2)) else 1)
PY
}
[ -x "$py" ] && check && exit 0
fail() {
    echo "remat: the torch 2.13 environment $dir was not made ($1): the Python tests run under Debian's torch only" >&2
    [ "${CI:-}" = true ] && exit 1
    exit 0
}
if ! /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then
    [ "$(id -u)" = 0 ] || fail "python3-venv is missing; as root: apt-get install -y --no-install-recommends python3-venv"
    echo "remat: installing python3-venv" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-venv >/dev/null 2>&1 \
        || fail "apt-get install python3-venv failed"
fi
echo "remat: making $dir (torch 2.13, transformers: python/requirements-test.txt)" >&2
[ -x "$py" ] || /usr/bin/python3 -m venv "$dir" || fail "python3 -m venv failed"
"$py" -m pip install -q --disable-pip-version-check -r "$req" >&2 || fail "pip install -r $req failed"
check || fail "$dir does not hold the versions of $req"
