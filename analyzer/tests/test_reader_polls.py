"""Polling calls recorded one by one (`MPISCOPE_POLL=all`, or another tool) are read as
the tracer would have recorded them by default: idle visits back to back (at most 1 us
apart, a chain of up to four sites) merge into one row per visit whose `polls` counts
the calls (interposer/README.md, "Polling"). Traces built by construction, so every
row, count and time is known; and a trace whose events would not fit in memory after
merging stops in one line instead of growing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import mpiscope
from mpiscope.archive import memory
from mpiscope.engines import choose
from mpiscope.errors import UserError
from mpiscope_testing.tracegen import TraceBuilder

LONG = 5_000  # ns of the program's own work between polls: more than the 1 us bound


class Polls:
    """Rank 0's polling calls, one by one, and the ground truth of what merges."""

    def __init__(self) -> None:
        self.tb = TraceBuilder(ranks=2)
        self.t = 1_000
        self.calls: dict[str, int] = {}
        for r in (0, 1):
            self.tb.call(r, 0, 500, "MPI_Init")

    def poll(self, function: str, site: str, gap: int = 100, took: int = 50,
             request: int | None = 7) -> tuple[int, int]:
        """An idle polling call `gap` ns after the last one; its (start, end)."""
        start = self.t + gap
        self.tb.enter(0, start, function, callsite=site)
        if request is not None:
            self.tb.request_test(0, start + took // 2, request)
        self.tb.leave(0, start + took, function)
        self.t = start + took
        self.calls[function] = self.calls.get(function, 0) + 1
        return start, start + took

    def finish(self, tmp: Path) -> Path:
        for r in (0, 1):
            self.tb.call(r, self.t + 1_000, self.t + 2_000, "MPI_Finalize")
        return self.tb.write(tmp / "trace")


def _rows(trace, function: str) -> list[tuple[int, int, int, str]]:
    c = trace.calls
    c = c[(c["rank"] == 0) & (c["function"] == function)]
    return list(zip(c["start"].tolist(), c["end"].tolist(), c["polls"].tolist(),
                    c["callsite"].astype(str).tolist(), strict=True))


def test_idle_polls_back_to_back_merge_into_one_visit(tmp_path) -> None:
    p = Polls()
    first, _ = p.poll("MPI_Test", "a.c:10")
    for _ in range(4):
        p.poll("MPI_Test", "a.c:10")
    late, _ = p.poll("MPI_Test", "a.c:10", gap=LONG)  # the program worked meanwhile
    trace = mpiscope.load(p.finish(tmp_path), use_cache=False)
    # five calls of 50 ns: one visit lasting their time inside MPI, from the first Enter
    assert _rows(trace, "MPI_Test") == [(first, first + 250, 5, "a.c:10"),
                                        (late, late + 50, 1, "a.c:10")]


def test_a_cycle_of_two_sites_merges_and_later_visits_move_later(tmp_path) -> None:
    """A polling loop alternating MPI_Test and MPI_Testany: one visit each; the Testany
    visit starts after all the Test calls' time (each merged call moves it later)."""
    p = Polls()
    t0, _ = p.poll("MPI_Test", "a.c:20")
    a0, _ = p.poll("MPI_Testany", "a.c:21")
    for _ in range(2):
        p.poll("MPI_Test", "a.c:20")
        p.poll("MPI_Testany", "a.c:21")
    trace = mpiscope.load(p.finish(tmp_path), use_cache=False)
    assert _rows(trace, "MPI_Test") == [(t0, t0 + 150, 3, "a.c:20")]
    assert _rows(trace, "MPI_Testany") == [(a0 + 100, a0 + 100 + 150, 3, "a.c:21")]


def test_a_cycle_longer_than_the_chain_does_not_merge(tmp_path) -> None:
    p = Polls()
    for _ in range(2):
        for line in range(30, 35):  # five sites: the chain holds four
            p.poll("MPI_Iprobe", f"a.c:{line}", request=None)
    trace = mpiscope.load(p.finish(tmp_path), use_cache=False)
    rows = _rows(trace, "MPI_Iprobe")
    assert len(rows) == 10 and {n for _s, _e, n, _c in rows} == {1}


def test_what_completes_or_comes_between_ends_the_chain(tmp_path) -> None:
    p = Polls()
    p.poll("MPI_Test", "a.c:40")
    # a Test that completes a receive is a visit of its own, and ends the chain
    start = p.t + 100
    p.tb.enter(0, start, "MPI_Test", callsite="a.c:40")
    p.tb.irecv(0, start + 20, src=1, tag=1, nbytes=8, request=7)
    p.tb.leave(0, start + 50, "MPI_Test")
    p.t = start + 50
    p.calls["MPI_Test"] += 1
    p.tb.isend_call(1, 600, 610, dest=0, tag=1, nbytes=8, request=3)
    p.tb.enter(1, 620, "MPI_Wait")
    p.tb.isend_complete(1, 630, request=3)
    p.tb.leave(1, 640, "MPI_Wait")
    after, _ = p.poll("MPI_Test", "a.c:40")
    # another MPI call in between ends it too
    p.tb.call(0, p.t + 100, p.t + 150, "MPI_Comm_rank")
    p.t += 150
    last, _ = p.poll("MPI_Test", "a.c:40")
    p.poll("MPI_Test", "a.c:40")
    trace = mpiscope.load(p.finish(tmp_path), use_cache=False)
    assert [n for _s, _e, n, _c in _rows(trace, "MPI_Test")] == [1, 1, 1, 2]
    assert [s for s, _e, _n, _c in _rows(trace, "MPI_Test")][2:] == [after, last]
    assert len(trace.messages) == 1  # the completed receive is still matched


def test_analyze_counts_every_call(tmp_path) -> None:
    p = Polls()
    for _ in range(3):
        p.poll("MPI_Test", "a.c:50")
        p.poll("MPI_Iprobe", "a.c:51", request=None)
    for _ in range(4):
        p.poll("MPI_Testsome", "a.c:52", gap=LONG)
    functions = mpiscope.analyze(p.finish(tmp_path)).functions.set_index("name")["calls"]
    assert {f: int(functions[f]) for f in p.calls} == p.calls


def test_reading_stops_in_one_line_when_the_kept_events_outgrow_memory(tmp_path,
                                                                       monkeypatch) -> None:
    p = Polls()
    for _ in range(50):
        p.poll("MPI_Test", "a.c:60", gap=LONG)  # nothing merges
    path = p.finish(tmp_path)
    monkeypatch.setattr(memory, "kept_events_budget", lambda available=None: 20)
    with pytest.raises(UserError) as err:
        mpiscope.load(path, use_cache=False)
    line = str(err.value)
    assert "\n" not in line and str(path) in line
    assert "too large for this machine's memory" in line and "events kept" in line


def test_the_plan_lets_a_polling_trace_be_read_on_the_hope_that_it_merges(tmp_path,
                                                                        monkeypatch) -> None:
    """`--engine auto` with less memory than the claimed events need: a trace with
    polling calls is read (merging, bounded by the budget); one without is not."""
    p = Polls()
    for _ in range(20):
        p.poll("MPI_Test", "a.c:70")
    polling = p.finish(tmp_path / "polling")
    plain = TraceBuilder(ranks=2)
    for r in (0, 1):
        plain.call(r, 0, 500, "MPI_Init")
        for i in range(20):
            plain.call(r, 1_000 + 100 * i, 1_050 + 100 * i, "MPI_Comm_rank")
        plain.call(r, 9_000, 9_500, "MPI_Finalize")
    other = plain.write(tmp_path / "plain" / "trace")
    monkeypatch.setattr(choose, "available_memory", lambda: memory.PANDAS_BASE_BYTES)
    chosen = choose.engine_for(polling, "auto", memory_limit="1MB")
    assert (chosen.engine, chosen.merging) == ("pandas", True)
    assert "idle polling calls merge while reading" in chosen.reason()
    assert choose.engine_for(other, "auto", memory_limit="1MB").engine == "none"
    # Dask too: its workers' tasks read with a budget instead of being refused
    assert choose.worker_refusal(polling, 10**9, 2**30, polling=True) is None
    assert choose.worker_refusal(other, 10**9, 2**30) is not None
