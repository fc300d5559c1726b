"""Polling compressed at the source (programs/poll.c, 2 ranks).

Rank 0 polls with MPI_Test, MPI_Iprobe, MPI_Testany, MPI_Testsome, MPI_Testall,
MPI_Improbe and MPI_Request_get_status on messages that are late by construction (rank 1
sends only after a go-message that rank 0 sends after its idle polls), and prints how
many calls of each it made: the ground truth of the same run. Consecutive idle calls
from one call site (or from the sites of a polling loop's cycle of up to four) become
one visit whose Leave carries `mpiscope:calls`; the call that completes something is
recorded as any call; `MPISCOPE_POLL=all` records each.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace, read_print

POLLING = ("MPI_Test", "MPI_Iprobe", "MPI_Testany", "MPI_Testsome", "MPI_Testall",
           "MPI_Improbe", "MPI_Request_get_status")
IDLE = 20000  # poll.c's idle polls per phase (its default)


@dataclass
class Run:
    job: mpijobs.Job
    out: Path
    calls: Counter[str]  # polling calls rank 0 made, as it counted them


def _run(tmp: Path, mpi: str, idle: int, env: dict[str, str] | None = None) -> Run:
    out = tmp / "trace"
    if mpi == "mpich":
        job = mpijobs.run_mpich("poll.c", tmp, 2, out=out, args=[str(idle)], env=env)
    else:
        job = mpijobs.run([str(mpijobs.build("poll.c", tmp)), str(idle)], np=2, out=out,
                          env=env)
    assert job.returncode == 0, job.stderr[-3000:]
    counted = {int(r): json.loads(d) for r, d in re.findall(r"calls (\d) (\{.*\})", job.stdout)}
    assert sorted(counted) == [0, 1]
    assert not any(counted[1].values())  # rank 1 never polls
    return Run(job, out, Counter(counted[0]))


@pytest.fixture(scope="module", params=["openmpi", pytest.param("mpich",
                                                                 marks=pytest.mark.mpich)])
def merged(request: pytest.FixtureRequest, interposer, tmp_path_factory) -> tuple[Run, Trace]:
    run = _run(tmp_path_factory.mktemp(f"poll-{request.param}"), request.param, IDLE)
    return run, tc.read_both(run.out)  # the otf2 Python reader and otf2-print agree


def _analyze(out: Path, engine: str) -> dict:
    job = subprocess.run(["mpiscope", "analyze", str(out), "--engine", engine, "--json",
                          str(out.parent / f"{engine}.json")], capture_output=True, text=True)
    assert job.returncode == 0, job.stderr
    return json.loads((out.parent / f"{engine}.json").read_text())


def test_every_call_counted_in_far_fewer_visits(merged) -> None:
    """Visits plus the calls merged into them are the program's own calls; there are far
    fewer visits (and events) than calls."""
    run, t = merged
    assert {f: t.calls(0)[f] for f in POLLING} == dict(run.calls)
    assert not any(t.calls(1)[f] for f in POLLING)
    calls = sum(run.calls.values())
    assert calls >= 7 * IDLE
    assert sum(t.enters(0)[f] for f in POLLING) * 10 < calls, t.enters(0)
    assert sum(len(evs) for evs in t.events.values()) * 5 < calls


def test_visits_nest(merged) -> None:
    """Enter/Leave paired and never nested, time never going back, payload events where
    they belong, requests tested only while outstanding: what any reader ignoring the
    attribute relies on."""
    _run_, t = merged
    tc.check_well_formed(t, 2)


def test_merge_rules(merged) -> None:
    """Only idle polling calls merge; a cycle of two sites merges, one of five (longer
    than the interposer follows) does not, nor do polls with long work between them."""
    _run_, t = merged
    for events in t.events.values():
        for e in events:
            if e.kind == "Leave" and "mpiscope:calls" in e.fields:
                assert e["region"] in POLLING and int(e["mpiscope:calls"]) > 1, e
    visits = t.enters(0)
    # the cycle of five: idle/20 rounds, each with 2 Test, 2 Iprobe, 1 get_status visits;
    # polls with tens of us of work between them (idle/100): each its own visit
    assert visits["MPI_Iprobe"] >= 2 * (IDLE // 20)
    assert visits["MPI_Request_get_status"] >= IDLE // 20
    assert visits["MPI_Test"] >= 2 * (IDLE // 20) + IDLE // 100
    # ... and not much more: the other phases (the cycle of two among them) merged
    assert visits["MPI_Iprobe"] < 2 * (IDLE // 20) + IDLE // 20


def test_functions_table(merged) -> None:
    """`mpiscope analyze`, both engines: the functions table counts every call, the
    breakdown adds up, and the engines agree."""
    run, _t = merged
    reports = {e: _analyze(run.out, e) for e in ("pandas", "dask")}
    for report in reports.values():
        calls = {f["name"]: f["calls"] for f in report["functions"]}
        assert {f: calls[f] for f in POLLING} == dict(run.calls)
        for r in report["ranks"]:
            parts = r["compute_s"] + r["communication_s"] + r["synchronization_s"] + r["io_s"]
            assert parts == pytest.approx(r["total_s"], rel=0.01)
    a, b = reports["pandas"], reports["dask"]
    assert a["functions"] == b["functions"] and a["ranks"] == b["ranks"]


def test_threads_table_counts_every_call(merged) -> None:
    """The per-thread table counts a merged visit as its calls, as the functions table."""
    run, _t = merged
    trace = mpiscope.load(run.out)
    th = mpiscope.analyze(trace).threads.set_index("rank")
    c = trace.calls
    outer = c[(c["rank"] == 0) & (c["depth"] == 0) &
              ~c["kind"].isin(["init", "finalize"])]
    assert int(th.loc[0, "calls"]) == int(outer["polls"].sum())
    assert int(outer["polls"].sum()) >= sum(run.calls.values())


@pytest.mark.parametrize("mpi", ["openmpi", pytest.param("mpich", marks=pytest.mark.mpich)])
def test_poll_all_records_every_call(mpi, interposer, tmp_path) -> None:
    run = _run(tmp_path, mpi, 2000, {"MPISCOPE_POLL": "all"})
    t = read_print(run.out)
    assert {f: t.enters(0)[f] for f in POLLING} == dict(run.calls)
    assert not any("mpiscope:calls" in e.fields for evs in t.events.values() for e in evs)
    tc.check_structure(t)
    functions = mpiscope.analyze(run.out).functions.set_index("name")["calls"]
    assert {f: int(functions[f]) for f in POLLING} == dict(run.calls)


def test_unknown_poll_setting_warns_once_and_merges(interposer, tmp_path) -> None:
    run = _run(tmp_path, "openmpi", 200, {"MPISCOPE_POLL": "every"})
    assert [line for line in run.job.stderr.splitlines() if "MPISCOPE_POLL" in line] == [
        "mpiscope: warning: MPISCOPE_POLL=every is neither all nor merge; using the default "
        "(merge: idle polling calls merged)"]
    t = read_print(run.out)
    assert any("mpiscope:calls" in e.fields for e in t.events[0])
    assert {f: t.calls(0)[f] for f in POLLING} == dict(run.calls)


def test_merged_polls_keep_every_count_and_request_of_p2p(programs, tmp_path) -> None:
    """programs/p2p.c's Test family and Iprobe loops, merged by default: the trace is well
    formed (every request posted completes), and the analysis counts the calls each rank
    says it made."""
    job = mpijobs.run([str(programs["p2p.c"])], np=2, out=tmp_path / "trace")
    assert job.returncode == 0, job.stderr[-3000:]
    said: Counter = Counter()
    for line in job.stdout.splitlines():
        if " POLL " in line:
            kv = dict(item.split("=") for item in line.split(" POLL ", 1)[1].split())
            for key, f in (("test", "MPI_Test"), ("testall", "MPI_Testall"),
                           ("testany", "MPI_Testany"), ("testsome", "MPI_Testsome"),
                           ("iprobe", "MPI_Iprobe")):
                said[f] += int(kv[key])
    assert job.out is not None
    tc.check_well_formed(tc.read_both(job.out), 2)
    functions = mpiscope.analyze(job.out).functions.set_index("name")["calls"]
    assert {f: int(functions[f]) for f in said} == dict(said)


def test_whatif_trace_keeps_the_calls(merged, tmp_path) -> None:
    """A what-if replay's trace (`whatif --out`) still counts every polling call."""
    run, _t = merged
    pred = tmp_path / "pred"
    job = subprocess.run(["mpiscope", "whatif", str(run.out), "--latency", "1e-6", "--out",
                          str(pred)], capture_output=True, text=True)
    assert job.returncode == 0, job.stderr
    functions = mpiscope.analyze(pred).functions.set_index("name")["calls"]
    assert {f: int(functions[f]) for f in POLLING} == dict(run.calls)
