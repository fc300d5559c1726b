"""`mpiscope recover DIR`: turn the crash-safe logs of killed ranks into per-rank traces."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpiscope.errors import UserError

HELP = ("recover ranks killed by SIGKILL or a crash from their crash-safe logs "
        "(DIR/.mpiscope-live) into DIR/rank<N>/ (`analyze` does this by itself)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="DIR", help="trace directory of the job")


def run(args: argparse.Namespace) -> int:
    from mpiscope.archive import recover

    if not args.trace.is_dir():
        raise UserError(str(args.trace), "no such trace directory")
    if not recover.orphaned(args.trace):
        print(f"mpiscope: nothing to recover in {args.trace}: no crash-safe log of a rank "
              "that left no trace", file=sys.stderr)
        return 0
    done, problems = recover.recover(args.trace)
    for r in done:
        print(f"mpiscope: recovered rank {r.rank} up to its kill ({r.summary}) into "
              f"{args.trace}/rank{r.rank}/traces.otf2", file=sys.stderr)
    for p in problems:  # the tool's line: the file, the byte and what is wrong there
        print(f"mpiscope: cannot recover {p} (log kept)", file=sys.stderr)
    if done:
        print(f"mpiscope: `mpiscope analyze {args.trace}` reads them with the other ranks' "
              "traces", file=sys.stderr)
    return 2 if problems else 0
