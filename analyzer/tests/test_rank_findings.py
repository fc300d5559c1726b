"""Findings computed per rank (engines/rankfindings.py) are the pandas engine's findings.

The detection runs as per-rank passes over the rank slices plus combines on the client;
the savings are replayed on the gathered trace below an event budget. On every test trace
of the Dask engine's tests (Himeno XS 4 ranks 20 iterations, RMA fence, non-blocking
all-to-all, MPI-IO, two threads, Score-P, synthetic) and on programs made to have each
kind of finding (bursts, imbalance, master/worker), the findings equal the pandas ones
(floats to 1e-9), in-process and with the passes run on a 2-worker LocalCluster.

Above the budget, the replay runs on a window of whole iterations of the main loop and
scales the saving to the run: with a budget of half of the synthetic trace's events, the
window holds at most that many, the messages name it, and the frequent collective's
saving is the window's own replay scaled to the run per removed call. Removing Himeno's
barrier after the loop (outside such a window) claims no saving; being one instance in
tear-down, it is not a finding either.
On
the synthetic trace (regular iterations), a window of 5% of the events (9 of 198
iterations, or without the loop a window of 5% of the run's time) gives each saving
within 15% of the full replay's. The collective entries resolved a chunk per pass give
the same findings as in one pass.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
from test_dask_engine import differences

import mpiscope
from mpiscope.analysis import findings, replaywindow
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario
from mpiscope.archive import cache
from mpiscope.engines import cluster, rankfindings, slices
from mpiscope_testing import scenarios
from mpiscope_testing.enginetraces import engine_traces


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory, scorep_trace: Path) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rank-findings")
    for sub in ("fence", "ialltoall", "io", "bursts", "imbalance", "masterworker"):
        (d / sub).mkdir()
    out = {
        **engine_traces(d, scorep_trace),
        "bursts": scenarios.traced_run("bursts", 2, ["20"], d / "bursts"),
        "imbalance": scenarios.traced_run("imbalance", 4, ["8"], d / "imbalance"),
        "masterworker": scenarios.traced_run("masterworker", 4, ["30"], d / "masterworker"),
    }
    for p in out.values():
        shutil.rmtree(p / cache.CACHE_NAME, ignore_errors=True)
    return out


@pytest.fixture(scope="module")
def analyses(traces: dict[str, Path]) -> dict[str, Analysis]:
    return {name: Analysis(mpiscope.load(p)) for name, p in traces.items()}


NAMES = ["himeno", "fence", "ialltoall", "io", "threads", "scorep", "synth", "bursts",
         "imbalance", "masterworker"]


def in_process(a: Analysis):
    """The runner of the tests: fn over every rank's slice, in rank order."""
    parts = slices.all_of_trace(a.trace, a.wait_states)
    return lambda fn: [fn(s) for s in parts]


def pandas_findings(a: Analysis) -> list[dict]:
    return [f.to_dict() for f in findings.find(a.trace, a.wait_states, a.ranks, a.loop,
                                               a.critical_path)]


def per_rank_findings(a: Analysis, run, **kw) -> list[rankfindings.Finding]:
    return rankfindings.find(run, a.wait_states, a.ranks, a.loop, a.critical_path, **kw)


@pytest.mark.parametrize("name", NAMES)
def test_per_rank_findings_equal_the_pandas_findings(name: str,
                                                     analyses: dict[str, Analysis]) -> None:
    a = analyses[name]
    want = pandas_findings(a)
    got = [f.to_dict() for f in per_rank_findings(a, in_process(a))]
    assert differences(want, got) == []


def test_the_programs_give_every_kind_of_finding(analyses: dict[str, Analysis]) -> None:
    # so the equality above covers each rule, not only empty lists
    kinds = {f["kind"] for a in analyses.values() for f in pandas_findings(a)}
    assert kinds >= {"redundant_collective", "frequent_collective", "message_aggregation",
                     "load_imbalance", "hot_spot"}


