"""`mpiscope cluster up|down|status`: an emulated Beowulf cluster on this machine."""

from __future__ import annotations

import argparse
import sys

from mpiscope.jobs import cluster
from mpiscope.jobs.cluster.spec import ClusterSpec, format_rate, parse_delay, parse_rate

HELP = "emulated cluster: network namespaces joined by shaped links (up, down, status)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = sub.add_parser("up", help="create (or keep) the cluster; idempotent")
    up.add_argument("--nodes", "-n", type=int, default=4, help="number of nodes (default 4)")
    up.add_argument("--rate", default="100mbit",
                    help="link rate per node, tc units: 100mbit, 1gbit (default 100mbit)")
    up.add_argument("--delay", default=None,
                    help="one-way node-to-node delay, e.g. 0.1ms (needs sch_netem)")
    up.add_argument("--slots", type=int, default=2,
                    help="hostfile slots per node (`--map-by slot` packs this many ranks)")
    for action in (up, sub.add_parser("down", help="remove everything `up` created"),
                   sub.add_parser("status", help="nodes, addresses, qdiscs")):
        action.add_argument("--prefix", default="mpiscope",
                            help="name prefix of namespaces and links (default mpiscope)")


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        return _up(args)
    if args.action == "down":
        removed = cluster.down(args.prefix)
        if not removed:
            print("mpiscope: no emulated cluster is up")
        else:
            print(f"mpiscope: cluster down: removed {', '.join(removed)}")
        return 0
    return _status(args.prefix)


def _up(args: argparse.Namespace) -> int:
    spec = ClusterSpec(nodes=args.nodes, rate_bps=parse_rate(args.rate),
                       delay_ms=parse_delay(args.delay) if args.delay else None,
                       prefix=args.prefix, slots=args.slots)
    result = cluster.ensure_up(spec)
    for warning in result.warnings:
        print(f"mpiscope: cluster: warning: {warning}", file=sys.stderr)
    verb = "up" if result.created else "already up"
    print(f"mpiscope: cluster {spec} {verb}")
    return _status(args.prefix)


def _status(prefix: str) -> int:
    found = cluster.status(prefix)
    if found is None:
        print("mpiscope: no emulated cluster is up")
        return 1
    state, rows = found
    delay = "none"
    if state.delay_ms:
        delay = f"{state.delay_ms:g}ms" + ("" if state.delay_applied else
                                             " requested, not applied (no netem)")
    print(f"cluster  {len(state.nodes)} nodes, {format_rate(state.rate_bps)} per link "
          f"(tbf burst {state.burst_bytes} B), delay {delay}")
    print(f"bridge   {state.bridge} {state.host_address} (subnet {state.subnet})")
    print(f"hostfile {state.hostfile}")
    print(f"agent    {state.agent}")
    for row in rows:
        n = row.node
        mark = "" if row.present else "  MISSING"
        print(f"{n.name:<7} {n.address:<15} netns {n.netns}{mark}")
        for side, qd in (("to node  ", row.qdiscs_host), ("from node", row.qdiscs_node)):
            print(f"        {side} {'; '.join(qd) or '(no qdisc)'}")
    return 0
