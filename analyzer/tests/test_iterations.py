"""Main-loop detection from the repeating call-site sequence, and the breakdown per
iteration."""

import re

import numpy as np
import pytest

from mpiscope.analysis import iterations, localcalls, waitstates
from mpiscope.archive import reader
from mpiscope_testing import REPO
from mpiscope_testing.scenarios import (
    HIMENO,
    PROGRAMS,
    Scenario,
    marker_line,
    traced_himeno,
    traced_run,
)


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
    # held as one start per rank and iteration; the table above is built from it
    assert loop.starts.shape == (2, 5) and list(loop.ranks) == [0, 1]
    assert list(loop.starts_by_rank()[0]) == [110, 210, 310, 410, 510]


def test_per_iteration_shows_the_slow_iteration():
    t = loop_trace()
    per_it = iterations.per_iteration(t, iterations.detect(t), waitstates.compute(t))
    ns = {col: [round(v * 1e9) for v in per_it[col]]
          for col in ("compute_s", "communication_s", "synchronization_s")}
    # an iteration runs from one Allreduce to the next on each rank: usually 100 ns, both
    # ranks in the Allreduce from +10 to +60, then 10 ns of Send/Recv: 60 ns of MPI and 40
    # of compute each. Rank 1 computes 40 ns longer before its third Allreduce (so its
    # iteration 1 lasts 140 ns and its iteration 2 60 ns) and enters it at +50: there rank
    # 0 waits 40 ns, and rank 1's Allreduce takes 10 ns
    assert ns["synchronization_s"] == [0, 0, 40, 0]
    assert ns["communication_s"] == [120, 120, (60 - 40) + (10 + 10), 120]
    assert ns["compute_s"] == [80, 40 + (140 - 60), 40 + (60 - 20), 80]


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


# --- the loop is the most frequent repeating period; rarer calls run every k-th ----------

def halo_loop(ranks: int, iterations_: int, reduce_every: int) -> Scenario:
    """Himeno's shape: per iteration a sweep (700 ns of compute), then three halo
    exchanges (one per dimension) from the same three lines, then every k-th iteration
    an Allreduce. Only dimension 0 has a neighbour (the other rank), so its exchange is
    the only one with a peer; on one rank no exchange has one."""
    sc = Scenario()
    for r in range(ranks):
        for it in range(iterations_):
            t = 1000 * it + 700
            for d in range(3):
                peer = 1 - r if ranks == 2 and d == 0 else -1
                sc.call(r, "MPI_Irecv", t, t + 5, callsite="halo.c:10")
                sc.call(r, "MPI_Isend", t + 5, t + 10, callsite="halo.c:11", peer=peer)
                sc.call(r, "MPI_Waitall", t + 10, t + 30, callsite="halo.c:12")
                t += 30
            if (it + 1) % reduce_every == 0:
                sc.call(r, "MPI_Allreduce", t, t + 50, callsite="jacobi.c:20",
                        bytes_sent=8, bytes_recv=8)
    return sc


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_reduction_every_5th_iteration_does_not_mark_the_loop(ranks):
    loop = iterations.detect(halo_loop(ranks, 30, reduce_every=5).trace())
    # 30 iterations (the Allreduce ran 6 times: the old detector reported 6)
    assert loop.iterations == 30
    assert (loop.function, loop.callsite) == ("MPI_Irecv", "halo.c:10")
    r0 = loop.bounds[loop.bounds["rank"] == 0]
    assert list(r0["start"]) == [1000 * it + 700 for it in range(29)]
    assert loop.every("MPI_Allreduce", "jacobi.c:20") == 5
    assert loop.every("MPI_Waitall", "halo.c:12") == 1
    sites = loop.sites.set_index("callsite")
    assert sites.loc["halo.c:11", "per_iteration"] == 3  # three exchanges per iteration
    assert sites.loc["jacobi.c:20", "in_iterations"] == 6


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_reduction_every_iteration_is_part_of_the_loop(ranks):
    loop = iterations.detect(halo_loop(ranks, 30, reduce_every=1).trace())
    assert loop.iterations == 30
    assert loop.every("MPI_Allreduce", "jacobi.c:20") == 1


