# sandboxd — see README.md. `make run` and `make test` are the two commands.
CC       ?= cc
PKGS     := libmicrohttpd jansson sqlite3 libseccomp libarchive libnftables libmnl nettle zlib
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
# wslay (WebSocket framing) ships no pkg-config file in Debian 12
LDLIBS   += $(LDHARDEN) $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lwslay -lm
ifeq ($(CI),true)
ALL_CFLAGS += -Werror
endif

# init, pid 1 of every sandbox: a program of its own, static (libc, and
# libarchive for the backups' builtins: no libseccomp, sqlite, microhttpd,
# jansson or libcurl in a sandbox), embedded in the daemon (runtime/init_blob.S), never sanitized
# (a sanitizer runtime cannot be linked statically)
INIT_ONLY := src/runtime/init.c src/runtime/spawner.c src/runtime/spawn.c \
             src/runtime/zygote.c
INIT_SRC := $(INIT_ONLY) src/runtime/rootfs.c src/runtime/caps.c \
            src/runtime/proto.c $(wildcard src/runtime/builtin*.c) \
            src/runtime/fsutil.c src/runtime/seccomp_prog.c src/lib/err.c \
            src/runtime/userns.c
INIT_OBJ := $(INIT_SRC:%.c=$(BUILD)/init/%.o)
INIT_CFLAGS = -std=gnu17 $(WARN) $(HARDEN) $(CFLAGS) -ffunction-sections -fdata-sections
INIT_LDFLAGS := -static-pie -s -Wl,--gc-sections,-z,relro,-z,now
# the backups' builtins (builtin_archive.c): libarchive's tar and zstd
# parts, and the ACL calls its disk writer names (static archives:
# libarchive-dev, libzstd-dev, libacl1-dev)
INIT_LDLIBS  := -larchive -lzstd -lacl

