"""`--engine auto` (the default) plans memory before it reads an event
(engines/choose.py): pandas when the trace fits, Dask when its workers can hold the
largest rank, else one line with the figures — never an analysis that grows until the
kernel's OOM killer ends it.

The machine's free memory is what the plan depends on, so the tests set it (the
function the plan asks); the traces are real (mpiscope-synth), and their event counts
come from their definitions, bounded by their event files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope.engines import choose
from mpiscope_testing.enginetraces import synth


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth(tmp_path_factory.mktemp("choice") / "t", 4, 200_000)


def test_counts_come_from_the_definitions(trace: Path) -> None:
    events, largest = choose.event_counts(trace)
    assert events >= 200_000 and events // 4 <= largest <= events


def test_a_count_beyond_its_file_is_bounded_by_the_file(trace: Path, tmp_path: Path) -> None:
    d = shutil.copytree(trace, tmp_path / "t")
    evt = sorted((d / "traces").glob("*.evt"))[0]
    evt.write_bytes(evt.read_bytes()[:100])  # the definitions still claim its full count
    events, _ = choose.event_counts(d)
    full, _ = choose.event_counts(trace)
    assert events < full and full - events >= full // 4 - 100


def plan(trace: Path, avail: int, monkeypatch: pytest.MonkeyPatch, **kw) -> choose.Choice:
    monkeypatch.setattr(choose, "available_memory", lambda: avail)
    return choose.engine_for(trace, "auto", **kw)


def test_pandas_when_it_fits(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    c = plan(trace, 2**40, monkeypatch)
    assert c.engine == "pandas" and c.needed_bytes <= 2**40


def test_dask_when_only_the_workers_hold_it(trace: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # a trace of 2 x 10^7 events over 64 ranks: the plan's arithmetic on the counts its
    # definitions would give (a trace that size is bench/dask's, not a unit test's)
    monkeypatch.setattr(choose, "counts", lambda d: choose.Counts(20_000_000, 312_500))
    probe = plan(trace, 2**40, monkeypatch)
    # less than pandas needs, enough for 2 workers holding the largest rank and the client
    avail = probe.needed_bytes - 1
    assert 2 * probe.worker_bytes + probe.client_bytes <= avail
    c = plan(trace, avail, monkeypatch, memory_limit="2GB", workers=2)
    assert c.engine == "dask"
    assert "for pandas" in c.reason() and c.reason().endswith(": dask")
    # workers too small for the largest rank: neither
    small = plan(trace, avail, monkeypatch, memory_limit=str(probe.worker_bytes - 1))
    assert small.engine == "none"
    # a running cluster's workers are its own: only the client is planned here
    remote = plan(trace, probe.client_bytes, monkeypatch, scheduler="tcp://node:8786")
    assert remote.engine == "dask"


def test_refused_in_one_line_when_nothing_fits(trace: Path, tmp_path: Path) -> None:
    # the command as a user runs it, on a machine with (the plan is told) 64 MiB free
    code = ("import sys; from mpiscope.engines import choose; "
            "choose.available_memory = lambda: 64 * 2**20; "
            "from mpiscope.cli.dispatch import main; sys.exit(main(sys.argv[1:]))")
    run = subprocess.run([sys.executable, "-c", code, "analyze", str(trace), "--json",
                          str(tmp_path / "a.json")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"mpiscope: {trace}: too large for this machine's memory (")
    assert "for pandas, 0.1 GiB available" in line and "per worker" in line
    assert "MPISCOPE_FILTER" in line and "--scheduler" in line
    assert not (tmp_path / "a.json").exists()


@pytest.fixture(scope="module")
def big_rank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks of ~600 k events each: a rank's slice (one Dask task) needs more than
    a 300 MB worker holds."""
    return synth(tmp_path_factory.mktemp("bigrank") / "t", 2, 1_200_000)


def test_dask_refuses_in_one_line_a_rank_its_workers_cannot_hold(big_rank: Path,
                                                                  tmp_path: Path) -> None:
    """`--engine dask` with workers smaller than the largest rank's task stops before the
    cluster starts, naming the memory needed (it used to run until the workers were
    restarted at their limit and the job died with KilledWorker)."""
    _, largest = choose.event_counts(big_rank)
    need = choose.worker_bytes(largest)
    assert need > 300e6  # the trace is what the test says
    run = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(big_rank),
                          "--engine", "dask", "--memory-limit", "300MB", "--json",
                          str(tmp_path / "a.json")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2
    [line] = run.stderr.strip().splitlines()
    assert line.startswith(f"mpiscope: {big_rank}: the largest rank's {largest:,} events "
                           f"need ~{need / 2**30:.1f} GiB per Dask worker")
    assert "--memory-limit" in line and "MPISCOPE_FILTER" in line
    assert not (tmp_path / "a.json").exists()
    assert not (big_rank / ".mpiscope-cache").exists()  # nothing was converted


def test_a_running_clusters_small_workers_are_refused_before_any_task(big_rank: Path) -> None:
    """The same with a cluster of its own (`client=`, `--scheduler`): its workers'
    limits are asked for once connected."""
    from mpiscope.engines import cluster, dask_engine
    from mpiscope.errors import UserError

    with cluster.connect(cluster.ClusterSpec(workers=1, memory_limit="300MB")) as c:
        with pytest.raises(UserError, match="per Dask worker, the workers have 0.3 GiB"):
            dask_engine.analyze(big_rank, client=c)
    assert not (big_rank / ".mpiscope-cache").exists()