def test_a_barrier_every_10th_iteration():
    sc = Scenario()
    for r in range(2):
        for it in range(100):
            t = 1000 * it
            sc.call(r, "MPI_Send" if r == 0 else "MPI_Recv", t + 500, t + 520,
                    callsite="step.c:5", peer=1 - r)
            sc.call(r, "MPI_Allreduce", t + 600, t + 650, callsite="step.c:6")
            if it % 10 == 9:
                sc.call(r, "MPI_Barrier", t + 700, t + 720, callsite="step.c:7")
    loop = iterations.detect(sc.trace())
    assert loop.iterations == 100  # not 10, the barrier's count
    assert loop.every("MPI_Barrier", "step.c:7") == 10
    assert loop.every("MPI_Allreduce", "step.c:6") == 1


def test_repeated_polling_counts_once():
    sc = Scenario()
    for r in range(2):
        for it in range(8):
            t = 1000 * it
            sc.call(r, "MPI_Isend", t + 100, t + 110, callsite="p.c:1", peer=1 - r)
            for k in range(1 + (it + r) % 3):  # 1 to 3 MPI_Test calls until it is done
                sc.call(r, "MPI_Test", t + 120 + 20 * k, t + 130 + 20 * k, callsite="p.c:2")
            sc.call(r, "MPI_Allreduce", t + 200, t + 250, callsite="p.c:3")
    loop = iterations.detect(sc.trace())
    assert loop.iterations == 8
    assert loop.every("MPI_Test", "p.c:2") == 1


def test_without_call_sites_the_function_sequence_is_the_loop():
    sc = Scenario()  # as in a Score-P trace: no call sites recorded
    for r in range(2):
        for it in range(6):
            t = 1000 * it
            sc.call(r, "MPI_Send" if r == 0 else "MPI_Recv", t + 100, t + 120, peer=1 - r)
            sc.call(r, "MPI_Recv" if r == 0 else "MPI_Send", t + 200, t + 220, peer=1 - r)
    loop = iterations.detect(sc.trace())
    assert (loop.iterations, loop.function, loop.callsite) == (6, "MPI_Send", "")
    assert set(loop.sites["function"]) == {"MPI_Send", "MPI_Recv"}


def test_loop_of_a_score_p_trace(scorep_trace):
    loop = iterations.detect(reader.load(scorep_trace))
    assert (loop.iterations, loop.function, loop.callsite) == (8, "MPI_Send", "")


def test_patched_himeno_reducing_every_5th_iteration(tmp_path):
    trace = traced_himeno(2, ["--size", "XS", "--iterations", "60", "--variant", "patched",
                              "--allreduce-every", "5"], tmp_path)
    loop = iterations.detect(reader.load(trace))
    src = HIMENO.with_suffix(".c").read_text().splitlines()
    allreduce = next(i for i, s in enumerate(src, 1) if "MPI_Allreduce(&wgosa" in s)
    assert loop.iterations == 60
    assert loop.every("MPI_Allreduce", f"himeno.c:{allreduce}") == 5


def md_steps(steps: int, rebuild_every: int) -> Scenario:
    """A molecular-dynamics loop as LAMMPS runs it (by construction): each step computes,
    then sends ghost positions forward (Irecv/Send/Wait per neighbour), computes forces
    and sends them back (reverse); every `rebuild_every`-th step exchanges atoms and
    rebuilds the ghosts (other calls, more of them) instead of the forward pass, and
    reduces the thermodynamic output."""
    sc = Scenario()

    def swap(r: int, t: int, site: str) -> int:
        for _ in range(2):  # two neighbours, both the other rank
            sc.call(r, "MPI_Irecv", t, t + 1, callsite=f"comm.cpp:{site}", peer=1 - r)
            sc.call(r, "MPI_Send", t + 1, t + 3, callsite=f"comm.cpp:{site}+1", peer=1 - r)
            sc.call(r, "MPI_Wait", t + 3, t + 5, callsite=f"comm.cpp:{site}+2")
            t += 5
        return t

    for r in range(2):
        sc.call(r, "MPI_Init", 0, 10)
        t = 100
        for step in range(steps):
            t += 200  # integrate
            rebuild = step % rebuild_every == 0
            for site in ("exchange", "borders", "borders2") if rebuild else ("forward",):
                t = swap(r, t, site)
            t = swap(r, t + 500, "reverse")  # after the forces
            if rebuild:
                sc.call(r, "MPI_Allreduce", t, t + 10, callsite="thermo.cpp:7")
                t += 10
        sc.call(r, "MPI_Finalize", t + 100, t + 110)
    return sc