LIB_SRC  := $(filter-out $(INIT_ONLY),$(wildcard src/lib/*.c) $(wildcard src/runtime/*.c))
# the daemon: the core engine, the HTTP plumbing, the faces, and main
DMN_SRC  := $(wildcard src/core/*.c src/http/*.c src/api/*.c src/api/*/*.c \
                       src/daemon/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/runtime/init_blob.o
DMN_OBJ  := $(DMN_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/api/openapi_blob.o \
            $(BUILD)/src/core/interp_blob.o $(BUILD)/src/api/ui/ui_blob.o
DMN_LIB_OBJ := $(filter-out $(BUILD)/src/daemon/main.o,$(DMN_OBJ))
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# The client side: libsbx (src/client, over libcurl; static, shared and a
# pkg-config file) and the sbx command line (src/cli). Neither includes
# daemon code (scripts/check-layers).
CLI_PKGS   := libcurl jansson
CLI_CFLAGS  = -std=gnu17 $(WARN) -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
              $(CFLAGS) $(SAN) $(shell pkg-config --cflags $(CLI_PKGS) 2>/dev/null)
CLI_LIBS   := $(shell pkg-config --libs $(CLI_PKGS) 2>/dev/null) -lwslay
CLIENT_SRC := $(wildcard src/client/*.c)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o)
SBX_SRC    := $(wildcard src/cli/*.c)
SBX_OBJ    := $(SBX_SRC:%.c=$(BUILD)/%.o)
LIBSBX_VER := 0.1.0
LIBSBX_SO  := libsbx.so.0
CLIENT_OUT := $(BUILD)/client/libsbx.a $(BUILD)/client/$(LIBSBX_SO) \
              $(BUILD)/client/libsbx.so

# make install [PREFIX=/usr/local] [DESTDIR=...]; make deb
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
SBINDIR    ?= $(PREFIX)/sbin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR    ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/vendor-completions
DEB_VERSION ?= $(LIBSBX_VER)
STATE_DIR ?= /var/lib/sandboxd
LISTEN    ?= 127.0.0.1:8080

.PHONY: install uninstall deb
.PHONY: all deps run test test-unit test-e2e test-fleet test-asan bench fuzz clean format \
	check check-format check-layers lint

all: $(BUILD)/sandboxd $(BUILD)/sbx $(CLIENT_OUT)

deps:
	@scripts/install-deps

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/src/client/%.o: src/client/%.c
	@mkdir -p $(dir $@)
	$(CC) -D_GNU_SOURCE -Isrc $(CLI_CFLAGS) -fPIC -fvisibility=hidden -MMD -MP -c $< -o $@

$(BUILD)/src/cli/%.o: src/cli/%.c
	@mkdir -p $(dir $@)
	$(CC) -D_GNU_SOURCE -Isrc $(CLI_CFLAGS) -fPIE -MMD -MP -c $< -o $@

$(BUILD)/client/libsbx.a: $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@; ar rcs $@ $^

$(BUILD)/client/$(LIBSBX_SO): $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(LIBSBX_SO) -Wl,-z,relro,-z,now -o $@ $^ $(CLI_LIBS)

$(BUILD)/client/libsbx.so: $(BUILD)/client/$(LIBSBX_SO)
	ln -sf $(LIBSBX_SO) $@

# libsbx's unit test links the client library, not the daemon's code
$(BUILD)/tests/test_client: tests/unit/test_client.c $(BUILD)/client/libsbx.a
	@mkdir -p $(dir $@)
	$(CC) -D_GNU_SOURCE -Isrc $(CLI_CFLAGS) -o $@ $^ $(CLI_LIBS) -lcmocka

# sbx links libsbx statically: one file to copy anywhere
$(BUILD)/sbx: $(SBX_OBJ) $(BUILD)/client/libsbx.a
	$(CC) $(CLI_CFLAGS) -o $@ $^ $(LDHARDEN) $(CLI_LIBS)

# the OpenAPI document, embedded (served at /v1/openapi.json)
$(BUILD)/src/api/openapi_blob.o: src/api/openapi_blob.S docs/openapi.json
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

# the code interpreter's workers, embedded (written into every sandbox)
$(BUILD)/src/core/interp_blob.o: src/core/interp_blob.S interp/python_worker.py interp/node_worker.js
	@mkdir -p $(dir $@)
	$(CC) -c $< -o $@

# the web console (/ui/): its own files and xterm.js, embedded. xterm.js
# comes from npm, pinned by ui/package-lock.json: npm ci runs when the
# lock changed (npm's cache keeps the tarballs), and the files the console
# uses are copied into $(BUILD)/ui.
UI_OWN    := ui/index.html ui/app.js ui/app.css
UI_VENDOR := $(BUILD)/ui/xterm.js $(BUILD)/ui/xterm.css $(BUILD)/ui/addon-fit.js
ui/node_modules/.sbx-installed: ui/package-lock.json
	cd ui && npm ci --no-audit --no-fund --loglevel=error
	touch $@
$(BUILD)/ui/xterm.js: ui/node_modules/.sbx-installed
	@mkdir -p $(dir $@)
	cp ui/node_modules/@xterm/xterm/lib/xterm.js $@
$(BUILD)/ui/xterm.css: ui/node_modules/.sbx-installed
	@mkdir -p $(dir $@)
	cp ui/node_modules/@xterm/xterm/css/xterm.css $@
$(BUILD)/ui/addon-fit.js: ui/node_modules/.sbx-installed
	@mkdir -p $(dir $@)
	cp ui/node_modules/@xterm/addon-fit/lib/addon-fit.js $@
$(BUILD)/src/api/ui/ui_blob.o: src/api/ui/ui_blob.S $(UI_OWN) $(UI_VENDOR)
	@mkdir -p $(dir $@)
	$(CC) -Wa,-I,$(BUILD)/ui -c $< -o $@

$(BUILD)/init/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(INIT_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/sandboxd-init: $(INIT_OBJ)
	$(CC) $(INIT_CFLAGS) $(INIT_LDFLAGS) -o $@ $^ $(INIT_LDLIBS)

$(BUILD)/src/runtime/init_blob.o: src/runtime/init_blob.S $(BUILD)/sandboxd-init
	@mkdir -p $(dir $@)
	$(CC) -DINIT_BIN='"$(BUILD)/sandboxd-init"' -c $< -o $@

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

test-fleet: all
	@SBX_SUITES=fleet SBX_PYTEST_DIRS= scripts/run-tests $(BUILD)

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
	@# (no -Werror here: clang warns about libseccomp's own SCMP_A0 macro
	@# and the kernel's btrfs header, which gcc's build does not)
	$(MAKE) BUILD=build-fuzz CC=clang CFLAGS="-O1 -g" CI= \
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

# Installs the daemon, its unit and configuration (an existing
# sandboxd.conf is kept), sbx with its completions, libsbx (static, shared,
# header, pkg-config) and the man pages under $(DESTDIR)$(PREFIX).
install: all
	install -Dm755 $(BUILD)/sandboxd $(DESTDIR)$(SBINDIR)/sandboxd
	install -Dm755 $(BUILD)/sbx $(DESTDIR)$(BINDIR)/sbx
	install -Dm644 $(BUILD)/client/libsbx.a $(DESTDIR)$(LIBDIR)/libsbx.a
	install -Dm644 $(BUILD)/client/$(LIBSBX_SO) $(DESTDIR)$(LIBDIR)/$(LIBSBX_SO)
	ln -sf $(LIBSBX_SO) $(DESTDIR)$(LIBDIR)/libsbx.so
	install -Dm644 src/client/libsbx.h $(DESTDIR)$(INCLUDEDIR)/libsbx.h
	mkdir -p $(DESTDIR)$(LIBDIR)/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@VERSION@|$(LIBSBX_VER)|' src/client/libsbx.pc.in \
	    > $(DESTDIR)$(LIBDIR)/pkgconfig/libsbx.pc
	install -Dm644 dist/sandboxd.8 $(DESTDIR)$(MANDIR)/man8/sandboxd.8
	install -Dm644 dist/sbx.1 $(DESTDIR)$(MANDIR)/man1/sbx.1
	mkdir -p $(DESTDIR)$(UNITDIR)
	sed -e 's|@SBINDIR@|$(SBINDIR)|' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|' \
	    dist/sandboxd.service.in > $(DESTDIR)$(UNITDIR)/sandboxd.service
	chmod 644 $(DESTDIR)$(UNITDIR)/sandboxd.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/sandboxd/sandboxd.conf ] || \
	    install -Dm644 dist/sandboxd.conf $(DESTDIR)$(SYSCONFDIR)/sandboxd/sandboxd.conf
	install -Dm644 dist/completion/sbx.bash $(DESTDIR)$(BASHCOMPDIR)/sbx
	install -Dm644 dist/completion/_sbx $(DESTDIR)$(ZSHCOMPDIR)/_sbx

# Everything install put there but the configuration and the state.
uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/sandboxd $(DESTDIR)$(BINDIR)/sbx \
	    $(DESTDIR)$(LIBDIR)/libsbx.a $(DESTDIR)$(LIBDIR)/$(LIBSBX_SO) \
	    $(DESTDIR)$(LIBDIR)/libsbx.so $(DESTDIR)$(LIBDIR)/pkgconfig/libsbx.pc \
	    $(DESTDIR)$(INCLUDEDIR)/libsbx.h $(DESTDIR)$(MANDIR)/man8/sandboxd.8 \
	    $(DESTDIR)$(MANDIR)/man1/sbx.1 $(DESTDIR)$(UNITDIR)/sandboxd.service \
	    $(DESTDIR)$(BASHCOMPDIR)/sbx $(DESTDIR)$(ZSHCOMPDIR)/_sbx

# A Debian package (dpkg-deb): the install above under /usr, the unit in
# /lib/systemd/system, sandboxd.conf a conffile; its postinst enables the
# unit and starts it where systemd runs. Writes $(BUILD)/sandboxd_*.deb.
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_MULTIARCH = $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
deb: all
	rm -rf $(BUILD)/deb
	$(MAKE) --no-print-directory install DESTDIR=$(abspath $(BUILD)/deb) PREFIX=/usr \
	    LIBDIR=/usr/lib/$(DEB_MULTIARCH) UNITDIR=/lib/systemd/system SYSCONFDIR=/etc \
	    BUILD=$(BUILD)
	strip --strip-unneeded $(BUILD)/deb/usr/sbin/sandboxd $(BUILD)/deb/usr/bin/sbx \
	    $(BUILD)/deb/usr/lib/$(DEB_MULTIARCH)/$(LIBSBX_SO)
	gzip -9n $(BUILD)/deb/usr/share/man/man1/sbx.1 $(BUILD)/deb/usr/share/man/man8/sandboxd.8
	install -d $(BUILD)/deb/DEBIAN $(BUILD)/deb/usr/share/doc/sandboxd
	install -m644 README.md $(BUILD)/deb/usr/share/doc/sandboxd/README.md
	install -m755 dist/debian/postinst dist/debian/prerm dist/debian/postrm $(BUILD)/deb/DEBIAN/
	echo /etc/sandboxd/sandboxd.conf > $(BUILD)/deb/DEBIAN/conffiles
	sed -e 's|@VERSION@|$(DEB_VERSION)|' -e 's|@ARCH@|$(DEB_ARCH)|' \
	    -e "s|@SIZE@|$$(du -sk --exclude=DEBIAN $(BUILD)/deb | cut -f1)|" \
	    dist/debian/control.in > $(BUILD)/deb/DEBIAN/control
	dpkg-deb --root-owner-group -Zxz --build $(BUILD)/deb \
	    $(BUILD)/sandboxd_$(DEB_VERSION)_$(DEB_ARCH).deb

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

-include $(LIB_OBJ:.o=.d) $(DMN_OBJ:.o=.d) $(CLIENT_OBJ:.o=.d) $(SBX_OBJ:.o=.d) \
         $(INIT_OBJ:.o=.d)
