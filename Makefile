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
DEB_PACKAGES := gcc pkg-config meson ninja-build \
	libmicrohttpd-dev libuv1-dev libjansson-dev libyaml-dev libsqlite3-dev \
	libcurl4-openssl-dev libssl-dev libarchive-dev libcmocka-dev libxml2-dev \
	python3 procps iproute2 curl coreutils util-linux \
	python3-torch python3-sklearn openmpi-bin libopenmpi-dev \
	docker.io containerd runc debootstrap podman conmon catatonit netavark

.PHONY: all build deps test unit e2e demo bench clean asan help s3rver fuzz

all: build

help:
	@echo "make deps   install the missing Debian packages (apt-get; idempotent)"
	@echo "make        build ./$(BUILD)/yard"
	@echo "make test   deps, an ASan+UBSan build, unit tests, end-to-end tests"
	@echo "make demo   deps, build, start a local cluster, run the example job, stop"
	@echo "make bench  run the benchmarks in bench/ (prints numbers)"
	@echo "make fuzz   run every libFuzzer target for FUZZ_SECONDS (60) on its corpus"

# Installs only what is missing, so a second run does nothing. Node.js and
# npm (for s3rver) come from Debian only where no node/npm is on the PATH: a
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

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Dwerror=true -Dbuildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

asan: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

# s3rver, an S3-compatible server the staging tests run on loopback, from
# the committed tests/e2e/s3/package-lock.json (node_modules is git-ignored).
S3RVER := tests/e2e/s3/node_modules/.bin/s3rver
s3rver: $(S3RVER)
$(S3RVER): tests/e2e/s3/package.json tests/e2e/s3/package-lock.json
	cd tests/e2e/s3 && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

unit: asan s3rver
	meson test -C $(ASAN_BUILD) --suite unit --print-errorlogs

e2e: asan s3rver
	$(PYTHON) tests/e2e/run.py --yard $(ASAN_BUILD)/yard

test: deps
	@$(MAKE) --no-print-directory asan s3rver
	@$(PYTHON) tests/run_all.py --build $(ASAN_BUILD)

demo: deps build
	./examples/demo.sh $(BUILD)/yard

bench: deps build
	$(PYTHON) bench/run.py --yard $(BUILD)/yard
	$(PYTHON) bench/metrics_flood.py --yard $(BUILD)/yard

# libFuzzer targets (clang, ASan+UBSan, build-fuzz), each FUZZ_SECONDS (60)
# on its corpus in tests/fuzz/corpus.
fuzz:
	@command -v clang >/dev/null 2>&1 || { $(SUDO) apt-get install -y -qq clang libclang-rt-14-dev; }
	tests/fuzz/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
