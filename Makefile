# udt-testbed: top-level entry points. `make help` lists them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON       := .venv/bin/python
CARGO        ?= cargo
CXX          ?= g++
UDT          := impl/target/release/udt
SABUL        := impl/target/release/sabul
LIBUDT_PEER  := build/libudt-peer
FUZZ_TARGET  ?= decode
FUZZ_SECONDS ?= 60
# A broken stack fails every case at its timeout: stop early to stay within CI time.
INTEROP_MAXFAIL ?= 20
# Passed through to the conformance suite when set: make conformance STACKS=libudt CASES=handshake
STACKS ?=
CASES  ?=

# cargo-fuzz needs nightly features; the machine has one stable toolchain.
FUZZ_ENV := $(if $(findstring nightly,$(shell rustc -V 2>/dev/null)),,RUSTC_BOOTSTRAP=1)
CONFORMANCE_ENV := $(if $(STACKS),STACKS='$(STACKS)') $(if $(CASES),CASES='$(CASES)')

.PHONY: help setup build build-rust build-udt build-sabul build-frtp check test test-long test-testbed-long test-conformance-long test-rust test-harness test-interop test-conformance \
        testbed testbed-image compare gate test-testbed test-vm compare-backends testbed-cleanup fullscale fullscale-bundle simulate build-sim test-simulate ns2-check dashboards bench fuzz conformance clean

help:
	@echo "make setup        install system packages, .venv and tools (ci/setup.sh)"
	@echo "make build        cargo build --release (impl/) and $(LIBUDT_PEER)"
	@echo "make check        cargo fmt --check, cargo clippy -D warnings, ruff format --check, ruff check, mypy --strict"
	@echo "make test         setup + build + check + cargo tests + harness + interop + conformance + testbed tests (~25 min)"
	@echo "make test-long    the tests of minutes: quick profiles, the zoo, the images, the netem VM (CI runs test and test-long)"
	@echo "make testbed      the papers' WAN experiments on emulated links, report (root; EXPERIMENTS= SCALE= DURATION= REPEAT= REPEAT_ONLY= STACKS= RUNTIME=netns|docker CPUSET= PIN= CORES=)"
	@echo "                  by default udt-rs and libudt 3 times where a band compares them, the rest once (~41 min)"
	@echo "make compare      two testbed runs side by side (A=results/testbed/<run> B=...; or STACKS=libudt,udt-rs in A):"
	@echo "                  change, 95 % intervals, Welch + Holm; exit 1 on a significant regression beyond 5 %"
	@echo "make gate         BASE=<git ref>: this checkout's udt-rs against BASE's, GATE_REPEAT=3 runs each in turns"
	@echo "                  (GATE_EXPERIMENTS=efficiency PARTS=); exit 1 on a real regression, not on noise"
	@echo "make fullscale-bundle  build/fullscale(.tar.gz): the runner, our stacks, libudt and Debian's network tools"
	@echo "                  relocatable, for a many-core host without them (testbed/fullscale/bundle.sh);"
	@echo "                  BASE=<ref> adds that commit's udt as bin/udt-base, for an A/B on the host"
	@echo "make fullscale    the papers' rates (SCALE=1) on a 16-core host from the bundle, lines of FULLSCALE_PLAN at once"
	@echo "                  on CPUs of their own (root; FULLSCALE_DURATION=100 DEADLINE_S=0 RESULTS=results/fullscale)"
	@echo "make testbed-image  the stacks' container image for RUNTIME=docker (docker/Dockerfile.stacks; base image via debootstrap if missing)"
	@echo "make test-testbed  topology-file, cleanup, dashboard and simulated-figure tests (root)"
	@echo "make test-testbed-long  the quick profiles (the papers' bands at scale 0.1) and the container runtime (root)"
	@echo "make test-vm      the netem backend end to end in Debian's stock kernel under QEMU (VM_ACCEL=auto|kvm|tcg), or UML (VM_ACCEL=uml)"
	@echo "make compare-backends  netem beside udt-linkem on each Fig. 11 path class, in that VM (table)"
	@echo "make simulate     the papers' NS-2 figures in the deterministic simulator, results/sim (ONLY=sc04-fig2,... QUICK=1 SEEDS=5)"
	@echo "make test-simulate  the simulated figures' snapshot tests (UPDATE_SNAPSHOTS=1 rewrites them)"
	@echo "make ns2-check    the simulator's TCP against NS-2 2.35's on 36 dumbbells (QUICK=1 SEEDS=5 PROFILE=ns2-2.26), results/sim/ns2-check;"
	@echo "                  exit 1 when a scenario disagrees beyond the tolerance"
	@echo "make testbed-cleanup  remove the udtb-* namespaces (and processes) and containers of runs that are gone; ALL=1: every one"
	@echo "make dashboards   regenerate dashboards/udtbed.json from dashboards/generate.py (Grafana's SDK)"
	@echo "make bench        goodput and CPU: our udt vs libudt, our sabul beside our udt, CPU per Gb paced at 100 Mb/s"
	@echo "                  (root), then the loss_list bench;"
	@echo "                  the impairment sweep (loss, reordering, duplication, an outage; 5 seeds; ~12 min; root);"
	@echo "                  a window-bound long fat path (100 Mb/s x 110 ms, share of what the window allows; root)"
	@echo "make fuzz         cargo fuzz run $(FUZZ_TARGET) for FUZZ_SECONDS=$(FUZZ_SECONDS)"
	@echo "make conformance  the conformance suite: builds only the selected stacks (STACKS=..., CASES=..., UDTC_GATE=... passed through;"
	@echo "                  REPEAT=N: N times, each cell's pass rate, flaky cells reported, FLAKY=fail to fail on them)"
	@echo "make conformance-image  the suite and the reference stacks in one image, for third parties (docker/Dockerfile.conformance)"
	@echo "make clean        remove build outputs"

