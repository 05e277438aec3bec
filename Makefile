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
# slurm-wlm (slurmctld, slurmd, sbatch, scancel, squeue) and munge (its
# authentication) are the real Slurm the Slurm provisioner's test starts in
# a temp dir (tests/e2e/slurm.py); the provisioner itself runs sbatch,
# scancel and squeue, not slurmrestd (docs/elastic.md says why).
# libgnutls28-dev: the master reads and writes the TLS sessions of upgraded
# connections (exec sessions) itself, libmicrohttpd's own forwarding being
# 4 bytes a turn in Debian 12's 0.9.75 (src/master/sessions.c).
# jupyter-notebook (with python3-ipykernel): the notebook server `yard
# notebook` runs in the process runtime (framework jupyter), which the
# browser test opens through the master's proxy.
# tmux is the terminal the yard shell tests type into and read the screen of
# (tests/e2e/test_shell.py), as a user at a terminal would.
# libgit2-dev: the master resolves, fetches and reads the git repositories
# of jobs whose code is in git (src/master/gitcode.c); git is the real
# `git daemon` and `git http-backend` the tests serve repositories with
# (tests/e2e/gitserve.py). docker-registry is the cluster's registry that
# images built from jobs' code are pushed to and pulled from
# (tests/e2e/test_imagebuild.py), apache2-utils its htpasswd for the
# registry that demands a credential.
DEB_PACKAGES := gcc clang libclang-rt-14-dev pkg-config meson ninja-build \
	libmicrohttpd-dev libgnutls28-dev libuv1-dev libjansson-dev libyaml-dev libsqlite3-dev libpq-dev postgresql \
	libcurl4-openssl-dev libevent-dev libssl-dev nettle-dev libarchive-dev libcmocka-dev libxml2-dev \
	python3 procps iproute2 curl openssl coreutils util-linux jupyter-notebook python3-ipykernel \
	python3-torch python3-sklearn openmpi-bin libopenmpi-dev \
	docker.io containerd runc debootstrap podman conmon catatonit netavark \
	chromium wrk patroni etcd-server prometheus slurm-wlm munge tmux \
	libgit2-dev git docker-registry apache2-utils

# What `make deb`, `make package-test` and `make ansible-test` need beyond
# DEB_PACKAGES, installed only by those targets (make test stays lean):
# debhelper and dpkg-dev build the package (dh, dpkg-buildpackage), lintian
# checks it; the package test debootstraps a Debian 12 (debootstrap) and
# boots it with systemd-nspawn (systemd-container). The Ansible role's test
# runs Debian's ansible (ansible-core and its bundled collections) and
# checks the role with ansible-lint; it reaches the machines with ssh and
# makes their keys with ssh-keygen (openssh-client).
PACKAGE_DEB_PACKAGES := debhelper dpkg-dev lintian debootstrap systemd-container \
	ansible ansible-lint openssh-client

.PHONY: all build deps test unit e2e demo bench clean asan help s3rver fuzz web browser \
	package-deps deb package-test ansible-test

all: build

help:
	@echo "make deps   install the missing Debian packages (apt-get; idempotent)"
	@echo "make        build ./$(BUILD)/yard"
	@echo "make test   deps, an ASan+UBSan build, unit tests, fuzz targets (FUZZ_SECONDS, 30, each), end-to-end tests"
	@echo "make demo   deps, build, start a local cluster, run the example job, stop"
	@echo "make bench  run the benchmarks in bench/ (prints numbers)"
	@echo "make fuzz   run every libFuzzer target for FUZZ_SECONDS (60) on its corpus"
	@echo "make deb    build the Debian package ./$(BUILD)/trainyard_VERSION_ARCH.deb (in ./$(DEB_BUILD)), lintian it"
	@echo "make package-test  the .deb installed and booted in a debootstrap'd Debian 12 (tests/package)"
	@echo "make ansible-test  contrib/ansible's role installs the .deb on three booted Debian 12 machines, joins them"

