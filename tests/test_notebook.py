"""The walkthrough notebook runs top to bottom on a trace made during the test run."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

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
    # findings printed: Himeno's barrier right after its last Allreduce is always redundant
    assert "redundant_collective" in text and "himeno.c:" in text
    figure = nb.cells[-1].outputs[0]["data"]
    assert "application/vnd.plotly.v1+json" in figure  # the custom plot rendered
