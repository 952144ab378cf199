# kvferry: plain Makefile, out-of-tree build.
#   make                 daemon, ctl, sim, libkvferry.{a,so} (+ CUDA kernels with CUDA=1, or
#                        when nvcc and a GPU driver are found; the first line says which)
#   make check-symbols   libkvferry.so, built and installed (DESTDIR), exports kvf_* alone
#   make demo            install-deps, build (one job per CPU), scripts/demo (README quick start)
#   make test            install-deps, build (one job per CPU), make check (README quick start; CI)
#   make check           unit + integration tests (Check), CPU mode; invariants fatal
#                        (KVF_FATAL_INVARIANTS=1, daemon/base/require.h)
#   make asan            the same under ASan+UBSan, in build-asan/
#   make tsan            the same under ThreadSanitizer, in build-tsan/
#   make tsan-integ      the suites that run threads (TSAN_SUITES), under ThreadSanitizer (CI)
#   make fuzz-short      each libFuzzer target for a short run (clang)
#   make bench-copy      CPU copy executor vs memcpy
#   make bench           two-daemon benchmark (scripts/bench-remote; JSON in bench/results/)
#   make install PREFIX=/usr/local DESTDIR=   (Debian layout; keeps an existing config;
#                        the kvferry Python package in PYDIR, the config in SYSCONFDIR)
#   make check-systemd   the installed unit under systemd 252 in systemd-nspawn (root)
#   make deb             the Debian packages (debian/) in build-deb/, lintian-checked
#   make check-deb       them installed, run, upgraded, purged in a Debian 12 nspawn root (root)
#   make check-pip       pip install ./python in a fresh venv; its kvferry moves requests
#   make uninstall       what make install put (same PREFIX/DESTDIR), but an edited config
#   make tag             the annotated tag v$(VERSION)
#   make soak            SOAK_MINUTES of mixed requests between two daemons, RSS/fd drift
#   make fault-matrix    each issue-13 fault against three daemons, a table (root; netns)
#   make chaos           CHAOS_MINUTES of seeded faults against four daemons, history checked
#   make chaos-short     the same for about 75 s with a fixed seed (root; netns)
#   make chaos-seeds     every seed that found a violation (tests/chaos/SEEDS) again
#   make count-request-files  daemon files one remote request executes, SEND to DONE (callgrind)
# Sources are found by directory: lib/*.c -> libkvferry-core.a (linked by the daemon, tools,
# tests), of which the client-facing files (CLIENT_SRCS) alone make libkvferry.{a,so};
# daemon/*.c and daemon/<module>/*.c -> kvferryd (each module folder is on the include path;
# scripts/check-includes keeps the folders' include graph pointing down),
# tools/<name>.c + tools/<name>_*.c -> build/<name>, tests/check_*.c and
# tests/integration/check_*.c -> one Check binary each, all linking the test support built once
# (tests/support/*.c -> libkvferry-testsupport.a; declared in tests/*.h and tests/integration/*.h).

BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?=
CC      ?= cc
OPT     ?= -O2

