# Trainyard: the two commands a new machine needs are `make demo` and `make test`.
# Everything else here is what those two are made of.

BUILD      ?= build
ASAN_BUILD ?= build-asan
PYTHON     ?= python3
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian 12 packages the build, the tests and the demo need. The container
# tests run a private dockerd (docker.io: containerd, runc, tini) and a
# rootful Podman API service (podman, conmon; runc as its runtime, catatonit
# the init of containers that ask for one, as the agent's do, netavark its
# network stack, host networking only), on images made from a debootstrap'd
# rootfs; nothing rootless (uidmap, slirp4netns, fuse-overlayfs) is needed.
# chromium is the browser the web app's test drives (tests/browser). clang and
# its runtime (libFuzzer, the sanitizers) build the fuzz targets (tests/fuzz).
# wrk is the HTTP load generator of bench/load.py. libpq-dev is the client
# library of the master's PostgreSQL store (--store); postgresql (Debian's
# PostgreSQL 15 server) is what its tests and benchmarks start a private
# server of (tests/pg/pgtmp.sh: initdb in a temp dir, as the user postgres).
# patroni and etcd-server (Patroni's store) run a primary and a
# synchronous replica that fail over under the masters (tests/e2e/patroni.py).
# prometheus (with promtool) checks and scrapes the master's /metrics and
# evaluates the alerts of contrib/prometheus (tests/e2e/test_prometheus.py).
DEB_PACKAGES := gcc clang libclang-rt-14-dev pkg-config meson ninja-build \
	libmicrohttpd-dev libuv1-dev libjansson-dev libyaml-dev libsqlite3-dev libpq-dev postgresql \
	libcurl4-openssl-dev libssl-dev libarchive-dev libcmocka-dev libxml2-dev \
	python3 procps iproute2 curl openssl coreutils util-linux \
	python3-torch python3-sklearn openmpi-bin libopenmpi-dev \
	docker.io containerd runc debootstrap podman conmon catatonit netavark \
	chromium wrk patroni etcd-server prometheus

.PHONY: all build deps test unit e2e demo bench clean asan help s3rver fuzz web browser

all: build

help:
	@echo "make deps   install the missing Debian packages (apt-get; idempotent)"
	@echo "make        build ./$(BUILD)/yard"
	@echo "make test   deps, an ASan+UBSan build, unit tests, fuzz targets (FUZZ_SECONDS each), end-to-end tests"
	@echo "make demo   deps, build, start a local cluster, run the example job, stop"
	@echo "make bench  run the benchmarks in bench/ (prints numbers)"
	@echo "make fuzz   run every libFuzzer target for FUZZ_SECONDS (60) on its corpus"

# Installs only what is missing, so a second run does nothing. Node.js and
# npm (for s3rver, the web app and its browser test) come from Debian only where no node/npm is on the PATH: a
# machine with NodeSource's nodejs (which bundles npm) cannot take Debian's
# npm package.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "deps: all Debian packages present"; fi

$(BUILD)/build.ninja:
	meson setup $(BUILD) -Dwerror=true

# The web app (web/: Preact, Vite) is built once into web/dist and copied
# next to each yard binary as web/, where the master finds it by default.
# Only where web/package.json exists, so the tree builds without the app;
# npm ci runs again only when the lock file changes, npm run build only when
# a file under web/ does (the stamps are in git-ignored places).
ifneq ($(wildcard web/package.json),)
WEB_SRCS  := $(shell find web -name node_modules -prune -o -name dist -prune -o -type f -print)
WEB_CI    := web/node_modules/.yard-ci-stamp
WEB_STAMP := web/dist/.yard-stamp
$(WEB_CI): web/package.json $(wildcard web/package-lock.json)
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@mkdir -p $(@D) && touch $@
$(WEB_STAMP): $(WEB_CI) $(WEB_SRCS)
	cd web && npm run build
	@test -f web/dist/index.html || { echo "web: npm run build wrote no web/dist/index.html" >&2; exit 1; }
	@touch $@
# copy_web DIR: DIR/web becomes a copy of web/dist (without the stamp)
copy_web = rm -rf $(1)/web.tmp && cp -r web/dist $(1)/web.tmp && rm -f $(1)/web.tmp/.yard-stamp && \
	rm -rf $(1)/web && mv $(1)/web.tmp $(1)/web
else
WEB_STAMP :=
copy_web = :
endif
web: $(WEB_STAMP)

build: $(BUILD)/build.ninja $(WEB_STAMP)
	ninja -C $(BUILD)
	@$(call copy_web,$(BUILD))

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Dwerror=true -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

asan: $(ASAN_BUILD)/build.ninja $(WEB_STAMP)
	ninja -C $(ASAN_BUILD)
	@$(call copy_web,$(ASAN_BUILD))

# s3rver, an S3-compatible server the staging tests run on loopback, from
# the committed tests/e2e/s3/package-lock.json (node_modules is git-ignored).
S3RVER := tests/e2e/s3/node_modules/.bin/s3rver
s3rver: $(S3RVER)
$(S3RVER): tests/e2e/s3/package.json tests/e2e/s3/package-lock.json
	cd tests/e2e/s3 && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# playwright-core for the browser test (tests/e2e/test_web.py), from the
# committed tests/browser/package-lock.json; it drives Debian's chromium.
PLAYWRIGHT := tests/browser/node_modules/playwright-core/package.json
browser: $(PLAYWRIGHT)
$(PLAYWRIGHT): tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

unit: asan s3rver
	meson test -C $(ASAN_BUILD) --suite unit --print-errorlogs

e2e: asan s3rver browser
	$(PYTHON) tests/e2e/run.py --yard $(ASAN_BUILD)/yard

test: deps
	@$(MAKE) --no-print-directory asan s3rver browser
	@$(PYTHON) tests/run_all.py --build $(ASAN_BUILD)

demo: deps build
	./examples/demo.sh $(BUILD)/yard

bench: deps build
	$(PYTHON) bench/run.py --yard $(BUILD)/yard
	$(PYTHON) bench/metrics_flood.py --yard $(BUILD)/yard
	$(PYTHON) bench/load.py --yard $(BUILD)/yard
	$(PYTHON) bench/store.py --yard $(BUILD)/yard
	$(PYTHON) bench/blobs.py --yard $(BUILD)/yard
	$(PYTHON) bench/failover.py --yard $(BUILD)/yard --takeover-only

# libFuzzer targets (clang, ASan+UBSan, build-fuzz), each FUZZ_SECONDS (60)
# on its corpus in tests/fuzz/corpus, two at a time (FUZZ_JOBS); make test
# runs them too (tests/run_all.py).
fuzz: deps
	tests/fuzz/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
