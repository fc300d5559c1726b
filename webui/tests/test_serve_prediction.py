"""A what-if prediction is a trace like any other: `mpiscope serve ORIGINAL PREDICTED`
shows it beside the run it was predicted from (compare mode)."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from mpiscope_testing.webui_server import Server

HIMENO_C = Path(__file__).resolve().parents[2] / "workloads" / "himeno" / "himeno.c"


def allreduce_site() -> str:
    src = HIMENO_C.read_text().splitlines()
    return f"himeno.c:{next(i for i, s in enumerate(src, 1) if 'MPI_Allreduce(&wgosa' in s)}"


def test_serve_shows_the_prediction_beside_the_original(himeno_traces, tmp_path):
    original = himeno_traces["unpatched"]
    pred = tmp_path / "every-10"
    run = subprocess.run([sys.executable, "-m", "mpiscope", "whatif", str(original),
                          "--collective-every", f"MPI_Allreduce@{allreduce_site()}=10",
                          "--out", str(pred)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert (pred / "traces.otf2").exists()
    srv = Server(str(original), str(pred))
    try:
        with urllib.request.urlopen(f"{srv.url}/_dash-layout", timeout=60) as resp:
            layout = resp.read().decode()
        # two panels, one per trace, each named by its directory
        assert original.name in layout and pred.name in layout, srv.log()
    finally:
        srv.stop()