DAEMON_DIRS := daemon $(patsubst %/,%,$(sort $(wildcard daemon/*/)))

VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

WARN   := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
          -Wpointer-arith -Wformat=2 -Wno-format-nonliteral -Wundef -Wvla
CFLAGS_BASE := -std=gnu11 $(OPT) -g -fPIC -fno-strict-aliasing $(WARN) -MMD -MP \
          -D_GNU_SOURCE -DKVF_VERSION=\"$(VERSION)\" -Ilib -Ikernels $(addprefix -I,$(DAEMON_DIRS))

LIB_PKGS    := jansson yaml-0.1
DAEMON_PKGS := libuv ucx libsystemd libsodium
PKG_CFLAGS  := $(shell pkg-config --cflags $(LIB_PKGS) $(DAEMON_PKGS) 2>/dev/null)
LIB_LIBS    := $(shell pkg-config --libs $(LIB_PKGS) 2>/dev/null) -lpthread
# libmicrohttpd (the /metrics listener) without pkg-config: its .pc requires gnutls's -dev chain,
# which a bare node (scripts/fetch-debs) would need only for pkg-config.
DAEMON_LIBS := $(shell pkg-config --libs $(DAEMON_PKGS) 2>/dev/null) -lmicrohttpd $(LIB_LIBS) -lm
CHECK_LIBS  := $(shell pkg-config --libs check 2>/dev/null)
# kvferryctl's live views (top, transfers --watch) draw with ncurses (libncurses-dev)
CURSES_LIBS := $(shell pkg-config --libs ncurses 2>/dev/null || echo -lncurses)

ifneq ($(SAN),)
CFLAGS_BASE += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS     += -fsanitize=$(SAN)
CUDA        ?= 0
endif

# CUDA: the kernels are built where a GPU build is asked for (CUDA=1), or where nvcc is found
# and a GPU driver is present (/dev/nvidiactl, or libcuda in the linker cache); never with
# CUDA=0. nvcc alone (a CPU machine with the toolkit) is no reason: the kernels would only
# slow the build. The rest builds without them. Said once, at the start of a top-level make.
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
ifeq ($(origin CUDA),undefined)
ifeq ($(NVCC),)
CUDA     := 0
CUDA_WHY := no nvcc
else
CUDA_DRIVER := $(if $(wildcard /dev/nvidiactl),/dev/nvidiactl,$(if $(shell { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -m1 'libcuda\.so'),libcuda))
CUDA     := $(if $(CUDA_DRIVER),1,0)
CUDA_WHY := $(if $(CUDA_DRIVER),nvcc and a GPU driver ($(CUDA_DRIVER)) found,nvcc found but no GPU driver (/dev/nvidiactl, libcuda); CUDA=1 builds them)
endif
else
CUDA_WHY := CUDA=$(CUDA) given
endif
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean format,$(MAKECMDGOALS)),)
$(info kvferry: CUDA kernels $(if $(filter 1,$(CUDA)),on,off): $(CUDA_WHY))
endif
endif
CUDA_ARCH ?= -arch=sm_90
ifeq ($(CUDA),1)
CFLAGS_BASE += -DKVF_HAVE_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LIBS   := -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread
KERNEL_SRCS := $(wildcard kernels/*.cu)
else
CUDA_LIBS   :=
KERNEL_SRCS :=
endif

CFLAGS := $(CFLAGS_BASE) $(PKG_CFLAGS) $(EXTRA_CFLAGS)

LIB_SRCS     := $(wildcard lib/*.c) $(wildcard kernels/*.c)
DAEMON_SRCS  := $(wildcard daemon/*.c daemon/*/*.c)
TOOL_MAINS   := $(filter-out $(wildcard tools/*_*.c),$(wildcard tools/*.c))
TOOLS        := $(patsubst tools/%.c,$(BUILD)/%,$(TOOL_MAINS))
UNIT_TESTS   := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/check_*.c))
INTEG_TESTS  := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%,$(wildcard tests/integration/check_*.c))
GPU_TESTS    := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/check_*.c))
BENCHES      := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
PY_TESTS     := tests/python/check_python
# contrib/: the alert rules' promtool unit tests and the dashboard's queries parsed
CONTRIB_TESTS := tests/contrib/check_contrib
TS_SRCS      := $(wildcard tests/support/*.c)
TS_OBJS      := $(patsubst %.c,$(BUILD)/%.o,$(TS_SRCS))
TESTSUPPORT  := $(BUILD)/libkvferry-testsupport.a

# libkvferry, loaded into every inference worker: the public API and the worker protocol only
# (no libyaml, no daemon config, planner or logger). Exports kvf_* alone (lib/libkvferry.map).
CLIENT_SRCS  := $(wildcard lib/client*.c) $(wildcard lib/proto*.c) lib/frame.c lib/fdpass.c lib/errors.c

LIB_OBJS     := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
CLIENT_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(CLIENT_SRCS))
KERNEL_OBJS  := $(patsubst %.cu,$(BUILD)/%.cu.o,$(KERNEL_SRCS))
DAEMON_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(DAEMON_SRCS))
DAEMON_CORE  := $(filter-out $(BUILD)/daemon/main.o,$(DAEMON_OBJS))

CORE  := $(BUILD)/libkvferry-core.a
LIBA  := $(BUILD)/libkvferry.a
LIBSO := $(BUILD)/libkvferry.so

.PHONY: all demo test check check-symbols check-includes check-layers check-functions unit integration asan tsan tsan-integ tsan-integ-build fuzz fuzz-short bench-copy bench-ctl install install-needs benches uninstall check-systemd check-deb check-pip deb tag man clean format soak fault-matrix chaos chaos-short chaos-replay chaos-seeds ucx-stop-loop count-request-files test-loaded
all: $(BUILD)/kvferryd $(TOOLS) $(CORE) $(LIBA) $(LIBSO) $(UNIT_TESTS) $(INTEG_TESTS) $(GPU_TESTS) $(BENCHES) \
     $(BUILD)/man/kvferry.yaml.5

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_ARCH) -O3 -std=c++17 -Xcompiler -fPIC -MMD -MP -Ilib -Ikernels -DKVF_HAVE_CUDA=1 -c $< -o $@

# lib/ objects keep their symbols hidden; kvferry.h marks the kvf_* API visible.
$(BUILD)/lib/%.o: CFLAGS += -fvisibility=hidden

$(CORE): $(LIB_OBJS) $(KERNEL_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The static library is one relocatable object whose hidden (internal) symbols are made local,
# so a program linking it sees kvf_* alone, as users of the shared one do (check-symbols).
$(LIBA): $(CLIENT_OBJS)
	@mkdir -p $(dir $@)
	$(LD) -r -o $(BUILD)/libkvferry-client.o $^
	objcopy --localize-hidden $(BUILD)/libkvferry-client.o
	rm -f $@ && ar rcs $@ $(BUILD)/libkvferry-client.o

$(LIBSO): $(CLIENT_OBJS) lib/libkvferry.map
	$(CC) -shared -o $@ $(CLIENT_OBJS) $(LDFLAGS) -lpthread -Wl,-soname,libkvferry.so.0 \
	  -Wl,--version-script=lib/libkvferry.map

$(BUILD)/kvferryd: $(DAEMON_OBJS) $(CORE)
	$(CC) -o $@ $(DAEMON_OBJS) $(CORE) $(LDFLAGS) $(DAEMON_LIBS) $(CUDA_LIBS)

# tools/<name>.c plus its helpers tools/<name>_*.c. The helpers' objects are kept: as
# intermediates of the rule below make would delete them, and the next make (check after all)
# would rebuild them and relink the tools.
TOOL_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/*_*.c))
.SECONDARY: $(TOOL_OBJS)
.SECONDEXPANSION:
$(BUILD)/%: tools/%.c $$(addprefix $(BUILD)/,$$(addsuffix .o,$$(basename $$(wildcard tools/$$*_*.c)))) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(filter %.o,$^) $(CORE) $(LDFLAGS) $(LIB_LIBS) $(TOOL_LIBS) $(CUDA_LIBS) -lm
$(BUILD)/kvferryctl: TOOL_LIBS = $(CURSES_LIBS)

# kvferry-flood speaks UCX (a hostile peer for the link's tests): the one tool that links it.
$(BUILD)/kvferry-flood: LIB_LIBS += $(shell pkg-config --libs ucx 2>/dev/null)

# Test support: the harness bodies, compiled once (their headers stay in tests/ and tests/integration/).
$(BUILD)/tests/support/%.o: CFLAGS += -Itests
$(TESTSUPPORT): $(TS_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# Tests link the test support, the core library and every daemon object but main.o, so daemon
# modules are testable.
$(BUILD)/tests/%: tests/%.c $(TESTSUPPORT) $(DAEMON_CORE) $(CORE) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(TESTSUPPORT) $(DAEMON_CORE) $(CORE) $(LDFLAGS) $(CHECK_LIBS) $(DAEMON_LIBS) $(CUDA_LIBS)

$(BUILD)/bench/%: bench/%.c $(DAEMON_CORE) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(DAEMON_CORE) $(CORE) $(LDFLAGS) $(DAEMON_LIBS) $(CUDA_LIBS)

# Quick start: dependencies first, then a fresh make (it re-reads pkg-config after installing),
# one job per CPU unless make was given -j already (its jobserver then serves the sub-make).
JOBS_FLAG = $(if $(findstring jobserver,$(MAKEFLAGS))$(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 2))
demo:
	scripts/install-deps
	$(MAKE) $(JOBS_FLAG) all
	BUILD=$(BUILD) scripts/demo

test:
	scripts/install-deps
	$(MAKE) $(JOBS_FLAG) all
	$(MAKE) $(JOBS_FLAG) check

# KVF_MAKEVARS: how this build was made, for tests that run make themselves (check_install).
KVF_MAKEVARS := CUDA=$(CUDA) SAN=$(SAN) OPT=$(OPT)
export KVF_MAKEVARS
check: all check-symbols check-includes check-layers check-functions chaos-replay
	KVF_FATAL_INVARIANTS=1 BUILD=$(BUILD) scripts/run-tests $(UNIT_TESTS) $(INTEG_TESTS) $(GPU_TESTS) $(PY_TESTS) $(CONTRIB_TESTS)

# Folders are modules: a module includes only the modules below it (scripts/check-includes).
check-includes:
	scripts/check-includes

# Calls point down by symbols too (nm of each folder's objects; scripts/check-layers), and the
# largest circle of files calling each other in each folder is printed and bounded.
check-layers: all
	scripts/check-layers $(BUILD) --cycles

# No function of the request core (worker, request, engine, xfer) over 80 lines (scripts/check-functions).
check-functions:
	scripts/check-functions 80 daemon/worker daemon/request daemon/engine daemon/xfer

# The library as built and as `make install` lays it out exports nothing but kvf_*. After `all`:
# the install below is a second make, which must find everything built (no race under -j).
check-symbols: all
	scripts/check-symbols $(LIBSO) $(LIBA)
	rm -rf $(BUILD)/install-check && $(MAKE) --no-print-directory install DESTDIR=$(abspath $(BUILD))/install-check >/dev/null
	scripts/check-symbols $$(find $(BUILD)/install-check -name 'libkvferry.*' -type f)

unit: all
	KVF_FATAL_INVARIANTS=1 BUILD=$(BUILD) scripts/run-tests $(UNIT_TESTS)

integration: all
	KVF_FATAL_INVARIANTS=1 BUILD=$(BUILD) scripts/run-tests $(INTEG_TESTS) $(PY_TESTS) $(CONTRIB_TESTS)

asan:
	$(MAKE) BUILD=build-asan SAN=address,undefined CUDA=0 OPT=-O1 check

# ThreadSanitizer over every suite (the copy threads, the GPU completion thread, the daemons
# the integration suites start). TSAN_OPTIONS makes any report fail the binary; UCX's mmap
# hooks (libucm) crash under TSan at thread exit, so they are off (the daemon does not need them).
# TSan runs code 5-15x slower: Check's timeouts and every test wait (tu_ms, tests/testutil.h)
# are scaled.
TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 exitcode=66 $(TSAN_OPTIONS)" UCX_MEM_MMAP_HOOK_MODE=none \
	  CK_TIMEOUT_MULTIPLIER=4 KVF_TEST_SLOW=4
tsan:
	$(TSAN_ENV) $(MAKE) BUILD=build-tsan SAN=thread CUDA=0 OPT=-O1 check
# The suites whose code runs on more than one thread: the copy engine and its threads (unit, its
# remote gathers into another process, and
# two workers killed mid-copy), the move executor, the GPU completion thread (CPU mode here),
# the unmapper thread (unit, and a worker with a large pool exiting while others are served),
# the log writer thread (unit: a blocked output, the journal),
# the bounce path (staging, landing, scatters on the copy threads), the fragment path's held
# puts, two daemons' data paths and their failures, hostile peers and workers killed mid-request,
# a UCX flood (UCX's async thread calls link_ucsfix.c's interposers).
# The rest (planner, config, protocol codecs, ctl) is single-threaded: `make tsan` covers it.
TSAN_SUITES := tests/check_copyeng tests/check_copy_remote tests/check_move_exec tests/check_gpu_cpu_mode \
	tests/check_logsink \
	tests/check_unmapper tests/integration/check_worker_exit \
	tests/integration/check_copy_threads tests/integration/check_bounce_copy \
	tests/integration/check_remote tests/integration/check_remote_hostile \
	tests/integration/check_link_flood \
	tests/integration/check_frag_quar tests/integration/check_workers_faults \
	tests/integration/check_remote_fail
# Built for them: the suites, the daemon, the tools and the library they run, 180 compiles and
# links (`all` is 291: the other 100 test binaries and the benches; 382 s serially at load 7).
TSAN_NEEDS = $(BUILD)/kvferryd $(TOOLS) $(LIBSO) $(addprefix $(BUILD)/,$(TSAN_SUITES))
tsan-integ:
	$(MAKE) BUILD=build-tsan SAN=thread CUDA=0 OPT=-O1 tsan-integ-build
	$(TSAN_ENV) KVF_FATAL_INVARIANTS=1 BUILD=build-tsan scripts/run-tests $(addprefix build-tsan/,$(TSAN_SUITES))
tsan-integ-build: $(TSAN_NEEDS)

# libFuzzer targets: tests/fuzz/fuzz_<name>.c, built with clang against the lib sources.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZERS   := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
FUZZ_TIME ?= 20
# tests/support/promcheck.c: the Prometheus validator fuzz_prom_json checks lib/prom.c against.
# The lib sources are compiled once for every target (instrumented, fuzzer-no-link: libFuzzer's
# main comes only with a target's link).
FUZZ_CC   := clang -std=gnu11 -g -O1 -D_GNU_SOURCE -DKVF_VERSION=\"$(VERSION)\" -Ilib -Ikernels -Itests \
	  $(PKG_CFLAGS)
FUZZ_OBJS := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(wildcard lib/*.c) tests/support/promcheck.c)
.SECONDARY: $(FUZZ_OBJS)
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@
$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $@ $< $(FUZZ_OBJS) $(LIB_LIBS)
fuzz: $(FUZZERS)
# One run per target (make -j runs them side by side; each is one process on one core).
fuzz-short: $(addprefix fuzz-run-,$(notdir $(FUZZERS)))
	@echo "fuzz: all targets clean"
fuzz-run-%: $(BUILD)/fuzz/%
	@n=$*; mkdir -p $(BUILD)/fuzz/corpus-$$n; seeds=tests/fuzz/corpus/$$n; [ -d $$seeds ] || seeds=; \
	  echo "fuzz: $$n for $(FUZZ_TIME)s"; \
	  $< -max_total_time=$(FUZZ_TIME) -print_final_stats=0 $(BUILD)/fuzz/corpus-$$n $$seeds >$(BUILD)/fuzz/$$n.log 2>&1 \
	    || { tail -40 $(BUILD)/fuzz/$$n.log; exit 1; }

bench-copy: all
	$(BUILD)/bench/bench_copy

# Two daemons, real sims, both paths, vs ucx_perftest and memcpy (scripts/bench-remote)
bench: all
	BUILD=$(BUILD) scripts/bench-remote

# Control overhead (tiny, one request in flight, BENCH_CTL_N requests) and planning time.
bench-ctl: all
	BUILD=$(BUILD) scripts/bench-ctl
	$(BUILD)/bench/bench_plan

# The daemon source files one remote request executes, SEND to DONE, per daemon and folder, both
# paths (scripts/count-request-files; valgrind's callgrind; issue 24's measure). Not in `check`.
count-request-files: all
	BUILD=$(BUILD) scripts/count-request-files --path both

# SOAK_MINUTES (default 5) of mixed requests between two real daemons (fragment, bounce, same
# daemon, refused), RSS and fd counts of both sampled after every round, a failure if either
# grows past its tolerance after the warm-up (scripts/soak says which knobs). Not in `check`.
soak: all
	BUILD=$(BUILD) scripts/soak

# kill -9 of each daemon and worker mid-request, SIGSTOP, a veth partition, a hostile worker:
# time to the first typed end, what was held and released, the bystander (scripts/fault-matrix;
# root, network namespaces). FM_OUT=file.md keeps the table. Not in `check`.
fault-matrix: all
	BUILD=$(BUILD) scripts/fault-matrix

# `make test` TL_RUNS times (3) under TL_HOGS busy loops (4x the CPUs): a table of load, counts,
# failed cases and seconds per run (scripts/test-loaded; TL_OUT=file.md keeps it). Not in CI.
test-loaded:
	scripts/test-loaded

# Four daemons in two network namespaces, instances of several shapes restarting and rescaling,
# faults at seeded random times; scripts/chaos-check judges the history (each request ended
# once, DONE bitwise, typed errors in time, every daemon back to its baseline). CHAOS_SEED,
# CHAOS_MINUTES (3), CHAOS_EPOCH (1: restarts at another shape with reused ids; issue 26).
# chaos-short: a fixed seed, 45 s of faults, one every 3 s on average (about 75-90 s in all).
# Root. Not in `check`.
chaos: all
	BUILD=$(BUILD) scripts/chaos

# The checker against the saved histories of tests/chaos/ (seconds; in `check`).
chaos-replay:
	scripts/chaos-replay

# Every seed of tests/chaos/SEEDS again (each with its minutes and settings).
chaos-seeds: all
	grep -v '^#' tests/chaos/SEEDS | sed 's/ *#.*//' | { rc=0; while read -r seed min vars; do \
	  env $$vars BUILD=$(BUILD) CHAOS_SEED=$$seed CHAOS_MINUTES=$$min scripts/chaos || rc=1; \
	done; exit $$rc; }

CHAOS_SHORT_SEED ?= 26
chaos-short: all
	BUILD=$(BUILD) CHAOS_SEED=$(CHAOS_SHORT_SEED) CHAOS_MINUTES=0.75 CHAOS_FAULT_S=3 \
	  CHAOS_SETTLE_S=30 scripts/chaos

# The context daemon frozen mid bulk traffic over tcp and resumed after its peer dropped it, in a
# loop (docs/UCX.md trap 16; root, network namespaces; about 10 s a round, US_ROUNDS=20)
ucx-stop-loop: all
	BUILD=$(BUILD) scripts/ucx-stop-loop

# Installs as a Debian package would lay it out: the library in the multiarch libdir with a
# pkg-config file, kvferry-sim (a test tool) under $(TOOLSDIR), the layout schema under
# $(DATADIR), man pages, the unit and its sysusers.d file, the Python package where Debian's
# python3 looks for the prefix (/usr: lib/python3/dist-packages; /usr/local:
# lib/python3.X/dist-packages; any other prefix: lib/python3.X/site-packages, for PYTHONPATH).
# The config goes to $(SYSCONFDIR)/kvferry: /etc for PREFIX=/usr, PREFIX/etc otherwise (the
# unit is written with that path). An existing kvferry.yaml is never overwritten: the shipped
# one goes beside it as kvferry.yaml.dist. Without DESTDIR (a real install) the kvferry user is
# created (systemd-sysusers) and ldconfig runs, as a package's postinst would; with DESTDIR
# nothing outside it is touched. The Debian packages (debian/) install through this target.
MULTIARCH  := $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || $(CC) -print-multiarch 2>/dev/null)
LIBDIR     ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
TOOLSDIR   ?= $(PREFIX)/lib/kvferry
DATADIR    ?= $(PREFIX)/share/kvferry
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
DOCDIR     ?= $(PREFIX)/share/doc/kvferry
# Debian's own python3 (a pyenv or venv python3 on PATH would name another version)
PYTHON     ?= $(firstword $(wildcard /usr/bin/python3) python3)
PY_XY      := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR      ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(if \
              $(filter /usr/local,$(PREFIX)),$(PREFIX)/lib/python$(PY_XY)/dist-packages,$(PREFIX)/lib/python$(PY_XY)/site-packages))
MAN_PAGES  := man/kvferryd.8 man/kvferryctl.8 $(BUILD)/man/kvferry.yaml.5
PY_FILES   := $(notdir $(wildcard python/kvferry/*.py))

# kvferry.yaml(5): man/kvferry.yaml.5.in with its @KEYS@ line replaced by every key of the cfg
# table (tools-free: a tiny program prints them), so the page cannot drift from the code.
$(BUILD)/man/gen_yaml5: man/gen_yaml5.c $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(CORE) $(LDFLAGS) $(LIB_LIBS) $(CUDA_LIBS)
$(BUILD)/man/kvferry.yaml.5: man/kvferry.yaml.5.in $(BUILD)/man/gen_yaml5 VERSION
	$(BUILD)/man/gen_yaml5 > $@.keys
	sed -e '/^@KEYS@$$/{r $@.keys' -e 'd}' -e 's|@VERSION@|$(VERSION)|g' $< > $@
	rm -f $@.keys
man: $(BUILD)/man/kvferry.yaml.5

# What install puts in place, and no more (the Debian build makes these and the benches alone)
install-needs: $(BUILD)/kvferryd $(TOOLS) $(LIBA) $(LIBSO) $(BUILD)/man/kvferry.yaml.5
benches: $(BENCHES)

install: install-needs
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(TOOLSDIR) $(DESTDIR)$(DATADIR) $(DESTDIR)$(SYSCONFDIR)/kvferry $(DESTDIR)$(UNITDIR) \
	  $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)
	install -m 0755 $(BUILD)/kvferryd $(BUILD)/kvferryctl $(BUILD)/kvferry-topo $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/kvferry-sim $(DESTDIR)$(TOOLSDIR)/
	install -m 0644 $(LIBA) $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(LIBSO) $(DESTDIR)$(LIBDIR)/libkvferry.so.0
	ln -sf libkvferry.so.0 $(DESTDIR)$(LIBDIR)/libkvferry.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	  lib/kvferry.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/kvferry.pc
	install -m 0644 lib/kvferry.h $(DESTDIR)$(PREFIX)/include/
	install -m 0644 lib/kvferry-layout.schema.json $(DESTDIR)$(DATADIR)/
	install -m 0644 man/kvferryd.8 man/kvferryctl.8 man/kvferry-topo.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(BUILD)/man/kvferry.yaml.5 $(DESTDIR)$(MANDIR)/man5/
	@conf=$(DESTDIR)$(SYSCONFDIR)/kvferry/kvferry.yaml; \
	if [ ! -e $$conf ]; then install -m 0644 config/kvferry.yaml $$conf; \
	elif cmp -s config/kvferry.yaml $$conf; then rm -f $$conf.dist; \
	else install -m 0644 config/kvferry.yaml $$conf.dist; \
	  echo "install: kept your $$conf; the shipped one is $$conf.dist (diff them to see what is new)"; fi
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' systemd/kvferry.service \
	  > $(DESTDIR)$(UNITDIR)/kvferry.service
	install -m 0644 systemd/kvferry.sysusers $(DESTDIR)$(SYSUSERSDIR)/kvferry.conf
	install -m 0644 systemd/gpu-host.conf $(DESTDIR)$(DOCDIR)/gpu-host.conf
	install -d $(DESTDIR)$(PYDIR)/kvferry
	install -m 0644 $(addprefix python/kvferry/,$(PY_FILES)) $(DESTDIR)$(PYDIR)/kvferry/
	@if [ -z "$(DESTDIR)" ]; then \
	  if command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/kvferry.conf; fi; \
	  if command -v ldconfig >/dev/null; then ldconfig; fi; \
	  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; fi

# What install put there, gone; the config stays where it was edited (as a package's remove
# keeps conffiles), and so does the kvferry user (Debian's policy: system users are not
# deleted, their ids may still own files).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/kvferryd $(DESTDIR)$(PREFIX)/bin/kvferryctl $(DESTDIR)$(PREFIX)/bin/kvferry-topo \
	  $(DESTDIR)$(TOOLSDIR)/kvferry-sim $(DESTDIR)$(LIBDIR)/libkvferry.a \
	  $(DESTDIR)$(LIBDIR)/libkvferry.so.0 $(DESTDIR)$(LIBDIR)/libkvferry.so \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/kvferry.pc $(DESTDIR)$(PREFIX)/include/kvferry.h \
	  $(DESTDIR)$(DATADIR)/kvferry-layout.schema.json $(DESTDIR)$(MANDIR)/man8/kvferryd.8 \
	  $(DESTDIR)$(MANDIR)/man8/kvferryctl.8 $(DESTDIR)$(MANDIR)/man8/kvferry-topo.8 $(DESTDIR)$(MANDIR)/man5/kvferry.yaml.5 \
	  $(DESTDIR)$(UNITDIR)/kvferry.service $(DESTDIR)$(SYSUSERSDIR)/kvferry.conf \
	  $(DESTDIR)$(DOCDIR)/gpu-host.conf $(DESTDIR)$(SYSCONFDIR)/kvferry/kvferry.yaml.dist
	rm -rf $(DESTDIR)$(PYDIR)/kvferry
	@conf=$(DESTDIR)$(SYSCONFDIR)/kvferry/kvferry.yaml; \
	if cmp -s config/kvferry.yaml $$conf; then rm -f $$conf; \
	elif [ -e $$conf ]; then echo "uninstall: kept your edited $$conf"; fi
	-rmdir $(DESTDIR)$(TOOLSDIR) $(DESTDIR)$(DATADIR) $(DESTDIR)$(DOCDIR) \
	  $(DESTDIR)$(SYSCONFDIR)/kvferry 2>/dev/null
	@if [ -z "$(DESTDIR)" ]; then \
	  if command -v ldconfig >/dev/null; then ldconfig; fi; \
	  if [ -d /run/systemd/system ]; then systemctl daemon-reload; fi; fi

# The unit under a real systemd 252 in a container (scripts/check-systemd; needs root).
check-systemd: all
	BUILD=$(BUILD) scripts/check-systemd

# The Debian packages (debian/, dpkg-buildpackage; CUDA=0 unless the build profile
# pkg.kvferry.cuda): built from a copy of this tree in DEB_OUT (default build-deb/), lintian
# at the error and warning levels. check-deb also installs, runs, upgrades and purges them in a
# fresh Debian 12 root under systemd-nspawn (scripts/check-deb; root).
deb:
	scripts/check-deb --build-only
check-deb:
	scripts/check-deb

# pip install ./python in a fresh venv, offline; the venv's kvferry moves requests through this
# build's kvferryd (scripts/check-pip)
check-pip: $(BUILD)/kvferryd $(LIBSO)
	BUILD=$(BUILD) scripts/check-pip

# An annotated tag v$(VERSION) on HEAD, refused on a dirty tree or if it exists. debian/changelog
# must name the same version (the packages are versioned from it).
tag:
	@git diff --quiet HEAD || { echo "tag: commit first" >&2; exit 1; }
	@[ "$$(dpkg-parsechangelog -S Version 2>/dev/null || echo $(VERSION))" = "$(VERSION)" ] || \
	  { echo "tag: debian/changelog is at $$(dpkg-parsechangelog -S Version), VERSION at $(VERSION)" >&2; exit 1; }
	git tag -a v$(VERSION) -m "kvferry $(VERSION)"
	@echo "tag: v$(VERSION) made; push it with git push origin v$(VERSION)"

clean:
	rm -rf build build-asan build-tsan build-deb

format:
	clang-format -i $(wildcard lib/*.[ch] daemon/*.[ch] daemon/*/*.[ch] tools/*.[ch] tests/*.[ch] tests/*/*.[ch] kernels/*.[ch])

-include $(shell find $(BUILD) -name '*.d' -type f 2>/dev/null)
