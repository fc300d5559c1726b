"""The analysis session with its per-rank results computed on a Dask cluster.

    from mpiscope.engines import dask_engine
    a = dask_engine.analyze("trace-dir", ClusterSpec(workers=2, memory_limit="2GB"))
    a.to_dict()     # the JSON of `mpiscope analyze --engine dask`, equal to --engine pandas

What runs where (docs/dask.md has the bound of each):
- conversion: OTF2 -> the partitioned Parquet cache, one task per group of ranks
  (`convert`), skipped when a complete cache exists;
- one task per rank partition of the cache: function statistics, uninterpreted
  functions, per-thread MPI time, buffer flushes, the communication matrix;
- rank by rank on the workers, each task a `RankSlice` built from the cache
  (`ranktasks`), in passes whose small partial results the client combines: the call
  paths, the wait states (`waits`), the breakdown, time bins, call sites and message
  statistics (`rankstats`), loop detection and iterations (`rankloops`), the critical
  path (`rankcritical`: the client walks it through a few memory-mapped rank files) and
  the findings (`rankfindings`: savings replayed within an event budget).

The client never reads the whole trace for the JSON; `trace` (all tables, relabelled by
call paths) is still there for callers that ask for it, read from the cache on first use.
All Dask results are computed inside `analyze` (the cluster may be gone afterwards); the
others are computed on first use, as in `Analysis`.
"""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.analysis import callpaths, stats
from mpiscope.analysis.session import Analysis, Overview
from mpiscope.analysis.threads import COLUMNS as THREAD_COLUMNS
from mpiscope.archive import cache, reader
from mpiscope.archive.trace import Trace
from mpiscope.engines import (
    choose,
    cluster,
    convert,
    daskcache,
    fused,
    rankcritical,
    rankfindings,
    rankloops,
    rankstats,
    ranktasks,
)
from mpiscope.engines.daskcache import CacheTables, open_cache
from mpiscope.engines.slices import RankSlice
from mpiscope.errors import UserError


class DaskAnalysis(Analysis):
    """An `Analysis` whose per-rank results came from the cluster; the trace's pandas
    tables are read from the cache only when a client-side result asks for them."""

    def __init__(self, tables: CacheTables, *, skip_frames: str | Sequence[str] = (),
                 group_by: str = "frame") -> None:
        # Analysis.__init__ needs the tables; here they come with the first result that asks
        self.tables = tables
        self.group_by = group_by
        self._skip = callpaths.parse_skip_frames(skip_frames)
        self._trace: Trace | None = None
        self._paths: callpaths.CallPaths | None = None
        self._results: dict[str, object] = {}
        self._lock = threading.RLock()
        # on_cluster sets it: fn(RankSlice) over every rank on the workers, rank order
        self.map_ranks: Callable | None = None

    def _read(self) -> None:
        with self._lock:
            if self._trace is None:
                t = self.tables
                raw = cache._read(t.dir, Path(t.trace_dir), t.manifest)
                if self._paths is None:  # on_cluster found them from every rank's calls
                    self._paths = callpaths.CallPaths.of(raw, self._skip)
                self._trace = callpaths.relabel(raw, self._paths, self.group_by)

    @property  # type: ignore[override]
    def trace(self) -> Trace:
        self._read()
        assert self._trace is not None
        return self._trace

    @property  # type: ignore[override]
    def paths(self) -> callpaths.CallPaths:
        if self._paths is None:  # on_cluster sets them from every rank's calls
            self._read()
        assert self._paths is not None
        return self._paths

    @property
    def overview(self) -> Overview:
        t = self.tables
        return Overview(Path(t.trace_dir), t.meta, t.small("ranks"), t.rows("calls"))

    def _keep(self, compute: Callable[[], object], *names: str) -> None:
        """Results computed now (the cluster may be gone later), `compute` giving one
        value per name; a failure kept under every name, to be raised where one is asked
        for, as `Analysis` keeps it."""
        try:
            value = compute()
            values = (value,) if len(names) == 1 else value
            self._results.update(zip(names, values, strict=True))  # type: ignore[arg-type]
        except Exception as err:  # noqa: BLE001 - kept, raised on use
            self._results.update(dict.fromkeys(names, err))

    def on_cluster(self, client) -> None:
        """Compute the per-rank results with `client`'s workers."""
        t = self.tables
        tasks = ranktasks.RankTasks(client, t, skip_frames=self._skip, group_by=self.group_by)
        # the runner later distributed analyses take (valid while the client is)
        self.map_ranks = tasks.run
        with self._lock:
            self._paths = tasks.paths
        try:
            ws = tasks.wait_states
            # for callers outside the JSON that still ask for every call's wait (whole trace)
            ws.calls_of = lambda: self.trace.calls
            self._results["wait_states"] = ws
            self._distributed(tasks.run, ws)
        finally:
            tasks.close()

    def _distributed(self, run: Callable, ws) -> None:
        """Every cross-rank result, rank by rank on the workers (engines/rank*.py); the
        client holds their combined partials only (docs/dask.md says how much). The
        analyses that do not need each other's results run together (`fused`): their
        passes share the slices, built once per round instead of once per analysis."""
        scratch = self.tables.dir / ranktasks.DERIVED / f"scratch-{uuid.uuid4().hex}"
        scratch.mkdir(parents=True)

        def messages(run: Callable) -> tuple:
            ms = rankstats.compute_messages(run, scratch)
            return ms.sizes, ms.switches, ms.host_split, ms.counts, ms.evidence

        def loop(run: Callable) -> None:
            self._keep(lambda: rankloops.detect(run), "loop")
            self._keep(lambda: rankloops.per_iteration(run, self.loop), "per_iteration")

        def job(compute: Callable[[Callable], object], *names: str) -> Callable:
            return lambda run: self._keep(lambda: compute(run), *names)

        try:
            fused.run_together(run, [
                job(rankstats.compute_ranks, "ranks"),
                job(rankstats.compute_time_bins, "time_bins"),
                job(lambda run: rankstats.compute_callsites(run, self.paths),
                    "callsites", "_best_paths"),
                job(messages, "message_sizes", "protocol_switches", "host_split",
                    "message_counts", "switch_evidence"),
                loop,
                job(lambda run: rankcritical.compute(run, scratch, ws.skew), "critical_path"),
                job(lambda run: _per_rank_sums(run, self.tables), "functions",
                    "uninterpreted", "threads", "flushes", "comm_matrix"),
            ])
            self._find = lambda: rankfindings.find(run, ws, self.ranks, self.loop,
                                                   self.critical_path)
            self._keep(lambda: Analysis.all_findings.fget(self), "all_findings")  # named paths
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


