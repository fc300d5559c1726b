"""The Dask engine (analyzer/mpiscope/engines) gives what the pandas engine gives.

On a dask.distributed LocalCluster of 2 worker processes, for real traced MPI runs
(Himeno XS, the untrue-case programs: RMA fence, non-blocking all-to-all, MPI-IO), a
hand-made trace with threads, the Score-P ping-pong and a synthetic trace:
- the parallel conversion (one task per rank, so every message crosses tasks) writes the
  same cache, table for table, as `mpiscope.load` does;
- `mpiscope.analyze(dir, engine="dask")` gives the pandas engine's JSON (floats to 1e-9);
- `mpiscope analyze --engine dask` prints and writes the same as without it.
A 2x10^6-event trace converts with 384 MB workers; a worker killed during conversion is
retried (the cache still equal), and a conversion that fails leaves no cache at all and
says so in one line.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import mpiscope
from mpiscope.archive import cache
from mpiscope.engines import cluster, convert, dask_engine, fused, ranktasks
from mpiscope.engines.daskcache import open_cache
from mpiscope.errors import UserError
from mpiscope_testing.enginetraces import engine_traces, synth
from mpiscope_testing.oversubscribed import imbalanced

ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def client():
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as c:
        yield c






@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory, scorep_trace: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("dask-traces")
    for sub in ("fence", "ialltoall", "io"):
        (d / sub).mkdir()
    out = {
        **engine_traces(d, scorep_trace),
    }
    for p in out.values():  # the pandas engine's own cache is not what we test
        shutil.rmtree(p / cache.CACHE_NAME, ignore_errors=True)
    return out


def differences(a: object, b: object, path: str = "") -> list[str]:
    """Where two JSON values differ; floats equal to 1e-9 relative (summation order)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, int | float) and not isinstance(b, bool):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else [f"{path}: {a} != {b}"]
    return [] if a == b and type(a) is type(b) else [f"{path}: {a!r} != {b!r}"]


def cached_tables(trace_dir: Path) -> dict[str, pd.DataFrame]:
    c = open_cache(trace_dir)
    assert c is not None, f"no complete cache in {trace_dir}"
    t = cache._read(c.dir, c.trace_dir, c.manifest)
    return {name: getattr(t, name) for name in cache.TABLES} | {"meta": t.meta}


NAMES = ["himeno", "fence", "ialltoall", "io", "threads", "scorep", "synth"]


@pytest.mark.parametrize("name", NAMES)
def test_parallel_conversion_writes_the_cache_the_serial_reader_writes(
        name: str, traces: dict[str, Path], client, tmp_path: Path) -> None:
    serial = shutil.copytree(traces[name], tmp_path / "serial")
    parallel = shutil.copytree(traces[name], tmp_path / "parallel")
    mpiscope.load(serial)  # writes the cache as the pandas engine does
    # a group per rank: every message between two ranks is matched across tasks
    convert.convert(parallel, client, events_per_group=1)
    a, b = cached_tables(serial), cached_tables(parallel)
    assert a.pop("meta") == b.pop("meta")
    for table in a:
        pd.testing.assert_frame_equal(a[table], b[table], obj=table)
    assert len(a["calls"]) > 0
    assert not list(parallel.glob(f"{cache.CACHE_NAME}.tmp*"))


@pytest.mark.parametrize("name", NAMES)
def test_dask_engine_json_equals_pandas_engine(name: str, traces: dict[str, Path],
                                               client) -> None:
    d = traces[name]
    pandas_json = mpiscope.analyze(mpiscope.load(d, use_cache=False)).to_dict()
    dask_json = mpiscope.analyze(d, engine="dask", client=client).to_dict()
    assert differences(pandas_json, dask_json) == []
    assert dask_json["ranks"] and dask_json["functions"]


