"""Findings: concrete, located improvement opportunities ranked by estimated savings.

Kinds (the contract's definitions):
Every saving is replayed: the trace's ranks with their messages and collectives on the
machine fitted from its own timings (mpiscope.analysis.simulate), once as they ran and
once with the finding fixed (the scenario `mpiscope whatif` takes). The message says so.

Savings (`Saving`): the difference of the two replays is in replayed time; the saving
shown is that difference scaled to the measured run (× run / base replay), never below
0 and never above what the fix can take off: the time the finding's calls take (summed
over ranks; for hot_spot the hot rank's computation but its 1/n share; descheduled:
the run-queue delay measured, summed over ranks;
bandwidth/latency-bound change every message on the path: the run only) and the run. A
base replay slower than the run no longer shows a saving beyond the run; where scaled or
bounded the message says so, the evidence keeps the replayed difference, the scale, the
bound and `share_of_run` (the saving shown over the run). The run (`run_s`) is one for
all of it and for the noise floor: the longest rank's measured interval (breakdown: end
of MPI_Init .. start of MPI_Finalize), and the scale compares it with the same interval
in the base replay (simulate.BaseRun.interval_s), so a replay as it ran scales by 1 and
set-up time (a slow MPI_Init) neither dilutes a share nor raises the floor.

- redundant_collective: a collective whose input and result hashes equal those of the
  previous call from the same call site on the same communicator on every rank, and
  whose receive buffer already held the result at entry on every rank (the prior hash:
  deleting the call leaves every byte as it was; a fresh buffer filled anew each time is
  not redundant), or a barrier directly after a synchronizing collective on the same
  communicator. Claimed for a call site only where every call after its first on each
  communicator is so (never one instance in set-up or tear-down: at least
  MIN_REDUNDANT_INSTANCES; a site proved in fewer is kept under `minor`, saying so, with
  no saving replayed); saving: those instances removed.
- frequent_collective: a small collective run every iteration of the main loop from one
  call site at a notable share of run time; saving replayed by the simulator
  (mpiscope.analysis.simulate) on the machine fitted from the trace, with the collective
  run every k-th iteration, k the smallest of FREQUENT_KS that gets 90% of their best.
- message_aggregation: bursts of small back-to-back messages between one pair, from
  consecutive calls with one call path (one statement, not two lines a wrapper's caller
  names alike); saving: each burst sent as one message (`--aggregate`).
- load_imbalance: ranks waiting at a synchronizing call site because others are late;
  the waiting is attributed to the rank(s) that caused it (the late sender of each
  message, the last rank to arrive at each collective), weighted by the time it cost;
  saving: the computation of the phases ending at that call site balanced (every rank
  computing the ranks' mean). Only where the late rank computes longer than those waiting
  for it (else the waiting is transfer time, descheduling or communication: `minor`).
- hot_spot: one rank holding most of the critical path that many ranks send to or wait
  for, many more than a typical rank exchanges messages with (a master serving workers,
  a root reading for all; not the slowest rank of a ring or halo, whose neighbours wait
  for it as every rank's do): more than RING_PARTNERS, at least HOT_OVER_TYPICAL times
  the median rank's distinct partners and HOT_PARTNERS of the other ranks; saving: its
  computation shared out equally among all ranks.
- bandwidth_bound / latency_bound: a call site completing received messages, at a
  notable share of rank time, whose replayed time is mostly (TRANSFER_DOMINATES) data in
  flight on the path its messages take: what its calls lose in the replay with that
  path's transfers free (a wait for a late sender that was itself receiving counts as
  transfer); only where the base replay gives back the site's measured time
  (REPLAY_TOLERANCE). latency_bound where freeing the latency alone gains more than freeing the
  bandwidth alone. Saving: twice the path's fitted bandwidth (half its latency), all its
  messages. Its waiting is no load_imbalance.
- polling: a call site of polling calls (simulate.program.POLLING, merged visits as
  their calls) at a notable share of rank time; saving: the calls there that complete
  nothing taken out, the computation between them kept (Scenario.blocking_at).
- descheduled: ranks runnable but waiting for a CPU (the run-queue delay the tracer
  measured, desched.py: the breakdown's descheduled_s, summed over ranks), only where it
  was measured; a finding of the whole run (no function, no call site). Saving: the run
  on cores of their own (Scenario(run_delay=False): each compute burst and each call's
  own part within the measured interval without the delay measured in it), bounded by
  the delay itself.

Noise floor (`noise_floor`, `split`): a finding whose saving is below the larger of
RUN_SHARE_FLOOR of the run and the run's measured iteration-to-iteration spread is not
listed (the JSON keeps it under `minor`, with the reason): it could not be told from the
run's own variation. Where no saving could be replayed, the time in the calls (per rank)
stands in for it. Every saving is also stated as a share of the run.

How it runs: the detection is written per rank (`_part1`, `_part2`, `_part3` take one
rank's slice, engines.slices.RankSlice, or the whole trace as one part, `whole`) plus a
combine on the client (`detect`), so the pandas engine (one part) and the Dask engine (a
part per rank, on the workers) apply the same rules. What crosses ranks is small:
per collective instance, only the instances that matter (candidates for redundancy, those
someone waited in), and per call site aggregates. The replays are the `replays` object's
(`Replays` here: the whole trace; engines.rankfindings: bounded by an event budget).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from mpiscope.analysis import iterations, simulate
from mpiscope.analysis.critical_path import CriticalPath
from mpiscope.analysis.order import by_rank_then_start
from mpiscope.analysis.simulate.model import INTER, INTRA, Machine, format_rate, format_time
from mpiscope.analysis.simulate.program import POLLING
from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario
from mpiscope.analysis.stats import polls
from mpiscope.analysis.waitstates import ALL2ONE, NXN, ONE2ALL, WaitStates
from mpiscope.archive.trace import Trace
from mpiscope.errors import UserError
from mpiscope.numbers import data, seconds

SYNCHRONIZING = NXN | {"MPI_Barrier"}
SMALL_COLLECTIVE_BYTES = 1024  # per rank and call
SMALL_MESSAGE_BYTES = 4096
MIN_BURST = 2  # messages back to back, one pair, one call site
MIN_REDUNDANT_INSTANCES = 2
NOTABLE_SHARE = 0.02  # of the summed rank time
FREQUENT_KS = (2, 5, 10, 20, 50)  # every k-th iteration: the k tried (2 k <= iterations)
FREQUENT_MIN_ITERATIONS = 20  # a loop this long at least, for a collective to be frequent
FREQUENT_ENOUGH = 0.9  # of the best saving: the smallest k that gets it is proposed
RUN_SHARE_FLOOR = 0.01  # of the run: a saving below it is not listed as a finding
HOT_SHARE = 0.5  # of the critical path on one rank, for a hot spot
HOT_PARTNERS = 0.5  # of the other ranks sending to it or waiting for it
# a hot rank's partners must exceed a ring's or 1-D halo's neighbours, and be this many
# times the median rank's distinct message partners: in a symmetric neighbour pattern
# every rank has as many, and its slowest rank is no server the others queue at
RING_PARTNERS = 2
HOT_OVER_TYPICAL = 2.0
TRANSFER_DOMINATES = 0.5  # of a receive call site's replayed time: transfer-bound
REPLAY_TOLERANCE = 0.1  # a site's replayed time above its measured time by more: no verdict
FREE_BANDWIDTH_BPS = 1e18  # a path whose transfers cost nothing: no latency, this rate
REPLAYED = ("replayed: the trace's ranks with their messages and collectives on the "
            "machine fitted from its own timings")
MODEL = "simulate (fitted machine)"
RUN_WIDE = "all ranks, the whole run"  # where a finding of no one call site is
WHY_NONE = ("cannot be replayed (the replay deadlocks with this change), so no saving is "
            "stated")


class Replays:
    """The trace's replay on its own fitted machine, made once, and the savings of
    scenarios against it (None where the scenario cannot be replayed). `replayed` and
    `model` say how, in the findings' messages and evidence."""

    replayed = REPLAYED
    model = MODEL
    why_none = WHY_NONE  # what the message says where `saving` gives None
    run_s = 0.0  # the run (`run_s`): the savings' scale, bound and share; detect sets it

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        # the base replay, or why it failed: kept either way, as a failed replay (e.g. a
        # deadlock) would only fail again, once per finding asking for a saving
        self._base: simulate.BaseRun | UserError | None = None
        self._program_prepared: tuple[Trace, simulate.program.Prepared] | None = None

    @property
    def replayed_s(self) -> float:
        return self.base.replayed_s

    @property
    def base(self) -> simulate.BaseRun:
        if self._base is None:
            try:
                # only its runtime and machine are kept: the base replay's program and
                # timeline alive beside each scenario's would double the peak memory
                self._base = simulate.base_run(self.trace, self._prepared_program())
            except UserError as err:
                self._base = err
        if isinstance(self._base, UserError):
            raise self._base
        return self._base

    def _prepared_program(self) -> simulate.program.Prepared:
        """What every scenario's program takes from `trace`, made once (a subclass may set
        `trace` late: it is made on first use, for the trace then)."""
        pre = getattr(self, "_program_prepared", None)
        if pre is None or pre[0] is not self.trace:
            pre = self._program_prepared = (self.trace,
                                            simulate.program.Prepared.of(self.trace))
        return pre[1]

    def scale(self) -> float:
        """The measured run over the same interval replayed (1 where either is
        unknown): what turns a replayed difference into time of the measured run; an exact
        replay scales by 1."""
        try:
            replayed = self.base.interval_s
        except UserError:
            return 1.0
        measured = self.run_s
        return measured / replayed if replayed > 0 and measured > 0 else 1.0

    def saving(self, scenario: Scenario) -> float | None:
        """base replay − scenario replay, in replayed seconds (None: cannot be replayed);
        findings show it through `Saving`."""
        try:
            base = self.base
        except UserError as err:  # the trace itself cannot be replayed: say so, not the change
            self.why_none = (f"cannot be estimated: the trace cannot be replayed as it ran "
                             f"({err.problem}), so no "
                             "saving is stated")
            return None
        try:
            return base.replayed_s - simulate.predicted_s(self.trace, scenario, base.fitted,
                                                         self._prepared_program())
        except UserError:  # e.g. the replay deadlocks without a call a partner needs
            return None


    def site_ns(self, scenario: Scenario | None,
                sites: list[tuple[str, str]]) -> dict[tuple[str, str], float] | None:
        """Per (function, call site) of `sites`: the time in its outermost calls (ns,
        summed over ranks) in the replayed trace as measured (`scenario` None), as
        replayed on the fitted machine (the baseline) or with `scenario`; None where the
        replay cannot run."""
        try:
            base = self.base
        except UserError:
            return None
        trace = self.trace
        pre = self._prepared_program()
        if scenario is None or (scenario.is_baseline and len(base.op_ns) == len(pre.op_call)):
            # as measured, or the base replay's own per-call times (kept by base_run)
            dur = pre.end - pre.start if scenario is None else base.op_ns
            return {(f, c): float(dur[simulate.program.site_mask(trace.calls, f, c)[
                pre.op_call]].sum()) for f, c in sites}
        try:
            prog = simulate.without_parts(simulate.program.build(
                trace, base.fitted, simulate.target_machine(base.fitted, scenario),
                scenario, self._prepared_program()))
            tl = simulate.engine.run(prog)
        except UserError:
            return None
        dur = np.where(prog.removed, 0.0, tl.end - tl.start)
        return {(f, c): float(dur[simulate.program.site_mask(trace.calls, f, c)[
            prog.op_call]].sum()) for f, c in sites}


