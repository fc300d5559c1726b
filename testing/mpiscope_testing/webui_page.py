"""Drive the web UI's page in a browser as a user does: open it and wait until it has
settled, zoom the timeline (a Plotly relayout) and wait for the server's redraw, read a
panel's status line.

    open_app(browser, url)                    # timeline drawn, analyses listed
    t0, t1 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
    zoom_to(browser, t0, (t0 + t1) / 2)
    assert "states drawn" in status(browser)
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from mpiscope_testing.webui_server import ARTIFACTS

GD = "document.querySelector('#panel-{p} .timeline .js-plotly-plot')"  # panel p's timeline


def wait_until(driver, script: str, timeout: float = 90, what: str = ""):
    """Poll a JS expression until it is truthy; returns its value. The timeout only
    bounds a failure: with four busy loops beside a test run the partner jump's redraw
    once took longer than 30 s to reach the page."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = driver.execute_script(script)
        except Exception as err:  # noqa: BLE001 - the page may still be loading
            last = err
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what or script}: last={last!r}")


def wait_settled(driver, script: str, quiet_s: float = 0.3, timeout: float = 60,
                 what: str = "page settled") -> None:
    """Poll a JS expression until it has been truthy at every poll for `quiet_s`: a page
    settled (nothing loading) stays so, rather than between two callbacks of a chain,
    which a busy machine spaces out."""
    deadline = time.monotonic() + timeout
    since = None
    while True:
        now = time.monotonic()
        try:
            ok = bool(driver.execute_script(script))
        except Exception:  # noqa: BLE001 - the page may still be loading
            ok = False
        if not ok:
            since = None
        elif since is None:
            since = now
        elif now - since >= quiet_s:
            return
        if now > deadline:
            raise AssertionError(f"timed out waiting for {what} ({quiet_s} s without change)")
        time.sleep(0.05)


def status(driver, p: int = 0) -> str:
    return driver.find_element(By.CSS_SELECTOR, f"#panel-{p} .status").text


def zoom_to(driver, a: float, b: float, p: int = 0) -> None:
    """Zoom as box/wheel zoom does (a Plotly relayout) and wait for the server's redraw."""
    driver.execute_script(f"Plotly.relayout({GD.format(p=p)}, "
                          f"{{'xaxis.range[0]': {float(a)!r}, 'xaxis.range[1]': {float(b)!r}}})")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        first = status(driver, p).split(" ")[0]
        if first and abs(float(first) - a) < 2e-6:
            return
        time.sleep(0.2)
    raise AssertionError(f"window {a}..{b} not drawn: {status(driver, p)}")


def open_app(driver, url: str, panels: int = 1) -> None:
    driver.get(url)
    for p in range(panels):
        wait_until(driver, f"const g={GD.format(p=p)}; return g && g._fullData && "
                   "g._fullData.length > 5", what=f"timeline {p} drawn")
    # as a user would: interact once the page has settled (analyses listed, nothing loading)
    wait_settled(driver, "return document.querySelector('button.finding, .no-findings') && document"
                 ".querySelectorAll('[data-dash-is-loading=\"true\"]').length === 0")


def open_tab(driver, label: str) -> None:
    driver.find_element(By.XPATH, f"//div[contains(@class,'tab')][normalize-space(.)='{label}']"
                        ).click()


