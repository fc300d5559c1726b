"""bench/himeno/run, driven as `make bench` drives it, on a tiny problem."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_bench_reports_mflops_ratio_and_allreduce_share(himeno, tmp_path):
    env = dict(os.environ, HIMENO_SIZE="XS", HIMENO_ITERATIONS="20", HIMENO_RANKS="2",
               REPEATS="1", KEEP=str(tmp_path))
    proc = subprocess.run(["bash", str(ROOT / "bench" / "himeno" / "run")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^\s+2 unpatched\s+2x1x1\s+\d+\.\d", out, re.M)
    assert re.search(r"^\s+2\s+patched\s+2x1x1\s+\d+\.\d", out, re.M)
    assert re.search(r"ranks 2: patched/unpatched MFLOPS ratio \d+\.\d{3} \(best\)", out)
    assert "gosa identical" in out
    # mpiscope comes with the project, so the traced part runs: 20 reductions per rank
    # unpatched, only the last one patched
    assert re.search(r"ranks 2 unpatched: MPI_Allreduce +\d+\.\d% of run time \(40 calls", out)
    assert re.search(r"ranks 2 +patched: MPI_Allreduce +\d+\.\d% of run time \(2 calls", out)
