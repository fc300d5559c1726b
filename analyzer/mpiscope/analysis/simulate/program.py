"""A trace turned into what the replay engine runs: per rank, compute bursts and MPI
operations with their dependencies, as flat arrays.

Operations are the outermost MPI calls (depth 0), in each rank's order. Each has
- `gap`: the computation before it (time since the previous operation's end),
- posts made when it starts: sends and receives of matched messages, its entry into a
  collective instance,
- dependencies it completes on: messages it receives (their arrival), rendezvous sends
  it completes (their data delivered), the collective instance (every participant has
  entered, plus the algorithm's cost),
- `cost`: its own part, what it takes once its dependencies are met. Measured: its end
  minus the later of its start and its dependencies' time on the trace's own machine
  (clamped to its duration), so a replay on that machine gives back the measured times.

A Test that completed a request is treated as waiting for it (the trace shows it did).
Calls nested inside MPI calls and user regions are part of the enclosing time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mpiscope.analysis import breakdown, desched
from mpiscope.analysis.order import by_rank_then_start
from mpiscope.analysis.simulate.model import INTER, INTRA, Machine, Placement
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.archive.trace import Trace
from mpiscope.errors import UserError


def collective_cost_s(function: np.ndarray, p: np.ndarray, nbytes: np.ndarray,
                      latency_s: np.ndarray, bandwidth_Bps: np.ndarray) -> np.ndarray:
    """The algorithm's time once every rank has entered, per instance: binomial tree
    (Bcast, Reduce, Gather, Scatter), recursive doubling (Allreduce, Allgather,
    Reduce_scatter, Scan), dissemination (Barrier), pairwise exchange (Alltoall)."""
    steps = np.ceil(np.log2(np.maximum(p, 1)))
    per_step = latency_s + nbytes / bandwidth_Bps
    cost = np.where(function == "MPI_Barrier", steps * latency_s, steps * per_step)
    alltoall = np.char.startswith(function.astype(str), "MPI_Alltoall")
    cost = np.where(alltoall, (p - 1) * latency_s + nbytes / bandwidth_Bps, cost)
    return np.where(p <= 1, 0.0, cost)


@dataclass
class Csr:
    ptr: np.ndarray  # int64, n + 1
    idx: np.ndarray  # int64


@dataclass
class Program:
    """Flat arrays, ops in rank order (ops of rank r: op_lo[r]:op_lo[r+1])."""

    num_ranks: int
    op_lo: np.ndarray  # int64, num_ranks + 1
    op_call: np.ndarray  # row id in trace.calls
    gap: np.ndarray  # float ns, computation before the op (CPU factor applied)
    cost: np.ndarray  # float ns, the op's own part
    removed: np.ndarray  # bool: the scenario removed this op (it takes no time)
    trailing: np.ndarray  # float ns per rank after its last op
    # messages (only those both of whose posting ops stay)
    msg_row: np.ndarray  # row in trace.messages
    msg_send_op: np.ndarray
    msg_recv_op: np.ndarray
    msg_bytes: np.ndarray  # float, as replayed (an aggregated message carries its burst)
    msg_eager: np.ndarray  # bool
    msg_latency: np.ndarray  # float ns
    msg_xfer: np.ndarray  # float ns, bytes / bandwidth
    msg_contended: np.ndarray  # bool: inter-node (shares the sender's link)
    # op -> messages it posts as sender / receiver, and completes as receiver / sender;
    # CSR: the messages of op i are idx[ptr[i]:ptr[i + 1]]
    post_send: Csr
    post_recv: Csr
    wait_recv: Csr
    wait_send: Csr
    op_inst: np.ndarray  # collective instance the op enters (-1: none)
    op_waits_inst: np.ndarray  # bool: the op completes on its instance
    inst_size: np.ndarray  # participants per instance
    inst_cost: np.ndarray  # float ns, algorithm cost per instance (target machine)
    # each op's own time (after its dependencies) = overhead + noise, as traced; `cost`
    # holds both, or the overhead alone when the scenario leaves the noise out
    overhead: np.ndarray  # float ns: its function's undisturbed own time
    noise: np.ndarray  # float ns: the rest (descheduling, interference on the traced host)
    absorb: np.ndarray  # float ns: noise a longer wait than `waited` hides (engine)
    waited: np.ndarray  # float ns: the op's wait for its dependencies as traced
    # ns of the computation (gaps, trailing) its ranks were runnable but waiting for a
    # CPU, as measured (desched.py); replayed only where the noise is kept
    compute_desched: float = 0.0

    @property
    def num_ops(self) -> int:
        return len(self.op_call)

    def op_rank(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_ranks), np.diff(self.op_lo))

    def msg_rank(self, ops: np.ndarray) -> np.ndarray:
        """The rank of each of `ops` (op_rank()[ops] without a per-op array): the last
        rank whose ops start at or before it (empty ranks before it start there too)."""
        return np.searchsorted(self.op_lo, ops, "right") - 1


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> Csr:
    """values grouped by key (0..n-1)."""
    order = _order(keys)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return Csr(ptr, values[order].astype(np.int64))


def _sorted(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def _strings(col: pd.Series) -> np.ndarray:
    """A string column's values as a numpy array, through the categories when it has
    them (converting 10^6 category values one by one takes a noticeable time)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        names = np.asarray(col.cat.categories.astype(str), dtype=object)
        return names[col.cat.codes.to_numpy()]
    return col.astype(str).to_numpy()


