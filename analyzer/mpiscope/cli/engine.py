"""The engine options `analyze`, `compare` and `serve` share (see engines/choose.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mpiscope.engines.choose import ENGINES, engine_for
from mpiscope.engines.cluster import ClusterSpec
from mpiscope.errors import UserError


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("engine (where the analysis runs)")
    g.add_argument("--engine", choices=ENGINES, default="auto",
                   help="auto (default): pandas when the trace fits in memory, else dask "
                        "when its workers can hold it, else stop with the figures before "
                        "reading anything; pandas: in this process; dask: on a Dask cluster")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="a running Dask scheduler (e.g. tcp://node1:8786, from dask-mpi or "
                        "dask-jobqueue); default: a local cluster")
    g.add_argument("--workers", type=int, default=2, metavar="N",
                   help="workers of the local cluster (default 2)")
    g.add_argument("--memory-limit", default="2GB", metavar="SIZE",
                   help="memory per worker of the local cluster (default 2GB)")


def spec(args: argparse.Namespace) -> ClusterSpec:
    return ClusterSpec(args.scheduler, args.workers, args.memory_limit)


def use_dask(args: argparse.Namespace, trace: Path) -> bool:
    """Whether the Dask engine runs this trace. `auto` says why on stderr when it picks
    Dask, and stops (UserError, one line) when neither engine fits in memory."""
    choice = engine_for(trace, args.engine, memory_limit=args.memory_limit,
                        workers=args.workers, scheduler=args.scheduler)
    if choice.engine == "none":
        raise UserError(None, choice.refusal(trace))
    if args.engine == "auto" and (choice.engine == "dask" or choice.merging):
        print(f"mpiscope: engine auto: {choice.reason()}", file=sys.stderr, flush=True)
    return choice.engine == "dask"


def prepare(args: argparse.Namespace, traces: list[Path]) -> None:
    """For commands that then read the cache (compare, serve): convert on the cluster
    first, so the traces that need Dask are never decoded in this process."""
    todo = [t for t in traces if use_dask(args, Path(t))]
    if not todo:
        return
    from mpiscope.engines import cluster, convert

    with cluster.connect(spec(args)) as client:
        for t in todo:
            convert.convert(t, client)
