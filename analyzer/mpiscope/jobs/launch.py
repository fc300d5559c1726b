"""The one way to launch a traced job: `mpiscope run`, the Himeno study, tests and scripts
all come through `run`, on this machine (Open MPI or MPICH) or on the emulated cluster.

    outcome = run(["./app", "10"], Path("trace"), Target(), ranks=4)   # our launcher line
    outcome = run(["mpirun", "-np", "4", "./app"], Path("trace"), stdout="pass")  # a user's
    print(outcome.verdict())      # "mpiscope: trace written to trace/traces.otf2"

The environment preloads the interposer built for the target's MPI and points it at the
output directory; a status file collects what the interposer would otherwise say on
stderr about a missing trace, so the caller says it once, in the verdict.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mpiscope.archive import fom, outdir
from mpiscope.errors import UserError
from mpiscope.jobs import capture, mpirun, verdict
from mpiscope.jobs.mpirun import LOCAL, Target
from mpiscope.paths import interposer_library

STATUS_ENV = "MPISCOPE_STATUS_FILE"


def traced_env(out: Path, mpi: str = "openmpi",
               base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment that preloads the interposer and points it at `out`."""
    env = dict(os.environ if base is None else base)
    lib = str(interposer_library(mpi))
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else lib
    env["MPISCOPE_OUT"] = str(out.resolve())
    return env


@dataclass(frozen=True)
class Outcome:
    """How a job ended and what it left in `out`."""

    cmd: list[str]           # the command line that ran
    out: Path
    returncode: int          # as a shell shows it: 128 + N when killed by signal N
    traced: bool             # False: it ran untraced (the directory was unusable; said so)
    started: float           # per-rank traces older than this are an earlier job's
    said: list[str]          # the interposer's words from the status file
    stdout: str = ""         # stdout="capture": the job's stdout and stderr
    stderr: str = ""
    copy_error: str | None = None  # stdout="pass": why the copy beside the trace failed

    def verdict(self) -> str:
        """The line(s) to end with: where the trace is, or why there is none ("" after an
        untraced run, already explained before it started)."""
        if not self.traced:
            return ""
        not_saved = self.copy_error and (f"the program's output was not saved to "
                                         f"{self.out / fom.OUTPUT_FILE}: {self.copy_error}")
        return verdict.verdict(self.out, self.said, self.started, not_saved)


def _say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _clear_earlier_run(out: Path, say: Callable[[str], None]) -> bool:
    """Move an earlier run in `out` aside before the job starts, so its output copy never
    lands beside an old trace. False: it cannot be (never delete it, never mix): the job
    must run untraced."""
    try:
        if moved := outdir.move_earlier_run(out):
            say(f"mpiscope: the earlier run in {out} was moved to {moved}")
        return True
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:  # no directory there at all, earlier run or not
            say(f"mpiscope: warning: cannot write trace directory {out}: {e.strerror}; "
                "continuing untraced")
        else:
            say(f"mpiscope: warning: cannot move the earlier run in {out} aside "
                f"({e.strerror}); continuing untraced")
        return False


@contextlib.contextmanager
def _status_file() -> Iterator[tuple[str | None, list[str]]]:
    """A file for the interposer's rank 0 to write why there is no trace into (rather than
    on the job's stderr): its path (None: none could be made; the ranks then say it
    themselves), and the list its lines are read into when the job is done."""
    said: list[str] = []
    path = None
    with contextlib.suppress(OSError):
        fd, path = tempfile.mkstemp(prefix="mpiscope-status-")
        os.close(fd)
    try:
        yield path, said
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                said += Path(path).read_text(errors="replace").splitlines()
            with contextlib.suppress(OSError):
                os.unlink(path)


def _environment(out: Path, target: Target, *, traced: bool, passing: bool,
                 extra: Mapping[str, str] | None, status: str | None) -> dict[str, str]:
    env = traced_env(out, target.mpi) if traced else dict(os.environ, MPISCOPE_DISABLE="1")
    if traced and passing:  # ours, created before the ranks start
        env[outdir.JOB_OUTPUT_ENV] = fom.OUTPUT_FILE
    env.update(extra or {})
    if status is not None:  # forwarded like the rest: remote ranks write it too
        env[STATUS_ENV] = status
    return env


def _line(cmd: list[str], target: Target, ranks: int | None,
          env: Mapping[str, str]) -> list[str]:
    forward = mpirun.forwarded(env)
    if ranks is not None:
        return mpirun.launcher(ranks, target, forward=forward) + list(cmd)
    return mpirun.adapt(cmd, target, forward=forward)


def _captured(line: list[str], env: dict[str, str],
              timeout: float | None) -> tuple[int, str, str]:
    """(exit code as a shell shows it, stdout, stderr)."""
    proc = subprocess.run(line, env=env, capture_output=True, text=True, timeout=timeout)
    # killed by a signal: 128 + N, as capture.run returns it too
    return (128 - proc.returncode if proc.returncode < 0 else proc.returncode,
            proc.stdout, proc.stderr)


def run(cmd: list[str], out: Path, target: Target = LOCAL, *, ranks: int | None = None,
        stdout: Literal["pass", "capture"] = "capture", timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        say: Callable[[str], None] = _say_on_stderr) -> Outcome:
    """Run `cmd` traced into `out` on `target`.

    With `ranks`, `cmd` is the program and its arguments and the launcher line is ours
    (`mpirun.launcher`); without, `cmd` is the user's own launcher line, adapted to the
    target (`mpirun.adapt`). `env`: variables on top of ours.

    stdout="pass" (`mpiscope run`): the job's stdout passes through byte for byte and a
    copy is saved beside the trace (capture.py); an earlier run in `out` is moved aside
    first, and `say` tells the user where (or why the job runs untraced).
    stdout="capture": stdout and stderr are returned in the Outcome (`timeout` applies).

    Raises UserError, before anything is moved or started, when the job cannot be
    launched as asked; and when the command does not exist or outlives `timeout`.
    """
    passing = stdout == "pass"
    if ranks is None:
        mpirun.check(cmd, target)  # before anything else can fail: the line is the user's
    with _status_file() as (status, said):
        full_env = _environment(out, target, traced=True, passing=passing, extra=env,
                                status=status)
        line = _line(cmd, target, ranks, full_env)
        traced = not passing or _clear_earlier_run(out, say)
        if not traced:
            full_env = _environment(out, target, traced=False, passing=passing, extra=env,
                                    status=status)
            line = _line(cmd, target, ranks, full_env)
        started = time.time() - 2  # per-rank traces older than this are an earlier job's
        copy_error = None
        try:
            if passing:
                job = capture.run(line, full_env, out / fom.OUTPUT_FILE if traced else None)
                returncode, out_text, err_text = job.returncode, "", ""
                copy_error = job.copy_error
            else:
                returncode, out_text, err_text = _captured(line, full_env, timeout)
        except FileNotFoundError:
            raise UserError(line[0], "command not found") from None
        except subprocess.TimeoutExpired:
            raise UserError(shlex.join(line), f"timed out after {timeout:.0f} s") from None
    return Outcome(line, out, returncode, traced, started, said, out_text, err_text,
                   copy_error)