def _equal(col: pd.Series, value: str) -> np.ndarray:
    """col == value, on the codes of a categorical column (no string per row)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        names = np.asarray(col.cat.categories.astype(str), dtype=object)
        codes = np.flatnonzero(names == value)
        if len(codes) == 1:  # the usual case: one comparison, not isin's sort
            return col.cat.codes.to_numpy() == codes[0]
        return np.isin(col.cat.codes.to_numpy(), codes)
    return _strings(col) == value


def _site_mask(calls: pd.DataFrame, function: str, callsite: str,
               callpaths: pd.DataFrame | None = None) -> np.ndarray:
    """Calls of `function` at `callsite`: their call site, or (a call site a finding
    named from the call path, e.g. the code calling a wrapper layer) a frame of their
    path."""
    fn = _equal(calls["function"], function)
    hit = _equal(calls["callsite"], callsite)
    if callpaths is not None and len(callpaths) and "callpath" in calls.columns:
        ids = np.unique(callpaths["callpath"].to_numpy()[
            callpaths["frame"].astype(str).to_numpy() == callsite])
        hit |= np.isin(calls["callpath"].to_numpy(), ids)
    return fn & hit


def site_mask(calls: pd.DataFrame, function: str, callsite: str) -> np.ndarray:
    """Calls of `function` at `callsite` (their call site or a frame of their path)."""
    return _site_mask(calls, function, callsite)


SMALL_MESSAGE_BYTES = 4096  # --aggregate merges bursts of messages up to this size


def _aggregated(trace: Trace, scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """(send calls taken out, bytes per message) of `--aggregate`: per call site, each
    burst of small messages one rank sends to one receiver from back-to-back calls with
    one call path becomes its last message, carrying the burst's bytes (sent when the last
    part was)."""
    calls, m = trace.calls, trace.messages
    gone = np.zeros(len(calls), bool)
    nbytes = m["bytes"].to_numpy().astype(np.float64) if len(m) else np.zeros(0)
    if not scenario.aggregate:
        return gone, nbytes
    outer = np.flatnonzero(calls["depth"].to_numpy() == 0)
    by = by_rank_then_start(calls["rank"].to_numpy()[outer], calls["start"].to_numpy()[outer])
    if by is not None:
        outer = outer[by]
    ordinal = np.full(len(calls), -1, np.int64)
    o_rank = calls["rank"].to_numpy()[outer]
    # ordinal of each outermost call on its rank
    first = np.searchsorted(o_rank, o_rank)
    ordinal[outer] = np.arange(len(outer)) - first
    for site in scenario.aggregate:
        sel = _site_mask(calls, site.function, site.callsite)
        if not sel.any():
            raise UserError("--aggregate", f"no call {site} in this trace")
        rows = (np.flatnonzero(sel[m["send_call"].to_numpy()]) if len(m)
                else np.zeros(0, np.int64))
        if not len(rows):
            raise UserError("--aggregate", f"{site} sends no message in this trace")
        sub = m.iloc[rows]
        rows = rows[(sub["bytes"].to_numpy() <= SMALL_MESSAGE_BYTES)]
        if not len(rows):
            raise UserError("--aggregate", f"{site} sends no small message (<= "
                            f"{SMALL_MESSAGE_BYTES} B): nothing to aggregate")
        sub = m.iloc[rows]
        o = ordinal[sub["send_call"].to_numpy()]
        pair = (sub["send_rank"].to_numpy().astype(np.int64) * 1_000_003
                + sub["recv_rank"].to_numpy())
        # one burst, one call path: as findings.message_aggregation counts them
        path = (calls["callpath"].to_numpy().astype(np.int64)[sub["send_call"].to_numpy()]
                if "callpath" in calls.columns else np.full(len(sub), -1, np.int64))
        order = np.lexsort((o, pair))
        rows, o, pair, path = rows[order], o[order], pair[order], path[order]
        new = np.r_[True, (pair[1:] != pair[:-1]) | (np.diff(o) != 1)
                    | (path[1:] != path[:-1])]
        burst = np.cumsum(new) - 1
        last = np.r_[new[1:], True]
        total = np.bincount(burst, weights=nbytes[rows])
        size = np.bincount(burst)
        if not (size > 1).any():
            raise UserError("--aggregate", f"{site} sends no burst (>= 2 small messages "
                            "back to back to one receiver): nothing to aggregate")
        merged = last & (size[burst] > 1)
        nbytes[rows[merged]] = total[burst[merged]]
        drop = ~last & (size[burst] > 1)
        gone[m["send_call"].to_numpy()[rows[drop]]] = True
    return gone, nbytes


def _check_not_completing(trace: Trace, site: object, sel: np.ndarray) -> None:
    """Removing a call that completes requests other calls started leaves them
    incomplete: the program it predicts would be wrong, so refuse."""
    m = trace.messages
    if not len(m):
        return
    for done, post in (("recv_complete_call", "recv_call"), ("send_complete_call", "send_call")):
        d, p = m[done].to_numpy(), m[post].to_numpy()
        hit = (d >= 0) & (d != p)
        hit[hit] &= sel[d[hit]] & ~sel[p[hit]]
        if hit.any():
            raise UserError("--remove", f"{site} completes {int(hit.sum())} requests "
                            "started elsewhere; without it they never complete (remove "
                            "the calls that start them too, or keep it)")


# the calls a polling loop makes (the interposer merges their idle runs into one visit)
POLLING = ("MPI_Test", "MPI_Testany", "MPI_Testall", "MPI_Testsome", "MPI_Iprobe",
           "MPI_Improbe", "MPI_Request_get_status", "MPI_Win_test")


def idle_polls(trace: Trace, sel: np.ndarray) -> np.ndarray:
    """The calls of `sel` (over trace.calls) that complete nothing: no message's receive
    or send, no collective (a poll that completed a request is the loop's wait)."""
    idle = sel.copy()
    m = trace.messages
    if len(m):
        for col in ("recv_complete_call", "send_complete_call"):
            done = m[col].to_numpy()
            idle[done[done >= 0]] = False
    if len(trace.collectives):
        idle[trace.collectives["call"].to_numpy()] = False
    return idle


def _removed_calls(trace: Trace, scenario: Scenario) -> np.ndarray:
    """Calls the scenario takes out (over trace.calls): removed call sites and calls,
    collective instances skipped, sends merged into their burst's last message, and the
    partner calls whose every message went with them."""
    calls, coll = trace.calls, trace.collectives
    c_call, c_inst = coll["call"].to_numpy(), coll["instance"].to_numpy()
    gone = _aggregated(trace, scenario)[0]
    inst_gone: set[int] = set()
    if scenario.remove_calls:
        gone[np.asarray(scenario.remove_calls, np.int64)] = True
    for site in scenario.remove:
        sel = _site_mask(calls, site.function, site.callsite, trace.callpaths)
        if not sel.any():
            raise UserError("--remove", f"no call {site} in this trace")
        _check_not_completing(trace, site, sel)
        gone |= sel
    for site in scenario.blocking_at:
        sel = _site_mask(calls, site.function, site.callsite, trace.callpaths)
        if not sel.any():
            raise UserError("blocking_at", f"no call {site} in this trace")
        gone |= idle_polls(trace, sel)
    for every in scenario.collective_every:
        sel = _site_mask(calls, every.site.function, every.site.callsite, trace.callpaths)
        # the collectives rows of those calls
        rows = np.zeros(len(c_call), bool)
        valid = (c_call >= 0) & (c_call < len(sel))
        rows[valid] = sel[c_call[valid]]
        if not rows.any():
            raise UserError("--collective-every", f"no collective call {every.site} "
                            "in this trace")
        insts = np.unique(c_inst[rows])
        j = np.arange(len(insts))
        keep = (j % every.k == every.k - 1) | (j == len(insts) - 1)
        inst_gone.update(insts[~keep].tolist())
    if inst_gone or gone.any():
        # a collective goes on every rank of the instance (a point-to-point call alone)
        skipped = np.fromiter(inst_gone, c_inst.dtype, len(inst_gone))
        gone[c_call[np.isin(c_inst, np.concatenate([skipped, c_inst[gone[c_call]]]))]] = True
        # messages posted by a removed call go; so does a partner call left without any
        m = trace.messages
        if len(m):
            s, r = m["send_call"].to_numpy(), m["recv_call"].to_numpy()
            dropped = gone[s] | gone[r]
            for side in (s, r):
                # calls with messages, none of which is kept (shifted by one: a message
                # without a call on this side has -1, which the groups kept as a key)
                has = np.zeros(len(calls) + 1, bool)
                has[side + 1] = True
                kept = np.zeros(len(calls) + 1, bool)
                kept[(side + 1)[~dropped]] = True
                only_dropped = np.flatnonzero(has & ~kept) - 1
                kinds = _strings(calls["kind"].take(only_dropped))
                # a blocking send/recv without its message has nothing left to do
                gone[only_dropped[np.isin(kinds, ["p2p_send", "p2p_recv"])]] = True
    return gone


def _phases(is_sync: np.ndarray, rank: np.ndarray, op_lo: np.ndarray) -> np.ndarray:
    """Per op (`rank` sorted: ops in rank order, those of rank r from op_lo[r]): the
    collectives before it on its rank, i.e. its phase (a collective ends the phase it
    closes)."""
    before = np.cumsum(is_sync, dtype=np.int64)
    before[is_sync] -= 1
    before -= before[op_lo[rank]]  # minus the count at the rank's first op
    return before


def _balanced(trace: Trace, scenario: Scenario, gap: np.ndarray, rank: np.ndarray,
              op_call: np.ndarray, op_lo: np.ndarray, nr: int) -> np.ndarray:
    """The computation with `balance` (each rank's compute between two collectives of its
    run, the k-th phase, becomes the mean over ranks of their k-th phase; with
    `balance_at`, only the phases in which those call sites run; the bursts of a phase
    keep their proportions) and `spread_rank` (that rank's computation shared equally: it
    keeps 1/n of it, every other rank's grows by the same amount, spread over its
    bursts in proportion)."""
    if not (scenario.balance or scenario.balance_at or scenario.spread_rank is not None):
        return gap
    calls = trace.calls
    gap = gap.copy()
    # the time before a rank's MPI_Init is its start, not its work
    first = np.zeros(len(gap), bool)
    first[op_lo[:-1][op_lo[:-1] < len(gap)]] = True
    first &= (_equal(calls["function"], "MPI_Init")
              | _equal(calls["function"], "MPI_Init_thread"))[op_call]
    if scenario.balance or scenario.balance_at:
        # phases: between the collectives of each rank (where all the ranks of the run
        # meet); a collective ends the phase it closes
        sync = np.zeros(len(calls), bool)
        if len(trace.collectives):
            sync[trace.collectives["call"].to_numpy()] = True
        phase = _phases(sync[op_call], rank, op_lo)
        work = np.where(first, 0.0, gap)
        # one int64 key per (phase, rank), ordered as the pair: pandas sums each group
        # over its ops in order (compensated), as a two-key groupby did, at a fraction
        # of its memory (that groupby was the peak of `analyze`)
        span = int(rank.max()) + 1 if len(rank) else 1
        key = phase * span + rank
        sums = pd.Series(work).groupby(key).sum()
        keys = sums.index.to_numpy()
        per = sums.to_numpy()[np.searchsorted(keys, key)]
        del key
        mean = sums.groupby(keys // span).mean()
        target = mean.to_numpy()[np.searchsorted(mean.index.to_numpy(), phase)]
        scale = np.where(per > 0, target / np.where(per > 0, per, 1), 1.0)
        if scenario.balance_at and not scenario.balance:
            # only the phases in which a call of those sites runs (on some rank)
            sites = np.zeros(len(calls), bool)
            for site in scenario.balance_at:
                sites |= _site_mask(calls, site.function, site.callsite)
            chosen = np.isin(phase, np.unique(phase[sites[op_call]]))
            scale = np.where(chosen, scale, 1.0)
        gap = np.where(first, gap, gap * scale)
    if scenario.spread_rank is not None:
        h = scenario.spread_rank
        if not 0 <= h < nr:
            raise UserError("spread_rank", f"no rank {h} in this trace")
        total = np.bincount(rank, weights=np.where(first, 0.0, gap), minlength=nr)
        share = total[h] / nr
        grow = np.where(total > 0, 1 + share / np.where(total > 0, total, 1), 1.0)
        grow[h] = 1 / nr
        gap = np.where(first, gap, gap * grow[rank])
    return gap


OVERHEAD_QUANTILE = 0.10  # a call's software overhead: its function's low own time


def _overhead(function: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Per op, the software overhead its function shows when undisturbed: the 10th
    percentile of the own times of that function's calls (at most the op's own)."""
    if not len(own):
        return own.copy()
    low, codes = _lows(function, own)
    return np.minimum(low[codes], own)


def _lows(function: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per group, the OVERHEAD_QUANTILE of its ops' `own`; each op's group) for
    `_overhead` (non-empty `own`): with them, the same `own` gives the same overhead."""
    if function.dtype.kind in "iu" and function.min() >= 0 and not np.isnan(own).any():
        # categorical codes (a few functions): each group's quantile by a partition of
        # its own times, not pandas' sort of every op by group and value
        return _low_quantiles(function, own), function
    codes = pd.factorize(pd.Series(function))[0]
    low = pd.Series(own).groupby(codes).quantile(OVERHEAD_QUANTILE)
    # groupby's keys are 0..groups-1 in order (dense codes, none missing): a take
    return low.to_numpy(), codes


def _low_quantiles(codes: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Per code (0..max), the OVERHEAD_QUANTILE of the `own` of its ops (NaN-free),
    interpolated as pandas' groupby quantile does (linear: lower + (upper - lower) *
    fraction), so the values are the same to the bit; 0 for codes with no op."""
    order = np.argsort(codes, kind="stable")
    n_codes = int(codes.max()) + 1
    bounds = np.searchsorted(codes[order], np.arange(n_codes + 1))
    low = np.zeros(n_codes)
    for g in range(n_codes):
        lo, hi = bounds[g], bounds[g + 1]
        if hi > lo:
            low[g] = _low_quantile(own[order[lo:hi]])
    return low


def _low_quantile(vals: np.ndarray) -> float:
    """The OVERHEAD_QUANTILE of `vals` (non-empty, NaN-free; in any order: the order
    statistics it interpolates are those of the values, wherever they are)."""
    idx = OVERHEAD_QUANTILE * (len(vals) - 1)
    k = int(idx)
    frac = idx % 1
    if frac == 0.0:
        return np.partition(vals, k)[k]
    part = np.partition(vals, (k, k + 1))
    return part[k] + (part[k + 1] - part[k]) * frac


@dataclass(frozen=True)
class _DelayCut:
    """The measured run-queue delay (ns) a replay leaves out."""

    gap: np.ndarray  # per op: of the computation before it
    trailing: np.ndarray  # per rank: of its computation after its last op
    own: np.ndarray | None  # per op: of its own part (None: kept)


def _delay_cut(trace: Trace, pre: Prepared, base: _Basis, scenario: Scenario,
               kept: bool) -> _DelayCut | None:
    """What measured run-queue delay the replay leaves out (None: none). Where the noise
    is dropped, the computation's (keeps_noise; the calls lose all their noise). With
    `Scenario.run_delay` False, the run's: of each compute burst and each call's own part
    (Basis.own_run_delay) within its rank's measured interval (breakdown.intervals: the
    end of MPI_Init to the start of MPI_Finalize, where the savings and the breakdown's
    descheduled_s are measured); start-up and tear-down keep theirs."""
    if not kept:
        return _DelayCut(pre.gap_desched, pre.trailing_desched, None)
    if scenario.run_delay:
        return None
    gap_in, trailing_in, op_in = _in_run(trace, pre)
    return _DelayCut(np.where(gap_in, pre.gap_desched, 0.0),
                     np.where(trailing_in, pre.trailing_desched, 0.0),
                     np.where(op_in, base.own_run_delay(trace, pre), 0.0))


def _in_run(trace: Trace, pre: Prepared) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per op: its gap, per rank: its trailing time, per op: the op) lies within its
    rank's measured interval."""
    nr = len(pre.op_lo) - 1
    iv = breakdown.intervals(trace)
    begin, end = np.full(nr, np.inf), np.full(nr, -np.inf)  # a rank without one: none
    r = iv["rank"].to_numpy().astype(np.int64)
    ok = (r >= 0) & (r < nr)
    begin[r[ok]] = iv["begin"].to_numpy()[ok]
    end[r[ok]] = iv["end"].to_numpy()[ok]
    b, e = begin[pre.rank], end[pre.rank]
    op_in = (pre.start >= b) & (pre.end <= e)
    gap_in = (pre.start - pre.gap >= b) & (pre.start <= e)
    has = pre.op_lo[1:] > pre.op_lo[:-1]
    last_end = np.full(nr, np.inf)
    last_end[has] = pre.end[pre.op_lo[1:][has] - 1]
    trailing_in = has & (last_end >= begin) & (last_end + pre.trailing <= end)
    return gap_in, trailing_in, op_in


def keeps_noise(scenario: Scenario, target: Machine) -> bool:
    """Whether the replay keeps each call's noise (own time above its function's
    overhead): on the traced hosts yes (a scenario changes the program or the network,
    not how the host scheduled its ranks); once the ranks are placed on other nodes
    (`--nodes`, a machine file's node count) no: that descheduling was the traced
    host's, not theirs. The same holds for the computation between calls: where the
    tracer measured descheduling (desched.py), a replay that drops the noise replays
    each compute burst without the time its rank was runnable but waiting for a CPU.
    `--noise keep|drop` decides when given."""
    if scenario.noise is not None:
        return scenario.noise
    return scenario.nodes is None and target.nodes is None


@dataclass
class Prepared:
    """What `build` takes from a trace whatever the scenario and machine: made once for
    the several scenarios replayed against one trace (findings' savings)."""

    op_call: np.ndarray  # the outermost calls, in rank order, then time
    rank: np.ndarray  # int64 per op
    start: np.ndarray  # float ns per op
    end: np.ndarray
    op_lo: np.ndarray  # int64, num_ranks + 1
    gap: np.ndarray  # float ns: computation before each op, before any CPU factor
    trailing: np.ndarray  # float ns per rank after its last op, before any CPU factor
    # of gap / trailing: the time the rank was runnable but waiting for a CPU, as the
    # tracer measured it (zeros where it did not)
    gap_desched: np.ndarray
    trailing_desched: np.ndarray
    # per message: the ops that post and complete it (-1: none)
    s_op: np.ndarray
    r_op: np.ndarray
    sdone: np.ndarray
    rdone: np.ndarray
    c_op: np.ndarray  # per collectives row: its op (-1: none)
    # the messages in the order of s_op, r_op, sdone, rdone (stable): the programs' CSRs
    # of any subset of the messages, with no sort per scenario
    by_s_op: np.ndarray
    by_r_op: np.ndarray
    by_sdone: np.ndarray
    by_rdone: np.ndarray
    # per message (-1 where it has no sending or no receiving op): the op of the receiver
    # a rendezvous transfer can start in, before any op is removed (`_progress`)
    progress: np.ndarray
    fn: np.ndarray  # per op, its function (categorical codes, or names), as _overhead takes
    # what every scenario on one fitted machine shares (`basis`), made on first use
    _basis: _Basis | None = field(default=None, repr=False)

    def basis(self, trace: Trace, fitted: Machine) -> _Basis:
        """The `_Basis` of `trace` (this Prepared's) on `fitted`, made once per machine
        (the last one asked for is kept)."""
        if self._basis is None or self._basis.fitted is not fitted:
            self._basis = None  # the old one goes before the new one is made
            self._basis = _Basis.of(trace, self, fitted)
        return self._basis

    @classmethod
    def of(cls, trace: Trace) -> Prepared:
        calls = trace.calls
        op_call = np.flatnonzero(calls["depth"].to_numpy() == 0)
        c_rank = calls["rank"].to_numpy()[op_call]
        c_start = calls["start"].to_numpy()[op_call]
        # in rank order, then time (a trace read back is; one built by hand need not be)
        by = by_rank_then_start(c_rank, c_start)
        if by is not None:
            op_call, c_rank, c_start = op_call[by], c_rank[by], c_start[by]
        op_of = np.full(len(calls) + 1, -1, np.int64)  # index -1 (no call) maps to -1 too
        op_of[op_call] = np.arange(len(op_call))
        rank = c_rank.astype(np.int64)
        start = c_start.astype(np.float64)
        end = calls["end"].to_numpy()[op_call].astype(np.float64)
        nr = trace.num_ranks
        op_lo = np.searchsorted(rank, np.arange(nr + 1))
        n_ops = len(op_call)
        # computation between operations, per rank
        prev_end = np.concatenate([[0.0], end[:-1]])
        first = np.zeros(n_ops, bool)
        first[op_lo[:-1][op_lo[:-1] < n_ops]] = True
        prev_end[first] = 0.0
        gap = np.maximum(start - prev_end, 0.0)
        del prev_end, first
        last_ns = trace.ranks.sort_values("rank")["last_ns"].to_numpy().astype(np.float64)
        trailing = np.zeros(nr)
        for r in range(nr):
            if op_lo[r + 1] > op_lo[r]:
                trailing[r] = max(last_ns[r] - end[op_lo[r + 1] - 1], 0.0)
        gap_desched, trailing_desched = _desched(trace, op_call, rank, start, end, op_lo,
                                                 last_ns)
        m = trace.messages

        def ops(col: str) -> np.ndarray:
            return op_of[m[col].to_numpy()] if len(m) else np.zeros(0, np.int64)

        coll = trace.collectives
        c_op = op_of[coll["call"].to_numpy()] if len(coll) else np.zeros(0, np.int64)
        msg_ops = [ops(c) for c in ("send_call", "recv_call", "send_complete_call",
                                    "recv_complete_call")]
        fcol = calls["function"]
        functions = (fcol.cat.codes.to_numpy()
                     if isinstance(fcol.dtype, pd.CategoricalDtype) else _strings(fcol))
        return cls(op_call, rank, start, end, op_lo, gap, trailing, gap_desched,
                   trailing_desched, *msg_ops, c_op, *(_order(k) for k in msg_ops),
                   _progress(rank, start, end, op_lo, *msg_ops[0:2], msg_ops[3]),
                   functions[op_call])


def _progress(rank: np.ndarray, start: np.ndarray, end: np.ndarray, op_lo: np.ndarray,
              s_op: np.ndarray, r_op: np.ndarray, rdone: np.ndarray) -> np.ndarray:
    """Per message, the op where a rendezvous transfer can start (-1: no sending or no
    receiving op). No asynchronous progress: once the receiver's MPI library can answer
    the request, in the first of its calls (from the receive's post to the call completing
    it) still running when the send was posted, not at the Irecv if it returned before;
    chosen from the trace's order, so it cannot make the replay wait in a cycle. Each
    message's on its own: a scenario's messages take theirs."""
    progress = np.full(len(s_op), -1, np.int64)
    rows = np.flatnonzero((s_op >= 0) & (r_op >= 0))
    s_op, r_op, rdone = s_op[rows], r_op[rows], rdone[rows]
    r_rank = rank[r_op]
    out = r_op.copy()
    # the messages grouped by receiving rank once (a mask over all of them per rank
    # was ranks x messages of work)
    by_rank = np.argsort(r_rank, kind="stable")
    r_bounds = np.searchsorted(r_rank[by_rank], np.arange(len(op_lo)))
    for r in np.flatnonzero(r_bounds[1:] > r_bounds[:-1]):
        sel = by_rank[r_bounds[r]:r_bounds[r + 1]]
        lo, hi = op_lo[r], op_lo[r + 1]
        first = lo + np.searchsorted(end[lo:hi], start[s_op[sel]])
        first = np.maximum(first, r_op[sel])
        cap = np.where(rdone[sel] >= 0, rdone[sel], r_op[sel])
        out[sel] = np.minimum(first, cap)
    progress[rows] = out
    return progress


def _desched(trace: Trace, op_call: np.ndarray, rank: np.ndarray, start: np.ndarray,
             end: np.ndarray, op_lo: np.ndarray, last_ns: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Run-queue delay (ns) in each op's gap (since the previous op's end, on the op's
    thread) and in each rank's trailing time; zeros where nothing was measured."""
    n_ops, nr = len(op_call), len(op_lo) - 1
    if not desched.sampled(trace.calls):  # also tables made without threads (what-if)
        return np.zeros(n_ops), np.zeros(nr)
    thread = trace.calls["thread"].to_numpy()[op_call].astype(np.int64)
    prev_end = np.concatenate([[-np.inf], end[:-1]])
    prev_end[op_lo[:-1][op_lo[:-1] < n_ops]] = -np.inf  # a rank's first op: from its start
    gap = desched.between(trace.calls, rank, thread, np.maximum(prev_end, 0.0), start)
    if gap is None:
        return np.zeros(n_ops), np.zeros(nr)
    has = op_lo[1:] > op_lo[:-1]
    last = np.maximum(op_lo[1:] - 1, 0)[has]
    trailing = np.zeros(nr)
    if has.any():
        trailing[has] = desched.between(trace.calls, rank[last], thread[last], end[last],
                                        np.maximum(last_ns[has], end[last]))
    return gap, trailing


def _order(keys: np.ndarray) -> np.ndarray:
    """The stable order of `keys` (none needed where they are sorted already)."""
    return np.arange(len(keys)) if _sorted(keys) else np.argsort(keys, kind="stable")


def _grouped(order: np.ndarray, keys: np.ndarray, sel: np.ndarray, pos: np.ndarray,
             n: int) -> Csr:
    """The messages `sel` selects, as their `pos`itions in the program, grouped by their
    `keys` (0..n-1) in message order within a key: `order` (Prepared's) restricted to
    them is that order."""
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(keys[sel], minlength=n), out=ptr[1:])
    return Csr(ptr, pos[order[sel[order]]].astype(np.int64))


