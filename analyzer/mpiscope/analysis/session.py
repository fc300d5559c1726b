"""One analysis session per trace: every result computed on first use, then kept.

`Analysis(trace)` is what `mpiscope analyze` prints and writes as JSON, what a comparison
report compares and what the web UI shows; they all ask the session, so each result
(wait states first, since most others build on them) is computed once per trace.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from mpiscope.analysis import (
    breakdown,
    callpaths,
    critical_path,
    findings,
    hosts,
    iterations,
    replaywindow,
    stats,
    waitstates,
    window,
)
from mpiscope.analysis.cutshort import cut_short_text
from mpiscope.analysis.threads import per_thread
from mpiscope.archive import spawned as spawned_dirs
from mpiscope.archive.trace import Trace, TraceMeta
from mpiscope.errors import UserError

T = TypeVar("T")


def result(compute: Callable[[Analysis], T]) -> property:
    """A read-only attribute computed by `compute` on first use and kept. A failure is
    kept too (and raised again): it would only fail again, and the web UI lists it once."""
    name = compute.__name__

    def get(self: Analysis) -> T:
        try:
            value = self._results[name]
        except KeyError:
            # one lock per session: the web UI asks from its background thread and from
            # requests at once; a result reached by another thread meanwhile is not redone
            with self._lock:
                if name not in self._results:
                    try:
                        self._results[name] = compute(self)
                    except Exception as err:  # noqa: BLE001 - kept, raised below
                        self._results[name] = err
                value = self._results[name]
        if isinstance(value, Exception):
            raise value
        return value

    return property(get, doc=compute.__doc__)


@dataclasses.dataclass
class Overview:
    """What a report says about the trace itself (small, whatever the engine)."""

    path: Path
    meta: TraceMeta
    ranks: pd.DataFrame  # the trace's ranks table (rank, host, ...)
    calls: int  # MPI calls recorded


@dataclasses.dataclass
class SpawnedJob:
    """A job the traced run spawned (DIR/spawn-N, archive/spawned.py): its own
    MPI_COMM_WORLD, analysed on its own, or why it could not be."""

    name: str  # "spawn-1": its ranks are "spawn-1 rank 0", ...
    path: Path
    analysis: Analysis | None
    problem: str = ""  # why there is no analysis
    # when it started in the parent's run (its first event after the parent's), or None
    # and why that is unknown
    start_offset_s: float | None = None
    start_unknown: str = ""

    def rank_label(self, rank: int) -> str:
        return f"{self.name} rank {rank}"


# the parts of a spawned job's own analysis its `spawned` entry carries (the contract's)
SPAWNED_KEYS = ("ranks", "functions", "wait_states", "findings", "critical_path", "messages",
                "warnings")


def _records(df: pd.DataFrame) -> list[dict]:
    # pandas rounds to 10 decimals by default, which drops sub-ns digits of seconds
    # and makes the JSON's parts no longer add up to its totals.
    return json.loads(df.to_json(orient="records", double_precision=15))


class Analysis:
    """The analyses of one trace, each computed on first use (see docs/data-model.md)."""

    # the jobs the run spawned, each analysed on its own (read_spawned); None: not read
    spawned: list[SpawnedJob] | None = None

    def __init__(self, trace: Trace, *, skip_frames: str | Sequence[str] = (),
                 group_by: str = "frame") -> None:
        """`skip_frames`: globs on function/frame names of wrapper layers a call site
        should not name (`"message_passing::*,LAMMPS_NS::Comm*"`); `group_by`: "frame"
        groups calls by the frame chosen from their path, "path" by the whole path."""
        self.raw_trace = trace
        self.paths = callpaths.CallPaths.of(trace, callpaths.parse_skip_frames(skip_frames))
        self.group_by = group_by
        # every per-call-site result groups by the chosen frame: the calls' callsite is it
        self.trace = callpaths.relabel(trace, self.paths, group_by)
        self._results: dict[str, object] = {}
        self._lock = threading.RLock()  # re-entrant: a result asks for the ones it needs

    @result
    def wait_states(self) -> waitstates.WaitStates:
        """Wait states of every call, on clock-skew corrected times."""
        return waitstates.compute(self.trace)

    @result
    def ranks(self) -> pd.DataFrame:
        """Per-rank breakdown: rank, host, total_s, compute_s, communication_s,
        synchronization_s, io_s, descheduled_s."""
        return breakdown.per_rank(self.trace, self.wait_states)

    @result
    def threads(self) -> pd.DataFrame:
        """Per thread of each rank: rank, thread, name, mpi_s, calls (threads.py)."""
        return per_thread(self.trace)

    @result
    def time_bins(self) -> pd.DataFrame:
        """The breakdown over time, summed over ranks."""
        return breakdown.time_bins(self.trace, self.wait_states)

    @result
    def loop(self) -> iterations.Loop | None:
        """The main loop, None if the trace shows none."""
        return iterations.detect(self.trace)

    @result
    def per_iteration(self) -> pd.DataFrame | None:
        """The breakdown per iteration of the main loop (None without one)."""
        loop = self.loop
        return iterations.per_iteration(self.trace, loop, self.wait_states) if loop else None

    @result
    def functions(self) -> pd.DataFrame:
        """Per MPI function: name, calls, time_s, mean_s, max_s, bytes."""
        return stats.functions(self.trace)

    @result
    def uninterpreted(self) -> pd.DataFrame:
        """MPI functions present that the analysis treats only as time: name, calls,
        time_s."""
        return stats.uninterpreted(self.trace)

    def callpath(self, function: str, group: str) -> tuple[str, list[str]]:
        """(call site, call path frames innermost first) of the calls of `function`
        grouped under `group` (a `callsite` of this session's tables)."""
        return callpaths.callpath_of(self.paths, self._best_paths, function, group)

    @result
    def _best_paths(self) -> dict[tuple[str, str], int]:
        return callpaths.best_paths(self.trace)

    @result
    def callsites(self) -> pd.DataFrame:
        """Per call site, with its waiting time and call path (`callpath`: frames,
        innermost first, of the path with most time)."""
        df = stats.callsites(self.trace, self.wait_states.per_call["wait_ns"].to_numpy())
        return callpaths.name_sites(df, self.paths, self._best_paths)

    @result
    def all_findings(self) -> list[findings.Finding]:
        """Every finding, listed or below the noise floor, largest saving first."""
        found = self._find()
        out = []
        for f in found:
            site, path = self.callpath(f.function, f.callsite)
            out.append(dataclasses.replace(f, callsite=site, callpath=path, group=f.callsite))
        return out

    @result
    def noise_floor(self) -> findings.NoiseFloor:
        """The least saving a listed finding has (findings.noise_floor)."""
        return findings.noise_floor(self.ranks, self.loop)

    @result
    def _split_findings(self) -> tuple[list[findings.Finding], list[findings.Finding]]:
        return findings.split(self.all_findings, self.noise_floor, len(self.ranks))

    @property
    def findings(self) -> list[findings.Finding]:
        """Improvement opportunities above the noise floor, largest estimated savings
        first."""
        return self._split_findings[0]

    @property
    def minor_findings(self) -> list[findings.Finding]:
        """What the rules found below the noise floor (evidence `minor_reason`)."""
        return self._split_findings[1]

    def _find(self) -> list[findings.Finding]:
        """The findings before their call paths are named, their savings replayed within
        the event budget (analysis.replaywindow; the Dask engine's run per rank:
        engines.rankfindings)."""
        return replaywindow.find(self.trace, self.wait_states, self.ranks, self.loop,
                                 self.critical_path)

    @result
    def critical_path(self) -> critical_path.CriticalPath:
        """The run's critical path across ranks and what lies on it."""
        return critical_path.compute(self.trace, self.wait_states)

    @property
    def oversubscribed(self) -> list[hosts.HostLoad]:
        """Hosts that ran more ranks than they have CPUs (as the tracer recorded them)."""
        o = self.overview
        return hosts.oversubscribed(o.ranks, o.meta.host_cpus)

    def oversubscribed_note(self, f: findings.Finding) -> str:
        """What the finding's message adds on an oversubscribed run ("": not marked). Every
        finding but a redundancy proof's rests on timing, which descheduling distorts; one
        place decides, for the JSON's `oversubscribed` and the web UI's mark."""
        over = self.oversubscribed
        if not over or f.kind == "redundant_collective":
            return ""
        # descheduling's own finding: the turns it costs, not a doubt about them
        return hosts.turns_note(over) if f.kind == "descheduled" else hosts.note(over)

    def path_fields(self, f: findings.Finding) -> dict[str, Any]:
        """Where a finding stands to the critical path (critical_path.finding_fields):
        a hot spot's rank holds its share of it; a finding of the whole run
        (`descheduled`) has no calls to find on it: null (None)."""
        if f.kind == "hot_spot":  # a rank, not a call site, holds the path there
            share = float(f.evidence["critical_path_share"])
            return {"on_critical_path": True, "critical_path_s":
                    share * self.critical_path.length_ns / 1e9, "critical_path_share": share}
        if f.kind == "descheduled":
            return {"on_critical_path": None, "critical_path_s": None,
                    "critical_path_share": None}
        return critical_path.finding_fields(self.critical_path, f.kind, f.function,
                                            f.group or f.callsite)

    def _finding(self, f: findings.Finding) -> dict[str, Any]:
        """A finding's JSON, with where it stands to the critical path (off it, the
        message says that fixing it cannot shorten the run) and, on an oversubscribed
        run, marked where timing drives it (all but a redundancy proof's verdict)."""
        d = {**f.to_dict(), **self.path_fields(f)}
        note = self.oversubscribed_note(f)
        d["oversubscribed"] = bool(note)
        d["message"] += note
        if d["on_critical_path"] is False:
            d["message"] += (" It is not on the critical path: fixing it cannot shorten "
                             "the run.")
        return d

    @result
    def window_index(self) -> window.WindowIndex:
        """Every call, region and message sorted once for window statistics."""
        return window.WindowIndex.of(self.trace, self.wait_states)

    def window(self, t0_ns: int, t1_ns: int,
               ranks: Sequence[int] | None = None) -> window.Window:
        """The statistics of the window [t0_ns, t1_ns) (trace time) and the ranks given
        (None: all): breakdown, profiles, wait states, matrix, message sizes (window.py)."""
        return self.window_index.query(t0_ns, t1_ns, ranks)

    @result
    def message_sizes(self) -> pd.DataFrame:
        return stats.message_sizes(self.trace)

    @result
    def protocol_switches(self) -> list[stats.ProtocolSwitch]:
        return stats.protocol_switches(self.trace)

    @result
    def message_counts(self) -> dict[str, int]:
        """Matched messages, unmatched sends and receives."""
        return stats.message_counts(self.trace.messages, self.trace.unmatched)

    @result
    def switch_evidence(self) -> dict[str, int]:
        """Size buckets per path that could show a protocol switch (the summary's)."""
        return stats.switch_evidence(self.trace)

    @result
    def comm_matrix(self) -> pd.DataFrame:
        return stats.comm_matrix(self.trace)

    @result
    def host_split(self) -> pd.DataFrame:
        return stats.host_split(self.trace)

    @result
    def flushes(self) -> pd.DataFrame:
        """The tracer's buffer flushes per rank."""
        return stats.flushes(self.trace)

    @property
    def overview(self) -> Overview:
        t = self.raw_trace
        return Overview(t.path, t.meta, t.ranks, len(t.calls))

    @property
    def warnings(self) -> list[str]:
        """What the analysis had to drop, clamp or distrust, one line each (the
        contract's `warnings`): the reader's own, then what the analyses saw."""
        meta = self.overview.meta  # both engines' (the Dask engine has no raw trace)
        out = list(meta.warnings)
        out += self._spawned_warnings()
        cut = cut_short_text(meta.truncated_ranks)
        if cut:
            out.append(cut)  # word for word what stderr, the reports and the web UI say
        remaining = self.wait_states.skew.remaining
        if remaining:
            out.append(f"{remaining} clock violation(s) left after the skew correction "
                       "(a receive before its send): wait states near them are uncertain")
        if meta.filtered:
            out.append("functions not recorded (MPISCOPE_FILTER): " + ", ".join(meta.filtered))
        over = hosts.warning(self.oversubscribed, hosts.descheduled_share(self.ranks))
        if over:
            out.append(over)
        un = self.uninterpreted
        if len(un):
            out.append(f"{len(un)} MPI function(s) recorded only as time, not interpreted "
                       "(see `uninterpreted`)")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The contract's JSON (`mpiscope analyze --json`), as Python objects."""
        t = self.overview
        ws = self.wait_states
        loop = self.loop
        per_iteration = self.per_iteration
        return {
            "meta": {"program": t.meta.program, "cmdline": t.meta.cmdline,
                     "mpi_library": t.meta.mpi_library, "start_time": t.meta.start_time,
                     "creator": t.meta.creator, "num_ranks": t.meta.num_ranks,
                     "duration_s": t.meta.duration_ns / 1e9,
                     "truncated_ranks": t.meta.truncated_ranks, "trace": str(t.path),
                     "measured_interval": "per rank: end of MPI_Init .. start of "
                     "MPI_Finalize (first/last event where they are missing)"},
            "ranks": _records(self.ranks),
            # a rank's parts are its main thread's; each thread's MPI time beside them
            "threads": _records(self.threads),
            "functions": _records(self.functions),
            "uninterpreted": _records(self.uninterpreted),
            "callsites": _records(self.callsites),
            "wait_states": {f"{k}_s": v for k, v in ws.totals().items()},
            "wait_states_per_rank": _records(ws.per_rank().reset_index(names="rank")),
            "findings": [self._finding(f) for f in self.findings],
            "minor": [{**self._finding(f), "minor_reason": f.evidence["minor_reason"]}
                      for f in self.minor_findings],
            "noise_floor": self.noise_floor.to_dict(),
            "message_sizes": _records(self.message_sizes),
            "protocol_switches": [p.to_dict() for p in self.protocol_switches],
            "comm_matrix": _records(self.comm_matrix),
            "host_split": _records(self.host_split),
            "time_bins": _records(self.time_bins),
            "buffer_flushes": {"count": int(self.flushes["flushes"].sum()),
                               "seconds": float(self.flushes["seconds"].sum()),
                               "per_rank": _records(self.flushes)},
            "main_loop": ({"callsite": loop.callsite, "function": loop.function,
                           "iterations": loop.iterations} if loop else None),
            "iterations": _records(per_iteration) if per_iteration is not None else [],
            "messages": self.message_counts,
            "clock_skew": {"violations": ws.skew.violations,
                           "offsets_ns": {str(k): v for k, v in ws.skew.offsets_ns.items()},
                           "remaining": ws.skew.remaining},
            "critical_path": self.critical_path.to_dict(),
            "warnings": self.warnings,
            "spawned": [self._spawned_dict(j) for j in self.spawned or ()
                        if j.analysis is not None],
        }

    def read_spawned(self, analyze: Callable[[Path], Analysis]) -> Analysis:
        """Analyse the jobs this run spawned (DIR/spawn-N), each on its own with
        `analyze(path)` (the caller's engine and call-path options), and keep them:
        `spawned`, the JSON's `spawned`, and `warnings`. A job that cannot be read is named
        in `warnings` with the reason."""
        jobs: list[SpawnedJob] = []
        dirs = spawned_dirs.find(Path(self.overview.path))
        parent = spawned_dirs.clock(Path(self.overview.path)) if dirs else None
        for d in dirs:
            try:
                job = SpawnedJob(d.name, d, analyze(d))
            except UserError as err:
                jobs.append(SpawnedJob(d.name, d, None, err.problem))
                continue
            offset, job.start_unknown = spawned_dirs.start_offset_ns(
                parent, spawned_dirs.clock(d))
            job.start_offset_s = offset / 1e9 if offset is not None else None
            jobs.append(job)
        self.spawned = jobs
        return self

    def _spawned_warnings(self) -> list[str]:
        if self.spawned is None:  # not read (a session made without read_spawned)
            dirs = spawned_dirs.find(Path(self.overview.path))
            return [f"{len(dirs)} job(s) this one spawned (MPI_Comm_spawn) were traced as "
                    "runs of their own, not analyzed here: "
                    + ", ".join(f"`mpiscope analyze {p}`" for p in dirs)] if dirs else []
        read = [j for j in self.spawned if j.analysis is not None]
        out = []
        if read:
            jobs = ", ".join(f"{j.name} ({j.analysis.overview.meta.num_ranks} ranks)"
                             for j in read if j.analysis is not None)
            out.append(f"{len(read)} job(s) this one spawned (MPI_Comm_spawn), each with an "
                       f"MPI_COMM_WORLD of its own, are analyzed on their own under `spawned` "
                       f"(ranks named like '{read[0].rank_label(0)}'): {jobs}; every other "
                       "result covers this job's ranks only, and messages between the jobs "
                       "are unmatched on both sides")
        out += [f"{j.name}: spawned job not analyzed: {j.problem}"
                for j in self.spawned if j.analysis is None]
        return out

    def _spawned_dict(self, job: SpawnedJob) -> dict[str, Any]:
        """A spawned job's entry: where it is, when it started in this run, its own
        figures (the contract's keys), its ranks labelled "spawn-1 rank 0"."""
        assert job.analysis is not None
        t = job.analysis.overview
        own = job.analysis.to_dict()
        d: dict[str, Any] = {
            "name": job.name, "path": str(job.path), "num_ranks": t.meta.num_ranks,
            "program": t.meta.program, "cmdline": t.meta.cmdline,
            "duration_s": t.meta.duration_ns / 1e9,
            "start_offset_s": job.start_offset_s,
            "start_offset_unknown": job.start_unknown or None,
            **{k: own[k] for k in SPAWNED_KEYS}}
        for r in d["ranks"]:
            r["label"] = job.rank_label(r["rank"])
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


