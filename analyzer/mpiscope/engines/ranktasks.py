"""Run a function on every rank's `RankSlice` on the Dask workers, the slice built on the
worker from the partitioned Parquet cache.

    rt = RankTasks(client, open_cache(DIR))
    rt.run(fn)                 # [fn(slice of rank r) for r in ranks], one task per rank
    rt.wait_states             # engines.waits.DistWaitStates, computed on first use
    map_ranks(client, tables, fn)   # the same, with a RankTasks kept per cache

A slice equals `slices.of_trace(Analysis(mpiscope.load(DIR)).trace, r, ws)`: the rank's
partition of every per-rank table (tables the cache keeps whole are small and cut by
rank), the small whole-trace tables, the messages it received, its calls relabelled by
call paths with the `CallPaths` of the whole trace (found from every rank's used path
ids, a pass of its own), and its wait states (`waits=True`).

The cache keeps messages by sender. The messages by receiver are written once per cache
(one task per sender, a file per (receiver, sender)) into `<cache>/derived/received`,
built in a temporary directory and renamed into place when whole, so a killed build is
never read and the next run reuses it. The wait states' per-rank files go the same way
to `<cache>/derived/waits` (they depend on the cache only, not on call-path options).
A worker holds one rank's rows at a time: its memory is bounded by the largest rank.
"""

from __future__ import annotations

import functools
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope import output
from mpiscope.analysis import callpaths
from mpiscope.archive import cache
from mpiscope.archive.trace import Trace, TraceMeta
from mpiscope.engines import cluster, convert, slices, slicestore, waits
from mpiscope.engines.daskcache import CacheTables, read_partition
from mpiscope.engines.slices import RankSlice

T = TypeVar("T")
WHOLE = ("ranks", "comms", "windows", "files", "callpaths")  # small, whole in every slice
DERIVED = cache.DERIVED
FAN_IN = 16  # results a combining task (or the client) takes at once, `slices.Reduced`


@dataclass(frozen=True)
class Source:
    """What a worker needs to build a rank's slice (small, pickled into each task)."""

    dir: str
    trace_dir: str
    manifest: dict
    received: str | None  # messages by receiver; None: messages kept whole in the cache
    paths: callpaths.CallPaths | None  # None: calls as recorded (no relabelling)
    group_by: str = "frame"
    waits: str | None = None  # per-rank wait files (engines.waits)
    # the session whose slices a worker keeps between passes (engines.slicestore);
    # "": build every time
    session: str = ""

    @property
    def tables(self) -> CacheTables:
        return CacheTables(Path(self.dir), Path(self.trace_dir), self.manifest)


def _declared(df: pd.DataFrame, info: dict) -> pd.DataFrame:
    """Columns the reader makes `object` as object: Parquet strings come back as pandas'
    str dtype, which the pandas engine's tables do not have."""
    fix = {c: object for c, t in info["dtypes"].items()
           if t == "object" and c in df.columns and df[c].dtype != object}
    return df.astype(fix) if fix else df


# tables kept whole in the cache are read once per worker process, not once per slice
# (with a thousand ranks, the five small tables cost a third of building a slice); up to
# this size each: a table this large is read again rather than held
SMALL_KEEP = 16 * 2**20
_smalls: dict[tuple, pd.DataFrame] = {}


def _held(t: CacheTables, name: str, kind: str, make: Callable[[], pd.DataFrame]
          ) -> pd.DataFrame:
    """`make()`, kept for the worker process under (cache, table, kind) if it is small."""
    key = (str(t.dir), t.manifest.get("self"), t.manifest.get("version"), name, kind)
    df = _smalls.get(key)
    if df is None:
        df = make()
        if df.memory_usage(index=False, deep=False).sum() <= SMALL_KEEP:
            if len(_smalls) >= 64:
                _smalls.clear()
            _smalls[key] = df
    return df


def _small(t: CacheTables, name: str) -> pd.DataFrame:
    return _held(t, name, "whole", lambda: _declared(t.small(name), t.manifest["tables"][name]))


def _empty(t: CacheTables, name: str) -> pd.DataFrame:
    """Table `name` without rows (making one costs ~8 ms, a sixth of building a slice,
    whose rank has no rows in most of the small tables: so it is made once)."""
    info = t.manifest["tables"][name]
    return _held(t, name, "empty", lambda: _declared(cache._empty(info), info)).copy()


def _cut(t: CacheTables, name: str, column: str, rank: int) -> pd.DataFrame:
    """Rank `rank`'s rows of table `name` (`column` == rank), as slices.of_trace cuts."""
    info = t.manifest["tables"][name]
    if t.partitioned(name) and cache.PARTITION_BY[name] == column:
        if rank in t.ranks_of(name):
            return _declared(t.partition(name, rank), info)
        return _empty(t, name)
    return slices._rows(_small(t, name), column, rank)