def _path_params(machine: Machine, place: Placement, s_rank: np.ndarray,
                 r_rank: np.ndarray, nbytes: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per message on `machine` placed as `place`: (inter-node, latency ns, transfer ns,
    eager)."""
    inter = place.node[s_rank] != place.node[r_rank]
    lat = np.where(inter, machine.paths[INTER].latency_s, machine.paths[INTRA].latency_s)
    bw = np.where(inter, machine.paths[INTER].bandwidth_Bps,
                  machine.paths[INTRA].bandwidth_Bps)
    lim = np.where(inter, machine.paths[INTER].eager_limit,
                   machine.paths[INTRA].eager_limit)
    return inter, lat * 1e9, nbytes / bw * 1e9, nbytes <= lim


def _arrival(start: np.ndarray, s_op: np.ndarray, progress_op: np.ndarray,
             nbytes: np.ndarray, s_rank: np.ndarray, r_rank: np.ndarray, fitted: Machine,
             traced: Placement) -> tuple[np.ndarray, np.ndarray]:
    """Per message: (its measured arrival on the trace's machine, posts at the posting
    calls' starts and the rendezvous transfer at `progress_op`'s; eager there). Each
    message's on its own, so a subset of the messages gives the same values."""
    _, f_lat, f_xfer, f_eager = _path_params(fitted, traced, s_rank, r_rank, nbytes)
    s_post, r_post = start[s_op], start[progress_op]
    arrival = np.where(f_eager, s_post + f_lat + f_xfer,
                       np.maximum(s_post + f_lat, r_post) + 2 * f_lat + f_xfer)
    return arrival, f_eager


def _message_ready(n_ops: int, sdone: np.ndarray, rdone: np.ndarray,
                   arrival: np.ndarray, f_eager: np.ndarray) -> np.ndarray:
    """Per op, the latest arrival of the messages it completes (receives, rendezvous
    sends); -inf for none."""
    ready = np.full(n_ops, -np.inf)
    ok = rdone >= 0
    np.maximum.at(ready, rdone[ok], arrival[ok])
    rdv = (sdone >= 0) & ~f_eager
    np.maximum.at(ready, sdone[rdv], arrival[rdv])
    return ready


@dataclass
class _Instances:
    """The collective instances of a program: per collectives row entered by a kept op,
    and per instance."""

    c_op: np.ndarray  # per row: its op
    inst: np.ndarray  # per row: its instance (0..n-1, in instance id order)
    waits: np.ndarray  # per row: its op waited for the others (entered before the last)
    size: np.ndarray  # per instance: participants
    maxstart: np.ndarray  # per instance: the last entry
    bytes: np.ndarray  # per instance: the most any row sends or receives
    func: np.ndarray  # per instance: its function
    model_cost: np.ndarray  # per instance: the algorithm's cost on the fitted machine (ns)
    seen: np.ndarray  # per instance: the measured cost (the first waiting op's end after
    # the last entry; inf: none waited)
    f_cost: np.ndarray  # per instance: that cost scaled to the measured one (ns)

    def kept(self, keep: np.ndarray, pre: Prepared, fitted: Machine,
             traced: Placement) -> _Instances | None:
        """These instances without the rows `keep` drops, when it drops whole instances
        and keeps one at least (else None): each kept instance's rows, entries and
        costs are its own, as `_instances` of those rows makes them; the fitted costs'
        scale per function (over the instances left) is made again."""
        inst = self.inst[keep]
        count = np.bincount(inst, minlength=len(self.size))
        used = count > 0
        if not used.any() or (count[used] != self.size[used]).any():
            return None
        new = np.cumsum(used) - 1  # the kept instances' ids, in order, as np.unique gives
        ci = _Instances(self.c_op[keep], new[inst], self.waits[keep], self.size[used],
                        self.maxstart[used], self.bytes[used], self.func[used],
                        np.zeros(0), self.seen[used], np.zeros(0))
        ci.model_cost = _inst_costs(fitted, traced, ci, pre.rank[ci.c_op])
        ci.f_cost = _fitted_cost(ci.func, ci.model_cost, ci.seen)
        return ci


def _inst_costs(machine: Machine, place: Placement, ci: _Instances,
                c_rank: np.ndarray) -> np.ndarray:
    """The algorithm's cost of each instance on `machine` placed as `place` (ns)."""
    n_inst = len(ci.size)
    if machine.collectives == "measured" or not n_inst:
        return np.zeros(n_inst)
    nodes_lo = np.full(n_inst, np.iinfo(np.int64).max)
    nodes_hi = np.full(n_inst, -1)
    np.minimum.at(nodes_lo, ci.inst, place.node[c_rank])
    np.maximum.at(nodes_hi, ci.inst, place.node[c_rank])
    inter = nodes_hi != nodes_lo
    pi, pe = machine.paths[INTRA], machine.paths[INTER]
    return collective_cost_s(
        ci.func, ci.size, ci.bytes,
        np.where(inter, pe.latency_s, pi.latency_s),
        np.where(inter, pe.bandwidth_Bps, pi.bandwidth_Bps)) * 1e9


def _instances(trace: Trace, pre: Prepared, rows: np.ndarray, fitted: Machine,
               traced: Placement) -> _Instances:
    """The instances of collectives `rows` (their ops kept), on the fitted machine."""
    coll = trace.collectives
    c_op = pre.c_op[rows]
    inst_ids, inst = np.unique(coll["instance"].to_numpy()[rows], return_inverse=True)
    n_inst = len(inst_ids)
    inst_size = np.bincount(inst, minlength=n_inst)
    inst_maxstart = np.full(n_inst, -np.inf)
    np.maximum.at(inst_maxstart, inst, pre.start[c_op])
    funcs = _strings(coll["function"])[rows]
    cbytes = np.maximum(coll["bytes_sent"].to_numpy(), coll["bytes_recv"].to_numpy())[rows]
    inst_bytes = np.zeros(n_inst)
    np.maximum.at(inst_bytes, inst, cbytes.astype(np.float64))
    inst_func = np.empty(n_inst, funcs.dtype if len(funcs) else "<U1")
    inst_func[inst] = funcs
    # a rank that left before the last one entered (a Bcast root, say) did not wait
    c_end = pre.end[c_op]
    waits = c_end >= inst_maxstart[inst]
    ci = _Instances(c_op, inst, waits, inst_size, inst_maxstart, inst_bytes, inst_func,
                    np.zeros(0), np.zeros(0), np.zeros(0))
    # the algorithm models against the measured cost (the last rank's time after the
    # last entry), per function: an MPI library faster than its model (shared memory)
    # runs at that fraction of it on the trace's machine, so replaying there gives back
    # the measured times; a scenario changes the cost by the model's difference
    model_cost = _inst_costs(fitted, traced, ci, pre.rank[c_op])
    seen = np.full(n_inst, np.inf)
    np.minimum.at(seen, inst[waits], c_end[waits] - inst_maxstart[inst[waits]])
    ci.model_cost, ci.seen = model_cost, seen
    ci.f_cost = _fitted_cost(inst_func, model_cost, seen)
    return ci


def _fitted_cost(inst_func: np.ndarray, model_cost: np.ndarray,
                 seen: np.ndarray) -> np.ndarray:
    """Per instance, the model's cost scaled per function to the measured ones (the
    low quantile of measured over model, at most 1)."""
    f_cost = model_cost.copy()
    for f in np.unique(inst_func) if len(inst_func) else []:
        sel = (inst_func == f) & np.isfinite(seen) & (model_cost > 0)
        if sel.any():
            share = float(np.clip(np.quantile(seen[sel] / model_cost[sel], 0.1), 0, 1))
            f_cost[inst_func == f] *= share
    return f_cost


def _enter(ready: np.ndarray, ci: _Instances) -> None:
    """`ready` (per op) of the ops that wait in their instance: every participant
    entered, plus the algorithm's cost on the fitted machine."""
    w = ci.waits
    ready[ci.c_op[w]] = np.maximum(ready[ci.c_op[w]],
                                   ci.maxstart[ci.inst[w]] + ci.f_cost[ci.inst[w]])


def _own(pre: Prepared, ready: np.ndarray) -> np.ndarray:
    """Each op's own part as measured: its end minus the later of its start and
    `ready`, clamped to its duration."""
    return np.clip(pre.end - np.maximum(pre.start, ready), 0.0, pre.end - pre.start)


@dataclass
class _Basis:
    """What the programs of a trace on one fitted machine share (Prepared.basis). A
    scenario that removes no op and merges no message keeps the base replay's
    dependencies on the trace's machine, hence each op's measured own time and overhead:
    `ready`, `inst`, `low`/`groups` are its. One that removes ops takes the messages'
    arrivals (but for those whose transfer started in a removed op) and, while no
    collective goes, the instances."""

    fitted: Machine
    traced: Placement  # the ranks on the fitted machine's nodes
    # per message with both posting ops (0 / False for the others), no op removed:
    eager: np.ndarray  # eager on the fitted machine
    arrival: np.ndarray  # float ns: measured arrival (as `build` has it)
    inst: _Instances  # the instances of the collectives rows entered by an op
    ready: np.ndarray  # float ns per op: when its dependencies were met, as measured
    low: np.ndarray  # the overhead of each group of ops (_lows) of the own times `ready`
    groups: np.ndarray  # gives, and each op's group (Prepared.fn where `coded`)
    coded: bool  # `low` per function code (_low_quantiles), patchable group by group
    # the messages in the stable order of the op a transfer starts from (its receive
    # where eager on the fitted machine, else `progress`): the post_recv CSR of a
    # scenario whose messages keep theirs, with no sort
    by_recv_start: np.ndarray
    # per op, the run-queue delay measured in its own part (own_run_delay), on first use
    _own_delay: np.ndarray | None = field(default=None, repr=False)

    def own_run_delay(self, trace: Trace, pre: Prepared) -> np.ndarray:
        """Per op, the run-queue delay (ns) the tracer measured in its own part: after
        its dependencies were met as traced (`ready`) to its end, on its thread; zeros
        where nothing was measured. Its waiting before that is replayed, not taken from
        the trace, so the delay measured there is no part of its cost."""
        if self._own_delay is None:
            d = None
            if desched.sampled(trace.calls):
                thread = trace.calls["thread"].to_numpy()[pre.op_call].astype(np.int64)
                d = desched.between(trace.calls, pre.rank, thread,
                                    np.maximum(pre.start, self.ready), pre.end)
            self._own_delay = np.zeros(len(pre.op_call)) if d is None else d
        return self._own_delay

    def recv_start(self, pre: Prepared, rows: np.ndarray) -> np.ndarray:
        """Per message of `rows`, the op `by_recv_start` orders it by."""
        return np.where(self.eager[rows], pre.r_op[rows], pre.progress[rows])

    @classmethod
    def of(cls, trace: Trace, pre: Prepared, fitted: Machine) -> _Basis:
        traced = Placement.of(trace, fitted)
        m = trace.messages
        nbytes = m["bytes"].to_numpy().astype(np.float64) if len(m) else np.zeros(0)
        rows = np.flatnonzero((pre.s_op >= 0) & (pre.r_op >= 0))
        s_op, r_op = pre.s_op[rows], pre.r_op[rows]
        arrival = np.zeros(len(nbytes))
        eager = np.zeros(len(nbytes), bool)
        arrival[rows], eager[rows] = _arrival(pre.start, s_op, pre.progress[rows],
                                              nbytes[rows], pre.rank[s_op],
                                              pre.rank[r_op], fitted, traced)
        ready = _message_ready(len(pre.op_call), pre.sdone[rows], pre.rdone[rows],
                               arrival[rows], eager[rows])
        ci = _instances(trace, pre, np.flatnonzero(pre.c_op >= 0), fitted, traced)
        _enter(ready, ci)
        if len(ready):
            low, groups = _lows(pre.fn, _own(pre, ready))
        else:
            low, groups = np.zeros(0), np.zeros(0, np.int64)
        basis = cls(fitted, traced, eager, arrival, ci, ready, low, groups,
                    groups is pre.fn, np.zeros(0, np.int64))
        basis.by_recv_start = _order(basis.recv_start(pre, np.arange(len(eager))))
        return basis


def build(trace: Trace, fitted: Machine, target: Machine, scenario: Scenario,
          prepared: Prepared | None = None) -> Program:
    """The program of `trace` with `scenario` on `target` (`prepared`: Prepared.of(trace),
    when several scenarios are built from one trace)."""
    pre = prepared if prepared is not None else Prepared.of(trace)
    op_call, rank, start, end, op_lo = pre.op_call, pre.rank, pre.start, pre.end, pre.op_lo
    nr = trace.num_ranks
    if scenario.nodes is not None and scenario.nodes > nr:
        raise UserError("--nodes", f"{scenario.nodes} nodes for {nr} ranks: each node "
                        f"needs a rank (at most --nodes {nr})")
    n_ops = len(op_call)
    removed = _removed_calls(trace, scenario)[op_call]
    # what the programs on `fitted` share; all of the dependencies' times on the trace's
    # machine while no op goes and no message merges
    base = pre.basis(trace, fitted)
    same = not scenario.aggregate and not removed.any()

    cpu = scenario.cpu_factor if scenario.cpu_factor is not None else target.cpu_factor
    kept = keeps_noise(scenario, target)
    # ranks no longer sharing the traced host's cores: computation at its own time
    cut = _delay_cut(trace, pre, base, scenario, kept)
    gap = (pre.gap if cut is None else pre.gap - cut.gap) * cpu
    gap = _balanced(trace, scenario, gap, rank, op_call, op_lo, nr)
    trailing = (pre.trailing if cut is None else pre.trailing - cut.trailing) * cpu

    placed = Placement.of(trace, target)

    # messages
    m = trace.messages
    s_op, r_op = pre.s_op, pre.r_op
    keep = (s_op >= 0) & (r_op >= 0)
    keep[keep] &= ~removed[s_op[keep]] & ~removed[r_op[keep]]
    rows = np.flatnonzero(keep)
    s_op, r_op = s_op[rows], r_op[rows]
    sdone = pre.sdone[rows] if len(m) else s_op
    rdone = pre.rdone[rows] if len(m) else r_op
    nbytes = _aggregated(trace, scenario)[1][rows]
    s_rank = rank[s_op]
    r_rank = rank[r_op]
    t_inter, t_lat, t_xfer, t_eager = _path_params(target, placed, s_rank, r_rank, nbytes)
    # where a rendezvous transfer can start (Prepared.progress); at the receive's post
    # where that op is removed
    progress_op = pre.progress[rows]
    progress_op = np.where(removed[progress_op], r_op, progress_op)
    if same:
        ready, ci = base.ready, base.inst  # read only
    else:
        if scenario.aggregate:
            arrival, f_eager = _arrival(start, s_op, progress_op, nbytes, s_rank, r_rank,
                                        fitted, base.traced)
        else:
            arrival, f_eager = base.arrival[rows], base.eager[rows]
            moved = np.flatnonzero(progress_op != pre.progress[rows])
            if len(moved):
                arrival[moved] = _arrival(start, s_op[moved], progress_op[moved],
                                          nbytes[moved], s_rank[moved], r_rank[moved],
                                          fitted, base.traced)[0]
        ready = _message_ready(n_ops, sdone, rdone, arrival, f_eager)
        # per-message and per-op temporaries go as soon as they are used: the program
        # being built is the peak of `findings` (one per scenario)
        del arrival, f_eager
        c_keep = ~removed[base.inst.c_op]
        ci = base.inst if c_keep.all() else (
            base.inst.kept(c_keep, pre, fitted, base.traced)
            or _instances(trace, pre, np.flatnonzero(pre.c_op >= 0)[c_keep], fitted,
                          base.traced))
        _enter(ready, ci)

    # collectives
    op_inst = np.full(n_ops, -1, np.int64)
    op_inst[ci.c_op] = ci.inst
    op_waits = np.zeros(n_ops, bool)
    op_waits[ci.c_op] = ci.waits
    t_cost = ci.f_cost.copy() if target is fitted else np.maximum(
        _inst_costs(target, placed, ci, rank[ci.c_op]) - ci.model_cost + ci.f_cost, 0.0)

    dur = end - start
    own = _own(pre, ready)
    if same and n_ops:
        overhead = np.minimum(base.low[base.groups], own)
    elif base.coded and n_ops and not np.isnan(own).any():
        # an op's own time changed only where its `ready` did: the quantiles of the
        # other functions are the base's
        low = base.low.copy()
        for g in np.unique(pre.fn[ready != base.ready]):
            low[g] = _low_quantile(own[pre.fn == g])
        overhead = np.minimum(low[pre.fn], own)
    else:
        overhead = _overhead(pre.fn, own)
    if cut is not None and cut.own is not None:
        # the run-queue delay measured in the own part comes out of it, the overhead too
        # where that holds delay (estimated from calls all descheduled alike)
        own = np.maximum(own - cut.own, 0.0)
        overhead = np.minimum(overhead, own)
    noise = own - overhead
    del own
    cost = overhead + noise if kept else overhead.copy()
    cost[removed] = 0.0
    # descheduled while waiting: noise hides behind a longer wait than the traced one
    absorb = np.where(removed | (not kept), 0.0, noise)
    waited = np.clip(ready - start, 0.0, dur)
    del ready, dur
    overhead[removed] = 0.0  # in place: both are this build's own arrays
    noise[removed] = 0.0
    # no posts or waits for removed ops; messages were filtered above
    keys_ok = rdone >= 0
    rdv_t = ~t_eager
    sd_ok = (sdone >= 0) & rdv_t
    # over all the trace's messages: those replayed, and their position in the program
    pos = np.full(len(keep), -1, np.int64)
    pos[rows] = np.arange(len(rows))
    waited_recv = np.zeros(len(keep), bool)
    waited_recv[rows] = keys_ok
    waited_send = np.zeros(len(keep), bool)
    waited_send[rows] = sd_ok
    # grouped by the op where the transfer can start, which depends on the scenario
    recv_start = np.where(t_eager, r_op, progress_op)
    if np.array_equal(recv_start, base.recv_start(pre, rows)):
        post_recv = _grouped(base.by_recv_start, base.recv_start(pre, np.arange(len(keep))),
                             keep, pos, n_ops)
    else:
        post_recv = _csr(recv_start, np.arange(len(rows)), n_ops)
    del recv_start
    return Program(
        num_ranks=nr, op_lo=op_lo.astype(np.int64), op_call=op_call, gap=gap, cost=cost,
        removed=removed, trailing=trailing, msg_row=rows, msg_send_op=s_op,
        msg_recv_op=r_op, msg_bytes=nbytes, msg_eager=t_eager, msg_latency=t_lat,
        msg_xfer=t_xfer,
        msg_contended=t_inter,
        post_send=_grouped(pre.by_s_op, pre.s_op, keep, pos, n_ops),
        post_recv=post_recv,
        wait_recv=_grouped(pre.by_rdone, pre.rdone, waited_recv, pos, n_ops),
        wait_send=_grouped(pre.by_sdone, pre.sdone, waited_send, pos, n_ops),
        op_inst=op_inst, op_waits_inst=op_waits, inst_size=ci.size.copy(),
        inst_cost=t_cost, overhead=overhead, noise=noise,
        absorb=absorb, waited=waited,
        compute_desched=float(pre.gap_desched.sum() + pre.trailing_desched.sum()))
