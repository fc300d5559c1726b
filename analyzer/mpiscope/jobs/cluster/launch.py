"""Starting Open MPI jobs on the emulated nodes: launch agent, hostfile, mpirun options.

Open MPI's mpirun stays in the root namespace and starts one `orted` per node through
`plm_rsh_agent` — normally ssh; here a script that runs the orted command inside the
node's network namespace under the node's own host name (a fresh UTS namespace).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from mpiscope.errors import UserError
from mpiscope.jobs.cluster.state import ClusterState, load

OPENMPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "mpirun.openmpi", "mpiexec.openmpi")
# user options that choose a mapping themselves: then we leave the mapping to them
_MAPPING_OPTIONS = ("--map-by", "-map-by", "--npernode", "-npernode", "-N", "--ppr", "-ppr",
                    "--bynode", "-bynode", "--byslot", "-byslot", "--rankfile", "-rf")
_HOST_OPTIONS = ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "--host", "-host",
                 "-H", "--default-hostfile", "-default-hostfile")

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


def mpirun_options(state: ClusterState, *, traced: bool = True,
                   ranks_per_node: int | None = None, mapping: bool = True) -> list[str]:
    """Options that place an Open MPI job on the emulated nodes.

    TCP between nodes on the cluster subnet only, shared memory (vader) within a node,
    ob1 so that UCX cannot bypass the shaped links. Ranks go round-robin across nodes
    unless `ranks_per_node` packs them.
    """
    opts = ["--hostfile", str(state.hostfile),
            "--mca", "plm_rsh_agent", str(state.agent),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "pml", "ob1",
            "--mca", "btl", "tcp,vader,self",
            "--mca", "btl_tcp_if_include", state.subnet,
            "--mca", "oob_tcp_if_include", state.subnet,
            # every "node" sees all cores: per-node binding would stack ranks on core 0
            "--bind-to", "none",
            # all nodes' slots add up to more than the cores: ranks waiting in MPI must
            # yield, not spin, or they steal the CPU from the ranks they wait for and
            # the run measures the busy-waiting instead of the network
            "--mca", "mpi_yield_when_idle", "1",
            "--oversubscribe"]
    if os.geteuid() == 0:
        opts.append("--allow-run-as-root")
    if mapping:
        opts += ["--map-by", f"ppr:{ranks_per_node}:node" if ranks_per_node else "node"]
    if traced:
        opts += ["-x", "LD_PRELOAD", "-x", "MPISCOPE_OUT"]
    return opts


def mpirun_prefix(nprocs: int, *, ranks_per_node: int | None = None, traced: bool = True,
                  launcher: str = "mpirun", prefix: str = "mpiscope") -> list[str]:
    """`mpirun -np N <cluster options>`: append the program and its arguments.

    With `traced=True` run it with `traced_env(out)` so every rank loads the interposer.
    """
    state = current(prefix)
    if ranks_per_node and nprocs > ranks_per_node * len(state.nodes):
        raise UserError("cluster", f"{nprocs} ranks at {ranks_per_node} per node need "
                        f"more than the {len(state.nodes)} nodes that are up")
    return [launcher, "-np", str(nprocs),
            *mpirun_options(state, traced=traced, ranks_per_node=ranks_per_node)]


def cluster_command(cmd: list[str], *, traced: bool = True,
                    prefix: str = "mpiscope") -> list[str]:
    """Rewrite a user's `mpirun -np N ./app` to run on the emulated nodes."""
    launcher = Path(cmd[0]).name if cmd else ""
    if launcher not in OPENMPI_LAUNCHERS:
        raise UserError(cmd[0] if cmd else None, "--cluster needs an Open MPI launcher "
                        f"({', '.join(OPENMPI_LAUNCHERS[:3])}) as the command")
    if launcher.endswith("mpich") or launcher.endswith("hydra"):
        raise UserError(cmd[0], "--cluster works with Open MPI only")
    state = current(prefix)
    given = {a.split("=")[0] for a in cmd[1:]}
    clash = sorted(given & set(_HOST_OPTIONS))
    if clash:
        raise UserError(cmd[0], f"--cluster chooses the hosts itself; drop {clash[0]}")
    user_maps = bool(given & set(_MAPPING_OPTIONS))
    return [cmd[0], *mpirun_options(state, traced=traced, mapping=not user_maps), *cmd[1:]]


def traced_env(out: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for mpirun that makes every rank (on every node) write to `out`."""
    from mpiscope.cli.run import traced_env as preload  # the one way to preload

    return preload(Path(out), "openmpi", base)
