// The view in the URL and the zoom history (app.py's url callbacks): every new view is a
// history entry (#view=...), so the browser's back/forward, the ◀ ▶ buttons and the [ ]
// keys step through the views, and a URL copied from the address bar opens that view.
// Keys (app.KEYS lists them on the page): n / p the search's next / previous match,
// + / - zoom, ← / → pan; they act on the panel last clicked or focused (compare mode).
(function () {
  "use strict";
  const ZOOM = 2;  // + and - zoom by this factor around the window's middle
  const PAN = 0.25;  // ← and → move the window by this share of its width
  let keyPanel = 0;
  const pop = () => {
    if (window.dash_clientside && window.dash_clientside.set_props) {
      window.dash_clientside.set_props("url-pop", {data: Date.now()});
    }
  };
  window.addEventListener("popstate", pop);
  document.addEventListener("click", (ev) => {
    if (ev.target.closest("button.hist-back")) history.back();
    else if (ev.target.closest("button.hist-forward")) history.forward();
    const ex = ev.target.closest("button.export-image");
    if (ex && window.Plotly) {  // the timeline as drawn, at its size on screen
      const gd = document.querySelector(`#panel-${ex.dataset.panel} .timeline .js-plotly-plot`);
      if (gd && gd._fullLayout) {
        window.Plotly.downloadImage(gd, {format: ex.dataset.format,
          filename: `mpiscope-timeline-${ex.dataset.panel}`,
          width: gd._fullLayout.width, height: gd._fullLayout.height});
      }
    }
  });

  // the panel the keys act on: the last one clicked or focused in (captured: Plotly's
  // graphs stop some events), marked when there are two
  function choosePanel(ev) {
    const el = ev.target && ev.target.closest && ev.target.closest("#timelines > .panel");
    const p = el ? Number(el.id.replace("panel-", "")) : NaN;
    if (Number.isNaN(p)) return;
    keyPanel = p;
    const all = document.querySelectorAll("#timelines > .panel");
    all.forEach((x) => x.classList.toggle("key-focus", all.length > 1 && x === el));
  }
  document.addEventListener("pointerdown", choosePanel, true);
  document.addEventListener("focusin", choosePanel, true);

  const graph = (sel) => document.querySelector(`#timelines #panel-${keyPanel} ${sel} .js-plotly-plot`);
  // the window [a, b] → f(a, b, run start, run end), as a zoom of the timeline (the
  // server gets it as it gets a mouse zoom); the run's extent is the overview's range,
  // or (the out-of-core page has no overview) the one its timeline's box carries
  function runExtent() {
    const ov = graph(".overview");
    if (ov && ov._fullLayout) return ov._fullLayout.xaxis.range.map(Number);
    const box = document.querySelector(`#timelines #panel-${keyPanel} [data-run]`);
    try {
      const r = box ? JSON.parse(box.dataset.run).map(Number) : null;
      if (r && r.length === 2 && r.every(Number.isFinite)) return r;
    } catch (e) { /* no extent: unbounded */ }
    return [-Infinity, Infinity];
  }
  function moveWindow(f) {
    const gd = graph(".timeline");
    if (!gd || !gd._fullLayout || !window.Plotly) return false;
    const run = runExtent();
    const [a, b] = gd._fullLayout.xaxis.range.map(Number);
    const [u, v] = f(a, b, run[0], run[1]);
    if (u === a && v === b) return true;
    window.Plotly.relayout(gd, {"xaxis.range[0]": u, "xaxis.range[1]": v});
    return true;
  }
  const zoomIn = (a, b) => {
    const m = (a + b) / 2, h = (b - a) / (2 * ZOOM);
    return [m - h, m + h];
  };
  // never wider than the whole run: then the whole run
  const zoomOut = (a, b, lo, hi) => {
    const m = (a + b) / 2, h = (b - a) * ZOOM / 2;
    return 2 * h >= hi - lo ? [lo, hi] : [m - h, m + h];
  };
  // by a quarter of the width, not past the run's end (as far as it is, if nearer)
  const pan = (dir) => (a, b, lo, hi) => {
    const room = dir > 0 ? hi - b : a - lo;
    const d = Math.min(PAN * (b - a), Math.max(room, 0));
    return [a + dir * d, b + dir * d];
  };
  const ACTIONS = {
    "+": () => moveWindow(zoomIn), "=": () => moveWindow(zoomIn),
    "-": () => moveWindow(zoomOut),
    ArrowLeft: () => moveWindow(pan(-1)), ArrowRight: () => moveWindow(pan(1)),
    "[": () => { history.back(); return true; },
    "]": () => { history.forward(); return true; },
    n: () => clickSearch("button.search-next"), p: () => clickSearch("button.search-prev"),
  };
  function clickSearch(sel) {  // search: next / previous match
    const b = document.querySelector(`#timelines #panel-${keyPanel} ${sel}`);
    if (b) b.click();
    return Boolean(b);
  }
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    // not while typing, nor in a table (its cells take arrows)
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented ||
        (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) ||
               (t.closest && t.closest(".dash-spreadsheet-container"))))) return;
    const act = ACTIONS[ev.key];
    if (act && act()) ev.preventDefault();
  });
})();
