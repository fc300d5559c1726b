"""`--engine pandas|dask|auto`: which engine runs an analysis.

`auto` (the command line's default) plans the memory before anything is read, from the
OTF2 definitions' per-location event counts (`number_of_events`, written by the tracer at
the end; each bounded by its event file's size, one byte per event at least, so a damaged
or crafted count cannot inflate the plan):

- **pandas** when its base plus `events x PANDAS_BYTES_PER_EVENT` fits in the memory
  available now
  (MemAvailable, or the cgroup's limit if lower): fastest, no cluster to start;
- else **Dask** when, on a local cluster, one worker holds its largest task — the
  largest rank's events x DASK_WORKER_BYTES_PER_EVENT (a rank's slice is one task) — within
  its `--memory-limit`, the workers' limits fit in what is available, and the client's
  share (its base, the replay's bounded events and a few bytes per event) fits beside
  them; with `--scheduler`
  the cluster's memory is the cluster's business and only the client is planned;
- else, when the trace has polling calls (recorded one by one: `MPISCOPE_POLL=all`,
  another tool), **pandas** on a budget: the reader merges their idle visits and stops in
  one line if what it keeps outgrows the memory (archive/memory.py);
- else **neither**: the command stops in one line with the figures and what to do,
  before it allocates (never grows until the kernel's OOM killer ends it, or others).

The bytes per event are peak resident memory measured on synthetic traces (see the
constants); the plan errs towards caution.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mpiscope.archive.memory import PANDAS_BASE_BYTES, PANDAS_BYTES_PER_EVENT, available_memory, gib

ENGINES = ("pandas", "dask", "auto")
# Peak resident memory of `mpiscope analyze`, measured with mpiscope-synth traces of 2
# ranks (docs/dask.md, "Planning memory"); pandas' in archive/memory.py:
DASK_WORKER_BASE_BYTES = 200 * 2**20  # 180 MiB: a worker with a tiny trace's rank
DASK_WORKER_BYTES_PER_EVENT = 300  # over its largest rank: 237 B at 2 x 10^6, 273 at 5 x 10^6
DASK_CLIENT_BASE_BYTES = 200 * 2**20  # 174 MiB with a tiny trace
# the client gathers the replay of at most replaywindow.DEFAULT_BUDGET_EVENTS events
# (1.98 GB over the base at 10^7 events, 0.95 GB at 4 x 10^6) and a few bytes per event of
# per-rank results besides (0.6 GB at 3 x 10^8: docs/dask.md)
DASK_CLIENT_REPLAY_BYTES_PER_EVENT = 500
DASK_CLIENT_BYTES_PER_EVENT = 3


@dataclass(frozen=True)
class Choice:
    engine: str  # "pandas", "dask", or "none" (neither fits: refused)
    events: int = 0
    largest_rank: int = 0  # events of the rank with the most
    needed_bytes: int = 0  # pandas' peak
    worker_bytes: int = 0  # a Dask worker's peak (its largest task)
    client_bytes: int = 0  # the Dask client's peak
    available_bytes: int = 0
    worker_limit: int = 0  # --memory-limit (0: a running cluster's own)
    workers: int = 0
    merging: bool = False  # pandas on the hope that idle polling calls merge (memory.py)

    def reason(self) -> str:
        pandas = (f"{self.events:,} events need ~{gib(self.needed_bytes)} for pandas, "
                  f"{gib(self.available_bytes)} available")
        if self.merging:
            return (f"{pandas} if none merged; idle polling calls merge while reading, "
                    "which stops if the rest outgrows the memory: pandas")
        if self.engine == "pandas":
            return f"{pandas}: pandas"
        dask = (f"Dask: the largest rank's {self.largest_rank:,} events need "
                f"~{gib(self.worker_bytes)} per worker")
        if self.worker_limit:
            dask += (f" (--memory-limit {gib(self.worker_limit)}, {self.workers} workers), "
                     f"the client ~{gib(self.client_bytes)}")
        else:
            dask += f" (a running cluster), the client ~{gib(self.client_bytes)}"
        return f"{pandas}; {dask}: {self.engine}"

    def refusal(self, trace: Path | str) -> str:
        return (f"{trace}: too large for this machine's memory ({self.reason()}); "
                "record fewer events (MPISCOPE_FILTER, a shorter run), give the workers more "
                "memory (--memory-limit, fewer --workers), or run on a Dask cluster with "
                "more memory (--scheduler)")


def worker_bytes(largest_rank: int) -> int:
    """A Dask worker's planned peak: its largest task holds one rank's slice."""
    return DASK_WORKER_BASE_BYTES + largest_rank * DASK_WORKER_BYTES_PER_EVENT


def worker_refusal(trace: Path | str, largest_rank: int, limit: int,
                   polling: bool = False) -> str | None:
    """One line when a worker of `limit` bytes cannot hold the largest rank's task (Dask
    would restart it at 95% of its limit until the task fails with KilledWorker), else
    None. A rank's events are one task's: more workers do not help, more memory does."""
    need = worker_bytes(largest_rank)
    if limit <= 0 or need <= limit or polling:
        return None  # polling calls recorded one by one: the task stops if they don't merge
    return (f"{trace}: the largest rank's {largest_rank:,} events need ~{gib(need)} per "
            f"Dask worker, the workers have {gib(limit)}; give each worker more memory "
            "(--memory-limit, fewer --workers to fit the machine), or record fewer events "
            "per rank (MPISCOPE_FILTER, a shorter run)")


@dataclass(frozen=True)
class Counts:
    """What the definitions claim, each location's count bounded by its event file."""
    events: int = 0
    largest_rank: int = 0  # events of the rank with the most
    polling: bool = False  # its regions include polling calls, whose idle visits merge


