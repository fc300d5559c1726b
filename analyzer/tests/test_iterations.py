"""Main-loop detection from the repeating call-site sequence, and the breakdown per
iteration."""

import pytest
from scenarios import PROGRAMS, Scenario, marker_line, traced_run

from mpiscope import iterations, reader, waitstates


def loop_trace():
    sc = Scenario()
    for r in range(2):
        sc.call(r, "MPI_Init", 0, 10)
        sc.call(r, "MPI_Bcast", 10, 20, callsite="setup.c:3", root=0)
        t = 100
        for it in range(5):
            work = 50 if (r == 1 and it == 2) else 10  # rank 1 is slow in iteration 2
            sc.call(r, "MPI_Allreduce", t + work if r == 1 else t + 10, t + 60,
                    callsite="loop.c:7")
            sc.call(r, "MPI_Send" if r == 0 else "MPI_Recv", t + 60, t + 70,
                    callsite="loop.c:9")
            t += 100
        sc.call(r, "MPI_Finalize", 700, 710)
    return sc.trace()


def test_loop_marker_is_the_call_site_every_rank_repeats():
    loop = iterations.detect(loop_trace())
    assert (loop.callsite, loop.function) == ("loop.c:7", "MPI_Allreduce")
    assert loop.iterations == 5  # the marker ran 5 times
    assert len(loop.bounds[loop.bounds["rank"] == 0]) == 4  # 4 full spans between them
    r0 = loop.bounds[loop.bounds["rank"] == 0]
    assert list(r0["start"]) == [110, 210, 310, 410]
    assert list(r0["end"]) == [210, 310, 410, 510]


def test_per_iteration_shows_the_slow_iteration():
    t = loop_trace()
    per_it = iterations.per_iteration(t, iterations.detect(t), waitstates.compute(t))
    assert len(per_it) == 4
    sync = list(per_it["synchronization_s"] * 1e9)
    # iteration 2's Allreduce (the span starting at it) has rank 0 waiting 40 ns more
    assert sync[2] == pytest.approx(max(sync)) and sync[2] > sync[0]


def test_no_loop_in_a_straight_line_program():
    sc = Scenario()
    sc.call(0, "MPI_Init", 0, 10)
    sc.call(0, "MPI_Barrier", 10, 20, callsite="a.c:1")
    sc.call(0, "MPI_Finalize", 20, 30)
    assert iterations.detect(sc.trace()) is None


def test_main_loop_of_a_real_program(tmp_path):
    t = reader.load(traced_run("imbalance", 2, ["6"], tmp_path))
    loop = iterations.detect(t)
    src = PROGRAMS / "imbalance.c"
    assert loop.callsite == f"imbalance.c:{marker_line(src, 'allreduce')}"
    assert loop.iterations == 6  # the program's own loop count
