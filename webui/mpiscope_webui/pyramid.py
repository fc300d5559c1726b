"""The timeline out of core: a multi-resolution summary and time-sorted detail, in Parquet
beside the trace's cache, so a view never needs the whole trace in memory.

Built from the partitioned cache (`calls/rank=R/part-0.parquet`, mpiscope.archive.cache)
by Dask, one task per rank, into `<cache>/derived/timeline/` (derived: not among the
cache's checked files, dropped with a copied cache, rebuilt when missing):
- `pyramid/rank=R/part-0.parquet`: per (level, column, thread, function) the ns that
  function ran on that thread of rank R in that column and its `calls`: the MPI calls
  (a merged polling visit: its `polls`) that start in the column (cells with neither
  left out), sorted by
  key = level << 40 | column, whose row-group statistics make a level's column range a
  range read. Level k has BASE_COLS * 2^k columns over the whole run, column
  i = [i*span//n, (i+1)*span//n) from `origin`, so a column of level k is exactly two of
  level k+1. The time per column comes from the same prefix sums as the in-memory level
  of detail (lod.StateIndex.time_upto), so a zoom answered here is the in-memory LOD's
  summary at the pyramid's resolution.
- `detail/rank=R/part-0.parquet`: the rank's calls (start, end, fcode, depth, call,
  thread, polls) sorted by start, in row groups of ROW_GROUP rows with min/max statistics: the
  calls of a window are those of the row groups whose start range begins before its end
  and whose largest end lies after its start: a range read of a few row groups per rank.
- `manifest.json` (written last; the directory is renamed into place when complete): the
  origin, span, levels, function names, ranks, the (rank, thread) pairs that call MPI
  (the timeline's lanes per thread, model.Streams), and the `self` hash of the cache
  manifest it was built from (a rebuilt cache has another: the pyramid is rebuilt too).

A zoom whose pixels are at least one finest column wide is answered from the pyramid
(summary cells only, like lod.query with max_exact=0); a narrower one reads the detail of
its window and runs the in-memory LOD on just those calls. The tabs' statistics of a
window (mpiscope_webui.oocwindow) read the same cells and detail.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope import output
from mpiscope.archive import cache
from mpiscope.engines import daskcache
from mpiscope.errors import UserError
from mpiscope_webui import lod
from mpiscope_webui.model import Streams

LAYOUT = "timeline-pyramid-5"  # 4: cells and detail per thread; 5: calls per cell
DIR = "timeline"
BASE_COLS = 256  # columns of the coarsest level
MAX_COLS = 1 << 17  # columns of the finest level at most (per rank: functions x this x 8 B)
CALLS_PER_COL = 1  # finest level: about this many calls per column and rank
CACHED_ROWS = 8_000_000  # levels of at most this many cells (all ranks) kept in memory
ROW_GROUP = 16_384  # rows per row group (detail, pyramid): the unit of a range read
# detail row groups kept once read (~30 B a row: ~60 MB): zooms nest and pans move to
# the neighbours, so a session's next detail view mostly reads what the last one did
DETAIL_CACHE_ROWS = 2_000_000
KEY_SHIFT = 40  # pyramid key = level << KEY_SHIFT | column
ENV = "MPISCOPE_TIMELINE_OOC"  # 1: serve from the pyramid whatever the trace's size


def find_cache(trace_dir: Path) -> tuple[Path, dict]:
    """The trace's current Parquet cache (directory, manifest: checked against the
    trace's content, daskcache.find), or UserError."""
    found = daskcache.find(trace_dir)
    if found is not None:
        return found
    raise UserError(str(trace_dir), "no current Parquet cache of this trace: convert it "
                    "first (`mpiscope analyze` writes one)")


def _col_edges(span: int, n: int) -> np.ndarray:
    return np.arange(n + 1, dtype=np.int64) * span // n


def _calls_file(cache_dir: Path, rank: int) -> Path:
    return cache.partition_path(cache_dir, "calls", "rank", rank)


