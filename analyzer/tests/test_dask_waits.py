"""Rank slices built on Dask workers from the cache, and the wait states computed rank by
rank (engines/ranktasks.py, engines/waits.py), give what the pandas engine gives.

Traces: the Dask engine's test traces (Himeno 4 ranks, RMA fence, non-blocking
all-to-all, MPI-IO, two threads, Score-P, synthetic), plus real runs of RMA general
active target (post/start/complete/wait) and passive target with a contended exclusive
lock, a hand-made trace whose receiver's clock runs behind (skew corrected) and one with
an early wait and lock contention by construction.
- in-process (the runner maps over `slices.all_of_trace` of the pandas trace): every
  rank's waits equal the pandas `WaitStates.per_call` rows of that rank, and totals,
  per rank, per call site and the skew correction are equal;
- on a 2-worker LocalCluster: each slice built on a worker from the cache equals the one
  cut from `Analysis(mpiscope.load(DIR)).trace`, table for table (dtypes included), with
  its received messages, call offset and wait states; and the Dask engine's session
  keeps these wait states.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

import mpiscope
from mpiscope.analysis.session import Analysis
from mpiscope.archive import cache
from mpiscope.engines import cluster, convert, dask_engine, ranktasks, slices, waits
from mpiscope.engines.daskcache import open_cache
from mpiscope_testing import mpijobs
from mpiscope_testing.enginetraces import engine_traces
from mpiscope_testing.tracegen import TraceBuilder

# the Dask engine's test traces, as test_dask_engine.py makes them




NAMES = ["himeno", "fence", "pscw", "passive", "ialltoall", "io", "threads", "scorep",
         "synth", "skewed", "rma-made"]


def skewed(out: Path) -> Path:
    """Rank 1's clock runs behind rank 0's: its receive seems to end before the send."""
    tb = TraceBuilder(ranks=3)
    for r in range(3):
        tb.call(r, 0, 10, "MPI_Init", callsite="s.c:1")
        tb.collective(r, 1500 + 40 * r, 1700, "MPI_Allreduce", sent=8, received=8,
                      callsite="s.c:7")
        tb.call(r, 2000, 2010, "MPI_Finalize", callsite="s.c:9")
    tb.send_call(0, 1000, 1010, dest=1, tag=0, nbytes=8, send_time=1005, callsite="s.c:5")
    tb.recv_call(1, 900, 990, src=0, tag=0, nbytes=8, recv_time=985, callsite="s.c:6")
    tb.send_call(1, 1100, 1110, dest=2, tag=0, nbytes=8, send_time=1105, callsite="s.c:5")
    tb.recv_call(2, 1050, 1120, src=1, tag=0, nbytes=8, recv_time=1115, callsite="s.c:6")
    return tb.write(out)


def rma_made(out: Path) -> Path:
    """The RMA waits by construction (ms), on three ranks. Rank 0 exposes its window to
    rank 1 (post at 10, MPI_Win_wait from 20); rank 1 computes inside its access epoch
    until 220: rank 0 waits early 200 ms. Then rank 0 holds an exclusive lock on rank 2
    from 300 until it releases it at 500; rank 1 asks for it at 302 and gets it at 501:
    198 ms of lock contention."""
    ms = 1_000_000
    tb = TraceBuilder(ranks=3)
    for r in range(3):
        tb.call(r, 0, ms, "MPI_Init", callsite="r.c:1")
        tb.call(r, 600 * ms, 601 * ms, "MPI_Finalize", callsite="r.c:99")
    win = tb.window()
    tb.enter(0, 10 * ms, "MPI_Win_post", callsite="r.c:10")
    tb.rma_group_sync(0, 10 * ms, win, [1])
    tb.leave(0, 11 * ms, "MPI_Win_post")
    tb.enter(1, 10 * ms, "MPI_Win_start", callsite="r.c:20")
    tb.rma_group_sync(1, 11 * ms, win, [0])
    tb.leave(1, 11 * ms, "MPI_Win_start")
    tb.rma_call(1, 12 * ms, 13 * ms, "MPI_Put", win, 0, 8, 9, callsite="r.c:21")
    tb.enter(1, 220 * ms, "MPI_Win_complete", callsite="r.c:22")
    tb.rma_group_sync(1, 221 * ms, win, [0])
    tb.rma_complete(1, 221 * ms, win, 9)
    tb.leave(1, 221 * ms, "MPI_Win_complete")
    tb.enter(0, 20 * ms, "MPI_Win_wait", callsite="r.c:11")
    tb.rma_group_sync(0, 221 * ms, win, [1])
    tb.leave(0, 221 * ms, "MPI_Win_wait")
    for r, (ask, got, done) in ((0, (300, 300, 500)), (1, (302, 501, 502))):
        tb.enter(r, ask * ms, "MPI_Win_lock", callsite="r.c:30")
        tb.rma_lock(r, ask * ms, "request", win, 2, lock_id=1)
        tb.rma_lock(r, got * ms, "acquire", win, 2, lock_id=1)
        tb.leave(r, got * ms, "MPI_Win_lock")
        tb.enter(r, done * ms, "MPI_Win_unlock", callsite="r.c:31")
        tb.rma_lock(r, done * ms, "release", win, 2, lock_id=1)
        tb.leave(r, done * ms + ms, "MPI_Win_unlock")
    return tb.write(out)


def rma_run(mode: str, d: Path) -> Path:
    exe = mpijobs.build("rma.c", d)
    job = mpijobs.run([str(exe), mode], np=3, out=d / mode)
    assert job.returncode == 0, job.stdout + job.stderr
    return d / mode


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory, scorep_trace: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("dask-waits")
    for sub in ("fence", "ialltoall", "io", "rma"):
        (d / sub).mkdir()
    out = {
        **engine_traces(d, scorep_trace),
        "pscw": rma_run("pscw", d / "rma"),
        "passive": rma_run("passive", d / "rma"),
        "skewed": skewed(d / "skewed"),
        "rma-made": rma_made(d / "rma-made"),
    }
    for p in out.values():
        shutil.rmtree(p / cache.CACHE_NAME, ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def client():
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as c:
        yield c


def assert_same_wait_states(dist: waits.DistWaitStates, ws, ranks: list[int]) -> None:
    assert dist.skew == ws.skew
    assert dist.totals() == ws.totals()
    pd.testing.assert_frame_equal(dist.per_rank(), ws.per_rank())
    pd.testing.assert_frame_equal(dist.per_callsite().reset_index(drop=True),
                                  ws.per_callsite().reset_index(drop=True))
    for r in ranks:
        mine = (ws.per_call["rank"] == r).to_numpy()
        want = pd.DataFrame({"wait_ns": ws.per_call["wait_ns"].to_numpy()[mine],
                             "wait_kind": ws.per_call["wait_kind"][mine].reset_index(drop=True)})
        pd.testing.assert_frame_equal(dist.of_rank(r), want, obj=f"rank {r}")


@pytest.mark.parametrize("name", NAMES)
def test_rank_by_rank_wait_states_equal_the_pandas_engine(
        name: str, traces: dict[str, Path], tmp_path: Path) -> None:
    a = Analysis(mpiscope.load(traces[name], use_cache=False))
    ws = a.wait_states
    parts = slices.all_of_trace(a.trace)
    dist = waits.compute(lambda fn: [fn(s) for s in parts], tmp_path,
                         calls_of=lambda: a.trace.calls)
    assert_same_wait_states(dist, ws, [s.rank for s in parts])
    pd.testing.assert_frame_equal(dist.per_call, ws.per_call)
    # the rules the made traces exercise, there by construction (in the real RMA runs
    # they are too, unless a busy machine delays the waiting rank past its partner)
    if name == "rma-made":
        assert ws.totals()["early_wait"] == pytest.approx(0.2)
        assert ws.totals()["lock_contention"] == pytest.approx(0.198)
    if name == "skewed":
        assert ws.totals()["late_sender"] > 0 and ws.totals()["wait_at_nxn"] > 0
    if name == "skewed":
        assert ws.skew.violations == 1 and ws.skew.offsets_ns


def assert_same_table(got: pd.DataFrame, want: pd.DataFrame, obj: str) -> None:
    """Equal values and dtypes; a categorical's categories equal (the width of its codes,
    a storage detail that differs between the reader and the cache, is not compared)."""
    assert list(got.columns) == list(want.columns), obj
    assert len(got) == len(want), obj
    for c in want.columns:
        g, w = got[c], want[c]
        if isinstance(w.dtype, pd.CategoricalDtype):
            assert isinstance(g.dtype, pd.CategoricalDtype), f"{obj}.{c}"
            assert list(g.cat.categories) == list(w.cat.categories), f"{obj}.{c}"
            assert g.astype(object).tolist() == w.astype(object).tolist(), f"{obj}.{c}"
        else:
            pd.testing.assert_series_equal(g, w, obj=f"{obj}.{c}")


def assert_same_slice(got: slices.RankSlice, want: slices.RankSlice) -> None:
    assert got.rank == want.rank and got.call_offset == want.call_offset
    for name in (*slices.PER_RANK, "threads", "messages", "ranks", "comms", "windows",
                 "files", "callpaths"):
        assert_same_table(getattr(got.trace, name), getattr(want.trace, name),
                          f"rank {want.rank} {name}")
    assert got.trace.meta == want.trace.meta
    assert_same_table(got.received, want.received, "received")
    pd.testing.assert_frame_equal(got.waits, want.waits, obj="waits")


@pytest.mark.parametrize("name", NAMES)
def test_slices_built_on_workers_from_the_cache_equal_the_pandas_cut(
        name: str, traces: dict[str, Path], client, tmp_path: Path) -> None:
    a = Analysis(mpiscope.load(traces[name], use_cache=False))
    ws = a.wait_states
    d = shutil.copytree(traces[name], tmp_path / "t")
    convert.convert(d, client, events_per_group=1)  # a group per rank
    tables = open_cache(d)
    assert tables is not None
    rt = ranktasks.RankTasks(client, tables)
    # the wait states were computed on the workers, one task per rank and pass
    assert_same_wait_states(rt.wait_states, ws, rt.ranks)
    got = rt.run(lambda s: s)  # each slice built on a worker, shipped back whole
    want = slices.all_of_trace(a.trace, ws)
    assert [s.rank for s in got] == [s.rank for s in want]
    for g, w in zip(got, want, strict=True):
        assert_same_slice(g, w)
    # the derived directories were published whole and are reused
    derived = tables.dir / ranktasks.DERIVED
    assert (derived / "waits").is_dir() and not list(derived.glob("*.tmp-*"))
    again = ranktasks.RankTasks(client, tables)
    assert again.run(len_of_calls, waits=False) == [len(s.trace.calls) for s in want]


def len_of_calls(s: slices.RankSlice) -> int:
    return len(s.trace.calls)


def test_dask_session_keeps_the_wait_states_from_the_workers(
        traces: dict[str, Path], client, tmp_path: Path) -> None:
    d = shutil.copytree(traces["pscw"], tmp_path / "t")
    session = dask_engine.analyze(d, client=client)
    assert isinstance(session._results["wait_states"], waits.DistWaitStates)
    pandas = Analysis(mpiscope.load(traces["pscw"], use_cache=False))
    assert session.wait_states.totals() == pandas.wait_states.totals()
    assert session.map_ranks(len_of_calls, waits=False) == [
        len(s.trace.calls) for s in slices.all_of_trace(pandas.trace)]