def received_of(src: Source, rank: int) -> pd.DataFrame:
    """The messages `rank` received, in the order of the whole table (by sender)."""
    t = src.tables
    if src.received is None:
        return _cut(t, "messages", "recv_rank", rank)
    info = t.manifest["tables"]["messages"]
    f = Path(src.received) / f"recv_rank={rank}.parquet"
    if not f.is_file():
        return _empty(t, "messages")
    return _declared(cache._restore(cache._read_file(f).to_pandas(), info), info)


def build_slice(src: Source, rank: int, with_waits: bool = True) -> RankSlice:
    """Rank `rank`'s slice, read from the cache (on a worker)."""
    t = src.tables
    tables: dict[str, Any] = {name: _small(t, name) for name in WHOLE}
    for name in slices.PER_RANK:
        tables[name] = _cut(t, name, "rank", rank)
    tables["threads"] = _cut(t, "threads", "rank", rank)
    tables["messages"] = _cut(t, "messages", "send_rank", rank)
    trace = Trace(path=Path(src.trace_dir), meta=TraceMeta(**t.manifest["meta"]), **tables)
    if src.paths is not None:
        trace = callpaths.relabel(trace, src.paths, src.group_by)
    calls = trace.calls
    offset = int(calls["call"].to_numpy()[0]) if len(calls) else 0
    w = waits.read_rank(src.waits, rank) if with_waits and src.waits else None
    return RankSlice(rank, trace, received_of(src, rank), offset, w)


def kept_slice(src: Source, rank: int, with_waits: bool = True) -> RankSlice:
    """`build_slice`, kept on the worker for the next passes of the session."""
    if not src.session:
        return build_slice(src, rank, with_waits)
    base = slicestore.get(src.session, (rank, "base"),
                          lambda: build_slice(src, rank, with_waits=False))
    if not (with_waits and src.waits):
        return base
    w = slicestore.get(src.session, (rank, "waits", src.waits),
                       lambda: waits.read_rank(src.waits, rank))  # type: ignore[arg-type]
    return replace(base, waits=w)


def _task(fn: Callable[[RankSlice], T], src: Source, with_waits: bool, rank: int) -> T:
    return fn(kept_slice(src, rank, with_waits))


def _call(task: Callable[[int], T], rank: int) -> T:
    return task(rank)


def _task_arg(fn: Callable[[RankSlice, Any], T], src: Source, with_waits: bool, arg: Any,
              rank: int) -> T:
    return fn(kept_slice(src, rank, with_waits), arg)


def _call_arg(task: Callable[[Any, int], T], arg: Any, rank: int) -> T:
    return task(arg, rank)


def _combine(combine: Callable[[list], T], *parts: T) -> T:
    return combine(list(parts))


def _used_paths(src: Source, rank: int) -> list[int]:
    return callpaths.used_paths(_cut(src.tables, "calls", "rank", rank))


def _split_sender(d: str, info: dict, out: str, sender: int) -> list[int]:
    """Write the messages of `sender` as one file per receiver under `out`; returns the
    receivers."""
    df = read_partition(Path(d), "messages", sender, info)
    receivers = []
    for r, g in df.groupby("recv_rank", sort=True):
        sub = Path(out) / f"recv_rank={int(r)}"
        sub.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pandas(g, preserve_index=False),
                       sub / f"from={sender}.parquet")
        receivers.append(int(r))
    return receivers


def _join_receiver(out: str, receiver: int) -> None:
    """The files `_split_sender` wrote for `receiver`, as one (in sender order, the
    whole table's): a slice then reads one file, not one per sender, in every pass."""
    d = Path(out) / f"recv_rank={receiver}"
    joined = Path(out) / f"recv_rank={receiver}.parquet"
    if not joined.exists():  # else a retry after the join: only the removal was left
        files = sorted(d.glob("from=*.parquet"), key=lambda p: int(p.stem.split("=")[1]))
        with output.scratch_path(joined) as tmp:
            pq.write_table(pa.concat_tables([cache._read_file(f) for f in files]), tmp)
    shutil.rmtree(d, ignore_errors=True)


