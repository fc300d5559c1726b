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
    """What changes: calls run less often or not at all, and the machine's network and
    CPU speed (None: as the base machine has them)."""

    collective_every: tuple[CollectiveEvery, ...] = ()
    remove: tuple[CallSite, ...] = ()
    latency_s: float | None = None
    bandwidth_Bps: float | None = None
    cpu_factor: float | None = None
    machine: str | None = None  # name or file of the machine model (None: fitted)
    notes: list[str] = field(default_factory=list, compare=False)

    @property
    def is_baseline(self) -> bool:
        return self == Scenario()

    def to_dict(self) -> dict:
        return {"collective_every": [str(c) for c in self.collective_every],
                "remove": [str(s) for s in self.remove], "latency_s": self.latency_s,
                "bandwidth_Bps": self.bandwidth_Bps, "cpu_factor": self.cpu_factor,
                "machine": self.machine}
