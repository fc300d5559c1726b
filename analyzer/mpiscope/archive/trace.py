"""The Trace: an OTF2 archive as pandas tables (see docs/data-model.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

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

    @property
    def num_ranks(self) -> int:
        return self.meta.num_ranks

    def host_of(self) -> dict[int, str]:
        return dict(zip(self.ranks["rank"], self.ranks["host"], strict=True))
