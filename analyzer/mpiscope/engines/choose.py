"""`--engine pandas|dask|auto`: which engine runs an analysis.

The rule of `auto`: Dask when the trace would not fit in this machine's memory as pandas
tables under analysis, i.e. when

    events x PANDAS_BYTES_PER_EVENT > available memory (MemAvailable)

`events` is the sum of the event counts the OTF2 definitions give per location
(`number_of_events`, written by the tracer at the end: no event is read to know it), or
the event count of the cache's manifest when there is one. PANDAS_BYTES_PER_EVENT is the
peak resident memory per event of `mpiscope analyze --engine pandas`, measured by
bench/dask/run on synthetic traces (the tables alone take 72 bytes per event; with
reading, matching and the analyses' temporary columns 174 B measured at 10^7 events).
Small traces stay on pandas, where they are fastest (no cluster to start).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ENGINES = ("pandas", "dask", "auto")
PANDAS_BYTES_PER_EVENT = 180  # bench/dask/run: 174 B/event peak RSS of pandas at 10^7 events


@dataclass(frozen=True)
class Choice:
    engine: str  # "pandas" or "dask"
    events: int
    needed_bytes: int
    available_bytes: int

    def reason(self) -> str:
        return (f"{self.events:,} events x {PANDAS_BYTES_PER_EVENT} B = "
                f"{self.needed_bytes / 2**30:.1f} GiB for pandas, "
                f"{self.available_bytes / 2**30:.1f} GiB available: {self.engine}")


def event_count(trace_dir: Path | str) -> int:
    """Events of the trace, without reading any: the cache's manifest, else the
    definitions' per-location counts."""
    from mpiscope.archive import decode, reader, salvaged
    from mpiscope.engines.daskcache import open_cache

    c = open_cache(trace_dir) if not salvaged.is_salvaged(Path(trace_dir)) else None
    if c is not None:
        return int(c.small("ranks")["events"].sum())
    if salvaged.is_salvaged(Path(trace_dir)):
        return 0  # a job that died: its per-rank archives are read by the pandas path
    return int(decode.Definitions(reader.anchor_of(Path(trace_dir))).expected_events)


def available_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def engine_for(trace_dir: Path | str, engine: str) -> Choice:
    """The engine to use for `--engine engine` on this trace."""
    if engine not in ENGINES:
        from mpiscope.errors import UserError

        raise UserError("--engine", f"{engine!r}: one of {', '.join(ENGINES)}")
    if engine != "auto":
        return Choice(engine, 0, 0, 0)
    events = event_count(trace_dir)
    need, avail = events * PANDAS_BYTES_PER_EVENT, available_memory()
    return Choice("dask" if need > avail else "pandas", events, need, avail)
