# kvferry: plain Makefile, out-of-tree build.
#   make                 daemon, ctl, sim, libkvferry.{a,so} (+ CUDA kernels when nvcc exists)
#   make check-symbols   libkvferry.so, built and installed (DESTDIR), exports kvf_* alone
#   make demo            install-deps, build, scripts/demo (README quick start)
#   make test            install-deps, build, make check (README quick start; CI)
#   make check           unit + integration tests (Check), CPU mode
#   make asan            the same under ASan+UBSan, in build-asan/
#   make tsan            the same under ThreadSanitizer, in build-tsan/
#   make fuzz-short      each libFuzzer target for a short run (clang)
#   make bench-copy      CPU copy executor vs memcpy
#   make bench           two-daemon benchmark (scripts/bench-remote; JSON in bench/results/)
#   make install PREFIX=/usr/local DESTDIR=
# Sources are found by directory: lib/*.c -> libkvferry-core.a (linked by the daemon, tools,
# tests), of which the client-facing files (CLIENT_SRCS) alone make libkvferry.{a,so};
# daemon/*.c and daemon/<module>/*.c -> kvferryd (each module folder is on the include path;
# scripts/check-includes keeps the folders' include graph pointing down),
# tools/<name>.c + tools/<name>_*.c -> build/<name>, tests/check_*.c and
# tests/integration/check_*.c -> one Check binary each.

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
DAEMON_LIBS := $(shell pkg-config --libs $(DAEMON_PKGS) 2>/dev/null) $(LIB_LIBS) -lm
CHECK_LIBS  := $(shell pkg-config --libs check 2>/dev/null)

ifneq ($(SAN),)
CFLAGS_BASE += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS     += -fsanitize=$(SAN)
CUDA        ?= 0
endif

# CUDA: on when nvcc is found (override with CUDA=0). The rest builds without it.
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
ifeq ($(NVCC),)
CUDA ?= 0
endif
CUDA ?= 1
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

# libkvferry, loaded into every inference worker: the public API and the worker protocol only
# (no libyaml, no daemon config, planner or logger). Exports kvf_* alone (lib/libkvferry.map).
CLIENT_SRCS  := $(wildcard lib/client*.c) lib/proto.c lib/frame.c lib/fdpass.c lib/errors.c

LIB_OBJS     := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
CLIENT_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(CLIENT_SRCS))
KERNEL_OBJS  := $(patsubst %.cu,$(BUILD)/%.cu.o,$(KERNEL_SRCS))
DAEMON_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(DAEMON_SRCS))
DAEMON_CORE  := $(filter-out $(BUILD)/daemon/main.o,$(DAEMON_OBJS))

CORE  := $(BUILD)/libkvferry-core.a
LIBA  := $(BUILD)/libkvferry.a
LIBSO := $(BUILD)/libkvferry.so

.PHONY: all demo test check check-symbols check-includes unit integration asan tsan fuzz fuzz-short bench-copy install clean format
all: $(BUILD)/kvferryd $(TOOLS) $(CORE) $(LIBA) $(LIBSO) $(UNIT_TESTS) $(INTEG_TESTS) $(GPU_TESTS) $(BENCHES)

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

$(LIBA): $(CLIENT_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBSO): $(CLIENT_OBJS) lib/libkvferry.map
	$(CC) -shared -o $@ $(CLIENT_OBJS) $(LDFLAGS) -lpthread -Wl,-soname,libkvferry.so.0 \
	  -Wl,--version-script=lib/libkvferry.map

$(BUILD)/kvferryd: $(DAEMON_OBJS) $(CORE)
	$(CC) -o $@ $(DAEMON_OBJS) $(CORE) $(LDFLAGS) $(DAEMON_LIBS) $(CUDA_LIBS)

# tools/<name>.c plus its helpers tools/<name>_*.c
.SECONDEXPANSION:
$(BUILD)/%: tools/%.c $$(addprefix $(BUILD)/,$$(addsuffix .o,$$(basename $$(wildcard tools/$$*_*.c)))) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(filter %.o,$^) $(CORE) $(LDFLAGS) $(LIB_LIBS) $(CUDA_LIBS) -lm

# Tests link the core library and every daemon object but main.o, so daemon modules are testable.
$(BUILD)/tests/%: tests/%.c $(DAEMON_CORE) $(CORE) tests/testutil.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(DAEMON_CORE) $(CORE) $(LDFLAGS) $(CHECK_LIBS) $(DAEMON_LIBS) $(CUDA_LIBS)

