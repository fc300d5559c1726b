"""Names in a trace are data: Rich markup, terminal escapes, HTML and Markdown in host,
function, file and program names reach neither the terminal nor a report as anything but
text (testing/mpiscope_testing/hostile.py), and the JSON keeps them exactly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mpiscope_testing.hostile import CONTROLS, HOSTILE, PLAIN, hostile_example


def mpiscope(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH",
                                                         "MPISCOPE_BUILD_DIR")}
    return subprocess.run([sys.executable, "-m", "mpiscope", *map(str, args)],
                          capture_output=True, text=True, timeout=300,
                          env={**base, "COLUMNS": "200", **(env or {})})


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("names")
    return {"hostile": hostile_example(HOSTILE).write(base / "hostile"),
            "plain": hostile_example(PLAIN).write(base / "plain")}


def test_analyze_shows_names_as_text(traces, tmp_path) -> None:
    out = tmp_path / "a.json"
    p = mpiscope("analyze", traces["hostile"], "--json", out, "--no-cache")
    assert p.returncode == 0, p.stderr
    assert not any(c in p.stdout + p.stderr for c in CONTROLS)
    # the names as they are, control characters shown as \xNN, markup not interpreted
    assert "node[/i]<a href=" in p.stdout
    assert "host\\x1b]0;pwn\\x07\\x9b31m\\x1b[31mred\\x1b[0m" in p.stdout
    assert "MPI_<script>alert(1)</script>\\x1b]0;pwn\\x07" in p.stdout
    doc = json.loads(out.read_text())
    assert {r["host"] for r in doc["ranks"]} == set(HOSTILE.hosts)
    assert HOSTILE.mpi_function in {f["name"] for f in doc["functions"]}


def test_a_colour_terminal_gets_only_richs_own_escapes(traces) -> None:
    p = mpiscope("analyze", traces["hostile"], "--no-cache",
                 env={"FORCE_COLOR": "1", "TERM": "xterm-256color"})
    assert p.returncode == 0, p.stderr
    text = p.stdout + p.stderr
    # Rich styles and moves the cursor (CSI); a name's OSC (window title), BEL or C1 never
    assert re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).count("\x1b") == 0
    assert "\x07" not in text and "\x9b" not in text
    assert "host\\x1b]0;pwn\\x07" in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


class Tags(HTMLParser):
    """Start tags (with their attributes) and the text outside scripts and styles."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags[tag] += 1
        self.attrs += attrs
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)


def test_compare_reports_escape_names(traces, tmp_path) -> None:
    reports = {}
    for kind, trace in traces.items():
        html, md = tmp_path / f"{kind}.html", tmp_path / f"{kind}.md"
        p = mpiscope("compare", trace, trace, "--html", html, "--md", md)
        assert p.returncode == 0, p.stderr
        assert not any(c in p.stdout + p.stderr for c in CONTROLS)
        reports[kind] = (html.read_text(), md.read_text())
    hostile_html, hostile_md = reports["hostile"]
    # HTML: the same elements as the plain twin's report (no tag or handler came from a
    # name), and every name in its text
    tags = {}
    for kind, (html, _md) in reports.items():
        parser = Tags()
        parser.feed(html)
        tags[kind] = parser
    assert tags["hostile"].tags == tags["plain"].tags
    assert not any(name.startswith("on") for name, _v in tags["hostile"].attrs)
    text = "".join(tags["hostile"].text)
    assert all(host in text for host in HOSTILE.hosts) and HOSTILE.mpi_function in text
    # Plotly renders HTML in trace names: they go in escaped
    assert "&lt;script&gt;alert(1)" in hostile_html.split("Plotly.newPlot", 1)[1]
    # Markdown: no raw HTML outside code spans (literal there), names escaped, the tables'
    # columns those of the plain twin's
    outside_code = re.sub(r"(`+).*?\1", "", hostile_md)
    for raw in ("<script", "<img", "<a href", "<b>"):
        assert raw not in outside_code
    assert "h&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in \
        hostile_md
    assert not any(c in hostile_md for c in CONTROLS)

    def columns(md: str) -> list[int]:
        return [len(re.findall(r"(?<!\\)\|", line)) for line in md.splitlines()
                if line.startswith("|")]
    assert columns(hostile_md) == columns(reports["plain"][1])
