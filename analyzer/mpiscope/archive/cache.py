"""Parquet cache of a trace's tables beside the trace (invalidated when the trace changes).

`<trace>/.mpiscope-cache/` (docs/data-model.md) holds `manifest.json` (fingerprint of the
trace files, reader version, layout, meta, dtypes, category lists, rows per rank) and
the tables. Tables whose rows come grouped by rank (calls, regions, p2p, collectives,
flushes; messages by sender) are hive-partitioned datasets, one file per rank:
`calls/rank=3/part-0.parquet` (the rank lives in the directory name, not in the file), so
`pyarrow.dataset.dataset(d / "calls", partitioning="hive")` or
`dask.dataframe.read_parquet(d / "calls")` read them, one rank or all, without mpiscope.
The small tables (ranks, comms, unmatched) are single files, `ranks.parquet` ….
A trace directory we may not write to (read-only, also for root) falls back to
`$XDG_CACHE_HOME/mpiscope/<hash of the path>/`. A cache that cannot be written or read
only costs speed: it is skipped, never an error.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope import output
from mpiscope.archive.schema import SCHEMA
from mpiscope.archive.trace import Trace, TraceMeta

CACHE_NAME = ".mpiscope-cache"
TABLES = tuple(SCHEMA.tables)
# tables whose rows come grouped by this column (rank-major), one file per value on disk
PARTITION_BY = {"calls": "rank", "regions": "rank", "p2p": "rank", "collectives": "rank",
                "flushes": "rank", "messages": "send_rank"}
# bumped when the files' layout changes: a cache of another layout is rebuilt
LAYOUT = "hive-by-rank-1"
PART_FILE = "part-0.parquet"


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
    if (man.get("fingerprint") != fingerprint(trace_dir) or man.get("version") != version
            or man.get("layout") != LAYOUT):
        return None
    return man


def _only_regular_files(d: Path) -> bool:
    """Every file of the cache is a regular one: opening a FIFO put in place of
    `manifest.json` or a parquet file would wait forever for a writer (a device would
    never end). Such a cache is not read; the next store replaces it."""
    try:
        for root, _dirs, files in os.walk(d, onerror=_raise):
            for name in files:
                if not stat.S_ISREG(os.stat(os.path.join(root, name)).st_mode):
                    return False
    except OSError:
        return False
    return True


def _raise(err: OSError) -> None:
    raise err


def load(trace_dir: Path, version: str) -> Trace | None:
    """The cached tables if a current cache exists, else None."""
    for d in candidates(trace_dir):
        ok = d.is_dir() and _only_regular_files(d)
        man = _manifest(d, trace_dir, version) if ok else None
        if man is None:
            continue
        try:
            return _read(d, trace_dir, man)
        except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
            return None
    return None


def partition_path(d: Path, name: str, key: str, value: int) -> Path:
    """The file holding the rows of one rank (`value` of `key`) of a partitioned table."""
    return d / name / f"{key}={value}" / PART_FILE


def _read_file(path: Path) -> pa.Table:
    # ParquetFile.read: pq.read_table's dataset set-up costs more per file; one thread
    # per file, the pool reads the files side by side
    return pq.ParquetFile(path).read(use_threads=False)


def _read_table(d: Path, name: str, man: dict, pool: Executor) -> pd.DataFrame:
    info = man["tables"][name]
    parts = info.get("partitions")
    if parts is None:
        table = pq.ParquetFile(d / f"{name}.parquet").read()
        df = table.to_pandas(split_blocks=True, self_destruct=True)
    else:
        key = PARTITION_BY[name]
        paths = [partition_path(d, name, key, v) for v, _ in parts]
        tables = list(pool.map(_read_file, paths))
        if not tables:
            return _empty(info)
        # split_blocks: one block per column, as the reader builds them (no consolidation)
        df = pa.concat_tables(tables).to_pandas(split_blocks=True, self_destruct=True)
        values, rows = np.array(parts, dtype=np.int64).reshape(-1, 2).T
        df[key] = np.repeat(values.astype(info["dtypes"][key]), rows)
    return _restore(df, info)


def _empty(info: dict) -> pd.DataFrame:
    return _restore(pd.DataFrame({c: pd.Series(dtype=object if t == "category" else t)
                                  for c, t in info["dtypes"].items()}), info)


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
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        tables = {name: _read_table(d, name, man, pool) for name in TABLES}
    for name in ("comms", "rma_sync"):  # lists of world ranks come back as arrays
        tables[name]["members"] = tables[name]["members"].map(lambda m: [int(x) for x in m])
    meta = TraceMeta(**man["meta"])
    return Trace(path=trace_dir, meta=meta, **tables)


def _runs(keys: np.ndarray) -> list[tuple[int, int, int]] | None:
    """(value, start, stop) of each rank's rows, or None if the rows are not rank-major
    (then the table is written as one file, to keep its row order)."""
    if len(keys) == 0:
        return []
    if not bool(np.all(keys[1:] >= keys[:-1])):
        return None
    starts = np.r_[0, np.flatnonzero(keys[1:] != keys[:-1]) + 1]
    stops = np.r_[starts[1:], len(keys)]
    return [(int(keys[a]), int(a), int(b)) for a, b in zip(starts, stops, strict=True)]


def _write(trace: Trace, tmp: Path, version: str) -> None:
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        tables = {name: _write_table(getattr(trace, name), tmp, name, pool)
                  for name in TABLES}
    (tmp / "manifest.json").write_text(json.dumps({
        "fingerprint": fingerprint(trace.path), "version": version, "layout": LAYOUT,
        "meta": dataclasses.asdict(trace.meta), "tables": tables}))


def _write_table(df: pd.DataFrame, tmp: Path, name: str, pool: Executor) -> dict:
    """Write one table; its manifest entry (dtypes, categories, rows per rank)."""
    cats = [c for c, t in df.dtypes.items() if isinstance(t, pd.CategoricalDtype)]
    info: dict = {"dtypes": {c: str(t) for c, t in df.dtypes.items()},
                  "categories": {c: [str(x) for x in df[c].cat.categories] for c in cats},
                  "partitions": None}
    table = pa.Table.from_pandas(df, preserve_index=False)
    key = PARTITION_BY.get(name)
    runs = _runs(df[key].to_numpy()) if key else None
    if runs is not None:
        table = table.drop_columns([key])  # hive: the key is the directory's name
    # dictionary encoding where it pays (categories); integers (times, ids, mostly
    # rising within a rank) delta-encoded: a third of lz4's size, and per-rank files
    # read faster than with lz4 alone (decompression set-up per page adds up)
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    opts = {"compression": "lz4", "use_dictionary": cats or False,
            "column_encoding": dict.fromkeys(ints, "DELTA_BINARY_PACKED"),
            "write_statistics": False}
    if runs is None:
        pq.write_table(table, tmp / f"{name}.parquet", **opts)
        return info

    def part(run: tuple[int, int, int]) -> None:
        value, start, stop = run
        path = partition_path(tmp, name, key, value)
        path.parent.mkdir(parents=True)
        pq.write_table(table.slice(start, stop - start), path, **opts)
    list(pool.map(part, runs))
    info["partitions"] = [[value, stop - start] for value, start, stop in runs]
    return info


def store(trace: Trace, version: str) -> Path | None:
    """Write the cache (beside the trace if we may, else in the user's cache dir): into a
    temporary directory, manifest last, renamed into place when complete, so a failed
    write (full disk, `ulimit -f`, Ctrl-C) leaves no half cache."""
    local, fallback = candidates(trace.path)
    targets = [local, fallback] if _writable(trace.path) else [fallback]
    for d in targets:
        try:
            with output.publish_dir(d) as tmp:
                _write(trace, tmp, version)
            return d
        except (OSError, ValueError, pa.ArrowException):
            pass  # a cache we cannot write is only slower
    return None


def load_or_build(trace_dir: Path, version: str, build: Callable[[], Trace], *,
                  use_cache: bool = True,
                  progress: Callable[[str], None] | None = None) -> Trace:
    """The trace from the cache in `trace_dir` when it is current under `version`, else
    `build()`, stored for next time."""
    if use_cache:
        cached = load(trace_dir, version)
        if cached is not None:
            return cached
    trace = build()
    if use_cache:
        if progress:
            progress("writing cache")
        store(trace, version)
    return trace
