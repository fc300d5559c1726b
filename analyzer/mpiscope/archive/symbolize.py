"""Call sites named again once debug files are installed (`mpiscope symbolize DIR`).

The interposer records, beside each call site's name, the object and offset it was
resolved from (the anchor's `MPISCOPE::CALLSITE_OBJECTS` property, docs/trace-format.md).
`mpiscope-symbolize` (C, built with the interposer: it reuses its libdw resolution)
resolves them again, now that e.g. a Debian `-dbgsym` package put debug files under
/usr/lib/debug, and replaces the archive's global definitions in one rename, with only
better names changed. The analysis cache is keyed on the definitions file's size and
mtime (archive.cache.fingerprint), so the next `analyze` reads the new names.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mpiscope.archive import salvaged
from mpiscope.errors import UserError
from mpiscope.paths import interposer_tool

_RESULT = re.compile(r"improved (\d+) of (\d+) call sites")


@dataclass
class Symbolized:
    archive: Path  # the anchor (traces.otf2) whose definitions were re-resolved
    improved: int  # call sites with a better name now
    total: int     # call sites with a recorded object+offset
    warnings: list[str]  # e.g. an object rebuilt since the run: its call sites kept


def tool() -> Path:
    """The `mpiscope-symbolize` program next to the interposer library."""
    return interposer_tool("mpiscope-symbolize")


def anchors(trace_dir: Path) -> list[Path]:
    """The archives of a trace directory: its traces.otf2, or a dead job's per-rank ones."""
    if (trace_dir / "traces.otf2").is_file():
        return [trace_dir / "traces.otf2"]
    return list(salvaged.archives(trace_dir).values())


def symbolize(trace_dir: Path, env: dict[str, str] | None = None) -> list[Symbolized]:
    """Re-resolve every call site of every archive in `trace_dir`. An archive the tool
    cannot rewrite is left as it was and raises UserError with the tool's reason."""
    found = anchors(Path(trace_dir))
    if not found:
        raise UserError(str(trace_dir), "no OTF2 trace (traces.otf2) in this directory")
    done = []
    for anchor in found:
        proc = subprocess.run([str(tool()), str(anchor.parent)], capture_output=True,
                              text=True, env=env)
        m = _RESULT.search(proc.stdout)
        if proc.returncode != 0 or not m:
            why = proc.stderr.strip().removeprefix("mpiscope-symbolize: ")
            raise UserError(str(anchor), why or f"mpiscope-symbolize failed ({proc.returncode})")
        warnings = [line.removeprefix("mpiscope-symbolize: warning: ")
                    for line in proc.stderr.splitlines() if "warning: " in line]
        done.append(Symbolized(anchor, int(m.group(1)), int(m.group(2)), warnings))
    return done
