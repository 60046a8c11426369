# authd — see README.md. Every target that needs Debian packages installs the missing ones
# (as root) or prints the exact apt-get command (otherwise).

PREFIX      ?= /usr/local
DESTDIR     ?=
SWIFT       ?= swift
BUILD_FLAGS ?=

# What building needs, and what the tests and tools need beyond that.
BUILD_PACKAGES := pkg-config libsqlite3-dev libssl-dev libsystemd-dev libargon2-dev libphonenumber-dev libpcsclite-dev libeac-dev libcbor-dev libpsl-dev libpam0g-dev libpq-dev
TEST_PACKAGES  := gdb procps curl postgresql python3 python3-jwt python3-jwcrypto python3-cryptography systemd util-linux groff-base man-db openssl socat pcscd vsmartcard-vpcd python3-dbusmock dbus-daemon python3-gi libglib2.0-bin python3-authlib python3-flask python3-fido2 python3-cbor2 pamtester libpam-wrapper pinentry-tty chromium
DEBIAN_PACKAGES := $(BUILD_PACKAGES) $(TEST_PACKAGES)

# PAM loads modules only from the multiarch security directory (not from under PREFIX).
MULTIARCH   ?= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo $$(uname -m)-linux-gnu)
PAMDIR      ?= /lib/$(MULTIARCH)/security

# `make run`: a user-mode daemon on the socket authd and authctl find by one rule (DaemonSocket,
# Sources/Protocol): $XDG_RUNTIME_DIR/authd/authd.sock, and without an absolute XDG_RUNTIME_DIR
# (e.g. root in a container) /tmp/authd-UID/authd/authd.sock, where /tmp/authd-UID must be ours
# and 0700 (anyone can make it first). The same rule here, in make's words:
RUN_RUNTIME_DIR ?= $(if $(filter /%,$(XDG_RUNTIME_DIR)),$(XDG_RUNTIME_DIR),/tmp/authd-$(shell id -u))
RUN_SOCKET      ?= $(RUN_RUNTIME_DIR)/authd/authd.sock
# The directory of the built authd and authctl (default: what `swift build` made).
RUN_BIN         ?=
# How long `make run` waits for authd to answer and the virtual card to be in its reader.
RUN_WAIT        ?= 60

.PHONY: all deps build release run run-hub test bench link-order fuzz install uninstall clean check-toolchain

all: build

check-toolchain:
	@command -v $(SWIFT) >/dev/null 2>&1 || { \
	  echo "make: the Swift toolchain is not on PATH. Install Swift 6 (https://www.swift.org/install/linux/debian/12/)"; \
	  echo "      and add its usr/bin to PATH (e.g. export PATH=/opt/swift/usr/bin:\$$PATH)."; exit 1; }

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "make: Debian packages present"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
	  echo "make: installing missing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else \
	  echo "make: missing Debian packages:$$missing"; \
	  echo "      run: sudo apt-get install --no-install-recommends$$missing"; exit 1; \
	fi

build: deps check-toolchain
	$(SWIFT) build $(BUILD_FLAGS)

# A release build compiles each module whole (one long step per module): it says so first, so
# that minutes without a new line are not taken for a hang.
release: deps check-toolchain
	@echo "make: building the release binaries (swift build -c release); each module is optimised whole, so a step can take minutes"
	$(SWIFT) build -c release $(BUILD_FLAGS)

# `make run` also starts a private pcscd (socket-activated, never the system's) whose vpcd reader
# holds the virtual ID card, so `authctl card login` works without hardware. VCARD=contactless
# puts the card on a contactless reader (PACE with the CAN); VCARD=none uses the system's pcscd
# and real readers instead.
VCARD        ?= contact
VCARD_PORT   ?= 35973
VCARD_DIR    ?= $(RUN_RUNTIME_DIR)/authd-vcard

