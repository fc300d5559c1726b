"""The walkthrough notebook runs top to bottom on a trace made during the test run."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

import mpiscope
from mpiscope.jobs import launch

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "walkthrough.ipynb"


def test_committed_notebook_has_its_outputs_stripped():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.fixture(scope="module")
def trace(tmp_path_factory, himeno) -> Path:
    out = tmp_path_factory.mktemp("nb") / "himeno-2"
    job = launch.run([str(himeno), "--size", "XS", "--iterations", "30"], out, ranks=2,
                     timeout=300)
    assert job.returncode == 0, job.stderr
    return out


def test_walkthrough_executes_on_a_fresh_trace(trace, monkeypatch):
    monkeypatch.setenv("MPISCOPE_TRACE", str(trace))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}},
                   env=dict(os.environ)).execute()
    text = "\n".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "2 ranks" in text  # the loaded trace's summary line
    assert "synchronization_s" in text  # the breakdown table
    assert "MPI_Allreduce" in text and "MPI_Waitall" in text  # the function table
    # the findings printed, listed and minor, each with its call site (which ones a run
    # has is up to its timing: those of this trace's own analysis)
    a = mpiscope.analyze(trace)
    assert a.noise_floor.rule in text
    for f in a.findings:
        assert f"{f.kind:22s} {f.function:15s} {f.callsite:22s}" in text
    for f in a.minor_findings:
        assert f"minor: {f.kind:22s} {f.function:15s} {f.callsite:22s}" in text
        assert f.evidence["minor_reason"] in text
    figure = nb.cells[-1].outputs[0]["data"]
    assert "application/vnd.plotly.v1+json" in figure  # the custom plot rendered
