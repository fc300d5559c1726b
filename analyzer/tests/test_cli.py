"""`mpiscope analyze` as a user runs it: summary, JSON, bad input, truncated traces."""

import json
import os
import shutil
import subprocess

import pytest

from mpiscope_testing.scenarios import PROGRAMS, marker_line, traced_run


def mpiscope(*args, cwd=None):
    # a bare environment, but the same `mpiscope`: PATH, and PYTHONPATH where the tests
    # run against a checkout other than the installed one
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")}
    return subprocess.run(["mpiscope", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**env, "COLUMNS": "200"}, timeout=300)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return traced_run("imbalance", 4, ["6"], tmp_path_factory.mktemp("cli"))


def test_analyze_prints_the_summary_and_writes_json(trace, tmp_path):
    out = tmp_path / "a.json"
    # the default top 10 shows every call site where this program waits: with --top 3,
    # which sites make the cut depends on how a busy machine stretched each wait
    p = mpiscope("analyze", trace, "--json", out)
    assert p.returncode == 0, p.stderr
    assert "Time per rank" in p.stdout and "synchronization" in p.stdout
    assert "MPI_Allreduce" in p.stdout  # top functions
    allreduce = f"imbalance.c:{marker_line(PROGRAMS / 'imbalance.c', 'allreduce')}"
    assert "load_imbalance" in p.stdout and allreduce in p.stdout
    recv = f"imbalance.c:{marker_line(PROGRAMS / 'imbalance.c', 'recv')}"
    waits = p.stdout[p.stdout.index("Where ranks wait"):]
    assert "late sender" in waits and recv in waits
    doc = json.loads(out.read_text())
    assert len(doc["ranks"]) == 4
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    assert not any(w.startswith("ranks cut short") for w in doc["warnings"])
    # largest saving first; which one tops the list (the Allreduce's imbalance or the
    # barrier after it) depends on how a busy machine stretched each
    savings = [f["estimated_savings_s"] for f in doc["findings"]]
    assert savings == sorted(savings, reverse=True)
    assert allreduce in {f["callsite"] for f in doc["findings"]}


def test_scorep_trace(tmp_path, scorep_trace):
    p = mpiscope("analyze", scorep_trace, "--json", tmp_path / "s.json")
    assert p.returncode == 0, p.stderr
    assert "quartz10" in p.stdout and "MPI_Send" in p.stdout
    # Score-P records no call sites: the loop is found from the function sequence
    assert "Main loop: 8 iterations, marked by MPI_Send (no call site recorded)" in p.stdout


@pytest.mark.parametrize("make, problem", [
    (lambda d: d / "missing", "no such file or directory"),
    (lambda d: (d / "traces.otf2").write_text("not otf2") and d, "OTF2"),
    (lambda d: d, "not an OTF2 archive"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, make, problem):
    path = make(tmp_path)
    p = mpiscope("analyze", path)
    assert p.returncode == 2
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("mpiscope: ") and str(tmp_path) in line and problem in line
    assert "Traceback" not in p.stderr


def test_truncated_trace_warns_and_still_analyzes(trace, tmp_path):
    cut = tmp_path / "cut"
    shutil.copytree(trace, cut, ignore=shutil.ignore_patterns(".mpiscope-cache"))
    evt = cut / "traces" / "2.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])
    p = mpiscope("analyze", cut, "--json", tmp_path / "cut.json")
    assert p.returncode == 0, p.stderr
    assert "warning" in p.stderr and "ranks cut short" in p.stderr and ": 2;" in p.stderr
    doc = json.loads((tmp_path / "cut.json").read_text())
    assert doc["meta"]["truncated_ranks"] == [2]
    assert len(doc["ranks"]) == 4
    # and the JSON says so among its warnings
    assert [w for w in doc["warnings"] if w.startswith("ranks cut short")] == [
        "ranks cut short (no MPI_Finalize or truncated events), analyzed as far as their "
        "events go: 2"]
