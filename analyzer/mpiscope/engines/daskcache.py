"""The partitioned Parquet cache as Dask dataframes: one partition per rank.

    from mpiscope.engines.daskcache import open_cache
    c = open_cache("mpiscope-20260101-120000")        # None if no complete cache
    c.frame("calls")           # dask DataFrame, partition i: rank c.ranks_of("calls")[i]
    c.small("comms")           # the small tables (ranks, comms, ...) as pandas
    c.meta                     # TraceMeta

Columns and dtypes are exactly those of `mpiscope.load(DIR)` (the categories restored
from the manifest, the rank column put back from the directory name), so pandas code of
`mpiscope.analysis` runs unchanged on a partition. Only a complete cache is opened: the
manifest is written last and the directory renamed into place when whole
(`archive/cache.py`), so a cache a killed job left behind is never seen here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.archive import cache, reader
from mpiscope.archive.decode import READER_VERSION
from mpiscope.archive.trace import TraceMeta


def version_of(anchor: Path) -> str:
    """The cache version `reader.load` writes and accepts for this archive."""
    return f"{READER_VERSION}:{anchor.name}"


def find(trace_dir: Path | str, problems: list[str] | None = None
         ) -> tuple[Path, dict] | None:
    """(cache directory, manifest) of the complete, current cache of a trace (its
    manifest checked: cache.check_manifest), or None; what is wrong with a cache of this
    trace that cannot be used goes to `problems`."""
    anchor = reader.anchor_of(Path(trace_dir))
    version = version_of(anchor)
    for d in cache.candidates(anchor.parent):
        man = cache._manifest(d, anchor.parent, version, problems=problems) \
            if d.is_dir() else None
        if man is not None:
            return d, man
    return None


def _check_ranks(d: Path, name: str, values: list[int], man: dict) -> str | None:
    """What is wrong with these ranks' partitions of table `name` (on a worker)."""
    info = man["tables"][name]
    rows = dict(map(tuple, info["partitions"]))
    for v in values:
        try:
            df = read_partition(d, name, v, info)
        except Exception as err:  # noqa: BLE001 - any failure is a damaged cache
            return f"table {name} of rank {v} is unreadable ({type(err).__name__})"
        if len(df) != rows[v]:
            return f"table {name} has other row counts than its manifest says"
        problem = cache.check_table(name, df, man)
        if problem:
            return problem
    return None


def validate(t: CacheTables, client, chunks: int = 32) -> str | None:
    """What is wrong with a cache found on disk (its manifest checked already): the small
    tables here, every partition on the cluster (a few tasks of ranks each). None if
    nothing: then it can be used."""
    import numpy as np

    for name in cache.TABLES:
        if t.partitioned(name):
            continue
        try:
            problem = cache.check_table(name, t.small(name), t.manifest)
        except Exception as err:  # noqa: BLE001 - any failure is a damaged cache
            problem = f"table {name} is unreadable ({type(err).__name__})"
        if problem:
            return problem
    ranks = t.small("ranks")
    if len(ranks) != t.meta.num_ranks or not np.array_equal(ranks["rank"].to_numpy(),
                                                            np.arange(len(ranks))):
        return f"its ranks table does not list its {t.meta.num_ranks} ranks"
    futures = [client.submit(_check_ranks, t.dir, name, [int(v) for v in part], t.manifest,
                             pure=False)
               for name in cache.TABLES if t.partitioned(name)
               for part in np.array_split(t.ranks_of(name), chunks) if len(part)]
    return next((p for p in client.gather(futures) if p), None)


def read_partition(d: Path, name: str, value: int, info: dict) -> pd.DataFrame:
    """One rank's rows of a partitioned table, with the dtypes `mpiscope.load` gives."""
    key = cache.PARTITION_BY[name]
    df = cache._read_file(cache.partition_path(d, name, key, value)).to_pandas()
    df[key] = np.full(len(df), value, dtype=info["dtypes"][key])
    return cache._restore(df, info)


@dataclass
class CacheTables:
    """A trace's cache, opened lazily: nothing but the manifest is read here."""

    dir: Path
    trace_dir: Path
    manifest: dict

    @property
    def meta(self) -> TraceMeta:
        return TraceMeta(**self.manifest["meta"])

    def partitioned(self, name: str) -> bool:
        return self.manifest["tables"][name].get("partitions") is not None

    def ranks_of(self, name: str) -> list[int]:
        """The rank (sender for `messages`) of each partition of a partitioned table."""
        return [int(v) for v, _rows in self.manifest["tables"][name]["partitions"] or []]

    def rows(self, name: str) -> int:
        info = self.manifest["tables"][name]
        return sum(n for _v, n in info["partitions"] or [])

    def partition(self, name: str, value: int) -> pd.DataFrame:
        return read_partition(self.dir, name, value, self.manifest["tables"][name])

    def frame(self, name: str):
        """A partitioned table as a dask DataFrame, one partition per rank, in rank order
        (so concatenating the partitions gives `mpiscope.load(DIR).<name>` row for row)."""
        import dask.dataframe as dd

        info = self.manifest["tables"][name]
        if info.get("partitions") is None:
            return dd.from_pandas(self.small(name), npartitions=1)
        meta = cache._empty(info)
        values = self.ranks_of(name)
        if not values:
            return dd.from_pandas(meta, npartitions=1)
        return dd.from_map(read_partition, [self.dir] * len(values), [name] * len(values),
                           values, [info] * len(values), meta=meta, enforce_metadata=False)

    def small(self, name: str) -> pd.DataFrame:
        """A table as pandas (meant for the small ones: ranks, comms, unmatched, ...)."""
        info = self.manifest["tables"][name]
        if info.get("partitions") is None:
            import pyarrow.parquet as pq

            df = pq.ParquetFile(self.dir / f"{name}.parquet",
                                page_checksum_verification=True).read().to_pandas()
            out = cache._restore(df, info)
            if name in ("comms", "rma_sync"):  # lists of world ranks come back as arrays
                out["members"] = out["members"].map(lambda m: [int(x) for x in m])
            return out
        parts = [self.partition(name, v) for v in self.ranks_of(name)]
        return pd.concat(parts, ignore_index=True) if parts else cache._empty(info)


def open_cache(trace_dir: Path | str) -> CacheTables | None:
    """The complete, current cache of the trace in `trace_dir` as lazily read tables,
    None if there is none (build it with `engines.convert.convert` or `mpiscope.load`)."""
    found = find(trace_dir)
    if found is None:
        return None
    d, man = found
    return CacheTables(dir=d, trace_dir=reader.anchor_of(Path(trace_dir)).parent, manifest=man)
