"""Level of detail: nothing lost or double-counted at any zoom, and a bounded payload."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope_testing.calls_synth import calls_table, exact_time
from mpiscope_webui import lod

RANKS = 6


@pytest.fixture(scope="module")
def calls():
    return calls_table(RANKS, per_rank=3000)


@pytest.fixture(scope="module")
def index(calls):
    return lod.StateIndex.build(calls, RANKS)


def windows(span: int) -> list[tuple[int, int]]:
    """Full view, then zooms by 4x down to ~100 ns, at varied offsets, plus off-trace pans."""
    out = [(0, span), (-span // 3, span // 2), (span - 10, span + 10_000)]
    rng = np.random.default_rng(7)
    width = span
    while width > 100:
        width //= 4
        for _ in range(3):
            t0 = int(rng.integers(0, max(span - width, 1)))
            out.append((t0, t0 + width))
    return out


@pytest.mark.parametrize("width_px", [1, 97, 1200])
def test_time_per_function_per_rank_is_exact_at_every_zoom(calls, index, width_px):
    for t0, t1 in windows(index.span):
        view = lod.query(index, t0, t1, width_px)
        want = exact_time(calls, t0 + index.origin, t1 + index.origin, RANKS, index.functions)
        got = view.time_by_rank_function(index)
        np.testing.assert_array_equal(got, want, err_msg=f"window {t0}..{t1} at {width_px}px")
        assert (view.summary >= 0).all(), "negative residual: a state was subtracted twice"


def test_shapes_sent_are_bounded_whatever_the_zoom(index):
    for t0, t1 in windows(index.span):
        view = lod.query(index, t0, t1, 800, max_exact=500)
        assert len(view.states) <= 500
        assert view.summary.shape[2] <= 800
        assert view.summary_cells() <= RANKS * 800


def test_states_shorter_than_a_pixel_are_summarized_longer_ones_exact(calls, index):
    view = lod.query(index, 0, index.span, 1000, max_exact=10**9)
    ns_per_px = index.span / 1000
    dur = index.end[view.states] - index.start[view.states]
    assert len(view.states) > 0 and (dur >= ns_per_px).all()
    short = (index.end - index.start) < ns_per_px
    assert not np.isin(np.flatnonzero(short), view.states).any()
    # the longest states of the trace are among the exact ones
    assert np.isin(np.argsort(index.end - index.start)[-20:], view.states).all()


def test_deep_zoom_draws_every_state_exactly(calls, index):
    # 5 ns per pixel: every state (≥ 10 ns) is at least two pixels long
    mid = index.span // 2
    view = lod.query(index, mid, mid + 5_000, 1000)
    inside = ((index.end > mid) & (index.start < mid + 5_000)).sum()
    assert inside > 0
    assert len(view.states) == inside
    assert view.summary.sum() == 0


def test_hidden_functions_are_left_out(calls, index):
    view = lod.query(index, 0, index.span, 600, hidden={"MPI_Allreduce"})
    code = index.functions.index("MPI_Allreduce")
    assert code not in view.visible
    assert not (index.fcode[view.states] == code).any()
    assert (view.time_by_rank_function(index)[:, code] == 0).all()
    assert (view.dominant != code).all()


def test_summary_cell_shows_the_dominant_function():
    import pandas as pd

    calls = pd.DataFrame({
        "rank": np.zeros(4, np.int32), "call": np.arange(4),
        "function": pd.Categorical(["MPI_Send", "MPI_Recv", "MPI_Send", "MPI_Barrier"]),
        "start": [0, 10, 20, 1000], "end": [5, 12, 26, 2000], "depth": np.zeros(4, np.int8)})
    index = lod.StateIndex.build(calls, 1)
    view = lod.query(index, 0, 2000, 20)  # 100 ns per pixel: the first three share bin 0
    assert index.functions[view.dominant[0, 0]] == "MPI_Send"
    assert view.busy_fraction[0, 0] == pytest.approx(13 / 100)
    assert [index.functions[c] for c in index.fcode[view.states]] == ["MPI_Barrier"]


def off_trace_windows(span: int) -> list[tuple[int, int]]:
    """What panning and crafted requests give: windows wholly before 0, past the end (by
    more than a window), of no width, and reversed."""
    w = span // 5
    return [(-3 * span, -2 * span), (-w, 0), (-w, -1), (span, span + w),
            (span + 2 * w, span + 3 * w), (10 * span, 11 * span), (0, 0),
            (span // 2, span // 2), (-5, -5), (span * 3, span * 3),
            (span // 2 + w, span // 2), (2 * span, span), (-span // 2, -span),
            (span // 3, -span)]


@pytest.mark.parametrize("width_px", [1, 800])
def test_windows_off_the_trace_draw_what_is_there(calls, index, width_px):
    for t0, t1 in off_trace_windows(index.span):
        view = lod.query(index, t0, t1, width_px)  # raised ValueError (negative repeats)
        a, b = sorted((t0, t1))
        b = max(b, a + 1)
        want = exact_time(calls, a + index.origin, b + index.origin, RANKS, index.functions)
        np.testing.assert_array_equal(view.time_by_rank_function(index), want,
                                      err_msg=f"window {t0}..{t1}")
        assert (view.summary >= 0).all()
        if b <= 0 or a >= index.span:
            assert len(view.states) == 0 and view.summary.sum() == 0


def test_long_states_outside_the_trace_is_empty(index):
    for t0, t1 in off_trace_windows(index.span):
        got = index.long_states(t0, t1, 1)
        assert got.dtype == np.int64
        if t1 <= max(t0, 0) or t0 >= index.span:
            assert len(got) == 0, (t0, t1)
