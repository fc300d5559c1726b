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

A cache is never trusted: it may come with the trace (tar and `cp -a` keep sizes and
mtimes) or be edited. Its manifest names the trace's files with their SHA-256 (`sources`):
a file whose size, mtime, ctime and inode are those recorded is taken as the one hashed
(a copy has a new ctime and inode); any other is hashed again, and a cache of other
content is not used. Then the manifest (schema, dtypes, categories, rows per rank within
the ranks and what the trace's bytes can hold) and the tables read (row counts, ids,
ranks, times and byte counts within range) are checked before use; a cache that fails is
rebuilt, with one notice line on stderr.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope import output
from mpiscope.archive.schema import SCHEMA
from mpiscope.archive.trace import Trace, TraceMeta, empty_table
from mpiscope.errors import one_line

CACHE_NAME = ".mpiscope-cache"
TABLES = tuple(SCHEMA.tables)
# tables whose rows come grouped by this column (rank-major), one file per value on disk
PARTITION_BY = {"calls": "rank", "regions": "rank", "p2p": "rank", "collectives": "rank",
                "flushes": "rank", "messages": "send_rank"}
# bumped when the files' layout changes: a cache of another layout is rebuilt
LAYOUT = "hive-by-rank-2"  # 2: the sources' content hashes
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


class Damaged(Exception):
    """A cache that contradicts itself or its trace (the text says how)."""


def archive_files(trace_dir: Path, anchors: list[Path] | None = None) -> list[Path]:
    """The files of the archives a cache is made from: each anchor, its definitions, its
    event and local definition files (`anchors`: those in `trace_dir`, by default)."""
    files: list[Path] = []
    for anchor in sorted(anchors if anchors is not None else trace_dir.glob("*.otf2")):
        files += [anchor, anchor.with_suffix(".def")]
        sub = anchor.with_suffix("")
        if sub.is_dir():
            files += sorted(f for f in sub.iterdir() if f.is_file())
    return [f for f in files if f.is_file()]


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _hashes(paths: list[Path]) -> list[str]:
    # hashlib releases the GIL on large buffers: files side by side
    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        return list(pool.map(_sha256, paths))


def _records(files: list[Path], base: Path) -> list[dict]:
    """Each file's path (relative to `base`), stat key (size, mtime, ctime, inode) and
    SHA-256."""
    keys = [_stat_key(f.stat()) for f in files]
    return [{"path": str(f.relative_to(base)), "stat": k, "sha256": h}
            for f, k, h in zip(files, keys, _hashes(files), strict=True)]


def sources(trace_dir: Path, anchors: list[Path] | None = None) -> list[dict]:
    """The manifest's `sources`: the trace's archive files, as _records."""
    return _records(archive_files(trace_dir, anchors), trace_dir)


# what the Dask engine derives from a cache and keeps in it (engines/ranktasks.py): made
# after the manifest, so not among its files; dropped with a copied cache (it cannot be
# checked: the engine makes it again)
DERIVED = "derived"


def _cache_files(d: Path) -> list[Path]:
    return sorted(f for f in d.rglob("*") if f.is_file() and f.name != "manifest.json"
                  and f.relative_to(d).parts[0] != DERIVED)


def _current(recorded: object, files: list[Path], base: Path
             ) -> tuple[bool, list[dict] | None]:
    """(whether `files` are those recorded, by content: a file whose stat key is the one
    recorded is taken as hashed, another is hashed again; the record refreshed with the
    stat keys when some had to be hashed again, else None)."""
    try:
        return _compare(recorded, files, base)
    except Exception:  # noqa: BLE001 - a record of any other shape is not these files
        return False, None


def _compare(recorded: object, files: list[Path], base: Path
             ) -> tuple[bool, list[dict] | None]:
    if not isinstance(recorded, list) or len(recorded) != len(files) or not all(
            isinstance(r, dict) and isinstance(r.get("path"), str) for r in recorded):
        return False, None
    try:
        rec = {r["path"]: r for r in recorded}
        now = {str(f.relative_to(base)): (f, _stat_key(f.stat())) for f in files}
    except (OSError, TypeError, KeyError):
        return False, None
    if set(rec) != set(now):
        return False, None
    again = [p for p, (_f, key) in now.items() if rec[p].get("stat") != key]
    if any(not isinstance(rec[p].get("stat"), list) or rec[p]["stat"][:1] != now[p][1][:1]
           for p in again):
        return False, None  # another size: another content, no need to hash
    if not again:
        return True, None
    try:
        hashes = _hashes([now[p][0] for p in again])
    except OSError:
        return False, None
    if any(rec[p].get("sha256") != h for p, h in zip(again, hashes, strict=True)):
        return False, None
    return True, [{**r, "stat": now[r["path"]][1]} for r in recorded]


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


