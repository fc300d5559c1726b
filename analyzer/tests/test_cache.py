"""The Parquet cache: a re-open equals a fresh read, a changed trace is re-read, a
read-only trace directory caches under $XDG_CACHE_HOME, and the per-rank tables are
hive-partitioned datasets (`calls/rank=K/part-0.parquet`) that pyarrow.dataset and Dask
read on their own, one rank or all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

from mpiscope.archive import cache, decode, reader
from mpiscope.archive.trace import Trace
from mpiscope_testing.tracegen import copy_trace


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
    assert manifest["version"] == f"{decode.READER_VERSION}:traces.otf2"
    assert (trace / ".mpiscope-cache" / "calls" / "rank=0" / "part-0.parquet").is_file()

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


def per_rank(df: pd.DataFrame, key: str) -> dict[int, pd.DataFrame]:
    """The rows of each rank, in table order, with plain (not categorical) columns."""
    df = df.astype({c: object for c, t in df.dtypes.items()
                    if isinstance(t, pd.CategoricalDtype)})
    return {int(k): g.drop(columns=key).reset_index(drop=True)
            for k, g in df.groupby(key, observed=True, sort=True)}


def assert_same_per_rank(got: pd.DataFrame, want: pd.DataFrame, key: str) -> None:
    a, b = per_rank(got, key), per_rank(want, key)
    assert sorted(a) == sorted(b)
    for k in b:
        pd.testing.assert_frame_equal(a[k][b[k].columns], b[k], check_dtype=False,
                                      obj=f"{key}={k}")


def test_per_rank_tables_are_a_hive_dataset_pyarrow_reads(trace: Path) -> None:
    t = reader.load(trace)
    where = trace / ".mpiscope-cache"
    assert sorted(p.name for p in (where / "calls").iterdir()) == sorted(
        f"rank={r}" for r in range(4))
    for name, key in (("calls", "rank"), ("p2p", "rank"), ("collectives", "rank"),
                      ("messages", "send_rank")):
        got = ds.dataset(where / name, partitioning="hive").to_table().to_pandas()
        assert_same_per_rank(got, getattr(t, name), key)
    # one rank alone, without touching the others' files
    rank2 = ds.dataset(where / "calls", partitioning="hive").to_table(
        filter=ds.field("rank") == 2).to_pandas()
    assert rank2["call"].tolist() == t.calls.loc[t.calls["rank"] == 2, "call"].tolist()


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # inside Dask, pandas 3.1
def test_dask_reads_the_cache(trace: Path) -> None:
    import dask.dataframe as dd  # in the test extras

    t = reader.load(trace)
    calls = dd.read_parquet(trace / ".mpiscope-cache" / "calls")
    assert calls.npartitions == 4  # one per rank
    got = calls.compute()
    got["rank"] = got["rank"].astype(int)  # Dask reads a hive key as a category
    assert_same_per_rank(got, t.calls, "rank")
    late = calls[calls["rank"] == 3].compute()
    assert late["call"].tolist() == t.calls.loc[t.calls["rank"] == 3, "call"].tolist()


def test_a_table_not_in_rank_order_keeps_its_order(trace: Path, monkeypatch) -> None:
    """Rows the cache cannot split by rank without reordering stay in one file."""
    t = reader.load(trace, use_cache=False)
    t.messages = t.messages.iloc[::-1].reset_index(drop=True)
    assert cache.store(t, "v-test") is not None
    assert (trace / ".mpiscope-cache" / "messages.parquet").is_file()
    assert_same(cache.load(trace, "v-test"), t)


def test_a_cache_in_an_older_layout_is_rebuilt(trace: Path, monkeypatch) -> None:
    fresh = reader.load(trace)
    manifest = trace / ".mpiscope-cache" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["layout"] = "one file per table"
    manifest.write_text(json.dumps(doc))
    rebuilt = []
    build = reader.build
    monkeypatch.setattr(reader, "build", lambda *a, **k: rebuilt.append(1) or build(*a, **k))
    assert_same(reader.load(trace), fresh)
    assert rebuilt == [1]
    assert json.loads(manifest.read_text())["layout"] == cache.LAYOUT


def test_empty_per_rank_tables_round_trip(trace: Path) -> None:
    """The synthetic trace has no user regions: no files, and an empty table back."""
    fresh = reader.load(trace)
    assert fresh.regions.empty and not (trace / ".mpiscope-cache" / "regions").exists()
    again = reader.load(trace)
    assert again.regions.empty and list(again.regions.columns) == list(fresh.regions.columns)
    assert np.array_equal(again.regions.dtypes.to_numpy(), fresh.regions.dtypes.to_numpy())


def test_a_damaged_cache_is_ignored(trace: Path) -> None:
    fresh = reader.load(trace)
    part = trace / ".mpiscope-cache" / "p2p" / "rank=1" / "part-0.parquet"
    part.write_bytes(b"not parquet")
    assert_same(reader.load(trace), fresh)
    os.utime(trace / "traces.otf2")  # touching the trace rebuilds the cache
    assert_same(reader.load(trace), fresh)
    assert part.read_bytes()[:4] == b"PAR1"


# ---------------------------------------------------------------- a cache is never trusted
@pytest.fixture
def small(synth_trace, tmp_path: Path) -> Path:
    return copy_trace(synth_trace(4, 2000), tmp_path / "small")


def edited(trace: Path, edit, sign: bool = False) -> None:
    """The cache's manifest edited (`sign`: its own hash recomputed, as a forger would)."""
    path = trace / ".mpiscope-cache" / "manifest.json"
    man = json.loads(path.read_text())
    edit(man)
    if sign:
        man["self"] = cache._self_hash(man)
    path.write_text(json.dumps(man))


