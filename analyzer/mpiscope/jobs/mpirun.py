"""The launcher command line of a job, built in one place for every target: this machine
with Open MPI or MPICH, or the emulated cluster (Open MPI across network namespaces).

Two kinds of line: `launcher(ranks, target)` starts a program of ours (the study, tests)
with the options our machines need (root, more ranks than cores); `adapt(cmd, target)`
takes a user's own `mpirun -np N ./app` as given, adding only what the cluster needs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mpiscope.errors import UserError
from mpiscope.jobs.cluster import placement

OPENMPI_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "mpirun.openmpi", "mpiexec.openmpi")
# user options that choose a mapping themselves: then we leave the mapping to them
_MAPPING_OPTIONS = ("--map-by", "-map-by", "--npernode", "-npernode", "-N", "--ppr", "-ppr",
                    "--bynode", "-bynode", "--byslot", "-byslot", "--rankfile", "-rf")
_HOST_OPTIONS = ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "--host", "-host",
                 "-H", "--default-hostfile", "-default-hostfile")


@dataclass(frozen=True)
class Target:
    """Where a job runs: the MPI library of its ranks, and the emulated cluster (by its
    prefix, see `mpiscope cluster up --prefix`) or None for this machine."""

    mpi: str = "openmpi"  # one of paths.MPI_FLAVOURS
    cluster: str | None = None


LOCAL = Target()


def guess_mpi(cmd: list[str]) -> str:
    """The MPI library a user's launcher line belongs to, from the launcher's name."""
    launcher = Path(cmd[0]).name if cmd else ""
    return "mpich" if "mpich" in launcher or "hydra" in launcher else "openmpi"


def forwarded(env: Mapping[str, str]) -> list[str]:
    """What remote ranks must inherit from `env` to be traced as local ones are: the
    preload and every MPISCOPE_* setting (output directory, status file, options)."""
    return [name for name in sorted(env) if name == "LD_PRELOAD" or name.startswith("MPISCOPE_")]


def _openmpi_options(target: Target, forward: Iterable[str], *, mapping: bool = True,
                     ranks: int | None = None, ranks_per_node: int | None = None) -> list[str]:
    opts: list[str] = []
    if target.cluster:
        opts += placement.options(placement.current(target.cluster), mapping=mapping,
                                  ranks=ranks, ranks_per_node=ranks_per_node)
    # every core is free to every rank (emulated nodes all see the machine's cores), and
    # a small machine runs more ranks than it has cores
    opts += ["--bind-to", "none", "--oversubscribe"]
    if os.geteuid() == 0:
        opts.append("--allow-run-as-root")
    # ranks started through ssh get only what is forwarded (the emulated nodes' launch
    # agent is a child of mpirun and passes its whole environment on, a real one would not)
    if target.cluster:
        for name in forward:
            opts += ["-x", name]
    return opts


def launcher(ranks: int, target: Target = LOCAL, *, forward: Iterable[str] = (),
             ranks_per_node: int | None = None) -> list[str]:
    """`mpirun -np N <options>` for `target`: append the program and its arguments.
    `forward`: environment variables the ranks on other nodes need (see `forwarded`);
    `ranks_per_node` packs ranks on the emulated nodes (default: round-robin)."""
    if target.mpi == "mpich":
        if target.cluster:
            raise UserError("cluster", "the emulated cluster runs Open MPI jobs only")
        return ["mpiexec.mpich", "-n", str(ranks)]
    return ["mpirun", "-np", str(ranks),
            *_openmpi_options(target, forward, ranks=ranks, ranks_per_node=ranks_per_node)]


def check(cmd: list[str], target: Target) -> None:
    """Refuse, in one line, a user's launcher line that `adapt` cannot run on `target`."""
    if not target.cluster:
        return
    launcher_name = Path(cmd[0]).name if cmd else ""
    if launcher_name not in OPENMPI_LAUNCHERS:
        raise UserError(cmd[0] if cmd else None, "--cluster needs an Open MPI launcher "
                        f"({', '.join(OPENMPI_LAUNCHERS[:3])}) as the command")
    placement.current(target.cluster)  # none up: that is the first thing to fix
    clash = sorted({a.split("=")[0] for a in cmd[1:]} & set(_HOST_OPTIONS))
    if clash:
        raise UserError(cmd[0], f"--cluster chooses the hosts itself; drop {clash[0]}")


def adapt(cmd: list[str], target: Target = LOCAL, *, forward: Iterable[str] = ()) -> list[str]:
    """A user's own launcher line for `target`: unchanged on this machine; on the emulated
    cluster, the cluster's options after the launcher (`mpirun -np N ./app` ->
    `mpirun <hostfile, agent, transports...> -np N ./app`)."""
    check(cmd, target)
    if not target.cluster:
        return list(cmd)
    user_maps = any(a.split("=")[0] in _MAPPING_OPTIONS for a in cmd[1:])
    return [cmd[0], *_openmpi_options(target, forward, mapping=not user_maps), *cmd[1:]]