def _manifest(d: Path, trace_dir: Path, version: str, anchors: list[Path] | None = None,
              problems: list[str] | None = None) -> dict | None:
    """The manifest of the cache in `d` if it is one of this trace (its sources' content)
    under `version` and sound (check_manifest), else None; what is wrong with a cache of
    this trace that cannot be used goes to `problems`."""
    try:
        man = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError, RecursionError) as err:
        if (d / "manifest.json").exists() and problems is not None:
            problems.append(f"unreadable manifest ({type(err).__name__})")
        return None
    if not isinstance(man, dict) or man.get("version") != version or \
            man.get("layout") != LAYOUT:
        return None  # another reader's or layout's: rebuilt without a word
    if man.get("self") != _self_hash(man):
        if problems is not None:
            problems.append("its manifest is not the one it was written with")
        return None
    ok, sources_now = _current(man.get("sources"), archive_files(trace_dir, anchors),
                               trace_dir)
    if not ok:
        return None  # the trace changed since (or it is another trace's)
    ok, files_now = _current(man.get("files"), _cache_files(d), d)
    try:
        problem = check_manifest(man) if ok else "its files are not those it was written with"
    except Exception as err:  # noqa: BLE001 - whatever a manifest holds: not used
        problem = f"its manifest is malformed ({type(err).__name__})"
    if problem:
        if problems is not None:
            problems.append(problem)
        return None
    if sources_now or files_now:  # a copy of the same content: hashed once, not each time
        shutil.rmtree(d / DERIVED, ignore_errors=True)
        man["sources"] = sources_now or man["sources"]
        man["files"] = files_now or man["files"]
        try:
            output.write_text(d / "manifest.json", json.dumps({**man, "self": _self_hash(man)}))
        except Exception:  # noqa: BLE001 - a cache we cannot update only costs a hash
            pass
    return man


# what a column's dtype may be called in a manifest (pandas names strings "str" or
# "object", depending on its version)
def _dtype_names(dtype: str) -> set[str]:
    return {"object", "str", "string"} if dtype in ("object", "str") else {dtype}


_META_TYPES = {f.name: f.type for f in dataclasses.fields(TraceMeta)}
MAX_RANKS = 1 << 24
# tables with a row per event at most (a cache may not claim more than the trace holds)
_PER_EVENT = ("calls", "regions", "p2p", "messages", "collectives", "flushes", "unmatched",
              "rma", "rma_sync", "io")


def _check_meta(meta: object) -> str | None:
    if not isinstance(meta, dict) or set(meta) - set(_META_TYPES):
        return "its metadata has unknown fields"
    for k, v in meta.items():
        kind = _META_TYPES[k]
        good = {"str": isinstance(v, str),
                "int": isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63,
                "bool": isinstance(v, bool),
                "list[int]": isinstance(v, list) and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in v),
                "list[str]": isinstance(v, list) and all(isinstance(x, str) for x in v),
                }.get(str(kind).replace("typing.", ""))
        if not good:
            return f"its metadata's {k} is not a valid {kind}"
    n = meta.get("num_ranks", 0)
    if not 0 < n <= MAX_RANKS:
        return f"it claims {n} ranks"
    if meta.get("timer_resolution", 1) <= 0:
        return "its timer resolution is not positive"
    if any(not 0 <= r < n for r in meta.get("truncated_ranks", [])):
        return "a rank cut short is not one of its ranks"
    return None


