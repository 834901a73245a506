# remat -- activation recomputation for GPT training, in C11.
#
#   make run     install missing Debian packages (as root), build, train on the embedded task
#   make test    build and run every test (prints "N passed, N failed, N skipped"),
#                the Python ones under Debian's torch 1.13 and under torch 2.13 (make venv)
#   make install PREFIX=/usr/local DESTDIR=   the CLI, both libraries, the
#                headers and remat.pc (pkg-config)
#
# BUILD=dir puts every output under dir (default build/), so several
# builds (e.g. the sanitizer one) can live side by side.

# GEMM=onednn (the default) links oneDNN for every matrix product, with the
# CBLAS beside it (--gemm cblas); GEMM=cblas builds on OpenBLAS alone, fp32
# only, under build-cblas/ unless BUILD says otherwise.
GEMM    ?= onednn
ifeq ($(GEMM),cblas)
BUILD   ?= build-cblas
else ifeq ($(GEMM),onednn)
BUILD   ?= build
else
$(error GEMM must be onednn or cblas, not '$(GEMM)')
endif
CC      ?= cc
OPT     ?= -O2 -march=native
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Wno-unused-parameter -fopenmp -fPIC -Iinclude
# Only what include/*.h declares with REMAT_API leaves libremat.so
# (tests/cli_symbols.sh); everything else is internal to the library.
CFLAGS  += -fvisibility=hidden
CPPFLAGS += -D_POSIX_C_SOURCE=200809L -DREMAT_OPENBLAS
# OpenBLAS built for OpenMP shares remat's OpenMP thread pool; the pthread
# build's spinning threads fight OpenMP's for the cores (1.6x slower steps
# on the 124M shape here).  Use it when installed, else any -lopenblas.
OPENBLAS_OMP := /usr/lib/x86_64-linux-gnu/openblas-openmp
ifneq ($(wildcard $(OPENBLAS_OMP)/libopenblas.so.0),)
LDLIBS  ?= $(OPENBLAS_OMP)/libopenblas.so.0 -Wl,-rpath,$(OPENBLAS_OMP) -lm
else
LDLIBS  ?= -lopenblas -lm
endif
LDFLAGS += -fopenmp
ifeq ($(GEMM),onednn)
CPPFLAGS += -DREMAT_ONEDNN
LDLIBS  += -ldnnl
endif
# Jansson reads and writes every JSON file: safetensors headers, Hugging Face config.json
# and indexes (src/io/), trace files (remat plan --calibrate-from, src/io/tracefile.c).
LDLIBS  += -ljansson
# MPI (OpenMPI from Debian) for data parallelism: only src/comm/comm.c sees
# its headers.  MPI=0 builds without it (every run is one rank).
MPI     ?= 1
ifeq ($(MPI),1)
MPI_CFLAGS ?= $(shell pkg-config --cflags ompi-c 2>/dev/null || echo -I/usr/lib/x86_64-linux-gnu/openmpi/include)
MPI_LIBS   ?= $(shell pkg-config --libs ompi-c 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/openmpi/lib -lmpi)
LDLIBS  += $(MPI_LIBS)
$(BUILD)/src/comm/comm.o: CPPFLAGS += -DREMAT_MPI $(MPI_CFLAGS)
endif

