"""The call tree (metric × call path × rank) on a trace written with call paths, as the
interposer writes them (mpiscope_testing.calltreetrace): main() -> solve() -> halo()
sends and receives; solve() reduces through comm_layer() -> comm_inner(); rank 1 waits
60 µs in each MPI_Allreduce. Every value is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.calltreetrace import FIRST, STEPS, US, build


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Analysis:
    return Analysis(reader.load(build(tmp_path_factory.mktemp("calltree") / "t")))


def whole(s: Analysis):
    lo, hi = s.window_index.span
    return s.window(lo, hi + 1)


def node(tree, *labels: str) -> int:
    """The node reached from a root through `labels`."""
    at = -1
    for text in labels:
        (at,) = [int(c) for c in tree.children(at) if tree.label[c] == text]
    return at


def test_the_tree_is_the_paths_outermost_first_with_the_mpi_function_as_leaf(session):
    tree = whole(session).call_tree(session.paths)
    main = "main · main.c:50"
    assert sorted(tree.label[c] for c in tree.children(-1)) == sorted(
        [main, "main.c:2", "main.c:60"])  # Init and Finalize: their call sites
    solve_reduce = node(tree, main, "solve · solver.c:31")
    layer = node(tree, main, "solve · solver.c:31", "comm_layer · comm_layer.c:20")
    inner = node(tree, main, "solve · solver.c:31", "comm_layer · comm_layer.c:20",
                 "comm_inner · comm_inner.c:5")
    (allreduce,) = tree.children(inner)
    assert tree.label[allreduce] == "MPI_Allreduce" and tree.leaf[allreduce]
    assert not tree.leaf[layer] and list(tree.children(solve_reduce)) == [layer]
    halo = node(tree, main, "solve · solver.c:20", "halo · halo.c:12")
    assert sorted(tree.label[c] for c in tree.children(halo)) == ["MPI_Recv", "MPI_Send"]
    assert tree.path(allreduce) == [main, "solve · solver.c:31",
                                    "comm_layer · comm_layer.c:20",
                                    "comm_inner · comm_inner.c:5", "MPI_Allreduce"]


def test_values_are_inclusive_and_kept_per_rank(session):
    tree = whole(session).call_tree(session.paths)
    main = node(tree, "main · main.c:50")
    reduce_ = node(tree, "main · main.c:50", "solve · solver.c:31")
    halo = node(tree, "main · main.c:50", "solve · solver.c:20")
    time = tree.total("time_s")
    assert time[reduce_] == pytest.approx(STEPS * 140e-6)
    assert time[halo] == pytest.approx(STEPS * 40e-6)
    assert time[main] == pytest.approx(time[reduce_] + time[halo])  # inclusive
    np.testing.assert_allclose(tree.per_rank(reduce_, "time_s"),
                               [STEPS * 40e-6, STEPS * 100e-6])
    # rank 1 waits 60 µs per Allreduce for the late rank 0
    np.testing.assert_allclose(tree.per_rank(reduce_, "wait_s"), [0, STEPS * 60e-6])
    assert tree.total("calls")[main] == 4 * STEPS
    assert tree.per_rank(halo, "bytes").tolist() == [STEPS * 800, STEPS * 800]


def test_the_tree_follows_the_window_and_the_ranks(session):
    lo, _hi = session.window_index.span
    # the first step only (t = 100..300 µs after the start), rank 1 only
    w = session.window(lo + FIRST, lo + FIRST + 300 * US, [1])
    tree = w.call_tree(session.paths)
    reduce_ = node(tree, "main · main.c:50", "solve · solver.c:31")
    assert tree.total("calls")[reduce_] == 1
    assert tree.per_rank(reduce_, "time_s").tolist() == pytest.approx([0, 100e-6])
    assert "main.c:60" not in tree.label  # Finalize is outside the window
