"""`mpiscope lib`: print the interposer's absolute path (for LD_PRELOAD)."""

from __future__ import annotations

import argparse

from mpiscope.paths import MPI_FLAVOURS, interposer_library

HELP = "print the absolute path of the interposer library (for LD_PRELOAD)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mpi", choices=MPI_FLAVOURS, default=None,
                   help="MPI library the traced program uses (default: openmpi, or the "
                   "only flavour built)")


def run(args: argparse.Namespace) -> int:
    print(interposer_library(args.mpi))
    return 0
