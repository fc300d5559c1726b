"""Launching MPI jobs the way our machines need (root, more ranks than cores)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from mpiscope.cli.run import traced_env


def mpirun(ranks: int, mpi: str = "openmpi") -> list[str]:
    """The launcher prefix for `ranks` processes on this machine."""
    if mpi == "mpich":
        return ["mpiexec.mpich", "-n", str(ranks)]
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def run_traced(cmd: list[str], out: Path, mpi: str = "openmpi", timeout: float = 300,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `cmd` with the interposer preloaded, writing its trace to `out`."""
    full_env = traced_env(out, mpi)
    full_env.update(env or {})
    return subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