# The checks at the start come before anything is written, so that a second `make run` cannot
# take the running one's card files or port. Ready is said only once authd answers and the
# virtual card is in its reader (the first `card readers` would otherwise find both empty).
run: build
	@bin="$(RUN_BIN)"; [ -n "$$bin" ] || bin=$$($(SWIFT) build --show-bin-path) || exit 1; \
	if $$bin/authctl --socket $(RUN_SOCKET) status >/dev/null 2>&1; then \
	  echo "make: authd is already running on $(RUN_SOCKET); nothing was changed." >&2; \
	  echo "      Use it (Ctrl-C in its terminal stops it), or start another beside it:" >&2; \
	  echo "      AUTHD_STATE_DIR=/some/dir/state make run RUN_SOCKET=/some/dir/authd.sock VCARD_DIR=/some/dir/vcard VCARD_PORT=35974" >&2; exit 1; \
	fi; \
	if [ "$(VCARD)" != none ] && awk -v port=":$$(printf '%04X' $(VCARD_PORT))" \
	     'FNR > 1 && $$4 == "0A" && substr($$2, length($$2) - 4) == port { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null; then \
	  echo "make: TCP port $(VCARD_PORT), the virtual card's reader, is in use (another make run's pcscd?); nothing was changed." >&2; \
	  echo "      Stop that one, or pick another port: make run VCARD_PORT=35974" >&2; exit 1; \
	fi; \
	if [ "$(RUN_RUNTIME_DIR)" = "/tmp/authd-$$(id -u)" ]; then \
	  mkdir -m 0700 $(RUN_RUNTIME_DIR) 2>/dev/null; \
	  if [ -L $(RUN_RUNTIME_DIR) ] || [ ! -d $(RUN_RUNTIME_DIR) ] || [ ! -O $(RUN_RUNTIME_DIR) ] || [ "$$(stat -c %a $(RUN_RUNTIME_DIR))" != 700 ]; then \
	    echo "make: $(RUN_RUNTIME_DIR) is not a directory of yours with mode 0700 (another user could have made it); remove it" >&2; exit 1; \
	  fi; \
	else mkdir -p -m 0700 $(RUN_RUNTIME_DIR); fi; \
	pids=""; pcsc_env=""; stopped=""; \
	stop='trap "" INT TERM; if [ -z "$$stopped" ]; then kill $$pids 2>/dev/null; stopped=1; trap "exit 130" INT TERM; wait 2>/dev/null; fi'; \
	trap "$$stop" EXIT; trap "$$stop; exit 130" INT TERM; \
	if [ "$(VCARD)" != none ]; then \
	  rm -rf $(VCARD_DIR) && mkdir -p -m 0700 $(VCARD_DIR)/reader.conf.d; \
	  printf 'FRIENDLYNAME "Virtual PCD"\nDEVICENAME /dev/null:%s\nLIBPATH /usr/lib/pcsc/drivers/serial/libifdvpcd.so\nCHANNELID %s\n' \
	    $(VCARD_PORT) $(VCARD_PORT) > $(VCARD_DIR)/reader.conf.d/vpcd; \
	  profile=$$($$bin/authd-vcard generate --out $(VCARD_DIR) --mode $(VCARD)) || exit 1; \
	  systemd-socket-activate -l $(VCARD_DIR)/pcscd.comm -E PCSCLITE_CSOCK_NAME=$(VCARD_DIR)/pcscd.comm \
	    /usr/sbin/pcscd -f -c $(VCARD_DIR)/reader.conf.d > $(VCARD_DIR)/pcscd.log 2>&1 & pids="$$pids $$!"; \
	  $$bin/authd-vcard run $$profile --port $(VCARD_PORT) > $(VCARD_DIR)/vcard.log 2>&1 & pids="$$pids $$!"; \
	  pcsc_env="PCSCLITE_CSOCK_NAME=$(VCARD_DIR)/pcscd.comm"; \
	fi; \
	echo "make: starting authd in user mode on $(RUN_SOCKET) (Ctrl-C stops it)"; \
	env $$pcsc_env AUTHD_SOCKET=$(RUN_SOCKET) $$bin/authd --user & authd=$$!; pids="$$pids $$authd"; \
	ctl="$$bin/authctl --socket $(RUN_SOCKET)"; tries=$$(( $(RUN_WAIT) * 10 )); card="in its reader"; \
	until $$ctl status >/dev/null 2>&1; do \
	  if ! kill -0 $$authd 2>/dev/null; then wait $$authd; echo "make: authd stopped (exit status $$?) before it was ready" >&2; exit 1; fi; \
	  tries=$$((tries - 1)); [ $$tries -gt 0 ] || { echo "make: authd did not answer within $(RUN_WAIT) s" >&2; exit 1; }; sleep 0.1; \
	done; \
	if [ "$(VCARD)" != none ]; then \
	  until $$ctl --json card readers 2>/dev/null | grep -q '"card_present" *: *true'; do \
	    tries=$$((tries - 1)); \
	    if [ $$tries -le 0 ]; then card="NOT in its reader after $(RUN_WAIT) s: see $(VCARD_DIR)/vcard.log and pcscd.log"; break; fi; \
	    sleep 0.1; \
	  done; \
	fi; \
	state=$$($$ctl admin status | sed -n 's/^state: *//p'); \
	echo; \
	echo "make: ready: authd (pid $$authd) answers on $(RUN_SOCKET)"; \
	echo "  state directory: $$state"; \
	if [ "$(VCARD)" != none ]; then \
	  echo "  virtual ID card ($(VCARD)) $$card; PIN1 1234, PIN2 12345, CAN 123456; logs in $(VCARD_DIR)"; \
	fi; \
	echo "In another terminal (these lines work in scripts too):"; \
	echo "  export PATH=\"$$bin:\$$PATH\""; \
	echo "  export AUTHD_SOCKET=$(RUN_SOCKET)   # authctl finds it without this in a shell like this one"; \
	echo "  authctl status"; \
	[ "$(VCARD)" = none ] || echo "  authctl card login --aud demo"; \
	echo "  authctl register +37251234567      # the SMS is spooled, not sent; its code:"; \
	echo "  authctl admin sms last             # (one file per message in $$state/sms-spool)"; \
	echo "Ctrl-C here stops authd$$([ "$(VCARD)" = none ] || echo ', pcscd and the virtual card')."; \
	echo; \
	wait $$authd

# A hub and three devices on loopback, to try one account on several machines (the third
# machine is one too many for the default limit of two): a development CA and the hub's
# certificate for 127.0.0.1 are made in HUB_DIR (the openssl CLI), the hub listens on HUB_PORT,
# and each device trusts the CA. The hub can be stopped and started alone (HUB_DIR/stop-hub,
# HUB_DIR/start-hub), so the devices can be seen without it and relink when it is back. What
# the machines hold is kept from one run to the next; FRESH=1 starts afresh. On the way out the
# rig stops the devices and whichever hub its pid file names, and waits for it; a second SIGTERM
# (make passes its own on) does not cut that short. Both recipes stop from the INT/TERM trap
# itself, not only from the EXIT trap: a signal landing as the EXIT trap starts, before it ignores
# signals, would run `exit 130` there and end the shell with nothing stopped. (`make run` lets a
# second Ctrl-C end its wait for what it stopped, once every process was told to stop.)
HUB_DIR  ?= $(RUN_RUNTIME_DIR)/authd-hub
HUB_PORT ?= 17443
FRESH    ?=

run-hub: build
	@bin="$(RUN_BIN)"; [ -n "$$bin" ] || bin=$$($(SWIFT) build --show-bin-path) || exit 1; \
	dir=$(HUB_DIR); \
	if $$bin/authctl --socket $$dir/hub/authd.sock status >/dev/null 2>&1; then \
	  echo "make: a hub already answers on $$dir/hub/authd.sock; nothing was changed (Ctrl-C in its terminal stops it)." >&2; exit 1; \
	fi; \
	if awk -v port=":$$(printf '%04X' $(HUB_PORT))" \
	     'FNR > 1 && $$4 == "0A" && substr($$2, length($$2) - 4) == port { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null; then \
	  echo "make: TCP port $(HUB_PORT), the hub's, is in use; nothing was changed. Pick another: make run-hub HUB_PORT=17444" >&2; exit 1; \
	fi; \
	mkdir -p -m 0700 $(RUN_RUNTIME_DIR) || exit 1; \
	if [ -n "$(FRESH)" ] || [ ! -f $$dir/ca.pem ]; then \
	  echo "make: starting afresh in $$dir: no accounts, new machines"; \
	  rm -rf $$dir && mkdir -p -m 0700 $$dir || exit 1; \
	  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 -subj "/CN=authd development CA" \
	    -keyout $$dir/ca.key -out $$dir/ca.pem 2>/dev/null && \
	  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 -keyout $$dir/hub.key -out $$dir/hub.csr 2>/dev/null && \
	  printf 'subjectAltName=IP:127.0.0.1\n' > $$dir/hub.ext && \
	  openssl x509 -req -in $$dir/hub.csr -CA $$dir/ca.pem -CAkey $$dir/ca.key -CAcreateserial -days 365 -extfile $$dir/hub.ext \
	    -out $$dir/hub.pem 2>/dev/null || { echo "make: openssl could not make the development CA in $$dir" >&2; rm -f $$dir/ca.pem; exit 1; }; \
	else \
	  echo "make: keeping the accounts and machines of the last run in $$dir (make run-hub FRESH=1 starts afresh)"; \
	fi; \
	mkdir -p -m 0700 $$dir/hub $$dir/device-a $$dir/device-b $$dir/device-c || exit 1; \
	printf '[hub]\nlisten = 127.0.0.1:%s\ncert_file = %s/hub.pem\nkey_file = %s/hub.key\n# the walk-through leaves device C signed out: keep its link up meanwhile\nnewcomer_timeout = 1h\n' \
	  $(HUB_PORT) $$dir $$dir > $$dir/hub/authd.conf; \
	printf '#!/bin/sh\n# Starts the hub of make run-hub alone (its devices relink by themselves).\necho $$$$ > %s/hub/authd.pid\nAUTHD_SOCKET=%s/hub/authd.sock AUTHD_STATE_DIR=%s/hub/state AUTHD_CONFIG=%s/hub/authd.conf exec %s/authd --user >> %s/hub/authd.log 2>&1\n' \
	  $$dir $$dir $$dir $$dir $$bin $$dir > $$dir/start-hub; \
	printf '#!/bin/sh\n# Stops the hub of make run-hub alone; its devices keep running.\nkill "$$(cat %s/hub/authd.pid)" && rm -f %s/hub/authd.pid\n' $$dir $$dir > $$dir/stop-hub; \
	chmod 0700 $$dir/start-hub $$dir/stop-hub; \
	pids=""; stopped=""; \
	stop='trap "" INT TERM; if [ -z "$$stopped" ]; then kill $$pids 2>/dev/null; h=$$(cat '$$dir'/hub/authd.pid 2>/dev/null); [ -z "$$h" ] || kill $$h 2>/dev/null; wait 2>/dev/null; n=150; while [ -n "$$h" ] && kill -0 $$h 2>/dev/null && [ $$n -gt 0 ]; do n=$$((n - 1)); sleep 0.1; done; stopped=1; fi'; \
	trap "$$stop" EXIT; trap "$$stop; exit 130" INT TERM; \
	$$dir/start-hub & hub=$$!; \
	tries=$$(( $(RUN_WAIT) * 10 )); \
	until $$bin/authctl --socket $$dir/hub/authd.sock hub status >/dev/null 2>&1; do \
	  kill -0 $$hub 2>/dev/null || { echo "make: the hub stopped before it was ready; see $$dir/hub/authd.log" >&2; exit 1; }; \
	  tries=$$((tries - 1)); [ $$tries -gt 0 ] || { echo "make: the hub did not answer within $(RUN_WAIT) s; see $$dir/hub/authd.log" >&2; exit 1; }; sleep 0.1; \
	done; \
	for device in device-a device-b device-c; do \
	  printf '[hub]\nurl = 127.0.0.1:%s\nca_file = %s/ca.pem\n' $(HUB_PORT) $$dir > $$dir/$$device/authd.conf; \
	  AUTHD_SOCKET=$$dir/$$device/authd.sock AUTHD_STATE_DIR=$$dir/$$device/state AUTHD_CONFIG=$$dir/$$device/authd.conf \
	    $$bin/authd --user >> $$dir/$$device/authd.log 2>&1 & pids="$$pids $$!"; \
	done; \
	for device in device-a device-b device-c; do \
	  until $$bin/authctl --socket $$dir/$$device/authd.sock hub status 2>/dev/null | grep -q ', connected since'; do \
	    tries=$$((tries - 1)); [ $$tries -gt 0 ] || { echo "make: $$device did not link to the hub within $(RUN_WAIT) s; see $$dir/$$device/authd.log" >&2; exit 1; }; sleep 0.1; \
	  done; \
	  $$bin/authctl --socket $$dir/$$device/authd.sock device name $$device >/dev/null || exit 1; \
	done; \
	echo; \
	echo "make: ready: a hub on 127.0.0.1:$(HUB_PORT) (TLS, development CA in $$dir) and three devices linked to it"; \
	echo "  hub:      $$dir/hub/authd.sock"; \
	echo "  device A: $$dir/device-a/authd.sock"; \
	echo "  device B: $$dir/device-b/authd.sock"; \
	echo "  device C: $$dir/device-c/authd.sock"; \
	echo "Try it in three terminals, one per machine (each keeps its own authctl session, as separate machines would):"; \
	echo "  A\$$ export PATH=\"$$bin:\$$PATH\" AUTHD_SOCKET=$$dir/device-a/authd.sock XDG_STATE_HOME=$$dir/device-a/you"; \
	echo "  A\$$ authctl register +37251234567 --with-password"; \
	echo "       (the SMS is spooled at the hub: AUTHD_SOCKET=$$dir/hub/authd.sock authctl admin sms last)"; \
	echo "  B\$$ export PATH=\"$$bin:\$$PATH\" AUTHD_SOCKET=$$dir/device-b/authd.sock XDG_STATE_HOME=$$dir/device-b/you"; \
	echo "  B\$$ authctl login +37251234567 && authctl devices     # both machines, this one marked"; \
	echo "  C\$$ export PATH=\"$$bin:\$$PATH\" AUTHD_SOCKET=$$dir/device-c/authd.sock XDG_STATE_HOME=$$dir/device-c/you"; \
	echo "  C\$$ authctl login +37251234567                        # refused: two machines at most"; \
	echo "Stop the hub alone, and start it again (the devices answer hub.unavailable meanwhile, and relink):"; \
	echo "  $$dir/stop-hub"; \
	echo "  $$dir/start-hub &"; \
	echo "Ctrl-C here stops all four."; \
	echo; \
	wait $$pids; echo "make: the devices stopped; see $$dir/device-*/authd.log" >&2; exit 1

# The in-process tests first, in a process of their own: the integration tests wait for their
# daemons synchronously, which holds the threads of the test process's cooperative pool (two on a
# two-core machine) for minutes, and in-process async code under test (the pinentry client, the
# agent's bus service) would wait for a thread past its deadlines. For the same reason the
# in-process tests wait for children and buses between short sleeps (`eventually`), never blocked.
# The suites about account data (accounts, sessions, device limits, sync, presence, the
# audit log), which `make test` runs a second time with every daemon's account data in
# PostgreSQL: a private cluster the tests start (initdb in a temporary directory, Unix socket
# only, as nobody when run as root), a fresh database per daemon.
ACCOUNT_SUITES := IntegrationTests\.(LoginTests|RegistrationTests|EmailChangeTests|LockoutRaceTests|ConcurrencyTests|AuditLogTests|AdminTests|TokenTests|PasskeyTests|FederationFlowTests|HubTests|HubDirectoryTests|HubFailoverTests|SyncTests|SyncLimitsTests|E2EESyncTests|PresenceTests)

# Each pass has a deadline (Tests/with-deadline), several times what it takes: past it, the
# threads of the test process, the processes left and the tests that did not end are printed,
# and the run fails.
test: deps check-toolchain
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	Tests/with-deadline 600 $(SWIFT) test --skip-build $(BUILD_FLAGS) --skip IntegrationTests
	Tests/with-deadline 1500 $(SWIFT) test --skip-build $(BUILD_FLAGS) --filter IntegrationTests
	@echo "make: the account suites again, with account data in PostgreSQL"
	AUTHD_TEST_ACCOUNT_STORE=postgresql Tests/with-deadline 900 $(SWIFT) test --skip-build $(BUILD_FLAGS) --filter '$(ACCOUNT_SUITES)'

# `make fuzz`: a libFuzzer binary per parser that reads outside input (Fuzz/build.sh, with
# -sanitize=fuzzer,address, outside SwiftPM's build), each run in turn in one process for
# FUZZ_RUNS executions from its committed corpus. New inputs land in .build/fuzz/found/TARGET,
# crashes there too (libFuzzer reports them; Swift's own backtracer, slow under ASan, is off).
# `make test` replays the committed corpora without the fuzzer (FuzzTests).
FUZZ_RUNS    ?= 1000000
FUZZ_TARGETS ?= wire strict-json config smartcard webauthn jose phone
FUZZ_FLAGS   ?= -max_len=16384 -timeout=10

fuzz: deps check-toolchain
	SWIFTC="$$(dirname "$$(command -v $(SWIFT))")/swiftc" Fuzz/build.sh $(FUZZ_TARGETS)
	@for target in $(FUZZ_TARGETS); do \
	  found=.build/fuzz/found/$$target; mkdir -p $$found/corpus; \
	  echo "make: fuzzing $$target for $(FUZZ_RUNS) runs"; \
	  SWIFT_BACKTRACE=enable=no .build/fuzz/bin/fuzz-$$target -runs=$(FUZZ_RUNS) -workers=1 -print_final_stats=1 $(FUZZ_FLAGS) \
	    -artifact_prefix=$$found/ $$found/corpus Fuzz/corpus/$$target || exit 1; \
	done

bench: release
	$(SWIFT) build -c release --product authd-bench $(BUILD_FLAGS)
	$$($(SWIFT) build -c release --show-bin-path)/authd-bench $$($(SWIFT) build -c release --show-bin-path)

# The order of authd's functions in a release build (Sources/authd/link-order.txt), from a hub
# profiled under callgrind: run it after changes to the hub's paths, then `make bench`.
link-order: release
	@$(MAKE) --no-print-directory deps DEBIAN_PACKAGES="$(DEBIAN_PACKAGES) valgrind binutils"
	$(eval BIN := $(shell $(SWIFT) build -c release --show-bin-path))
	$(SWIFT) build -c release --product authd-bench $(BUILD_FLAGS)
	python3 Tests/Bench/link-order.py $(BIN) Sources/authd/link-order.txt
	@# SwiftPM does not know the link reads the list: it relinks when the old binary is gone.
	rm -f $(BIN)/authd
	$(SWIFT) build -c release --product authd $(BUILD_FLAGS)

install: release
	$(eval BIN := $(shell $(SWIFT) build -c release --show-bin-path))
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/man/man8 \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/systemd/user \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/doc/authd \
	  $(DESTDIR)/etc/polkit-1/rules.d $(DESTDIR)$(PREFIX)/lib/authd
	install -m 0755 $(BIN)/authd $(BIN)/authctl $(BIN)/authd-http $(BIN)/authd-webeid $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 -s $(BIN)/libauthd-phonenumber.so $(DESTDIR)$(PREFIX)/lib/authd/
	install -d $(DESTDIR)$(PAMDIR)
	install -m 0644 -s $(BIN)/libpam_authd.so $(DESTDIR)$(PAMDIR)/pam_authd.so
	install -m 0644 man/pam_authd.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 man/authctl.1 man/authd-webeid.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 man/authd.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 man/authd-protocol.7 $(DESTDIR)$(PREFIX)/share/man/man7/
	install -m 0644 man/authd.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	for unit in authd.service authd.socket; do \
	  sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/$$unit > $(DESTDIR)$(PREFIX)/lib/systemd/system/$$unit; \
	  sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/user/$$unit > $(DESTDIR)$(PREFIX)/lib/systemd/user/$$unit; \
	done
	sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/user/authd-desktop.service > $(DESTDIR)$(PREFIX)/lib/systemd/user/authd-desktop.service
	install -m 0644 systemd/authd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/authd.conf
	install -m 0644 systemd/authd.tmpfiles $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/authd.conf
	install -m 0644 systemd/authd.conf.example $(DESTDIR)$(PREFIX)/share/doc/authd/
	install -m 0644 systemd/authd-fprintd.rules $(DESTDIR)/etc/polkit-1/rules.d/50-authd-fprintd.rules
	$(BIN)/authctl completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/authctl
	# The Web eID native messaging host's manifests (eu.webeid) for Chromium, Chrome (and Edge's
	# store build) and Firefox; a user's own (authctl webeid install --user) takes precedence.
	install -d $(DESTDIR)/etc/chromium/native-messaging-hosts $(DESTDIR)/etc/opt/chrome/native-messaging-hosts \
	  $(DESTDIR)/usr/lib/mozilla/native-messaging-hosts
	for dir in /etc/chromium/native-messaging-hosts /etc/opt/chrome/native-messaging-hosts; do \
	  printf '%s\n' '{"allowed_origins":["chrome-extension://ncibgoaomkmdpilpocfeponihegamlic/","chrome-extension://gnmckgbandlkacikdndelhfghdejfido/"],"description":"authd: sign in to websites with your ID card (Web eID)","name":"eu.webeid","path":"$(PREFIX)/bin/authd-webeid","type":"stdio"}' \
	    > $(DESTDIR)$$dir/eu.webeid.json; \
	done
	printf '%s\n' '{"allowed_extensions":["{e68418bc-f2b0-4459-a9ea-3e72b6751b07}"],"description":"authd: sign in to websites with your ID card (Web eID)","name":"eu.webeid","path":"$(PREFIX)/bin/authd-webeid","type":"stdio"}' \
	  > $(DESTDIR)/usr/lib/mozilla/native-messaging-hosts/eu.webeid.json
	@if [ -z "$(DESTDIR)" ]; then case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) \
	  echo "make: $(PREFIX)/bin is not on your PATH; for authctl in shells and scripts: export PATH=\"$(PREFIX)/bin:\$$PATH\"";; esac; fi
	@echo "make: installed under $(DESTDIR)$(PREFIX). As root, for the system daemon:"
	@echo "      systemd-sysusers; systemd-tmpfiles --create; systemctl daemon-reload; systemctl enable --now authd.socket"
	@echo "      pam_authd.so is in $(DESTDIR)$(PAMDIR); before adding it to /etc/pam.d read pam_authd(8) (keep a root shell open)."

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/authd $(DESTDIR)$(PREFIX)/bin/authctl $(DESTDIR)$(PREFIX)/bin/authd-http \
	  $(DESTDIR)$(PREFIX)/bin/authd-webeid $(DESTDIR)$(PREFIX)/share/man/man1/authd-webeid.1 \
	  $(DESTDIR)/etc/chromium/native-messaging-hosts/eu.webeid.json $(DESTDIR)/etc/opt/chrome/native-messaging-hosts/eu.webeid.json \
	  $(DESTDIR)/usr/lib/mozilla/native-messaging-hosts/eu.webeid.json \
	  $(DESTDIR)$(PREFIX)/share/man/man1/authctl.1 $(DESTDIR)$(PREFIX)/share/man/man5/authd.conf.5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7/authd-protocol.7 $(DESTDIR)$(PREFIX)/share/man/man8/authd.8 \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system/authd.service $(DESTDIR)$(PREFIX)/lib/systemd/system/authd.socket \
	  $(DESTDIR)$(PREFIX)/lib/systemd/user/authd.service $(DESTDIR)$(PREFIX)/lib/systemd/user/authd.socket \
	  $(DESTDIR)$(PREFIX)/lib/systemd/user/authd-desktop.service \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d/authd.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/authd.conf \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/authctl \
	  $(DESTDIR)$(PAMDIR)/pam_authd.so $(DESTDIR)$(PREFIX)/share/man/man8/pam_authd.8
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/authd $(DESTDIR)$(PREFIX)/lib/authd
	rm -f $(DESTDIR)/etc/polkit-1/rules.d/50-authd-fprintd.rules

clean:
	rm -rf .build
