"""Emulated Beowulf cluster: MPI ranks on network namespaces joined by shaped links.

Python API (used by `mpiscope cluster`, `mpiscope run --cluster` and the Himeno study):

    spec = parse_spec("4x100mbit")          # ClusterSpec(nodes=4, rate_bps=1e8)
    ensure_up(spec)                         # idempotent; needs root
    cmd = mpirun_prefix(4) + ["./app"]      # mpirun -np 4 <cluster options> ./app
    subprocess.run(cmd, env=traced_env(out_dir))
    down()

See docs/cluster.md.
"""

from mpiscope.jobs.cluster.launch import (
    cluster_command,
    current,
    mpirun_options,
    mpirun_prefix,
    traced_env,
)
from mpiscope.jobs.cluster.lifecycle import UpResult, down, ensure_up, status
from mpiscope.jobs.cluster.spec import ClusterSpec, format_rate, parse_rate, parse_spec
from mpiscope.jobs.cluster.state import ClusterState, Node

__all__ = [
    "ClusterSpec", "ClusterState", "Node", "UpResult", "cluster_command", "current", "down",
    "ensure_up", "format_rate", "mpirun_options", "mpirun_prefix", "parse_rate", "parse_spec",
    "status", "traced_env",
]
