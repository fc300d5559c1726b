"""`mpiscope scaling` over runs of one program at 1, 2 and 4 ranks: each run's
synchronization is the waiting its own trace shows (how much a busy machine leaves of
the injected imbalance is up to its scheduler); and on runs made by construction, where
the last rank computes longer and everybody waits for it, the synchronization share
grows with the rank count."""

import json
import subprocess
from pathlib import Path

import pytest

from mpiscope.archive import reader
from mpiscope_testing import truth
from mpiscope_testing.scenarios import traced_run
from mpiscope_testing.tracegen import TraceBuilder


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("scaling")
    return [traced_run("imbalance", n, ["5"], d) for n in (4, 1, 2)]


def barrier_share(run: Path) -> float:
    """A one-rank run's time in MPI_Barrier over its measured interval (end of MPI_Init to
    start of MPI_Finalize), from the trace's own timestamps."""
    c = reader.load(run).calls
    init_end = c.loc[c["function"] == "MPI_Init", "end"].max()
    fin_start = c.loc[c["function"] == "MPI_Finalize", "start"].min()
    barrier = c[c["function"] == "MPI_Barrier"]
    return float((barrier["end"] - barrier["start"]).sum() / (fin_start - init_end))


def scaling(runs: list[Path], tmp_path: Path) -> tuple[subprocess.CompletedProcess, list]:
    out, html = tmp_path / "s.json", tmp_path / "s.html"
    p = subprocess.run(["mpiscope", "scaling", *map(str, runs), "--json", str(out),
                        "--html", str(html)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p, json.loads(out.read_text())


def test_scaling_table_json_and_plot(runs, tmp_path):
    p, rows = scaling(runs, tmp_path)
    assert "Breakdown vs rank count" in p.stdout
    assert [r["ranks"] for r in rows] == [1, 2, 4]  # sorted by rank count
    # one rank waits for nobody: its synchronization is the time in MPI_Barrier (however
    # long a busy machine kept it there)
    assert rows[0]["synchronization_share"] == pytest.approx(barrier_share(runs[1]),
                                                             rel=1e-6, abs=1e-12)
    for r in rows:
        assert r["compute_share"] + r["communication_share"] + r["synchronization_share"] \
            == pytest.approx(1.0)
        # with more ranks, the others wait for the last one: the barriers, the waiting in
        # the Allreduces and for late senders that this run's timestamps show are all
        # synchronization, and it is time in MPI
        t = reader.load(Path(r["trace"]))
        waited = (truth.mpi_time(t, "MPI_Barrier").sum()
                  + (truth.nxn(t, "MPI_Allreduce")[0].sum()
                     + truth.late_sender(t)[0].sum()) / 1e9)
        assert waited * (1 - 1e-9) <= r["synchronization_s"] <= truth.mpi_time(t).sum() \
            * (1 + 1e-9), r
    page = (tmp_path / "s.html").read_text()
    assert "Time breakdown vs rank count" in page and "synchronization" in page
    assert len(page) > 1_000_000  # plotly.js is embedded: viewable offline


def made(tmp: Path, ranks: int) -> Path:
    """A run of `ranks` ranks (µs): MPI_Init until 10; 3 iterations of 1000 in which every
    rank but the last computes 100, the last 900, then all meet in an Allreduce that ends
    10 after the last one entered it; MPI_Finalize at 3010."""
    us = 1000
    tb = TraceBuilder(ranks=ranks, program="/opt/app/imbalanced")
    for r in range(ranks):
        tb.call(r, 0, 10 * us, "MPI_Init")
        tb.call(r, 3010 * us, 3020 * us, "MPI_Finalize")
        for i in range(3):
            b = (10 + 1000 * i) * us
            work = 900 if r == ranks - 1 else 100
            tb.collective(r, b + work * us, b + 910 * us, "MPI_Allreduce", sent=8,
                          received=8, callsite="app.c:30")
    return tb.write(tmp / f"r{ranks}")


def test_synchronization_share_grows_with_the_rank_count(tmp_path):
    p, rows = scaling([made(tmp_path, n) for n in (4, 1, 2)], tmp_path)
    assert [r["ranks"] for r in rows] == [1, 2, 4]
    # per iteration each of the n - 1 early ranks waits 800 of the n x 1000 rank-µs;
    # every rank's last 10 in the Allreduce is communication, the rest compute
    assert [r["synchronization_share"] for r in rows] == pytest.approx(
        [0.0, 1 * 800 / 2000, 3 * 800 / 4000])
    assert [r["communication_share"] for r in rows] == pytest.approx([0.01] * 3)


def test_png_without_kaleido_is_a_clear_error(runs, tmp_path):
    try:
        import kaleido  # noqa: F401
        pytest.skip("kaleido installed: PNG export works")
    except ImportError:
        pass
    png = tmp_path / "s.png"
    p = subprocess.run(["mpiscope", "scaling", str(runs[0]), "--png", str(png)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert p.stderr.startswith(f"mpiscope: {png}: PNG export needs kaleido")
