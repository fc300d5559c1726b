"""The crash-safe live log's ring: a rank killed (SIGKILL) after its buffer was encoded and
its two ring slots reused many times is recovered with every call it made.

programs/selfkill.c makes a known number of MPI_Allreduce calls on MPI_COMM_SELF with a
4 KiB buffer (dozens of mid-run encodes, each a new log window written into one of the
ring's two slots and then copied into the events file by the log's writer thread), prints
its own count and kills itself outside any MPI call. `mpiscope recover` must give back a
trace holding exactly that many calls, read by `otf2-print` and by `mpiscope analyze`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
MPIRUN = ["mpirun", "--allow-run-as-root", "-np", "1"]


def killed_run(exe: Path, out: Path, calls: int, buffer: str) -> int:
    """Run selfkill traced; the count the program printed before it killed itself."""
    proc = subprocess.run(
        [sys.executable, "-m", "mpiscope", "run", "--out", str(out), "--", *MPIRUN, str(exe),
         str(calls)], env={**ENV, "MPISCOPE_BUFFER_SIZE": buffer}, capture_output=True,
        text=True, timeout=300)
    assert proc.returncode == 128 + signal.SIGKILL, proc.stderr
    (printed,) = re.findall(r"^calls (\d+)$", proc.stdout, re.M)
    return int(printed)


def otf2_lines(trace: Path, kind: str, region: str | None = None) -> int:
    proc = subprocess.run(["otf2-print", str(trace / "traces.otf2")], capture_output=True,
                          text=True, errors="replace", timeout=300)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr[-2000:]
    return sum(1 for line in proc.stdout.splitlines()
               if line.startswith(kind + " ") and (region is None or f'"{region}"' in line))


@pytest.mark.parametrize("calls", [3000, 3001])  # the kill in either slot of the ring
def test_a_rank_killed_after_many_window_recycles_is_recovered_with_every_call(
        programs, tmp_path: Path, calls: int) -> None:
    out = tmp_path / "trace"
    printed = killed_run(programs["selfkill.c"], out, calls, "4K")
    assert printed == calls
    live = out / ".mpiscope-live"
    assert (live / "rank0.ring").is_file() and (live / "rank0.events").is_file()
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "recover", str(out)], env=ENV,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "mpiscope: recovered rank 0 up to its kill" in proc.stderr
    assert not live.exists()  # taken whole: the log is gone
    trace = out / "rank0"
    # many more windows than the ring's two slots: each mid-run encode is a BufferFlush
    assert otf2_lines(trace, "BUFFER_FLUSH") >= 10
    assert otf2_lines(trace, "ENTER", "MPI_Allreduce") == printed
    assert otf2_lines(trace, "LEAVE", "MPI_Allreduce") == printed
    # and as the user reads it: the functions table counts every call
    rep = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(out), "--json",
                           str(rep)], env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    funcs = {f["name"]: f for f in json.loads(rep.read_text())["functions"]}
    assert funcs["MPI_Allreduce"]["calls"] == printed