# apt_install_missing TARGET,PACKAGES,EXTRA: installs those of PACKAGES that
# are not installed; EXTRA is shell that may add to $$missing.
apt_install_missing = missing=""; for p in $(2); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	$(3) \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "$(1): all Debian packages present"; fi
# Installs only what is missing, so a second run does nothing. Node.js and
# npm (for s3rver, the web app and its browser test) come from Debian only where no node/npm is on the PATH: a
# machine with NodeSource's nodejs (which bundles npm) cannot take Debian's
# npm package.
deps:
	@$(call apt_install_missing,deps,$(DEB_PACKAGES),\
		command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
		command -v npm >/dev/null 2>&1 || missing="$$missing npm";)

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
	$(PYTHON) tests/e2e/run.py --yard $(ASAN_BUILD)/yard --jobs 2

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

# The Debian package (debian/: debhelper, dh_installsystemd, sysusers), built
# by dpkg-buildpackage in a copy of the sources under $(DEB_BUILD), so that
# neither the tree nor build/ and build-asan/ see its build; the .deb is then
# copied to $(DEB) and checked with lintian (errors and warnings fail).
# The web app is built here first (npm), so the package build needs no npm.
DEB_BUILD   ?= build-deb
DEB_VERSION := $(shell sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build)
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null)
DEB         := $(BUILD)/trainyard_$(DEB_VERSION)_$(DEB_ARCH).deb
DEB_INPUTS  := meson.build meson_options.txt README.md src bench tests/fakenvml docs debian
DEB_SRCS    := $(shell find $(DEB_INPUTS) -type f)

package-deps:
	@$(call apt_install_missing,package-deps,$(DEB_PACKAGES) $(PACKAGE_DEB_PACKAGES),)

deb: $(DEB)
$(DEB): $(DEB_SRCS) $(WEB_STAMP) | package-deps
	@v=$$(dpkg-parsechangelog -l debian/changelog -S Version); [ "$$v" = "$(DEB_VERSION)" ] || { \
		echo "make deb: debian/changelog is at version '$$v', meson.build at '$(DEB_VERSION)':" \
		     "add a debian/changelog entry (dch -v $(DEB_VERSION))" >&2; exit 1; }
	rm -rf $(DEB_BUILD) && mkdir -p $(DEB_BUILD)/src/web
	tar -cf - $(DEB_INPUTS) | tar -xf - -C $(DEB_BUILD)/src
	cp -r web/dist $(DEB_BUILD)/src/web/dist && rm -f $(DEB_BUILD)/src/web/dist/.yard-stamp
	cd $(DEB_BUILD)/src && dpkg-buildpackage -b -us -uc -j$$(nproc)
	mkdir -p $(@D) && cp $(DEB_BUILD)/$(@F) $@.tmp && mv $@.tmp $@
	lintian --fail-on error,warning --display-info --info $@
	@echo "make deb: $@"

# The package test (tests/package): installs $(DEB) into a debootstrap'd
# Debian 12, boots it under systemd-nspawn and runs a job through the
# services. A minute or so (the first run debootstraps; apt fetches from
# Debian's mirror), so not part of make test; .ci/run runs it after.
package-test: $(DEB)
	$(PYTHON) tests/package/run.py --deb $(DEB) --build $(BUILD)

# The Ansible role's test (tests/package/ansible_role.py): contrib/ansible's
# site.yml, run by ansible-playbook over ssh, installs $(DEB) on three
# debootstrap'd Debian 12 machines booted with systemd-nspawn on a private
# network (one master, two agents), joins them, runs a job across both
# agents, then runs again (changed=0), reloads and restarts the master. A
# minute or two; a target of its own, so that the role can be tested without
# the package test and CI says which of the two failed; .ci/run runs it after
# package-test.
ansible-test: $(DEB)
	$(PYTHON) tests/package/ansible_role.py --deb $(DEB) --build $(BUILD)

# libFuzzer targets (clang, ASan+UBSan, build-fuzz), each FUZZ_SECONDS (60)
# on its corpus in tests/fuzz/corpus, two at a time (FUZZ_JOBS); make test
# runs them too (tests/run_all.py).
fuzz: deps
	tests/fuzz/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz $(DEB_BUILD)
