"""`mpiscope serve` out of core (mpiscope_webui.ooc): when asked (MPISCOPE_TIMELINE_OOC=1)
or when the trace's tables would not fit in memory, the page shows the timeline from the
pyramid and the window's detail, never the whole trace: the whole run comes from the
pyramid, a narrow zoom from the detail, with the states drawn one by one."""

from __future__ import annotations

import pytest

from mpiscope.archive import reader
from mpiscope_testing.webui_page import GD, status, wait_until, zoom_to
from mpiscope_webui import ooc, pyramid


def test_serve_out_of_core_when_asked_or_too_big(monkeypatch, synth):
    reader.load(synth)  # the cache: its row counts are the estimate's input
    need = ooc.estimated_bytes(synth)
    assert need is not None and need > 600_000 * 0.2 * ooc.BYTES_PER_ROW
    monkeypatch.setenv(pyramid.ENV, "1")
    assert ooc.wanted([synth])
    monkeypatch.setenv(pyramid.ENV, "0")
    assert not ooc.wanted([synth])
    monkeypatch.delenv(pyramid.ENV)
    monkeypatch.setattr(ooc, "memory_available", lambda: need)  # less than twice the need
    assert ooc.wanted([synth / "traces.otf2"])
    monkeypatch.setattr(ooc, "memory_available", lambda: 100 * need)
    assert not ooc.wanted([synth])


@pytest.mark.browser
def test_page_draws_the_timeline_out_of_core(browser, serve, synth, monkeypatch):
    monkeypatch.setenv(pyramid.ENV, "1")
    trace = reader.load(synth)
    url = serve(synth)
    browser.get(url)
    wait_until(browser, f"const g={GD.format(p=0)}; return g && g._fullData && "
               "g._fullData.length > 3", what="timeline drawn")
    text = wait_until(browser, "const s = document.querySelector('#panel-0 .status');"
                      " return s && s.textContent.includes('from the') && s.textContent")
    assert "from the pyramid" in text and "0 calls read" in text
    cells = int(text.split(" states drawn, ")[1].split(" ")[0])
    assert cells > 0
    drawn = browser.execute_script(
        f"return {GD.format(p=0)}._fullData.map(t => [t.type, t.name])")
    names = set(trace.calls["function"].astype(str))
    assert drawn[0] == ["heatmap", "summary"]
    # the functions' states, and as in memory the click targets and the selection outline
    assert {n for _t, n in drawn[1:]} <= names | {"hover", "selected"}
    host = trace.host_of()  # the lanes as in memory: by host, each named with its host
    assert browser.execute_script(f"return {GD.format(p=0)}.layout.yaxis.ticktext") == [
        f"{host[r]} · rank {r}" for r in sorted(host, key=lambda r: (min(
            k for k in host if host[k] == host[r]), r))]

    # a window of 1/2000 of the run: finer than the finest level, read in detail
    t0, t1 = browser.execute_script(f"return {GD.format(p=0)}._fullLayout.xaxis.range")
    a = t0 + 0.5 * (t1 - t0)
    b = a + (t1 - t0) / 2000
    zoom_to(browser, a, b)
    text = status(browser)
    assert "from the detail" in text, text
    states = int(text.split(" · ")[2].split(" states drawn")[0])
    calls = trace.calls
    inside = int(((calls["start"] < b * 1e9) & (calls["end"] > a * 1e9)).sum())
    assert 0 < states <= inside
    read = int(text.split(" · ")[3].split(" calls read")[0].replace(",", ""))
    assert read == inside
    points = browser.execute_script(
        f"return {GD.format(p=0)}._fullData.slice(1).filter(t => t.name.startsWith('MPI_'))"
        ".reduce((n, t) => n + (t.y || []).filter(y => y > -50).length, 0)")
    assert points > 0  # the exact states are drawn as rectangles