setup:
	@echo "==> setup: system packages, .venv, tools (ci/setup.sh)"
	@ci/setup.sh

build: build-rust $(LIBUDT_PEER)

build-rust:
	@echo "==> build: cargo build --release (impl/)"
	cd impl && $(CARGO) build --release

# Only the udt binary (the udt-rs stack's `build` in its meta.toml).
build-udt:
	@echo "==> build: $(UDT) (cargo build --release -p udt-cli)"
	cd impl && $(CARGO) build --release -p udt-cli

# Only the sabul binary (the sabul stack's `build` in its meta.toml).
build-sabul:
	@echo "==> build: $(SABUL) (cargo build --release -p udt-cli --bin sabul)"
	cd impl && $(CARGO) build --release -p udt-cli --bin sabul

# Only the frtp binary (the frtp stack's `build` in its meta.toml).
build-frtp:
	@echo "==> build: impl/target/release/frtp (cargo build --release -p udt-cli --bin frtp)"
	cd impl && $(CARGO) build --release -p udt-cli --bin frtp

$(LIBUDT_PEER): stacks/libudt/udt_peer.cpp
	@echo "==> build: $@ (C++ against Debian libudt-dev)"
	@mkdir -p $(dir $@)
	$(CXX) -O2 -g -std=c++17 -Wall -Wextra -pthread -o $@ $< -ludt

# What mypy --strict checks. testbed/tests and conformance/tests have a mypy run each of their own
# in `check`: their modules are top-level ones (no __init__.py), as harness/tests' and impl/interop's
# are, several of the same name (test_capture, test_interop, test_report, conftest: the tests import
# theirs by that name, conformance/conftest.py for conformance/tests), and one mypy run cannot hold
# two modules of a name.
MYPY_PATHS := harness/udtharness conformance/udtconf testbed/udtbed harness/tests impl/bench impl/interop dashboards ci

# Static checks: formatting, lints and types of every package (rustfmt.toml, ruff.toml, mypy.ini),
# the Python side's import contract (ci/import_graph.py), its tree in docs/architecture.md
# (ci/architecture_tree.py) and the Markdown's relative links (ci/doc_links.py). No root and no
# network: the tools are those `make setup` installed (`make test` runs setup first).
check:
	@test -x $(PYTHON) || { echo "make check: no $(PYTHON); run 'make setup' once (it installs the tools)" >&2; exit 2; }
	@echo "==> check: cargo fmt --check, cargo clippy -D warnings (impl/)"
	cd impl && $(CARGO) fmt --all --check && $(CARGO) clippy --release --all-targets --quiet -- -D warnings
	@echo "==> check: ruff format --check, ruff check, mypy --strict (the packages, the harness's, conformance's and testbed's tests, interop, benches, dashboards, ci), import contract, architecture tree, docs' links"
	$(PYTHON) -m ruff format --check --quiet .
	$(PYTHON) -m ruff check --quiet .
	$(PYTHON) -m mypy $(MYPY_PATHS)
	$(PYTHON) -m mypy testbed/tests
	$(PYTHON) -m mypy conformance/tests conformance/conftest.py
	$(PYTHON) ci/import_graph.py
	$(PYTHON) ci/architecture_tree.py
	$(PYTHON) ci/doc_links.py

