"""Ranks killed outright (SIGKILL, a crash) recovered from their crash-safe live logs.

While a job runs, every rank's raw event buffer is a slot of `DIR/.mpiscope-live/
rank<N>.ring`, each batch copied into `rank<N>.events` once encoded, with the definitions
it needs in `rank<N>.defs` (interposer/src/live.h). A clean MPI_Finalize or a successful
salvage removes them; a rank
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
from mpiscope.errors import UserError
from mpiscope.paths import interposer_tool

LIVE_DIR = salvaged.LIVE_DIR
_DEFS = re.compile(r"rank(\d+)\.defs")
# How long `mpiscope-recover` may take for one rank: it reads the log once, writes the
# trace and reads it back, at 150-300 MB/s here (bench/recover_speed.py); a base for the
# call sites' debug information, then per MiB of log many times what it needs.
TIMEOUT_BASE_S = 60.0
TIMEOUT_PER_MIB_S = 0.5


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
            for suffix in ("events", "ring", "defs", salvaged.UNRECOVERED):
                (live / f"rank{rank}.{suffix}").unlink(missing_ok=True)
    try:
        live.rmdir()
    except OSError:  # other ranks' logs still there, or none at all
        pass


def tool() -> Path:
    """The `mpiscope-recover` program next to the interposer library."""
    return interposer_tool("mpiscope-recover")


def timeout_for(trace_dir: Path, rank: int) -> float:
    """Seconds `mpiscope-recover` may take for rank's log: a base plus its size."""
    size = 0
    for suffix in ("events", "ring", "defs"):
        try:
            size += (Path(trace_dir) / LIVE_DIR / f"rank{rank}.{suffix}").stat().st_size
        except OSError:
            pass
    return TIMEOUT_BASE_S + TIMEOUT_PER_MIB_S * size / (1 << 20)


def recover(trace_dir: Path, ranks: list[int] | None = None
            ) -> tuple[list[Recovered], list[str]]:
    """Recover `ranks` (default: every orphaned one) into DIR/rank<N>/traces.otf2.
    Returns what was recovered and one problem line per rank that could not be (its log
    is then kept, with the line beside it for the readers: salvaged.unrecovered). A rank
    already recovered has no live log left, so running this again changes nothing."""
    trace_dir = Path(trace_dir)
    todo = orphaned(trace_dir) if ranks is None else ranks
    if ranks is None:
        _drop_served(trace_dir)
    done: list[Recovered] = []
    problems: list[str] = []
    for rank in todo:
        why = _not_a_log(trace_dir, rank)
        got = None if why else _run_tool(trace_dir, rank)
        if isinstance(got, Recovered):
            done.append(got)
            (trace_dir / LIVE_DIR / f"rank{rank}.{salvaged.UNRECOVERED}").unlink(
                missing_ok=True)
        else:
            problems.append(why or got or f"rank {rank}: not recovered")
            _note(trace_dir, rank, problems[-1])
    try:
        (trace_dir / LIVE_DIR).rmdir()  # every log served
    except OSError:
        pass
    return done, problems


def _run_tool(trace_dir: Path, rank: int) -> Recovered | str:
    """One rank through `mpiscope-recover`, under a timeout sized to its log: what it
    recovered, or the one line saying why not. Success is its exit status 0, its summary
    line and the archive in place with the log gone; anything else is a failure."""
    limit = timeout_for(trace_dir, rank)
    try:
        proc = subprocess.run([str(tool()), str(trace_dir.resolve()), str(rank)],
                              capture_output=True, text=True, errors="replace", timeout=limit)
    except subprocess.TimeoutExpired:
        return (f"rank {rank}: mpiscope-recover did not finish within {limit:.0f} s (killed); "
                "its log is kept")
    except (OSError, UserError) as err:
        return f"rank {rank}: cannot run mpiscope-recover: {getattr(err, 'problem', err)}"
    lines = [line.removeprefix("mpiscope-recover: ") for line in proc.stderr.splitlines()
             if line.strip()]
    if proc.returncode < 0:
        return f"rank {rank}: mpiscope-recover died of signal {-proc.returncode}" + \
            "".join(f"; {line}" for line in lines)
    m = re.fullmatch(r"rank (\d+): (.*)", proc.stdout.strip())
    if proc.returncode != 0 or not m or int(m.group(1)) != rank:
        what = "; ".join(lines) or (f"rank {rank}: mpiscope-recover exited with status "
                                    f"{proc.returncode}")
        return what if what.startswith(f"rank {rank}: ") else f"rank {rank}: {what}"
    if rank not in salvaged.archives(trace_dir) or rank in live_ranks(trace_dir):
        return (f"rank {rank}: mpiscope-recover reported success but left no complete "
                f"archive in {trace_dir / f'rank{rank}'} or kept its log")
    return Recovered(rank, m.group(2))


def _note(trace_dir: Path, rank: int, problem: str) -> None:
    """The problem beside the kept log, for whoever reads the trace next."""
    try:
        (trace_dir / LIVE_DIR / f"rank{rank}.{salvaged.UNRECOVERED}").write_text(problem + "\n")
    except OSError:  # a read-only trace: the stderr line is all there is
        pass


def _not_a_log(trace_dir: Path, rank: int) -> str | None:
    """Why rank's live log is not read, or None: a FIFO, device or socket in place of
    one of its files would make the recovery wait forever for a writer (as for the
    trace's own files, decode.require_regular_files)."""
    for suffix in ("events", "ring", "defs"):
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
    lines += [f"mpiscope: warning: cannot recover {p} (analyzed without it; log kept)"
              for p in problems]
    return lines


def before_reading(trace_dir: Path) -> list[str]:
    """What every command that reads a trace does first (analyze, compare, serve, scaling):
    a job whose ranks were killed outright left crash-safe logs instead of traces, so
    recover them; the lines tell the user. Nothing for a finished trace."""
    path = Path(trace_dir)
    if not path.is_dir() or (path / "traces.otf2").exists() or not live_ranks(path):
        return []
    return notices(path)