def _global_codes(column: pa.ChunkedArray, functions: list[str]) -> np.ndarray:
    """int16 index into the manifest's function list of each row (files keep their own
    dictionaries)."""
    pos = {f: i for i, f in enumerate(functions)}
    out = []
    for chunk in column.chunks:
        if isinstance(chunk, pa.DictionaryArray):
            remap = np.array([pos[str(v)] for v in chunk.dictionary.to_pylist()] or [0],
                             np.int16)
            out.append(remap[chunk.indices.to_numpy(zero_copy_only=False)])
        else:
            out.append(np.array([pos[str(v)] for v in chunk.to_pylist()], np.int16))
    return np.concatenate(out) if out else np.empty(0, np.int16)


def _extent(path: str) -> tuple[int, int, int]:
    """(min start, max end, rows) of one rank's calls."""
    t = pq.read_table(path, columns=["start", "end"])
    if not t.num_rows:
        return 2**62, -(2**62), 0
    s, e = t["start"].to_numpy(), t["end"].to_numpy()
    return int(s.min()), int(np.maximum(e, s).max()), t.num_rows


def per_column(start: np.ndarray, end: np.ndarray, fcode: np.ndarray, nf: int,
               edges: np.ndarray) -> np.ndarray:
    """(functions, columns) ns of each function in each column, for one rank's calls
    (times relative to the origin): differences of the running time per function at the
    edges, as lod.StateIndex.time_upto computes it (calls of one function do not
    overlap on a rank)."""
    out = np.zeros((nf, len(edges) - 1), np.int64)
    order = np.lexsort((start, fcode))
    s, e, f = start[order], end[order], fcode[order]
    bounds = np.searchsorted(f, np.arange(nf + 1))
    for k in range(nf):
        a, b = bounds[k], bounds[k + 1]
        if a == b:
            continue
        ss, ee = s[a:b], e[a:b]
        prefix = np.concatenate([[0], np.cumsum(ee - ss)])
        i = np.searchsorted(ss, edges, side="right")
        running = np.where(i > 0, np.maximum(ee[np.maximum(i - 1, 0)] - edges, 0), 0)
        out[k] = np.diff(prefix[i] - running)
    return out


def starts_per_column(start: np.ndarray, polls: np.ndarray, fcode: np.ndarray, nf: int,
                      edges: np.ndarray) -> np.ndarray:
    """(functions, columns) MPI calls of each function starting in each column (a row
    counts its `polls`), times relative to the origin."""
    col = np.searchsorted(edges, start, side="right") - 1
    ncol = len(edges) - 1
    ok = (col >= 0) & (col < ncol)
    flat = fcode[ok].astype(np.int64) * ncol + col[ok]
    return np.bincount(flat, weights=polls[ok], minlength=nf * ncol).astype(
        np.int64).reshape(nf, ncol)