# `make test` is the loop a change goes through (~25 min on 2 cores): every check, unit, wire,
# interop and conformance case and the testbed's tests. `make test-long` is what takes minutes a
# test: the quick profiles (real transfers at scale 0.1 judged by the papers' bands), the zoo of
# misbehaving stacks against both references, the images' builds, and the netem backend in a stock
# kernel under QEMU (test-vm). CI (.ci/run) runs both. Every stage runs even after one fails (as
# make -k would), each stage's wall time is printed at the end, and the exit status is non-zero if
# any failed. The timing-sensitive stages run alone: beside clippy and the cargo tests the VM's
# emulated CPU starved and its timing checks failed (docs/testbed/backends.md, "The netem backend in a VM").
# Every pytest stage names its slowest tests, for whoever works on the stages' wall time.
export PYTEST_ADDOPTS ?= --durations=12
TEST_STAGES := check test-rust test-harness test-interop test-conformance test-testbed
LONG_STAGES := test-testbed-long test-conformance-long test-vm
define run_stages
	@failed=; times=; \
	for t in $(1); do \
	  t0=$$(date +%s); $(MAKE) --no-print-directory $$t || failed="$$failed $$t"; \
	  times="$$times$$t $$(( $$(date +%s) - t0 ))\n"; \
	done; \
	echo "==> make $(2): each stage's wall time, seconds"; printf "$$times" | awk '{ printf "%-22s %6d\n", $$1, $$2 }'; \
	if [ -n "$$failed" ]; then echo "make $(2): failed:$$failed" >&2; exit 1; fi
endef

test: setup build
	$(call run_stages,$(TEST_STAGES),test)

test-long: setup build
	$(call run_stages,$(LONG_STAGES),test-long)

test-rust:
	@echo "==> test: cargo test --profile test-release (impl/: optimised, no LTO, no debug info)"
	cd impl && $(CARGO) test --profile test-release --no-fail-fast

test-harness:
	@echo "==> test: the harness under the suite, the testbed, the interop tests and the benches (harness/)"
	$(PYTHON) -m pytest harness

test-interop:
	@echo "==> test: interop, our udt <-> libudt, our sabul <-> the suite's SABUL peer, frtp on a circuit (impl/interop)"
	$(PYTHON) -m pytest impl/interop --maxfail=$(INTEROP_MAXFAIL)

test-conformance:
	@echo "==> test: conformance suite (conformance/; the long cases in test-conformance-long)"
	$(CONFORMANCE_ENV) $(PYTHON) -m pytest conformance -m "not long"

# The conformance image's build and run, and the zoo of misbehaving stacks (-m long).
test-conformance-long:
	@echo "==> test: conformance suite, the long cases (the image, the zoo)"
	$(CONFORMANCE_ENV) $(PYTHON) -m pytest conformance -m long

# Testbed (testbed/, topologies/): the SC'04 experiments on emulated links (docs/testbed.md).
# The experiment files to run: names, `default` (those with default = true) or `all` (experiments/).
EXPERIMENTS ?= default
SCALE       ?= 0.1
DURATION    ?= 20
# Each part's stacks this many times, interleaved; the report judges bands on the 95 % interval.
# Left unset, make testbed runs TESTBED_REPEAT times the runs that a band against libudt compares
# (udt-rs and libudt on the SC'04 paths: every "ours against 4.11" row with an interval) and every
# other run once, about 41 minutes on 2 cores (docs/testbed/repeats.md, "Repeats and intervals");
# REPEAT=N runs every stack N times (REPEAT=1: each once, about 35 minutes), and REPEAT_ONLY
# (stack names, or `reference`) repeats only those runs. (`make conformance` reads REPEAT too.)
REPEAT      ?= 1
REPEAT_ONLY ?=
TESTBED_REPEAT      ?= 3
TESTBED_REPEAT_ONLY ?= reference
TESTBED_REPEATS = $(if $(filter file,$(origin REPEAT)),--repeat '$(TESTBED_REPEAT)' \
                    --repeat-only '$(or $(REPEAT_ONLY),$(TESTBED_REPEAT_ONLY))',--repeat '$(REPEAT)' \
                    $(if $(REPEAT_ONLY),--repeat-only '$(REPEAT_ONLY)'))
