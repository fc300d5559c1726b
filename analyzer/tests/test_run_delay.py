"""Descheduling the tracer measured (`mpiscope:run_delay_ns` samples on Enter/Leave): the
per-rank `descheduled_s` of the breakdown and the replay's compute bursts at their own
time when the ranks no longer share the traced host's cores. Traces built by hand
(tracegen) with known samples, so every figure is computed exactly."""

from pathlib import Path

import numpy as np
import pytest

from mpiscope.analysis import breakdown, desched, simulate
from mpiscope.analysis.simulate.model import INTER, INTRA, Machine, PathModel
from mpiscope.analysis.simulate.scenario import Scenario
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder

BURST = 10_000  # ns of computation between MPI_Init and the barrier, on both ranks
DELAY = (6_000, 2_000)  # of it, ns each rank was runnable but waiting for a CPU


def machine() -> Machine:
    """A known machine (1 us, 1 GB/s on every path), so nothing is fitted."""
    path = PathModel(1e-6, 1e9, 4096)
    return Machine("known", {INTRA: path, INTER: path}, fitted=True,
                   collectives="algorithm")


def _trace(tmp_path: Path, sampled: bool = True):
    """Init [0, 1000], BURST of computation, Barrier [11000, 11100], Finalize."""
    tb = TraceBuilder(2)
    for r in range(2):
        tb.call(r, 0, 1000, "MPI_Init", run_delay=(None, 0) if sampled else (None, None))
        # rank 1's barrier Enter is not sampled (within 100 us of its last read, say):
        # its Leave is, 100 ns later, and the delay is spread in proportion to wall time
        enter = (DELAY[r] if r == 0 else None) if sampled else None
        leave = (DELAY[r] if r == 0 else DELAY[r] * 10_100 // 10_000) if sampled else None
        tb.collective(r, 1000 + BURST, 11_100, "MPI_Barrier", run_delay=(enter, leave))
        tb.call(r, 11_200, 11_300, "MPI_Finalize")
    return reader.load(tb.write(tmp_path / ("s" if sampled else "u")), use_cache=False)


def test_samples_read_into_the_calls_table(tmp_path):
    c = _trace(tmp_path).calls
    bar = c[c["function"] == "MPI_Barrier"].sort_values("rank")
    assert bar["run_delay_enter"].tolist() == [DELAY[0], -1]
    assert bar["run_delay_leave"].tolist() == [DELAY[0], 2020]
    init = c[c["function"] == "MPI_Init"]
    assert init["run_delay_enter"].tolist() == [-1, -1]
    assert init["run_delay_leave"].tolist() == [0, 0]


def test_interpolated_between_samples(tmp_path):
    t = _trace(tmp_path)
    d = desched.between(t.calls, np.array([0, 1, 1]), np.zeros(3, np.int64),
                        np.array([1000, 1000, 11_000]), np.array([11_000, 11_000, 11_100]))
    assert d is not None
    assert d.tolist() == pytest.approx([6000, 2000, 20])


def test_breakdown_descheduled_per_rank(tmp_path):
    t = _trace(tmp_path)
    sums = breakdown.rank_sums(t, np.zeros(len(t.calls)))
    frame = breakdown.ranks_frame(sums, t.host_of())
    # measured interval: Init's end to Finalize's start
    assert frame["descheduled_s"].tolist() == pytest.approx([6000e-9, 2020e-9])


def test_unsampled_trace_claims_nothing(tmp_path):
    t = _trace(tmp_path, sampled=False)
    assert desched.between(t.calls, np.array([0]), np.array([0]), np.array([0]),
                           np.array([5])) is None
    frame = breakdown.ranks_frame(breakdown.rank_sums(t, np.zeros(len(t.calls))),
                                  t.host_of())
    assert frame["descheduled_s"].isna().all()
    base = simulate.replay(t, Scenario(noise=False), fitted=machine())
    assert base.predicted_s == pytest.approx(base.measured_s)


def test_replay_keeps_descheduling_on_the_traced_host(tmp_path):
    t = _trace(tmp_path)
    r = simulate.replay(t, Scenario(noise=True), fitted=machine())
    assert r.replayed_s == r.measured_s
    assert r.predicted_s == pytest.approx(r.measured_s)
    assert r.to_dict()["own_time"]["compute_descheduled_s"] == pytest.approx(8000e-9)


@pytest.mark.parametrize("scenario", [Scenario(noise=False), Scenario(nodes=2)],
                         ids=["noise-drop", "nodes"])
def test_replay_computes_at_on_cpu_time_elsewhere(tmp_path, scenario):
    """Dropped noise (or ranks on nodes of their own): each burst lasts its wall time less
    its run-queue delay: rank 0's 4000 ns, rank 1's 8000 ns; the barrier waits for rank 1,
    so the run is 2000 ns shorter."""
    t = _trace(tmp_path)
    r = simulate.replay(t, scenario, fitted=machine())
    assert (r.measured_s - r.predicted_s) * 1e9 == pytest.approx(2000)
    bar = r.trace.calls[r.trace.calls["function"] == "MPI_Barrier"].sort_values("rank")
    assert bar["start"].tolist() == [1000 + BURST - DELAY[0], 1000 + BURST - DELAY[1]]
