"""The Trace: an OTF2 archive as pandas tables (see docs/data-model.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


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
    # one row per thread (location) of a rank; None: one per rank, made from `ranks`
    threads: pd.DataFrame | None = None

    def __post_init__(self) -> None:
        if self.threads is None:
            r = self.ranks
            self.threads = pd.DataFrame({
                "rank": r["rank"].to_numpy(np.int32), "thread": np.zeros(len(r), np.int16),
                "location": r["location"].to_numpy(np.int64),
                "name": [f"rank {int(x)}" for x in r["rank"]],
                "first_ns": r["first_ns"].to_numpy(np.int64),
                "last_ns": r["last_ns"].to_numpy(np.int64),
                "events": r["events"].to_numpy(np.int64)})

    @property
    def num_ranks(self) -> int:
        return self.meta.num_ranks

    def host_of(self) -> dict[int, str]:
        return dict(zip(self.ranks["rank"], self.ranks["host"], strict=True))