def test_per_rank_passes_run_on_dask_workers(analyses: dict[str, Analysis]) -> None:
    with cluster.connect(cluster.ClusterSpec(workers=2, memory_limit="1GB")) as client:
        for name in ("himeno", "bursts", "masterworker"):
            a = analyses[name]
            parts = client.scatter(slices.all_of_trace(a.trace, a.wait_states))

            def run(fn, parts=parts):
                return client.gather(client.map(fn, parts, pure=False))

            got = [f.to_dict() for f in per_rank_findings(a, run)]
            assert differences(pandas_findings(a), got) == [], name


def test_above_the_budget_a_window_of_iterations_is_replayed_and_scaled(
        analyses: dict[str, Analysis]) -> None:
    # the synthetic trace: its findings are there by construction, not by how a real run
    # happened to be scheduled (a Himeno run on a busy machine may have no frequent
    # collective at all)
    a = analyses["synth"]
    run = in_process(a)
    events = sum(c.events for c in run(lambda s: rankfindings._count(s, None)))
    budget = events // 2
    full = {(f.kind, f.function): f for f in findings.find(
        a.trace, a.wait_states, a.ranks, a.loop, a.critical_path)}
    found = per_rank_findings(a, run, budget_events=budget)
    assert {(f.kind, f.function) for f in found} == set(full)
    iterations = a.loop.iterations

    [freq] = [f for f in found if f.kind == "frequent_collective"]
    assert "replayed on iterations " in freq.message
    assert f" of {iterations} of the main loop (" in freq.message
    assert "the saving scaled to the run per removed call" in freq.message
    assert "window: iterations" in freq.evidence["model"]
    assert full[("frequent_collective", "MPI_Allreduce")].estimated_savings_s > 0
    assert freq.estimated_savings_s > 0

    # the replayed window holds at most the budget
    r = rankfindings.BoundedReplays(run, a.loop, budget)
    assert r.base.events <= budget
    w = r.window
    assert w is not None and 1 <= w.iterations <= iterations // 2
    assert f"replayed on {w.what} ({w.events} events" in freq.message
    # its saving: running the Allreduce every k-th iteration, replayed on the window's
    # events alone (the machine fitted from them), times the calls that removes in the
    # run over those it removes in the window
    k, per_it = freq.evidence["k"], freq.evidence["per_iteration"]
    every = k * per_it
    scenario = Scenario(collective_every=(
        CollectiveEvery(CallSite("MPI_Allreduce", freq.callsite), every),))
    in_window = findings.Replays(r.trace).saving(scenario)
    assert in_window is not None

    def removed(calls: int) -> int:
        return calls - math.ceil(calls / every)

    scaled = in_window * removed(iterations * per_it) / removed(w.iterations * per_it)
    assert freq.estimated_savings_s == pytest.approx(max(scaled, 0.0), rel=1e-9)


