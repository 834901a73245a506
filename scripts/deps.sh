#!/bin/sh
# Installs the Debian packages remat needs to build, when they are missing.
# As root it runs apt-get itself; otherwise it prints the one command to run.
# Set REMAT_TEST_DEPS=1 to include the test-only oracle (python3-torch).
pkgs=""
[ -f /usr/include/x86_64-linux-gnu/cblas.h ] || [ -f /usr/include/cblas.h ] || pkgs="$pkgs libopenblas-dev"
ls /usr/lib/*/libopenblas.so >/dev/null 2>&1 || case "$pkgs" in *libopenblas-dev*) ;; *) pkgs="$pkgs libopenblas-dev";; esac
dpkg -s libopenblas0-pthread >/dev/null 2>&1 || pkgs="$pkgs libopenblas0-pthread"
dpkg -s libopenblas0-openmp >/dev/null 2>&1 || pkgs="$pkgs libopenblas0-openmp"
command -v cc >/dev/null 2>&1 || pkgs="$pkgs gcc"
# Jansson: the JSON parser of trace files (remat plan --calibrate-from)
[ -f /usr/include/jansson.h ] || pkgs="$pkgs libjansson-dev"
# oneDNN, the default GEMM engine (make GEMM=cblas builds without it)
if [ "${GEMM:-onednn}" = onednn ]; then
    [ -f /usr/include/oneapi/dnnl/dnnl.h ] || pkgs="$pkgs libdnnl-dev"
fi
# OpenMPI: data parallelism (src/comm/comm.c); mpirun runs the ranks
if [ "${MPI:-1}" = 1 ]; then
    dpkg -s libopenmpi-dev >/dev/null 2>&1 || pkgs="$pkgs libopenmpi-dev"
    command -v mpirun >/dev/null 2>&1 || pkgs="$pkgs openmpi-bin"
fi
if [ "${REMAT_TEST_DEPS:-0}" = 1 ]; then
    /usr/bin/python3 -c 'import torch, numpy' >/dev/null 2>&1 || pkgs="$pkgs python3-torch python3-numpy"
fi
[ -z "$pkgs" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "remat: installing missing packages:$pkgs" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $pkgs >/dev/null || {
        echo "remat: apt-get install failed; run: apt-get install -y --no-install-recommends$pkgs" >&2; exit 1; }
else
    echo "remat: missing packages; run as root: apt-get install -y --no-install-recommends$pkgs" >&2
    exit 1
fi
