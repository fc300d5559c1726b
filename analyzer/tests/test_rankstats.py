"""The breakdown, time bins, call sites and message statistics computed rank by rank
(engines/rankstats.py) equal the pandas `Analysis` results.

Every trace the Dask engine is tested on (Himeno XS on 4 ranks, the RMA fence,
non-blocking all-to-all and MPI-IO programs, a two-thread trace, Score-P, a synthetic
trace) plus a ping-pong whose eager/rendezvous switch is known, on 4 ranks over two hosts:
each rank's partial runs on its `RankSlice` (`slices.all_of_trace`), the client combines,
and the result equals the pandas one (order and floats included). The message medians
are also taken by searching the ranks' files instead of reading them (`gather=0`), and
the partials are run on a 2-worker dask.distributed LocalCluster.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_protocol_switch import SIZES, took_ns

import mpiscope
from mpiscope.analysis import orderstats
from mpiscope.analysis.session import Analysis
from mpiscope.archive import cache
from mpiscope.engines import cluster, rankstats, slices
from mpiscope_testing.enginetraces import engine_traces, synth
from mpiscope_testing.tracegen import TraceBuilder


def switch_trace(out: Path) -> Path:
    """4 ranks on 2 hosts: ping-pongs of 1 B .. 1 MiB within each host (a rendezvous
    above 4 KiB) and between them (above 16 KiB), so every rank sends and both paths
    show a switch."""
    tb = TraceBuilder(ranks=4, hosts=["node0", "node0", "node1", "node1"])
    for r in range(4):
        tb.call(r, 0, 100, "MPI_Init", callsite="pp.c:8")
    t = 1000
    for a, b, limit in ((0, 1, 4096), (2, 3, 4096), (1, 2, 16384), (3, 0, 16384)):
        for n in SIZES:
            took = took_ns(n, limit)
            for _ in range(3):
                for src, dst in ((a, b), (b, a)):
                    tb.recv_call(dst, t - 50, t + took, src=src, tag=0, nbytes=n,
                                 callsite="pp.c:20")
                    tb.send_call(src, t, t + took, dest=dst, tag=0, nbytes=n,
                                 callsite="pp.c:19")
                    t += took + 100
    for r in range(4):
        tb.call(r, t, t + 100, "MPI_Finalize", callsite="pp.c:30")
    return tb.write(out)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory, scorep_trace: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rankstats-traces")
    for sub in ("fence", "ialltoall", "io"):
        (d / sub).mkdir()
    out = {
        **engine_traces(d, scorep_trace),
        "switch": switch_trace(d / "switch"),
    }
    for p in out.values():
        shutil.rmtree(p / cache.CACHE_NAME, ignore_errors=True)
    return out


NAMES = ["himeno", "fence", "ialltoall", "io", "threads", "scorep", "synth", "switch"]


@pytest.fixture(scope="module")
def sessions(traces: dict[str, Path]) -> dict[str, tuple[Analysis, list[slices.RankSlice]]]:
    """Per trace: the pandas session and its rank slices (with the session's waits)."""
    out = {}
    for name, d in traces.items():
        a = Analysis(mpiscope.load(d, use_cache=False))
        out[name] = (a, slices.all_of_trace(a.trace, a.wait_states))
    return out


def in_process(sl: list[slices.RankSlice]) -> rankstats.Run:
    return lambda fn: [fn(s) for s in sl]


@pytest.mark.parametrize("name", NAMES)
def test_breakdown_and_time_bins_equal_pandas(name: str, sessions) -> None:
    a, sl = sessions[name]
    run = in_process(sl)
    ranks = rankstats.compute_ranks(run)
    pd.testing.assert_frame_equal(ranks, a.ranks, check_exact=True)
    assert len(ranks) == a.trace.meta.num_ranks
    pd.testing.assert_frame_equal(rankstats.compute_time_bins(run), a.time_bins,
                                  check_exact=True)
    # the intervals of the first pass, given, skip it: the same bins
    iv = rankstats.compute_intervals(run)
    pd.testing.assert_frame_equal(rankstats.compute_time_bins(run, 7, iv),
                                  rankstats.compute_time_bins(run, 7), check_exact=True)


@pytest.mark.parametrize("name", NAMES)
def test_wait_states_per_rank_equal_pandas(name: str, sessions) -> None:
    a, sl = sessions[name]
    got = rankstats.compute_wait_states_per_rank(in_process(sl))
    pd.testing.assert_frame_equal(got, a.wait_states.per_rank(), check_exact=True)


@pytest.mark.parametrize("name", NAMES)
def test_callsites_and_their_paths_equal_pandas(name: str, sessions) -> None:
    a, sl = sessions[name]
    sites, best = rankstats.compute_callsites(in_process(sl), a.paths)
    pd.testing.assert_frame_equal(sites, a.callsites, check_exact=True)
    assert best == a._best_paths
    assert sites["calls"].sum() == len(a.trace.calls)


@pytest.mark.parametrize("name", NAMES)
def test_message_statistics_equal_pandas(name: str, sessions, tmp_path: Path) -> None:
    a, sl = sessions[name]
    for gather, scratch in ((orderstats.GATHER, tmp_path / "a"),
                            (0, tmp_path / "b")):  # 0: every median searched in the files
        got = rankstats.compute_messages(in_process(sl), scratch, gather=gather)
        pd.testing.assert_frame_equal(got.sizes, a.message_sizes, check_exact=True)
        assert [s.to_dict() for s in got.switches] == [
            s.to_dict() for s in a.protocol_switches]
        pd.testing.assert_frame_equal(got.host_split, a.host_split, check_exact=True)
        assert got.evidence == a.switch_evidence
        assert got.counts == a.message_counts
    assert got.counts["matched"] == len(a.trace.messages)


def test_switch_trace_shows_both_switches(sessions) -> None:
    """The ping-pong's switches are found (so the equality above compares real ones)."""
    a, _sl = sessions["switch"]
    found = {s.path: s for s in a.protocol_switches}
    assert set(found) == {"intra-node", "inter-node"}
    assert found["intra-node"].last_below_bytes <= 4096 < found["intra-node"].bytes
    assert found["inter-node"].last_below_bytes <= 16384 < found["inter-node"].bytes
    assert list(a.host_split["path"]) == ["intra-node", "inter-node"]


def test_partials_run_on_a_local_cluster(sessions, tmp_path: Path) -> None:
    """The partials pickle and run on 2 worker processes (slices shipped to them, the
    message files written there into a directory the client reads)."""
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        for name in ("himeno", "switch"):
            a, sl = sessions[name]
            futures = client.scatter(sl)

            def run(fn, futures=futures):
                return client.gather(client.map(fn, futures, pure=False))

            pd.testing.assert_frame_equal(rankstats.compute_ranks(run), a.ranks,
                                          check_exact=True)
            pd.testing.assert_frame_equal(rankstats.compute_time_bins(run), a.time_bins,
                                          check_exact=True)
            sites, best = rankstats.compute_callsites(run, a.paths)
            pd.testing.assert_frame_equal(sites, a.callsites, check_exact=True)
            assert best == a._best_paths
            got = rankstats.compute_messages(run, tmp_path / name)
            pd.testing.assert_frame_equal(got.sizes, a.message_sizes, check_exact=True)
            pd.testing.assert_frame_equal(got.host_split, a.host_split, check_exact=True)
            assert [s.to_dict() for s in got.switches] == [
                s.to_dict() for s in a.protocol_switches]
            assert got.counts == a.message_counts
            pd.testing.assert_frame_equal(rankstats.compute_wait_states_per_rank(run),
                                          a.wait_states.per_rank(), check_exact=True)


@pytest.mark.parametrize("kind", ["int", "float"])
def test_order_statistics_across_sorted_runs_equal_pandas(kind: str) -> None:
    """Medians and quantiles of values split into sorted runs (as the ranks' files are),
    read whole or searched (gather=0), equal pandas' on the values together: ties,
    negative floats and zeros included."""
    rng = np.random.default_rng(7)
    for n_runs in (1, 2, 5):
        sizes = rng.integers(0, 30, n_runs)
        if kind == "int":
            vals = [np.sort(rng.integers(1, 50, k)) for k in sizes]
        else:
            vals = [np.sort(np.round(rng.normal(0, 3, k), 1)) for k in sizes]
        whole = pd.Series(np.concatenate(vals))
        if whole.empty:
            continue
        for gather in (orderstats.GATHER, 0):
            assert orderstats.median(vals, gather) == whole.median()
            for q in (0.1, 0.5, 0.9):
                want = whole.groupby(np.zeros(len(whole))).quantile(q).iloc[0]
                assert orderstats.quantile(vals, q, gather) == want


def test_what_a_rank_returns_does_not_grow_with_its_events(tmp_path: Path) -> None:
    """The partials return aggregates: with 10x the events (same ranks, call sites and
    message sizes), what reaches the client stays the same size; only the message
    files in the scratch directory grow."""
    import pickle

    def returned(events: int) -> tuple[int, int]:
        a = Analysis(mpiscope.load(synth(tmp_path / str(events), 4, events), use_cache=False))
        run = in_process(slices.all_of_trace(a.trace, a.wait_states))
        sizes: list[int] = []

        def recording(fn):
            out = run(fn)
            sizes.extend(len(pickle.dumps(x)) for x in out)
            return out

        rankstats.compute_ranks(recording)
        rankstats.compute_time_bins(recording)
        rankstats.compute_callsites(recording, a.paths)
        rankstats.compute_wait_states_per_rank(recording)
        scratch = tmp_path / f"scratch{events}"
        rankstats.compute_messages(recording, scratch)
        files = sum(f.stat().st_size for f in (scratch / "messages").glob("rank=*"))
        assert len(a.trace.messages) > 0
        return sum(sizes), files

    small, small_files = returned(20_000)
    large, large_files = returned(200_000)
    assert large < 1.2 * small
    assert large_files > 5 * small_files