def test_a_redundant_collective_outside_the_window_claims_no_saving(
        analyses: dict[str, Analysis]) -> None:
    # Himeno's barrier after the loop: with a budget of half the events it lies outside
    # the replayed window of iterations, so removing it claims no saving; one instance in
    # tear-down, it is never claimed as redundant
    a = analyses["himeno"]
    run = in_process(a)
    events = sum(c.events for c in run(lambda s: rankfindings._count(s, None)))
    found = per_rank_findings(a, run, budget_events=events // 2)
    # shown (under minor) but never claimed: no saving is stated for it
    redundant = [f for f in found if f.kind == "redundant_collective"]
    assert [(f.callsite, f.evidence["instances"], f.estimated_savings_s,
             "minor_reason" in f.evidence) for f in redundant] == [
        ("himeno.c:297", 1, 0.0, True)]
    calls = a.trace.calls
    last = calls[calls["function"] == "MPI_Barrier"].groupby("rank")["call"].max()
    replays = rankfindings.BoundedReplays(run, a.loop, events // 2)
    replays.run_s = findings.run_s(a.ranks)
    saving = replays.saving(Scenario(remove_calls=tuple(sorted(int(c) for c in last))))
    assert saving is None
    assert "none of them lies in the replayed window (iterations" in replays.why_none


def savings(found: list) -> dict[tuple[str, str], float]:
    return {(f.kind, f.function): f.estimated_savings_s for f in found}


@pytest.mark.parametrize("window", ["iterations", "time"])
def test_a_small_window_of_a_regular_run_scales_to_its_savings(
        window: str, analyses: dict[str, Analysis]) -> None:
    a = analyses["synth"]
    run = in_process(a)
    loop = a.loop if window == "iterations" else None  # no loop: a window of time
    events = sum(c.events for c in run(lambda s: rankfindings._count(s, None)))
    full = savings(findings.find(a.trace, a.wait_states, a.ranks, loop, a.critical_path))
    found = rankfindings.find(run, a.wait_states, a.ranks, loop, a.critical_path,
                              budget_events=events // 20)
    assert set(savings(found)) == set(full)
    assert any(v > 0 for v in full.values())
    for key, saved in savings(found).items():
        assert saved == pytest.approx(full[key], rel=0.15), key
    named = "iterations 95..103 of 198 of the main loop" if loop else " of the run's"
    assert all(named in f.message and named in f.evidence["model"] for f in found)


def test_instances_resolved_in_chunks_give_the_same_findings(
        analyses: dict[str, Analysis], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(findings, "ENTRIES_PER_PASS", 1)  # one instance per pass
    for name in ("himeno", "imbalance", "masterworker"):
        a = analyses[name]
        got = [f.to_dict() for f in per_rank_findings(a, in_process(a))]
        assert differences(pandas_findings(a), got) == [], name


@pytest.mark.parametrize("window", ["iterations", "time"])
def test_above_the_budget_both_engines_replay_the_same_window(
        window: str, analyses: dict[str, Analysis]) -> None:
    # the pandas engine counts and cuts its tables in memory, the Dask engine per rank
    # slice: the same window, the same window trace, the same findings
    a = analyses["synth"]
    run = in_process(a)
    loop = a.loop if window == "iterations" else None
    events = sum(c.events for c in run(lambda s: rankfindings._count(s, None)))
    budget = events // 3
    dask = [f.to_dict() for f in rankfindings.find(run, a.wait_states, a.ranks, loop,
                                                   a.critical_path, budget_events=budget)]
    pandas = [f.to_dict() for f in replaywindow.find(a.trace, a.wait_states, a.ranks, loop,
                                                     a.critical_path, budget_events=budget)]
    assert differences(pandas, dask) == []
    replayed = [f for f in pandas if f["estimated_savings_s"] > 0]
    assert replayed and all(" within the budget of " in f["message"] for f in replayed)
    whole = replaywindow.WholeTrace(a.trace, loop, budget)
    per_rank = rankfindings.BoundedReplays(run, loop, budget)
    assert whole.base.events == per_rank.base.events <= budget
    assert whole.window is not None and per_rank.window is not None
    assert (whole.window.what, whole.window.scale) == (per_rank.window.what,
                                                       per_rank.window.scale)


def test_the_analysis_replays_a_window_above_the_default_budget(
        traces: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # what `mpiscope analyze` does with a trace larger than the budget (here made small)
    a = Analysis(mpiscope.load(traces["synth"]))
    events = sum(c.events for c in in_process(a)(lambda s: rankfindings._count(s, None)))
    monkeypatch.setattr(replaywindow, "DEFAULT_BUDGET_EVENTS", events // 2)
    [freq] = [f for f in a.findings + a.minor_findings if f.kind == "frequent_collective"]
    assert f"of {a.loop.iterations} of the main loop (" in freq.message
    assert f"within the budget of {events // 2})" in freq.message
