# sandboxd — see README.md. `make run` and `make test` are the two commands.
CC       ?= cc
PKGS     := libmicrohttpd jansson sqlite3 libseccomp libarchive zlib
# headers only: libcurl is loaded at run time, when an S3 store is used
# (core/s3.c says why)
DLPKGS   := libcurl
BUILD    ?= build
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wformat=2 -Wno-format-nonliteral
CPPFLAGS += -D_GNU_SOURCE -Isrc
# A root daemon that parses what clients send: canaries, checked libc
# calls, a randomised base, and a read-only GOT after start.
HARDEN   := -fstack-protector-strong -D_FORTIFY_SOURCE=2 -fPIE
LDHARDEN := -pie -Wl,-z,relro,-z,now
ALL_CFLAGS = -std=gnu17 $(WARN) $(HARDEN) $(CFLAGS) $(SAN) $(shell pkg-config --cflags $(PKGS) $(DLPKGS) 2>/dev/null)
LDLIBS   += $(LDHARDEN) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lm
ifeq ($(CI),true)
ALL_CFLAGS += -Werror
endif

LIB_SRC  := $(wildcard src/lib/*.c) $(wildcard src/runtime/*.c)
# the daemon: the core engine, the HTTP plumbing, the faces, and main
DMN_SRC  := $(wildcard src/core/*.c src/http/*.c src/api/*.c src/api/*/*.c \
                       src/daemon/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
DMN_OBJ  := $(DMN_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/api/openapi_blob.o \
            $(BUILD)/src/core/interp_blob.o
DMN_LIB_OBJ := $(filter-out $(BUILD)/src/daemon/main.o,$(DMN_OBJ))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

STATE_DIR ?= /var/lib/sandboxd
LISTEN    ?= 127.0.0.1:8080

.PHONY: all deps run test test-unit test-e2e test-asan bench fuzz clean format \
	check check-format check-layers lint

all: $(BUILD)/sandboxd

deps:
	@scripts/install-deps

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# the OpenAPI document, embedded (served at /v1/openapi.json)
$(BUILD)/src/api/openapi_blob.o: src/api/openapi_blob.S docs/openapi.json
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

# the code interpreter's workers, embedded (written into every sandbox)
$(BUILD)/src/core/interp_blob.o: src/core/interp_blob.S interp/python_worker.py interp/node_worker.js
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

$(BUILD)/libsbx.a: $(LIB_OBJ)
	ar rcs $@ $^

$(BUILD)/sandboxd: $(DMN_OBJ) $(BUILD)/libsbx.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(DMN_LIB_OBJ) $(BUILD)/libsbx.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS) -lcmocka

run: deps all
	mkdir -p $(STATE_DIR)
	exec $(BUILD)/sandboxd --listen $(LISTEN) --state-dir $(STATE_DIR)

test: deps all $(UNIT_BIN)
	@scripts/run-tests $(BUILD)

test-unit: all $(UNIT_BIN)
	@SBX_SUITES=unit SBX_PYTEST_DIRS= scripts/run-tests $(BUILD)

test-e2e: all
	@SBX_SUITES=e2e SBX_PYTEST_DIRS= scripts/run-tests $(BUILD)

# The whole suite against an ASan+UBSan build of the daemon.
test-asan: deps
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" CFLAGS="-O1 -g" all unit-bins-asan
	SBX_SANITIZED=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 scripts/run-tests build-asan

unit-bins-asan: $(UNIT_BIN)

# libFuzzer targets for what clients control (fuzz/): each runs for
# FUZZ_SECONDS; a crash stops the run and leaves its input in build-fuzz/.
FUZZ_TARGETS := path proto session request
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
fuzz:
	@scripts/install-deps --fuzz
	$(MAKE) BUILD=build-fuzz CC=clang CFLAGS="-O1 -g" \
		SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins
	@for t in $(FUZZ_TARGETS); do \
		[ -d fuzz/corpus/$$t ] || { echo "fuzz/corpus/$$t missing"; exit 1; }; \
		mkdir -p build-fuzz/corpus-$$t; \
		echo "== fuzz_$$t for $(FUZZ_SECONDS)s"; \
		build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
			-artifact_prefix=build-fuzz/crash-$$t- \
			build-fuzz/corpus-$$t fuzz/corpus/$$t \
			> build-fuzz/fuzz_$$t.log 2>&1; rc=$$?; \
		grep -E "^Done|ERROR|SUMMARY" build-fuzz/fuzz_$$t.log; \
		[ $$rc -eq 0 ] || exit 1; \
	done

fuzz-bins: $(FUZZ_TARGETS:%=$(BUILD)/fuzz_%)

$(BUILD)/fuzz_%: fuzz/fuzz_%.c $(DMN_LIB_OBJ) $(BUILD)/libsbx.a
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)

# Benchmarks side by side with their baselines; writes bench/RESULTS.md.
bench: deps all
	bench/run $(BUILD)

FMT_SRC = $(wildcard src/*/*.c src/*/*.h src/*/*/*.c src/*/*/*.h) $(UNIT_SRC) $(wildcard fuzz/*.c)
format:
	clang-format -i $(FMT_SRC)

# The checks CI runs beside the tests: the tree is formatted as
# .clang-format says, every #include follows docs/architecture.md's
# layering, the static analyser finds nothing, and every fuzz
# target builds and runs its committed corpus (so a target whose corpus
# went missing fails here, not on someone's `make fuzz`).
check-format:
	@scripts/install-deps --check
	@bad=$$(for f in $(FMT_SRC); do clang-format $$f | cmp -s $$f - || echo $$f; done); \
	if [ -n "$$bad" ]; then echo "not formatted (make format):" $$bad; exit 1; fi

lint:
	@scripts/install-deps --check
	cppcheck --quiet --enable=warning,portability --inline-suppr --std=c11 \
		-D_GNU_SOURCE "-D_Noreturn=__attribute__((noreturn))" -Isrc \
		--error-exitcode=1 \
		--template='{file}:{line}: {severity}: {message} [{id}]' src/

check-layers:
	@scripts/check-layers

check: check-format check-layers lint
	$(MAKE) fuzz FUZZ_SECONDS=5

clean:
	rm -rf build build-asan build-fuzz

-include $(LIB_OBJ:.o=.d) $(DMN_OBJ:.o=.d)
