# authd — see README.md. Every target that needs Debian packages installs the missing ones
# (as root) or prints the exact apt-get command (otherwise).

PREFIX      ?= /usr/local
DESTDIR     ?=
SWIFT       ?= swift
BUILD_FLAGS ?=

# What building needs, and what the tests and tools need beyond that.
BUILD_PACKAGES := pkg-config libsqlite3-dev libssl-dev libsystemd-dev libargon2-dev libphonenumber-dev libpcsclite-dev libeac-dev libcbor-dev libpsl-dev
TEST_PACKAGES  := python3 python3-jwt python3-cryptography systemd util-linux groff-base man-db openssl socat pcscd vsmartcard-vpcd python3-dbusmock dbus-daemon python3-authlib python3-flask python3-fido2 python3-cbor2
DEBIAN_PACKAGES := $(BUILD_PACKAGES) $(TEST_PACKAGES)

# `make run`: a user-mode daemon. Without XDG_RUNTIME_DIR (e.g. root in a container) the
# socket goes to /tmp/authd-UID, which authd only accepts if it is ours and private.
RUN_RUNTIME_DIR := $(if $(XDG_RUNTIME_DIR),$(XDG_RUNTIME_DIR),/tmp/authd-$(shell id -u))
RUN_SOCKET      ?= $(RUN_RUNTIME_DIR)/authd/authd.sock

.PHONY: all deps build release run test bench install uninstall clean check-toolchain

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

release: deps check-toolchain
	$(SWIFT) build -c release $(BUILD_FLAGS)

# `make run` also starts a private pcscd (socket-activated, never the system's) whose vpcd reader
# holds the virtual ID card, so `authctl card login` works without hardware. VCARD=contactless
# puts the card on a contactless reader (PACE with the CAN); VCARD=none uses the system's pcscd
# and real readers instead.
VCARD        ?= contact
VCARD_PORT   ?= 35973
VCARD_DIR    := $(RUN_RUNTIME_DIR)/authd-vcard

run: build
	@mkdir -p -m 0700 $(RUN_RUNTIME_DIR)
	@bin=$$($(SWIFT) build --show-bin-path); pids=""; pcsc_env=""; \
	trap 'kill $$pids 2>/dev/null; wait 2>/dev/null' EXIT INT TERM; \
	if [ "$(VCARD)" != none ]; then \
	  rm -rf $(VCARD_DIR) && mkdir -p -m 0700 $(VCARD_DIR)/reader.conf.d; \
	  printf 'FRIENDLYNAME "Virtual PCD"\nDEVICENAME /dev/null:%s\nLIBPATH /usr/lib/pcsc/drivers/serial/libifdvpcd.so\nCHANNELID %s\n' \
	    $(VCARD_PORT) $(VCARD_PORT) > $(VCARD_DIR)/reader.conf.d/vpcd; \
	  profile=$$($$bin/authd-vcard generate --out $(VCARD_DIR) --mode $(VCARD)) || exit 1; \
	  systemd-socket-activate -l $(VCARD_DIR)/pcscd.comm -E PCSCLITE_CSOCK_NAME=$(VCARD_DIR)/pcscd.comm \
	    /usr/sbin/pcscd -f -c $(VCARD_DIR)/reader.conf.d > $(VCARD_DIR)/pcscd.log 2>&1 & pids="$$pids $$!"; \
	  $$bin/authd-vcard run $$profile --port $(VCARD_PORT) > $(VCARD_DIR)/vcard.log 2>&1 & pids="$$pids $$!"; \
	  pcsc_env="PCSCLITE_CSOCK_NAME=$(VCARD_DIR)/pcscd.comm"; \
	  echo "make: virtual ID card ($(VCARD)) in a private pcscd, logs in $(VCARD_DIR): PIN1 1234, PIN2 12345, CAN 123456"; \
	fi; \
	echo "make: starting authd in user mode on $(RUN_SOCKET) (Ctrl-C stops it)"; \
	echo "make: in another terminal: export AUTHD_SOCKET=$(RUN_SOCKET); $$bin/authctl card login --aud demo"; \
	env $$pcsc_env AUTHD_SOCKET=$(RUN_SOCKET) $$bin/authd --user

test: deps check-toolchain
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	$(SWIFT) test --skip-build $(BUILD_FLAGS)

bench: release
	$(SWIFT) build -c release --product authd-bench $(BUILD_FLAGS)
	$$($(SWIFT) build -c release --show-bin-path)/authd-bench $$($(SWIFT) build -c release --show-bin-path)

install: release
	$(eval BIN := $(shell $(SWIFT) build -c release --show-bin-path))
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7 $(DESTDIR)$(PREFIX)/share/man/man8 \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/systemd/user \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/doc/authd \
	  $(DESTDIR)/etc/polkit-1/rules.d
	install -m 0755 $(BIN)/authd $(BIN)/authctl $(BIN)/authd-http $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 man/authctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 man/authd.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 man/authd-protocol.7 $(DESTDIR)$(PREFIX)/share/man/man7/
	install -m 0644 man/authd.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	for unit in authd.service authd.socket; do \
	  sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/$$unit > $(DESTDIR)$(PREFIX)/lib/systemd/system/$$unit; \
	  sed 's|/usr/bin/|$(PREFIX)/bin/|g' systemd/user/$$unit > $(DESTDIR)$(PREFIX)/lib/systemd/user/$$unit; \
	done
	install -m 0644 systemd/authd.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/authd.conf
	install -m 0644 systemd/authd.tmpfiles $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/authd.conf
	install -m 0644 systemd/authd.conf.example $(DESTDIR)$(PREFIX)/share/doc/authd/
	install -m 0644 systemd/authd-fprintd.rules $(DESTDIR)/etc/polkit-1/rules.d/50-authd-fprintd.rules
	$(BIN)/authctl completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/authctl
	@echo "make: installed under $(DESTDIR)$(PREFIX). As root, for the system daemon:"
	@echo "      systemd-sysusers; systemd-tmpfiles --create; systemctl daemon-reload; systemctl enable --now authd.socket"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/authd $(DESTDIR)$(PREFIX)/bin/authctl $(DESTDIR)$(PREFIX)/bin/authd-http \
	  $(DESTDIR)$(PREFIX)/share/man/man1/authctl.1 $(DESTDIR)$(PREFIX)/share/man/man5/authd.conf.5 \
	  $(DESTDIR)$(PREFIX)/share/man/man7/authd-protocol.7 $(DESTDIR)$(PREFIX)/share/man/man8/authd.8 \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system/authd.service $(DESTDIR)$(PREFIX)/lib/systemd/system/authd.socket \
	  $(DESTDIR)$(PREFIX)/lib/systemd/user/authd.service $(DESTDIR)$(PREFIX)/lib/systemd/user/authd.socket \
	  $(DESTDIR)$(PREFIX)/lib/sysusers.d/authd.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/authd.conf \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/authctl
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/authd
	rm -f $(DESTDIR)/etc/polkit-1/rules.d/50-authd-fprintd.rules

clean:
	rm -rf .build
