"""`mpiscope run [--out DIR] [--cluster] -- mpirun -np N ./app`: trace a job without recompiling.

With `--cluster` the Open MPI job runs on the emulated cluster (`mpiscope cluster up`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import tempfile
import time
from pathlib import Path

from mpiscope.archive import fom, outdir
from mpiscope.errors import UserError
from mpiscope.jobs import capture
from mpiscope.paths import MPI_FLAVOURS, interposer_library

HELP = "run an MPI job with the interposer preloaded and write an OTF2 trace"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", "-o", type=Path, default=None,
                   help="trace directory (default: ./mpiscope-YYYYmmdd-HHMMSS)")
    p.add_argument("--mpi", choices=MPI_FLAVOURS, default=None,
                   help="MPI library of the job (default: guessed from the launcher)")
    p.add_argument("--cluster", action="store_true",
                   help="run on the emulated cluster (`mpiscope cluster up`): adds hostfile, "
                   "launch agent and TCP/shared-memory options to the Open MPI mpirun")
    p.add_argument("--cluster-prefix", default="mpiscope", help=argparse.SUPPRESS)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- launcher and program")


def default_out_dir() -> Path:
    return Path(f"mpiscope-{time.strftime('%Y%m%d-%H%M%S')}")


def guess_mpi(cmd: list[str]) -> str:
    launcher = Path(cmd[0]).name if cmd else ""
    return "mpich" if "mpich" in launcher or "hydra" in launcher else "openmpi"


def traced_env(out: Path, mpi: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment that preloads the interposer and points it at `out`."""
    env = dict(os.environ if base is None else base)
    lib = str(interposer_library(mpi))
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = f"{lib}:{preload}" if preload else lib
    env["MPISCOPE_OUT"] = str(out.resolve())
    return env


def salvaged_ranks(out: Path, since: float = 0.0) -> list[int]:
    """Ranks whose per-rank trace (DIR/rank<N>/traces.otf2) a job that died left in `out`,
    written at or after `since` (rank<N>/ directories of an earlier job may remain)."""
    from mpiscope.archive import salvaged  # lazy: pandas & co. only after a job that died

    return [rank for rank, anchor in salvaged.archives(out).items()
            if anchor.stat().st_mtime >= since]


def recover_live(out: Path) -> list[int]:
    from mpiscope.archive import recover

    return recover.live_ranks(out)


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
    """The clause naming the lost ranks that left a crash-safe log (recover.py)."""
    from mpiscope.archive import recover

    live = [r for r in lost if r in recover.live_ranks(out)]
    if not live:
        return ""
    return (f"; `mpiscope analyze` recovers {_ranks(live)} up to the kill from "
            f"{'its' if len(live) == 1 else 'their'} crash-safe log")


def run(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError(
            None, "run: no command given (usage: mpiscope run --out DIR -- mpirun -np N ./app)"
        )
    out: Path = args.out or default_out_dir()
    if getattr(args, "cluster", False):
        from mpiscope.jobs.cluster import cluster_command  # lazy: only --cluster needs it

        if args.mpi == "mpich":
            raise UserError(None, "run: --cluster works with Open MPI only")
        cmd = cluster_command(cmd, traced=True, prefix=args.cluster_prefix)
    env = traced_env(out, args.mpi or guess_mpi(cmd))
    env[outdir.JOB_OUTPUT_ENV] = fom.OUTPUT_FILE  # ours, created before the ranks start
    copy_to: Path | None = out / fom.OUTPUT_FILE
    try:
        # before the job starts, so its program-output.txt never lands beside an old trace
        if moved := outdir.move_earlier_run(out):
            print(f"mpiscope: the earlier run in {out} was moved to {moved}", file=sys.stderr)
    except OSError as e:  # never delete it, never mix: the job runs, untraced
        if e.errno == errno.ENAMETOOLONG:  # no directory there at all, earlier run or not
            print(f"mpiscope: warning: cannot write trace directory {out}: {e.strerror}; "
                  "continuing untraced", file=sys.stderr)
        else:
            print(f"mpiscope: warning: cannot move the earlier run in {out} aside "
                  f"({e.strerror}); continuing untraced", file=sys.stderr)
        env, copy_to = dict(os.environ, MPISCOPE_DISABLE="1"), None
    started = time.time() - 2  # per-rank traces older than this are an earlier job's
    # the interposer's rank 0 puts why there is no trace here rather than on the job's
    # stderr, so the user reads one line about the trace, ours, at the end
    status = None
    with contextlib.suppress(OSError):  # no room even for that: the ranks say it themselves
        fd, status = tempfile.mkstemp(prefix="mpiscope-status-")
        os.close(fd)
        env["MPISCOPE_STATUS_FILE"] = status
    said: list[str] = []
    try:
        # stdout passes through unchanged; a copy beside the trace keeps the program's
        # figures of merit (e.g. Himeno's MFLOPS) for `mpiscope compare`
        proc = capture.run(cmd, env, copy_to)
    except FileNotFoundError:
        raise UserError(cmd[0], "command not found") from None
    finally:
        if status is not None:
            with contextlib.suppress(OSError):
                said = Path(status).read_text(errors="replace").splitlines()
            with contextlib.suppress(OSError):
                os.unlink(status)
    if copy_to is None:
        return proc.returncode
    if text := verdict(out, said, started, proc.copy_error and
                       f"the program's output was not saved to {copy_to}: {proc.copy_error}"):
        print(text, file=sys.stderr)
    return proc.returncode


def verdict(out: Path, said: list[str], since: float, not_saved: str | None) -> str:
    """The line(s) `mpiscope run` ends with: where the trace is, or why there is none
    (`said`: the interposer's own words; "told": it warned on stderr at MPI_Init already,
    about this directory), and whether the program's output was saved."""
    told = "told" in said
    lines = [line for line in said if line != "told"]
    if (out / "traces.otf2").is_file():
        lines.append(f"mpiscope: trace written to {out}/traces.otf2")
    elif ranks := salvaged_ranks(out, since):  # MPI_Abort or no MPI_Finalize
        lines.append(died_message(out, ranks))
    elif live := recover_live(out):  # every rank killed outright
        lines.append(f"mpiscope: job ended without MPI_Finalize and no rank wrote its trace; "
                     f"`mpiscope analyze {out}` recovers {_ranks(live)} up to the kill from "
                     "the crash-safe logs")
    elif not lines and not told:  # no MPI_Init (not an MPI program?), or a remote rank 0
        lines.append(f"mpiscope: no trace written to {out}")
    if not_saved and lines:
        lines[-1] += f" ({not_saved})"
    return "\n".join(lines)
