# mpiscope — one entry point for users and CI.
#   make setup   install what is missing (idempotent, seconds when done)
#   make build   interposer (Open MPI + MPICH), native reader, Himeno
#   make test    setup + build + test-only apps (scripts/setup-apps.sh) + every test (.ci/run)
#   make demo    setup + build + Himeno study + reports + web UI on 127.0.0.1:8050
#   make bench   the benchmarks under bench/
#   make lint    ruff + C warnings as errors + import layers (scripts/check_layers.py)
SHELL := /bin/bash
PY ?= python3
MPI ?= openmpi
JOBS ?= 2
BUILD := build
PYTEST_ARGS ?=

.PHONY: setup build interposer interposer-openmpi interposer-mpich native himeno test lint bench demo clean

setup:
	@bash scripts/setup.sh

build: interposer native himeno

# `make interposer MPI=mpich` builds only the MPICH flavour; `make build` builds both.
interposer:
	@if [ "$(MPI)" = both ]; then $(MAKE) --no-print-directory interposer-openmpi interposer-mpich; \
	else $(MAKE) --no-print-directory interposer-$(MPI); fi

interposer-openmpi interposer-mpich: interposer-%:
	@cmake -S interposer -B $(BUILD)/interposer/$* -DMPISCOPE_MPI=$* -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD)/interposer/$* -j $(JOBS)

native:
	@if [ -f analyzer/native/CMakeLists.txt ]; then \
	  cmake -S analyzer/native -B $(BUILD)/native -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	  cmake --build $(BUILD)/native -j $(JOBS); fi

himeno:
	@if [ -f workloads/himeno/Makefile ]; then $(MAKE) --no-print-directory -C workloads/himeno; fi

build: MPI=both

test: setup
	@$(MAKE) --no-print-directory build
	@bash scripts/setup-apps.sh  # test-only: the Debian MPI applications tests/test_real_apps.py runs
	@$(PY) -m ruff check .
	@$(PY) scripts/check_layers.py
	$(PY) -m pytest $(PYTEST_ARGS)

lint:
	$(PY) -m ruff check .
	$(PY) scripts/check_layers.py

bench: setup build
	@for b in bench/*/run; do echo "== $$b"; bash $$b || exit 1; done

demo: setup build
	$(PY) -m mpiscope study himeno --out $(BUILD)/demo
	@echo "reports: $(CURDIR)/$(BUILD)/demo/index.html (compare-1/2/4.html, scaling.html)"
	@if [ "$${DEMO_SERVE:-1}" != 0 ]; then \
	  echo "web UI: http://127.0.0.1:8050  (Ctrl-C stops it)"; \
	  $(PY) -m mpiscope serve $(BUILD)/demo/himeno-4-unpatched $(BUILD)/demo/himeno-4-patched \
	    --host 127.0.0.1 --port 8050; fi

clean:
	rm -rf $(BUILD)
	@if [ -f workloads/himeno/Makefile ]; then $(MAKE) -C workloads/himeno clean; fi
