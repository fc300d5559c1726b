"""The Parquet cache: a re-open equals a fresh read, a changed trace is re-read, a
read-only trace directory caches under $XDG_CACHE_HOME, and a reader of the Parquet
files (pyarrow, Dask) can fetch one rank's rows through the rank-partitioned row groups."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from tracegen import copy_trace

from mpiscope import cache, reader
from mpiscope.trace import Trace


def assert_same(a: Trace, b: Trace) -> None:
    for name in cache.TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True,
                                      obj=name)
    assert a.meta == b.meta


@pytest.fixture
def trace(synth_trace, tmp_path: Path) -> Path:
    return copy_trace(synth_trace(4, 20000), tmp_path / "trace")


def test_reopen_from_cache_equals_fresh_read(trace: Path, monkeypatch) -> None:
    fresh = reader.load(trace)
    manifest = json.loads((trace / ".mpiscope-cache" / "manifest.json").read_text())
    assert manifest["version"] == f"{reader.READER_VERSION}:traces.otf2"
    assert (trace / ".mpiscope-cache" / "calls.parquet").is_file()

    def no_reading(*_a, **_k):
        raise AssertionError("the OTF2 archive was read again")
    monkeypatch.setattr(reader, "build", no_reading)
    assert_same(reader.load(trace), fresh)
    assert_same(reader.load(trace / "traces.otf2"), fresh)


def test_a_changed_trace_file_invalidates_the_cache(trace: Path) -> None:
    first = reader.load(trace)
    evt = trace / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])  # rank 1 cut short
    again = reader.load(trace)
    assert first.meta.truncated_ranks == [] and again.meta.truncated_ranks == [1]
    assert len(again.calls) < len(first.calls)
    assert_same(reader.load(trace), again)  # and the new cache serves the new content


def test_use_cache_false_neither_reads_nor_writes(trace: Path) -> None:
    reader.load(trace, use_cache=False)
    assert not (trace / ".mpiscope-cache").exists()


def test_read_only_trace_directory_caches_in_xdg(trace: Path, tmp_path: Path,
                                                  monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for p in [trace, *trace.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        fresh = reader.load(trace)
        assert not (trace / ".mpiscope-cache").exists()
        (where,) = (tmp_path / "xdg" / "mpiscope").iterdir()
        assert (where / "manifest.json").is_file() and where == cache.fallback_dir(trace)
        assert_same(reader.load(trace), fresh)
    finally:
        for p in [trace, *trace.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_row_groups_partition_the_tables_by_rank(trace: Path, monkeypatch) -> None:
    monkeypatch.setattr(cache, "ROW_GROUP_ROWS", 1)  # one rank per row group
    t = reader.load(trace)
    path = trace / ".mpiscope-cache" / "calls.parquet"
    meta = pq.ParquetFile(path).metadata
    col = meta.schema.to_arrow_schema().get_field_index("rank")
    stats = [(meta.row_group(g).column(col).statistics.min,
              meta.row_group(g).column(col).statistics.max) for g in range(meta.num_row_groups)]
    assert stats == [(r, r) for r in range(4)]
    rank2 = pq.read_table(path, filters=[("rank", "==", 2)]).to_pandas()
    assert rank2["call"].tolist() == t.calls.loc[t.calls["rank"] == 2, "call"].tolist()
    sent = pq.read_table(trace / ".mpiscope-cache" / "messages.parquet").to_pandas()
    assert len(sent) == len(t.messages)


def test_a_damaged_cache_is_ignored(trace: Path) -> None:
    fresh = reader.load(trace)
    part = trace / ".mpiscope-cache" / "p2p.parquet"
    part.write_bytes(b"not parquet")
    assert_same(reader.load(trace), fresh)
    os.utime(trace / "traces.otf2")  # touching the trace rebuilds the cache
    assert_same(reader.load(trace), fresh)
    assert part.read_bytes()[:4] == b"PAR1"
