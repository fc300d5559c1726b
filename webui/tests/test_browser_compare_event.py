"""Compare mode aligned by an event, in headless Chromium at 1400x900 and 1024x768: the
user picks a call site in "align on the first call of", and each run's first call there
is marked at the same x of its panel; a zoom of either panel keeps it so. The runs are
built by construction (mpiscope_testing.comparetraces.halo_pair): the second reaches
MPI_Finalize 4 ms earlier than the first, so lining it up moves the second run's view."""

from __future__ import annotations

import pytest

from mpiscope.archive import reader
from mpiscope_testing import comparetraces
from mpiscope_testing.browser import WINDOW
from mpiscope_testing.webui_page import (
    GD,
    SIZES,
    choose,
    layout_problems,
    open_app,
    shot,
    wait_until,
)

pytestmark = pytest.mark.browser
EVENT = ("MPI_Finalize", "app.c:80")

# where panel p marks its event (the focus band, timeline.focus_shape): the time of the
# band's left edge, its page x, the plot's x extent and the window shown
MARK = """const mark = p => {
  const g = document.querySelector('#panel-' + p + ' .timeline .js-plotly-plot');
  const s = g && g._fullLayout && (g._fullLayout.shapes || []).find(s => s.name === 'partner');
  if (!s) return null;
  const xa = g._fullLayout.xaxis, r = g.getBoundingClientRect();
  return {t: s.x0, x: r.left + xa._offset + xa.d2p(s.x0), lo: r.left + xa._offset,
          hi: r.left + xa._offset + xa._length, range: xa.range};
};
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return comparetraces.halo_pair(tmp_path_factory.mktemp("event"))


@pytest.fixture(scope="module")
def url(serve, runs) -> str:
    return serve(*runs)


def first_start(trace_dir) -> float:
    """The run's first call at EVENT's call site, as the trace has it (s)."""
    c = reader.load(trace_dir).calls
    at = (c["function"] == EVENT[0]) & (c["callsite"].astype(str) == EVENT[1])
    return float(c.loc[at, "start"].min()) / 1e9


def marks(browser, want: list[float], what: str) -> list[dict]:
    """Both panels' event marks once each is drawn at its run's event time and the other
    panel has followed (the band's left edge in the plot)."""
    return wait_until(browser, MARK + "const m = [mark(0), mark(1)];"
                      f" const w = {want!r}; return m.every((x, i) => x && "
                      "Math.abs(x.t - w[i]) < 1e-9 && x.x >= x.lo && x.x <= x.hi) && "
                      "Math.abs(m[0].x - m[1].x) < 1 && m", what=what)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_aligned_by_an_event(browser, url, runs, size):
    want = [first_start(d) for d in runs]
    assert want[1] < want[0] - 3e-3  # the fix reaches it earlier: a shift to make
    try:
        browser.set_window_size(*size)
        open_app(browser, url, panels=2)
        choose(browser, "#align-event", f"{EVENT[0]} at {EVENT[1]}")
        got = marks(browser, want, f"both runs' first {EVENT[0]} at one x")
        # the first run's whole-run window kept; the second's moved by the event's shift
        assert got[1]["range"] == pytest.approx(
            [x + want[1] - want[0] for x in got[0]["range"]], abs=1e-9)
        for p in (0, 1):
            assert layout_problems(browser, p) == [], (size, p)
        assert layout_problems(browser, 0, root=".header") == [], size
        shot(browser, f"compare-event-{size[0]}")
        browser.execute_script("document.getElementById('panel-1').scrollIntoView()")
        shot(browser, f"compare-event-b-{size[0]}")  # the second run's mark, to look at
        browser.execute_script("window.scrollTo(0, 0)")
        # a zoom of the second run around its event: the first follows, still lined up
        a, b = want[1] - 2e-4, want[1] + 6e-4
        browser.execute_script(f"Plotly.relayout({GD.format(p=1)}, {{'xaxis.range[0]': "
                               f"{a!r}, 'xaxis.range[1]': {b!r}}})")
        wait_until(browser, f"const r = {GD.format(p=0)}._fullLayout.xaxis.range; "
                   f"return Math.abs(r[0] - {a + want[0] - want[1]!r}) < 1e-9",
                   what="the first run follows the second's zoom")
        got = marks(browser, want, "the events lined up after the zoom")
        assert got[0]["range"] == pytest.approx([a + want[0] - want[1],
                                                 b + want[0] - want[1]], abs=1e-9)
        shot(browser, f"compare-event-zoomed-{size[0]}")
    finally:
        browser.set_window_size(*WINDOW)