def test_a_time_step_whose_calls_change_every_kth_step_is_the_loop():
    """Neighbouring steps' calls differ every 20th step, so no stretch longer than 19
    steps repeats exactly: the loop is still the step, whose reverse pass recurs a regular
    number of calls apart."""
    loop = iterations.detect(md_steps(100, 20).trace())
    assert loop.iterations == 100
    assert (loop.function, loop.callsite) == ("MPI_Irecv", "comm.cpp:reverse")
    every = {row.callsite: row.every for row in loop.sites.itertuples()}
    assert every["comm.cpp:reverse"] == 1 and every["thermo.cpp:7"] == 20


def test_a_set_up_stretched_by_descheduling_does_not_hide_the_main_loop():
    """LAMMPS on a busy machine: reading its input (a broadcast per line, some lines with
    no work between them) was descheduled so long that its 16 broadcasts span more time
    than the 100 time steps after them. The loop is the time step: it spans far more of
    the calls."""
    sc = Scenario()
    for r in range(2):
        sc.call(r, "MPI_Init", 0, 10, callsite="main.c:2")
        t = 100
        for line in range(16):  # 16 input lines over ~96 ms, every other one without work
            t += 12_000_000 if line % 2 else 10
            sc.call(r, "MPI_Bcast", t, t + 20, callsite="input.c:40", root=0)
            t += 20
        for _step in range(100):  # 100 steps over 80 ms
            t += 700_000
            sc.call(r, "MPI_Sendrecv", t, t + 50_000, callsite="comm.c:10", peer=1 - r)
            t += 50_000
            sc.call(r, "MPI_Allreduce", t, t + 50_000, callsite="thermo.c:5",
                    bytes_sent=8, bytes_recv=8)
            t += 50_000
        sc.call(r, "MPI_Finalize", t + 10, t + 20, callsite="main.c:9")
    loop = iterations.detect(sc.trace())
    assert loop is not None
    assert (loop.callsite, loop.iterations) == ("comm.c:10", 100)



def descheduled_steps(steps: int) -> Scenario:
    """Himeno on a busy machine, by construction: 2 ranks, each step 100 µs of
    computation, then three halo exchanges (one per dimension, from the same lines), and an
    Allreduce every 5th step. In a fifth of the steps, chosen at random, a rank waits 20 ms
    for a core in the middle of its computation; the run-queue delay samples on its calls
    show that, as the interposer records them."""
    sc = Scenario()
    rng = np.random.default_rng(7)
    for r in range(2):
        sc.call(r, "MPI_Init", 0, 10, run_delay=(0, 0))
        t, delay = 1000, 0
        for step in range(steps):
            t += 100_000
            if rng.random() < 0.2:
                t += 20_000_000
                delay += 20_000_000
            sampled = {"run_delay": (delay, delay)}
            for dim in range(3):
                sc.call(r, "MPI_Irecv", t, t + 2_000, callsite="himeno.c:240", peer=1 - r,
                        **sampled)
                sc.call(r, "MPI_Isend", t + 2_000, t + 4_000, callsite="himeno.c:243",
                        peer=1 - r, **sampled)
                sc.call(r, "MPI_Waitall", t + 4_000, t + 30_000, callsite="himeno.c:246",
                        **sampled)
                t += 30_000 + 1_000 * dim  # unpacking this dimension's halo
            if step % 5 == 4:
                sc.call(r, "MPI_Allreduce", t, t + 10_000, callsite="himeno.c:297",
                        bytes_sent=8, bytes_recv=8, **sampled)
                t += 10_000
        sc.call(r, "MPI_Finalize", t + 10, t + 20, run_delay=(delay, delay))
    return sc


