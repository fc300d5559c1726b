"""A run with ranks cut short, as the web UI words it above the run's timeline (views.
run_notes): the sentence of the analysis JSON's warning and of the stderr line, whether
the page has the analysis session (in memory) or only its JSON (out of core)."""

from __future__ import annotations

from pathlib import Path

from dash import html

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope.render.cutshort import cut_short_warning
from mpiscope_testing.tracegen import TraceBuilder
from mpiscope_webui.analysis import RunNotes
from mpiscope_webui.views import run_notes


def text(node) -> str:
    """The text a user reads in a Dash component tree."""
    if isinstance(node, (list, tuple)):
        return "".join(text(n) for n in node)
    if isinstance(node, html.Div | html.Span | html.B):
        return text(node.children)
    return "" if node is None else str(node)


def cut_trace(out: Path) -> Path:
    """Two ranks; rank 1 never reaches MPI_Finalize (its trace ends at the Allreduce)."""
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10, "MPI_Init", callsite="app.c:10")
        tb.collective(r, 300, 351, "MPI_Allreduce", sent=8, received=8, in_hash=r + 1,
                      out_hash=3, callsite="app.c:60")
    tb.call(0, 400, 500, "MPI_Finalize", callsite="app.c:80")
    return tb.write(out)


def test_the_page_says_the_json_s_sentence_about_ranks_cut_short(tmp_path):
    trace = reader.load(cut_trace(tmp_path / "cut"))
    assert trace.meta.truncated_ranks == [1]
    session = Analysis(trace)
    [said] = [w for w in session.to_dict()["warnings"] if "cut short" in w]
    assert cut_short_warning("cut", [1]) == f"mpiscope: warning: cut: {said}"
    for notes in (RunNotes.of(session), RunNotes.of_json(session.to_dict())):
        shown = [text(d) for d in run_notes(notes) if d.className == "run-warning"]
        assert f"warning: {said}" in shown
