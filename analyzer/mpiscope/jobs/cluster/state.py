"""What `cluster up` created, kept in /run/mpiscope/cluster.json so `down` removes exactly that."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mpiscope.errors import UserError

RUN_DIR = Path(os.environ.get("MPISCOPE_RUN_DIR", "/run/mpiscope"))
STATE_VERSION = 1


@dataclass
class Node:
    name: str          # UTS host name and hostfile entry: node0, node1, …
    netns: str         # network namespace: mpiscope-node0 …
    address: str       # 198.18.0.1 …
    veth_host: str     # bridge port in the root namespace (its peer is `eth0` in netns)


@dataclass
class ClusterState:
    prefix: str
    bridge: str
    subnet: str        # e.g. 198.18.0.0/24 (inside the benchmarking range 198.18.0.0/15)
    host_address: str  # the bridge's address: mpirun's out-of-band traffic
    rate_bps: float
    burst_bytes: int
    delay_ms: float | None
    delay_applied: bool  # False when netem is missing and the delay was dropped
    slots: int
    nodes: list[Node] = field(default_factory=list)
    version: int = STATE_VERSION

    @property
    def agent(self) -> Path:
        return RUN_DIR / f"{self.prefix}-agent"

    @property
    def hostfile(self) -> Path:
        return RUN_DIR / f"{self.prefix}-hostfile"

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if name in (n.name, n.netns, n.address):
                return n
        raise UserError("cluster", f"no node {name!r} (nodes: "
                        f"{', '.join(n.name for n in self.nodes)})")


def state_path(prefix: str = "mpiscope") -> Path:
    return RUN_DIR / ("cluster.json" if prefix == "mpiscope" else f"cluster-{prefix}.json")


def load(prefix: str = "mpiscope") -> ClusterState | None:
    """The recorded cluster, or None if none is up (or the record is unreadable)."""
    path = state_path(prefix)
    try:
        raw = json.loads(path.read_text())
        if raw.get("version") != STATE_VERSION:
            return None
        raw["nodes"] = [Node(**n) for n in raw["nodes"]]
        return ClusterState(**raw)
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError):
        return None


def save(state: ClusterState) -> None:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    path = state_path(state.prefix)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    tmp.replace(path)


def forget(prefix: str = "mpiscope") -> None:
    state_path(prefix).unlink(missing_ok=True)
