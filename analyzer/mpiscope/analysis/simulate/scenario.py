"""What-if scenarios: changes to a trace's program or machine, as data."""

from __future__ import annotations

from dataclasses import dataclass, field

from mpiscope.errors import UserError


@dataclass(frozen=True)
class CallSite:
    """`FUNC@FILE:LINE`: the MPI calls of one function at one call site."""

    function: str
    callsite: str

    @classmethod
    def parse(cls, text: str, option: str) -> CallSite:
        function, sep, callsite = text.partition("@")
        if not sep or not function.startswith("MPI_") or not callsite:
            raise UserError(option, f"expected FUNC@CALLSITE (e.g. MPI_Allreduce@himeno.c:286), "
                            f"got {text!r}")
        return cls(function, callsite)

    def __str__(self) -> str:
        return f"{self.function}@{self.callsite}"


@dataclass(frozen=True)
class CollectiveEvery:
    """Run the collective at `site` only every k-th time (and the last time)."""

    site: CallSite
    k: int

    @classmethod
    def parse(cls, text: str) -> CollectiveEvery:
        spec, sep, k = text.rpartition("=")
        if not sep:
            raise UserError("--collective-every", f"expected FUNC@CALLSITE=K, got {text!r}")
        try:
            every = int(k)
        except ValueError:
            raise UserError("--collective-every", f"K must be a whole number, got {k!r}") from None
        if every < 1:
            raise UserError("--collective-every", f"K must be >= 1, got {every}")
        return cls(CallSite.parse(spec, "--collective-every"), every)

    def __str__(self) -> str:
        return f"{self.site}={self.k}"


@dataclass(frozen=True)
class Scenario:
    """What changes: calls run less often, not at all or merged, the computation
    balanced or one rank's spread, and the machine's network, CPU speed and node count
    (None: as the base machine has them)."""

    collective_every: tuple[CollectiveEvery, ...] = ()
    remove: tuple[CallSite, ...] = ()
    # bursts of back-to-back small messages from these sends to one receiver: one message
    aggregate: tuple[CallSite, ...] = ()
    # every rank's computation between synchronizations becomes the ranks' mean
    balance: bool = False
    latency_s: float | None = None
    bandwidth_Bps: float | None = None
    # the inter-node path alone (after latency_s / bandwidth_Bps, which set every path)
    inter_latency_s: float | None = None
    inter_bandwidth_Bps: float | None = None
    # the intra-node path alone (findings: a path made faster or free)
    intra_latency_s: float | None = None
    intra_bandwidth_Bps: float | None = None
    cpu_factor: float | None = None
    nodes: int | None = None  # ranks placed block-wise on this many nodes
    machine: str | None = None  # name or file of the machine model (None: fitted)
    # keep each call's noise (own time above its function's overhead)? None: on the
    # traced hosts yes, on other nodes no (program.keeps_noise)
    noise: bool | None = None
    # keep the run-queue delay the tracer measured (desched.py)? False: each rank on
    # cores of its own, every compute burst and every call's own part between MPI_Init
    # and MPI_Finalize without it; the rest of the noise as `noise` says
    # (program._delay_cut)
    run_delay: bool = True
    # for the findings (Python only): single calls (rows of trace.calls) taken out, the
    # balance only for the phases that end at these call sites, one rank's computation
    # shared out equally among all ranks
    remove_calls: tuple[int, ...] = ()
    balance_at: tuple[CallSite, ...] = ()
    spread_rank: int | None = None
    # the polling calls at these call sites that complete nothing taken out: each loop
    # becomes the blocking wait its completing call is, its computation kept
    blocking_at: tuple[CallSite, ...] = ()
    notes: list[str] = field(default_factory=list, compare=False)

    @property
    def is_baseline(self) -> bool:
        return self == Scenario()

    def to_dict(self) -> dict:
        return {"collective_every": [str(c) for c in self.collective_every],
                "remove": [str(s) for s in self.remove],
                "aggregate": [str(s) for s in self.aggregate], "balance": self.balance,
                "latency_s": self.latency_s, "bandwidth_Bps": self.bandwidth_Bps,
                "inter_node_latency_s": self.inter_latency_s,
                "inter_node_bandwidth_Bps": self.inter_bandwidth_Bps,
                "cpu_factor": self.cpu_factor, "nodes": self.nodes,
                "machine": self.machine, "noise": self.noise,
                **({"removed_calls": len(self.remove_calls)} if self.remove_calls else {}),
                **({"balance_at": [str(s) for s in self.balance_at]}
                   if self.balance_at else {}),
                **({"spread_rank": self.spread_rank} if self.spread_rank is not None
                   else {}),
                **({"intra_node_latency_s": self.intra_latency_s,
                    "intra_node_bandwidth_Bps": self.intra_bandwidth_Bps}
                   if self.intra_latency_s is not None or self.intra_bandwidth_Bps is not None
                   else {}),
                **({"blocking_at": [str(s) for s in self.blocking_at]}
                   if self.blocking_at else {}),
                **({"run_delay": "drop"} if not self.run_delay else {})}