LIB_SRC  := $(sort $(wildcard src/core/*.c src/kernels/*.c src/table/*.c src/ops/*.c src/engine/*.c src/schedule/*.c \
                              src/planner/*.c src/data/*.c src/io/*.c src/comm/*.c))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c tests/tool_*.c))
BENCH_SRC:= $(sort $(wildcard bench/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN:= $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)

# The library's version (from include/remat.h) and its soname's major number.
VERSION := $(shell sed -n 's/^\#define REMAT_VERSION_STRING "\(.*\)"/\1/p' include/remat.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libremat.so.$(SOMAJOR)

.PHONY: all deps venv run test test-sanitize test-cblas bench clean fuzz install
all: $(BUILD)/remat $(BUILD)/libremat.a $(BUILD)/libremat.so $(TEST_BIN) $(BENCH_BIN) $(FUZZ_BIN)

deps:
	@GEMM=$(GEMM) MPI=$(MPI) sh scripts/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
# The flags live here: objects built with other ones (before -fvisibility=hidden,
# say) are rebuilt when the Makefile changes.
$(LIB_OBJ) $(CLI_OBJ): Makefile

# The page `remat report` fills in (src/cli/report.html) is compiled in as
# one C string, report_html[], a literal per line: sed quotes each line.
$(BUILD)/gen/report_html.h: src/cli/report.html
	@mkdir -p $(dir $@)
	{ echo '/* made from src/cli/report.html by the Makefile: do not edit */'; echo 'static const char report_html[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@.tmp && mv $@.tmp $@
$(BUILD)/src/cli/cmd_report.o: $(BUILD)/gen/report_html.h
$(BUILD)/src/cli/cmd_report.o: CPPFLAGS += -I$(BUILD)/gen

$(BUILD)/libremat.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The soname lets programs linked now keep running after compatible
# updates; the .so records the BLAS, OpenMP and libm it needs (NEEDED).
$(BUILD)/libremat.so: $(LIB_OBJ)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(SONAME) -o $@ $^ $(LDLIBS)

$(BUILD)/remat: $(CLI_OBJ) $(BUILD)/libremat.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libremat.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libremat.a tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Isrc -o $@ $< $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

# test_flash_fault is test_flash.c over a faulty copy of attn_tiles.c (its header says why)
$(BUILD)/tests/test_flash_fault: tests/test_flash.c src/kernels/attn_tiles.c

$(BUILD)/bench/%: bench/%.c bench/bench_util.h $(BUILD)/libremat.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Isrc -o $@ $< $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

# The Python binding (python/remat_torch) loads libremat.so: built here too,
# so that remat_torch works after the README's first command.
run: deps
	@$(MAKE) --no-print-directory $(BUILD)/remat $(BUILD)/libremat.so
	$(BUILD)/remat train

# torch 2.13 and transformers from PyPI (python/requirements-test.txt), in a
# virtual environment over Debian's python3 (VENV, default .venv): the
# Python tests run under it and under Debian's torch 1.13 (tests/run_tests.sh).
# Made once; without a network it says so and the torch 2 runs are skipped
# (a failure under CI=true).
VENV ?= .venv
venv:
	@sh scripts/venv.sh $(VENV)

# The tests see the build's compiler flags: tests/cli_example.sh installs
# the build and compiles examples/ against it with the same ones.
test: deps venv all
	@BUILD=$(BUILD) CC="$(CC)" OPT="$(OPT)" REMAT_VENV=$(VENV) sh tests/run_tests.sh

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (and
# LeakSanitizer): every test, the fuzz corpora replayed, the CLI tests.
# Idle OpenMP threads sleep (OMP_WAIT_POLICY=passive): spinning ones made the
# instrumented tests up to 7x slower on a busy machine.  Each test's time
# limit (tests/run_tests.sh) is 1800 s here, not 300.
SAN_OPT     = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_LDFLAGS = -fopenmp -fsanitize=address,undefined
# The other GEMM engine: a GEMM=cblas build (OpenBLAS alone, fp32 only)
# runs the kernels' tests, the bitwise policy matrix and the PyTorch oracles
# of GPT-2 and Llama (fp32 configs: bf16 needs oneDNN; test_schedule reports
# its bf16 half as skipped, exit 77, which is expected here), and
# tests/cblas_errors.sh: what needs oneDNN is refused in one line.
test-cblas:
	@$(MAKE) --no-print-directory GEMM=cblas BUILD=build-cblas build-cblas/tests/test_schedule \
	    build-cblas/tests/test_kernels build-cblas/tests/test_flash build-cblas/tests/tool_oracle build-cblas/remat
	@REMAT=build-cblas/remat sh tests/cblas_errors.sh > build-cblas/tests/cblas_errors.log 2>&1 \
	    && echo "ok    cblas_errors" || { echo "FAIL  cblas_errors"; cat build-cblas/tests/cblas_errors.log; exit 1; }
	@for t in test_kernels test_flash test_schedule; do \
	    build-cblas/tests/$$t > build-cblas/tests/$$t.log 2>&1; rc=$$?; \
	    if [ $$rc = 0 ] || [ $$rc = 77 ]; then echo "ok    $$t (cblas)"; \
	    else echo "FAIL  $$t (cblas)"; tail -n 20 build-cblas/tests/$$t.log; exit 1; fi; done
	@for t in py_torch_oracle py_llama_oracle; do \
	    BUILD=build-cblas REMAT_ORACLE_DTYPES=fp32 /usr/bin/python3 tests/$$t.py > build-cblas/tests/$$t.log 2>&1 \
	    && echo "ok    $$t (cblas)" || { echo "FAIL  $$t (cblas)"; tail -n 30 build-cblas/tests/$$t.log; exit 1; }; done

test-sanitize: deps venv
	@$(MAKE) --no-print-directory BUILD=build-san OPT="$(SAN_OPT)" LDFLAGS="$(SAN_LDFLAGS)" all
	@BUILD=build-san CC="$(CC)" OPT="$(SAN_OPT)" LDFLAGS="$(SAN_LDFLAGS)" REMAT_SANITIZE=1 REMAT_VENV=$(VENV) \
	    REMAT_TEST_TIMEOUT=$${REMAT_TEST_TIMEOUT:-1800} \
	    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 OMP_WAIT_POLICY=passive sh tests/run_tests.sh

bench: $(BUILD)/remat $(BENCH_BIN)

# Fuzz targets (fuzz/fuzz_*.c), one per parser.  Linked with the replay
# driver, without libFuzzer, for `make test` (tests/cli_fuzz_replay.sh feeds
# each its seed corpus fuzz/corpus/<name>/).  `make fuzz` builds them with
# clang -fsanitize=fuzzer,address,undefined under build-fuzz/ and runs each
# for FUZZ_SECONDS (fuzz/run.sh prints executions and crashes).
$(BUILD)/fuzz/%: fuzz/%.c fuzz/replay.c fuzz/fuzz.h $(BUILD)/libremat.a $(BUILD)/src/cli/args.o
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Isrc -o $@ $< fuzz/replay.c $(BUILD)/src/cli/args.o $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

$(BUILD)/fuzz/lf_%: fuzz/%.c fuzz/fuzz.h $(BUILD)/libremat.a $(BUILD)/src/cli/args.o
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=fuzzer -Isrc -o $@ $< $(BUILD)/src/cli/args.o $(BUILD)/libremat.a $(LDFLAGS) $(LDLIBS)

FUZZ_SECONDS ?= 60
fuzz:
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang \
	    OPT="-O1 -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    LDFLAGS="-fopenmp -fsanitize=address,undefined" $(FUZZ_SRC:fuzz/%.c=build-fuzz/fuzz/lf_%)
	@FUZZ_SECONDS=$(FUZZ_SECONDS) sh fuzz/run.sh build-fuzz

# make install [PREFIX=/usr/local] [DESTDIR=staging dir]: bin/remat,
# lib/libremat.a, lib/libremat.so.$(VERSION) with the links libremat.so.$(SOMAJOR)
# (the soname) and libremat.so, include/remat.h and remat_testing.h,
# lib/pkgconfig/remat.pc, and the Python package remat_torch
# (python/remat_torch/) in PYTHONDIR with _paths.py naming LIBDIR: it loads
# the libremat.so.$(SOMAJOR) installed beside it.  remat.pc's Libs.private lists what
# a static link of libremat.a needs: the build's own LDFLAGS and LDLIBS
# (OpenMP, the BLAS, libm, oneDNN, Jansson, MPI, as configured), so it
# follows GEMM= and MPI= (tests/cli_example.sh checks it against
# libremat.so's NEEDED entries).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig
PYTHONDIR  ?= $(PREFIX)/lib/python3/dist-packages
PY_SRC     := $(filter-out %/_paths.py,$(wildcard python/remat_torch/*.py python/remat_torch/*.pyi)) python/remat_torch/py.typed
install: $(BUILD)/remat $(BUILD)/libremat.a $(BUILD)/libremat.so remat.pc.in
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PCDIR)
	install -d $(DESTDIR)$(PYTHONDIR)/remat_torch
	install -m 644 $(PY_SRC) $(DESTDIR)$(PYTHONDIR)/remat_torch
	printf '# written by make install\nLIBDIR = "%s"\n' '$(LIBDIR)' > $(DESTDIR)$(PYTHONDIR)/remat_torch/_paths.py
	install -m 755 $(BUILD)/remat $(DESTDIR)$(BINDIR)/remat
	install -m 644 $(BUILD)/libremat.a $(DESTDIR)$(LIBDIR)/libremat.a
	install -m 755 $(BUILD)/libremat.so $(DESTDIR)$(LIBDIR)/libremat.so.$(VERSION)
	ln -sf libremat.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libremat.so
	install -m 644 include/remat.h include/remat_testing.h $(DESTDIR)$(INCLUDEDIR)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS_PRIVATE@|$(strip $(LDFLAGS) $(LDLIBS))|' \
	    remat.pc.in > $(DESTDIR)$(PCDIR)/remat.pc

clean:
	rm -rf build build-san build-*

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
