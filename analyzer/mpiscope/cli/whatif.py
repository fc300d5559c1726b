"""`mpiscope whatif DIR [scenario options] [--out PRED_DIR] [--json OUT]`: replay a trace
on a model of a machine with a scenario applied (mpiscope.analysis.simulate)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from mpiscope.errors import UserError

HELP = ("predict a run: replay a trace on a model of the machine with calls made less "
        "often, removed or aggregated, the load balanced, another network, CPU speed or "
        "node count")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", type=Path, metavar="DIR", help="trace directory (or traces.otf2)")
    p.add_argument("--collective-every", action="append", default=[],
                   metavar="FUNC@CALLSITE=K",
                   help="run this collective only every K-th time (and the last time)")
    p.add_argument("--remove", action="append", default=[], metavar="FUNC@CALLSITE",
                   help="leave these calls out (a collective on every rank)")
    p.add_argument("--aggregate", action="append", default=[], metavar="FUNC@CALLSITE",
                   help="send each burst of small messages from these calls to one "
                   "receiver as one message")
    p.add_argument("--balance", action="store_true",
                   help="perfect load balance: each rank's computation between "
                   "synchronizations becomes the ranks' mean")
    p.add_argument("--nodes", metavar="N",
                   help="place the ranks block-wise on N nodes (intra- and inter-node "
                   "paths of the machine model)")
    p.add_argument("--latency", metavar="T", help="network latency, e.g. 60us (every path)")
    p.add_argument("--bandwidth", metavar="B",
                   help="network bandwidth of every path: bits as 100Mbit or 100Mbps, "
                   "bytes as 12.5MB/s")
    p.add_argument("--inter-node", metavar="B[,T]",
                   help="the inter-node path alone: bandwidth and/or latency, e.g. "
                   "100Mbit,50us (shared memory keeps its own)")
    p.add_argument("--cpu", metavar="F", help="computation takes F times its measured time")
    p.add_argument("--noise", choices=("keep", "drop"), default=None,
                   help="each MPI call's noise (its own time above its function's "
                   "overhead: descheduling on the traced host): keep or drop it "
                   "(default: kept on the traced hosts, dropped with --nodes or a "
                   "machine with nodes)")
    p.add_argument("--run-delay", choices=("keep", "drop"), default="keep",
                   help="the run-queue delay the tracer measured (time runnable but "
                   "waiting for a CPU): drop it to replay the ranks on cores of their "
                   "own, each compute burst and each call's own part without it "
                   "(default: keep)")
    p.add_argument("--machine", metavar="NAME|FILE",
                   help="machine model: a shipped name (beowulf-2008) or a TOML file")
    p.add_argument("--out", type=Path, metavar="PRED_DIR",
                   help="write the predicted run there as an OTF2 trace")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the prediction as JSON")


def scenario_of(args: argparse.Namespace):
    """The scenario the options describe; a bad option is a one-line UserError."""
    from mpiscope.analysis.simulate import model
    from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario

    cpu = None
    if args.cpu is not None:
        try:
            cpu = float(args.cpu)
        except ValueError:
            cpu = -1.0
        if not cpu > 0 or cpu == float("inf"):
            raise UserError("--cpu", f"expected a positive factor (0.5: twice as fast), "
                            f"not {args.cpu!r}")
    nodes = None
    if args.nodes is not None:
        try:
            nodes = int(args.nodes)
        except ValueError:
            nodes = 0
        if nodes < 1:
            raise UserError("--nodes", f"expected a whole number of nodes >= 1, not "
                            f"{args.nodes!r}")
    inter_lat = inter_bw = None
    if args.inter_node is not None:
        inter_lat, inter_bw = model.parse_path(args.inter_node, "--inter-node")
    if args.machine is not None:
        model.load_machine(args.machine)  # a bad name or file fails before the reading
    return Scenario(
        collective_every=tuple(CollectiveEvery.parse(t) for t in args.collective_every),
        remove=tuple(CallSite.parse(t, "--remove") for t in args.remove),
        aggregate=tuple(CallSite.parse(t, "--aggregate") for t in args.aggregate),
        balance=args.balance, nodes=nodes,
        latency_s=model.parse_time(args.latency) if args.latency is not None else None,
        bandwidth_Bps=(model.parse_rate(args.bandwidth) if args.bandwidth is not None
                       else None),
        inter_latency_s=inter_lat, inter_bandwidth_Bps=inter_bw,
        noise=None if args.noise is None else args.noise == "keep",
        run_delay=args.run_delay == "keep",
        cpu_factor=cpu, machine=args.machine)


def _check_out(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserError(str(path), "already exists: give a new directory for the "
                        "predicted trace")


def write_prediction(trace, path: Path, scenario_text: str) -> None:
    """The predicted trace into `path`, whole or not at all."""
    from mpiscope.archive import writer

    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        writer.write(trace, tmp, {"MPISCOPE::REPLAY": scenario_text})
        if path.exists():
            path.rmdir()
        tmp.rename(path)
    except OSError as err:
        raise UserError(str(path), err.strerror or str(err)) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from mpiscope import output
    from mpiscope.analysis import simulate
    from mpiscope.render import term
    from mpiscope.render.loading import load_with_progress
    from mpiscope.render.whatif import print_summary

    scenario = scenario_of(args)
    if args.out is not None:
        _check_out(args.out)
    trace = load_with_progress(args.trace)
    result = simulate.replay(trace, scenario)
    print_summary(result, term.console(highlight=False))
    if args.out is not None:
        write_prediction(result.trace, args.out, json.dumps(result.scenario.to_dict()))
    if args.json is not None:
        output.write_text(args.json, json.dumps(result.to_dict(), indent=2) + "\n")
    return 0
