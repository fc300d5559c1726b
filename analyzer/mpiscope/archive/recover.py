"""Ranks killed outright (SIGKILL, a crash) recovered from their crash-safe live logs.

While a job runs, every rank's raw event buffer is a window onto
`DIR/.mpiscope-live/rank<N>.events`, with the definitions it needs in `rank<N>.defs`
(interposer/src/live.h). A clean MPI_Finalize or a successful salvage removes them; a rank
killed by SIGKILL or a crash leaves them behind. `mpiscope-recover` (built with the
interposer, C: it reuses the interposer's event encoder) turns them into the per-rank
archive `DIR/rank<N>/traces.otf2` that a salvaging rank writes, so `salvaged.py` then reads
it together with the others, unchanged.
"""

from __future__ import annotations

import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mpiscope.archive import salvaged
from mpiscope.paths import interposer_tool

LIVE_DIR = ".mpiscope-live"
_DEFS = re.compile(r"rank(\d+)\.defs")


@dataclass
class Recovered:
    rank: int
    summary: str  # the tool's line: events, seconds from MPI_Init to the last one


def live_ranks(trace_dir: Path) -> list[int]:
    """Ranks that left a live log in `trace_dir` (killed, or still running)."""
    live = Path(trace_dir) / LIVE_DIR
    if not live.is_dir():
        return []
    return sorted(int(m.group(1)) for p in live.iterdir() if (m := _DEFS.fullmatch(p.name)))


def orphaned(trace_dir: Path) -> list[int]:
    """Ranks with a live log but no complete per-rank archive: killed before (or while)
    writing one."""
    done = salvaged.archives(Path(trace_dir))
    return [r for r in live_ranks(trace_dir) if r not in done]


def _drop_served(trace_dir: Path) -> None:
    """Live logs of ranks whose salvaged archive is complete: killed after writing it but
    before removing the log. The archive has all their events."""
    live = trace_dir / LIVE_DIR
    done = salvaged.archives(trace_dir)
    for rank in live_ranks(trace_dir):
        if rank in done:
            for suffix in ("events", "defs"):
                (live / f"rank{rank}.{suffix}").unlink(missing_ok=True)
    try:
        live.rmdir()
    except OSError:  # other ranks' logs still there, or none at all
        pass


def tool() -> Path:
    """The `mpiscope-recover` program next to the interposer library."""
    return interposer_tool("mpiscope-recover")


def recover(trace_dir: Path, ranks: list[int] | None = None
            ) -> tuple[list[Recovered], list[str]]:
    """Recover `ranks` (default: every orphaned one) into DIR/rank<N>/traces.otf2.
    Returns what was recovered and one problem line per rank that could not be. A rank
    already recovered has no live log left, so running this again changes nothing."""
    todo = orphaned(trace_dir) if ranks is None else ranks
    if ranks is None:
        _drop_served(Path(trace_dir))
    refused = [_not_a_log(Path(trace_dir), r) for r in todo]
    problems = [p for p in refused if p]
    todo = [r for r, p in zip(todo, refused, strict=True) if not p]
    if not todo:
        return [], problems
    proc = subprocess.run([str(tool()), str(Path(trace_dir).resolve()), *map(str, todo)],
                          capture_output=True, text=True)
    done = []
    for line in proc.stdout.splitlines():
        m = re.match(r"rank (\d+): (.*)", line)
        if m:
            done.append(Recovered(int(m.group(1)), m.group(2)))
    problems += [line.removeprefix("mpiscope-recover: ") for line in proc.stderr.splitlines()
                 if line.strip()]
    return done, problems


def _not_a_log(trace_dir: Path, rank: int) -> str | None:
    """Why rank's live log is not read, or None: a FIFO, device or socket in place of
    one of its files would make the recovery wait forever for a writer (as for the
    trace's own files, decode.require_regular_files)."""
    for suffix in ("events", "defs"):
        path = trace_dir / LIVE_DIR / f"rank{rank}.{suffix}"
        try:
            mode = path.stat().st_mode
        except OSError:
            continue  # missing: the tool says so
        if not stat.S_ISREG(mode):
            return f"rank {rank}: {path}: not a regular file"
    return None


def notices(trace_dir: Path) -> list[str]:
    """Recover every orphaned rank of `trace_dir`; one line per rank for the user."""
    done, problems = recover(trace_dir)
    live = Path(trace_dir) / LIVE_DIR
    lines = [f"mpiscope: recovered rank {r.rank} up to its kill from its crash-safe log in "
             f"{live} ({r.summary})" for r in done]
    lines += [f"mpiscope: warning: cannot recover {p}" for p in problems]
    return lines


def before_reading(trace_dir: Path) -> list[str]:
    """What every command that reads a trace does first (analyze, compare, serve, scaling):
    a job whose ranks were killed outright left crash-safe logs instead of traces, so
    recover them; the lines tell the user. Nothing for a finished trace."""
    path = Path(trace_dir)
    if not path.is_dir() or (path / "traces.otf2").exists() or not live_ranks(path):
        return []
    return notices(path)