$(BUILD)/bench/%: bench/%.c $(DAEMON_CORE) $(CORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(DAEMON_CORE) $(CORE) $(LDFLAGS) $(DAEMON_LIBS) $(CUDA_LIBS)

# Quick start: dependencies first, then a fresh make (it re-reads pkg-config after installing).
demo:
	scripts/install-deps
	$(MAKE) all
	BUILD=$(BUILD) scripts/demo

test:
	scripts/install-deps
	$(MAKE) all
	$(MAKE) check

check: all check-symbols check-includes
	BUILD=$(BUILD) scripts/run-tests $(UNIT_TESTS) $(INTEG_TESTS) $(GPU_TESTS)

# Folders are modules: a module includes only the modules below it (scripts/check-includes).
check-includes:
	scripts/check-includes

# The library as built and as `make install` lays it out exports nothing but kvf_*. After `all`:
# the install below is a second make, which must find everything built (no race under -j).
check-symbols: all
	scripts/check-symbols $(LIBSO)
	rm -rf $(BUILD)/install-check && $(MAKE) --no-print-directory install DESTDIR=$(abspath $(BUILD))/install-check >/dev/null
	scripts/check-symbols $$(find $(BUILD)/install-check -name 'libkvferry.so*' -type f)

unit: all
	BUILD=$(BUILD) scripts/run-tests $(UNIT_TESTS)

integration: all
	BUILD=$(BUILD) scripts/run-tests $(INTEG_TESTS)

asan:
	$(MAKE) BUILD=build-asan SAN=address,undefined CUDA=0 OPT=-O1 check

# ThreadSanitizer over every suite (the copy threads, the GPU completion thread, the daemons
# the integration suites start). TSAN_OPTIONS makes any report fail the binary; UCX's mmap
# hooks (libucm) crash under TSan at thread exit, so they are off (the daemon does not need them).
# TSan runs code 5-15x slower: Check's timeouts and the link tests' waits are scaled.
tsan:
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 $(TSAN_OPTIONS)" UCX_MEM_MMAP_HOOK_MODE=none \
	  CK_TIMEOUT_MULTIPLIER=4 KVF_TEST_SLOW=4 \
	  $(MAKE) BUILD=build-tsan SAN=thread CUDA=0 OPT=-O1 check

# libFuzzer targets: tests/fuzz/fuzz_<name>.c, built with clang against the lib sources.
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZERS   := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
FUZZ_TIME ?= 20
$(BUILD)/fuzz/%: tests/fuzz/%.c $(wildcard lib/*.c lib/*.h)
	@mkdir -p $(dir $@)
	clang -std=gnu11 -g -O1 -D_GNU_SOURCE -DKVF_VERSION=\"$(VERSION)\" -Ilib -Ikernels \
	  -fsanitize=fuzzer,address,undefined $(PKG_CFLAGS) -o $@ $< $(wildcard lib/*.c) $(LIB_LIBS)
fuzz: $(FUZZERS)
fuzz-short: $(FUZZERS)
	@for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  seeds=tests/fuzz/corpus/$$n; [ -d $$seeds ] || seeds=; \
	  echo "fuzz: $$n for $(FUZZ_TIME)s"; \
	  $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=0 $(BUILD)/fuzz/corpus-$$n $$seeds >$(BUILD)/fuzz/$$n.log 2>&1 \
	    || { tail -40 $(BUILD)/fuzz/$$n.log; exit 1; }; done; echo "fuzz: all targets clean"

bench-copy: all
	$(BUILD)/bench/bench_copy

# Two daemons, real sims, both paths, vs ucx_perftest and memcpy (scripts/bench-remote)
bench: all
	BUILD=$(BUILD) scripts/bench-remote

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)/etc/kvferry $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0755 $(BUILD)/kvferryd $(TOOLS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 0755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libkvferry.so.0
	ln -sf libkvferry.so.0 $(DESTDIR)$(PREFIX)/lib/libkvferry.so
	install -m 0644 lib/kvferry.h lib/kvferry-layout.schema.json $(DESTDIR)$(PREFIX)/include/
	install -m 0644 config/kvferry.yaml $(DESTDIR)/etc/kvferry/kvferry.yaml
	sed 's|@PREFIX@|$(PREFIX)|g' systemd/kvferry.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/kvferry.service

clean:
	rm -rf build build-asan build-tsan

format:
	clang-format -i $(wildcard lib/*.[ch] daemon/*.[ch] daemon/*/*.[ch] tools/*.[ch] tests/*.[ch] tests/*/*.[ch] kernels/*.[ch])

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
