"""The `descheduled` finding: what the run-queue delay the tracer measured (time runnable
but waiting for a CPU) cost the run, its saving replayed with each compute burst and each
call's own part without that delay (`Scenario(run_delay=False)`, `whatif --run-delay
drop`). Traces built by hand with known delays (scenarios.py, the oversubscribed builder),
so each saving is computed by hand: the delay removed from the critical path. Nothing
here depends on how a real run was scheduled."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import pytest
from test_dask_engine import differences

from mpiscope.analysis import findings, simulate
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate.scenario import Scenario as WhatIf
from mpiscope.archive import reader
from mpiscope.archive.trace import Trace
from mpiscope.cli import whatif
from mpiscope.engines import rankfindings, slices
from mpiscope_testing.oversubscribed import imbalanced
from mpiscope_testing.scenarios import Scenario

US = 1000
ITERATIONS = 10


def two_ranks(compute_us: float = 40, waiting_us: float = 50, own_us: float = 0,
              sampled: bool = True) -> Trace:
    """10 iterations of an Allreduce (app.c:5): rank 0 computes 100 µs before it,
    `compute_us` of them runnable but waiting for a CPU; rank 1 computes 20 µs and waits
    80 µs in it for rank 0, `waiting_us` of them descheduled. The Allreduce ends 2 µs
    after rank 0 enters, on rank 0 `own_us` later: it was descheduled that long after
    its partner had entered. The tracer's samples: on every call's Enter and Leave.
    Calls rank by rank, as a trace read back has them (the rank slices need that)."""
    sc = Scenario()
    period = round((102 + own_us) * US)
    for r in range(2):
        # (function, start, end, run-queue delay before it, in it), ns
        calls = [("MPI_Init", 0, 10 * US, 0, 0)]
        t = 10 * US
        for _ in range(ITERATIONS):
            calls.append(("MPI_Allreduce", t + 100 * US, t + period, compute_us * US,
                          own_us * US) if r == 0 else
                         ("MPI_Allreduce", t + 20 * US, t + 102 * US, 0, waiting_us * US))
            t += period
        calls.append(("MPI_Finalize", t, t + 10 * US, 0, 0))
        delay = 0
        for fn, start, end, before, inside in calls:
            enter = delay = delay + round(before)
            delay += round(inside)
            sized = {"bytes_sent": 8, "bytes_recv": 8} if fn == "MPI_Allreduce" else {}
            sc.call(r, fn, start, end, callsite=SITES[fn], **sized,
                    **({"run_delay": (enter, delay)} if sampled else {}))
    return sc.trace()


SITES = {"MPI_Init": "app.c:1", "MPI_Allreduce": "app.c:5", "MPI_Finalize": "app.c:9"}


def only(found: list[findings.Finding]) -> findings.Finding:
    [f] = [f for f in found if f.kind == "descheduled"]
    return f


def replayed_saving_s(trace: Trace, a: Analysis) -> float:
    """The replay's own answer: the gain of the run on cores of their own, in the
    measured run (× run / the same interval replayed)."""
    r = findings.Replays(trace)
    r.run_s = findings.run_s(a.ranks)
    return (r.base.replayed_s - simulate.replay(trace, WhatIf(run_delay=False)).predicted_s
            ) * r.scale()


def test_delay_in_computation_is_saved_delay_while_waiting_is_not() -> None:
    """Rank 0's 40 µs per iteration lie on the critical path (rank 1 waits for it at
    every Allreduce): 10 x 40 µs = 400 µs saved of the 1020 µs run. Rank 1's 50 µs per
    iteration lie in its waiting: on its own core it would wait longer, the run is no
    shorter. The finding states the 900 µs measured and the replayed 400 µs."""
    t = two_ranks()
    a = Analysis(t)
    f = only(a.findings)
    assert f.estimated_savings_s == pytest.approx(replayed_saving_s(t, a), rel=1e-9)
    assert f.estimated_savings_s == pytest.approx(ITERATIONS * 40e-6, rel=0.01)
    assert (f.function, f.callsite, f.calls) == ("", "", 0)
    assert f.time_s == pytest.approx(ITERATIONS * 90e-6)
    ev = f.evidence
    assert ev["delay_by_rank_s"] == pytest.approx({0: 400e-6, 1: 500e-6})
    assert ev["saving_replayed"] and not ev["saving_bounded"]
    assert ev["share_of_run"] == pytest.approx(400 / 1020, rel=0.01)
    assert ev["scenario"] == "whatif --run-delay drop"
    assert "run-queue delay" in ev["delay_model"] and "replayed" in ev["delay_model"]
    assert f.message.startswith("ranks waited 900 µs for a CPU (run-queue delay measured "
                                "by the tracer, summed over ranks: rank 1 (500 µs), "
                                "rank 0 (400 µs); 39–49% of a rank's run). On cores of "
                                "their own")
    assert "saves ~400 µs, 39.2% of the run (replayed" in f.message


def test_delay_after_the_partner_entered_is_saved_too() -> None:
    """Rank 0 also waits 10 µs for a CPU inside each Allreduce after rank 1 entered it
    (the call takes 12 µs on rank 0, 2 µs on rank 1). Its own part, from rank 1's entry
    plus the collective's cost on the fitted machine (at most the 2 µs measured) to its
    end, loses the delay measured in it, spread over the call's wall time: 10 to 12 of
    the 12 µs, 8.3 to 10 µs per call. On the critical path in 9 of the 10 iterations (the
    last ends with rank 1's 10 µs of computation before MPI_Finalize): 400 µs + 9 x 8.3
    to 10 µs."""
    t = two_ranks(own_us=10)
    a = Analysis(t)
    f = only(a.findings)
    assert f.estimated_savings_s == pytest.approx(replayed_saving_s(t, a), rel=1e-9)
    assert 400e-6 + 9 * 10e-6 * 10 / 12 - 1e-12 <= f.estimated_savings_s <= 490e-6 + 1e-12


def test_calls_all_descheduled_alike_lose_their_delay() -> None:
    """One rank, 5 calls of 12 µs, each 10 µs runnable but waiting for a CPU (e.g. a
    file closed while the host was busy): no undisturbed call shows the function's
    overhead, yet each loses the 10 µs measured in it: 50 µs of the 310 µs run."""
    sc = Scenario()
    sc.call(0, "MPI_Init", 0, 10 * US, run_delay=(0, 0))
    t = 10 * US
    for i in range(5):
        t += 50 * US
        sc.call(0, "MPI_File_close", t, t + 12 * US, run_delay=(i * 10 * US,
                                                              (i + 1) * 10 * US))
        t += 12 * US
    sc.call(0, "MPI_Finalize", t, t + 10 * US, run_delay=(50 * US, 50 * US))
    f = only(Analysis(sc.trace()).findings)
    assert f.estimated_savings_s == pytest.approx(50e-6, rel=1e-6)


def test_no_run_delay_recorded_no_finding() -> None:
    assert not [f for f in Analysis(two_ranks(sampled=False)).all_findings
                if f.kind == "descheduled"]
    # measured, but none: nothing to say
    assert not [f for f in Analysis(two_ranks(0, 0)).all_findings
                if f.kind == "descheduled"]


def test_a_tiny_delay_is_below_the_noise_floor() -> None:
    """0.5 µs per iteration on the critical path: 5 µs of a 1 ms run, below its 1%."""
    a = Analysis(two_ranks(compute_us=0.5, waiting_us=0.5))
    assert not [f for f in a.findings if f.kind == "descheduled"]
    f = only(a.minor_findings)
    assert f.estimated_savings_s == pytest.approx(5e-6, rel=0.01)
    assert "below the noise floor" in f.evidence["minor_reason"]


def test_rank_slices_give_the_pandas_finding() -> None:
    """The Dask engine's rules (per-rank passes, engines.rankfindings) find the same."""
    a = Analysis(two_ranks(own_us=10))
    parts = slices.all_of_trace(a.trace, a.wait_states)
    got = rankfindings.find(lambda fn: [fn(s) for s in parts], a.wait_states, a.ranks,
                            a.loop, a.critical_path)
    want = findings.find(a.trace, a.wait_states, a.ranks, a.loop, a.critical_path)
    assert differences([f.to_dict() for f in want], [f.to_dict() for f in got]) == []
    assert "descheduled" in {f.kind for f in got}


# 4 ranks on 2 CPUs: ranks 0-2 descheduled 300 µs in each Allreduce they wait in, rank 3
# (the late one) 200 µs in the computation before each
TURNS = [(0, 300), (0, 300), (0, 300), (200, 0)]


def test_oversubscribed_run_in_the_json_and_the_summary(tmp_path: Path) -> None:
    """On the critical path: rank 3's 200 µs per iteration, 2 ms of the 10 ms run."""
    trace = imbalanced(["node0"] * 4, "2", run_delay_us=TURNS).write(tmp_path / "t")
    out = tmp_path / "a.json"
    p = subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    [f] = [f for f in doc["findings"] if f["kind"] == "descheduled"]
    assert f["estimated_savings_s"] == pytest.approx(ITERATIONS * 200e-6, rel=0.01)
    assert f["time_s"] == pytest.approx(11e-3)
    assert f["evidence"]["share_of_run"] == pytest.approx(0.2, rel=0.01)
    assert (f["function"], f["callsite"], f["callpath"]) == ("", "", [])
    # the whole run: no call site to find on the critical path
    assert f["on_critical_path"] is None and f["critical_path_s"] is None
    assert f["oversubscribed"]
    assert f["message"].endswith("Measured oversubscribed (4 ranks on 2 CPUs): the ranks "
                                 "took turns on them.")
    assert "not on the critical path" not in f["message"]
    # the load imbalance is still there, marked as before
    assert [g["oversubscribed"] for g in doc["findings"] if g["kind"] == "load_imbalance"
            ] == [True]
    summary = " ".join(p.stdout.split())
    assert "descheduled all ranks, the whole run" in summary
    assert "descheduled all ranks, the whole run: not on" not in summary


def test_whatif_run_delay_drop(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    whatif.add_arguments(parser)
    assert whatif.scenario_of(parser.parse_args(["t"])).run_delay
    scenario = whatif.scenario_of(parser.parse_args(["t", "--run-delay", "drop"]))
    assert scenario == WhatIf(run_delay=False)
    assert scenario.to_dict()["run_delay"] == "drop"
    assert "run_delay" not in WhatIf().to_dict()
    t = reader.load(imbalanced(["node0"] * 4, "2", run_delay_us=TURNS).write(tmp_path / "t"),
                    use_cache=False)
    r = simulate.replay(t, scenario)
    assert r.replayed_s - r.predicted_s == pytest.approx(ITERATIONS * 200e-6, rel=0.01)