def set_in(keys: tuple, value: object):
    def edit(man: dict) -> None:
        d = man
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


# what the campaign found (issue 29), and their kin
EDITS = {
    "a dtype": set_in(("tables", "calls", "dtypes", "start"), "float64"),
    "a datetime instance": set_in(("tables", "collectives", "dtypes", "instance"),
                                  "datetime64[ns]"),
    "no ranks": set_in(("meta", "num_ranks"), 0),
    "10^12 rows": set_in(("tables", "calls", "partitions", 0, 1), 10**12),
    "kinds reordered": lambda m: m["tables"]["calls"]["categories"]["kind"].reverse(),
    "a rank beyond the ranks": set_in(("meta", "truncated_ranks"), [7]),
    "a string for a number": set_in(("meta", "duration_ns"), "soon"),
}


@pytest.mark.parametrize("sign", [False, True], ids=["edited", "forged"])
@pytest.mark.parametrize("what", list(EDITS))
def test_an_edited_manifest_is_rebuilt_with_one_notice(small: Path, what: str, sign: bool,
                                                        capfd) -> None:
    trace = small
    fresh = reader.load(trace)
    capfd.readouterr()
    edited(trace, EDITS[what], sign)
    assert_same(reader.load(trace), fresh)
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mpiscope: notice: {trace}: its cache "
                                                   "is damaged (") and "rebuilding" in lines[0]
    assert_same(reader.load(trace), fresh)  # and the new one is good
    assert capfd.readouterr().err == ""


def test_damaged_cache_files_are_rebuilt(small: Path, capfd) -> None:
    trace = small
    fresh = reader.load(trace)
    calls = trace / ".mpiscope-cache" / "calls"
    part = calls / "rank=1" / "part-0.parquet"
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0x10
    part.write_bytes(bytes(data))
    capfd.readouterr()
    assert_same(reader.load(trace), fresh)
    assert "its files are not those it was written with" in capfd.readouterr().err
    # another rank's file in its place, with a manifest that says so (forged): the ids
    # contradict the other ranks'
    (calls / "rank=2" / "part-0.parquet").write_bytes(part.read_bytes())
    edited(trace, lambda m: m.update(files=cache._records(cache._cache_files(
        trace / ".mpiscope-cache"), trace / ".mpiscope-cache"))
        or m["tables"]["calls"]["partitions"].__setitem__(2, [2, m["tables"]["calls"][
            "partitions"][1][1]]), sign=True)
    assert_same(reader.load(trace), fresh)
    assert "calls.call" in capfd.readouterr().err


def test_a_copied_trace_keeps_its_cache_and_another_traces_cache_is_not_used(
        small: Path, tmp_path: Path, monkeypatch) -> None:
    trace = small
    fresh = reader.load(trace)
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(trace), str(copy)], check=True)  # sizes, mtimes kept
    built = []
    build = reader.build
    monkeypatch.setattr(reader, "build", lambda *a, **k: built.append(1) or build(*a, **k))
    t = reader.load(copy)  # the same content: hashed once, used
    assert built == [] and len(t.calls) == len(fresh.calls)
    # another trace of the same sizes (one timestamp differs), its cache put in place
    other = copy_trace(trace, tmp_path / "other")
    evt = other / "traces" / "0.evt"
    data = bytearray(evt.read_bytes())
    data[19] ^= 1  # the first timestamp's lowest byte
    evt.write_bytes(bytes(data))
    reader.load(other)
    built.clear()
    shutil.rmtree(copy / ".mpiscope-cache")
    shutil.copytree(other / ".mpiscope-cache", copy / ".mpiscope-cache")
    assert_same(reader.load(copy), fresh)
    assert built == [1]


def test_analyze_with_a_damaged_cache_prints_one_notice_and_no_traceback(small: Path,
                                                                         tmp_path) -> None:
    trace = small
    def analyze(out: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace),
                               "--json", str(out)], capture_output=True, text=True,
                              timeout=300)
    first = analyze(tmp_path / "a.json")
    assert first.returncode == 0, first.stderr
    edited(trace, EDITS["10^12 rows"], sign=True)
    again = analyze(tmp_path / "b.json")
    assert again.returncode == 0 and "Traceback" not in again.stderr
    assert again.stderr.count("mpiscope: notice:") == 1
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert a["ranks"] == b["ranks"] and a["functions"] == b["functions"]
