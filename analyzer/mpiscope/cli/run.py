"""`mpiscope run [--out DIR] [--cluster] -- mpirun -np N ./app`: trace a job without recompiling.

With `--cluster` the Open MPI job runs on the emulated cluster (`mpiscope cluster up`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mpiscope.errors import UserError
from mpiscope.jobs import launch
from mpiscope.jobs.mpirun import Target, guess_mpi
from mpiscope.paths import MPI_FLAVOURS

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


def run(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError(
            None, "run: no command given (usage: mpiscope run --out DIR -- mpirun -np N ./app)"
        )
    if args.cluster and args.mpi == "mpich":
        raise UserError(None, "run: --cluster works with Open MPI only")
    target = Target(args.mpi or guess_mpi(cmd), args.cluster_prefix if args.cluster else None)
    # stdout passes through unchanged; a copy beside the trace keeps the program's
    # figures of merit (e.g. Himeno's MFLOPS) for `mpiscope compare`
    outcome = launch.run(cmd, args.out or default_out_dir(), target, stdout="pass")
    if text := outcome.verdict():
        print(text, file=sys.stderr)
    return outcome.returncode