def check_manifest(man: dict) -> str | None:
    """What is wrong with a manifest (its tables' schema, dtypes, categories, rows per
    rank), None if nothing: it decides what is read and how large it is."""
    problem = _check_meta(man.get("meta"))
    if problem:
        return problem
    nranks = man["meta"]["num_ranks"]
    tables = man.get("tables")
    if not isinstance(tables, dict) or set(tables) != set(TABLES):
        return "its tables are not the trace's"
    for name in TABLES:
        info = tables[name]
        if not isinstance(info, dict):
            return f"table {name} is not described"
        want = {c.name: c for c in SCHEMA.tables[name].columns}
        dtypes = info.get("dtypes")
        if not isinstance(dtypes, dict) or list(dtypes) != list(want):
            return f"table {name} has other columns than {SCHEMA.tables[name].names}"
        for col, declared in empty_table(name).dtypes.items():
            if not isinstance(dtypes[col], str) or dtypes[col] not in _dtype_names(
                    str(declared)):
                return f"column {name}.{col} is {dtypes[col]}, not {declared}"
        cats = info.get("categories")
        if not isinstance(cats, dict) or set(cats) != {
                c for c, d in dtypes.items() if d == "category"}:
            return f"table {name}'s categories are not its category columns"
        for col, values in cats.items():
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                return f"column {name}.{col} has categories that are not names"
            enum = want[col].enum
            if enum and values != SCHEMA.enums[enum].names:
                return f"column {name}.{col} has other categories than {enum}"
        parts = info.get("partitions")
        if parts is None:
            continue
        if name not in PARTITION_BY or not isinstance(parts, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(
                    isinstance(x, int) and not isinstance(x, bool) for x in p)
                for p in parts):
            return f"table {name}'s partitions are not (rank, rows) pairs"
        values = [v for v, _n in parts]
        if values != sorted(set(values)) or any(not 0 <= v < nranks for v in values) or \
                any(n < 0 for _v, n in parts):
            return f"table {name} has partitions of ranks it does not have"
    return None


def _rows_claimed(man: dict) -> int:
    return sum(n for name in _PER_EVENT
               for _v, n in (man["tables"][name].get("partitions") or []))


def _within(values: np.ndarray, lo: int, hi: int) -> bool:
    """Every value in [lo, hi)."""
    return not len(values) or (int(values.min()) >= lo and int(values.max()) < hi)


# per table: id columns and the table whose rows they name (-1: none)
_IDS = {"p2p": {"call": "calls"}, "collectives": {"call": "calls"},
        "messages": {c: "calls" for c in ("send_call", "recv_call", "send_complete_call",
                                           "recv_complete_call")},
        "unmatched": {"call": "calls"}, "rma": {"call": "calls", "complete_call": "calls"},
        "rma_sync": {"call": "calls"}, "io": {"call": "calls", "complete_call": "calls"}}
_RANKS = {"ranks": ("rank",), "calls": ("rank",), "regions": ("rank",), "p2p": ("rank",),
          "collectives": ("rank",), "flushes": ("rank",), "unmatched": ("rank",),
          "messages": ("send_rank", "recv_rank"), "rma": ("rank",), "rma_sync": ("rank",),
          "io": ("rank",), "threads": ("rank",)}
_NON_NEGATIVE = {"calls": ("start", "bytes_sent", "bytes_recv", "depth", "thread"),
                 "regions": ("start", "depth", "thread"), "p2p": ("time", "bytes"),
                 "messages": ("bytes", "send_time", "recv_time"), "flushes": ("start",),
                 "unmatched": ("bytes",), "rma": ("time", "bytes_sent", "bytes_recv"),
                 "rma_sync": ("time",), "io": ("start", "bytes_requested", "bytes"),
                 "ranks": ("first_ns", "last_ns", "events"), "callpaths": ("callpath", "level"),
                 "threads": ("thread", "first_ns", "last_ns", "events")}


# calls a row names and the rank whose calls they are (call ids are rank-major: each
# rank's are a run of its own)
_OWNED = {"calls": [("rank", "call")], "p2p": [("rank", "call")],
          "collectives": [("rank", "call")], "unmatched": [("rank", "call")],
          "messages": [("send_rank", "send_call"), ("send_rank", "send_complete_call"),
                       ("recv_rank", "recv_call"), ("recv_rank", "recv_complete_call")],
          "rma": [("rank", "call"), ("rank", "complete_call")], "rma_sync": [("rank", "call")],
          "io": [("rank", "call"), ("rank", "complete_call")]}


def _starts(man: dict, table: str) -> np.ndarray | None:
    """Where each rank's rows of a rank-partitioned table begin (and the end), from the
    manifest; None if it is not partitioned."""
    parts = man["tables"][table].get("partitions")
    if parts is None:
        return None
    rows = np.zeros(man["meta"]["num_ranks"], np.int64)
    for v, n in parts:
        rows[v] = n
    return np.concatenate([[0], np.cumsum(rows)])


