"""In headless Chromium at 1400×900 and 1024×768, under the run's header: every warning of
the analysis (the session's list, word for word) in the first screen, readable and not cut
off, and a line whose run span, per-rank breakdown interval and critical path are those of
`mpiscope analyze --json` for the same trace, as the number formatter writes them; in the
Findings tab, a finding that descheduling may drive carries the `oversubscribed` mark and
its note (issues 31 and 32).

The trace is built (mpiscope_testing.oversubscribed): 4 ranks on a host with 2 CPUs, each
leaving MPI_Init at its own time, rank 3 computing longer before each Allreduce.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from mpiscope import numbers
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.oversubscribed import imbalanced
from mpiscope_testing.webui_page import SIZES, layout_problems, open_app, shot, wait_until
from mpiscope_webui.views import SECONDS_DIGITS

pytestmark = pytest.mark.browser

INIT_US = (3000, 3400, 2600, 3800)  # each rank's measured interval differs


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    return imbalanced(["node0"] * 4, "2", INIT_US).write(
        tmp_path_factory.mktemp("oversubscribed") / "trace")


@pytest.fixture(scope="module")
def analyzed(trace: Path, tmp_path_factory) -> dict:
    """What `mpiscope analyze --json` says of the trace."""
    out = tmp_path_factory.mktemp("json") / "a.json"
    subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace), "--json",
                    str(out)], check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def app_url(serve, trace: Path) -> str:
    return serve(trace)


def _s(x: float) -> str:
    return numbers.seconds(x, SECONDS_DIGITS)


NOTES = "#panel-0 .run-notes"
SEEN = """
const box = e => { const r = e.getBoundingClientRect();
                   return [r.left, r.top, r.right, r.bottom]; };
return Array.from(document.querySelectorAll(arguments[0])).map(e => ({
    text: e.innerText, box: box(e), px: parseFloat(getComputedStyle(e).fontSize)}));"""


@pytest.mark.parametrize("size", SIZES)
def test_warnings_and_totals_under_the_header(browser, app_url, trace, analyzed, size):
    browser.set_window_size(*size)
    open_app(browser, app_url)
    wait_until(browser, f"return document.querySelector('{NOTES} .totals')",
               what="the run's notes")
    warnings = Analysis(reader.load(trace)).warnings
    assert warnings == analyzed["warnings"] and warnings[0].startswith("oversubscribed: 4 "
                                                                       "ranks on node0")
    seen = browser.execute_script(SEEN, f"{NOTES} .run-warning")
    assert [" ".join(w["text"].split()) for w in seen] == [f"warning: {w}" for w in warnings]
    height = browser.execute_script("return window.innerHeight")
    for w in seen:  # in the first screen, at a readable size
        assert 0 <= w["box"][1] and w["box"][3] <= height and w["px"] >= 12, w
    assert layout_problems(browser) == []  # nothing cut off at the right, no scroll bar
    shot(browser, f"warnings-{size[0]}")

    def number(cls: str) -> str:
        return browser.find_element(By.CSS_SELECTOR, f"{NOTES} .totals .{cls}").text

    cp = analyzed["critical_path"]
    total = [r["total_s"] for r in analyzed["ranks"]]
    assert number("total-run") == _s(analyzed["meta"]["duration_s"])
    assert number("total-rank-min") == _s(min(total))
    assert number("total-rank-max") == _s(max(total))
    assert number("total-path") == _s(cp["length_s"])
    assert number("total-path-from") == _s(cp["begin_s"])
    assert number("total-path-to") == _s(cp["end_s"])
    line = browser.find_element(By.CSS_SELECTOR, f"{NOTES} .totals").text
    assert "from MPI_Init's end to MPI_Finalize's start (both outside it)" in line
    # the header's span is the line's run span
    head = browser.find_element(By.CSS_SELECTOR, "#panel-0 .panel-head").text
    assert _s(analyzed["meta"]["duration_s"]) in head


@pytest.mark.parametrize("size", SIZES)
def test_a_finding_descheduling_may_drive_is_marked(browser, app_url, analyzed, size):
    browser.set_window_size(*size)
    open_app(browser, app_url)
    [want] = [f for f in analyzed["findings"] if f["kind"] == "load_imbalance"]
    assert want["oversubscribed"]
    item = browser.find_element(By.XPATH, "//button[contains(@class,'finding')][starts-with("
                                "normalize-space(.),'load_imbalance: MPI_Allreduce')]/..")
    mark = item.find_element(By.CSS_SELECTOR, ".mark.oversubscribed")
    note = item.find_element(By.CSS_SELECTOR, ".oversubscribed-note")
    assert mark.is_displayed() and mark.text == "oversubscribed"
    # the note is what the JSON's message adds
    assert note.is_displayed() and want["message"].endswith(" " + note.text)
    assert note.text.startswith("Measured oversubscribed (4 ranks on 2 CPUs)")
    browser.execute_script("arguments[0].scrollIntoView()", item)
    shot(browser, f"finding-marked-{size[0]}")
