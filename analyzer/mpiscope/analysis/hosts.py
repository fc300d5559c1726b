"""Ranks per host against the host's CPUs: more ranks than CPUs means ranks take turns
on a CPU, so waiting, imbalance and every timing-driven finding may be descheduling
rather than the program. The tracer records each host's CPUs (online CPUs within a
cgroup quota) as MPISCOPE::HOST_CPUS (TraceMeta.host_cpus, one per distinct host in the
order of its first rank); without them nothing is claimed."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class HostLoad:
    host: str
    ranks: list[int]
    cpus: int

    @property
    def oversubscribed(self) -> bool:
        return len(self.ranks) > self.cpus


def loads(ranks: pd.DataFrame, host_cpus: list[int]) -> list[HostLoad]:
    """Each host's ranks and CPUs (empty where the CPU counts do not match the hosts)."""
    if not host_cpus or ranks.empty:
        return []
    r = ranks.sort_values("rank")
    hosts = list(pd.unique(r["host"].astype(str)))
    if len(hosts) != len(host_cpus):
        return []
    by_host = r.groupby(r["host"].astype(str))["rank"].apply(lambda s: sorted(map(int, s)))
    return [HostLoad(h, by_host[h], c) for h, c in zip(hosts, host_cpus, strict=True)]


def oversubscribed(ranks: pd.DataFrame, host_cpus: list[int]) -> list[HostLoad]:
    return [h for h in loads(ranks, host_cpus) if h.oversubscribed]


def warning(over: list[HostLoad]) -> str | None:
    """The one warning line (None: no host had more ranks than CPUs)."""
    if not over:
        return None
    shown = "; ".join(f"{len(h.ranks)} ranks on {h.host} with {h.cpus} CPU"
                      f"{'s' if h.cpus != 1 else ''}" for h in over[:4])
    more = f" and {len(over) - 4} more hosts" if len(over) > 4 else ""
    return (f"oversubscribed: {shown}{more} — ranks took turns on the CPUs, so waiting, "
            "imbalance and the timing-driven findings (marked `oversubscribed`) may be "
            "descheduling, not the program")


def note(over: list[HostLoad]) -> str:
    """What a marked finding's message adds."""
    n = sum(len(h.ranks) for h in over)
    c = sum(h.cpus for h in over)
    return (f" Measured oversubscribed ({n} ranks on {c} CPUs): part of this time may be "
            "ranks waiting for a CPU, not for each other.")
