"""`mpiscope analyze` as a user runs it: summary, JSON, bad input, truncated traces."""

import json
import os
import re
import shutil
import subprocess

import pytest

from mpiscope.analysis.findings import RUN_WIDE
from mpiscope.archive import reader
from mpiscope_testing import truth
from mpiscope_testing.scenarios import PROGRAMS, marker_line, traced_run
from mpiscope_testing.tracegen import TraceBuilder


def mpiscope(*args, cwd=None):
    # a bare environment, but the same `mpiscope`: PATH, and PYTHONPATH where the tests
    # run against a checkout other than the installed one
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")}
    return subprocess.run(["mpiscope", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**env, "COLUMNS": "200"}, timeout=300)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return traced_run("imbalance", 4, ["6"], tmp_path_factory.mktemp("cli"))


def wait_row(stdout: str, kind: str, function: str, site: str) -> bool:
    """Whether the "Where ranks wait" table has a row for `kind` in `function` at `site`."""
    waits = stdout[stdout.index("Where ranks wait"):]
    return re.search(rf"{kind}\s*│\s*{function}\s*│\s*{re.escape(site)}\s*│", waits) is not None


def test_analyze_prints_the_summary_and_writes_json(trace, tmp_path):
    out = tmp_path / "a.json"
    p = mpiscope("analyze", trace, "--json", out)
    assert p.returncode == 0, p.stderr
    assert "Time per rank" in p.stdout and "synchronization" in p.stdout
    assert "MPI_Allreduce" in p.stdout  # top functions
    doc = json.loads(out.read_text())
    assert len(doc["ranks"]) == 4
    assert isinstance(doc["warnings"], list) and all(isinstance(w, str) for w in doc["warnings"])
    assert not any(w.startswith("ranks cut short") for w in doc["warnings"])
    # largest saving first
    savings = [f["estimated_savings_s"] for f in doc["findings"]]
    assert savings == sorted(savings, reverse=True)
    # the summary shows each finding of the JSON (the default top 10 holds them all);
    # the barrier right after the Allreduce is provably redundant whatever the timing
    # (listed or below the noise floor, as this run's timing has it)
    assert len(doc["findings"]) <= 10
    for f in doc["findings"]:
        # a finding of the whole run (descheduled, as this run's scheduling has it) has
        # no call site
        assert f"• {f['kind']} {f['callsite'] or RUN_WIDE}: " in p.stdout, f
    barrier = f"imbalance.c:{marker_line(PROGRAMS / 'imbalance.c', 'barrier')}"
    assert ("redundant_collective", barrier) in {(f["kind"], f["callsite"])
                                                  for f in doc["findings"] + doc["minor"]}
    floor = doc["noise_floor"]["floor_s"]
    assert all(f["estimated_savings_s"] >= floor for f in doc["findings"])
    # where the ranks waited, as this run's own timestamps show (how long rank 0 waits
    # for rank 1's late sends is up to the scheduler of a busy machine)
    recv = f"imbalance.c:{marker_line(PROGRAMS / 'imbalance.c', 'recv')}"
    t = reader.load(trace)
    waits, _ = truth.late_sender(t)
    shown = truth.at_callsite(t, waits, recv)
    assert wait_row(p.stdout, "late sender", "MPI_Recv", recv) == (shown > 0)
    assert doc["wait_states"]["late_sender_s"] == pytest.approx(waits.sum() / 1e9, rel=1e-9,
                                                                abs=1e-12)


def injected() -> TraceBuilder:
    """imbalance.c's problems by construction (µs): 3 ranks, 5 iterations of 1000 µs.
    Ranks 0 and 1 enter the Allreduce (app.c:30) at +100, rank 2 at +900, all leave at
    +910; a Barrier (app.c:31) follows at once; then rank 0 receives from rank 1 (app.c:41)
    from +920, which sends (app.c:39) at +980."""
    us = 1000
    tb = TraceBuilder(ranks=3)
    for r in range(3):
        tb.call(r, 0, 10 * us, "MPI_Init", callsite="app.c:20")
        tb.call(r, 5010 * us, 5020 * us, "MPI_Finalize", callsite="app.c:50")
    for i in range(5):
        b = (10 + 1000 * i) * us
        for r in range(3):
            tb.collective(r, b + (900 if r == 2 else 100) * us, b + 910 * us,
                          "MPI_Allreduce", sent=8, received=8, in_hash=i * 3 + r + 1,
                          out_hash=100 + i, callsite="app.c:30")
            tb.collective(r, b + 910 * us, b + 915 * us, "MPI_Barrier", callsite="app.c:31")
        tb.recv_call(0, b + 920 * us, b + 990 * us, src=1, tag=7, nbytes=8,
                     callsite="app.c:41")
        tb.send_call(1, b + 980 * us, b + 985 * us, dest=0, tag=7, nbytes=8,
                     callsite="app.c:39")
    return tb


def test_analyze_names_what_waits_and_who_is_late(tmp_path):
    """The summary's load imbalance and late sender, on a trace that has them by
    construction."""
    trace = injected().write(tmp_path / "trace")
    p = mpiscope("analyze", trace, "--json", tmp_path / "a.json")
    assert p.returncode == 0, p.stderr
    assert wait_row(p.stdout, "late sender", "MPI_Recv", "app.c:41")
    assert wait_row(p.stdout, "wait at nxn", "MPI_Allreduce", "app.c:30")
    doc = json.loads((tmp_path / "a.json").read_text())
    found = {(f["kind"], f["callsite"]): f for f in doc["findings"]}
    assert set(found) == {("load_imbalance", "app.c:30"), ("load_imbalance", "app.c:41")}
    # the redundant barrier saves 5 x 5 µs of a 5 ms run: below the 1% noise floor
    [minor] = doc["minor"]
    assert (minor["kind"], minor["callsite"]) == ("redundant_collective", "app.c:31")
    assert minor["minor_reason"] == "its saving (25 µs) is below the noise floor of 50 µs"
    assert doc["noise_floor"]["floor_s"] == pytest.approx(0.01 * 5.0e-3, rel=1e-9)
    assert "Minor, 1 finding (each with why under `minor` in the JSON): redundant_collective" \
        " MPI_Barrier at app.c:31 (saves 25 µs)" in " ".join(p.stdout.split())
    assert found[("load_imbalance", "app.c:30")]["evidence"]["late_rank"] == 2
    assert found[("load_imbalance", "app.c:41")]["evidence"]["late_rank"] == 1
    for kind, site in found:
        assert f"• {kind} {site}: " in p.stdout
    assert "rank 2 is late" in p.stdout and "rank 1 is late" in p.stdout


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
        "ranks cut short (no MPI_Finalize or truncated events): 2; analyzed as far as their "
        "events go"]
