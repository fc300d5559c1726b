"""Synthetic `calls` tables (docs/data-model.md schema) for level-of-detail tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

FUNCTIONS = ["MPI_Allreduce", "MPI_Barrier", "MPI_Irecv", "MPI_Isend", "MPI_Recv", "MPI_Send",
             "MPI_Waitall"]


def calls_table(num_ranks: int = 6, per_rank: int = 3000, seed: int = 1) -> pd.DataFrame:
    """Back-to-back states with random gaps, lengths spanning 5 decades (10 ns .. 1 ms),
    and every 7th state holding a nested call of another function (depth 1)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(num_ranks):
        dur = np.exp(rng.uniform(np.log(10), np.log(1_000_000), per_rank)).astype(np.int64)
        gap = rng.integers(0, 50_000, per_rank)
        start = np.cumsum(gap + np.concatenate([[0], dur[:-1]])) + 1000 * r
        fn = rng.integers(0, len(FUNCTIONS), per_rank)
        rows.append(pd.DataFrame({"rank": r, "fcode": fn, "start": start, "end": start + dur,
                                  "depth": 0}))
        host = rows[-1].iloc[::7]
        host = host[(host["end"] - host["start"]) > 4]
        inner = pd.DataFrame({
            "rank": r, "fcode": (host["fcode"] + 1) % len(FUNCTIONS),
            "start": host["start"] + (host["end"] - host["start"]) // 4,
            "end": host["end"] - (host["end"] - host["start"]) // 4, "depth": 1})
        rows.append(inner)
    df = pd.concat(rows, ignore_index=True).sort_values(["rank", "start"], ignore_index=True)
    df["function"] = pd.Categorical.from_codes(df.pop("fcode"), FUNCTIONS)
    df["call"] = np.arange(len(df), dtype=np.int64)
    df["rank"] = df["rank"].astype(np.int32)
    df["depth"] = df["depth"].astype(np.int8)
    return df


def exact_time(calls: pd.DataFrame, t0: int, t1: int, num_ranks: int,
               functions: list[str]) -> np.ndarray:
    """Brute force: per (rank, function) ns inside [t0, t1)."""
    s = np.clip(calls["start"].to_numpy(), t0, t1)
    e = np.clip(calls["end"].to_numpy(), t0, t1)
    out = np.zeros((num_ranks, len(functions)), np.int64)
    codes = pd.Categorical(calls["function"], categories=functions).codes
    np.add.at(out, (calls["rank"].to_numpy(), codes), e - s)
    return out