BACKEND     ?= auto
CALIBRATION ?= refuse
INFLUX      ?= local
# Where the stacks run on the topology hosts: netns (processes in the hosts' namespaces) or
# docker (a container each, image TESTBED_IMAGE).
RUNTIME       ?= netns
TESTBED_IMAGE ?= udtbed-stacks
# Cores (docs/testbed/scale-and-calibration.md, "Cores at full scale"): the CPUs the run may use
# (CPUSET=2-15; default all), whether the emulator, senders and receivers get CPUs of their own
# (PIN=auto: from scale 0.5), and what a part too big for them gets at scale >= 0.5 (CORES=refuse,
# or flag).
CPUSET        ?=
PIN           ?= auto
CORES         ?= refuse
# The simulated figures (experiments/sim) after the experiments, into the run's sim/: full, quick or none.
SIMULATE    ?= full
# A servers file (docs/cluster.md): run across those machines over SSH instead of this one.
SERVERS     ?=
TESTBED_ARGS = --experiments '$(EXPERIMENTS)' --scale '$(SCALE)' --duration '$(DURATION)' $(TESTBED_REPEATS) \
               --simulate '$(SIMULATE)' \
               --backend '$(BACKEND)' --calibration '$(CALIBRATION)' --influx '$(INFLUX)' \
               --runtime '$(RUNTIME)' $(if $(STACKS),--stacks '$(STACKS)') --pin '$(PIN)' --cores '$(CORES)' \
               $(if $(CPUSET),--cpuset '$(CPUSET)') $(if $(filter docker,$(RUNTIME)),--image '$(TESTBED_IMAGE)') \
               $(if $(SERVERS),--servers '$(SERVERS)')

# Two runs side by side (A=results/testbed/<run> B=...), or two stacks of A (STACKS=libudt,udt-rs):
# exit 1 when a band's figure regressed beyond 5 % by more than the repeats' scatter.
compare: setup
	$(PYTHON) -m udtbed compare '$(A)' $(if $(B),'$(B)') $(if $(STACKS),--stacks '$(STACKS)')

# The performance gate: this checkout's udt-rs against BASE's (a git ref, built in build/gate/),
# GATE_REPEAT runs a build in turns, compared; exit 1 on a real regression (docs/testbed/repeats.md).
GATE_REPEAT      ?= 3
GATE_EXPERIMENTS ?= efficiency
gate: setup build
	@test -n "$(BASE)" || { echo "make gate: name the base, e.g. make gate BASE=origin/main" >&2; exit 2; }
	$(PYTHON) -m udtbed gate --base '$(BASE)' --repeat '$(GATE_REPEAT)' --experiments '$(GATE_EXPERIMENTS)' \
		$(if $(PARTS),--parts '$(PARTS)') --duration '$(DURATION)'

testbed: setup build $(if $(filter docker,$(RUNTIME)),testbed-image)
	@echo "==> testbed: $(EXPERIMENTS) at scale $(SCALE), $(DURATION) s per stack (python -m udtbed run)"
	$(PYTHON) -m udtbed run $(TESTBED_ARGS)

# Base image first where no registry has it (docker/build-base.sh: debootstrap, once), then the
# stacks' image from the repository root (.dockerignore lets in only the files it copies). Each
# copied file's sha256 is a label (udtbed.emulation.runtime.IMAGE_FILES), so the runtime refuses a stale image.
testbed-image: build
	@docker/build-base.sh
	@echo "==> testbed-image: $(TESTBED_IMAGE) (docker/Dockerfile.stacks)"
	@docker build -f docker/Dockerfile.stacks -t '$(TESTBED_IMAGE)' \
	  $$($(PYTHON) -c 'from udtbed.emulation.runtime import image_label_args; print(*image_label_args())') . \
	  >build/testbed-image.log 2>&1 || { tail -n 30 build/testbed-image.log >&2; exit 1; }

test-testbed:
	@echo "==> test: testbed (topology files, cleanup, dashboards, simulated figures; the long ones in test-testbed-long)"
	cd testbed && ../$(PYTHON) -m pytest tests -m "not long"

# The quick profiles (-m profile) hold each topology to the papers' bands, as UDT 4.11 can meet
# them (docs/testbed/quick-profiles.md); with the stacks' image and the container runtime (-m long).
test-testbed-long:
	@echo "==> test: testbed, the long tests (quick profiles, the container runtime)"
	cd testbed && ../$(PYTHON) -m pytest tests -m long

testbed-cleanup:
	$(PYTHON) -m udtbed cleanup $(if $(ALL),--all) $(if $(SERVERS),--servers '$(SERVERS)')