class RankTasks:
    """The per-rank view of a cache on a cluster: the runner the distributed analyses
    take (`run`), with the call paths and wait states found once."""

    def __init__(self, client, tables: CacheTables, *,
                 skip_frames: str | Sequence[str] = (), group_by: str = "frame") -> None:
        self.client = client
        self.tables = tables
        self.skip = callpaths.parse_skip_frames(skip_frames)
        self.group_by = group_by
        self.ranks = sorted(int(r) for r in tables.small("ranks")["rank"].unique())
        self._lock = threading.RLock()
        self._src: Source | None = None
        self._waits: waits.DistWaitStates | None = None

    def _submit(self, task: Callable[..., T], args: Callable[[int], Any] | None = None
                ) -> list:
        """Futures of `task(rank)` for every rank, or of `task(args(rank), rank)`: the
        task goes to the cluster once (`cluster.shared`), so a rank's task carries the
        rank and its own argument only (the task holds the cache's manifest, which grows with the
        ranks: sent with each task it made the client's memory grow as ranks squared,
        0.9 GB at 1024 ranks). Each rank goes to the same worker in every pass (so the
        slices a worker keeps are the ones it is asked for again; another worker takes
        the task when that one is gone or busy)."""
        shared = cluster.shared(self.client, task, convert.RETRIES)
        workers = sorted(cluster.workers(self.client))
        n = len(self.ranks)
        try:
            return [self.client.submit(
                _call if args is None else _call_arg, shared,
                *(() if args is None else (args(r),)), r, pure=False,
                retries=convert.RETRIES, allow_other_workers=True,
                workers=[workers[i * len(workers) // n]] if workers else None)
                for i, r in enumerate(self.ranks)]
        finally:
            shared.release()  # the submitted tasks hold it until they are done

    def _collect(self, futures: list, combine: Callable[[list], Any] | None) -> list:
        """The futures' results; with `combine`, combined FAN_IN at a time on the workers
        until at most FAN_IN are left for the client."""
        while combine is not None and len(futures) > FAN_IN:
            futures = [self.client.submit(_combine, combine, *futures[i:i + FAN_IN],
                                          pure=False, retries=convert.RETRIES)
                       for i in range(0, len(futures), FAN_IN)]
        return self.client.gather(futures)

    def close(self) -> None:
        """Drop the slices the workers keep for this session."""
        self.client.run(slicestore.clear)

    def _derived(self) -> Path:
        d = self.tables.dir / DERIVED
        d.mkdir(exist_ok=True)
        return d

    def _received(self) -> str | None:
        t = self.tables
        if not t.partitioned("messages"):
            return None
        final = self._derived() / "received-by-receiver"
        if not final.is_dir():
            with output.publish_dir(final) as tmp:
                fn = functools.partial(_split_sender, str(t.dir),
                                       t.manifest["tables"]["messages"], str(tmp))
                receivers = self.client.gather(self.client.map(
                    fn, t.ranks_of("messages"), pure=False, retries=convert.RETRIES))
                self.client.gather(self.client.map(
                    functools.partial(_join_receiver, str(tmp)),
                    sorted(set().union(*receivers)), pure=False, retries=convert.RETRIES))
        return str(final)

    @property
    def source(self) -> Source:
        """The slice recipe; the first use finds the call paths and the received messages."""
        with self._lock:
            if self._src is None:
                t = self.tables
                bare = Source(str(t.dir), str(t.trace_dir), t.manifest, None, None)
                used = sorted({p for ids in self.client.gather(self._submit(
                    functools.partial(_used_paths, bare))) for p in ids})
                paths = callpaths.CallPaths.of(
                    SimpleNamespace(callpaths=_small(t, "callpaths")),  # type: ignore[arg-type]
                    self.skip, used=used)
                self._src = replace(bare, received=self._received(), paths=paths,
                                    group_by=self.group_by, session=uuid.uuid4().hex)
            return self._src

    @property
    def paths(self) -> callpaths.CallPaths:
        paths = self.source.paths
        assert paths is not None
        return paths

    def run(self, fn: Callable[[RankSlice], T], *, waits: bool = True) -> list[T]:
        """`fn` on every rank's slice on the workers (rank order); `waits`: the slices
        carry their wait states (computed first if not yet). A `slices.PerRank` pass
        sends each rank's task its own argument only; any other pass's function (and
        its arguments) goes to each worker once. A `slices.Reduced` pass is combined on
        the workers, in a tree: the client gets a few combined results."""
        src = self.source
        if waits:
            src = replace(src, waits=str(self.wait_states.scratch))
        combine = fn.combine if isinstance(fn, slices.Reduced) else None
        one = fn.fn if isinstance(fn, slices.Reduced) else fn
        if isinstance(one, slices.PerRank):
            return self._collect(self._submit(
                functools.partial(_task_arg, one.fn, src, waits), one.args.get), combine)
        return self._collect(self._submit(functools.partial(_task, one, src, waits)), combine)

    def _no_waits(self, fn: Callable[[RankSlice], T]) -> list[T]:
        return self.run(fn, waits=False)

    @property
    def wait_states(self) -> waits.DistWaitStates:
        with self._lock:
            if self._waits is None:
                final = self._derived() / "waits"
                with output.publish_dir(final) as tmp:
                    ws = waits.compute(self._no_waits, tmp)
                self._waits = replace(ws, scratch=final)
            return self._waits


_SESSIONS: dict[tuple, RankTasks] = {}


def map_ranks(client, tables: CacheTables, fn: Callable[[RankSlice], T], *,
              waits: bool = True, skip_frames: str | Sequence[str] = (),
              group_by: str = "frame") -> list[T]:
    """`fn(RankSlice)` for every rank on `client`'s workers, in rank order (see module)."""
    key = (id(client), str(tables.dir), callpaths.parse_skip_frames(skip_frames), group_by)
    rt = _SESSIONS.get(key)
    if rt is None:
        rt = _SESSIONS[key] = RankTasks(client, tables, skip_frames=skip_frames,
                                        group_by=group_by)
    return rt.run(fn, waits=waits)

