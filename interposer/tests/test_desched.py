"""Descheduling recorded at the source (programs/desched.c, 3 ranks pinned to one core).

Each rank's thread is runnable but waiting for the CPU while the others run, so its
run-queue delay grows during its compute burst by construction. The interposer samples the
thread's counters (/proc/thread-self/schedstat) on Enter/Leave records as
`mpiscope:cpu_ns` and `mpiscope:run_delay_ns`; the program reads the same counters itself
just before and after each Barrier. The counters of one thread only grow and the reads of
one thread are ordered, so the recorded values must lie between the program's own reads:
ground truth of the same run, no timing threshold. `MPISCOPE_SCHED=off` records none.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Event

NP = 3
CPU, DELAY = "mpiscope:cpu_ns", "mpiscope:run_delay_ns"


def _run(tmp: Path, programs, env: dict[str, str] | None = None):
    out = tmp / "trace"
    job = mpijobs.run([str(programs["desched.c"]), "300"], np=NP, out=out, env=env)
    assert job.returncode == 0, job.stderr[-3000:]
    truth = {}
    for m in re.finditer(r"^desched (\d+) ((?:\d+ ?){8})$", job.stdout, re.M):
        v = [int(x) for x in m.group(2).split()]
        truth[int(m.group(1))] = {"pre": v[0:2], "b0": v[2:4], "b1": v[4:6], "post": v[6:8]}
    assert sorted(truth) == list(range(NP)), job.stdout
    return out, truth


def _barriers(events: list[Event]) -> list[tuple[Event, Event]]:
    """(Enter, Leave) of each MPI_Barrier of one rank, in order."""
    enters = [e for e in events if e.kind == "Enter" and e["region"] == "MPI_Barrier"]
    leaves = [e for e in events if e.kind == "Leave" and e["region"] == "MPI_Barrier"]
    return list(zip(enters, leaves, strict=True))


def _sample(e: Event) -> list[int] | None:
    return [int(e[CPU]), int(e[DELAY])] if e.get(DELAY) is not None else None


@pytest.fixture(scope="module")
def traced(tmp_path_factory, programs):
    out, truth = _run(tmp_path_factory.mktemp("desched"), programs)
    return tc.read_both(out), truth  # the otf2 Python reader and otf2-print agree


def test_burst_descheduling_within_ground_truth(traced) -> None:
    """The recorded run-delay of the compute burst between the two Barriers lies between
    the program's own bounds, and it is positive: 3 busy ranks on one core wait."""
    t, truth = traced
    for rank in range(NP):
        g = truth[rank]
        # by construction: while this rank's burst ran, two other busy ranks shared its core
        assert g["b1"][1] > g["b0"][1], g
        (enter1, leave1), (enter2, leave2) = _barriers(t.events[rank])
        # Barrier 1 is the first traced call after MPI_Init: its Enter is always sampled;
        # its Leave is when 100 us passed since; Barrier 2 follows a 300 ms burst: sampled
        start = _sample(leave1) or _sample(enter1)
        end = _sample(enter2)
        assert start is not None and end is not None, (enter1, leave1, enter2)
        for i in (0, 1):  # cpu, run delay: each between the reads around it
            assert g["pre"][i] <= start[i] <= g["b0"][i], (rank, i, start, g)
            assert g["b1"][i] <= end[i] <= g["post"][i], (rank, i, end, g)
        recorded = end[1] - start[1]
        assert g["b1"][1] - g["b0"][1] <= recorded <= g["post"][1] - g["pre"][1]
        wall = enter2.time - (leave1.time if _sample(leave1) else enter1.time)
        assert 0 < recorded <= wall  # a share of the interval's wall time


def test_samples_only_grow(traced) -> None:
    """Along each thread, the recorded counters never go back."""
    t, _ = traced
    for rank in range(NP):
        samples = [s for e in t.events[rank] if (s := _sample(e))]
        assert len(samples) >= 2
        assert samples == sorted(samples, key=lambda s: s[1])
        assert [s[0] for s in samples] == sorted(s[0] for s in samples)


def test_off_records_none(tmp_path, programs) -> None:
    out, _ = _run(tmp_path, programs, env={"MPISCOPE_SCHED": "off"})
    t = tc.read_both(out)
    assert not any(e.get(DELAY) is not None or e.get(CPU) is not None
                   for evs in t.events.values() for e in evs)
    assert any(e.kind == "Enter" for evs in t.events.values() for e in evs)