def run_s(breakdown: pd.DataFrame) -> float:
    """The run (module doc, "Savings"), from the per-rank breakdown: the longest rank's
    measured interval."""
    return float(breakdown["total_s"].max()) if len(breakdown) else 0.0


@dataclass(frozen=True)
class Saving:
    """A finding's saving as shown (module doc, "Savings"): the replayed difference
    `replayed_s` (None: not replayed) scaled to the measured run by `scale` (`run_s` /
    replayed run) and bounded by `bound_s` (the time the finding's calls take) and
    `run_s`: one run for both, Replays.run_s."""

    replayed_s: float | None
    scale: float
    bound_s: float
    run_s: float

    @property
    def s(self) -> float:
        if self.replayed_s is None:
            return 0.0
        return min(max(self.replayed_s, 0.0) * self.scale, self.cap_s)

    @property
    def cap_s(self) -> float:
        return min(self.bound_s, self.run_s) if self.run_s > 0 else self.bound_s

    @property
    def bounded(self) -> bool:
        return self.replayed_s is not None and self.replayed_s * self.scale > self.cap_s

    def evidence(self) -> dict[str, Any]:
        return {"saving_replayed": self.replayed_s is not None,
                "replayed_difference_s": self.replayed_s, "replay_scale": self.scale,
                "saving_bound_s": self.cap_s if np.isfinite(self.cap_s) else None,
                "saving_bounded": self.bounded,
                "share_of_run": self.s / self.run_s if self.run_s > 0 else None}


def _saving(saving: float | None, replays: Replays,
            bound_s: float = float("inf")) -> Saving:
    return Saving(saving, replays.scale(), bound_s, replays.run_s)


def _saved(sv: Saving, replays: Replays, bound: str = "these calls take") -> str:
    """How much the fix saves and how that was obtained; `bound` says what `sv`'s bound
    is the time of, when it caps the saving."""
    if sv.replayed_s is None:
        return replays.why_none
    s = sv.s
    share = f", {s / sv.run_s:.1%} of the run" if sv.run_s > 0 else ""
    how = replays.replayed
    if abs(sv.scale - 1) > 0.01:
        how += (f"; the replayed difference, {seconds(max(sv.replayed_s, 0.0))}, scaled "
                f"by the measured over the replayed run, x{sv.scale:.3g}")
    if sv.bounded:
        how += (f"; bounded by the {seconds(sv.cap_s)} "
                + ("of the run" if sv.cap_s >= sv.run_s else bound))
    return f"saves ~{seconds(s)}{share} ({how})"


@dataclass
class Finding:
    kind: str
    function: str
    callsite: str
    calls: int
    time_s: float
    estimated_savings_s: float
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    # the frames of the call path, innermost first (`callsite` is the one chosen to name
    # it: docs/callpaths.md); [callsite] where no path was recorded
    callpath: list[str] = field(default_factory=list)
    # what the analysis grouped the calls by (callsite, or callsite and path): not output
    group: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("group")
        return d


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def run_wide(function: str | None, callsite: str | None) -> bool:
    """A finding of the whole run (`descheduled`): no function and no call site."""
    return not function and not callsite


def where(function: str, callsite: str) -> str:
    """`MPI_Allreduce at x.c:5`, or a plain statement that the trace has no call site;
    a finding of the whole run (`descheduled`) has neither."""
    if run_wide(function, callsite):
        return RUN_WIDE
    return f"{function} at {callsite}" if callsite else f"{function} (no call site recorded)"


# -------------------------------------------------------------- parts: one rank, or all
Run = Callable[[Callable[[Any], Any]], list[Any]]


@dataclass
class Whole:
    """A whole trace as one part, with the fields of an engines.slices.RankSlice (the
    per-rank functions below take either)."""

    trace: Trace
    received: pd.DataFrame
    call_offset: int
    waits: pd.DataFrame | None
    rank: int = -1

    def local(self, call: np.ndarray) -> np.ndarray:
        return np.asarray(call, dtype=np.int64) - self.call_offset


def whole(trace: Trace, ws: WaitStates) -> Whole:
    pc = ws.per_call
    return Whole(trace, trace.messages, 0,
                 pd.DataFrame({"wait_ns": pc["wait_ns"].to_numpy(),
                               "wait_kind": pc["wait_kind"].reset_index(drop=True)}))


def _take(s: Any, column: str, call: np.ndarray) -> np.ndarray:
    # categorical take: no per-row string conversion on large traces
    return s.trace.calls[column].take(s.local(call)).to_numpy()


def _with_callsite(s: Any, coll: pd.DataFrame) -> pd.DataFrame:
    return coll.assign(callsite=_take(s, "callsite", coll["call"].to_numpy()))


ROWS = ["rank", "instance", "call", "function", "callsite", "start", "end"]
NO_INSTANCES = np.zeros(0, dtype=np.int64)
ENTRIES_PER_PASS = 4_000_000  # collective entries (~25 B each) the client takes per pass


def _writes(coll: pd.DataFrame) -> np.ndarray:
    """The rows whose call writes a result on this rank: all but hashed calls without a
    result here (a reduce's or gather's non-root ranks: input hash, no result hash)."""
    return ~((coll["in_hash"].to_numpy() != 0) & (coll["out_hash"].to_numpy() == 0))


