"""Build the interposer's test programs (interposer/tests/programs) and run them as a user
would: mpirun with LD_PRELOAD."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mpiscope_testing import REPO

PROGRAMS = REPO / "interposer" / "tests" / "programs"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
MPIEXEC_MPICH = ["mpiexec.mpich"]
TIMEOUT = 180
# Open MPI ends the other ranks of a dying job with SIGTERM and, odls_base_sigkill_timeout
# seconds later, SIGKILL (1 s by default). In Open MPI 4.1 both waits (SIGCONT, wait,
# SIGTERM, wait, SIGKILL) are fixed sleeps, which the first child to die cuts short once
# and which then run g - 1 whole seconds: a job takes about twice the grace even when
# every rank is done at once (3 s: ~4.4 s, 10 s: ~18 s measured). A rank
# still writing its salvaged archive at the SIGKILL loses it. Near idle the SIGTERMed
# ranks of a traced job die 0.2-0.6 s after the SIGTERM; tests that check what they
# salvage give them this long, so a loaded machine has a wide margin.
SALVAGE_GRACE_S = 10
PATIENT = [*MPIRUN, "--mca", "odls_base_sigkill_timeout", str(SALVAGE_GRACE_S)]

COMPILERS = {
    ".c": ["mpicc", "-g", "-O0", "-Wall", "-Wextra"],
    ".cpp": ["mpicxx", "-g", "-O0", "-Wall"],
    # gfortran >= 10 rejects mpif.h's choice buffers of different types without this
    ".f90": ["mpif90", "-g", "-O0", "-ffree-line-length-none", "-fallow-argument-mismatch"],
}


@dataclass
class Job:
    returncode: int
    stdout: str
    stderr: str
    out: Path | None  # MPISCOPE_OUT of the run


def interposer_lib(mpi: str = "openmpi") -> str:
    """What a user would put in LD_PRELOAD: the output of `mpiscope lib`."""
    args = ["mpiscope", "lib"] + (["--mpi", mpi] if mpi != "openmpi" else [])
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()


def build(source: str, into: Path, compiler: list[str] | None = None) -> Path:
    """Compile programs/<source> with debug info into `into`; returns the executable."""
    src = PROGRAMS / source
    exe = into / src.stem
    cmd = (compiler or COMPILERS[src.suffix]) + ["-o", str(exe), str(src)]
    if src.stem.startswith("threads"):
        cmd.append("-lpthread")
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=into)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr}"
    return exe


def callsite(source: str, marker: str) -> str:
    """`file:line` of the line carrying `CALLSITE:<marker>` in programs/<source>."""
    lines = (PROGRAMS / source).read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines)
            if re.search(rf"CALLSITE:{re.escape(marker)}\b", line)]
    assert len(hits) == 1, f"marker CALLSITE:{marker} found {len(hits)} times in {source}"
    return f"{source}:{hits[0]}"


def run(cmd: list[str], np: int | None = None, out: Path | None = None, traced: bool = True,
        env: dict[str, str] | None = None, launcher: list[str] | None = None,
        mpi: str = "openmpi", timeout: float = TIMEOUT) -> Job:
    """Run `cmd` (under `launcher -np np` unless np is None) with or without the interposer."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    e.pop("MPISCOPE_OUT", None)
    if traced:
        e["LD_PRELOAD"] = interposer_lib(mpi)
        if out is not None:
            e["MPISCOPE_OUT"] = str(out)
    e.update(env or {})
    full = cmd if np is None else [*(launcher or MPIRUN), "-np", str(np), *cmd]
    proc = subprocess.run(full, capture_output=True, text=True, env=e, timeout=timeout)
    return Job(proc.returncode, proc.stdout, proc.stderr, out)


def run_mpich(source: str, into: Path, np: int, out: Path | None = None,
              args: list[str] | None = None, flags: list[str] | None = None,
              env: dict[str, str] | None = None) -> Job:
    """programs/<source> built with MPICH's compiler and run traced under mpiexec.mpich;
    the calling test is skipped where MPICH is not installed."""
    import pytest

    if not (have("mpicc.mpich") and have("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpicc.mpich / mpiexec.mpich missing)")
    exe = build(source, into, ["mpicc.mpich", "-g", "-O0", *(flags or [])])
    return run([str(exe), *(args or [])], np=np, out=out, mpi="mpich",
               launcher=MPIEXEC_MPICH, env=env)


def sorted_lines(text: str) -> list[str]:
    """Ranks print concurrently: compare stdout as a multiset of lines. Blank lines are
    left out: with PYTHONUNBUFFERED a print's text and its newline are separate writes,
    and mpirun may forward another rank's line between them, traced or not."""
    return sorted(line for line in text.splitlines() if line.strip())


def have(program: str) -> bool:
    return shutil.which(program) is not None


def tmpfs(mnt: Path, size: str):
    """Yield `mnt` with a real tmpfs of `size` mounted on it (root only: skips otherwise),
    unmounted afterwards: a disk that fills up for real."""
    import pytest

    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {proc.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def session_members(sid: int) -> list[int]:
    """Every live process of session `sid`: an MPI launcher's ranks run in process groups
    of their own, so killing the launcher's group leaves them spinning."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            stat = (d / "stat").read_text()
        except (OSError, ValueError):
            continue
        # after the command's ")": state ppid pgrp session
        fields = stat[stat.rindex(")") + 2:].split()
        if d.name.isdigit() and int(fields[3]) == sid:
            pids.append(int(d.name))
    return pids


def run_job(cmd: list[str], env: dict[str, str], timeout: float
            ) -> subprocess.CompletedProcess:
    """Run an MPI job in a session of its own; past `timeout` every process of the session
    is killed (exit code -SIGKILL, stderr saying so) instead of raising, so that the caller
    can still read what the job left behind (which test each rank hung in)."""
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    try:
        out, err = job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in session_members(job.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out, err = job.communicate()
        err = f"killed after {timeout:g} s (a hang)\n{err}"
    return subprocess.CompletedProcess(cmd, job.returncode, out, err)
