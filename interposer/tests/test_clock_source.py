"""Trace time is CLOCK_MONOTONIC nanoseconds whichever clock the hot path reads: raw TSC
ticks (where the kernel's clocksource is the TSC) are converted between anchors taken
around each batch of events. A 200 ms pause the program measures itself must appear in
the trace as the same gap between its two Barriers, with and without buffer flushes in
between (each flush starts a new batch with new anchors)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import read_python

CONVERSION_NS = 1_000  # TSC ticks -> ns between anchors: rounding, not drift


@pytest.mark.parametrize("clock", ["tsc", "monotonic"])
@pytest.mark.parametrize("allreduces,buffer", [(0, "32M"), (20000, "256k")],
                         ids=["one-batch", "after-flushes"])
def test_a_pause_keeps_its_length_in_trace_time(clock, allreduces, buffer, programs,
                                                tmp_path: Path) -> None:
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["sleepgap.c"]), str(allreduces)], np=2, out=out,
                      env={"MPISCOPE_CLOCK": clock, "MPISCOPE_BUFFER_SIZE": buffer})
    assert job.returncode == 0, job.stderr
    measured = {int(r): int(g) for r, g in re.findall(r"rank (\d) gap_ns (\d+)", job.stdout)}
    windows = {int(r): tuple(map(int, w)) for r, *w in
               re.findall(r"rank (\d) window_ns (\d+) (\d+) (\d+) (\d+)", job.stdout)}
    assert len(measured) == len(windows) == 2
    assert all(g >= 200_000_000 for g in measured.values())
    t = read_python(out)
    tc.check_structure(t)
    for rank, gap in measured.items():
        if allreduces:
            assert len(t.of(rank, "BufferFlush")) >= 1
        barriers = [e for e in t.events[rank] if e.kind in ("Enter", "Leave")
                    and e["region"] == "MPI_Barrier"]
        leave_first, enter_second = barriers[1].time, barriers[2].time
        # the program's own reading lies inside the trace's interval
        assert enter_second - leave_first >= gap - CONVERSION_NS, (rank, gap)
        # and each Barrier lies where the program's clock readings around it put it, on
        # CLOCK_MONOTONIC: a load that delays the process widens these bounds, it cannot
        # break them
        before, t0, t1, after = windows[rank]
        assert before - CONVERSION_NS <= leave_first <= t0 + CONVERSION_NS, (rank, windows)
        assert t1 - CONVERSION_NS <= enter_second <= after + CONVERSION_NS, (rank, windows)