def _bounded_counts(trace_dir: Path) -> Counts:
    from mpiscope.archive import decode, reader

    anchor = reader.anchor_of(trace_dir)
    d = decode.Definitions(anchor)
    evt_dir = anchor.parent / anchor.stem

    def bounded(loc: int) -> int:
        claimed = d.location_events.get(loc, 0)
        try:
            size = (evt_dir / f"{loc}.evt").stat().st_size
        except OSError:
            return 0  # no events written for it: nothing to load
        return min(claimed, size)

    per_rank = [sum(bounded(loc) for loc in locs) for locs in d.rank_locations]
    return Counts(sum(per_rank), max(per_rank, default=0),
                  any(f in decode.POLLING for f in d.mpi_functions))


def counts(trace_dir: Path | str) -> Counts:
    """The events the definitions claim, without reading any event (bounded by the
    files). Never the cache: the plan comes before the cache is validated (a damaged or
    planted cache, a FIFO in it, must not be read to plan how to read it)."""
    from mpiscope.archive import salvaged

    if salvaged.is_salvaged(Path(trace_dir)):
        return Counts()  # a job that died: its per-rank archives are read by the pandas path
    return _bounded_counts(Path(trace_dir))


def event_counts(trace_dir: Path | str) -> tuple[int, int]:
    """(events, events of the largest rank): see `counts`."""
    c = counts(trace_dir)
    return c.events, c.largest_rank


def event_count(trace_dir: Path | str) -> int:
    return event_counts(trace_dir)[0]


def engine_for(trace_dir: Path | str, engine: str, *, memory_limit: str = "2GB",
               workers: int = 2, scheduler: str | None = None) -> Choice:
    """The engine to use for `--engine engine` on this trace ("none": auto found that
    neither fits; `Choice.refusal` says why)."""
    if engine not in ENGINES:
        from mpiscope.errors import UserError

        raise UserError("--engine", f"{engine!r}: one of {', '.join(ENGINES)}")
    from mpiscope.errors import UserError

    if engine == "dask" and not scheduler:
        # the local cluster's workers are known: refuse before starting it (a running
        # cluster's are checked by dask_engine.analyze once connected)
        try:
            claimed = counts(trace_dir)
        except UserError:
            return Choice(engine)
        limit = _parse_bytes(memory_limit, available_memory() // max(workers, 1))
        line = worker_refusal(trace_dir, claimed.largest_rank, limit, claimed.polling)
        if line:
            raise UserError(None, line)
    if engine != "auto":
        return Choice(engine)
    from mpiscope.analysis.replaywindow import DEFAULT_BUDGET_EVENTS

    try:
        claimed = counts(trace_dir)
    except UserError:
        # no archive to plan from yet (a job killed outright: its ranks are recovered from
        # their crash-safe logs by the reading path, which also says what is wrong with
        # a directory that is no trace at all)
        return Choice("pandas")
    events, largest = claimed.events, claimed.largest_rank
    need = PANDAS_BASE_BYTES + events * PANDAS_BYTES_PER_EVENT
    avail = available_memory()
    worker = worker_bytes(largest)
    client = (DASK_CLIENT_BASE_BYTES + events * DASK_CLIENT_BYTES_PER_EVENT
              + min(events, DEFAULT_BUDGET_EVENTS) * DASK_CLIENT_REPLAY_BYTES_PER_EVENT)
    base = Choice("pandas", events, largest, need, worker, client, avail)
    if need <= avail:
        return base
    if scheduler:  # a running cluster: only the client is this machine's
        fits = client <= avail
        return Choice("dask" if fits else "none", events, largest, need, worker, client, avail)
    limit = _parse_bytes(memory_limit, avail // max(workers, 1))
    fits = worker <= limit and workers * worker + client <= avail
    if not fits and claimed.polling:
        # every polling call recorded (MPISCOPE_POLL=all, another tool): most may merge
        # while reading, which stops in one line if what it keeps outgrows the memory
        return Choice("pandas", events, largest, need, worker, client, avail, limit, workers,
                      merging=True)
    return Choice("dask" if fits else "none", events, largest, need, worker, client, avail,
                  limit, workers)


def _parse_bytes(text: str, auto: int) -> int:
    if text == "auto":
        return auto
    from dask.utils import parse_bytes

    return int(parse_bytes(text))

