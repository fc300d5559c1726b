"""User-facing errors: printed as one line `mpiscope: <subject>: <problem>`, exit code 2."""

from __future__ import annotations

import re

# control characters (a path or a trace's name may hold ESC sequences): shown as \xNN
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")


class UserError(Exception):
    """An error caused by the user's input (bad path, corrupt trace, missing tool)."""

    def __init__(self, subject: str | None, problem: str, exit_code: int = 2) -> None:
        self.subject = subject
        self.problem = problem
        self.exit_code = exit_code
        super().__init__(f"{subject}: {problem}" if subject else problem)

    def one_line(self) -> str:
        return one_line(f"mpiscope: {self}")


def one_line(text: str) -> str:
    """`text` as one line for stderr: white space runs as one space, other control
    characters shown as \\xNN."""
    return " ".join(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).split())