def check_table(name: str, df: pd.DataFrame, man: dict) -> str | None:
    """What is wrong with table `name` (whole, or one rank's partition) as read from a
    cache described by `man`: ids, ranks, times and byte counts out of range, calls that
    are another rank's."""
    rows = {t: sum(n for _v, n in man["tables"][t]["partitions"])
            if man["tables"][t].get("partitions") is not None else None for t in TABLES}
    nranks = man["meta"]["num_ranks"]
    for col in _RANKS.get(name, ()):
        if not _within(df[col].to_numpy(), 0, nranks):
            return f"{name}.{col} names ranks it does not have"
    for col, table in _IDS.get(name, {}).items():
        n = rows[table]
        if n is not None and not _within(df[col].to_numpy(), -1, n):
            return f"{name}.{col} names {table} rows it does not have"
    for col in _NON_NEGATIVE.get(name, ()):
        if not _within(df[col].to_numpy(), 0, 1 << 63):
            return f"{name}.{col} is negative"
    if name in ("calls", "regions", "flushes") and len(df) and bool(
            (df["end"].to_numpy() < df["start"].to_numpy()).any()):
        return f"{name} end before they start"
    if name in ("calls", "regions") and len(df):
        ids = df["call"].to_numpy()
        if rows[name] is not None and not _within(ids, 0, rows[name]):
            return f"{name}.call names rows it does not have"
        if bool((ids[1:] <= ids[:-1]).any()):
            return f"{name}.call ids are not in order"
    if name == "collectives" and rows["collectives"] is not None and not _within(
            df["instance"].to_numpy(), 0, max(rows["collectives"], 1)):
        return "collectives.instance beyond the collectives there are"
    if name in ("calls", "regions") and not _within(df["callpath"].to_numpy(), -1, 1 << 31):
        return f"{name}.callpath out of range"
    starts = _starts(man, "calls")
    for rank_col, col in _OWNED.get(name, []) if starts is not None and len(df) else []:
        r, ids = df[rank_col].to_numpy().astype(np.int64), df[col].to_numpy()
        if not bool(((ids == -1) | ((ids >= starts[r]) & (ids < starts[r + 1]))).all()):
            return f"{name}.{col} names calls of other ranks"
    return None


def check_trace(trace: Trace, man: dict) -> str | None:
    """check_table for every table, and the tables against each other."""
    n = trace.meta.num_ranks
    if len(trace.ranks) != n or not np.array_equal(trace.ranks["rank"].to_numpy(),
                                                   np.arange(n)):
        return f"its ranks table does not list its {n} ranks"
    for name in TABLES:
        df = getattr(trace, name)
        problem = check_table(name, df, man)
        if problem:
            return problem
        if name in ("calls", "regions") and len(df) and not np.array_equal(
                df["call"].to_numpy(), np.arange(len(df))):
            return f"{name}.call is not the row number"
    return None


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


def load(trace_dir: Path, version: str, anchors: list[Path] | None = None,
         problems: list[str] | None = None) -> Trace | None:
    """The cached tables if a current, sound cache exists, else None (what is wrong with
    a cache of this trace that was not used goes to `problems`)."""
    for d in candidates(trace_dir):
        ok = d.is_dir() and _only_regular_files(d)
        man = _manifest(d, trace_dir, version, anchors, problems) if ok else None
        if man is None:
            continue
        try:
            trace = _read(d, trace_dir, man)
            problem = check_trace(trace, man)
        except Damaged as err:
            problem = str(err)
        except Exception as err:  # noqa: BLE001 - whatever a cache holds, it is rebuilt
            problem = f"unreadable ({type(err).__name__})"
        if problem is None:
            return trace
        if problems is not None:
            problems.append(problem)
    return None


def notice(trace_dir: Path, problems: list[str]) -> None:
    """The one line saying a cache of this trace was not used, and why."""
    print(one_line(f"mpiscope: notice: {trace_dir}: its cache is damaged ({problems[0]}): "
                   "rebuilding it"), file=sys.stderr, flush=True)


def discard(d: Path) -> None:
    """Remove a cache that cannot be used (the next store writes a new one)."""
    if d.name == CACHE_NAME or d.parent.name == "mpiscope":
        shutil.rmtree(d, ignore_errors=True)


def partition_path(d: Path, name: str, key: str, value: int) -> Path:
    """The file holding the rows of one rank (`value` of `key`) of a partitioned table."""
    return d / name / f"{key}={value}" / PART_FILE


