"""The Findings tab lists what the analysis lists, then, apart and each with its reason,
what it found below the noise floor (the JSON's `minor`): a user sees why a rule that
fired is not worth acting on, and can still jump to its calls.

Traces by construction (tracegen): a 10-iteration loop where rank 1 computes 3 ms more
than rank 0 before each MPI_Allreduce (a load imbalance far above 1% of the run), and the
hostile example, whose nanosecond imbalance is below it.
"""

from __future__ import annotations

from dash import html

from mpiscope.archive import reader
from mpiscope_testing import oversubscribed
from mpiscope_testing.hostile import HOSTILE, hostile_example
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_webui.model import TraceModel
from mpiscope_webui.views import findings_list

US = 1000


def _texts(node) -> list[str]:
    """Every string in a Dash component tree, in order."""
    if isinstance(node, str):
        return [node]
    kids = getattr(node, "children", None)
    if kids is None:
        return []
    return [t for k in (kids if isinstance(kids, list) else [kids]) for t in _texts(k)]


def _lists(node, cls: str) -> list[html.Ol]:
    out = [node] if isinstance(node, html.Ol) and node.className == cls else []
    kids = getattr(node, "children", None)
    for k in (kids if isinstance(kids, list) else [kids] if kids is not None else []):
        out += _lists(k, cls)
    return out


def imbalanced(tmp_path):
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10 * US, "MPI_Init", callsite="main.c:2")
    t = 100 * US
    for _ in range(10):
        for r in (0, 1):  # rank 1 arrives 3 ms late, rank 0 waits for it
            tb.collective(r, t + 3000 * US * r, t + 3000 * US + 50 * US, "MPI_Allreduce",
                          sent=8, received=8, callsite="solver.c:42")
        t += 3500 * US
    for r in (0, 1):
        tb.call(r, t, t + 10 * US, "MPI_Finalize", callsite="main.c:40")
    return reader.load(tb.write(tmp_path / "imbalanced"))


def test_a_finding_above_the_floor_is_listed_first(tmp_path):
    panels = TraceModel.build(imbalanced(tmp_path)).analysis()
    listed = [f for f in panels.findings if not f.minor_reason]
    assert [f.kind for f in listed] == ["load_imbalance"]
    view = findings_list(panels, 0)
    (ol,) = _lists(view, "findings")
    buttons = [li.children[0] for li in ol.children]
    assert buttons[0].children == "load_imbalance: MPI_Allreduce at solver.c:42"
    assert buttons[0].className == "finding"


def test_findings_below_the_floor_are_listed_apart_with_their_reason(tmp_path):
    trace = reader.load(hostile_example(HOSTILE).write(tmp_path / "hostile"))
    panels = TraceModel.build(trace).analysis()
    assert panels.findings and all(f.minor_reason for f in panels.findings)
    view = findings_list(panels, 0)
    text = _texts(view)
    assert "No findings above the noise floor." in text
    (details,) = [c for c in view.children if isinstance(c, html.Details)]
    assert details.open  # nothing above it: the minor ones are shown unfolded
    assert any(t.startswith("Below the noise floor: 1 finding") for t in text)
    assert any("findings saving less than" in t for t in text)  # the floor's rule
    (ol,) = _lists(view, "findings minor")
    item = ol.children[0]
    assert item.children[0].className == "finding"  # clickable: zooms to its calls
    assert item.children[0].to_plotly_json()["props"]["data-idx"] == 0
    assert item.children[-1].children == "minor: " + panels.findings[0].minor_reason


def test_a_minor_finding_without_a_saving_says_so(tmp_path):
    """A barrier directly after an Allreduce, once (set-up): under `minor`, not claimed,
    and no saving replayed for it, so none is shown (not "saves ≈ 0 s")."""
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10 * US, "MPI_Init", callsite="main.c:2")
        tb.collective(r, 100 * US, 150 * US, "MPI_Allreduce", sent=8, received=8,
                      callsite="setup.c:7")
        tb.collective(r, 150 * US, 160 * US, "MPI_Barrier", callsite="setup.c:8")
        tb.call(r, 200 * US, 210 * US, "MPI_Finalize", callsite="main.c:40")
    panels = TraceModel.build(reader.load(tb.write(tmp_path / "once"))).analysis()
    [f] = [f for f in panels.findings if f.kind == "redundant_collective"]
    assert f.callsite == "setup.c:8" and f.minor_reason.startswith("only 1 instance")
    (ol,) = _lists(findings_list(panels, 0), "findings minor")
    [item] = [li for li in ol.children
              if li.children[0].children == "redundant_collective: MPI_Barrier at setup.c:8"]
    assert item.children[1].children.startswith(" no saving stated · ")
    assert "saves" not in item.children[1].children


def _marks(view) -> list[list[str]]:
    """Per listed finding, the marks beside its button."""
    (ol,) = _lists(view, "findings")
    return [[c.children for c in li.children if getattr(c, "className", "") ==
             "mark oversubscribed"] for li in ol.children]


def test_only_an_oversubscribed_runs_findings_are_marked(tmp_path):
    """4 ranks on a host with 2 CPUs (built): the imbalance is marked, with the note its
    JSON message ends with; the 2-rank trace above records no CPUs: nothing is."""
    trace = oversubscribed.imbalanced(["node0"] * 4, "2").write(tmp_path / "over")
    model = TraceModel.build(reader.load(trace))
    panels = model.analysis()
    assert _marks(findings_list(panels, 0)) == [["oversubscribed"]]
    [f] = panels.findings
    doc = model.session.to_dict()["findings"]
    assert doc[0]["oversubscribed"] and doc[0]["message"].endswith(" " + f.oversubscribed_note)
    plain = TraceModel.build(imbalanced(tmp_path)).analysis()
    assert _marks(findings_list(plain, 0)) == [[]]


def test_a_finding_of_the_whole_run_names_no_call_site(tmp_path):
    """The run-queue delay the tracer measured (built: 4 ranks on 2 CPUs): `descheduled`
    is about all ranks, not a call site; marked, with its own note."""
    trace = oversubscribed.imbalanced(["node0"] * 4, "2", run_delay_us=[(0, 300)] * 3
                                      + [(200, 0)]).write(tmp_path / "turns")
    panels = TraceModel.build(reader.load(trace)).analysis()
    (ol,) = _lists(findings_list(panels, 0), "findings")
    [item] = [li for li in ol.children
              if li.children[0].children == "descheduled: all ranks, the whole run"]
    assert item.children[1].children == "oversubscribed"
    [f] = [f for f in panels.findings if f.kind == "descheduled"]
    assert f.oversubscribed_note.endswith("the ranks took turns on them.")