# The netem backend for real (docs/testbed/backends.md, "The netem backend in a VM"): our kernel has no
# sch_netem, so Debian's stock kernel boots under QEMU (udtbed vm: KVM where it works, else TCG)
# with this filesystem shared read-only, and runs the netem tests there; build/vm gets the results.
# VM_ACCEL=uml: Debian's user-mode Linux instead, on the real CPU (one CPU, slow system calls).
VM_ACCEL ?= auto
test-vm: setup build
	@echo "==> test: the netem backend in a stock kernel under QEMU (testbed/tests/test_netem_kernel.py, udtbed vm)"
	@mkdir -p build/vm
	cd testbed && ../$(PYTHON) -m udtbed vm --accel '$(VM_ACCEL)' --rw ../build/vm --record ../build/vm/vm.json -- \
	  ../$(PYTHON) -m pytest -p no:cacheprovider tests/test_netem_kernel.py -o junit_family=xunit1 --junitxml=../build/vm/junit.xml

# netem beside udt-linkem on each Fig. 11 path class, in the VM (docs/results/2026-11-26-netem-vm.md).
compare-backends: setup build
	@mkdir -p build/vm
	cd testbed && ../$(PYTHON) -m udtbed vm --accel '$(VM_ACCEL)' --rw ../build/vm -- \
	  ../$(PYTHON) -m udtbed compare-backends --out ../build/vm/compare-backends.json

# Full scale (docs/testbed/fullscale.md, "Full scale on a borrowed host"): the bundle is all a bare Linux
# host with many cores needs beside the working tree; run.sh unpacks it there and runs the plan.
# Here, where matplotlib is, the runs' reports are drawn after.
FULLSCALE_PLAN     ?= testbed/fullscale/plan-16.txt
FULLSCALE_DURATION ?= 100
DEADLINE_S         ?= 0
RESULTS            ?= results/fullscale
fullscale-bundle: build
	@echo "==> fullscale-bundle: build/fullscale, build/fullscale.tar.gz (testbed/fullscale/bundle.sh)"
	@$(if $(BASE),BASE='$(BASE)') testbed/fullscale/bundle.sh

fullscale: fullscale-bundle
	@echo "==> fullscale: $(FULLSCALE_PLAN) at scale 1, $(FULLSCALE_DURATION) s per stack and part -> $(RESULTS)"
	SCALE=1 DURATION='$(FULLSCALE_DURATION)' DEADLINE_S='$(DEADLINE_S)' RESULTS='$(RESULTS)' \
	  bash testbed/fullscale/run.sh '$(FULLSCALE_PLAN)'
	@for d in '$(RESULTS)'/*/2*/; do $(PYTHON) -m udtbed report "$$d"; done

# The deterministic simulator (impl/netsim, docs/simulator.md): the SC'04 and SABUL papers' NS-2
# figures with the real protocol cores, each a JSON, a plot and the paper's claims judged.
ONLY  ?=
QUICK ?=
simulate: setup build-sim
	@echo "==> simulate: experiments/sim -> results/sim (python -m udtbed simulate)"
	$(PYTHON) -m udtbed simulate $(if $(ONLY),--only '$(ONLY)') $(if $(QUICK),--quick) $(if $(SEEDS),--seeds '$(SEEDS)')

build-sim:
	@echo "==> build: impl/target/release/udt-sim (cargo build --release -p netsim)"
	cd impl && $(CARGO) build --release -p netsim

# Part of test-testbed; on its own to rewrite the snapshots after a meant change.
test-simulate: build-sim
	@echo "==> test: the simulated figures' quick versions against their snapshots (testbed/tests/test_simulate.py)"
	cd testbed && $(if $(UPDATE_SNAPSHOTS),UPDATE_SNAPSHOTS=$(UPDATE_SNAPSHOTS)) ../$(PYTHON) -m pytest tests/test_simulate.py

# The simulator's TCP checked against NS-2 itself (docs/simulator.md, "Checked against NS-2"): the same
# dumbbells in both, per-flow goodput, drops and Jain's index; exit 1 when a scenario disagrees.
ns2-check: setup build-sim
	@echo "==> ns2-check: impl/netsim's TCP against NS-2's Sack1 (python -m udtbed ns2-check) -> results/sim/ns2-check"
	$(PYTHON) -m udtbed ns2-check $(if $(QUICK),--quick) $(if $(SEEDS),--seeds '$(SEEDS)') $(if $(PROFILE),--profile '$(PROFILE)')

