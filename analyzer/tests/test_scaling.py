"""`mpiscope scaling` over runs of one program at 1, 2 and 4 ranks: the synchronization
share grows with the rank count (the last rank computes longer, everybody waits)."""

import json
import subprocess
from pathlib import Path

import pytest

from mpiscope.archive import reader
from mpiscope_testing.scenarios import traced_run


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


def test_scaling_table_json_and_plot(runs, tmp_path):
    out, html = tmp_path / "s.json", tmp_path / "s.html"
    p = subprocess.run(["mpiscope", "scaling", *map(str, runs), "--json", str(out),
                        "--html", str(html)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Breakdown vs rank count" in p.stdout
    rows = json.loads(out.read_text())
    assert [r["ranks"] for r in rows] == [1, 2, 4]  # sorted by rank count
    sync = [r["synchronization_share"] for r in rows]
    # one rank waits for nobody: its synchronization is the time in MPI_Barrier (however
    # long a busy machine kept it there); with more ranks the others wait for the last
    # one, which sleeps 15 ms longer per iteration than the rest compute (2 ms)
    assert sync[0] == pytest.approx(barrier_share(runs[1]), rel=1e-6, abs=1e-12)
    assert sync[1] > max(sync[0], 0.2) and sync[2] > max(sync[0], 0.2)
    for r in rows:
        assert r["compute_share"] + r["communication_share"] + r["synchronization_share"] \
            == pytest.approx(1.0)
    page = html.read_text()
    assert "Time breakdown vs rank count" in page and "synchronization" in page
    assert len(page) > 1_000_000  # plotly.js is embedded: viewable offline


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
