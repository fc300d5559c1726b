"""Slices kept on the workers between passes (engines/slicestore.py) and the runner that
sends each rank to the same worker (engines/ranktasks.py).

A worker builds a rank's slice from the Parquet cache once per analysis and serves it to
every later pass while the kept slices fit in a share of its memory limit; a pass whose
ranks each need their own share of a large value (`slices.PerRank`) sends each rank's
task its own share only.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest

import mpiscope
from mpiscope.engines import cluster, convert, ranktasks, slices, slicestore
from mpiscope.engines.daskcache import open_cache
from mpiscope_testing.enginetraces import synth


def test_values_are_kept_until_the_budget_is_full_and_never_evicted(monkeypatch) -> None:
    monkeypatch.setattr(slicestore, "budget", lambda: 2 * 8000)
    slicestore.clear()
    built: list[int] = []

    def frame(rank: int):
        def build() -> pd.DataFrame:
            built.append(rank)
            return pd.DataFrame({"x": np.zeros(1000, np.int64)})  # 8000 bytes
        return build

    for _ in range(3):  # three passes over four ranks
        for r in range(4):
            slicestore.get("s1", r, frame(r))
    # ranks 0 and 1 fill the budget and stay; 2 and 3 are built in every pass
    assert built == [0, 1, 2, 3, 2, 3, 2, 3]
    assert slicestore.held() == ("s1", 2, 16000)
    slicestore.get("s2", 0, frame(0))  # another session: the first one's values go
    assert slicestore.held() == ("s2", 1, 8000)
    assert slicestore.clear() == 8000 and slicestore.held() == (None, 0, 0)


def test_kept_values_are_dropped_when_the_worker_nears_its_memory_limit(monkeypatch) -> None:
    monkeypatch.setattr(slicestore, "budget", lambda: 10**9)
    slicestore.clear()
    crowded = False
    monkeypatch.setattr(slicestore, "_crowded", lambda: crowded)
    for r in range(3):
        slicestore.get("s", r, lambda: pd.DataFrame({"x": np.zeros(1000)}))
    assert slicestore.held()[1] == 3
    crowded = True  # a pass needs the room: the next build drops them, keeps nothing new
    slicestore.get("s", 3, lambda: pd.DataFrame({"x": np.zeros(1000)}))
    assert slicestore.held() == ("s", 0, 0)
    slicestore.clear()


def _pair(s, arg):
    return (s.rank, arg)


def test_per_rank_pass_gives_each_rank_its_own_argument_only() -> None:
    big = {r: np.arange(100_000) + r for r in range(8)}
    p = slices.PerRank(_pair, big)
    one = p.for_rank(3)
    assert len(pickle.dumps(one)) < len(pickle.dumps(p)) / 6
    fake = type("S", (), {"rank": 3})()
    assert one(fake)[0] == 3 and (one(fake)[1] == big[3]).all()
    assert p(fake)[1] is big[3]
    assert slices.PerRank(_pair, {}).for_rank(3)(fake) == (3, None)  # a rank without one


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth(tmp_path_factory.mktemp("slicestore") / "synth", ranks=6, events=30_000)


def _rank_and_rows(s: slices.RankSlice) -> tuple[int, int]:
    return s.rank, len(s.trace.calls)


def _kept():
    return slicestore.held()


def test_each_worker_builds_its_ranks_once_and_passes_agree_with_the_trace(
        trace: Path) -> None:
    whole = mpiscope.load(trace, use_cache=False)
    rows = whole.calls.groupby("rank").size()
    # without work stealing, so that a busy machine does not move a task to the idle
    # worker (which RankTasks allows, and which would change what each worker keeps)
    with dask.config.set({"distributed.scheduler.work-stealing": False}), \
            cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        convert.convert(trace, client)
        tasks = ranktasks.RankTasks(client, open_cache(trace))
        first = tasks.run(_rank_and_rows, waits=False)
        again = tasks.run(_rank_and_rows, waits=False)
        kept = client.run(_kept)
        # the six ranks were split between the two workers, each slice kept once
        assert sorted(n for _, n, _ in kept.values()) == [3, 3]
        assert len({session for session, _, _ in kept.values()}) == 1
        with_waits = tasks.run(lambda s: len(s.waits), waits=True)
        tasks.close()
        assert all(n == 0 for _, n, _ in client.run(_kept).values())
    assert first == again == [(r, int(rows[r])) for r in range(6)]
    assert with_waits == [int(rows[r]) for r in range(6)]


def _instances(s: slices.RankSlice) -> int:
    return len(s.trace.collectives)


def _total(parts: list[int]) -> int:
    return sum(parts)


def test_reduced_pass_is_combined_on_the_workers(trace: Path, monkeypatch) -> None:
    whole = mpiscope.load(trace, use_cache=False)
    monkeypatch.setattr(ranktasks, "FAN_IN", 2)  # six ranks: 6 -> 3 -> 2 parts
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        convert.convert(trace, client)
        tasks = ranktasks.RankTasks(client, open_cache(trace))
        parts = tasks.run(slices.Reduced(_instances, _total), waits=False)
        tasks.close()
    assert len(parts) == 2 and sum(parts) == len(whole.collectives)
    # the same pass in one process: one part per rank, the same total
    local = [slices.Reduced(_instances, _total)(s) for s in slices.all_of_trace(whole)]
    assert len(local) == 6 and _total(local) == sum(parts)


def test_a_pass_asks_the_scheduler_for_its_workers_not_the_clients_cache(
        trace: Path, monkeypatch) -> None:
    # the client's periodic refresh replaces its cached scheduler info with one listing
    # no worker; a pass that read that cache submitted allow_other_workers without
    # workers, which Dask refuses (seen on a loaded machine in the loop pass)
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        convert.convert(trace, client)
        monkeypatch.setattr(type(client), "scheduler_info",
                            lambda self, *a, **k: {"workers": {}})
        tasks = ranktasks.RankTasks(client, open_cache(trace))
        ranks = tasks.run(_rank_and_rows, waits=False)
        tasks.close()
    assert [r for r, _ in ranks] == list(range(6))


def _starts_len(s: slices.RankSlice, starts: np.ndarray | None) -> int:
    return -1 if starts is None else len(starts)


def test_a_ranks_task_carries_the_rank_and_its_own_argument_not_the_manifest(
        trace: Path, monkeypatch) -> None:
    # the pass's function holds the cache's manifest (it grows with the ranks): sent
    # with every task it grew the client as ranks squared (0.85 GB at 1024 ranks)
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        convert.convert(trace, client)
        tasks = ranktasks.RankTasks(client, open_cache(trace))
        sent: list[int] = []
        once: list[int] = []  # the pass's function, holding the manifest: once a pass
        submit = type(client).submit

        def spy(self, fn, *args, **kw):
            (once if fn is cluster._same else sent).append(len(pickle.dumps((fn, args))))
            return submit(self, fn, *args, **kw)

        monkeypatch.setattr(type(client), "submit", spy)
        own = {r: np.arange(r + 1) for r in range(6)}
        lens = tasks.run(slices.PerRank(_starts_len, own), waits=False)
        plain = tasks.run(_rank_and_rows, waits=False)
        tasks.close()
        manifest = len(pickle.dumps(tasks.tables.manifest))
    assert lens == [r + 1 for r in range(6)] and [r for r, _ in plain] == list(range(6))
    assert len(sent) >= 12  # and the call-path pass's, which ran first
    assert len(once) == 3 and min(once) > manifest  # the call paths' pass and these two
    # a future's key, the rank and at most its own six int64s: far below the manifest
    assert max(sent) < 1024 < manifest
