"""Polling compressed at the source (programs/poll.c): consecutive polling calls from one
call site that complete nothing are one region visit carrying `mpiscope:calls`; the call
that completes something is recorded as any call; `MPISCOPE_POLL=all` records each.

The program's rank 0 polls with MPI_Test, MPI_Iprobe and MPI_Testany for messages that
rank 1 sends only once told to (after 2000 polls each), and prints how often it called
each function: the ground truth the trace and the analysis must give back.
"""

from __future__ import annotations

from collections import Counter

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc

POLLING = ("MPI_Test", "MPI_Iprobe", "MPI_Testany")


def printed(job: mpijobs.Job) -> dict[str, int]:
    counts = dict(line.split() for line in job.stdout.splitlines() if line.startswith("MPI_"))
    return {f: int(counts[f]) for f in POLLING}


def visits(job: mpijobs.Job) -> tuple[Counter, Counter]:
    """Per polling function on rank 0: its visits, and the calls they stand for."""
    assert job.out is not None
    t = tc.read_both(job.out)
    tc.check_well_formed(t, 2)
    n, calls = Counter(), Counter()
    region = None
    for e in t.events[0]:
        if e.kind == "Enter":
            region = e["region"]
        elif e.kind == "Leave" and e["region"] in POLLING:
            assert e["region"] == region  # a merged visit is still one Enter ... Leave
            n[region] += 1
            calls[region] += int(e.get("mpiscope:calls", 1))
    return n, calls


def check_merged(job: mpijobs.Job) -> None:
    assert job.returncode == 0, job.stderr[-3000:]
    truth = printed(job)
    n, calls = visits(job)
    for f in POLLING:
        assert calls[f] == truth[f], f  # every call accounted for in the trace
        # at least 2000 idle calls in a row: far fewer visits than calls (a visit ends
        # only where the loop was off the CPU for more than 10 us, or something completed)
        assert n[f] * 4 < truth[f], (f, n[f], truth[f])
    functions = mpiscope.analyze(job.out).functions.set_index("name")["calls"]
    for f in POLLING:
        assert functions[f] == truth[f], f  # rank 1 polls nothing


def test_idle_polls_are_one_visit_with_their_count(programs, tmp_path) -> None:
    check_merged(mpijobs.run([str(programs["poll.c"])], np=2, out=tmp_path / "trace"))


def test_poll_all_records_every_call(programs, tmp_path) -> None:
    job = mpijobs.run([str(programs["poll.c"])], np=2, out=tmp_path / "trace",
                      env={"MPISCOPE_POLL": "all"})
    assert job.returncode == 0, job.stderr[-3000:]
    truth = printed(job)
    n, calls = visits(job)
    assert {f: n[f] for f in POLLING} == truth == {f: calls[f] for f in POLLING}
    functions = mpiscope.analyze(job.out).functions.set_index("name")["calls"]
    assert {f: int(functions[f]) for f in POLLING} == truth


def test_unknown_poll_setting_warns_once_and_merges(programs, tmp_path) -> None:
    job = mpijobs.run([str(programs["poll.c"])], np=2, out=tmp_path / "trace",
                      env={"MPISCOPE_POLL": "every"})
    assert [line for line in job.stderr.splitlines() if "MPISCOPE_POLL" in line] == [
        "mpiscope: warning: MPISCOPE_POLL=every is neither all nor merge; using the default "
        "(merge: idle polling calls merged)"]
    check_merged(job)


@pytest.mark.mpich
def test_idle_polls_merge_on_mpich(tmp_path) -> None:
    check_merged(mpijobs.run_mpich("poll.c", tmp_path, 2, out=tmp_path / "trace"))


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
