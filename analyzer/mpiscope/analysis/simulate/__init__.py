"""Trace replay simulator: replays a trace's ranks on a model of a machine, optionally
with a what-if scenario applied, and predicts the run (docs/simulate.md).

    from mpiscope.analysis import simulate
    result = simulate.replay(trace)                       # on its own fitted machine
    what = simulate.replay(trace, Scenario(latency_s=60e-6))
    what.predicted_s, what.trace                          # a Trace, like a measured one

model: the machine (network per path, CPU factor, fitting); scenario: what changes;
program: the trace as ops with dependencies; engine: the replay; timeline: the
predicted run as a Trace.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from mpiscope.analysis.simulate import engine, program, timeline
from mpiscope.analysis.simulate.model import INTER, INTRA, Machine, fit, load_machine
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.archive.trace import Trace

__all__ = ["Machine", "Replay", "Scenario", "fit", "load_machine", "predicted_s", "replay"]


@dataclass
class Replay:
    """One replay: the measured run, its replay on the base machine and the prediction
    (the replay with the scenario; the same as `replayed` for no scenario)."""

    measured_s: float
    replayed_s: float
    predicted_s: float
    scenario: Scenario
    machine: Machine  # the machine the prediction ran on
    fitted: Machine  # the trace's own machine
    ranks: pd.DataFrame  # per rank: measured/replayed/predicted total, compute, MPI
    events: int  # ops + message posts and completions replayed
    engine_s: float  # time the engine took (the prediction's replay)
    _source: Trace = field(repr=False)
    _program: program.Program = field(repr=False)
    _timeline: engine.Timeline = field(repr=False)

    @functools.cached_property
    def trace(self) -> Trace:
        """The predicted run as a Trace (write it with mpiscope.archive.writer)."""
        return timeline.predicted_trace(self._source, self._program, self._timeline,
                                        self.machine)

    @property
    def error(self) -> float:
        """The replay without change against the measurement, relative."""
        return (self.replayed_s - self.measured_s) / self.measured_s if self.measured_s else 0.0

    def to_dict(self) -> dict:
        return {"measured_s": self.measured_s, "replayed_s": self.replayed_s,
                "predicted_s": self.predicted_s,
                "gain_s": self.replayed_s - self.predicted_s,
                "replay_error": self.error,
                "scenario": self.scenario.to_dict(), "machine": self.machine.to_dict(),
                "fitted": self.fitted.to_dict(),
                "own_time": {"overhead_s": float(self._program.overhead.sum()) / 1e9,
                             "noise_s": float(self._program.noise.sum()) / 1e9,
                             "noise_kept": program.keeps_noise(self.scenario,
                                                               self.machine),
                             # computation spent runnable but waiting for a CPU (the
                             # tracer's measurement): kept or dropped with the noise
                             "compute_descheduled_s": self._program.compute_desched / 1e9},
                "ranks": self.ranks.to_dict(orient="records")}


def target_machine(fitted: Machine, scenario: Scenario) -> Machine:
    """The machine a scenario runs on: its named machine (or the fitted one) with its
    network and CPU overrides."""
    base = load_machine(scenario.machine) if scenario.machine else fitted
    machine = base.with_network(scenario.latency_s, scenario.bandwidth_Bps)
    machine = machine.with_network(scenario.inter_latency_s, scenario.inter_bandwidth_Bps,
                                   only=INTER)
    machine = machine.with_network(scenario.intra_latency_s, scenario.intra_bandwidth_Bps,
                                   only=INTRA)
    if scenario.cpu_factor is not None:
        machine = replace(machine, cpu_factor=scenario.cpu_factor)
    if scenario.nodes is not None:
        machine = replace(machine, nodes=scenario.nodes)
    return machine


def _breakdown(prog: program.Program, tl: engine.Timeline) -> pd.DataFrame:
    rank = prog.op_rank()
    mpi = np.bincount(rank, weights=np.where(prog.removed, 0.0, tl.end - tl.start),
                      minlength=prog.num_ranks)
    total = tl.rank_end
    return pd.DataFrame({"rank": np.arange(prog.num_ranks), "total_s": total / 1e9,
                         "mpi_s": mpi / 1e9, "compute_s": (total - mpi) / 1e9})


def _measured(trace: Trace) -> pd.DataFrame:
    c = trace.calls[trace.calls["depth"] == 0]
    mpi = (c["end"] - c["start"]).groupby(c["rank"]).sum()
    r = trace.ranks.sort_values("rank")
    total = r["last_ns"].to_numpy().astype(float)
    mpi = mpi.reindex(r["rank"], fill_value=0).to_numpy().astype(float)
    return pd.DataFrame({"rank": r["rank"].to_numpy(), "total_s": total / 1e9,
                         "mpi_s": mpi / 1e9, "compute_s": (total - mpi) / 1e9})


def _timed_run(prog: program.Program) -> tuple[engine.Timeline, float]:
    t0 = time.perf_counter()
    tl = engine.run(prog)
    return tl, time.perf_counter() - t0


def predicted_s(trace: Trace, scenario: Scenario, fitted: Machine,
                prepared: program.Prepared | None = None) -> float:
    """The runtime `scenario` gives on `trace` (no breakdown, no predicted trace): for
    trying several scenarios against one `replay(trace)` (`prepared`: what they share,
    program.Prepared.of(trace), made once)."""
    machine = target_machine(fitted, scenario)
    prog = without_parts(program.build(trace, fitted, machine, scenario, prepared))
    return engine.run(prog).runtime_ns / 1e9


def without_parts(prog: program.Program) -> program.Program:
    """The program without its ops' overhead/noise split, which only the replay's
    breakdown reads (not the engine): freed before the engine's own arrays are made,
    where a scenario's replay peaks."""
    none = np.zeros(0)
    return replace(prog, overhead=none, noise=none)


