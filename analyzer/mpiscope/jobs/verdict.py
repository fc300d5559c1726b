"""What a traced job left behind, in the line(s) `mpiscope run` ends with: the trace, the
per-rank traces of a job that died (and which ranks left none), the crash-safe logs of
ranks killed outright, or why there is no trace."""

from __future__ import annotations

from pathlib import Path

from mpiscope.errors import UserError


def salvaged_ranks(out: Path, since: float = 0.0) -> list[int]:
    """Ranks whose per-rank trace (DIR/rank<N>/traces.otf2) a job that died left in `out`,
    written at or after `since` (rank<N>/ directories of an earlier job may remain)."""
    from mpiscope.archive import salvaged  # lazy: pandas & co. only after a job that died

    return [rank for rank, anchor in salvaged.archives(out).items()
            if anchor.stat().st_mtime >= since]


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def died_message(out: Path, ranks: list[int]) -> str:
    """What we tell the user when the job ended without MPI_Finalize: where the per-rank
    traces are, which ranks left none, and that `mpiscope analyze DIR` reads them."""
    from mpiscope.archive import salvaged

    try:
        size = salvaged.num_ranks(salvaged.archives(out)[ranks[0]])
    except (UserError, KeyError):
        size = 0
    text = (f"mpiscope: job ended without MPI_Finalize; {_ranks(ranks)}"
            f"{f' of {size}' if size else ''} saved per-rank traces in {out}/rank<N>/")
    lost = sorted(set(range(size)) - set(ranks))
    if lost:
        text += f" (none from {_ranks(lost)}: killed before writing one"
        text += f"{recoverable(out, lost)})"
    return text + f"; `mpiscope analyze {out}` reads them as one trace"


def recoverable(out: Path, lost: list[int]) -> str:
    """The clause naming the lost ranks that left a crash-safe log (archive/recover.py)."""
    from mpiscope.archive import recover

    live = [r for r in lost if r in recover.live_ranks(out)]
    if not live:
        return ""
    return (f"; `mpiscope analyze` recovers {_ranks(live)} up to the kill from "
            f"{'its' if len(live) == 1 else 'their'} crash-safe log")


def verdict(out: Path, said: list[str], since: float, not_saved: str | None) -> str:
    """Where the trace is, or why there is none (`said`: the interposer's own words from
    the status file; "told": it warned on stderr at MPI_Init already, about this
    directory), and whether the program's output was saved (`not_saved`: why not)."""
    from mpiscope.archive import recover

    told = "told" in said
    lines = [line for line in said if line != "told"]
    if (out / "traces.otf2").is_file():
        lines.append(f"mpiscope: trace written to {out}/traces.otf2")
    elif ranks := salvaged_ranks(out, since):  # MPI_Abort or no MPI_Finalize
        lines.append(died_message(out, ranks))
    elif live := recover.live_ranks(out):  # every rank killed outright
        lines.append(f"mpiscope: job ended without MPI_Finalize and no rank wrote its trace; "
                     f"`mpiscope analyze {out}` recovers {_ranks(live)} up to the kill from "
                     "the crash-safe logs")
    elif not lines and not told:  # no MPI_Init (not an MPI program?), or a remote rank 0
        lines.append(f"mpiscope: no trace written to {out}")
    if not_saved and lines:
        lines[-1] += f" ({not_saved})"
    return "\n".join(lines)
