"""The Himeno study's scaling page as a reader sees it in Chromium: the reports' style, a
tick per rank count run (never 1.5 ranks), and MFLOPS, speed-up and efficiency from every
run, not only the kept one (a lucky 1-rank run must not pass for the trend)."""

from __future__ import annotations

import statistics

import pandas as pd
import pytest

from mpiscope.analysis import scaling
from mpiscope.render import palette, study

RANKS = (1, 2, 4)
# MFLOPS of three runs per configuration; the 1-rank unpatched best (kept) run is lucky
RUNS = {("unpatched", 1): [900.0, 600.0, 610.0], ("unpatched", 2): [1150.0, 1100.0, 1120.0],
        ("unpatched", 4): [2000.0, 1900.0, 1950.0], ("patched", 1): [640.0, 650.0, 630.0],
        ("patched", 2): [1250.0, 1240.0, 1260.0], ("patched", 4): [2300.0, 2250.0, 2280.0]}


def summary() -> list[dict]:
    return [{"ranks": n, "variant": v, "mflops_all_runs": m,
             "kept_run": m.index(max(m)) + 1, "mflops": max(m)} for (v, n), m in RUNS.items()]


def breakdown(n: int) -> pd.DataFrame:
    return pd.DataFrame({"rank": range(n), "total_s": 1.0 / n, "compute_s": 0.8 / n,
                         "communication_s": 0.1 / n, "synchronization_s": 0.1 / n,
                         "io_s": 0.0})


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "scaling.html"
    rows = {v: [scaling.row_from_breakdown(f"{v}-{n}", breakdown(n)) for n in RANKS]
            for v in ("unpatched", "patched")}
    study._scaling_page(out, rows, summary())
    return out


def test_every_run_is_plotted_and_the_trend_is_the_median():
    mflops, both = study.scaling_figures(summary())
    every = {t.name: t for t in mflops.data}
    assert len(every["unpatched: every run"].y) == 9  # 3 runs at each of 3 rank counts
    assert list(every["unpatched: median"].y) == [
        statistics.median(RUNS[("unpatched", n)]) for n in RANKS]
    # speed-up against the unpatched 1-rank median (610), not its lucky 900
    speed = next(t for t in both.data if t.name == "patched: median" and t.xaxis == "x")
    assert list(speed.y) == pytest.approx(
        [statistics.median(RUNS[("patched", n)]) / 610.0 for n in RANKS])
    eff = next(t for t in both.data if t.name == "patched: median" and t.xaxis == "x2")
    assert list(eff.y) == pytest.approx([100 * s / n for s, n in zip(speed.y, RANKS,
                                                                      strict=True)])


def test_variants_take_neutral_colours_no_function_takes():
    # unpatched/patched once were MPI_Send's blue and MPI_Allreduce's red
    mflops, both = study.scaling_figures(summary())
    median = {t.name: t.line.color for t in mflops.data if t.name.endswith(": median")}
    assert median == {"unpatched: median": palette.NEUTRALS[0],
                      "patched: median": palette.NEUTRALS[1]}
    taken = {*palette.PALETTE, *palette.PART_COLOURS.values()}
    for fig in (mflops, both):
        for t in fig.data:
            assert t.marker.color not in taken and t.line.color not in taken, t.name


# a desktop window and the smallest laptop's (issue 32): the same page at both
WINDOWS = [(1400, 900), (1024, 768)]

# what of the page lies beyond the window's right edge: the document's overflow, and each
# chart's drawing (its svg) where it starts left of the window or ends right of it
OVERFLOW_JS = """
const de = document.documentElement;
const charts = Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => {
  const r = g.querySelector('svg.main-svg').getBoundingClientRect();
  return [r.left, r.right];});
return {scroll: de.scrollWidth, client: de.clientWidth,
        wide: charts.filter(([l, r]) => l < 0 || r > de.clientWidth)};"""


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_scaling_page_in_a_browser(page, browser, window):
    browser.set_window_size(*window)
    browser.get(page.as_uri())
    ticks = browser.execute_script(
        "return Array.from(document.querySelectorAll('.js-plotly-plot')).map(g => "
        "Array.from(g.querySelectorAll('.xtick text, .x2tick text')).map(e => e.textContent))")
    # two breakdowns (one bar per run), MFLOPS, speed-up and efficiency
    assert ticks[:2] == [["1 rank", "2 ranks", "4 ranks"]] * 2
    assert ticks[2] == ["1", "2", "4"] and ticks[3] == ["1", "2", "4"] * 2
    titles = browser.find_element("tag name", "body").text
    assert "Speed-up" in titles and "Parallel efficiency" in titles
    font = browser.execute_script("return getComputedStyle(document.body).fontFamily")
    assert "system-ui" in font  # the reports' style, not the browser's default
    # nothing to scroll sideways for: neither the page nor a chart is wider than the window
    fit = browser.execute_script(OVERFLOW_JS)
    assert fit["scroll"] <= fit["client"], fit
    assert len(ticks) == 4 and fit["wide"] == [], fit
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
