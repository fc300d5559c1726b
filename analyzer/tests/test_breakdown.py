"""Per-rank breakdown on a hand-made trace: every number below is computed by hand."""

import pytest

from mpiscope.analysis import breakdown, waitstates
from mpiscope_testing.scenarios import Scenario


@pytest.fixture
def two_ranks():
    sc = Scenario()
    for r, (ar_start, bar_start) in enumerate([(100, 150), (140, 160)]):
        sc.call(r, "MPI_Init", 0, 10)
        sc.call(r, "MPI_Allreduce", ar_start, 150, callsite="a.c:10")
        sc.call(r, "MPI_Barrier", bar_start, 170, callsite="a.c:11")
        sc.call(r, "MPI_Finalize", 200, 210)
    return sc.trace()


def test_breakdown_splits_mpi_time_into_waiting_and_communication(two_ranks):
    ranks = breakdown.per_rank(two_ranks, waitstates.compute(two_ranks)).set_index("rank")
    # measured interval: end of MPI_Init (10) .. start of MPI_Finalize (200)
    assert list(ranks["total_s"] * 1e9) == pytest.approx([190, 190])
    # rank 0: waits 40 ns in the Allreduce for rank 1, 20 ns in the barrier
    assert ranks.loc[0, "synchronization_s"] * 1e9 == pytest.approx(40 + 20)
    assert ranks.loc[0, "communication_s"] * 1e9 == pytest.approx(10)
    assert ranks.loc[0, "compute_s"] * 1e9 == pytest.approx(190 - 70)
    # rank 1 arrives last: no waiting in the Allreduce, the barrier counts as sync
    assert ranks.loc[1, "synchronization_s"] * 1e9 == pytest.approx(10)
    assert ranks.loc[1, "communication_s"] * 1e9 == pytest.approx(10)
    assert ranks.loc[1, "compute_s"] * 1e9 == pytest.approx(170)


def test_parts_add_up_to_the_total(two_ranks):
    ranks = breakdown.per_rank(two_ranks, waitstates.compute(two_ranks))
    parts = ranks[["compute_s", "communication_s", "synchronization_s"]].sum(axis=1)
    assert list(parts) == pytest.approx(list(ranks["total_s"]))


def test_time_bins_cover_the_run_and_keep_the_sums(two_ranks):
    ws = waitstates.compute(two_ranks)
    bins = breakdown.time_bins(two_ranks, ws, bins=19)
    ranks = breakdown.per_rank(two_ranks, ws)
    assert len(bins) == 19
    for part in ("compute_s", "communication_s", "synchronization_s"):
        assert bins[part].sum() == pytest.approx(ranks[part].sum())
    # the first bins (10..100 ns) are pure computation on both ranks
    assert bins.loc[0, "communication_s"] == 0 and bins.loc[0, "synchronization_s"] == 0
    assert bins.loc[0, "compute_s"] * 1e9 == pytest.approx(2 * 10)