def _build_rank(cache_dir: str, out_dir: str, rank: int, functions: list[str], origin: int,
                span: int, levels: int) -> tuple[int, list[int], list[int]]:
    """One Dask task: the pyramid and the sorted detail of one rank; (calls, cells per
    level, the threads that call MPI)."""
    path = _calls_file(Path(cache_dir), rank)
    names = pq.ParquetFile(path).schema_arrow.names
    cols = ["call", "function", "start", "end", "depth"]
    t = pq.read_table(path, columns=cols + [c for c in ("thread", "polls") if c in names])
    has_thread = "thread" in names
    polls = (t["polls"].to_numpy().astype(np.int32) if "polls" in names
             else np.ones(t.num_rows, np.int32))
    start = t["start"].to_numpy().astype(np.int64) - origin
    end = np.maximum(t["end"].to_numpy().astype(np.int64) - origin, start)
    fcode = _global_codes(t["function"], functions)
    thread = (t["thread"].to_numpy().astype(np.int32) if has_thread
              else np.zeros(len(start), np.int32))
    order = np.argsort(start, kind="stable")
    detail = pa.table({"start": start[order] + origin, "end": end[order] + origin,
                       "fcode": fcode[order],
                       "depth": t["depth"].to_numpy().astype(np.int8)[order],
                       "call": t["call"].to_numpy().astype(np.int64)[order],
                       "thread": thread[order], "polls": polls[order]})
    out = Path(out_dir)
    path = out / "detail" / f"rank={rank}" / cache.PART_FILE
    path.parent.mkdir(parents=True)
    pq.write_table(detail, path, row_group_size=ROW_GROUP, compression="lz4",
                   write_statistics=["start", "end"])

    nf = len(functions)
    finest = BASE_COLS << (levels - 1)
    threads = np.unique(thread).tolist()
    parts = []
    for th in threads:  # a thread's calls do not overlap per function, a rank's may
        mine = thread == th
        edges = _col_edges(span, finest)
        dense = per_column(start[mine], end[mine], fcode[mine], nf, edges)
        count = starts_per_column(start[mine], polls[mine], fcode[mine], nf, edges)
        for k in range(levels - 1, -1, -1):  # finest first, each coarser one sums pairs
            f_idx, col = np.nonzero(dense | count)
            parts.append(pa.table({"level": np.full(len(col), k, np.int8),
                                   "col": col.astype(np.int32),
                                   "fcode": f_idx.astype(np.int16), "ns": dense[f_idx, col],
                                   "thread": np.full(len(col), th, np.int32),
                                   "calls": count[f_idx, col]}))
            if k:
                dense = dense.reshape(nf, -1, 2).sum(axis=2)
                count = count.reshape(nf, -1, 2).sum(axis=2)
    if not parts:
        parts.append(pa.table({"level": np.zeros(0, np.int8), "col": np.zeros(0, np.int32),
                               "fcode": np.zeros(0, np.int16), "ns": np.zeros(0, np.int64),
                               "thread": np.zeros(0, np.int32),
                               "calls": np.zeros(0, np.int64)}))
    table = pa.concat_tables(parts)  # by level, then column (np.nonzero's order is by
    # function first, and by thread before that: sort within each level)
    table = table.sort_by([("level", "ascending"), ("col", "ascending"),
                           ("thread", "ascending")])
    # one sortable key per (level, column): its row-group statistics give the range read
    key = (table["level"].to_numpy().astype(np.int64) << KEY_SHIFT) | table["col"].to_numpy()
    table = table.append_column("key", pa.array(key))
    path = out / "pyramid" / f"rank={rank}" / cache.PART_FILE
    path.parent.mkdir(parents=True)
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="lz4",
                   write_statistics=["key"])
    return (len(start), np.bincount(table["level"].to_numpy(), minlength=levels).tolist(),
            [int(x) for x in threads])


def build(trace_dir: Path | str, *, scheduler: str | object | None = None,
          levels: int | None = None) -> Path:
    """Build `<cache>/timeline/` with Dask (one task per rank); returns its path.
    `scheduler`: anything dask.compute takes (a distributed Client, "threads", ...);
    default: Dask's threads."""
    import dask

    trace_dir = Path(trace_dir)
    cache_dir, man = find_cache(trace_dir)
    info = man["tables"]["calls"]
    functions = list(info["categories"]["function"])
    ranks = [int(v) for v, _rows in (info["partitions"] or [])]
    if not ranks:
        raise UserError(str(trace_dir), "the cache holds no calls by rank")
    paths = [str(_calls_file(cache_dir, r)) for r in ranks]
    kw = {} if scheduler is None else {"scheduler": scheduler}
    ext = dask.compute(*[dask.delayed(_extent)(p) for p in paths], **kw)
    origin = min(e[0] for e in ext)
    span = max(e[1] for e in ext) - origin + 2  # as lod.StateIndex: > every relative time
    if levels is None:
        want = max(e[2] for e in ext) // CALLS_PER_COL
        finest = BASE_COLS
        while finest < min(want, MAX_COLS):
            finest *= 2
        levels = finest.bit_length() - BASE_COLS.bit_length() + 1
    final = cache_dir / cache.DERIVED / DIR
    with output.publish_dir(final) as tmp:
        made = dask.compute(*[dask.delayed(_build_rank)(str(cache_dir), str(tmp), r, functions,
                                                        origin, span, levels)
                              for r in ranks], **kw)
        num_ranks = int(man.get("meta", {}).get("num_ranks") or 0) or max(ranks) + 1
        (tmp / "manifest.json").write_text(json.dumps({
            "layout": LAYOUT, "cache": man["self"], "version": man["version"],
            "origin": origin, "span": span, "levels": levels, "base_cols": BASE_COLS,
            "functions": functions, "ranks": ranks, "num_ranks": num_ranks,
            "calls": [m[0] for m in made],
            "streams": [[r, th] for r, m in zip(ranks, made, strict=True) for th in m[2]],
            "cells_per_level": np.sum([m[1] for m in made], axis=0).tolist()}))
    return final


