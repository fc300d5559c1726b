"""Traced runs killed outright: `run_and_kill` starts a program under `mpiscope run` and
kill -9s chosen ranks once they have printed enough iterations (tests of crash-safe logs).

    from mpiscope_testing.killing import run_and_kill
    job = run_and_kill(exe, tmp / "trace", after=40)    # rank 1 killed after iteration 40
    assert job.returncode != 0 and (job.out / ".mpiscope-live").is_dir()

The program prints `rank R pid P iteration I` lines (analyzer/tests/programs/killed.c).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RANKS = 3
KILLED = 1
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe",
          # time for the SIGTERMed ranks to salvage on a loaded machine (test_died_jobs.py)
          "--mca", "odls_base_sigkill_timeout", "3"]


@dataclass
class Killed:
    out: Path
    returncode: int
    stderr: str
    printed: int  # iterations rank 1 had printed (so completed) before the kill


def run_and_kill(exe: Path, out: Path, after: int, env: dict[str, str] | None = None,
                 ranks: int = RANKS, victims: tuple[int, ...] = (KILLED,),
                 args: tuple[str, ...] = ()) -> Killed:
    """Run killed.c traced; kill -9 the `victims` once rank victims[0] printed `after`
    iterations (`printed`: how many it had)."""
    cmd = [sys.executable, "-m", "mpiscope", "run", "--out", str(out), "--", *MPIRUN, "-np",
           str(ranks), str(exe), *args]
    proc = subprocess.Popen(cmd, env={**ENV, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    printed, pids = 0, {}
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        words = line.split()  # rank R pid P iteration I
        if len(words) == 6 and words[0] == "rank":
            pids[int(words[1])] = int(words[3])
            if int(words[1]) == victims[0]:
                printed = int(words[5])
            if printed >= after and all(v in pids for v in victims):
                for v in victims:
                    os.kill(pids[v], signal.SIGKILL)
                break
        assert time.monotonic() < deadline, "the ranks did not get going"
    _, err = proc.communicate(timeout=120)
    return Killed(out, proc.returncode, err, printed)


