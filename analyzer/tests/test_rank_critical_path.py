"""The critical path computed rank by rank (engines/rankcritical) is the pandas engine's.

Every trace of the Dask engine's test set (Himeno 4 ranks, RMA fence, non-blocking
all-to-all, MPI-IO, two threads, Score-P, synthetic), the hand-made traces whose path is
known (as in test_critical_path.py, plus rooted collectives: a late broadcast root and an
early reduce) and the traced `imbalance` program: `rankcritical.compute` over the ranks'
slices gives the segments and JSON of `Analysis.critical_path`. The client's walk holds
at most K ranks' files (K=2 on a 16-rank trace whose path visits more), and the passes
pickle and run on a real 2-worker dask.distributed cluster.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import mpiscope
from mpiscope.analysis.session import Analysis
from mpiscope.archive import cache
from mpiscope.engines import cluster, rankcritical, slices
from mpiscope_testing import scenarios
from mpiscope_testing.enginetraces import engine_traces, synth
from mpiscope_testing.tracegen import TraceBuilder


# the hand-made traces of test_critical_path.py (every rank: MPI_Init 0-10)
def builder(ranks: int, finalize: list[int]) -> TraceBuilder:
    tb = TraceBuilder(ranks=ranks)
    for r in range(ranks):
        tb.call(r, 0, 10, "MPI_Init", callsite="c.c:1")
        tb.call(r, finalize[r], finalize[r] + 10, "MPI_Finalize", callsite="c.c:99")
    return tb


def late_sender_chain() -> TraceBuilder:
    tb = builder(3, [1000, 900, 800])
    tb.send_call(2, 300, 310, dest=1, tag=1, nbytes=8, callsite="c.c:20")
    tb.recv_call(1, 20, 320, src=2, tag=1, nbytes=8, callsite="c.c:21")
    tb.send_call(1, 500, 510, dest=0, tag=2, nbytes=8, callsite="c.c:22")
    tb.recv_call(0, 30, 520, src=1, tag=2, nbytes=8, callsite="c.c:23")
    return tb


def barrier_imbalance() -> TraceBuilder:
    tb = builder(3, [500, 500, 500])
    for r, start in enumerate([100, 400, 200]):
        tb.collective(r, start, 420, "MPI_Barrier", callsite="c.c:30")
    return tb


def waitall_late_partner() -> TraceBuilder:
    tb = builder(2, [400, 350])
    tb.irecv_call(0, 20, 25, request=1, callsite="c.c:40")
    tb.isend_call(0, 26, 30, dest=1, tag=5, nbytes=8, request=2, callsite="c.c:41")
    tb.enter(0, 40, "MPI_Waitall", callsite="c.c:42")
    tb.isend_complete(0, 50, request=2)
    tb.irecv(0, 320, src=1, tag=6, nbytes=8, request=1)
    tb.leave(0, 330, "MPI_Waitall")
    tb.irecv_call(1, 300, 302, request=1, callsite="c.c:40")
    tb.isend_call(1, 303, 306, dest=0, tag=6, nbytes=8, request=2, callsite="c.c:41")
    tb.enter(1, 310, "MPI_Waitall", callsite="c.c:42")
    tb.irecv(1, 312, src=0, tag=5, nbytes=8, request=1)
    tb.isend_complete(1, 314, request=2)
    tb.leave(1, 315, "MPI_Waitall")
    return tb


def ssend_late_receiver() -> TraceBuilder:
    tb = builder(2, [400, 350])
    tb.send_call(0, 100, 300, dest=1, tag=3, nbytes=64, function="MPI_Ssend",
                 callsite="c.c:60")
    tb.recv_call(1, 280, 300, src=0, tag=3, nbytes=64, callsite="c.c:61")
    return tb


def changing_last_arriver() -> TraceBuilder:
    tb = builder(3, [700, 650, 680])
    for r, start in enumerate([100, 300, 200]):
        tb.collective(r, start, 310, "MPI_Allreduce", sent=8, received=8, callsite="c.c:50")
    for r, start in enumerate([600, 400, 500]):
        tb.collective(r, start, 610, "MPI_Allreduce", sent=8, received=8, callsite="c.c:50")
    return tb


def rooted_collectives() -> TraceBuilder:
    """A Bcast from rank 2, which comes last (300); a Reduce to rank 2 (entered at 400)
    whose last contributor is rank 0 (500); a Barrier that ranks 0 and 2 enter at the
    same time (600), after rank 1 (550), which finishes last (900)."""
    tb = builder(3, [850, 900, 800])
    for r, start in enumerate([100, 150, 300]):
        tb.collective(r, start, 310, "MPI_Bcast", root=2, sent=8, received=8,
                      callsite="c.c:70")
    for r, start in enumerate([500, 450, 400]):
        tb.collective(r, start, 510, "MPI_Reduce", root=2, sent=8, received=8,
                      callsite="c.c:71")
    for r, start in enumerate([600, 550, 600]):
        tb.collective(r, start, 610, "MPI_Barrier", callsite="c.c:72")
    return tb


def single_rank() -> TraceBuilder:
    tb = builder(1, [500])
    tb.collective(0, 100, 110, "MPI_Barrier", callsite="c.c:70")
    return tb


def late_start() -> TraceBuilder:
    tb = TraceBuilder(ranks=2)
    tb.call(0, 0, 10, "MPI_Init", callsite="c.c:1")
    tb.call(1, 0, 50, "MPI_Init", callsite="c.c:1")
    for r, start in enumerate([100, 200]):
        tb.collective(r, start, 210, "MPI_Barrier", callsite="c.c:30")
        tb.call(r, 300, 310, "MPI_Finalize", callsite="c.c:99")
    return tb


def clock_skew() -> TraceBuilder:
    tb = builder(2, [300, 280])
    tb.send_call(0, 200, 210, dest=1, tag=1, nbytes=8, callsite="c.c:90")
    tb.recv_call(1, 100, 150, src=0, tag=1, nbytes=8, callsite="c.c:91")
    return tb


def off_path() -> TraceBuilder:
    tb = builder(3, [500, 500, 1000])
    tb.send_call(1, 200, 210, dest=0, tag=1, nbytes=8, callsite="c.c:80")
    tb.recv_call(0, 100, 220, src=1, tag=1, nbytes=8, callsite="c.c:81")
    return tb


HAND_MADE: dict[str, Callable[[], TraceBuilder]] = {
    f.__name__: f for f in (late_sender_chain, barrier_imbalance, waitall_late_partner,
                            ssend_late_receiver, changing_last_arriver, rooted_collectives,
                            single_rank, late_start, clock_skew, off_path)}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory, scorep_trace: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rank-cp-traces")
    for sub in ("fence", "ialltoall", "io", "imbalance"):
        (d / sub).mkdir()
    out = {
        **engine_traces(d, scorep_trace),
        "imbalance": scenarios.traced_run("imbalance", 3, ["4"], d / "imbalance"),
        **{name: make().write(d / name) for name, make in HAND_MADE.items()},
    }
    for p in out.values():  # the pandas engine's own cache is not what we test
        shutil.rmtree(p / cache.CACHE_NAME, ignore_errors=True)
    return out


def in_process(a: Analysis) -> rankcritical.Runner:
    """The runner the tests use: every rank's slice of the pandas trace, one after another."""
    parts = slices.all_of_trace(a.trace, a.wait_states)
    return lambda fn: [fn(s) for s in parts]