def test_dask_engine_json_equals_pandas_engine_with_run_delay(tmp_path: Path,
                                                              client) -> None:
    """Run-queue delay measured (the `descheduled` finding): 4 ranks on 2 CPUs, by
    construction (mpiscope_testing.oversubscribed)."""
    d = imbalanced(["node0"] * 4, "2", run_delay_us=[(0, 300)] * 3 + [(200, 0)]
                   ).write(tmp_path / "t")
    pandas_json = mpiscope.analyze(mpiscope.load(d, use_cache=False)).to_dict()
    dask_json = mpiscope.analyze(d, engine="dask", client=client).to_dict()
    assert differences(pandas_json, dask_json) == []
    assert "descheduled" in {f["kind"] for f in dask_json["findings"]}


def test_dask_engine_json_is_made_without_the_whole_trace_in_the_client(
        traces: dict[str, Path], client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client never reads a whole table: every result is combined from per-rank
    partials (the workers are other processes; only this one refuses)."""
    want = mpiscope.analyze(mpiscope.load(traces["himeno"], use_cache=False)).to_dict()

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("the whole trace was read into the client")

    monkeypatch.setattr(cache, "_read", refuse)
    monkeypatch.setattr(mpiscope, "load", refuse)
    a = dask_engine.analyze(traces["himeno"], client=client)
    got = a.to_dict()
    assert differences(want, got) == []
    # the rules ran (listed or minor: how much a finding saves is this run's timing)
    assert got["findings"] + got["minor"] and got["critical_path"]["segments"]


def test_independent_analyses_share_their_passes_over_the_ranks(
        traces: dict[str, Path], client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first passes of the breakdown, time bins, call sites, message statistics, loop
    detection, critical path and per-function sums go to the workers as one pass (each
    rank's slice built once for all of them), and the JSON stays the pandas engine's."""
    want = mpiscope.analyze(mpiscope.load(traces["synth"], use_cache=False)).to_dict()
    passes: list[object] = []
    run = ranktasks.RankTasks.run

    def spy(self, fn, *, waits: bool = True):
        passes.append(fn)
        return run(self, fn, waits=waits)

    monkeypatch.setattr(ranktasks.RankTasks, "run", spy)
    got = dask_engine.analyze(traces["synth"], client=client).to_dict()
    assert differences(want, got) == []
    together = [p for p in passes if isinstance(p, fused._Fused)]
    assert together, "no pass was shared"
    names = {getattr(f, "__name__", None) or f.func.__name__ for f in together[0].fns}
    assert {"ranks_part", "interval_part", "sites_part", "messages_part", "found_part",
            "arrivals", "_sums_part"} <= names


def test_analyze_cli_engine_dask_prints_and_writes_what_pandas_does(
        traces: dict[str, Path], tmp_path: Path) -> None:
    d = shutil.copytree(traces["ialltoall"], tmp_path / "t")

    def analyze(*args: str) -> tuple[str, dict]:
        js = tmp_path / f"{len(args)}.json"
        run = subprocess.run(["mpiscope", "analyze", str(d), "--json", str(js), *args],
                             env=ENV, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        return run.stdout, json.loads(js.read_text())

    out_pandas, js_pandas = analyze("--no-cache")
    out_dask, js_dask = analyze("--engine", "dask", "--workers", "1", "--memory-limit", "1GB")
    assert out_dask == out_pandas
    assert differences(js_pandas, js_dask) == []
    assert open_cache(d) is not None  # the Dask engine's conversion left the cache


def test_auto_engine_is_the_default_and_quiet_on_pandas(traces: dict[str, Path],
                                                        tmp_path: Path) -> None:
    d = shutil.copytree(traces["threads"], tmp_path / "t")
    run = subprocess.run(["mpiscope", "analyze", str(d)], env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    # a small trace stays on pandas (events known from the definitions, nothing read),
    # without a word: only a move to Dask or a refusal is worth one
    assert "engine auto" not in run.stderr


def test_ten_million_scaled_down_conversion_fits_small_workers(tmp_path: Path) -> None:
    """2x10^6 events (the pandas tables alone ~150 MB) converted by 2 workers of 384 MB,
    about 190 MB of which is the worker process itself (Python, pandas, pyarrow,
    distributed; Dask pauses a worker at 80% of its limit): no worker dies, pauses for
    good or fails, and the cache holds every event."""
    d = synth(tmp_path / "big", 16, 2_000_000)
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="384MB")) as c:
        convert.convert(d, c, events_per_group=250_000)
    tables = open_cache(d)
    assert tables is not None
    ranks = tables.small("ranks")
    assert ranks["events"].sum() >= 2_000_000
    assert tables.rows("calls") > 0 and tables.rows("messages") > 0


def test_killed_worker_during_conversion_is_retried(traces: dict[str, Path], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker running the first decode task is killed (SIGKILL) mid-task; Dask runs
    the task again and the cache is the serial reader's. The task kills its own worker
    (a test hook in place of `decode_group`): a killer watching for a running task may
    never see one on a busy machine, where every task can start and finish unseen."""
    d = synth(tmp_path / "k", 8, 1_000_000)
    marker = tmp_path / "killed"
    decode_group = convert.decode_group

    def die_once(*args, **kwargs):  # runs on a worker (pickled by value)
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return decode_group(*args, **kwargs)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(convert, "decode_group", die_once)
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as c:
        pids = set(c.run(os.getpid).values())
        convert.convert(d, c, events_per_group=50_000)
    assert int(marker.read_text()) in pids, "no worker of the cluster was killed decoding"
    serial = shutil.copytree(d, tmp_path / "serial", ignore=shutil.ignore_patterns(
        cache.CACHE_NAME + "*"))
    mpiscope.load(serial)
    a, b = cached_tables(serial), cached_tables(d)
    assert a.pop("meta") == b.pop("meta")
    for table in a:
        pd.testing.assert_frame_equal(a[table], b[table], obj=table)


def test_unreadable_rank_is_cut_short_as_the_serial_reader_says(
        traces: dict[str, Path], client, tmp_path: Path) -> None:
    """The last rank's events cut: read alone in its own task, it is unreadable; the
    serial reader marks it cut short and reads the others, and so does the conversion."""
    serial = shutil.copytree(traces["synth"], tmp_path / "serial")
    events = sorted((serial / "traces").glob("*.evt"))
    events[-1].write_bytes(events[-1].read_bytes()[:40])
    parallel = shutil.copytree(serial, tmp_path / "parallel")
    mpiscope.load(serial)
    convert.convert(parallel, client, events_per_group=1)
    a, b = cached_tables(serial), cached_tables(parallel)
    assert a["meta"].truncated_ranks == b["meta"].truncated_ranks != []
    for table in cache.TABLES:
        pd.testing.assert_frame_equal(a[table], b[table], obj=table)


def test_conversion_whose_workers_keep_dying_leaves_no_cache_and_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker running a `place` task (which writes cache files) is killed after
    writing part of its output (the task kills its own worker: a test hook in place of
    `place`, so no task runs unseen): after the retries the job fails with one line, and
    neither a cache nor its temporary directory is left."""
    import dask

    d = synth(tmp_path / "t", 8, 400_000)
    deaths = tmp_path / "deaths"
    deaths.mkdir()

    def die_placing(group, tmp, *args):  # runs on a worker (pickled by value)
        Path(tmp, "half-written.parquet").write_text("cut short")
        (deaths / str(os.getpid())).touch()
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(convert, "place", die_placing)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            cluster.connect(cluster.ClusterSpec(workers=1, memory_limit="1GB")) as c:
        with pytest.raises(UserError) as err:
            convert.convert(d, c, events_per_group=50_000)
    assert list(deaths.iterdir())
    assert "Dask worker died" in str(err.value)
    assert "\n" not in str(err.value) and "no cache written" in str(err.value)
    assert not (d / cache.CACHE_NAME).exists()
    assert not list(d.glob(f"{cache.CACHE_NAME}.tmp*"))
    assert open_cache(d) is None


# ------------------------------------------------------------ damaged traces and caches
@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Traces the reader repairs (issue 29): timestamps out of order and beyond the trace
    on two ranks, byte counts beyond 2^48, MPI_Isend known by a sparse region ref."""
    from mpiscope_testing import otf2mutate as mut
    from mpiscope_testing.tracegen import TraceBuilder, copy_trace

    d = tmp_path_factory.mktemp("damaged")
    base = synth(d / "base", 4, 20000)
    lo, hi = mut.clock_range(base)
    out = {}
    t = out["timestamps"] = copy_trace(base, d / "timestamps")
    for rank, to in ((1, [hi + 10**12, lo - 7, (lo + hi) // 2]), (3, [lo + 5])):
        evt = t / "traces" / f"{rank}.evt"
        data = evt.read_bytes()
        for at, value in zip(mut.timestamps(data, lo, hi)[100::300], to, strict=False):
            data = mut.with_timestamp(data, at, value)
        evt.write_bytes(data)
    t = out["sparse"] = copy_trace(base, d / "sparse")
    (t / "traces.def").write_bytes(mut.with_self_ref((t / "traces.def").read_bytes(),
                                                     mut.REGION, 3, 0xFFFFFFFE))
    for evt in (t / "traces").glob("*.evt"):
        evt.write_bytes(mut.with_region_ref(evt.read_bytes(), lo, hi, 3, 0xFFFFFFFE))
    tb = TraceBuilder(ranks=3)
    for r in range(3):
        tb.call(r, 0, 10, "MPI_Init")
        tb.send_call(r, 100, 110, dest=(r + 1) % 3, tag=1, nbytes=(1 << 62) + r)
        tb.recv_call(r, 105, 140, src=(r - 1) % 3, tag=1, nbytes=(1 << 62) + r)
        tb.collective(r, 150 + r, 200, "MPI_Allreduce", sent=8, received=1 << 60)
        tb.call(r, 300, 310, "MPI_Finalize")
    out["bytes"] = tb.write(d / "bytes")
    return out


@pytest.mark.parametrize("name", ["timestamps", "sparse", "bytes"])
def test_both_engines_repair_damaged_traces_alike(name: str, damaged: dict[str, Path],
                                                  client, tmp_path: Path) -> None:
    d = shutil.copytree(damaged[name], tmp_path / name)
    pandas_json = mpiscope.analyze(mpiscope.load(d, use_cache=False)).to_dict()
    convert.convert(d, client, events_per_group=1)  # a group per rank, read apart
    dask_json = mpiscope.analyze(d, engine="dask", client=client).to_dict()
    assert differences(pandas_json, dask_json) == []
    assert bool(pandas_json["warnings"]) == (name != "sparse")


def test_a_damaged_cache_the_dask_engine_finds_is_rebuilt(traces: dict[str, Path], client,
                                                          tmp_path: Path, capfd) -> None:
    """Another rank's calls in rank 2's place, under a manifest that says so (re-signed,
    as a forger would): the partitions' checks on the cluster refuse it."""
    d = shutil.copytree(traces["synth"], tmp_path / "t")
    want = mpiscope.analyze(mpiscope.load(d, use_cache=False)).to_dict()
    where = convert.convert(d, client)
    calls = where / "calls"
    (calls / "rank=2" / "part-0.parquet").write_bytes(
        (calls / "rank=1" / "part-0.parquet").read_bytes())
    man = json.loads((where / "manifest.json").read_text())
    rows = dict(map(tuple, man["tables"]["calls"]["partitions"]))
    man["tables"]["calls"]["partitions"] = [[v, rows[1] if v == 2 else n] for v, n in rows.items()]
    man["files"] = cache._records(cache._cache_files(where), where)
    man["self"] = cache._self_hash(man)
    (where / "manifest.json").write_text(json.dumps(man))
    capfd.readouterr()
    got = mpiscope.analyze(d, engine="dask", client=client).to_dict()
    assert differences(want, got) == []
    err = capfd.readouterr().err
    assert err.count("mpiscope: notice:") == 1 and "calls of other ranks" in err