@dataclass(frozen=True)
class BaseRun:
    """The replay of a trace as it ran, reduced to what scenarios are compared with: its
    runtime and the fitted machine (`Replay` also keeps the program and timeline, several
    times the trace's own size, for the predicted trace and the breakdown)."""

    replayed_s: float
    fitted: Machine
    events: int  # as Replay.events
    # the longest rank's measured interval as replayed (interval_ns): what the measured
    # run (breakdown's total_s) is compared with to scale a replayed saving
    interval_s: float = 0.0
    # each outermost call's replayed time (ns), in program.Prepared's op order: what
    # per-call-site questions about the base replay need without building it again
    op_ns: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)


def base_run(trace: Trace, prepared: program.Prepared | None = None) -> BaseRun:
    """`replay(trace)`'s replayed_s, fitted and events; the program and timeline freed on
    return."""
    fitted = fit(trace)
    prepared = prepared if prepared is not None else program.Prepared.of(trace)
    prog = without_parts(program.build(trace, fitted, fitted, Scenario(), prepared))
    events = prog.num_ops + 2 * len(prog.msg_row)
    tl = engine.run(prog)
    return BaseRun(replayed_s=tl.runtime_ns / 1e9, fitted=fitted, events=events,
                   interval_s=interval_ns(trace, prog, tl) / 1e9,
                   op_ns=np.where(prog.removed, 0.0, tl.end - tl.start))


def interval_ns(trace: Trace, prog: program.Program, tl: engine.Timeline) -> float:
    """The longest rank's measured interval in the replay, as breakdown.intervals has it
    in the trace: the end of its MPI_Init to the start of its MPI_Finalize (without them:
    its first event, as far before its first call as measured, and its end)."""
    n = prog.num_ranks
    if n == 0 or not len(prog.op_call):
        return tl.runtime_ns
    rank = prog.op_rank()
    first = prog.op_lo[:-1]
    has = np.diff(prog.op_lo) > 0
    r = trace.ranks
    first_ns = np.zeros(n)
    known = r["rank"].to_numpy() < n
    first_ns[r["rank"].to_numpy()[known]] = r["first_ns"].to_numpy()[known]
    lead = trace.calls["start"].to_numpy()[prog.op_call[first[has]]] - first_ns[has]
    begin = np.zeros(n)
    begin[has] = tl.start[first[has]] - np.maximum(lead, 0)
    end = np.asarray(tl.rank_end, dtype=np.float64).copy()
    kind = trace.calls["kind"]
    for k, at, pick, fill in (("init", tl.end, np.maximum, -np.inf),
                              ("finalize", tl.start, np.minimum, np.inf)):
        ops = (kind == k).to_numpy()[prog.op_call]
        if ops.any():
            edge = np.full(n, fill)
            pick.at(edge, rank[ops], at[ops])
            if k == "init":
                begin = np.where(np.isfinite(edge), edge, begin)
            else:
                end = np.where(np.isfinite(edge), edge, end)
    return float(np.maximum(end - begin, 0.0).max())


def replay(trace: Trace, scenario: Scenario | None = None, *,
           fitted: Machine | None = None,
           prepared: program.Prepared | None = None) -> Replay:
    """Replay `trace` on its own fitted machine, then with `scenario` (if any)."""
    scenario = scenario or Scenario()
    fitted = fitted or fit(trace)
    prepared = prepared if prepared is not None else program.Prepared.of(trace)
    base_prog = program.build(trace, fitted, fitted, Scenario(), prepared)
    base, engine_s = _timed_run(base_prog)
    machine, prog, tl = fitted, base_prog, base
    if not scenario.is_baseline:
        machine = target_machine(fitted, scenario)
        prog = program.build(trace, fitted, machine, scenario, prepared)
        tl, engine_s = _timed_run(prog)
    measured = _measured(trace)
    ranks = measured.rename(columns=lambda c: c if c == "rank" else f"measured_{c}")
    for name, (pr, t) in {"replayed": (base_prog, base), "predicted": (prog, tl)}.items():
        b = _breakdown(pr, t)
        for col in ("total_s", "mpi_s", "compute_s"):
            ranks[f"{name}_{col}"] = b[col].to_numpy()
    return Replay(measured_s=float(measured["total_s"].max()),
                  replayed_s=base.runtime_ns / 1e9, predicted_s=tl.runtime_ns / 1e9,
                  scenario=scenario, machine=machine, fitted=fitted, ranks=ranks,
                  events=prog.num_ops + 2 * len(prog.msg_row), engine_s=engine_s,
                  _source=trace, _program=prog, _timeline=tl)
