"""`cluster up` / `down` / `status`: namespaces on a bridge, each link shaped with tc tbf.

Layout for N nodes (prefix `mpiscope`):

    root namespace: bridge mpiscope-br0 (198.18.0.254/24, mpirun's side)
                    ports mpiscope-v0 … mpiscope-v{N-1}   [tbf: traffic *to* node k]
    namespace mpiscope-nodeK: lo, eth0 = 198.18.0.{K+1}/24  [tbf: traffic *from* node k]

Node-to-node traffic crosses two shaped queues at the same rate (the sender's eth0, the
receiver's bridge port), like a host NIC and a switch port, so the path runs at `rate`.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from mpiscope.errors import UserError
from mpiscope.jobs.cluster import netops
from mpiscope.jobs.cluster.placement import remove_launch_files, write_launch_files
from mpiscope.jobs.cluster.spec import ClusterSpec
from mpiscope.jobs.cluster.state import ClusterState, Node, forget, load, save

SUBNET_BASE = "198.18.0"  # RFC 2544 benchmarking range 198.18.0.0/15: never routed publicly
HOST_OCTET = 254
QUEUE_LATENCY = "100ms"   # tbf queue: deep enough that TCP is shaped, not dropped


@dataclass
class UpResult:
    state: ClusterState
    created: bool          # False: an identical, healthy cluster was already up
    warnings: list[str]


FRAME_BYTES = 1514  # an Ethernet frame at MTU 1500 (tbf splits GSO segments to fit)
BURST_FRAMES = 4


def burst_bytes(rate_bps: float) -> int:
    """tbf bucket: a few frames, so the link runs at `rate` for every message size.

    tbf's watchdog is an hrtimer, so a small bucket does not cap the rate at one timer
    tick's worth; a bucket of one tick (50 KB at 100 Mbit, HZ 250) let whole halo
    exchanges through at the veth's own speed, and a 100 Mbit link was not 100 Mbit.
    """
    del rate_bps  # the same few frames at every rate
    return BURST_FRAMES * FRAME_BYTES


def plan(spec: ClusterSpec, delay_applied: bool) -> ClusterState:
    """The names and addresses a cluster of `spec` uses (deterministic, from the prefix)."""
    p = spec.prefix
    nodes = [Node(name=f"node{k}", netns=f"{p}-node{k}", address=f"{SUBNET_BASE}.{k + 1}",
                  veth_host=f"{p}-v{k}") for k in range(spec.nodes)]
    return ClusterState(prefix=p, bridge=f"{p}-br0", subnet=f"{SUBNET_BASE}.0/24",
                        host_address=f"{SUBNET_BASE}.{HOST_OCTET}", rate_bps=spec.rate_bps,
                        burst_bytes=burst_bytes(spec.rate_bps), delay_ms=spec.delay_ms,
                        delay_applied=delay_applied, slots=spec.slots, nodes=nodes)


def healthy(state: ClusterState) -> bool:
    """Every piece `up` builds is there: namespaces, links, node addresses, both tbfs."""
    def shaped(lines: list[str]) -> bool:
        return any(line.startswith("qdisc tbf 1: root") for line in lines)

    return netops.link_exists(state.bridge) and all(
        netops.netns_exists(n.netns) and netops.link_exists(n.veth_host)
        and shaped(netops.qdiscs(n.veth_host)) and shaped(netops.qdiscs("eth0", n.netns))
        and n.address in netops.addresses("eth0", n.netns)
        for n in state.nodes)


def _matches(state: ClusterState, spec: ClusterSpec) -> bool:
    return (len(state.nodes) == spec.nodes and state.rate_bps == spec.rate_bps
            and state.delay_ms == spec.delay_ms and state.slots == spec.slots
            and state.burst_bytes == burst_bytes(spec.rate_bps))  # else: shaped by an older rule


def ensure_up(spec: ClusterSpec) -> UpResult:
    """Bring the cluster up as `spec` says; a no-op if exactly that cluster is already up.

    Anything stale (a different cluster, a half-built one, leftovers of a crash with our
    names) is removed first.
    """
    netops.check_privileges()
    old = load(spec.prefix)
    if old is not None and _matches(old, spec) and healthy(old):
        write_launch_files(old)
        return UpResult(old, created=False, warnings=[])
    if old is not None:
        teardown(old)
    _sweep_leftovers(spec.prefix)
    _check_subnet_free()
    warnings: list[str] = []
    delay_applied = False
    if spec.delay_ms:
        delay_applied = netops.netem_available()
        if not delay_applied:
            warnings.append("netem is not available in this kernel: links are shaped in "
                            "rate only, the requested delay is not applied")
    state = plan(spec, delay_applied)
    try:
        try:
            _build(state)
        except netops.NetError as err:
            if "Operation not permitted" in str(err):  # e.g. a user namespace's fake root
                raise UserError("cluster", "the kernel refused to create namespaces and "
                                f"links ({err}); run as real root") from None
            raise
        write_launch_files(state)
        save(state)
    except BaseException:
        teardown(state)
        raise
    return UpResult(state, created=True, warnings=warnings)


def _build(state: ClusterState) -> None:
    run = netops.run
    run("ip", "link", "add", state.bridge, "type", "bridge")
    run("ip", "addr", "add", f"{state.host_address}/24", "dev", state.bridge)
    run("ip", "link", "set", state.bridge, "up")
    for node in state.nodes:
        peer = node.veth_host.replace("-v", "-p", 1)
        run("ip", "netns", "add", node.netns)
        run("ip", "link", "add", node.veth_host, "type", "veth", "peer", "name", peer)
        run("ip", "link", "set", peer, "netns", node.netns)
        run("ip", "-n", node.netns, "link", "set", peer, "name", "eth0")
        run("ip", "-n", node.netns, "addr", "add", f"{node.address}/24", "dev", "eth0")
        run("ip", "-n", node.netns, "link", "set", "lo", "up")
        run("ip", "-n", node.netns, "link", "set", "eth0", "up")
        run("ip", "link", "set", node.veth_host, "master", state.bridge)
        run("ip", "link", "set", node.veth_host, "up")
        _shape(state, node.veth_host, None)
        _shape(state, "eth0", node.netns)


def _shape(state: ClusterState, dev: str, netns: str | None) -> None:
    """Root tbf on `dev`'s egress; with netem, half the one-way delay below it on each end."""
    tc = ["ip", "netns", "exec", netns, "tc"] if netns else ["tc"]
    netops.run(*tc, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "tbf",
               "rate", f"{int(state.rate_bps)}bit", "burst", str(state.burst_bytes),
               "latency", QUEUE_LATENCY)
    if state.delay_applied and state.delay_ms:
        netops.run(*tc, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
                   "netem", "delay", f"{state.delay_ms * 500:.0f}us")