def shot(driver, name: str) -> None:
    """A screenshot among the test artifacts, to look at after a run."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def choose(driver, dropdown_css: str, label: str) -> None:
    """Pick an option of a Dash dropdown as a user does: open it, type, click the option."""
    driver.find_element(By.CSS_SELECTOR, dropdown_css).click()
    box = wait_until(driver, "return document.querySelector('input.dash-dropdown-search')",
                     what="the dropdown's search box")
    box.send_keys(label)
    option = wait_until(driver, "return Array.from(document.querySelectorAll("
                        "'.dash-dropdown-option')).find(o => o.textContent.trim() === "
                        f"{label!r})", what=f"option {label}")
    option.click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)


SIZES = [(1400, 900), (1024, 768)]  # the sizes each feature is looked at (issue 32)


def resize(driver, size: tuple[int, int], panels: int = 1) -> None:
    """The window at `size` (the same page), once each timeline is drawn again for its
    new width (the page tells the server the width, assets/timeline.js) and the page has
    settled."""
    driver.set_window_size(*size)
    for p in range(panels):
        wait_until(driver, f"const g={GD.format(p=p)}; return g && g._fullLayout && "
                   "Math.abs(g._fullLayout.width - window.mpiscopePlotWidth()) <= 1",
                   what=f"timeline {p} drawn for {size[0]}x{size[1]}")
    wait_settled(driver, "return document.querySelectorAll('[data-dash-is-loading=\"true\"]')"
                 ".length === 0", what=f"the page settled at {size[0]}x{size[1]}")


def layout_problems(driver, p: int = 0, root: str | None = None) -> list[str]:
    """What a user would see wrong with panel p's timeline at the window's current size
    (empty: nothing): the legend under the mode bar or the critical-path checkbox, a
    Plotly notice over the checkbox, lanes squeezed by the legend (Plotly pushed the plot
    down: its top margin grew past the one asked for) or thinner than 8 px, and anything
    in `root` (CSS selector, default the panel) cut off at the window's right edge or
    needing a horizontal scroll bar."""
    root = root or f"#panel-{p}"
    got = driver.execute_script(f"""
        const g = {GD.format(p=p)};
        const box = e => {{ if (!e) return null; const r = e.getBoundingClientRect();
            return r.width > 0 && r.height > 0 ? [r.left, r.top, r.right, r.bottom] : null; }};
        const y = g._fullLayout.yaxis;
        // inside a plot's SVG, shapes reach past its clip path (drawn clipped): the
        // boxes of the HTML elements and of the SVG roots are what the user sees
        const cut = Array.from(document.querySelectorAll({root!r} + ' *')).filter(e => {{
            if (e instanceof SVGElement && e.tagName.toLowerCase() !== 'svg') return false;
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.right > window.innerWidth + 1; }})
            .slice(0, 3).map(e => e.tagName + '.' + (e.getAttribute('class') || ''));
        return {{legend: box(g.querySelector('.legend')), modebar: box(g.querySelector('.modebar')),
                 cp: box(document.querySelector('#panel-{p} .cp-toggle')),
                 tip: box(document.querySelector('.plotly-notifier .notifier-note')),
                 lane: Math.abs(y.l2p(1) - y.l2p(0)), asked: g._fullLayout.margin.t,
                 top: g._fullLayout._size.t, cut: cut,
                 scroll: document.documentElement.scrollWidth > window.innerWidth}};""")

    def meet(a, b) -> bool:
        return bool(a and b and a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])

    out = []
    if meet(got["legend"], got["modebar"]):
        out.append(f"legend {got['legend']} under the mode bar {got['modebar']}")
    if meet(got["legend"], got["cp"]):
        out.append(f"legend {got['legend']} over the critical-path checkbox {got['cp']}")
    if meet(got["tip"], got["cp"]):
        out.append(f"a Plotly notice {got['tip']} over the critical-path checkbox")
    if got["top"] > got["asked"] + 0.5:
        out.append(f"the legend pushed the lanes down ({got['top']} px, not {got['asked']})")
    if got["lane"] < 8:
        out.append(f"lanes {got['lane']:.1f} px high")
    if got["cut"]:
        out.append(f"cut off at the right edge: {got['cut']}")
    if got["scroll"]:
        out.append("a horizontal scroll bar")
    return out


# every DataTable shown, as the user reads it: its DOM id, each column's header (soft
# hyphens dropped) and cells (text as shown), and whether it scrolls sideways
TABLES = """
return Array.from(document.querySelectorAll(%s)).filter(t => t.offsetParent).map(t => {
  const heads = {}, cells = {};
  t.querySelectorAll('th[data-dash-column]').forEach(h =>
      heads[h.dataset.dashColumn] = h.textContent.replace(/\\u00ad/g, '').trim());
  t.querySelectorAll('td[data-dash-column]').forEach(c =>
      (cells[c.dataset.dashColumn] = cells[c.dataset.dashColumn] || []).push(
          c.textContent.trim()));
  const scrolls = Array.from(t.querySelectorAll('*')).some(e => {
      const o = getComputedStyle(e).overflowX;
      return (o === 'auto' || o === 'scroll') && e.scrollWidth > e.clientWidth + 1; });
  return {id: t.id || (t.closest('[id]') || {}).id || '', headers: heads, cells: cells,
          scrolls: scrolls};
});"""


def tables_shown(driver, root: str = "body") -> list[dict]:
    """The DataTables under `root` (CSS selector) the user sees: [{id, headers: {column id:
    header}, cells: {column id: [texts]}, scrolls: a horizontal scroll bar}]."""
    return driver.execute_script(TABLES % repr(f"{root} .dash-table-container"))


SI = {"p": 1e-12, "n": 1e-9, "µ": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9,
      "T": 1e12}


def unit_of(header: str) -> str | None:
    """The unit a column's header names: 'time (ms)' -> 'ms' (None: none)."""
    m = re.search(r"\(([^()]+)\)\s*$", header)
    return m.group(1) if m else None


def cell_value(text: str, header: str, base: str = "s") -> float:
    """A cell as a number in `base` units, by the unit its header names ('time (ms)',
    '1.5' -> 0.0015); thousands separators and U+2212 minus read as written."""
    unit = unit_of(header) or base
    assert unit.endswith(base), (header, base)
    scale = SI[unit[: len(unit) - len(base)]]
    return float(text.replace(",", "").replace("−", "-")) * scale


def cell_resolution(texts: list[str], header: str, base: str = "s") -> float:
    """Half a unit in the last place the column writes (in `base` units): how far a
    shown cell may be from its value."""
    decimals = max((len(t.split(".")[1]) if "." in t else 0) for t in texts)
    return 0.5 * 10.0 ** -decimals * cell_value("1", header, base)


def saved_timeline(driver, folder: Path, fmt: str, p: int = 0) -> tuple[bytes, list[int]]:
    """Panel p's "save SVG"/"save PNG" clicked: the downloaded file and the timeline's size
    on screen. The file is whole once Chromium renames it from its .crdownload: no time
    asserted, the deadline only bounds a failure."""
    driver.execute_cdp_cmd("Browser.setDownloadBehavior",
                           {"behavior": "allow", "downloadPath": str(folder)})
    driver.find_element(By.CSS_SELECTOR,
                        f"#panel-{p} button.export-image[data-format='{fmt}']").click()
    path = folder / f"mpiscope-timeline-{p}.{fmt}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (path.is_file() and path.stat().st_size > 0):
        time.sleep(0.2)
    assert path.is_file(), list(folder.iterdir())
    shown = driver.execute_script(f"const l={GD.format(p=p)}._fullLayout; "
                                  "return [l.width, l.height]")
    return path.read_bytes(), shown


def check_timeline_image(data: bytes, fmt: str, shown: list[int], labels: tuple[str, ...]
                         ) -> None:
    """A PNG of the size shown, or a whole SVG document of that size holding what the user
    saw (`labels`: lanes, legend, time axis)."""
    if fmt == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        assert [w, h] == shown
        return
    root = ET.fromstring(data)
    assert root.tag.endswith("svg")
    assert [round(float(root.get("width"))), round(float(root.get("height")))] == shown
    text = data.decode()
    for label in labels:
        assert label in text, label