class _Tables:
    """The attributes of a Trace that a per-partition analysis reads."""

    def __init__(self, **tables: pd.DataFrame | None) -> None:
        self.__dict__.update(tables)


def _sums_part(s: RankSlice) -> dict:
    """A rank's share of the per-function, per-thread, flush and matrix results."""
    tr = s.trace
    out = _calls_partials(tr.calls)
    out["flushes"] = stats.flushes(tr)
    out["comm_matrix"] = stats.comm_matrix(tr)
    return out


def _per_rank_sums(run: Callable, t: CacheTables) -> tuple:
    """functions, uninterpreted, threads, flushes, comm_matrix: sums over the ranks (the
    slices carry their wait states, unread here, so the pass fuses with the others')."""
    parts = run(_sums_part)
    flushes = [p["flushes"] for p in parts]
    matrix = [p["comm_matrix"] for p in parts]
    return (_functions(parts, t), _uninterpreted(parts), _threads(parts, t.small("threads")),
            pd.concat(flushes, ignore_index=True) if flushes
            else stats.flushes(_Tables(flushes=None)),
            pd.concat(matrix, ignore_index=True) if matrix
            else stats.comm_matrix(_Tables(messages=t.small("messages"))))


def _calls_partials(c: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per function and per (rank, thread): the sums a whole-trace result adds up."""
    dur = (c["end"] - c["start"]).to_numpy()
    nbytes = (c["bytes_sent"] + c["bytes_recv"]).to_numpy()
    n = stats.polls(c)
    df = pd.DataFrame({"function": c["function"], "dur": dur, "bytes": nbytes, "n": n,
                       "per_call": dur / n})
    g = df.groupby("function", observed=True)
    fun = pd.DataFrame({"calls": g["n"].sum(), "dur": g["dur"].sum(),
                        "max": g["per_call"].max(), "bytes": g["bytes"].sum()})
    other = (c["kind"] == "other").to_numpy()
    names = c["function"].astype(str).to_numpy()[other]
    o = pd.Series(dur[other]).groupby(names)
    unint = pd.DataFrame({"calls": pd.Series(n[other]).groupby(names).sum(), "dur": o.sum()})
    keep = (c["depth"].to_numpy() == 0) & ~c["kind"].isin(["init", "finalize"]).to_numpy()
    thread = c["thread"].to_numpy() if "thread" in c.columns else np.zeros(len(c), np.int16)
    th = pd.DataFrame({"rank": c["rank"].to_numpy()[keep], "thread": thread[keep],
                       "ns": dur[keep], "n": n[keep]}).groupby(["rank", "thread"])[
        ["ns", "n"]].sum().rename(columns={"ns": "sum", "n": "size"})
    return {"functions": fun, "uninterpreted": unint, "threads": th}


def _functions(parts: list[dict], t: CacheTables) -> pd.DataFrame:
    """stats.functions from the partitions' sums: name, calls, time_s, mean_s, max_s, bytes."""
    cats = t.manifest["tables"]["calls"]["categories"]["function"]
    p = pd.concat([x["functions"] for x in parts]) if parts else pd.DataFrame(
        columns=["calls", "dur", "max", "bytes"])
    g = p.groupby(level=0, observed=True, sort=False)
    s = pd.DataFrame({"calls": g["calls"].sum(), "dur": g["dur"].sum(),
                      "max": g["max"].max(), "bytes": g["bytes"].sum()})
    # pandas groups in category order: the same order before the sort by time
    s = s.reindex([c for c in cats if c in s.index])
    df = pd.DataFrame({"calls": s["calls"].astype(np.int64), "time_s": s["dur"] / 1e9,
                       "mean_s": s["dur"] / s["calls"] / 1e9, "max_s": s["max"] / 1e9,
                       "bytes": s["bytes"].astype(np.int64)})
    df.index = pd.CategoricalIndex(df.index, categories=cats, name="name")
    return df.rename_axis("name").reset_index().sort_values(
        "time_s", ascending=False, ignore_index=True)


def _uninterpreted(parts: list[dict]) -> pd.DataFrame:
    p = pd.concat([x["uninterpreted"] for x in parts])
    g = p.groupby(level=0)
    df = pd.DataFrame({"calls": g["calls"].sum().astype(np.int64),
                       "time_s": g["dur"].sum() / 1e9})
    return (df.rename_axis("name").reset_index()
            .sort_values(["time_s", "name"], ascending=[False, True], ignore_index=True)
            [["name", "calls", "time_s"]])


def _threads(parts: list[dict], threads: pd.DataFrame) -> pd.DataFrame:
    g = pd.concat([x["threads"] for x in parts])
    g = g.groupby(level=[0, 1]).sum()
    out = threads[["rank", "thread", "name"]].copy()
    idx = pd.MultiIndex.from_arrays([out["rank"], out["thread"]])
    out["mpi_s"] = g["sum"].reindex(idx, fill_value=0).to_numpy() / 1e9
    out["calls"] = g["size"].reindex(idx, fill_value=0).to_numpy().astype(np.int64)
    return out[THREAD_COLUMNS].reset_index(drop=True)


def _refuse_small_workers(trace_dir: Path, client) -> None:
    """One line (UserError) before any task runs when the smallest worker cannot hold the
    largest rank's slice (with `--engine dask` or a running cluster: `auto` plans this
    before the cluster starts). Without it such a trace ran until the workers were
    restarted at their limit again and again and the job died with KilledWorker."""
    limits = [int(w.get("memory_limit") or 0) for w in cluster.workers(client).values()]
    limits = [x for x in limits if x > 0]  # 0: a worker without a limit
    if not limits:
        return
    try:
        claimed = choose.counts(trace_dir)
    except UserError:
        return  # no archive to plan from: the reading path says what is wrong
    line = choose.worker_refusal(trace_dir, claimed.largest_rank, min(limits), claimed.polling)
    if line:
        raise UserError(None, line)


def analyze(trace_dir: Path | str, spec: cluster.ClusterSpec | None = None, *,
            client=None, progress: Callable[[str], None] | None = None,
            skip_frames: str | Sequence[str] = (), group_by: str = "frame") -> DaskAnalysis:
    """Convert (if no complete cache) and analyze the trace on a Dask cluster: `client`,
    else the spec's scheduler, else a local cluster for the time of this call."""
    if client is None:
        with cluster.connect(spec) as c:
            return analyze(trace_dir, client=c, progress=progress,
                           skip_frames=skip_frames, group_by=group_by)
    _refuse_small_workers(Path(trace_dir), client)
    # a cache found on disk is checked before use, and rebuilt if damaged
    problems: list[str] = []
    found = daskcache.find(trace_dir, problems)
    if found is not None:
        problem = daskcache.validate(
            CacheTables(found[0], reader.anchor_of(Path(trace_dir)).parent, found[1]), client)
        if problem:
            problems.append(problem)
            cache.discard(found[0])
    if problems:
        cache.notice(Path(trace_dir), problems)
    convert.convert(trace_dir, client, progress=progress)
    tables = open_cache(trace_dir)
    if tables is None:  # written a moment ago; gone means someone removed it
        raise UserError(str(trace_dir), "the Parquet cache vanished while being read")
    session = DaskAnalysis(tables, skip_frames=skip_frames, group_by=group_by)
    session.on_cluster(client)
    return session
