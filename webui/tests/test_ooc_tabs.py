"""The out-of-core page's tabs (ooctabs.py) without a browser: what a tab shows while the
analysis runs, when it cannot run, and the tabs out of core cannot fill."""

from __future__ import annotations

from dash import html

from mpiscope_webui import ooctabs


def text(node) -> str:
    """The text a user reads in a Dash component tree."""
    if isinstance(node, (list, tuple)):
        return " ".join(text(n) for n in node)
    if isinstance(node, html.Div | html.Span | html.B | html.Li | html.Ol | html.H4):
        return text(node.children)
    return "" if node is None else str(node)


def test_a_failed_analysis_is_one_line_naming_the_command(tmp_path):
    (tmp_path / "not-a-trace").mkdir()
    r = ooctabs.Results(tmp_path / "not-a-trace", start=False)
    r._run()  # the real command on a directory without a trace
    assert r.done and r.json is None
    shown = ooctabs.tab(r, "functions")
    assert len(shown) == 1 and "error" in shown[0].className
    line = text(shown)
    assert line.startswith("analysis failed — `mpiscope analyze --engine dask` exited ")
    assert "\n" not in line


def test_running_and_unavailable_tabs_say_so_in_one_line(tmp_path):
    r = ooctabs.Results(tmp_path, start=False)  # never finishes: still running
    assert "Analysing out of core" in text(ooctabs.tab(r, "breakdown"))
    note = ooctabs.tab(r, "calltree")  # no analysis can fill it: said at once
    assert len(note) == 1 and "not available out of core" in text(note)