def _same_as_previous(coll: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """(the collectives with recorded hashes, whether each left its rank's memory as it
    was: input and result those of the previous call of its rank, call site,
    communicator and function, and its receive buffer already holding the result at
    entry; a trace without prior hashes proves nothing)."""
    c = coll[(coll["in_hash"] != 0) & (coll["out_hash"] != 0)]
    key = c.groupby(["rank", "callsite", "comm", "function"], observed=True,
                    sort=False).ngroup().to_numpy()
    order = np.lexsort((c["start"].to_numpy(), key))
    k, ih, oh = key[order], c["in_hash"].to_numpy()[order], c["out_hash"].to_numpy()[order]
    held = (c["prior_hash"].to_numpy() == c["out_hash"].to_numpy())[order]
    same_sorted = np.r_[False, (k[1:] == k[:-1]) & (ih[1:] == ih[:-1]) & (oh[1:] == oh[:-1])
                        & held[1:]]
    same = np.empty(len(c), dtype=bool)
    same[order] = same_sorted
    return c, same


def _site_calls(coll: pd.DataFrame) -> pd.DataFrame:
    """Per function, call site and rank: the calls that write a result here and the
    communicators they ran on (every call after the first on each could be redundant)."""
    w = coll[_writes(coll)]
    df = pd.DataFrame({"function": w["function"].astype(str).to_numpy(),
                       "callsite": w["callsite"].astype(str).to_numpy(),
                       "rank": w["rank"].to_numpy(), "comm": w["comm"].to_numpy()})
    return (df.groupby(["function", "callsite", "rank"])
            .agg(calls=("comm", "size"), comms=("comm", "nunique")).reset_index())


def _outermost_in_order(calls: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` of the outermost calls (depth 0) by rank, then start: as `sort_values`
    (stable) gives them, with no sort when they are in that order already (a trace read
    back is, but for a rank's several threads). Only the columns read are cut (a copy of
    every column of millions of calls costs seconds)."""
    cols = list(dict.fromkeys(["rank", "start", *columns]))
    outer = calls[cols][calls["depth"].to_numpy() == 0]
    by = by_rank_then_start(outer["rank"].to_numpy(), outer["start"].to_numpy())
    return outer if by is None else outer.iloc[by]


def _in(col: pd.Series, names: Collection[str]) -> np.ndarray:
    """Whether each row's value is one of `names`: on a categorical's categories (no string
    per row)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        hit = np.isin(np.asarray(col.cat.categories.astype(str)), list(names))
        return np.r_[hit, False][codes]  # code -1 (missing): no name
    return np.isin(col.astype(str).to_numpy(), list(names))


def _barriers_after(s: Any, coll: pd.DataFrame) -> pd.DataFrame:
    """Collective rows of barriers right after a synchronizing collective on the same
    communicator with no MPI call between (`prev`: that collective)."""
    calls = _outermost_in_order(s.trace.calls, ["call", "function", "comm"])
    fn = calls["function"]
    prev_fn = fn.groupby(calls["rank"].to_numpy(), observed=True).shift(1)
    prev_comm = calls["comm"].groupby(calls["rank"].to_numpy()).shift(1)
    hit = (fn == "MPI_Barrier") & prev_fn.isin(SYNCHRONIZING) & (prev_comm == calls["comm"])
    after = calls.loc[hit, ["call"]].assign(prev=prev_fn[hit])
    return coll[ROWS].merge(after, on="call")


def _frequent_part(coll: pd.DataFrame) -> pd.DataFrame:
    """Per call site, function and rank: calls, bytes and time of non-barrier collectives."""
    c = coll[coll["function"] != "MPI_Barrier"]
    df = pd.DataFrame({"callsite": c["callsite"].to_numpy(),
                       "function": c["function"].astype(str).to_numpy(),
                       "rank": c["rank"].to_numpy(),
                       "bytes": (c["bytes_sent"] + c["bytes_recv"]).to_numpy(),
                       "ns": (c["end"] - c["start"]).to_numpy()})
    return (df.groupby(["callsite", "function", "rank"])
            .agg(n=("ns", "size"), bytes=("bytes", "sum"), ns=("ns", "sum")).reset_index())


def _aggregation_part(s: Any) -> pd.DataFrame | None:
    """Bursts of small back-to-back messages this part's ranks sent: per function, call
    site and (sender, receiver) pair, the messages, bursts, bytes and send time. A burst
    is MIN_BURST messages at least, from consecutive calls of one call site and call path
    (_send_paths) to one partner; a call that also receives from that partner (a Sendrecv
    exchange, a ping-pong) is no part of one, and a trace with calls filtered out proves
    nothing back to back."""
    m = s.trace.messages
    if m.empty or s.trace.meta.filtered:
        return None
    calls = s.trace.calls
    # ordinal of each call among its rank's outermost calls: back-to-back = consecutive
    outer = _outermost_in_order(calls, ["call"])
    ordinal = np.full(len(calls), -1, dtype=np.int64)
    ordinal[s.local(outer["call"].to_numpy())] = outer.groupby("rank").cumcount().to_numpy()
    sc = s.local(m["send_call"].to_numpy())
    dur = calls["end"].to_numpy() - calls["start"].to_numpy()
    b = pd.DataFrame({"send_rank": m["send_rank"].to_numpy(),
                      "recv_rank": m["recv_rank"].to_numpy(),
                      "bytes": m["bytes"].to_numpy(), "o": ordinal[sc], "sc": sc,
                      "ns": dur[sc]})
    b = b[(b["bytes"] <= SMALL_MESSAGE_BYTES) & (b["o"] >= 0)]
    got = s.received
    done = got["recv_complete_call"].to_numpy()
    got_ok = done >= 0
    done = done[got_ok].astype(np.int64)
    if len(b) and len(done):
        # the partner's message completed in the sending call itself: an exchange. Only
        # sending calls that complete some receive can be one (a Sendrecv, not an Isend)
        receives = np.zeros(len(calls), dtype=bool)
        receives[s.local(done)] = True
        maybe = np.flatnonzero(receives[b["sc"].to_numpy()])
        if len(maybe):
            key = done * 1_000_003 + got["send_rank"].to_numpy()[got_ok]
            sent = m["send_call"].to_numpy()[b.index.to_numpy()[maybe]].astype(np.int64)
            mine = sent * 1_000_003 + b["recv_rank"].to_numpy()[maybe]
            exchange = np.zeros(len(b), dtype=bool)
            exchange[maybe] = np.isin(mine, key, kind="sort")
            b = b[~exchange]
    site = calls["callsite"].cat.codes.to_numpy() if hasattr(calls["callsite"], "cat") \
        else pd.factorize(calls["callsite"])[0]
    b = b.assign(site=site[b["sc"].to_numpy()], path=_send_paths(calls)[b["sc"].to_numpy()])
    b = b.sort_values(["send_rank", "recv_rank", "o"])
    pair = b["send_rank"].astype(np.int64) * 1_000_003 + b["recv_rank"]
    new = ((pair.diff() != 0) | (b["o"].diff() != 1) | (b["site"].diff() != 0)
           | (b["path"].diff() != 0))
    b = b.assign(burst=new.cumsum())
    size = b.groupby("burst")["burst"].transform("size")
    b = b[size >= MIN_BURST]
    if b.empty:
        return None
    # strings only for the messages in bursts
    b = b.assign(callsite=calls["callsite"].take(b["sc"].to_numpy()).astype(str).to_numpy(),
                 function=calls["function"].take(b["sc"].to_numpy()).astype(str).to_numpy())
    return (b.groupby(["function", "callsite", "send_rank", "recv_rank"])
            .agg(msgs=("bytes", "size"), bursts=("burst", "nunique"),
                 bytes=("bytes", "sum"), ns=("ns", "sum")).reset_index())


def _send_paths(calls: pd.DataFrame) -> np.ndarray:
    """Each call's recorded call path (-1: none). A burst's sends come from one path, one
    statement sending in a loop: a call site named by its caller (a wrapper's, callpaths)
    covers several statements, and a control message followed by a ping-pong's first
    message from the next line are no burst to merge."""
    if "callpath" not in calls.columns:
        return np.full(len(calls), -1, dtype=np.int64)
    return calls["callpath"].to_numpy().astype(np.int64)


def _receiving_part(s: Any) -> pd.DataFrame | None:
    """Per function, call site and rank: the outermost calls completing received
    messages (a receive, a wait, a test that completed one), their time and waiting
    (wait states), and the messages and bytes they completed per path (the sender on
    another host: inter-node)."""
    m = s.received
    # row numbers of the messages used and the columns read: no copy of the table
    idx = np.flatnonzero(m["recv_complete_call"].to_numpy() >= 0)
    if not len(idx):
        return None
    calls = s.trace.calls
    rc = s.local(m["recv_complete_call"].to_numpy()[idx])
    ok = (rc >= 0) & (rc < len(calls))
    rc, idx = rc[ok], idx[ok]
    outer = calls["depth"].to_numpy()[rc] == 0
    rc, idx = rc[outer], idx[outer]
    if not len(rc):
        return None
    r = s.trace.ranks.sort_values("rank")
    host = np.full(int(r["rank"].max()) + 1, -1, np.int64)
    host[r["rank"].to_numpy()] = pd.factorize(r["host"].astype(str))[0]
    inter = (host[m["send_rank"].to_numpy()[idx]] != host[m["recv_rank"].to_numpy()[idx]])
    nbytes = m["bytes"].to_numpy()[idx].astype(np.float64)
    u, inv = np.unique(rc, return_inverse=True)
    n = len(u)
    wait = s.waits["wait_ns"].to_numpy()[u] if s.waits is not None else np.zeros(n)
    df = pd.DataFrame({
        "function": calls["function"].take(u).reset_index(drop=True),
        "callsite": calls["callsite"].take(u).reset_index(drop=True),
        "rank": calls["rank"].to_numpy()[u],
        "ns": (calls["end"].to_numpy()[u] - calls["start"].to_numpy()[u]).astype(np.float64),
        "wait": wait.astype(np.float64),
        "msgs_inter": np.bincount(inv, weights=inter, minlength=n),
        "bytes_inter": np.bincount(inv, weights=nbytes * inter, minlength=n),
        "msgs_intra": np.bincount(inv, weights=~inter, minlength=n),
        "bytes_intra": np.bincount(inv, weights=nbytes * ~inter, minlength=n)})
    out = df.groupby(["function", "callsite", "rank"], observed=True).agg(
        calls=("ns", "size"), ns=("ns", "sum"), wait=("wait", "sum"),
        msgs_inter=("msgs_inter", "sum"), bytes_inter=("bytes_inter", "sum"),
        msgs_intra=("msgs_intra", "sum"), bytes_intra=("bytes_intra", "sum")).reset_index()
    return out.assign(function=out["function"].astype(str),
                      callsite=out["callsite"].astype(str))


def _polling_part(s: Any) -> pd.DataFrame | None:
    """Per function, call site and rank: the outermost polling calls (program.POLLING):
    recorded visits, the calls they stand for (a merged visit: its `polls`), their time,
    and those of the visits that completed nothing (no message, no collective)."""
    t = s.trace
    calls = t.calls
    sel = _in(calls["function"], POLLING) & (calls["depth"].to_numpy() == 0)
    if not sel.any():
        return None
    idle = sel.copy()
    done = [s.local(s.received["recv_complete_call"].to_numpy()),
            s.local(t.messages["send_complete_call"].to_numpy()),
            s.local(t.collectives["call"].to_numpy())]
    for d in done:
        d = d[(d >= 0) & (d < len(calls))]
        idle[d] = False
    rows = np.flatnonzero(sel)
    dur = (calls["end"].to_numpy()[rows] - calls["start"].to_numpy()[rows]).astype(np.float64)
    n = polls(calls)[rows]
    i = idle[rows]
    df = pd.DataFrame({"function": calls["function"].take(rows).reset_index(drop=True),
                       "callsite": calls["callsite"].take(rows).reset_index(drop=True),
                       "rank": calls["rank"].to_numpy()[rows], "ns": dur, "calls": n,
                       "idle_ns": np.where(i, dur, 0.0), "idle_calls": np.where(i, n, 0)})
    out = df.groupby(["function", "callsite", "rank"], observed=True).agg(
        visits=("ns", "size"), calls=("calls", "sum"), ns=("ns", "sum"),
        idle_ns=("idle_ns", "sum"), idle_calls=("idle_calls", "sum")).reset_index()
    return out.assign(function=out["function"].astype(str),
                      callsite=out["callsite"].astype(str))


def _waiting(s: Any) -> np.ndarray:
    if s.waits is None:
        raise ValueError("findings need the wait states of each part")
    return s.waits["wait_ns"].to_numpy() > 0


def _part1(s: Any) -> dict[str, Any]:
    """First pass over a part: what needs no other rank's data."""
    t = s.trace
    coll = _with_callsite(s, t.collectives)
    out: dict[str, Any] = {"num_ranks": int(t.num_ranks), "same": coll[ROWS].iloc[:0],
                           "barriers": None, "frequent": None, "need": NO_INSTANCES,
                           "aggregation": _aggregation_part(s), "site_calls": None,
                           "receiving": _receiving_part(s), "polling": _polling_part(s)}
    if coll.empty:
        return out
    c, same = _same_as_previous(coll)
    out["same"] = c.loc[same, ROWS]
    out["site_calls"] = _site_calls(coll)
    # unprovable when the tracer filtered calls out: one may have run in between
    if not t.meta.filtered:
        out["barriers"] = _barriers_after(s, coll)
    out["frequent"] = _frequent_part(coll)
    waiting = _waiting(s)[s.local(coll["call"].to_numpy())]
    out["need"] = np.unique(coll["instance"].to_numpy()[waiting])
    return out


def _part2(s: Any, candidates: np.ndarray, barrier_instances: np.ndarray,
           need: np.ndarray, offsets: np.ndarray) -> dict[str, Any]:
    """Second pass: of the candidate instances, those where this part has a call not
    equal to its previous one; rows per barrier instance; entries into the instances
    someone waited in (on the skew-corrected clock)."""
    coll = _with_callsite(s, s.trace.collectives)
    out: dict[str, Any] = {"bad": NO_INSTANCES, "counts": None, "entries": None}
    if coll.empty:
        return out
    inst = coll["instance"].to_numpy()
    if len(candidates):
        c, same = _same_as_previous(coll)
        ci = c["instance"].to_numpy()
        out["bad"] = np.unique(ci[~same & np.isin(ci, candidates)])
    if len(barrier_instances):
        hit = inst[np.isin(inst, barrier_instances)]
        u, n = np.unique(hit, return_counts=True)
        out["counts"] = pd.Series(n, index=u)
    if len(need):
        sel = np.isin(inst, need)
        rank = coll["rank"].to_numpy()[sel]
        out["entries"] = pd.DataFrame({
            "instance": inst[sel], "start": coll["start"].to_numpy()[sel] + offsets[rank],
            "rank": rank, "nonroot": rank != coll["root"].to_numpy()[sel]})
    return out


def _last_per_group(group: np.ndarray, time: np.ndarray, value: np.ndarray,
                    size: int) -> np.ndarray:
    """Per group id (0..size-1): `value` of its row with the latest `time` (-1: none)."""
    out = np.full(size, -1, dtype=np.int64)
    order = np.lexsort((time, group))
    g = group[order]
    last = np.r_[g[1:] != g[:-1], True] if len(g) else np.zeros(0, dtype=bool)
    out[g[last]] = value[order][last]
    return out


@dataclass
class LastIn:
    """Per collective instance someone waited in (sorted): the last rank to enter it,
    and the last non-root rank."""

    instance: np.ndarray
    last: np.ndarray
    last_nonroot: np.ndarray

    @classmethod
    def of(cls, entries: pd.DataFrame | None) -> LastIn:
        if entries is None or entries.empty:
            return cls(NO_INSTANCES, NO_INSTANCES, NO_INSTANCES)
        u, g = np.unique(entries["instance"].to_numpy(), return_inverse=True)
        t, r = entries["start"].to_numpy(), entries["rank"].to_numpy().astype(np.int64)
        nr = entries["nonroot"].to_numpy()
        return cls(u, _last_per_group(g, t, r, len(u)),
                   _last_per_group(g[nr], t[nr], r[nr], len(u)))


def _culprits(s: Any, offsets: np.ndarray, last: LastIn, waited: np.ndarray) -> np.ndarray:
    """Per call of the part that waited (`waited`: a mask over them): the rank it waited
    for (-1: none, and for every other call). The latest sender of the
    messages a receive completes, the last rank to enter a barrier or N×N collective, the
    root of a broadcast, the last contributor to a reduce; on the clock-skew corrected
    times the wait states were computed from."""
    calls = s.trace.calls
    culprit = np.full(len(calls), -1, dtype=np.int64)
    m = s.received
    # the columns needed, for the messages whose receive waited: no copy of the table
    idx = np.flatnonzero(m["recv_complete_call"].to_numpy() >= 0)
    rc = s.local(m["recv_complete_call"].to_numpy()[idx])
    idx, rc = idx[waited[rc]], rc[waited[rc]]
    if len(idx):
        send_rank = m["send_rank"].to_numpy()[idx]
        begin = calls["start"].to_numpy()[rc] + offsets[m["recv_rank"].to_numpy()[idx]]
        late = m["send_enter"].to_numpy()[idx] + offsets[send_rank] - begin
        latest = _last_per_group(rc, late, send_rank, len(calls))
        culprit[latest >= 0] = latest[latest >= 0]
    coll = s.trace.collectives
    if len(coll) and len(last.instance):
        inst = coll["instance"].to_numpy()
        pos = np.minimum(np.searchsorted(last.instance, inst), len(last.instance) - 1)
        known = (last.instance[pos] == inst) & waited[s.local(coll["call"].to_numpy())]
        coll, pos = coll[known], pos[known]
        fn = coll["function"]
        who = np.where(_in(fn, ONE2ALL), coll["root"].to_numpy(),
                       np.where(_in(fn, ALL2ONE), last.last_nonroot[pos], last.last[pos]))
        culprit[s.local(coll["call"].to_numpy())] = who
    return culprit


WAITING_KINDS = ["wait_at_barrier", "wait_at_nxn", "late_sender", "late_broadcast",
                 "early_reduce"]
P2P_KINDS = ["late_sender", "late_receiver"]


def _part3(s: Any, offsets: np.ndarray, last: LastIn, hot: int | None) -> dict[str, Any]:
    """Third pass: the waiting per call site, rank, culprit and kind; for a hot rank, who
    sends to it and waits for it."""
    calls = s.trace.calls
    wait = s.waits["wait_ns"].to_numpy()
    culprit = _culprits(s, offsets, last, wait > 0)
    waited = np.flatnonzero(wait > 0)
    kind_c = s.waits["wait_kind"].take(waited).reset_index(drop=True)
    dur = calls["end"].to_numpy() - calls["start"].to_numpy()

    def per(sel: np.ndarray, keys: list[str], **agg: tuple[str, str]) -> pd.DataFrame:
        """Sums over the waiting calls `sel` by `keys`; grouped on the categories (no
        per-row strings), named by strings."""
        idx = waited[sel]
        df = pd.DataFrame({"function": calls["function"].take(idx).reset_index(drop=True),
                           "callsite": calls["callsite"].take(idx).reset_index(drop=True),
                           "rank": calls["rank"].to_numpy()[idx], "culprit": culprit[idx],
                           "kind": kind_c[sel].reset_index(drop=True), "wait": wait[idx],
                           "ns": dur[idx]})
        out = df.groupby(keys, observed=True).agg(**agg).reset_index()
        for k in ("function", "callsite", "kind"):
            if k in keys:
                out[k] = out[k].astype(str)
        return out

    out: dict[str, Any] = {"imbalance": per(
        _in(kind_c, WAITING_KINDS), ["function", "callsite", "rank", "culprit", "kind"],
        n=("ns", "size"), wait=("wait", "sum"), ns=("ns", "sum"))}
    if hot is not None:
        m = s.trace.messages
        out["senders"] = set(m.loc[m["recv_rank"] == hot, "send_rank"].astype(int))
        out["partners"] = _partners(s)
        rank = calls["rank"].to_numpy()
        out["waiting"] = per(
            (culprit[waited] == hot) & (rank[waited] != hot) & _in(kind_c, P2P_KINDS),
            ["function", "callsite", "rank"], n=("ns", "size"), wait=("wait", "sum"))
        own = np.flatnonzero((rank == hot) & (calls["depth"].to_numpy() == 0))
        o = pd.DataFrame({"function": calls["function"].take(own).to_numpy(),
                          "callsite": calls["callsite"].take(own).to_numpy(), "ns": dur[own]})
        o = o.groupby(["function", "callsite"], observed=True).agg(
            n=("ns", "size"), ns=("ns", "sum")).reset_index()
        out["own"] = o.assign(function=o["function"].astype(str),
                              callsite=o["callsite"].astype(str))
    return out


def _partners(s: Any) -> pd.Series:
    """rank -> how many distinct ranks it sends messages to or receives them from, for
    the part's ranks that exchange any (a rank slice: its own; the whole trace: all)."""
    sent, got = s.trace.messages, s.received
    me = np.r_[sent["send_rank"].to_numpy(), got["recv_rank"].to_numpy()].astype(np.int64)
    peer = np.r_[sent["recv_rank"].to_numpy(), got["send_rank"].to_numpy()].astype(np.int64)
    pairs = pd.DataFrame({"rank": me, "peer": peer})[me != peer].drop_duplicates()
    return pairs.groupby("rank")["peer"].size()


def _concat(frames: list[pd.DataFrame | None]) -> pd.DataFrame | None:
    frames = [f for f in frames if f is not None]
    return pd.concat(frames, ignore_index=True) if frames else None


# -------------------------------------------------------------------- the combines
def redundant_collectives(same: pd.DataFrame | None, bad: np.ndarray,
                          barriers: pd.DataFrame | None, counts: pd.Series | None,
                          site_calls: pd.DataFrame | None,
                          replays: Replays) -> list[Finding]:
    """From the parts' calls equal to their previous one and the candidate instances
    where some call is not (proved: every call of the instance is), the barriers after a
    synchronizing collective with the rows per instance, and the calls per site and rank
    (a site is claimed only where all its calls but the first are proved)."""
    out: list[Finding] = []
    if site_calls is None or site_calls.empty:
        return out
    if same is not None and len(same):
        proved = same[~np.isin(same["instance"].to_numpy(), bad)]
        out += _group_redundant(proved, site_calls, 1, replays, _hash_why, "hash")
    if barriers is not None and len(barriers) and counts is not None:
        b = barriers
        ok = (b.groupby("instance")["call"].transform("size").to_numpy()
              == counts.reindex(b["instance"].to_numpy()).to_numpy())
        out += _group_redundant(b[ok], site_calls, 0, replays, _barrier_why, "barrier_after")
    return out


def _hash_why(rows: pd.DataFrame) -> str:
    return ("on every rank its input and result equal those of the previous call from this "
            "call site on the same communicator and its receive buffer already held the "
            "result when the call began (recorded hashes): deleting the call leaves every "
            "byte as it was")


def _barrier_why(rows: pd.DataFrame) -> str:
    prev = " or ".join(sorted({str(p) for p in rows["prev"]}))
    return (f"each directly follows {prev} on the same communicator with no MPI call in "
            "between, which already synchronized every rank")


def _group_redundant(rows: pd.DataFrame, site_calls: pd.DataFrame, firsts: int,
                     replays: Replays, why: Callable[[pd.DataFrame], str],
                     proof: str) -> list[Finding]:
    """One finding per call site whose every call (but the first on each communicator
    where `firsts` is 1) on every rank is in `rows`, in MIN_REDUNDANT_INSTANCES
    instances at least; in fewer, a minor one saying so (nothing replayed)."""
    found = []
    rows = rows.assign(function=rows["function"].astype(str),
                       callsite=rows["callsite"].astype(str))
    for (function, callsite), g in rows.groupby(["function", "callsite"]):
        sc = site_calls[(site_calls["function"] == function)
                        & (site_calls["callsite"] == callsite)]
        sc = sc.groupby("rank")[["calls", "comms"]].sum()
        want = sc["calls"] - firsts * sc["comms"]
        have = g.groupby("rank")["call"].size().reindex(want.index, fill_value=0)
        n = int(g["instance"].nunique())
        if not (have == want).all():
            continue
        total = int(sc["calls"].max())
        time_s = float((g["end"] - g["start"]).sum() / 1e9)
        if n < MIN_REDUNDANT_INSTANCES:
            found.append(_too_few(str(function), str(callsite), g, n, total, time_s,
                                  why, proof, replays))
            continue
        which = (f"all {n} calls after the first" if firsts else f"all {n} calls") + \
            f" of this run ({_plural(total, 'call')} per rank in all)"
        sv = _saving(replays.saving(Scenario(remove_calls=tuple(
            sorted(int(c) for c in g["call"])))), replays, time_s)
        found.append(Finding(
            "redundant_collective", str(function), str(callsite), len(g), time_s, sv.s,
            f"{where(str(function), str(callsite))} is provably redundant in {which}: "
            f"{why(g)}. Removing those calls {_saved(sv, replays)}.",
            {"proof": proof, "instances": n, "calls_per_rank": total, **sv.evidence(),
             "ranks": sorted(int(r) for r in g["rank"].unique()), "model": replays.model}))
    return found


def _too_few(function: str, callsite: str, g: pd.DataFrame, n: int, total: int,
             time_s: float, why: Callable[[pd.DataFrame], str], proof: str,
             replays: Replays) -> Finding:
    """A call site the redundancy proof holds for in fewer than MIN_REDUNDANT_INSTANCES
    instances (a set-up or tear-down call): shown under `minor`, never claimed, and not
    replayed (no saving is stated for what is not claimed)."""
    sv = Saving(None, 1.0, time_s, replays.run_s)  # no replay run for it: none scaled
    reason = (f"only {_plural(n, 'instance')} in this run (redundancy is claimed from "
              f"{MIN_REDUNDANT_INSTANCES} on)")
    return Finding(
        "redundant_collective", function, callsite, len(g), time_s, sv.s,
        f"{where(function, callsite)}, in {_plural(n, 'instance')} of this run "
        f"({_plural(total, 'call')} per rank in all): {why(g)}. Not claimed as redundant: "
        "a call made this few times (set-up, tear-down) shows no pattern; no saving is "
        "stated.",
        {"proof": proof, "instances": n, "calls_per_rank": total, **sv.evidence(),
         "replay_scale": None, "share_of_run": None,
         "ranks": sorted(int(r) for r in g["rank"].unique()), "minor_reason": reason})


def _every_kth(replays: Replays, function: str, callsite: str, per_iteration: int,
               iterations: int) -> tuple[int, dict[int, float]] | None:
    """(k, saving per k tried) of running a collective every k-th iteration (keeping
    one of k * per_iteration calls), k as the module doc says."""
    ks = [k for k in FREQUENT_KS if 2 * k <= iterations]
    if not ks:
        return None
    site = CallSite(function, callsite)
    saving = {k: replays.saving(Scenario(collective_every=(
        CollectiveEvery(site, k * per_iteration),))) or 0.0 for k in ks}
    best = max(saving.values())
    k = next(k for k in ks if saving[k] >= FREQUENT_ENOUGH * best)
    return k, saving


def frequent_collectives(parts: pd.DataFrame | None, loop: iterations.Loop | None,
                         total_rank_ns: float, replays: Replays) -> list[Finding]:
    """From per call site, function and rank aggregates of the non-barrier collectives."""
    if loop is None or loop.iterations < FREQUENT_MIN_ITERATIONS or parts is None:
        return []
    found = []
    for (callsite, function), g in parts.groupby(["callsite", "function"]):
        site = loop.sites[(loop.sites["function"] == function)
                          & (loop.sites["callsite"] == callsite)]
        # only a collective in every iteration on every rank calling it: one that already
        # runs only every k-th iteration is not frequent
        if (site.empty or int(site["every"].iloc[0]) != 1
                or int(site["ranks"].iloc[0]) < g["rank"].nunique()):
            continue
        per_iteration = max(int(round(float(site["per_iteration"].iloc[0]))), 1)
        n = int(g["n"].sum())
        size = float(g["bytes"].sum()) / n
        time_ns = float(g["ns"].sum())
        share = time_ns / max(total_rank_ns, 1)
        if size > SMALL_COLLECTIVE_BYTES or share < NOTABLE_SHARE:
            continue
        tried = _every_kth(replays, str(function), str(callsite), per_iteration,
                           loop.iterations)
        if tried is None:
            continue
        k, saving = tried
        base_s = replays.replayed_s
        times = "" if per_iteration == 1 else f"{per_iteration} times "
        shown = {j: _saving(v, replays, time_ns / 1e9) for j, v in saving.items()}
        sv = shown[k]
        found.append(Finding(
            "frequent_collective", str(function), str(callsite), n, time_ns / 1e9, sv.s,
            f"{where(str(function), str(callsite))} runs {times}in every iteration of the "
            f"main loop ({loop.iterations} iterations; {int(g['n'].min())} calls "
            f"per rank, {size:.0f} B, {share:.1%} of rank time). Running it every k={k}-th "
            f"iteration {_saved(sv, replays)}; tried k: "
            f"{', '.join(f'{j}: {seconds(v.s)}' for j, v in shown.items())}.",
            {"k": k, "share": share, "bytes_per_call": size, **sv.evidence(),
             "iterations": loop.iterations, "per_iteration": per_iteration,
             "model": replays.model, "replayed_with_all_s": base_s,
             "replayed_every_k_s": base_s - saving[k],
             "saving_by_k_s": {int(j): float(v.s) for j, v in shown.items()}}))
    return found


def message_aggregation(parts: pd.DataFrame | None, replays: Replays) -> list[Finding]:
    """From per function, call site and pair aggregates of the bursts."""
    if parts is None or parts.empty:
        return []
    found = []
    for (function, callsite), g in parts.groupby(["function", "callsite"]):
        time_s = float(g["ns"].sum() / 1e9)
        sv = _saving(replays.saving(Scenario(aggregate=(CallSite(str(function),
                                                                 str(callsite)),))),
                     replays, time_s)
        msgs, bursts = int(g["msgs"].sum()), int(g["bursts"].sum())
        pairs = (g.groupby(["send_rank", "recv_rank"])["msgs"].sum()
                 .sort_values(ascending=False))
        found.append(Finding(
            "message_aggregation", str(function), str(callsite), msgs, time_s, sv.s,
            f"{_plural(bursts, 'burst')} of {msgs / bursts:.1f} small messages "
            f"(mean {g['bytes'].sum() / msgs:.0f} B) between one pair from "
            f"{where(str(function), str(callsite))}; sending each burst as one message "
            f"{_saved(sv, replays)}.",
            {"bursts": bursts, "mean_burst": msgs / bursts, "model": replays.model,
             **sv.evidence(),
             "top_pairs": [[int(a), int(b), int(n)] for (a, b), n in pairs.head(5).items()]}))
    return found


def _ranks(per_rank: pd.Series) -> str:
    # "rank 3 (508 ms)": a rank's number never runs into its time
    return ", ".join(f"rank {r} ({seconds(s)})" for r, s in per_rank.items())


def _imbalance_text(function: str, callsite: str, wait_s: float, kind: str,
                    by_rank: pd.Series, caused: pd.Series, compute: pd.Series,
                    saving: Saving, replays: Replays) -> str:
    """Who is late, who waits and how much; "computes longer" only where it does."""
    text = (f"ranks wait {seconds(wait_s)} in {where(function, callsite)} "
            f"({kind.replace('_', ' ')})")
    balanced = (f"Balancing the computation of the phases that end here (every rank "
                f"computing the ranks' mean) {_saved(saving, replays)}.")
    if caused.empty:
        return text + f"; waiting: {_ranks(by_rank.head(3))}. " + balanced
    late = int(caused.index[0])
    others = f"; next: {_ranks(caused.iloc[1:3])}" if len(caused) > 1 else ""
    text += (f": rank {late} is late, causing {seconds(caused.iloc[0])} of it "
             f"({caused.iloc[0] / wait_s:.0%}{others}); waiting: {_ranks(by_rank.head(3))}. ")
    extra = float(compute.get(late, np.nan) - compute.mean())
    if extra > 0:
        return text + (f"Rank {late} computes longer: {seconds(extra)} more than the mean "
                       f"rank over the run. {balanced}")
    return text + (f"Rank {late} does not compute longer than the others "
                   f"({seconds(compute.get(late, np.nan))} vs the mean {seconds(compute.mean())} "
                   "over the run), so its delay comes from elsewhere, e.g. its own "
                   f"communication or waiting before this call. {balanced}")




def load_imbalance(parts: pd.DataFrame | None, breakdown: pd.DataFrame,
                   total_rank_ns: float, replays: Replays,
                   transfer_sites: frozenset[tuple[str, str]] = frozenset()
                   ) -> list[Finding]:
    """From the waiting per call site, rank, culprit and kind (calls, wait, time); not
    at `transfer_sites` (their waiting is data in flight: `transfer_bound`)."""
    if parts is None or parts.empty:
        return []
    compute = breakdown.set_index("rank")["compute_s"]
    found = []
    for (function, callsite), g in parts.groupby(["function", "callsite"]):
        if (str(function), str(callsite)) in transfer_sites:
            continue
        total_wait = float(g["wait"].sum())
        if total_wait < NOTABLE_SHARE * total_rank_ns:
            continue
        by_rank = g.groupby("rank")["wait"].sum().sort_values(ascending=False) / 1e9
        caused_ns = (g[g["culprit"] >= 0].groupby("culprit")["wait"].sum()
                     .sort_values(ascending=False, kind="stable"))
        caused = caused_ns / 1e9
        time_s = float(g["ns"].sum() / 1e9)
        saving = _saving(replays.saving(Scenario(balance_at=(CallSite(str(function),
                                                                      str(callsite)),))),
                         replays, time_s)
        kinds = g.groupby("kind")["n"].sum().sort_values(ascending=False, kind="stable")
        late_rank = int(caused.index[0]) if len(caused) else None
        late_share = float(caused_ns.iloc[0] / total_wait) if len(caused) else None
        found_text = _imbalance_text(str(function), str(callsite), total_wait / 1e9,
                                     str(kinds.index[0]), by_rank, caused, compute, saving,
                                     replays)
        unexplained = _not_compute(late_rank, caused, by_rank, compute)
        found.append(Finding(
            "load_imbalance", str(function), str(callsite), int(g["n"].sum()),
            time_s, saving.s, found_text,
            {"late_rank": late_rank, "late_share": late_share, **saving.evidence(),
             **({"minor_reason": unexplained} if unexplained else {}),
             "caused_by_rank_s": {int(r): float(s) for r, s in caused.items()},
             "wait_by_rank_s": {int(r): float(s) for r, s in by_rank.items()},
             "wait_kinds": {str(k): int(v) for k, v in kinds.items()},
             "compute_by_rank_s": {int(r): float(s) for r, s in compute.items()},
             "model": replays.model}))
    return found


def _path_scenario(path: str, *, latency_s: float | None = None,
                   bandwidth_Bps: float | None = None) -> Scenario:
    """The network of one path changed (the other kept)."""
    if path == INTER:
        return Scenario(inter_latency_s=latency_s, inter_bandwidth_Bps=bandwidth_Bps)
    return Scenario(intra_latency_s=latency_s, intra_bandwidth_Bps=bandwidth_Bps)


def transfer_bound(parts: pd.DataFrame | None, total_rank_ns: float,
                   replays: Replays) -> tuple[list[Finding], frozenset[tuple[str, str]]]:
    """(the findings, their call sites) from per function, call site and rank
    aggregates of the calls completing received messages: a call site holding
    NOTABLE_SHARE of rank time whose replayed time is mostly transfer on the path its
    messages take (module doc)."""
    if parts is None or parts.empty:
        return [], frozenset()
    site = parts.groupby(["function", "callsite"]).agg(
        calls=("calls", "sum"), ns=("ns", "sum"), wait=("wait", "sum"),
        msgs_inter=("msgs_inter", "sum"), bytes_inter=("bytes_inter", "sum"),
        msgs_intra=("msgs_intra", "sum"), bytes_intra=("bytes_intra", "sum"),
        ranks=("rank", "nunique"))
    site = site[site["ns"] >= NOTABLE_SHARE * total_rank_ns]
    if site.empty:
        return [], frozenset()
    try:
        fitted: Machine = replays.base.fitted
    except UserError:
        return [], frozenset()

    def model_s(row: pd.Series, path: str) -> tuple[float, float]:
        """(latency, bytes / bandwidth) of the site's messages on `path`, in seconds."""
        p = fitted.paths[path]
        tag = "inter" if path == INTER else "intra"
        return (float(row[f"msgs_{tag}"]) * p.latency_s,
                float(row[f"bytes_{tag}"]) / p.bandwidth_Bps)

    # each site on the path its messages spend most modelled transfer time on
    path_of = {k: max((INTER, INTRA), key=lambda p, r=row: sum(model_s(r, p)))
               for k, row in site.iterrows()}
    base = replays.site_ns(Scenario(), list(path_of))
    measured = replays.site_ns(None, list(path_of))
    if base is None or measured is None:
        return [], frozenset()
    # the replay with the path's latency, bandwidth or both free: what the sites lose
    free: dict[str, dict[tuple[str, str], float]] = {"both": {}, "latency": {},
                                                     "bandwidth": {}}
    for path in sorted(set(path_of.values())):
        keys = [k for k, p in path_of.items() if p == path]
        for what, lat, bw in (("both", 0.0, FREE_BANDWIDTH_BPS), ("latency", 0.0, None),
                              ("bandwidth", None, FREE_BANDWIDTH_BPS)):
            got = replays.site_ns(_path_scenario(path, latency_s=lat, bandwidth_Bps=bw),
                                  keys)
            if got is not None:
                free[what].update(got)
    found, sites = [], set()
    savings: dict[tuple[str, str, str], float | None] = {}
    for key, row in site.iterrows():
        function, callsite = (str(x) for x in key)
        b, f = base.get(key, 0.0), free["both"].get(key)
        # the model must give back what was measured there: a path model slower than
        # the site's measured transfers (too few messages to fit it, say) claims
        # transfer that never happened
        if b <= 0 or f is None or b > (1 + REPLAY_TOLERANCE) * measured.get(key, 0.0):
            continue
        share = max(b - f, 0.0) / b
        if share < TRANSFER_DOMINATES:
            continue
        path = path_of[key]
        p = fitted.paths[path]
        lat_s, bw_s = model_s(row, path)
        tag = "inter" if path == INTER else "intra"
        msgs, nbytes = int(row[f"msgs_{tag}"]), float(row[f"bytes_{tag}"])
        # by what the replay says these calls lose (a wait behind another rank's large
        # transfer is bandwidth-bound whatever its own message's size)
        by_lat = b - free["latency"].get(key, b)
        by_bw = b - free["bandwidth"].get(key, b)
        kind = "latency_bound" if by_lat > by_bw else "bandwidth_bound"
        what = (("half the latency", "latency", p.latency_s / 2) if kind == "latency_bound"
                else ("twice the bandwidth", "bandwidth", p.bandwidth_Bps * 2))
        if (path, *what[:2]) not in savings:
            savings[(path, *what[:2])] = replays.saving(
                _path_scenario(path, latency_s=what[2]) if kind == "latency_bound"
                else _path_scenario(path, bandwidth_Bps=what[2]))
        # the path's change touches all its messages, not these calls only: bounded
        # by the run
        sv = _saving(savings[(path, *what[:2])], replays)
        time_s = float(row["ns"]) / 1e9
        transfer_s = share * time_s
        target = (format_time(what[2]) if kind == "latency_bound"
                  else format_rate(what[2]))
        found.append(Finding(
            kind, function, callsite, int(row["calls"]), time_s, sv.s,
            f"{where(function, callsite)} is {kind.replace('_', '-')}: "
            f"{share:.0%} of the {seconds(time_s)} ranks spend in it "
            f"({row['ns'] / max(total_rank_ns, 1):.1%} of rank time) is data in flight on "
            f"the {path} path, not waiting for a late partner: what these calls lose in "
            "the replay when the path's transfers cost nothing (the path fitted as "
            f"{format_time(p.latency_s)} + n / {format_rate(p.bandwidth_Bps)}; the "
            f"{msgs:,} messages they complete, {data(nbytes)}, take {seconds(lat_s)} of "
            f"latency and {seconds(bw_s)} at that bandwidth, the rest is transfers their "
            f"senders waited for first). With {what[0]} on the {path} path (all its "
            f"messages), the run {_saved(sv, replays)}.",
            {"path": path, "latency_s": p.latency_s, "bandwidth_Bps": p.bandwidth_Bps,
             "messages": msgs, "bytes": nbytes, "latency_part_s": lat_s,
             "bandwidth_part_s": bw_s, "transfer_share": share, "transfer_s": transfer_s,
             "replayed_lost_to_latency_s": by_lat / 1e9,
             "replayed_lost_to_bandwidth_s": by_bw / 1e9,
             "waiting_s": float(row["wait"]) / 1e9, "ranks": int(row["ranks"]),
             "scenario": f"{what[0]} on the {path} path ({what[1]} {target})",
             **sv.evidence(), "model": replays.model}))
        sites.add((function, callsite))
    # one network change per path and kind: its saving is stated by each of its sites
    shared: dict[tuple[str, str], int] = {}
    for f in found:
        shared[(f.evidence["path"], f.kind)] = shared.get((f.evidence["path"], f.kind), 0) + 1
    for i, f in enumerate(found):
        n = shared[(f.evidence["path"], f.kind)]
        if n > 1:
            found[i] = dataclasses.replace(f, message=(
                f"{f.message} The {n} {f.kind.replace('_', '-')} call sites on this path "
                "state this one saving: it is not to be added up."))
    return found, frozenset(sites)


def polling(parts: pd.DataFrame | None, total_rank_ns: float,
            replays: Replays) -> list[Finding]:
    """From per function, call site and rank aggregates of the polling calls: a call
    site whose polling holds NOTABLE_SHARE of rank time (module doc)."""
    if parts is None or parts.empty:
        return []
    found = []
    for (function, callsite), g in parts.groupby(["function", "callsite"]):
        ns = float(g["ns"].sum())
        if ns <= 0 or ns < NOTABLE_SHARE * total_rank_ns:
            continue
        function, callsite = str(function), str(callsite)
        calls, visits = int(g["calls"].sum()), int(g["visits"].sum())
        idle_ns, idle_calls = float(g["idle_ns"].sum()), int(g["idle_calls"].sum())
        by_rank = g.groupby("rank")["ns"].sum().sort_values(ascending=False) / 1e9
        sv = _saving(replays.saving(Scenario(blocking_at=(CallSite(function, callsite),))),
                     replays, ns / 1e9)
        found.append(Finding(
            "polling", function, callsite, calls, ns / 1e9, sv.s,
            f"{where(function, callsite)} polls: {calls:,} calls "
            f"({_plural(visits, 'recorded visit')}) take {seconds(ns / 1e9)}, "
            f"{ns / max(total_rank_ns, 1):.1%} of rank time ({_ranks(by_rank.head(3))}); "
            f"{idle_calls:,} of them, {seconds(idle_ns / 1e9)}, completed nothing. "
            "Replacing the polling by a blocking wait (the calls that complete nothing "
            "taken out, the computation between them kept; the wait for the message "
            f"itself stays) {_saved(sv, replays)}.",
            {"visits": visits, "idle_calls": idle_calls, "idle_s": idle_ns / 1e9,
             "time_by_rank_s": {int(r): float(v) for r, v in by_rank.items()},
             **sv.evidence(), "model": replays.model}))
    return found


# the scenario of `descheduled`, as `mpiscope whatif` takes it and the evidence states it
ON_OWN_CORES = Scenario(run_delay=False)
DESCHEDULED_MODEL = (
    "run-queue delay: the tracer samples each thread's cumulative time runnable but "
    "waiting for a CPU (mpiscope:run_delay_ns) on its calls' Enter/Leave, spread in "
    "proportion to wall time between samples; replayed on cores of their own "
    "(`whatif --run-delay drop`): between MPI_Init and MPI_Finalize every compute burst "
    "and every call's own part (after its partners were ready, as traced) without the "
    "delay measured in it; waiting for partners is replayed, not taken from the trace")


def descheduled(breakdown: pd.DataFrame, replays: Replays) -> list[Finding]:
    """What descheduling cost (module doc): only where the tracer measured run-queue
    delay (breakdown's descheduled_s), never inferred from gaps or host CPU counts."""
    if "descheduled_s" not in breakdown.columns:
        return []
    d = breakdown.set_index("rank")["descheduled_s"].astype(float).dropna()
    total_s = float(d.sum())
    if not len(d) or total_s <= 0:
        return []
    # what removing it can take off at most: the delay itself, summed over ranks
    sv = _saving(replays.saving(ON_OWN_CORES), replays, total_s)
    run = breakdown.set_index("rank")["total_s"].astype(float).reindex(d.index)
    share = (d / run.where(run > 0)).fillna(0.0)
    lo, hi = (round(100 * float(x)) for x in (share.min(), share.max()))
    span = f"{lo}%" if lo == hi else f"{lo}–{hi}%"
    top = d.sort_values(ascending=False, kind="stable").head(3)
    return [Finding(
        "descheduled", "", "", 0, total_s, sv.s,
        f"ranks waited {seconds(total_s)} for a CPU (run-queue delay measured by the "
        f"tracer, summed over ranks: {_ranks(top)}{' …' if len(d) > 3 else ''}; {span} "
        "of a rank's run). On cores of their own (each compute burst and each call's own "
        "part without the delay measured in it, waiting for partners replayed) the run "
        f"{_saved(sv, replays, 'run-queue delay measured')}.",
        {"run_queue_delay_s": total_s,
         "delay_by_rank_s": {int(r): float(v) for r, v in d.items()},
         "delay_share_of_rank": {int(r): float(v) for r, v in share.items()},
         "scenario": "whatif --run-delay drop", **sv.evidence(),
         "model": replays.model, "delay_model": DESCHEDULED_MODEL})]


def _not_compute(late: int | None, caused: pd.Series, by_rank: pd.Series,
                 compute: pd.Series) -> str | None:
    """Why the waiting is not a load imbalance (None: it is): the late rank must compute
    longer than the ranks that waited for it, by half the mean wait it caused each at
    least; waiting nobody's extra computation explains is transfer time, descheduling
    or the late rank's own communication."""
    if late is None:
        return "no rank is late here: the waiting is not explained by computation"
    waiters = [int(r) for r in by_rank.index if int(r) != late]
    if not waiters:
        return None
    extra = float(compute.get(late, np.nan) - compute.reindex(waiters).mean())
    need = 0.5 * float(caused.iloc[0]) / len(waiters)
    if extra >= need:
        return None
    than = f"{seconds(extra)} more" if extra >= 0 else f"{seconds(-extra)} less"
    return (f"rank {late} is late but computes {than} than the ranks waiting for it (at "
            f"least {seconds(need)} more would explain the waiting): not a load "
            "imbalance — e.g. transfer time, descheduling or its own communication")


def _hot_rank(num_ranks: int, path: CriticalPath | None) -> tuple[int, float] | None:
    """The rank holding most of the critical path, if it holds HOT_SHARE of it."""
    if path is None or num_ranks < 3 or path.length_ns <= 0:
        return None
    per = path.per_rank()
    hot = int(per["share"].idxmax())
    share = float(per["share"].iloc[hot])
    return (hot, share) if share >= HOT_SHARE else None


def hot_spot(parts: list[dict[str, Any]], num_ranks: int, hot: int, share: float,
             path: CriticalPath, replays: Replays, compute_s: float) -> list[Finding]:
    """The rank with most of the critical path, when many ranks send to it or wait for
    it, many more than a typical rank talks to: a central server the others queue at."""
    n = num_ranks
    senders = set().union(*(p["senders"] for p in parts)) - {hot}
    # waiting for its messages (a worker for its next task), not at a collective: a
    # rank late at a collective is load imbalance
    waiting = _concat([p["waiting"] for p in parts])
    waiters = set(waiting["rank"].astype(int)) if waiting is not None else set()
    partners = senders | waiters
    typical = _median_partners(parts, n)
    if len(partners) < max(RING_PARTNERS + 1, HOT_OVER_TYPICAL * typical,
                           HOT_PARTNERS * (n - 1)):
        return []
    # where the others wait for it most; else the call the hot rank spends most time in
    waited_ns = 0
    if waiting is not None and len(waiting):
        top = waiting.groupby(["function", "callsite"])["wait"].sum()
        function, callsite = (str(x) for x in top.idxmax())
        here = waiting[(waiting["function"] == function) & (waiting["callsite"] == callsite)]
        calls_n, time_s = int(here["n"].sum()), float(here["wait"].sum() / 1e9)
        waited_ns = waiting["wait"].sum()
    else:
        own = _concat([p["own"] for p in parts])
        top = own.groupby(["function", "callsite"])["ns"].sum()
        function, callsite = (str(x) for x in top.idxmax())
        calls_n, time_s = int(own["n"].sum()), float(top.max() / 1e9)
    # what spreading can take off the run: the hot rank's computation but its share
    sv = _saving(replays.saving(Scenario(spread_rank=hot)), replays,
                 compute_s * (1 - 1 / max(n, 1)))
    on_path = path.per_rank().iloc[hot]
    return [Finding(
        "hot_spot", function, callsite, calls_n, time_s, sv.s,
        f"rank {hot} is a hot spot: it holds {share:.0%} of the critical path "
        f"({seconds(on_path['compute_s'])} computing, {seconds(on_path['mpi_s'])} in MPI) and "
        f"{len(partners)} of the {n - 1} other ranks send to it or wait for it (most in "
        f"{where(function, callsite)}), where the median rank exchanges messages with "
        f"{typical:g} rank{'' if typical == 1 else 's'}: a central rank serving the "
        f"others is their bottleneck. Sharing its computation out equally among all "
        f"ranks {_saved(sv, replays)}.",
        {"rank": hot, "critical_path_share": share, "senders": sorted(senders),
         "median_partners": typical, **sv.evidence(),
         "waiting_ranks": sorted(waiters),
         "waited_for_s": float(waited_ns / 1e9), "model": replays.model})]


def _median_partners(parts: list[dict[str, Any]], n: int) -> float:
    """The median over all `n` ranks of their distinct message partners (a rank
    exchanging none: 0)."""
    per = pd.concat([p["partners"] for p in parts]).groupby(level=0).max()
    return float(per.reindex(range(n), fill_value=0).median())


def detect(run: Run, offsets_ns: dict[int, int], breakdown: pd.DataFrame,
           loop: iterations.Loop | None, path: CriticalPath | None,
           replays: Replays) -> list[Finding]:
    """All findings, ranked by estimated savings (largest first): three passes of `run`
    (maps a function over the parts, in rank order) and the combines; savings from
    `replays`."""
    total_rank_ns = float(breakdown["total_s"].sum() * 1e9)
    replays.run_s = run_s(breakdown)
    p1 = run(_part1)
    num_ranks = max(p["num_ranks"] for p in p1)
    offsets = np.zeros(max(num_ranks, 1), dtype=np.int64)
    for r, o in offsets_ns.items():
        offsets[int(r)] = o
    same = _concat([p["same"] for p in p1])
    candidates = (np.unique(same["instance"].to_numpy()) if same is not None
                  else NO_INSTANCES)
    barriers = _concat([p["barriers"] for p in p1])
    binst = (np.unique(barriers["instance"].to_numpy()) if barriers is not None
             else NO_INSTANCES)
    need = np.unique(np.concatenate([p["need"] for p in p1]))
    bad, counts, last = NO_INSTANCES, None, LastIn.of(None)
    # the entries into the instances someone waited in come a chunk of instances per
    # pass, so the client holds at most ENTRIES_PER_PASS of them at once (one per rank)
    chunk = max(ENTRIES_PER_PASS // max(num_ranks, 1), 1)
    chunks = [need[i:i + chunk] for i in range(0, len(need), chunk)] or [NO_INSTANCES]
    lasts = []
    for i, needed in enumerate(chunks):
        first = i == 0
        if not (len(needed) or (first and (len(candidates) or len(binst)))):
            continue
        p2 = run(partial(_part2, candidates=candidates if first else NO_INSTANCES,
                         barrier_instances=binst if first else NO_INSTANCES, need=needed,
                         offsets=offsets))
        if first:
            bad = np.unique(np.concatenate([p["bad"] for p in p2]))
            cs = [p["counts"] for p in p2 if p["counts"] is not None]
            counts = pd.concat(cs).groupby(level=0).sum() if cs else None
        lasts.append(LastIn.of(_concat([p["entries"] for p in p2])))
        del p2
    if lasts:
        last = LastIn(*(np.concatenate([getattr(x, f) for x in lasts])
                        for f in ("instance", "last", "last_nonroot")))
    hot = _hot_rank(num_ranks, path)
    p3 = run(partial(_part3, offsets=offsets, last=last,
                     hot=hot[0] if hot is not None else None))
    transfer, transfer_sites = transfer_bound(
        _concat([p["receiving"] for p in p1]), total_rank_ns, replays)
    found = (transfer + polling(_concat([p["polling"] for p in p1]), total_rank_ns, replays)
             + redundant_collectives(same, bad, barriers, counts,
                                   _concat([p["site_calls"] for p in p1]), replays)
             + frequent_collectives(_concat([p["frequent"] for p in p1]), loop,
                                    total_rank_ns, replays)
             + message_aggregation(_concat([p["aggregation"] for p in p1]), replays)
             + load_imbalance(_concat([p["imbalance"] for p in p3]), breakdown,
                              total_rank_ns, replays, transfer_sites)
             + (hot_spot(p3, num_ranks, hot[0], hot[1], path, replays,
                         _compute_s(breakdown, hot[0]))
                if hot is not None and path is not None else [])
             + descheduled(breakdown, replays))
    return sorted(found, key=lambda f: f.estimated_savings_s, reverse=True)


def _compute_s(breakdown: pd.DataFrame, rank: int) -> float:
    c = breakdown.loc[breakdown["rank"] == rank, "compute_s"]
    return float(c.iloc[0]) if len(c) else float("inf")


@dataclass
class NoiseFloor:
    """The least saving a listed finding has: the larger of `run_share` of the run and
    the run's iteration-to-iteration spread (module doc)."""

    floor_s: float
    run_s: float
    run_share: float
    iteration_spread_s: float  # robust σ of an iteration × √iterations; 0 without a loop
    iterations: int

    @property
    def rule(self) -> str:
        share = f"{self.run_share:.0%} of the run's {seconds(self.run_s)}"
        basis = (f"the larger of {share} and the spread of its {self.iterations} iterations "
                 f"({seconds(self.iteration_spread_s)}: robust σ of an iteration × "
                 "√iterations)" if self.iterations else share)
        return (f"findings saving less than {seconds(self.floor_s)} are not listed "
                f"({basis}): they are under `minor`")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rule": self.rule}


def noise_floor(breakdown: pd.DataFrame, loop: iterations.Loop | None) -> NoiseFloor:
    """The floor of this run (module doc): its length (`run_s`, as the savings have it)
    and, with a main loop, the spread of its iterations' durations (mean over ranks)."""
    run = run_s(breakdown)
    spread, n = 0.0, 0
    if loop is not None and loop.iterations >= 4 and loop.starts.size:
        d = np.diff(loop.starts.astype(np.float64), axis=1).mean(axis=0) / 1e9
        n = len(d)
        sigma = 1.4826 * float(np.median(np.abs(d - np.median(d))))
        spread = sigma * float(np.sqrt(n))
    return NoiseFloor(max(RUN_SHARE_FLOOR * run, spread), run, RUN_SHARE_FLOOR, spread, n)


def split(found: list[Finding], floor: NoiseFloor,
          num_ranks: int) -> tuple[list[Finding], list[Finding]]:
    """(the findings to list, the minor ones with `minor_reason` in their evidence)."""
    listed, minor = [], []
    for f in found:
        if "minor_reason" in f.evidence:  # the rule itself did not stand behind it
            minor.append(f)
            continue
        replayed = f.evidence.get("saving_replayed", True)
        worth = f.estimated_savings_s if replayed else f.time_s / max(num_ranks, 1)
        if worth >= floor.floor_s and worth > 0:
            listed.append(f)
            continue
        what = (f"its saving ({seconds(worth)})" if replayed
                else f"the time in these calls per rank ({seconds(worth)}; no saving "
                "replayed)")
        minor.append(dataclasses.replace(f, evidence={
            **f.evidence, "minor_reason": f"{what} is below the noise floor of "
                                          f"{seconds(floor.floor_s)}"}))
    return listed, minor


def find(trace: Trace, ws: WaitStates, breakdown: pd.DataFrame,
         loop: iterations.Loop | None, path: CriticalPath | None = None,
         replays: Replays | None = None) -> list[Finding]:
    """All findings, ranked by estimated savings (largest first), from the trace's wait
    states, per-rank breakdown, main loop and critical path (an analysis session
    computes each once; without the path, no hot spot): `detect` on the whole trace as
    one part, its savings from `replays` (default: the whole trace replayed)."""
    part = whole(trace, ws)
    return detect(lambda fn: [fn(part)], ws.skew.offsets_ns, breakdown, loop, path,
                  Replays(trace) if replays is None else replays)
