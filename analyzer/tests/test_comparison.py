"""The comparison model (mpiscope.analysis.comparison) on saved `--json` outputs: shares,
function deltas and their order, which findings the fix resolved, predicted against
measured gain, the speed-up and what it is the ratio of, ranks cut short.

Two sources of saved JSON: `mpiscope analyze --json` on small synthetic traces (the
contract as the analyzer writes it), and documents written by hand for the edge cases.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpiscope.analysis.comparison import RunSummary, build
from mpiscope_testing.scenarios import analyze_json
from mpiscope_testing.tracegen import TraceBuilder


def saved(path: Path, label: str | None = None, figures: dict | None = None) -> RunSummary:
    """A run as a comparison sees it when built from a saved `--json` file."""
    return RunSummary(label or path.stem, path.parent, json.loads(path.read_text()), figures)


def program(fixed: bool, cut_short: bool = False) -> TraceBuilder:
    """Two ranks around one Allreduce (app.c:60), times in ns.

    Before the fix: rank 1 reaches the Allreduce 50 ns late (load imbalance) and a Barrier
    (app.c:70) follows it with no call in between (once: never claimed redundant for one
    instance); MPI_Finalize at 600.
    Fixed: both arrive at 300, no Barrier, MPI_Finalize at 400: 200 ns shorter.
    `cut_short`: rank 1 never reaches MPI_Finalize (its trace is truncated)."""
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10, "MPI_Init", callsite="app.c:10")
    arrive = [(300, 351), (300, 351)] if fixed else [(300, 400), (350, 401)]
    for r, (start, end) in enumerate(arrive):
        tb.collective(r, start, end, "MPI_Allreduce", sent=8, received=8, in_hash=r + 1,
                      out_hash=3, callsite="app.c:60")
    if not fixed:
        for r, start in enumerate([450, 460]):
            tb.collective(r, start, 500, "MPI_Barrier", callsite="app.c:70")
    finalize = 400 if fixed else 600
    for r in (0,) if cut_short else (0, 1):
        tb.call(r, finalize, finalize + 100, "MPI_Finalize", callsite="app.c:80")
    return tb


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """{"before", "after", "cut"}: saved JSON of `mpiscope analyze --json` on each trace."""
    tmp = tmp_path_factory.mktemp("compare")
    out = {}
    for name, builder in (("before", program(fixed=False)), ("after", program(fixed=True)),
                          ("cut", program(fixed=True, cut_short=True))):
        _, doc = analyze_json(builder.write(tmp / name), tmp)
        out[name] = tmp / f"{name}.json"
        out[name].write_text(json.dumps(doc))
    return out


def test_shares_and_wall_time_of_a_saved_run(runs):
    before, after = saved(runs["before"]), saved(runs["after"])
    # per rank: end of MPI_Init (10) .. start of MPI_Finalize
    assert before.wall_s == pytest.approx(590e-9) and after.wall_s == pytest.approx(390e-9)
    assert before.rank_time_s == pytest.approx(2 * 590e-9)
    parts = ("compute", "communication", "synchronization")
    assert sum(before.share(p) for p in parts) == pytest.approx(1.0)
    # waiting in the Allreduce (rank 0: 50 ns) and at the Barrier (both: 50 + 40 ns)
    assert before.share("synchronization") == pytest.approx((100e-9 + 40e-9) / 1180e-9)
    assert after.share("synchronization") == 0.0
    assert after.share("communication") == pytest.approx(2 * 51e-9 / 780e-9)
    assert before.truncated_ranks == [] and after.truncated_ranks == []


def test_functions_ordered_by_their_larger_time_without_init_and_finalize(runs):
    cmp = build(saved(runs["before"]), saved(runs["after"]))
    assert [f.name for f in cmp.functions] == ["MPI_Allreduce", "MPI_Barrier"]
    allreduce, barrier = cmp.functions
    assert (allreduce.calls_a, allreduce.calls_b) == (2, 2)
    assert allreduce.time_a == pytest.approx(151e-9) and allreduce.time_b == pytest.approx(102e-9)
    assert allreduce.delta_s == pytest.approx(-49e-9)
    # shares of each run's own rank time
    assert allreduce.share_a == pytest.approx(151e-9 / 1180e-9)
    assert allreduce.share_b == pytest.approx(102e-9 / 780e-9)
    # gone after the fix: zero calls and time on that side
    assert (barrier.calls_b, barrier.time_b, barrier.share_b) == (0, 0.0, 0.0)
    assert barrier.delta_s == pytest.approx(-90e-9)


def test_resolved_findings_predict_a_gain_set_against_the_measured_one(runs):
    cmp = build(saved(runs["before"]), saved(runs["after"]))
    assert [(o.finding["kind"], o.finding["callsite"], o.resolved, o.time_b_s)
            for o in cmp.outcomes] == [("load_imbalance", "app.c:60", True, 0.0)]
    # the mean wait per rank in the Allreduce (25 ns)
    assert cmp.predicted_gain_s == pytest.approx(25e-9)
    assert cmp.measured_gain_s == pytest.approx(200e-9)
    # no figure of merit saved: the speed-up is the wall-time ratio, and says so
    assert cmp.speedup_basis == "wall time"
    assert cmp.speedup == pytest.approx(590 / 390)


def test_a_run_cut_short_names_its_truncated_ranks(runs):
    cut = saved(runs["cut"])
    assert cut.truncated_ranks == [1]
    cmp = build(saved(runs["before"]), cut)
    assert cmp.b.truncated_ranks == [1] and cmp.a.truncated_ranks == []
    # rank 1 measured up to its last event (the Allreduce's end): rank 0 is the slowest
    assert cut.wall_s == pytest.approx(390e-9)
    assert [f.name for f in cmp.functions] == ["MPI_Allreduce", "MPI_Barrier"]


def test_comparing_the_same_saved_run_with_itself_changes_nothing(runs):
    cmp = build(saved(runs["before"], "A"), saved(runs["before"], "B"))
    assert cmp.measured_gain_s == 0.0 and cmp.speedup == 1.0
    assert all(f.delta_s == 0.0 for f in cmp.functions)
    assert not any(o.resolved for o in cmp.outcomes) and cmp.predicted_gain_s == 0.0
    assert [o.time_b_s for o in cmp.outcomes] == [o.finding["time_s"] for o in cmp.outcomes]


# ---------------------------------------------------------------- hand-written documents


def contract(ranks: list[tuple[float, float, float, float]],
             functions: list[tuple[str, int, float]] = (), findings: list[dict] = (),
             truncated: list[int] | None = None) -> dict:
    """The parts of the `--json` contract a comparison reads; a rank is
    (total, compute, communication, synchronization) seconds."""
    doc = {"ranks": [{"rank": i, "total_s": t, "compute_s": c, "communication_s": m,
                      "synchronization_s": s} for i, (t, c, m, s) in enumerate(ranks)],
           "functions": [{"name": n, "calls": k, "time_s": t} for n, k, t in functions],
           "findings": list(findings)}
    if truncated is not None:
        doc["meta"] = {"truncated_ranks": truncated}
    return doc


def finding(kind: str, callsite: str, time_s: float, savings_s: float,
            function: str = "MPI_Allreduce") -> dict:
    return {"kind": kind, "function": function, "callsite": callsite, "time_s": time_s,
            "estimated_savings_s": savings_s}


@pytest.fixture
def save(tmp_path):
    def write(name: str, doc: dict, figures: dict | None = None) -> RunSummary:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        return saved(path, figures=figures)
    return write


def test_a_finding_still_costing_a_fifth_or_more_is_not_resolved(save):
    a = save("a", contract([(10.0, 6.0, 1.0, 3.0)], findings=[
        finding("load_imbalance", "x.c:1", 2.0, 1.0),
        finding("late_sender", "x.c:2", 2.0, 0.5, "MPI_Recv"),
        finding("frequent_collective", "x.c:3", 1.0, 0.25),
        finding("load_imbalance", "x.c:4", 1.0, 0.125)]))
    b = save("b", contract([(8.0, 6.0, 1.0, 1.0)], findings=[
        finding("load_imbalance", "x.c:1", 0.39, 0.1),          # < 20 %: resolved
        finding("late_sender", "x.c:2", 0.4, 0.1, "MPI_Recv"),  # 20 %: still there
        finding("frequent_collective", "x.c:9", 1.0, 0.25)]))   # same kind, other line
    cmp = build(a, b)
    assert [(o.resolved, o.time_b_s) for o in cmp.outcomes] == [
        (True, 0.39), (False, 0.4), (True, 0.0), (True, 0.0)]
    assert cmp.predicted_gain_s == pytest.approx(1.0 + 0.25 + 0.125)
    assert cmp.measured_gain_s == pytest.approx(2.0)


def test_the_speedup_is_the_mflops_ratio_when_both_runs_saved_one(save):
    a = save("a", contract([(10.0, 10.0, 0.0, 0.0)]), figures={"mflops": 200.0})
    b = save("b", contract([(8.0, 8.0, 0.0, 0.0)]), figures={"mflops": 300.0})
    cmp = build(a, b)
    assert (cmp.speedup_basis, cmp.speedup) == ("MFLOPS", 1.5)
    assert cmp.figure("mflops") == (200.0, 300.0) and cmp.figure("elapsed_s") == (None, None)
    # one side without it: back to wall time (10 s / 8 s)
    cmp = build(a, save("c", contract([(8.0, 8.0, 0.0, 0.0)])))
    assert (cmp.speedup_basis, cmp.speedup) == ("wall time", 1.25)


def test_empty_runs_have_no_speedup_and_zero_shares(save):
    empty = save("empty", contract([]))
    assert empty.wall_s == 0.0 and empty.share("compute") == 0.0
    assert empty.truncated_ranks == []  # a document without "meta"
    cmp = build(save("a", contract([(1.0, 1.0, 0.0, 0.0)])), empty)
    assert cmp.speedup is None and cmp.speedup_basis == "wall time"


def test_init_and_finalize_are_outside_the_measured_interval(save):
    fns = [("MPI_Init_thread", 1, 5.0), ("MPI_Init", 1, 4.0), ("MPI_Finalize", 1, 3.0),
           ("MPI_Send", 4, 1.0), ("MPI_Recv", 4, 2.0)]
    a = save("a", contract([(10.0, 7.0, 3.0, 0.0)], fns))
    b = save("b", contract([(10.0, 7.0, 3.0, 0.0)], [("MPI_Wait", 2, 2.5), *fns[:3]]))
    cmp = build(a, b)
    # each function at the larger of its two times: Wait 2.5 (b), Recv 2, Send 1
    assert [(f.name, f.calls_a, f.calls_b) for f in cmp.functions] == [
        ("MPI_Wait", 0, 2), ("MPI_Recv", 4, 0), ("MPI_Send", 4, 0)]
    assert cmp.functions[1].share_a == pytest.approx(0.2)
