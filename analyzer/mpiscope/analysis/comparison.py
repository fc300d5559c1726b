"""Compare two analyzed runs (before/after a fix): what changed and did the prediction hold.

Works on the contract JSON of each run (`Analysis(trace).to_dict()`), so a comparison can
also be built from saved `--json` files; `compare_traces` reads and analyzes two trace
directories and keeps each run's session for the reports' timelines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mpiscope.analysis.findings import run_wide
from mpiscope.analysis.session import Analysis
from mpiscope.archive import fom, reader


@dataclass
class RunSummary:
    label: str
    trace_dir: Path
    report: dict
    figures: dict | None = None
    # the run's session when it was analyzed here, None when read from saved JSON
    analysis: Analysis | None = field(default=None, repr=False, compare=False)

    @property
    def wall_s(self) -> float:
        """Elapsed time of the run: the slowest rank's measured interval."""
        return max((r["total_s"] for r in self.report["ranks"]), default=0.0)

    def share(self, part: str) -> float:
        """Fraction of all ranks' time spent in `part` (compute/communication/synchronization/
        io); 0 for a part a report saved before it existed does not have (io_s)."""
        total = sum(r["total_s"] for r in self.report["ranks"])
        return (sum(r.get(f"{part}_s", 0.0) for r in self.report["ranks"]) / total
                if total else 0.0)

    def function_time(self) -> dict[str, tuple[int, float]]:
        return {f["name"]: (f["calls"], f["time_s"]) for f in self.report["functions"]}

    @property
    def rank_time_s(self) -> float:
        return sum(r["total_s"] for r in self.report["ranks"])

    @property
    def truncated_ranks(self) -> list[int]:
        """Ranks whose trace was cut short (no MPI_Finalize, truncated events)."""
        return list(self.report.get("meta", {}).get("truncated_ranks") or [])


@dataclass
class FunctionDelta:
    name: str
    calls_a: int
    calls_b: int
    time_a: float
    time_b: float
    share_a: float  # of all ranks' time
    share_b: float

    @property
    def delta_s(self) -> float:
        return self.time_b - self.time_a


@dataclass
class FindingOutcome:
    """One finding of run A and what became of it in run B."""

    finding: dict
    resolved: bool
    time_b_s: float  # time the same (kind, call site) still costs in B, 0 if gone


@dataclass
class Comparison:
    a: RunSummary
    b: RunSummary
    functions: list[FunctionDelta] = field(default_factory=list)
    outcomes: list[FindingOutcome] = field(default_factory=list)

    @property
    def measured_gain_s(self) -> float:
        return self.a.wall_s - self.b.wall_s

    @property
    def predicted_gain_s(self) -> float:
        """Savings A's findings predicted for the findings B no longer shows."""
        return sum(o.finding["estimated_savings_s"] for o in self.outcomes if o.resolved)

    def figure(self, key: str) -> tuple[float | None, float | None]:
        fa = (self.a.figures or {}).get(key)
        fb = (self.b.figures or {}).get(key)
        return fa, fb

    @property
    def speedup(self) -> float | None:
        """Figure-of-merit ratio B/A (MFLOPS), else the wall-time ratio A/B."""
        fa, fb = self.figure("mflops")
        if fa and fb:
            return fb / fa
        return self.a.wall_s / self.b.wall_s if self.b.wall_s else None

    @property
    def speedup_basis(self) -> str:
        """What `speedup` is the ratio of, so a report can say so."""
        fa, fb = self.figure("mflops")
        return "MFLOPS" if fa and fb else "wall time"


def _finding_key(f: dict) -> tuple[str, str, str]:
    return (f["kind"], f.get("function", ""), f.get("callsite", ""))


OUTSIDE_INTERVAL = {"MPI_Init", "MPI_Init_thread", "MPI_Finalize"}  # set-up and tear-down


def build(a: RunSummary, b: RunSummary) -> Comparison:
    fa, fb = a.function_time(), b.function_time()
    for skip in OUTSIDE_INTERVAL:  # not part of the ranks' measured time, so no share
        fa.pop(skip, None)
        fb.pop(skip, None)
    ta, tb = a.rank_time_s or 1.0, b.rank_time_s or 1.0
    names = sorted(set(fa) | set(fb), key=lambda n: -max(fa.get(n, (0, 0))[1],
                                                          fb.get(n, (0, 0))[1]))
    functions = [
        FunctionDelta(n, fa.get(n, (0, 0.0))[0], fb.get(n, (0, 0.0))[0],
                      fa.get(n, (0, 0.0))[1], fb.get(n, (0, 0.0))[1],
                      fa.get(n, (0, 0.0))[1] / ta, fb.get(n, (0, 0.0))[1] / tb)
        for n in names
    ]
    in_b = {_finding_key(f): f for f in b.report["findings"]}
    outcomes = []
    for f in a.report["findings"]:
        if run_wide(f.get("function"), f.get("callsite")):
            # a finding of the whole run (descheduled) is the machine's, not the code's:
            # a change does not resolve it and its saving is no gain to expect of one
            continue
        twin = in_b.get(_finding_key(f))
        # still present in B but at a small fraction of its cost counts as resolved too
        resolved = twin is None or twin["time_s"] < 0.2 * f["time_s"]
        outcomes.append(FindingOutcome(f, resolved, twin["time_s"] if twin else 0.0))
    return Comparison(a, b, functions, outcomes)


def analyze_run(trace_dir: Path, label: str | None = None, *,
                skip_frames: str | Sequence[str] = (), group_by: str = "frame") -> RunSummary:
    """Read and analyze one traced run, with the figures of merit its program printed."""
    session = Analysis(reader.load(trace_dir), skip_frames=skip_frames, group_by=group_by)
    return summarize(session, Path(trace_dir), label)


def summarize(session: Analysis, trace_dir: Path, label: str | None = None) -> RunSummary:
    """A run already analyzed (also the web UI's session) as `compare` sees it: its JSON
    and the figures of merit its program printed; `label` defaults to the directory's name."""
    return RunSummary(label or trace_dir.name, trace_dir, session.to_dict(),
                      fom.read(trace_dir), session)


def compare_traces(a: Path, b: Path, label_a: str | None = None,
                   label_b: str | None = None, *, skip_frames: str | Sequence[str] = (),
                   group_by: str = "frame") -> Comparison:
    """Run B (e.g. after a fix) against run A, from their trace directories."""
    opts = {"skip_frames": skip_frames, "group_by": group_by}
    return build(analyze_run(a, label_a, **opts), analyze_run(b, label_b, **opts))