def test_steps_that_waited_for_a_core_are_still_the_loop():
    """The loop is the 60 steps: the steps that waited for a core compute as much as the
    others once the measured run-queue delay is taken out (counted as computation, the
    waiting made the steps look like an inner loop's repetitions, some with next to no
    computation: each halo exchange was reported as an iteration, 180 of them)."""
    loop = iterations.detect(descheduled_steps(60).trace())
    assert loop is not None
    assert (loop.iterations, loop.callsite) == (60, "himeno.c:240")
    assert loop.every("MPI_Allreduce", "himeno.c:297") == 5


# --- a loop is anchored on a call that communicates -------------------------------------

def datatype_loop(steps: int, exchange: bool) -> Scenario:
    """Per step on 2 ranks, as a datatype test does: two MPI_Type_create_resized calls
    from one line (the most frequent call, and each step's first), commit and free and,
    if `exchange`, a Sendrecv with the other rank and an Allreduce between them."""
    sc = Scenario()
    for r in range(2):
        sc.call(r, "MPI_Init", 0, 10)
        for it in range(steps):
            t = 1000 + 1000 * it
            for k in range(2):
                sc.call(r, "MPI_Type_create_resized", t + 10 * k, t + 10 * k + 5,
                        callsite="dt.py:10")
            sc.call(r, "MPI_Type_commit", t + 20, t + 25, callsite="dt.py:11")
            if exchange:
                sc.call(r, "MPI_Sendrecv", t + 400, t + 450, callsite="dt.py:12",
                        kind="p2p_sendrecv", peer=1 - r)
                sc.call(r, "MPI_Allreduce", t + 500, t + 550, callsite="dt.py:13")
            sc.call(r, "MPI_Type_free", t + 600, t + 605, callsite="dt.py:14")
        sc.call(r, "MPI_Finalize", 1000 * (steps + 1), 1000 * (steps + 1) + 10)
    return sc


def test_a_datatype_call_is_never_the_loop_s_anchor():
    loop = iterations.detect(datatype_loop(10, exchange=True).trace())
    assert (loop.iterations, loop.function, loop.callsite) == (10, "MPI_Sendrecv", "dt.py:12")
    assert list(loop.starts_by_rank()[0]) == [1000 * it + 1400 for it in range(10)]
    # the datatype calls still belong to the loop's iterations: each but the last, which
    # the run ends before the next step's datatypes
    assert loop.every("MPI_Type_create_resized", "dt.py:10") == 1
    assert loop.every("MPI_Type_free", "dt.py:14") == 1
    assert loop.sites.set_index("callsite").loc["dt.py:10", "in_iterations"] == 9


def test_no_loop_from_local_calls_alone():
    assert iterations.detect(datatype_loop(10, exchange=False).trace()) is None


def test_the_interposer_s_local_functions_are_local():
    """Every function the interposer's spec leaves unrecorded as local (`MPI_X local`,
    `MPI_PREFIX* local`) is local to the analysis too; its communicating entries are not."""
    spec = (REPO / "interposer" / "gen" / "mpi.spec").read_text()
    local = re.findall(r"^(MPI_\w+?)\*? local\s*$", spec, re.M)
    assert len(local) > 100 and all(localcalls.is_local(n) for n in local)
    for name in ("MPI_Sendrecv", "MPI_Allreduce", "MPI_Comm_split", "MPI_Comm_dup",
                 "MPI_Cart_create", "MPI_Win_fence", "MPI_File_open", "MPI_Test",
                 "MPI_Iprobe", "MPI_Request_get_status", "MPI_Wait", "MPI_Send_c"):
        assert not localcalls.is_local(name), name
    for name in ("MPI_Type_create_resized", "MPI_Type_commit", "MPI_Type_free",
                 "MPI_Comm_rank", "MPI_Wtime", "MPI_Pack", "MPI_Comm_set_name",
                 "MPI_Type_contiguous_c"):
        assert localcalls.is_local(name), name
