"""Descheduling as the tracer measured it: how long each thread was runnable but waiting
for a CPU (its run-queue delay), so that time spent waiting for a core shared with other
ranks is told apart from the program's own computation and MPI time.

The interposer samples each thread's cumulative run-queue delay on some Enter/Leave
records (`mpiscope:run_delay_ns`, at most one read per 100 us of the thread's wall time;
`calls.run_delay_enter/leave`, -1 where not sampled). Between two samples the delay is
spread in proportion to wall time (linear interpolation of the cumulative counter), so a
span shorter than the sampling interval gets its share, a longer one its exact value.
Traces without samples (other tracers, MPISCOPE_SCHED=off) give None: nothing measured,
nothing claimed."""

from __future__ import annotations

import numpy as np
import pandas as pd

COLUMNS = ("run_delay_enter", "run_delay_leave")


def sampled(calls: pd.DataFrame) -> bool:
    """Whether the calls carry any run-delay sample."""
    return all(c in calls.columns for c in COLUMNS) and bool(
        (calls["run_delay_enter"].to_numpy() >= 0).any()
        or (calls["run_delay_leave"].to_numpy() >= 0).any())


def run_delay_at(calls: pd.DataFrame, rank: np.ndarray, thread: np.ndarray,
                 t: np.ndarray) -> np.ndarray | None:
    """The cumulative run-queue delay (ns, float) of thread `thread` of rank `rank` at
    trace time `t`, per query, interpolated between that thread's samples (constant
    before the first and after the last: nothing is claimed outside them). None when the
    calls carry no sample."""
    if not sampled(calls):
        return None
    r = calls["rank"].to_numpy().astype(np.int64)
    th = calls["thread"].to_numpy().astype(np.int64)
    times, values, keys = [], [], []
    for tcol, vcol in (("start", "run_delay_enter"), ("end", "run_delay_leave")):
        v = calls[vcol].to_numpy()
        ok = v >= 0
        times.append(calls[tcol].to_numpy()[ok].astype(np.float64))
        values.append(v[ok].astype(np.float64))
        keys.append(r[ok] << 16 | th[ok])
    st, sv, sk = (np.concatenate(x) for x in (times, values, keys))
    order = np.lexsort((st, sk))
    st, sv, sk = st[order], sv[order], sk[order]
    qk = np.asarray(rank, np.int64) << 16 | np.asarray(thread, np.int64)
    qt = np.asarray(t, np.float64)
    out = np.zeros(len(qt))
    bounds = np.flatnonzero(np.diff(sk)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(sk)], strict=True):
        q = qk == sk[lo]
        if q.any():
            out[q] = interpolate(st[lo:hi], sv[lo:hi], qt[q])
    return out


def interpolate(times: np.ndarray, values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """One thread's cumulative run-queue delay (float ns) at times `t`, from its samples
    (`values` at `times`, in time order; at least one)."""
    # a thread's counter only grows; a damaged sample must not make it go back
    return np.interp(t, times, np.maximum.accumulate(values))


def gaps(start: np.ndarray, end: np.ndarray, at_enter: np.ndarray,
         at_leave: np.ndarray) -> np.ndarray | None:
    """Run-queue delay (ns, float) in each gap between consecutive calls of one thread
    (calls in time order, not overlapping; their Enter/Leave samples, -1 where not
    sampled), at most the gap: len(start) - 1 values. None when no call is sampled."""
    ok_e, ok_l = at_enter >= 0, at_leave >= 0
    if not (ok_e.any() or ok_l.any()):
        return None
    times = np.r_[start[ok_e], end[ok_l]].astype(np.float64)
    values = np.r_[at_enter[ok_e], at_leave[ok_l]].astype(np.float64)
    order = np.argsort(times, kind="stable")
    at = interpolate(times[order], values[order], np.r_[end[:-1], start[1:]].astype(np.float64))
    n = len(start) - 1
    return np.clip(at[n:] - at[:n], 0.0, np.maximum(start[1:] - end[:-1], 0).astype(np.float64))


def between(calls: pd.DataFrame, rank: np.ndarray, thread: np.ndarray, t0: np.ndarray,
            t1: np.ndarray) -> np.ndarray | None:
    """Run-queue delay (ns) of each span [t0, t1] of the given thread, at most its wall
    time; None when the calls carry no sample."""
    r = np.asarray(rank)
    th = np.asarray(thread)
    at = run_delay_at(calls, np.r_[r, r], np.r_[th, th], np.r_[t0, t1])
    if at is None:
        return None
    n = len(r)
    wall = np.maximum(np.asarray(t1, np.float64) - np.asarray(t0, np.float64), 0.0)
    return np.clip(at[n:] - at[:n], 0.0, wall)