def _read_file(path: Path, rows: int | None = None, most: int | None = None) -> pa.Table:
    """A cache file, its pages' checksums verified; `rows`: the rows it must have, `most`:
    the most it may have (checked in its footer before anything is read)."""
    # ParquetFile.read: pq.read_table's dataset set-up costs more per file; one thread
    # per file, the pool reads the files side by side
    f = pq.ParquetFile(path, page_checksum_verification=True)
    n = f.metadata.num_rows
    if (rows is not None and n != rows) or (most is not None and n > most):
        raise Damaged(f"{path.parent.name}/{path.name} has {n} rows, not as its manifest says")
    return f.read(use_threads=False)


def _read_table(d: Path, name: str, man: dict, pool: Executor) -> pd.DataFrame:
    info = man["tables"][name]
    parts = info.get("partitions")
    if parts is None:  # no more rows than the trace has bytes
        most = sum(r["stat"][0] for r in man["sources"]) + 1024
        table = _read_file(d / f"{name}.parquet", most=most)
        df = table.to_pandas(split_blocks=True, self_destruct=True)
    else:
        key = PARTITION_BY[name]
        paths = [partition_path(d, name, key, v) for v, _ in parts]
        tables = list(pool.map(_read_file, paths, [n for _v, n in parts]))
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
    """The tables of the cache in `d` (its manifest `man` checked already)."""
    if _rows_claimed(man) > sum(r["stat"][0] for r in man["sources"]):
        raise Damaged("it has more rows than the trace has bytes")
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


def _write(trace: Trace, tmp: Path, version: str, srcs: list[dict]) -> None:
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        tables = {name: _write_table(getattr(trace, name), tmp, name, pool)
                  for name in TABLES}
    write_manifest(tmp, {"sources": srcs, "version": version, "layout": LAYOUT,
                         "meta": dataclasses.asdict(trace.meta), "tables": tables})


def _self_hash(man: dict) -> str:
    """SHA-256 of the manifest without this hash (sorted keys): an accidental change of
    the manifest shows (a deliberate one recomputes it: then the checks decide)."""
    body = {k: v for k, v in man.items() if k != "self"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
                          ).hexdigest()


def write_manifest(tmp: Path, man: dict) -> None:
    """The manifest, last: with the content hashes of the cache's files (`files`) and its
    own (`self`)."""
    man = {**man, "files": _records(_cache_files(tmp), tmp)}
    (tmp / "manifest.json").write_text(json.dumps({**man, "self": _self_hash(man)}))


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
            "write_statistics": False,
            "write_page_checksum": True}  # CRC32 per page: a flipped bit fails the read
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


def store(trace: Trace, version: str, srcs: list[dict] | None = None,
          anchors: list[Path] | None = None) -> Path | None:
    """Write the cache (beside the trace if we may, else in the user's cache dir): into a
    temporary directory, manifest last, renamed into place when complete, so a failed
    write (full disk, `ulimit -f`, Ctrl-C) leaves no half cache. `srcs`: the trace's
    sources as they were when it was read (default: as they are now)."""
    local, fallback = candidates(trace.path)
    targets = [local, fallback] if _writable(trace.path) else [fallback]
    try:
        srcs = srcs if srcs is not None else sources(trace.path, anchors)
    except OSError:
        return None
    for d in targets:
        try:
            with output.publish_dir(d) as tmp:
                _write(trace, tmp, version, srcs)
            return d
        except (OSError, ValueError, pa.ArrowException):
            pass  # a cache we cannot write is only slower
    return None


def load_or_build(trace_dir: Path, version: str, build: Callable[[], Trace], *,
                  use_cache: bool = True, progress: Callable[[str], None] | None = None,
                  anchors: list[Path] | None = None) -> Trace:
    """The trace from the cache in `trace_dir` when it is current under `version` and
    sound, else `build()`, stored for next time (`anchors`: the archives it is read from,
    by default those in `trace_dir`)."""
    if use_cache:
        problems: list[str] = []
        cached = load(trace_dir, version, anchors, problems)
        if cached is not None:
            return cached
        if problems:
            notice(trace_dir, problems)
        try:  # the content it is read from: a file changed meanwhile makes the next
            srcs = sources(trace_dir, anchors)  # load read it again
        except OSError:
            srcs = None
    trace = build()
    if use_cache and srcs is not None:
        if progress:
            progress("writing cache")
        store(trace, version, srcs)
    return trace
