"""Standard output that fails in one line: `> /dev/full` is an error, `| head` is not.

Python buffers stdout and flushes it again at exit, after `main` has returned, where a
failure would print "Exception ignored ..." and change the exit code. So the CLI runs
with `guarded_stdout()`: a write or flush that fails raises a UserError naming
`<stdout>` (ENOSPC, EIO, ...) or, for a reader that went away (EPIPE, e.g. `| head`),
is dropped quietly; either way fd 1 is then pointed at /dev/null so that no later flush
fails again (the "Note on SIGPIPE" of the Python signal docs). After EPIPE the command
carries on: its output files are still written, only the display is gone.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from mpiscope.errors import UserError

STDOUT = "<stdout>"


def _to_devnull(stream: TextIO) -> None:
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class GuardedStream:
    """A text stream that turns its own write failures into UserError (see module doc).
    Everything else (isatty, fileno, encoding: what rich asks) goes to the real stream."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _guard(self, op: Callable[..., Any], *args: Any) -> Any:
        if self.reader_gone:
            return len(args[0]) if args else None
        try:
            return op(*args)
        except BrokenPipeError:
            self.reader_gone = True
            _to_devnull(self._stream)
            return len(args[0]) if args else None
        except OSError as err:
            _to_devnull(self._stream)
            raise UserError(STDOUT, err.strerror or str(err)) from None

    def write(self, text: str) -> int:
        return self._guard(self._stream.write, text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[GuardedStream | None]:
    """sys.stdout guarded for the block and flushed at its end, however it ends (a failure
    of that last flush is a UserError too, not an error at interpreter exit)."""
    real = sys.stdout
    if real is None:  # started with fd 1 closed: Python has no stdout to guard
        yield None  # type: ignore[misc]
        return
    guarded = GuardedStream(real)
    sys.stdout = guarded  # type: ignore[assignment]  # rich looks sys.stdout up per print
    try:
        yield guarded
    finally:  # also after SystemExit (argparse's --help) and errors: what was printed
        try:  # before them is still flushed, and a failure of that is one line too
            guarded.flush()
        finally:
            sys.stdout = real