def assert_same_path(a: Analysis, got) -> None:
    want = a.critical_path
    pd.testing.assert_frame_equal(got.segments, want.segments)
    assert got.to_dict() == want.to_dict()
    assert (got.begin_ns, got.end_ns, got.num_ranks) == (want.begin_ns, want.end_ns,
                                                         want.num_ranks)


NAMES = ["himeno", "fence", "ialltoall", "io", "threads", "scorep", "synth", "imbalance",
         *HAND_MADE]


@pytest.mark.parametrize("name", NAMES)
def test_rank_by_rank_path_equals_pandas_engine(name: str, traces: dict[str, Path],
                                                tmp_path: Path) -> None:
    a = Analysis(mpiscope.load(traces[name], use_cache=False))
    got = rankcritical.compute(in_process(a), tmp_path, a.wait_states.skew)
    assert_same_path(a, got)
    assert len(got.segments) > 0
    # what the client reads later stays: one timeline file per rank, nothing else
    assert sorted(p.name for p in (tmp_path / rankcritical.SUBDIR).iterdir()) == sorted(
        f"rank={r}.npy" for r in a.trace.ranks["rank"])


@pytest.mark.parametrize("name", ["himeno", "synth", "rooted_collectives"])
def test_fewer_buckets_than_ranks_give_the_same_path(name: str, traces: dict[str, Path],
                                                    tmp_path: Path, monkeypatch) -> None:
    """Collective instances cut into fewer buckets than ranks (as at a thousand ranks):
    the ranks past the last bucket match none, the path is the same."""
    monkeypatch.setattr(rankcritical, "MIN_BUCKETS", 2)
    a = Analysis(mpiscope.load(traces[name], use_cache=False))
    assert a.trace.num_ranks > 2
    matched = []
    real = rankcritical.last_arrivers
    monkeypatch.setattr(rankcritical, "last_arrivers",
                        lambda s, scratch: matched.append(real(s, scratch)) or matched[-1])
    got = rankcritical.compute(in_process(a), tmp_path, a.wait_states.skew)
    assert_same_path(a, got)
    assert len(matched) == a.trace.num_ranks and all(n == 0 for n in matched[2:])
    assert sum(matched[:2]) > 0