def _check_subnet_free() -> None:
    """Refuse to shadow a route of the host's own into our range."""
    out = netops.run("ip", "-4", "route", "show", "to", "match", f"{SUBNET_BASE}.1").stdout
    for line in out.splitlines():
        if line.startswith("default"):
            continue
        words = line.split()
        dev = words[words.index("dev") + 1] if "dev" in words[:-1] else ""
        hint = "another emulated cluster up?"
        if dev.endswith("-br0"):  # one of ours, under another prefix
            hint = f"another emulated cluster is up: `mpiscope cluster down --prefix {dev[:-4]}`"
        raise UserError("cluster", f"{SUBNET_BASE}.0/24 is already routed on this host "
                        f"({line.strip()}); {hint}")


def _sweep_leftovers(prefix: str) -> list[str]:
    """Remove namespaces/links carrying our names that no state file accounts for."""
    removed: list[str] = []
    for ns in netops.netns_list():
        if ns.startswith(f"{prefix}-node") and ns[len(prefix) + 5:].isdigit():
            _kill_netns_processes(ns)
            netops.run("ip", "netns", "del", ns, check=False)
            removed.append(f"netns {ns}")
    for link in netops.links_with_prefix(f"{prefix}-"):
        rest = link[len(prefix) + 1:]
        if rest == "br0" or (rest[:1] in "vp" and rest[1:].isdigit()):
            if netops.run("ip", "link", "del", link, check=False).returncode == 0:
                removed.append(f"link {link}")
    return removed


def _kill_netns_processes(netns: str) -> None:
    """Stop leftover processes of a job inside `netns` (they keep the namespace alive)."""
    proc = netops.run("ip", "netns", "pids", netns, check=False)
    pids = [int(p) for p in proc.stdout.split() if p.isdigit() and int(p) != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 3
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
            time.sleep(0.05)
        if not pids:
            return


def teardown(state: ClusterState) -> list[str]:
    """Remove exactly what `state` lists (missing pieces are fine); return what was removed."""
    removed: list[str] = []
    for node in state.nodes:
        if netops.netns_exists(node.netns):
            _kill_netns_processes(node.netns)
            netops.run("ip", "netns", "del", node.netns)
            removed.append(f"netns {node.netns}")
        # deleting the namespace destroys eth0 and with it the veth pair, asynchronously
        deadline = time.monotonic() + 2
        while netops.link_exists(node.veth_host) and time.monotonic() < deadline:
            time.sleep(0.05)
        if netops.link_exists(node.veth_host):
            netops.run("ip", "link", "del", node.veth_host, check=False)
            removed.append(f"link {node.veth_host}")
    if netops.link_exists(state.bridge):
        netops.run("ip", "link", "del", state.bridge)
        removed.append(f"bridge {state.bridge}")
    remove_launch_files(state)
    forget(state.prefix)
    return removed


def down(prefix: str = "mpiscope") -> list[str]:
    """Tear the recorded cluster down, and any half-built leftovers with our names
    (an `up` killed before it recorded its state); [] if there was nothing."""
    netops.check_privileges()
    state = load(prefix)
    removed = teardown(state) if state is not None else []
    return removed + _sweep_leftovers(prefix)


@dataclass
class NodeStatus:
    node: Node
    present: bool
    qdiscs_host: list[str]
    qdiscs_node: list[str]


def status(prefix: str = "mpiscope") -> tuple[ClusterState, list[NodeStatus]] | None:
    state = load(prefix)
    if state is None:
        return None
    rows = []
    for node in state.nodes:
        present = netops.netns_exists(node.netns)
        rows.append(NodeStatus(
            node=node, present=present,
            qdiscs_host=netops.qdiscs(node.veth_host),
            qdiscs_node=netops.qdiscs("eth0", node.netns) if present else []))
    return state, rows
