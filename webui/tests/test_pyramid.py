"""The out-of-core timeline (mpiscope_webui.pyramid) on a real Himeno trace and on a
synthetic one: the pyramid, built by Dask from the Parquet cache, answers a zoom exactly
as the in-memory level of detail does at the pyramid's resolution; a narrow window reads
only the detail row groups that can hold its calls, and shows the same time per rank and
function as the in-memory timeline."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from mpiscope.archive import reader
from mpiscope_webui import lod, pyramid


@pytest.fixture(scope="module", params=["himeno", "synth"])
def opened(request, himeno_traces, synth):
    d = himeno_traces["unpatched"] if request.param == "himeno" else synth
    trace = reader.load(d)  # writes the Parquet cache the pyramid is built from
    pyramid.build(d)
    p = pyramid.Pyramid.open(d, build_if_missing=False)
    return trace, p, lod.StateIndex.build(trace.calls, trace.num_ranks)


def by_name(p: pyramid.Pyramid, v: lod.LodView, names: list[str]) -> np.ndarray:
    """v.summary with its function axis in the order of `names`."""
    mine = [p.functions[i] for i in v.visible]
    return v.summary[:, [mine.index(f) for f in names], :]


def test_pyramid_answers_a_zoom_as_the_in_memory_lod(opened):
    trace, p, idx = opened
    assert p.num_ranks == trace.num_ranks and p.origin == idx.origin
    assert p.levels >= 1
    for k in range(p.levels):
        n = p.cols(k)
        e = p.edges(k)
        for c0, c1 in ((0, n), (n // 3, n // 3 + min(500, n // 2))):
            pv = p.summary(k, c0, c1, c1 - c0)
            mem = lod.query(idx, 0, 0, 1, max_exact=0, edges=e[c0:c1 + 1])
            assert np.array_equal(pv.edges, mem.edges)
            assert np.array_equal(by_name(p, pv, idx.functions), mem.summary)
            dom = np.where(pv.dominant >= 0, pv.dominant, -1)
            named = np.array(p.functions + ["-"])[dom]
            assert np.array_equal(named, np.array(idx.functions + ["-"])[mem.dominant])
    # and through query(): a zoom to half the run answered from the pyramid (as wide as
    # its finest level resolves half the run), hiding a function
    hide = idx.functions[int(np.argmax(np.bincount(idx.fcode)))]
    t0, t1 = p.span // 5, p.span // 5 + p.span // 2
    px = min(1000, p.cols(p.levels - 1) // 4)
    out = pyramid.query(p, t0, t1, px, hidden=[hide])
    assert out.source == "pyramid" and out.view.nbins == px
    assert out.view.edges[0] <= t0 and out.view.edges[-1] >= t1  # whole columns around it
    mem = lod.query(idx, 0, 0, 1, max_exact=0, edges=out.view.edges, hidden={hide})
    assert np.array_equal(by_name(p, out.view, [f for f in idx.functions if f != hide]),
                          mem.summary)


def test_a_window_reads_only_its_row_groups(opened):
    trace, p, idx = opened
    calls = trace.calls
    # a window of about a tenth of the run, in its middle
    t0 = p.origin + int(p.span * 0.45)
    t1 = t0 + p.span // 10
    w = p.window(t0, t1)
    expect = np.sort(calls["call"].to_numpy()[(calls["start"].to_numpy() < t1)
                                              & (calls["end"].to_numpy() > t0)])
    assert np.array_equal(np.sort(w.calls["call"].to_numpy()), expect)
    total_groups = read_groups = 0
    for r in p.ranks:
        md = pq.ParquetFile(p.detail_file(r)).metadata
        stats = [{md.row_group(g).column(c).path_in_schema: md.row_group(g).column(c)
                  .statistics for c in range(md.row_group(g).num_columns)}
                 for g in range(md.num_row_groups)]
        need = [g for g, s in enumerate(stats) if s["start"].min < t1 and s["end"].max > t0]
        assert w.row_groups[r] == need
        total_groups += md.num_row_groups
        read_groups += len(need)
    if total_groups > 2 * len(p.ranks):  # the synthetic trace: several groups per rank
        assert read_groups < total_groups / 2


def test_a_narrow_window_comes_from_the_detail_as_in_memory(opened):
    trace, p, idx = opened
    finest = p.span / p.cols(p.levels - 1)
    t0 = int(p.span * 0.5)
    t1 = t0 + int(finest * 300)  # 300 finest columns on 1000 px: too coarse a pyramid
    out = pyramid.query(p, t0, t1, 1000)
    assert out.source == "detail" and out.index is not None
    mem = lod.query(idx, t0, t1, 1000)
    got = out.view.time_by_rank_function(out.index)
    want = mem.time_by_rank_function(idx)
    for f in idx.functions:
        col = out.index.functions.index(f) if f in out.index.functions else None
        mine = got[:, col] if col is not None else np.zeros(idx.num_ranks, np.int64)
        assert np.array_equal(mine, want[:, idx.functions.index(f)]), f
    assert len(out.view.states) == len(mem.states)


def cells(d: Path):
    t = ds.dataset(d / "pyramid", format="parquet", partitioning="hive").to_table()
    return t.sort_by([(c, "ascending") for c in ("rank", "level", "col", "fcode")])


def test_built_on_a_dask_cluster_same_pyramid(synth, tmp_path):
    distributed = pytest.importorskip("dask.distributed")  # pyproject: dask[dataframe] only
    Client, LocalCluster = distributed.Client, distributed.LocalCluster

    reader.load(synth)
    p0 = pyramid.Pyramid.open(synth)
    a = cells(p0.path)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        pyramid.build(synth, scheduler=client)
    b = cells(p0.path)
    assert a.num_rows > 0 and a.equals(b)
    assert not list(p0.path.parent.glob(f"{pyramid.DIR}.tmp*"))  # nothing half-written


def test_levels_too_big_for_memory_are_read_by_range(opened, monkeypatch):
    trace, p, idx = opened
    monkeypatch.setattr(pyramid, "CACHED_ROWS", 0)
    fresh = pyramid.Pyramid.open(trace.path, build_if_missing=False)
    k = fresh.levels - 1
    n = fresh.cols(k)
    c0, c1 = n // 4, n // 4 + min(300, n // 2)
    got = fresh.summary(k, c0, c1, c1 - c0)
    time.sleep(0.2)
    assert not fresh._levels and not fresh._loading  # nothing kept: a range read
    assert np.array_equal(got.summary, p.summary(k, c0, c1, c1 - c0).summary)
    mem = lod.query(idx, 0, 0, 1, max_exact=0, edges=fresh.edges(k)[c0:c1 + 1])
    assert np.array_equal(by_name(fresh, got, idx.functions), mem.summary)


def test_windows_off_the_run_draw_nothing(opened):
    trace, p, idx = opened
    for t0, t1 in ((p.span + 10, p.span + 10_000), (-10_000, -10)):
        out = pyramid.query(p, t0, t1, 800)
        assert out.calls_read == 0 and len(out.view.states) == 0
        assert out.view.summary_cells() == 0
    whole = pyramid.query(p, -p.span, 2 * p.span, 800)  # zoomed out past both ends
    assert whole.view.summary.sum() == pyramid.query(p, 0, p.span, 800).view.summary.sum()


def test_coarse_levels_are_kept_in_memory_after_first_use(opened):
    trace, p, idx = opened
    fresh = pyramid.Pyramid.open(trace.path, build_if_missing=False)
    n = fresh.cols(0)
    first = fresh.summary(0, 3, n - 3, n - 6)  # a range read; the level loads meanwhile
    deadline = time.monotonic() + 60
    while 0 not in fresh._levels and time.monotonic() < deadline:
        time.sleep(0.05)
    assert 0 in fresh._levels
    again = fresh.summary(0, 3, n - 3, n - 6)  # from memory
    assert np.array_equal(first.summary, again.summary)


def test_a_zoom_inside_the_last_detail_window_reads_no_file(opened, monkeypatch):
    """Detail row groups read lately are kept (up to DETAIL_CACHE_ROWS): zooming further
    in reads nothing again, and gives the calls a fresh read gives."""
    trace, p, idx = opened
    fresh = pyramid.Pyramid.open(trace.path, build_if_missing=False)
    t0 = fresh.origin + int(fresh.span * 0.45)
    t1 = t0 + fresh.span // 10
    fresh.window(t0, t1)
    reads = []
    real = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups",
                        lambda self, *a, **kw: reads.append(a) or real(self, *a, **kw))
    inner = fresh.window(t0 + (t1 - t0) // 3, t0 + (t1 - t0) // 2)
    assert not reads
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", real)
    again = pyramid.Pyramid.open(trace.path, build_if_missing=False).window(
        t0 + (t1 - t0) // 3, t0 + (t1 - t0) // 2)
    assert inner.calls.sort_values("call").reset_index(drop=True).equals(
        again.calls.sort_values("call").reset_index(drop=True))
    # bounded: past the limit the least recently used row groups go
    monkeypatch.setattr(pyramid, "DETAIL_CACHE_ROWS", pyramid.ROW_GROUP)
    fresh.window(fresh.origin, fresh.origin + fresh.span)
    assert fresh._detail_rows <= pyramid.ROW_GROUP
