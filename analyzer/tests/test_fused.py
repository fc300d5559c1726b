"""Analyses run together (engines/fused.py): their passes share one pass over the ranks.

A fake runner stands for the cluster: it records every pass it is asked for and maps the
function over three ranks' "slices" (here just objects with a rank).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from mpiscope.engines import fused
from mpiscope.engines.slices import PerRank, Reduced

RANKS = [SimpleNamespace(rank=r) for r in range(3)]


class FakeCluster:
    def __init__(self) -> None:
        self.passes: list[tuple[object, bool]] = []
        self.lock = threading.Lock()

    def run(self, fn, *, waits: bool = True) -> list:
        with self.lock:
            self.passes.append((fn, waits))
        return [fn(s) for s in RANKS]


def test_independent_analyses_make_one_pass_per_round_and_get_their_own_results() -> None:
    cluster = FakeCluster()
    got: dict[str, object] = {}

    def ranks_times_ten(run) -> None:
        got["tens"] = run(lambda s: s.rank * 10)

    def two_passes(run) -> None:
        first = run(lambda s: s.rank + 1)
        got["second"] = run(lambda s: first[s.rank] * 2)  # uses the first pass's results

    def squares(run) -> None:
        got["squares"] = sum(run(lambda s: s.rank ** 2))

    fused.run_together(cluster.run, [ranks_times_ten, two_passes, squares])

    assert got == {"tens": [0, 10, 20], "second": [2, 4, 6], "squares": 5}
    # round 1: the three first passes as one; round 2: the only second pass, alone
    assert len(cluster.passes) == 2
    assert isinstance(cluster.passes[0][0], fused._Fused)
    assert len(cluster.passes[0][0].fns) == 3
    assert not isinstance(cluster.passes[1][0], fused._Fused)


def test_an_analysis_that_fails_on_a_rank_gets_its_error_and_the_others_go_on() -> None:
    cluster = FakeCluster()
    got: dict[str, object] = {}

    def fails_on_rank_one(s):
        if s.rank == 1:
            raise ValueError("rank 1 has no calls")
        return s.rank

    def failing(run) -> None:
        try:
            run(fails_on_rank_one)
        except ValueError as err:
            got["error"] = str(err)

    def fine(run) -> None:
        got["fine"] = run(lambda s: -s.rank)

    fused.run_together(cluster.run, [failing, fine])

    assert got == {"error": "rank 1 has no calls", "fine": [0, -1, -2]}
    assert len(cluster.passes) == 1


def test_passes_with_different_waits_or_own_arguments_or_merging_are_not_fused() -> None:
    cluster = FakeCluster()
    got: dict[str, object] = {}
    jobs = [
        lambda run: got.__setitem__("no_waits", run(lambda s: s.rank, waits=False)),
        lambda run: got.__setitem__("waits", run(lambda s: s.rank + 100)),
        lambda run: got.__setitem__("waits2", run(lambda s: s.rank + 200)),
        lambda run: got.__setitem__("per_rank", run(PerRank(lambda s, a: a, {0: "a", 2: "c"}))),
        lambda run: got.__setitem__("reduced", run(Reduced(lambda s: s.rank, sum))),
    ]

    fused.run_together(cluster.run, jobs)

    assert got == {"no_waits": [0, 1, 2], "waits": [100, 101, 102], "waits2": [200, 201, 202],
                   "per_rank": ["a", None, "c"], "reduced": [0, 1, 2]}
    kinds = sorted(type(fn).__name__ + ("" if waits else "/no waits")
                   for fn, waits in cluster.passes)
    assert kinds == ["PerRank", "Reduced", "_Fused", "function/no waits"]


def test_a_job_that_raises_is_raised_once_all_jobs_are_done() -> None:
    cluster = FakeCluster()
    finished = []

    def broken(run) -> None:
        raise RuntimeError("combine failed")

    def slow(run) -> None:
        run(lambda s: s.rank)
        run(lambda s: s.rank)
        finished.append(True)

    with pytest.raises(RuntimeError, match="combine failed"):
        fused.run_together(cluster.run, [broken, slow])
    assert finished == [True]


def test_a_failed_pass_fails_every_analysis_in_it() -> None:
    def dead_cluster(fn, *, waits: bool = True) -> list:
        raise OSError("all workers lost")

    errors: list[str] = []

    def job(run) -> None:
        try:
            run(lambda s: s.rank)
        except OSError as err:
            errors.append(str(err))

    fused.run_together(dead_cluster, [job, job])
    assert errors == ["all workers lost", "all workers lost"]
