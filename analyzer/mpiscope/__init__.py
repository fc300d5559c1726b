"""mpiscope: MPI tracing (PMPI -> OTF2) and performance analysis.

In a notebook::

    import mpiscope
    trace = mpiscope.load("mpiscope-20250101-120000")  # pandas tables: trace.calls, ...
    analysis = mpiscope.analyze(trace)  # analysis.ranks, .wait_states, .findings, ...
    analysis.to_dict()  # what `mpiscope analyze DIR --json` writes

The tables are described in docs/data-model.md. The imports are inside the functions, so
`import mpiscope` (and `mpiscope lib`) stays instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mpiscope.analysis.session import Analysis
    from mpiscope.archive.trace import Trace

__version__ = "0.1.0"


def load(path: Path | str, *, use_cache: bool = True) -> Trace:
    """The trace in directory `path` (or its `traces.otf2`) as pandas tables, read as
    `mpiscope analyze` reads it: ranks killed outright are first recovered from their
    crash-safe logs, and what that did, or that ranks were cut short, is said on stderr.
    `use_cache=False` ignores (and does not write) the Parquet cache."""
    import sys

    from mpiscope.archive import reader, recover
    from mpiscope.render.cutshort import cut_short_warning

    for line in recover.before_reading(Path(path)):
        print(line, file=sys.stderr)
    trace = reader.load(path, use_cache=use_cache)
    warning = cut_short_warning(path, trace.meta.truncated_ranks)
    if warning:
        print(warning, file=sys.stderr)
    return trace


def analyze(trace: Trace | Path | str, *, skip_frames: str | Sequence[str] = (),
            group_by: str = "frame", engine: str = "pandas", scheduler: str | None = None,
            workers: int = 2, memory_limit: str = "2GB", client: object = None) -> Analysis:
    """The analysis session of `trace`: each result (wait states, per-rank breakdown,
    main loop, function and call-site statistics, findings, ...) is computed on first
    use and kept; `.to_dict()` / `.to_json()` give the JSON of `mpiscope analyze --json`.
    `skip_frames`: globs (function or frame names) of wrapper layers call sites should
    not name, e.g. `"message_passing::*,LAMMPS_NS::Comm*"`; `group_by="path"` groups
    per-call-site results by the whole call path instead of the chosen frame.

    `engine="dask"` (or `"auto"`: Dask when the trace would not fit in memory, see
    mpiscope.engines.choose) runs it on a Dask cluster: `client`, else the `scheduler` at
    that address, else a local one of `workers` x `memory_limit`; `trace` may then be a
    directory (nothing is read into this process to start with). Same results either way.

    The jobs the run spawned (MPI_Comm_spawn: DIR/spawn-N, their own MPI_COMM_WORLDs) are
    analysed too, each on its own: `.spawned`, and `spawned` in the JSON."""
    from mpiscope.analysis.session import Analysis
    from mpiscope.archive.trace import Trace

    def one(trace: Trace | Path) -> Analysis:
        path = trace.path if isinstance(trace, Trace) else Path(trace)
        if engine != "pandas":
            from mpiscope.engines import choose, cluster, dask_engine

            choice = choose.engine_for(path, engine, memory_limit=memory_limit,
                                       workers=workers, scheduler=scheduler)
            if choice.engine == "none":
                from mpiscope.errors import UserError

                raise UserError(None, choice.refusal(path))
            if choice.engine == "dask":
                spec = cluster.ClusterSpec(scheduler, workers, memory_limit)
                return dask_engine.analyze(path, spec, client=client,
                                           skip_frames=skip_frames, group_by=group_by)
        return Analysis(trace if isinstance(trace, Trace) else load(path),
                        skip_frames=skip_frames, group_by=group_by)

    # the jobs the run spawned (DIR/spawn-N), each analysed on its own, as `analyze` does
    return one(trace if isinstance(trace, Trace) else Path(trace)).read_spawned(one)