def _stats(rg: pq.RowGroupMetaData) -> dict:
    return {rg.column(c).path_in_schema: rg.column(c).statistics
            for c in range(rg.num_columns)}


@dataclass
class DetailWindow:
    """The calls of a window, read from the detail files: rows (absolute ns) and which
    row groups of each rank's file were read."""

    calls: pd.DataFrame  # call, rank, thread, stream, function, start, end, depth
    row_groups: dict[int, list[int]]


@dataclass
class Pyramid:
    """An opened `<cache>/timeline/`: answers zooms without loading the trace."""

    path: Path
    origin: int
    span: int
    levels: int
    base_cols: int
    functions: list[str]
    ranks: list[int]
    num_ranks: int
    cells_per_level: list[int] = field(default_factory=list)
    # the (rank, thread) pairs drawn: a view's rows (summary, detail index) are streams;
    # one thread per rank: stream r = rank r
    streams: Streams = None  # type: ignore[assignment]
    _levels: dict[int, tuple[np.ndarray, ...]] = field(default_factory=dict, repr=False)
    _loading: set[int] = field(default_factory=set, repr=False)
    _queue: list[int] = field(default_factory=list, repr=False)  # levels to keep, next last
    _loader: bool = field(default=False, repr=False)  # a background loader is running
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _footers: dict[int, pq.FileMetaData] = field(default_factory=dict, repr=False)
    _groups: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict,
                                                              repr=False)
    _pyr_footers: dict[int, tuple[pq.FileMetaData, np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False)
    _detail: OrderedDict[tuple[int, int], pa.Table] = field(default_factory=OrderedDict,
                                                            repr=False)
    _detail_rows: int = field(default=0, repr=False)

    @classmethod
    def open(cls, trace_dir: Path | str, *, build_if_missing: bool = True,
             scheduler=None) -> Pyramid:
        trace_dir = Path(trace_dir)
        cache_dir, man = find_cache(trace_dir)
        d = cache_dir / cache.DERIVED / DIR
        try:
            pm = json.loads((d / "manifest.json").read_text())
        except (OSError, ValueError):
            pm = {}
        if pm.get("layout") != LAYOUT or pm.get("cache") != man["self"]:
            if not build_if_missing:
                raise UserError(str(trace_dir), "no current timeline pyramid")
            d = build(trace_dir, scheduler=scheduler)
            pm = json.loads((d / "manifest.json").read_text())
        p = cls(d, pm["origin"], pm["span"], pm["levels"], pm["base_cols"], pm["functions"],
                pm["ranks"], pm["num_ranks"], pm["cells_per_level"],
                _streams(pm["streams"], pm["num_ranks"]))
        p._load_row_groups()
        return p

    @property
    def num_streams(self) -> int:
        return len(self.streams.rank)

    def _load_row_groups(self) -> None:
        """Each rank's detail row groups' (min start, max end): the footer statistics, read
        once (a few kB per rank)."""
        for r in self.ranks:
            md = pq.ParquetFile(self.detail_file(r)).metadata
            self._footers[r] = md
            lo = np.empty(md.num_row_groups, np.int64)
            hi = np.empty(md.num_row_groups, np.int64)
            for g in range(md.num_row_groups):
                st = _stats(md.row_group(g))
                lo[g], hi[g] = st["start"].min, st["end"].max
            self._groups[r] = (lo, hi)
            md = pq.ParquetFile(self.pyramid_file(r)).metadata
            lo = np.empty(md.num_row_groups, np.int64)
            hi = np.empty(md.num_row_groups, np.int64)
            for g in range(md.num_row_groups):
                st = _stats(md.row_group(g))["key"]
                lo[g], hi[g] = st.min, st.max
            self._pyr_footers[r] = (md, lo, hi)

    def pyramid_file(self, rank: int) -> Path:
        return self.path / "pyramid" / f"rank={rank}" / cache.PART_FILE

    def _read_cells(self, level: int, c0: int, c1: int,
                    threads: int | None = None) -> tuple[np.ndarray, ...]:
        """(stream, col, fcode, ns, calls) of columns [c0, c1) of a level: per rank, only the
        row groups whose key range meets it (footers parsed at open); `threads` readers
        (default: one per CPU)."""
        k0, k1 = (level << KEY_SHIFT) | c0, (level << KEY_SHIFT) | c1

        def one(r: int):
            md, lo, hi = self._pyr_footers[r]
            groups = np.flatnonzero((lo < k1) & (hi >= k0)).tolist()
            if not groups:
                return None
            t = pq.ParquetFile(self.pyramid_file(r), metadata=md).read_row_groups(
                groups, columns=["key", "fcode", "ns", "thread", "calls"], use_threads=False)
            key = t["key"].to_numpy()
            a, b = np.searchsorted(key, [k0, k1])  # sorted by key within the file
            th = t["thread"].to_numpy()[a:b]
            return (self.streams.find(np.full(b - a, r, np.int64), th),
                    key[a:b] & ((1 << KEY_SHIFT) - 1), t["fcode"].to_numpy()[a:b],
                    t["ns"].to_numpy()[a:b], t["calls"].to_numpy()[a:b])

        threads = threads or min(len(self.ranks), os.cpu_count() or 1) or 1
        with ThreadPoolExecutor(threads) as pool:
            parts = [x for x in pool.map(one, self.ranks) if x is not None]
        if not parts:
            return tuple(np.empty(0, np.int64) for _ in range(5))
        return tuple(np.concatenate([x[i] for x in parts]) for i in range(5))

    def detail_file(self, rank: int) -> Path:
        return self.path / "detail" / f"rank={rank}" / cache.PART_FILE

    # -- the summary --------------------------------------------------------------------
    def cols(self, level: int) -> int:
        return self.base_cols << level

    def edges(self, level: int) -> np.ndarray:
        """Column edges of a level, ns relative to `origin`."""
        return _col_edges(self.span, self.cols(level))

    def level_for(self, t0: int, t1: int, width_px: int) -> int | None:
        """The coarsest level with at least one column per pixel of [t0, t1), None if
        even the finest is coarser (then the window is read in detail)."""
        for k in range(self.levels):
            if self.cols(k) * (t1 - t0) >= width_px * self.span:
                return k
        return None

    def _keep_level(self, level: int, threads: int | None = None) -> None:
        cols = self._read_cells(level, 0, self.cols(level), threads)
        order = np.argsort(cols[1], kind="stable")
        self._levels[level] = tuple(c[order] for c in cols)

    def _load_queued(self) -> None:
        """The background loader: the queued levels one at a time, the latest asked for
        first (where the user is zooming), on one thread, so that the views asked for
        meanwhile keep the other CPUs (several levels read at once, each on every CPU,
        made a zoom's own read wait for them)."""
        while True:
            with self._lock:
                if not self._queue:
                    self._loader = False
                    return
                level = self._queue.pop()
            if level not in self._levels:
                self._keep_level(level, threads=1)

    def cells(self, level: int, c0: int, c1: int) -> tuple[np.ndarray, ...]:
        """The stored (stream, col, fcode, ns, calls) of columns [c0, c1) of a level: from memory
        for the coarse levels (read once), else a filtered read of the level's range."""
        cached = self._levels.get(level)
        if cached is None and self.cells_per_level[level] <= CACHED_ROWS:
            whole = c0 <= 0 and c1 >= self.cols(level)
            with self._lock:
                new = level not in self._loading
                self._loading.add(level)
                if new and not whole:
                    self._queue.append(level)
                start = new and not whole and not self._loader
                self._loader = self._loader or start
            if whole and new:  # the view reads the whole level anyway: read it once, keep it
                self._keep_level(level)
                cached = self._levels[level]
            elif start:
                # the whole level in the background: this view reads its range (a whole
                # level is seconds at 10^8 events), the next ones find it in memory
                threading.Thread(target=self._load_queued, daemon=True).start()
        if cached is not None:
            a, b = np.searchsorted(cached[1], [c0, c1], side="left")
            return tuple(c[a:b] for c in cached)
        return self._read_cells(level, c0, c1)

    def summary(self, level: int, c0: int, c1: int, nbins: int,
                hidden: set[str] = frozenset()) -> lod.LodView:
        """Columns [c0, c1) of a level grouped into `nbins` bins of whole columns, as an
        LodView with no exact states (time per rank, visible function, bin)."""
        c0, c1 = max(c0, 0), min(max(c1, c0 + 1), self.cols(level))
        nbins = max(1, min(nbins, c1 - c0))
        visible = np.array([i for i, f in enumerate(self.functions) if f not in hidden],
                           np.int64)
        col_edges = self.edges(level)
        first = c0 + (np.arange(nbins + 1) * (c1 - c0)) // nbins  # first column of each bin
        edges = col_edges[first]
        rank, col, fcode, ns, _calls = self.cells(level, c0, c1)
        b = np.searchsorted(first, col, side="right") - 1
        slot = np.full(len(self.functions), -1, np.int64)
        slot[visible] = np.arange(len(visible))
        s = slot[fcode]
        keep = s >= 0
        nv = len(visible)
        flat = (rank[keep].astype(np.int64) * nv + s[keep]) * nbins + b[keep]
        # bincount sums in float64: exact while a cell's total stays below 2^53 ns (104 days)
        ns_ = self.num_streams
        summary = np.rint(np.bincount(flat, weights=ns[keep], minlength=ns_ * nv * nbins)
                          ).astype(np.int64).reshape(ns_, nv, nbins)
        empty = np.empty(0, np.int64)
        ns_per_px = (edges[-1] - edges[0]) / nbins
        return lod.LodView(int(edges[0]), int(edges[-1]), nbins, self.functions, visible,
                           empty, empty, empty, edges, summary, max(int(np.ceil(ns_per_px)), 1))

    # -- the detail ---------------------------------------------------------------------
    def row_groups_of(self, rank: int, t0: int, t1: int) -> list[int]:
        """Row groups of a rank's detail that can hold a call overlapping [t0, t1)
        (absolute ns): from the footer statistics alone."""
        lo, hi = self._groups[rank]
        return np.flatnonzero((lo < t1) & (hi > t0)).tolist()

    def _detail_groups(self, rank: int, groups: list[int]) -> list[pa.Table]:
        """Row groups of a rank's detail: those read lately from memory (least recently
        used ones dropped past DETAIL_CACHE_ROWS), the others from the file."""
        with self._lock:
            got = {g: self._detail.get((rank, g)) for g in groups}
            for g in groups:
                if got[g] is not None:
                    self._detail.move_to_end((rank, g))
        missing = [g for g in groups if got[g] is None]
        if missing:
            # the footer parsed at open: a window costs its row groups' reads alone
            f = pq.ParquetFile(self.detail_file(rank), metadata=self._footers[rank])
            for g in missing:  # each on its own: a kept group holds its own buffers only
                got[g] = f.read_row_groups([g], use_threads=False)
            with self._lock:
                for g in missing:
                    if (rank, g) not in self._detail:
                        self._detail[(rank, g)] = got[g]
                        self._detail_rows += got[g].num_rows
                while self._detail_rows > DETAIL_CACHE_ROWS and self._detail:
                    _k, old = self._detail.popitem(last=False)
                    self._detail_rows -= old.num_rows
        return [got[g] for g in groups]

    def window(self, t0: int, t1: int) -> DetailWindow:
        """The calls overlapping [t0, t1) (absolute ns), reading only the row groups that
        can hold them."""
        def one(r: int) -> tuple[int, list[int], pa.Table | None]:
            groups = self.row_groups_of(r, t0, t1)
            if not groups:
                return r, groups, None
            t = pa.concat_tables(self._detail_groups(r, groups))
            s, e = t["start"].to_numpy(), t["end"].to_numpy()
            return r, groups, t.filter(pa.array((s < t1) & (e > t0)))

        with ThreadPoolExecutor(min(len(self.ranks), os.cpu_count() or 1) or 1) as pool:
            parts = list(pool.map(one, self.ranks))
        tables = [t.append_column("rank", pa.array(np.full(t.num_rows, r, np.int32)))
                  for r, _g, t in parts if t is not None]
        tables = [t.append_column("stream", pa.array(self.streams.find(
            t["rank"].to_numpy().astype(np.int64), t["thread"].to_numpy().astype(np.int64)
        ).astype(np.int32))) for t in tables]
        groups = {r: g for r, g, _t in parts}
        if not tables:
            df = pd.DataFrame({"call": np.empty(0, np.int64), "rank": np.empty(0, np.int32),
                               "start": np.empty(0, np.int64), "end": np.empty(0, np.int64),
                               "depth": np.empty(0, np.int8), "fcode": np.empty(0, np.int16),
                               "thread": np.empty(0, np.int32),
                               "stream": np.empty(0, np.int32)})
        else:
            df = pa.concat_tables(tables).to_pandas()
        df["function"] = pd.Categorical.from_codes(df.pop("fcode").astype(np.int64),
                                                   categories=self.functions)
        return DetailWindow(df, groups)


@dataclass
class OocView:
    """One out-of-core view: an LodView and the index its state positions refer to
    (None when the pyramid answered: summary cells only)."""

    view: lod.LodView
    index: lod.StateIndex | None
    source: str  # "pyramid" or "detail"
    calls_read: int = 0


def query(p: Pyramid, t0: int, t1: int, width_px: int, *,
          hidden: Sequence[str] = (), shown: np.ndarray | None = None) -> OocView:
    """The view of [t0, t1) (ns relative to p.origin) `width_px` pixels wide: from the
    pyramid when it resolves a pixel, else from the window's detail through the in-memory
    LOD (times of the returned LodView are then relative to the returned index's origin).
    Rows are p.streams; `shown`: per stream, whether its lane is drawn (the detail's
    exact states of the others are left out, lod.query)."""
    t0, t1 = sorted((int(t0), int(t1)))
    t1 = max(t1, t0 + 1)
    hidden_set = set(hidden)
    # as lod.query: pixel bins, coarser only when lanes x pixels exceed the cell budget
    nbins = int(max(1, min(width_px, lod.MAX_CELLS // max(p.num_streams, 1))))
    k = p.level_for(t0, t1, nbins)
    if k is not None:
        e = p.edges(k)
        c0 = max(int(np.searchsorted(e, t0, side="right")) - 1, 0)
        c1 = int(np.searchsorted(e, t1, side="left"))
        return OocView(p.summary(k, c0, c1, nbins, hidden_set), None, "pyramid")
    w = p.window(t0 + p.origin, t1 + p.origin)
    read = len(w.calls)
    if not read:  # an empty index still needs one (empty) state
        w.calls.loc[0] = {"call": -1, "rank": 0, "start": t0 + p.origin,
                          "end": t0 + p.origin, "depth": 0, "function": p.functions[0],
                          "thread": 0, "stream": 0}
    # keyed by stream, as the in-memory lanes' index (model.TraceModel.lane_index)
    idx = lod.StateIndex.build(w.calls.assign(rank=w.calls["stream"].astype(np.int32)),
                               p.num_streams)
    o = p.origin - idx.origin
    return OocView(lod.query(idx, t0 + o, t1 + o, width_px, hidden=hidden_set, shown=shown),
                   idx, "detail", read)


def _streams(pairs: list[list[int]], num_ranks: int) -> Streams:
    """model.Streams of the pairs that call MPI and thread 0 of every rank."""
    rank = np.array([r for r, _t in pairs], np.int64)
    thread = np.array([t for _r, t in pairs], np.int64)
    if not thread.any():
        n = max(num_ranks, int(rank.max(initial=-1)) + 1)
        return Streams(np.arange(n, dtype=np.int64), np.zeros(n, np.int64),
                       np.zeros(0, np.int64))
    key = np.unique(np.concatenate([(rank << 20) | thread,
                                    np.arange(num_ranks, dtype=np.int64) << 20]))
    return Streams(key >> 20, key & ((1 << 20) - 1), np.zeros(0, np.int64))
