"""Emulated Beowulf cluster: MPI ranks on network namespaces joined by shaped links.

Python API (used by `mpiscope cluster`, `mpiscope run --cluster` and the Himeno study):

    spec = parse_spec("4x100mbit")          # ClusterSpec(nodes=4, rate_bps=1e8)
    ensure_up(spec)                         # idempotent; needs root
    launch.run(["./app"], out_dir, Target(cluster=spec.prefix), ranks=4)  # mpiscope.jobs
    down()

The cluster only brings nodes up and down and says how to place ranks on them
(placement.py); jobs are launched, traced or not, through mpiscope.jobs.launch and
mpiscope.jobs.mpirun like any other. See docs/cluster.md.
"""

from mpiscope.jobs.cluster.lifecycle import UpResult, down, ensure_up, status
from mpiscope.jobs.cluster.placement import current
from mpiscope.jobs.cluster.spec import ClusterSpec, format_rate, parse_rate, parse_spec
from mpiscope.jobs.cluster.state import ClusterState, Node

__all__ = [
    "ClusterSpec", "ClusterState", "Node", "UpResult", "current", "down", "ensure_up",
    "format_rate", "parse_rate", "parse_spec", "status",
]