# Grafana dashboards as code (grafana-foundation-sdk, requirements-dev.txt); the JSON is committed
# and testbed/tests/test_dashboards.py checks that it is current.
dashboards:
	@echo "==> dashboards: dashboards/generate.py -> dashboards/udtbed.json"
	$(PYTHON) dashboards/generate.py

bench: setup build
	@echo "==> bench: goodput and CPU per Gb, udt-rs vs libudt, sabul beside udt-rs (impl/bench/compare.py)"
	$(PYTHON) impl/bench/compare.py
	@echo "==> bench: a listener's resident memory under 1, 100 and 2000 completed handshakes, udt-rs beside libudt (impl/bench/listener_memory.py)"
	$(PYTHON) impl/bench/listener_memory.py
	@echo "==> bench: the impairment sweep, udt-rs beside libudt and udt-rs with 4.11's read-time stamps (udt-rs@read) through udt-linkem, seeds 1..5, byte-exact (impl/bench/impairments.py; root)"
	$(PYTHON) impl/bench/impairments.py
	@echo "==> bench: a long fat path, window-bound (100 Mb/s, 110 ms, window 819): each stack's goodput as a share of what its window allows (impl/bench/long_fat_path.py; root)"
	$(PYTHON) impl/bench/long_fat_path.py
	@echo "==> bench: the link emulator on its own (RTT error, achieved rate, CPU per frame; root)"
	cd impl && $(CARGO) bench -p link-emulator --bench forward

fuzz:
	@echo "==> fuzz: cargo fuzz run $(FUZZ_TARGET) for $(FUZZ_SECONDS) s (impl/fuzz)"
	@ci/setup.sh fuzz
	cd impl && $(FUZZ_ENV) $(CARGO) fuzz run $(FUZZ_TARGET) -- -max_total_time=$(FUZZ_SECONDS)

# Builds only what the selected stacks need (each stack's `build` in its meta.toml; logs in
# results/conformance/build-<stack>.log), then runs the suite. A third party's stack outside the
# tree: `python -m udtconf run --stack PATH` (docs/conformance/README.md).
conformance: setup
	@echo "==> conformance: build $(if $(STACKS),$(STACKS),every conformance stack), then pytest conformance/ $(if $(CASES),CASES=$(CASES))"
	$(CONFORMANCE_ENV) $(PYTHON) -m udtconf build
ifeq ($(strip $(REPEAT)),)
	$(CONFORMANCE_ENV) $(PYTHON) -m pytest conformance
else
	@# REPEAT=N: the selection N times, each into results/conformance/repeat-<k>, then each cell's pass rate.
	@for k in $$(seq 1 $(REPEAT)); do \
	  echo "==> conformance: repeat $$k of $(REPEAT)"; \
	  $(CONFORMANCE_ENV) UDTC_RESULTS=results/conformance/repeat-$$k $(PYTHON) -m pytest conformance -q || true; \
	done
	$(PYTHON) -m udtconf flaky $$(seq -f 'results/conformance/repeat-%g' 1 $(REPEAT)) $(if $(FLAKY),--flaky '$(FLAKY)')
endif

# The conformance suite for third parties (docs/conformance/third-party.md): the suite, tshark and
# both reference stacks compiled from this checkout inside the build, so it needs nothing on the
# host but Docker (no setup, no build). The base image as for testbed-image.
CONFORMANCE_IMAGE ?= udt-conformance
# Certificate authorities the host added (PEM files), trusted in the build too: behind an HTTPS proxy
# that re-signs traffic, crates.io and PyPI are reached only with them.
EXTRA_CA_CERTS ?= $(wildcard /usr/local/share/ca-certificates/*.crt)

.PHONY: conformance-image
conformance-image:
	@docker/build-base.sh
	@echo "==> conformance-image: $(CONFORMANCE_IMAGE) (docker/Dockerfile.conformance)"
	@mkdir -p build
	@docker build -f docker/Dockerfile.conformance -t '$(CONFORMANCE_IMAGE)' \
	  --label org.opencontainers.image.revision=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
	  --build-arg EXTRA_CA_CERTS="$$(cat /dev/null $(EXTRA_CA_CERTS))" . \
	  >build/conformance-image.log 2>&1 || { tail -n 30 build/conformance-image.log >&2; exit 1; }

clean:
	@echo "==> clean: build/, impl/target, results/"
	rm -rf build results
	cd impl && $(CARGO) clean
