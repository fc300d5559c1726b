"""The notebook façade, driven as a notebook user does: `mpiscope.load(DIR)` gives the
tables, `mpiscope.analyze(trace)` the analysis whose JSON `mpiscope analyze --json` writes;
load recovers ranks killed outright, as analyze does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import mpiscope
from mpiscope.analysis import waitstates
from mpiscope_testing.killing import ENV, KILLED, run_and_kill
from mpiscope_testing.scenarios import (
    PROGRAMS,
    analyze_json,
    compile_program,
    marker_line,
    traced_run,
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return traced_run("imbalance", 3, ["3"], tmp_path_factory.mktemp("facade"))


def test_load_and_analyze_give_what_the_cli_writes(run: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    trace = mpiscope.load(run)
    for table in ("ranks", "comms", "calls", "messages", "collectives"):
        assert isinstance(getattr(trace, table), pd.DataFrame)
    assert trace.meta.num_ranks == 3 and len(trace.calls)

    computed = []
    compute = waitstates.compute
    monkeypatch.setattr(waitstates, "compute", lambda t: computed.append(t) or compute(t))
    analysis = mpiscope.analyze(trace)
    # the session reads `trace` itself (its calls relabelled by their chosen frame)
    assert analysis.raw_trace is trace
    doc = analysis.to_dict()
    # the barrier directly after the allreduce is redundant by construction; whether it
    # is listed or minor depends on how long this machine took to start the job
    barrier = f"imbalance.c:{marker_line(PROGRAMS / 'imbalance.c', 'barrier')}"
    assert any(f.kind == "redundant_collective" and f.callsite == barrier
               for f in analysis.findings + analysis.minor_findings)
    assert len(analysis.ranks) == 3
    # the breakdown, the findings, the iterations and the JSON share one computation
    assert computed == [analysis.trace]

    _, written = analyze_json(run, tmp_path)
    # as JSON (which makes the int keys of the findings' evidence strings): the same
    assert json.loads(json.dumps(doc)) == written
    assert analysis.to_json() == json.dumps(written, indent=2)


def test_import_stays_light() -> None:
    """`import mpiscope` (and so `mpiscope lib`) loads neither pandas nor the analyses."""
    code = ("import sys, mpiscope; print(sorted(m for m in sys.modules if m.split('.')[0] "
            "in ('pandas', 'numpy') or m.startswith('mpiscope.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_load_recovers_a_killed_rank(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    exe = compile_program("killed", tmp_path)
    job = run_and_kill(exe, tmp_path / "trace", after=10)
    assert (job.out / ".mpiscope-live" / f"rank{KILLED}.events").is_file(), job.stderr
    trace = mpiscope.load(job.out)
    assert f"mpiscope: recovered rank {KILLED} up to its kill" in capsys.readouterr().err
    assert not (job.out / ".mpiscope-live").exists()
    assert trace.meta.num_ranks == 3
    assert (trace.calls["rank"] == KILLED).sum() > 0
    # what the CLI reads next is the same trace, with nothing left to recover
    proc, written = analyze_json(job.out, tmp_path, ENV)
    assert "recovered rank" not in proc.stderr
    assert mpiscope.analyze(trace).to_dict()["ranks"] == written["ranks"]
