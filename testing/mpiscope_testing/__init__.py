"""Helpers shared by mpiscope's tests and benchmarks (importable, never installed).

Tests sit beside what they test (interposer/tests, analyzer/tests, webui/tests, tests/);
what several of them share lives here, one module per job:

- `tracegen`: write small synthetic OTF2 traces in mpiscope's format (`TraceBuilder`).
- `scenarios`: `Trace` objects built by hand, and real traced runs of analyzer/tests/programs.
- `truth`: a real run's waits and their culprits from its own timestamps (what a test of a
  real run compares mpiscope with: never how the run was meant to be scheduled).
- `mpijobs`: compile interposer/tests/programs and run them under mpirun with LD_PRELOAD.
- `traceread`: read a trace back two independent ways (otf2 Python reader, otf2-print).
- `tracechecks`: properties every mpiscope trace must have.
- `webui`: `mpiscope serve` in a subprocess, free ports, Himeno traces for the web UI.
- `calls_synth`: synthetic `calls` tables for the level-of-detail tests and benchmarks.
- `browser`: the headless Chromium (Selenium) every browser test and benchmark drives.
- `oversubscribed`: a run of 4 ranks on a host with 2 CPUs (MPISCOPE::HOST_CPUS), built.
- `scriptload`: load a script that is no package (a generator, a bench) as a module.

pyproject.toml's `[tool.pytest.ini_options] pythonpath` puts testing/ on sys.path for
pytest; scripts outside pytest (bench/*/run) set PYTHONPATH.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
