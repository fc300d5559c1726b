"""Placing Open MPI ranks on the emulated nodes: launch agent, hostfile, and the mpirun
options that use them (the launcher line itself is built in mpiscope.jobs.mpirun).

Open MPI's mpirun stays in the root namespace and starts one `orted` per node through
`plm_rsh_agent` — normally ssh; here a script that runs the orted command inside the
node's network namespace under the node's own host name (a fresh UTS namespace).
"""

from __future__ import annotations

import shlex

from mpiscope.errors import UserError
from mpiscope.jobs.cluster.state import ClusterState, load

_AGENT = """\
#!/bin/sh
# mpiscope emulated cluster: Open MPI launch agent (plm_rsh_agent), written by
# `mpiscope cluster up`. Called as `agent HOST COMMAND...` like ssh; runs COMMAND in
# HOST's network namespace with the node's name as host name. Removed by
# `mpiscope cluster down`.
host=$1
shift
case "$host" in
{cases}
  *) echo "mpiscope cluster agent: unknown node '$host'" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c \\
  'hostname "$0" && MPISCOPE_HOSTNAME="$0" && export MPISCOPE_HOSTNAME && exec sh -c "$1"' \\
  "$name" "$*"
"""


def agent_script(state: ClusterState) -> str:
    cases = "\n".join(f"  {n.name}|{n.address}) ns={shlex.quote(n.netns)} name={n.name} ;;"
                      for n in state.nodes)
    return _AGENT.format(cases=cases)


def hostfile_text(state: ClusterState) -> str:
    # addresses, not names: mpirun would ask the host's DNS resolver for `node0` and so
    # send traffic outside the cluster's range
    return "".join(f"{n.address} slots={state.slots}\n" for n in state.nodes)


def write_launch_files(state: ClusterState) -> None:
    state.agent.parent.mkdir(parents=True, exist_ok=True)
    state.agent.write_text(agent_script(state))
    state.agent.chmod(0o755)
    state.hostfile.write_text(hostfile_text(state))


def remove_launch_files(state: ClusterState) -> None:
    state.agent.unlink(missing_ok=True)
    state.hostfile.unlink(missing_ok=True)


def current(prefix: str = "mpiscope") -> ClusterState:
    """The cluster that is up, or a UserError telling how to bring one up."""
    state = load(prefix)
    if state is None:
        raise UserError("cluster", "no emulated cluster is up "
                        "(run `mpiscope cluster up --nodes 4 --rate 100mbit`)")
    return state


def options(state: ClusterState, *, mapping: bool = True, ranks: int | None = None,
            ranks_per_node: int | None = None) -> list[str]:
    """Options that place an Open MPI job on the emulated nodes.

    TCP between nodes on the cluster subnet only, shared memory (vader) within a node,
    ob1 so that UCX cannot bypass the shaped links. Ranks go round-robin across nodes
    unless `ranks_per_node` packs them, or `mapping=False` leaves mapping to the user.
    """
    if ranks_per_node and ranks and ranks > ranks_per_node * len(state.nodes):
        raise UserError("cluster", f"{ranks} ranks at {ranks_per_node} per node need "
                        f"more than the {len(state.nodes)} nodes that are up")
    opts = ["--hostfile", str(state.hostfile),
            "--mca", "plm_rsh_agent", str(state.agent),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "pml", "ob1",
            "--mca", "btl", "tcp,vader,self",
            "--mca", "btl_tcp_if_include", state.subnet,
            "--mca", "oob_tcp_if_include", state.subnet,
            # all nodes' slots add up to more than the cores: ranks waiting in MPI must
            # yield, not spin, or they steal the CPU from the ranks they wait for and
            # the run measures the busy-waiting instead of the network
            "--mca", "mpi_yield_when_idle", "1"]
    if mapping:
        opts += ["--map-by", f"ppr:{ranks_per_node}:node" if ranks_per_node else "node"]
    return opts
