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


# a rank runnable but waiting for a CPU this share of its run is worth a warning even
# where the hosts' CPU counts do not show it (another job on the host)
DESCHEDULED_NOTABLE = 0.05


def descheduled_share(ranks: pd.DataFrame) -> tuple[float, float] | None:
    """Least and largest share of a rank's measured interval its main thread spent
    runnable but waiting for a CPU (the breakdown's descheduled_s / total_s); None where
    the tracer measured none."""
    if "descheduled_s" not in ranks.columns or ranks.empty:
        return None
    d = ranks["descheduled_s"].astype(float)
    total = ranks["total_s"].astype(float)
    ok = d.notna() & (total > 0)
    if not ok.any():
        return None
    share = d[ok] / total[ok]
    return float(share.min()), float(share.max())


def _measured(share: tuple[float, float]) -> str:
    lo, hi = (round(100 * x) for x in share)
    span = f"{lo}%" if lo == hi else f"{lo}–{hi}%"
    return f"ranks were runnable but waiting for a CPU {span} of their run (measured)"


def warning(over: list[HostLoad], share: tuple[float, float] | None = None) -> str | None:
    """The one warning line (None: no host had more ranks than CPUs and no rank waited
    for a CPU a notable share of its run); `share`: descheduled_share."""
    if not over:
        if share is not None and share[1] >= DESCHEDULED_NOTABLE:
            return (f"descheduled: {_measured(share)} — waiting, imbalance and the "
                    "timing-driven findings may be descheduling, not the program")
        return None
    shown = "; ".join(f"{len(h.ranks)} ranks on {h.host} with {h.cpus} CPU"
                      f"{'s' if h.cpus != 1 else ''}" for h in over[:4])
    more = f" and {len(over) - 4} more hosts" if len(over) > 4 else ""
    measured = f" ({_measured(share)})" if share is not None else ""
    return (f"oversubscribed: {shown}{more} — ranks took turns on the CPUs{measured}, so "
            "waiting, imbalance and the timing-driven findings (marked `oversubscribed`) "
            "may be descheduling, not the program")


def note(over: list[HostLoad]) -> str:
    """What a marked finding's message adds."""
    n = sum(len(h.ranks) for h in over)
    c = sum(h.cpus for h in over)
    return (f" Measured oversubscribed ({n} ranks on {c} CPUs): part of this time may be "
            "ranks waiting for a CPU, not for each other.")


def turns_note(over: list[HostLoad]) -> str:
    """What the `descheduled` finding's message adds: the hosts' count behind it."""
    n = sum(len(h.ranks) for h in over)
    c = sum(h.cpus for h in over)
    return f" Measured oversubscribed ({n} ranks on {c} CPUs): the ranks took turns on them."
