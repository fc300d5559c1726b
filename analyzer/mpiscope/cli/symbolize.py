"""`mpiscope symbolize DIR`: name a trace's call sites again with the debug files now
installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpiscope.errors import UserError

HELP = ("name a trace's call sites again from their recorded object+offset, with the debug "
        "files installed now (/usr/lib/debug, e.g. Debian's -dbgsym packages; "
        "MPISCOPE_DEBUGINFO_PATH)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="DIR", help="trace directory")


def run(args: argparse.Namespace) -> int:
    from mpiscope.archive import symbolize

    if not args.trace.is_dir():
        raise UserError(str(args.trace), "no such trace directory")
    for s in symbolize.symbolize(args.trace):
        for w in s.warnings:
            print(f"mpiscope: warning: {w}", file=sys.stderr)
        print(f"mpiscope: {s.archive}: {s.improved} of {s.total} call sites named better")
    return 0
