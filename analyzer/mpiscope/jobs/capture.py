"""Run a job with its stdout passed through unchanged while a copy is saved beside its trace.

`mpiscope run` uses this so a trace keeps the program's own figures of merit (Himeno's
MFLOPS, see fom.py) for `mpiscope compare`. The contract says the traced job's stdout is
exactly the untraced job's, so the copy must never change what the user sees:
- bytes are forwarded as they arrive (os.read on a pipe, no line or block buffering);
- stdin and stderr are the job's own, untouched;
- the copy is best effort: if it cannot be written (disk full...) the job still runs and
  prints as usual; the partial copy is removed and the reason returned for one line;
- if our stdout goes away (`| head`), the job sees a closed pipe, as it would untraced.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHUNK = 64 * 1024


@dataclass(frozen=True)
class Captured:
    returncode: int
    saved: Path | None  # where the copy of stdout went; None when it could not be written
    copy_error: str | None = None  # why not (strerror), when a copy was asked for


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _open_copy(path: Path) -> tuple[int | None, str | None]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666), None
    except OSError as e:
        return None, e.strerror


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _terminal_signals_the_job() -> bool:
    """True when a Ctrl-C at the terminal reaches the job itself (it shares our foreground
    process group), so forwarding SIGINT would deliver it twice (mpirun's second Ctrl-C
    means "kill now")."""
    try:
        tty = os.open("/dev/tty", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(tty) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(tty)


@contextlib.contextmanager
def _signals_reach(proc: subprocess.Popen) -> Iterator[None]:
    """While the job runs, signals meant for it end it the way they would end it untraced:
    we keep draining its output and return its exit code instead of dying first."""

    def forward(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT and _terminal_signals_the_job():
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, forward)
    except ValueError:  # not the main thread: signals stay as they are
        pass
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(cmd: list[str], env: dict[str, str], copy_to: Path | None,
        out_fd: int = 1) -> Captured:
    """Run `cmd`, forwarding its stdout to `out_fd` byte for byte and saving it to `copy_to`
    (None: no copy).

    Raises FileNotFoundError like subprocess when the command does not exist.
    """
    passing = _is_open(out_fd)  # checked first: a closed fd 1 would be reused by open()
    copy, copy_error = _open_copy(copy_to) if copy_to is not None else (None, None)
    opened = copy is not None
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
    except BaseException:
        if copy is not None:
            os.close(copy)
        raise
    src = proc.stdout.fileno()
    with _signals_reach(proc):
        while chunk := os.read(src, CHUNK):
            if passing:
                try:
                    _write_all(out_fd, chunk)
                except BrokenPipeError:
                    # the reader is gone: close our end so the job gets SIGPIPE/EPIPE on
                    # its next write, as it would have without us in between
                    break
                except OSError:
                    passing = False  # e.g. stdout closed: drain so the job runs on
            if copy is not None:
                try:
                    _write_all(copy, chunk)
                except OSError as e:  # disk full...: the job matters more than the copy
                    os.close(copy)
                    copy, copy_error = None, e.strerror
        proc.stdout.close()
        returncode = proc.wait()
    if returncode < 0:  # killed by a signal: what a shell shows for the untraced job
        returncode = 128 - returncode
    if copy is not None:
        try:
            os.close(copy)
        except OSError as e:  # a network file system may report a failed write only here
            copy, copy_error = None, e.strerror
    if opened and copy is None and copy_to is not None:
        with contextlib.suppress(OSError):  # a truncated copy would misquote the program
            copy_to.unlink()
    return Captured(returncode, copy_to if copy is not None else None, copy_error)
