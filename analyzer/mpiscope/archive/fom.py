"""Figures of merit printed by the traced program (e.g. Himeno's MFLOPS).

Programs like our Himeno end their stdout with one JSON line; the study saves the
program's stdout beside the trace as `program-output.txt` so reports can quote it.
"""

from __future__ import annotations

import json
from pathlib import Path

OUTPUT_FILE = "program-output.txt"


def last_json_line(text: str) -> dict | None:
    """The last line of `text` that parses as a JSON object, or None."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def read(trace_dir: Path) -> dict | None:
    """Figures of merit saved beside a trace, or None when the run left none."""
    path = Path(trace_dir) / OUTPUT_FILE
    if not path.is_file():
        return None
    return last_json_line(path.read_text(errors="replace"))
