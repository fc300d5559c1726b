"""Parquet cache of a trace's tables beside the trace (invalidated when the trace changes).

`<trace>/.mpiscope-cache/` (docs/data-model.md) holds one Parquet file per table plus
`manifest.json` (fingerprint of the trace files, reader version, meta, dtypes, category
lists). Tables whose rows come grouped by rank (calls, regions, p2p, collectives,
flushes; messages by sender) are partitioned by rank inside the file: each row group
holds whole ranks (one rank, or consecutive ranks up to ~1M rows) and carries min/max
statistics of the rank column, so `pyarrow`/Dask read one rank's rows without touching
the rest (`filters=[("rank", "==", r)]`, `dd.read_parquet(..., split_row_groups=True)`).
One file per table, not one per rank: with hundreds of small files the per-file cost made
re-opening slower than decoding the OTF2 trace again.
A trace directory we may not write to (read-only, also for root) falls back to
`$XDG_CACHE_HOME/mpiscope/<hash of the path>/`. A cache that cannot be written or read
only costs speed: it is skipped, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope.trace import Trace, TraceMeta

CACHE_NAME = ".mpiscope-cache"
TABLES = ("calls", "regions", "p2p", "messages", "collectives", "flushes", "unmatched",
          "ranks", "comms")
ROW_GROUP_ROWS = 1 << 20  # a row group holds whole ranks, at least this many rows if it can
# tables whose rows come grouped by this column (rank-major), partitioned on disk by it
PARTITION_BY = {"calls": "rank", "regions": "rank", "p2p": "rank", "collectives": "rank",
                "flushes": "rank", "messages": "send_rank"}


def fingerprint(trace_dir: Path) -> str:
    """Sizes and mtimes of the archive's files (anchor, definitions, event/local files of
    every archive in the directory, usually just `traces`), not of the cache."""
    parts = []
    files: list[Path] = []
    for anchor in sorted(trace_dir.glob("*.otf2")):
        files += [anchor, anchor.with_suffix(".def")]
        sub = anchor.with_suffix("")
        if sub.is_dir():
            files += sorted(sub.iterdir())
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        parts.append(f"{f.relative_to(trace_dir)}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _writable(d: Path) -> bool:
    """os.access says yes to root everywhere; a directory without write bits is read-only
    by intent (e.g. shared test data), so we respect the mode too."""
    try:
        mode = d.stat().st_mode
    except OSError:
        return False
    return os.access(d, os.W_OK) and bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def fallback_dir(trace_dir: Path) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mpiscope"
    key = hashlib.sha256(str(trace_dir.resolve()).encode()).hexdigest()[:16]
    return base / key


def candidates(trace_dir: Path) -> list[Path]:
    """Where a cache for this trace may be, in order of preference."""
    return [trace_dir / CACHE_NAME, fallback_dir(trace_dir)]


def _manifest(d: Path, trace_dir: Path, version: str) -> dict | None:
    try:
        man = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if man.get("fingerprint") != fingerprint(trace_dir) or man.get("version") != version:
        return None
    return man


def load(trace_dir: Path, version: str) -> Trace | None:
    """The cached tables if a current cache exists, else None."""
    for d in candidates(trace_dir):
        man = _manifest(d, trace_dir, version) if d.is_dir() else None
        if man is None:
            continue
        try:
            return _read(d, trace_dir, man)
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
            return None
    return None


def _read_table(d: Path, name: str, man: dict) -> pd.DataFrame:
    # split_blocks: one block per column, as the reader builds them (no consolidation copy)
    table = pq.read_table(d / f"{name}.parquet")
    return _restore(table.to_pandas(split_blocks=True, self_destruct=True), man["tables"][name])


def _restore(df: pd.DataFrame, info: dict) -> pd.DataFrame:
    out = {}
    for col, dtype in info["dtypes"].items():
        s = df[col]
        if dtype == "category":
            cats = info["categories"][col]
            s = s.astype("category") if not isinstance(s.dtype, pd.CategoricalDtype) else s
            out[col] = s.cat.set_categories(pd.Index(cats, dtype=object))
        elif dtype == "object":
            out[col] = s
        else:
            out[col] = s.to_numpy().astype(dtype, copy=False)
    return pd.DataFrame(out, copy=False)


def _read(d: Path, trace_dir: Path, man: dict) -> Trace:
    tables = {name: _read_table(d, name, man) for name in TABLES}
    tables["comms"]["members"] = tables["comms"]["members"].map(lambda m: [int(x) for x in m])
    meta = TraceMeta(**man["meta"])
    return Trace(path=trace_dir, meta=meta, **tables)


def _row_groups(keys: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of row groups holding whole ranks, at least ROW_GROUP_ROWS rows each."""
    if len(keys) == 0 or not bool(np.all(keys[1:] >= keys[:-1])):
        return [(0, len(keys))]
    bounds = np.flatnonzero(keys[1:] != keys[:-1]) + 1  # where a new rank starts
    groups, start = [], 0
    for b in bounds:
        if b - start >= ROW_GROUP_ROWS:
            groups.append((start, int(b)))
            start = int(b)
    groups.append((start, len(keys)))
    return groups


def _write(trace: Trace, tmp: Path, version: str) -> None:
    tmp.mkdir(parents=True)
    tables = {}
    for name in TABLES:
        df: pd.DataFrame = getattr(trace, name)
        cats = [c for c, t in df.dtypes.items() if isinstance(t, pd.CategoricalDtype)]
        tables[name] = {"dtypes": {c: str(t) for c, t in df.dtypes.items()},
                        "categories": {c: [str(x) for x in df[c].cat.categories] for c in cats}}
        table = pa.Table.from_pandas(df, preserve_index=False)
        key = PARTITION_BY.get(name)
        groups = _row_groups(df[key].to_numpy()) if key else [(0, len(df))]
        # dictionary encoding only where it pays (times and ids are mostly unique)
        # and statistics only on the rank column, for reading one rank's row groups
        with pq.ParquetWriter(tmp / f"{name}.parquet", table.schema, compression="lz4",
                              use_dictionary=cats or False,
                              write_statistics=[key] if key else False) as w:
            for start, stop in groups:
                w.write_table(table.slice(start, stop - start), row_group_size=max(stop - start, 1))
    (tmp / "manifest.json").write_text(json.dumps({
        "fingerprint": fingerprint(trace.path), "version": version,
        "meta": dataclasses.asdict(trace.meta), "tables": tables}))


def store(trace: Trace, version: str) -> Path | None:
    """Write the cache (beside the trace if we may, else in the user's cache dir)."""
    local, fallback = candidates(trace.path)
    targets = [local, fallback] if _writable(trace.path) else [fallback]
    for d in targets:
        tmp = d.with_name(d.name + f".tmp{os.getpid()}")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            _write(trace, tmp, version)
            shutil.rmtree(d, ignore_errors=True)
            tmp.rename(d)
            return d
        except (OSError, ValueError, pa.ArrowException):
            shutil.rmtree(tmp, ignore_errors=True)  # a cache we cannot write is only slower
    return None