def test_rooted_collectives_jump_to_root_and_last_contributor(traces: dict[str, Path],
                                                              tmp_path: Path) -> None:
    """The path of the rooted case, by construction: rank 1's Barrier waited for the
    last to enter, ranks 0 and 2 at once (the higher rank is taken, as in the pandas
    engine's row order); rank 2's Reduce (early reduce) for its last contributor rank 0;
    rank 0's Bcast (late broadcast) for the root, rank 2."""
    a = Analysis(mpiscope.load(traces["rooted_collectives"], use_cache=False))
    got = rankcritical.compute(in_process(a), tmp_path, a.wait_states.skew)
    assert [(int(r.rank), int(r.start), int(r.end), str(r.kind), r.function)
            for r in got.segments.itertuples()] == [
        (2, 10, 300, "compute", "MPI_Bcast"),
        (0, 300, 310, "mpi", "MPI_Bcast"),
        (0, 310, 500, "compute", "MPI_Reduce"),
        (2, 500, 510, "mpi", "MPI_Reduce"),
        (2, 510, 600, "compute", "MPI_Barrier"),
        (1, 600, 610, "mpi", "MPI_Barrier"),
        (1, 610, 900, "compute", "MPI_Finalize")]
    assert_same_path(a, got)


def test_walk_holds_at_most_k_ranks(tmp_path: Path) -> None:
    """16 ranks, K=2: the path visits more ranks than that, yet no more than 2 ranks'
    files are held at once, and it is still the pandas engine's path."""
    d = synth(tmp_path / "synth16", 16, 200_000)
    a = Analysis(mpiscope.load(d, use_cache=False))
    got, files = rankcritical.compute_with_files(in_process(a), tmp_path / "scratch",
                                                 a.wait_states.skew, keep=2)
    assert_same_path(a, got)
    visited = got.segments["rank"].nunique()
    assert visited > 2
    assert files.peak == 2 and len(files.held) <= 2
    assert files.loads > visited  # ranks were dropped and mapped again: the bound held


def test_passes_run_on_a_dask_cluster(traces: dict[str, Path], tmp_path: Path) -> None:
    """The three per-rank passes pickled to 2 worker processes (client.map over the
    slices), the walk on this client: the pandas engine's path."""
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        for name in ("himeno", "rooted_collectives"):
            a = Analysis(mpiscope.load(traces[name], use_cache=False))
            parts = slices.all_of_trace(a.trace, a.wait_states)

            def on_workers(fn, parts=parts):
                return client.gather(client.map(fn, parts, pure=False))

            got = rankcritical.compute(on_workers, tmp_path / name, a.wait_states.skew)
            assert_same_path(a, got)
