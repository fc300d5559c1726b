"""The Trace: an OTF2 archive as pandas tables (see docs/data-model.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.archive.schema import SCHEMA


@dataclass
class TraceMeta:
    program: str = ""
    cmdline: str = ""
    mpi_library: str = ""
    start_time: str = ""
    creator: str = ""
    num_ranks: int = 0
    duration_ns: int = 0
    timer_resolution: int = 1_000_000_000
    clock_corrected: bool = False
    truncated_ranks: list[int] = field(default_factory=list)
    # MPI functions the tracer was told not to record (MPISCOPE_FILTER; "*": too many to
    # list): calls between two recorded ones may be missing
    filtered: list[str] = field(default_factory=list)
    # what reading had to drop, clamp or distrust, one line each (the JSON's `warnings`)
    warnings: list[str] = field(default_factory=list)
    # CPUs of each distinct host, in the order of its first rank (MPISCOPE::HOST_CPUS);
    # empty where the tracer did not record them
    host_cpus: list[int] = field(default_factory=list)


def empty_table(name: str) -> pd.DataFrame:
    """A table of tables.spec without rows, with its declared dtypes."""
    cols = {}
    for c in SCHEMA.tables[name].columns:
        if c.dtype == "category":
            cats = SCHEMA.enums[c.enum].names if c.enum else []
            cols[c.name] = pd.Categorical([], categories=pd.Index(cats, dtype=object))
        else:
            cols[c.name] = pd.Series(dtype=object if c.dtype == "str" else c.dtype)
    return pd.DataFrame(cols)


def _empty(name: str):
    return field(default_factory=lambda: empty_table(name))


@dataclass
class Trace:
    path: Path
    meta: TraceMeta
    ranks: pd.DataFrame
    comms: pd.DataFrame
    calls: pd.DataFrame
    regions: pd.DataFrame
    p2p: pd.DataFrame
    messages: pd.DataFrame
    collectives: pd.DataFrame
    flushes: pd.DataFrame
    unmatched: pd.DataFrame
    # RMA and MPI-IO (empty for traces without them, and for salvaged jobs)
    windows: pd.DataFrame = _empty("windows")
    files: pd.DataFrame = _empty("files")
    rma: pd.DataFrame = _empty("rma")
    rma_sync: pd.DataFrame = _empty("rma_sync")
    io: pd.DataFrame = _empty("io")
    # one row per thread (location) of a rank; None: one per rank, made from `ranks`
    threads: pd.DataFrame | None = None
    # frames of each call path (`calls.callpath`); empty for traces without calling contexts
    callpaths: pd.DataFrame = _empty("callpaths")

    def __post_init__(self) -> None:
        if self.threads is None:  # one thread per rank: the rank's own row
            r = self.ranks
            n = len(r)

            def col(name: str, default: np.ndarray) -> np.ndarray:
                return r[name].to_numpy(np.int64) if name in r.columns else default

            ranks = r["rank"].to_numpy(np.int32) if "rank" in r.columns else np.arange(
                n, dtype=np.int32)
            self.threads = pd.DataFrame({
                "rank": ranks, "thread": np.zeros(n, np.int16),
                "location": col("location", ranks.astype(np.int64)),
                "name": [f"rank {int(x)}" for x in ranks],
                "first_ns": col("first_ns", np.zeros(n, np.int64)),
                "last_ns": col("last_ns", np.zeros(n, np.int64)),
                "events": col("events", np.zeros(n, np.int64))})

    @property
    def num_ranks(self) -> int:
        return self.meta.num_ranks

    def host_of(self) -> dict[int, str]:
        return dict(zip(self.ranks["rank"], self.ranks["host"], strict=True))
