// Timeline plumbing that Dash callbacks cannot express.
(function () {
  "use strict";

  // Each Dash graph's first draw in a task of its own, the timelines' first (issue 17).
  // Dash mounts the page's graphs in one React commit, and dcc.Graph draws each there
  // (Plotly.react): the overview, the strip and the timeline of every panel and React's
  // own work made one 0.2-0.35 s task, during which the early graph (firstview_paint.js)
  // took no drag. Here Plotly.react on a graph not drawn yet returns a promise, as it
  // does anyway, and the draw runs from a queue, one per task, NEXT_MS apart: in between,
  // the graph just drawn takes zooms (takeOver, once dcc.Graph has bound its listeners in
  // the promise's callbacks) and the still view below is looked at (swapCheck). Later
  // draws of a graph wait for its first; every other call goes straight to Plotly.
  let swapCheck = () => {};
  if (window.Plotly && window.Plotly.react) {
    const react = window.Plotly.react;
    const firsts = new WeakMap();  // graph div -> its deferred first draw
    const queue = [];
    const NEXT_MS = 10;
    const drain = () => {
      const i = queue.findIndex((q) => q.timeline);
      const [job] = queue.splice(i >= 0 ? i : 0, 1);
      if (queue.length) setTimeout(drain, NEXT_MS);
      job.run();
    };
    window.Plotly.react = function (gd) {
      const args = arguments;
      const el = typeof gd === "string" ? document.getElementById(gd) : gd;
      const first = el && firsts.get(el);
      const draw = () => react.apply(window.Plotly, args);
      if (first) return first.then(draw, draw);  // drawn or failed, this one is drawn
      if (!el || el._fullLayout || !el.closest || !el.closest(".dash-graph")) {
        return react.apply(window.Plotly, args);
      }
      const drawn = new Promise((resolve, reject) => {
        queue.push({timeline: !!el.closest(".timeline"), run: () => {
          firsts.delete(el);
          try { resolve(react.apply(window.Plotly, args)); } catch (e) { reject(e); }
        }});
        if (queue.length === 1) setTimeout(drain, 0);
      });
      firsts.set(el, drawn);
      drawn.then(() => setTimeout(() => { takeOver(el); swapCheck(); }, 0), () => {});
      return drawn;
    };
  }

  // The width the server computes the level of detail for: the plots are as wide as
  // #timelines. Before the layout is there (this script runs before Dash asks for it),
  // the same width from the page's: .page pads 16 px each side, and the scrollbar is
  // always there (style.css), so the width does not change when the page grows.
  const PAGE_PAD = 32;
  function plotWidth() {
    const el = document.getElementById("timelines");
    const w = el ? el.clientWidth : document.documentElement.clientWidth - PAGE_PAD;
    return Math.max(600, w);
  }
  window.mpiscopePlotWidth = plotWidth;
  // the layout is drawn for this width (mpiscope_webui/firstview.py)
  function remember(w) {
    document.cookie = "mpiscope-width=" + w + "; path=/; SameSite=Strict";
  }
  remember(plotWidth());

  // Follow window resizes: a new width means new pixel bins, so tell the server. Debounced:
  // dragging a window edge fires dozens of events and only the final width matters.
  let timer = null;
  let sent = null;
  window.addEventListener("resize", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const w = plotWidth();
      if (w === sent || !window.dash_clientside || !window.dash_clientside.set_props) return;
      sent = w;
      remember(w);
      window.dash_clientside.set_props("viewport", {data: w});
    }, 250);
  });

  // dcc.Graph copies every zoom or pan into its `figure` prop, which makes it redraw the
  // whole timeline once more with the old data (a full Plotly.react, 0.3 s on a 64-rank
  // view) before the zoom callback is even sent. The timeline's figure always comes from
  // the server, so on the timeline graphs (and the overviews, below) that listener is
  // replaced by one that only reports relayoutData, as dcc.Graph does besides. Only a zoom, pan or reset (an axis
  // range) is reported: Plotly also reports e.g. {autosize: true} after a redraw, which
  // the server ignores, but Dash keeps only the latest answer of a callback, so that
  // event arriving just after a zoom used to throw the zoom's figure away.
  const NAVIGATES = /^[xy]axis\.(range|autorange)/;
  function takeOver(gd) {
    if (gd.__mpiscopeRelayout || !gd._ev || !gd.removeAllListeners) return;
    if (!gd._ev.listeners("plotly_relayout").length) return;  // dcc has not bound yet
    const holder = gd.closest(".dash-graph");
    if (!holder || !holder.id) return;
    let id = holder.id;
    try { id = JSON.parse(id); } catch (e) { /* a plain string id */ }
    gd.removeAllListeners("plotly_relayout");
    gd.on("plotly_relayout", (ev) => {
      if (ev && Object.keys(ev).some((k) => NAVIGATES.test(k)) &&
          window.dash_clientside && window.dash_clientside.set_props) {
        window.dash_clientside.set_props(id, {relayoutData: ev});
      }
    });
    gd.__mpiscopeRelayout = true;
  }
  // The overview strip's graphs too: the {autosize: true} it reports after its first
  // draw reaches the server as the same callback as a zoom, and one sent just after a
  // zoom (the early graph's, replayed below) made Dash drop the zoom's answer.
  const GRAPHS = ".timeline .js-plotly-plot, .overview .js-plotly-plot";

  // A zoom the user made on the still view's early graph of panel p
  // (firstview_paint.js), now for the server through Dash's timeline `gd`; then the
  // last click made there, as the graph's clickData (the call's or message's details).
  function replayEarly(gd) {
    let id = gd.closest(".dash-graph").id;
    try { id = JSON.parse(id); } catch (e) { /* a plain string id */ }
    const p = id !== null && typeof id === "object" ? Number(id.panel) || 0 : 0;
    const zoom = window.mpiscopeEarlyZoom && window.mpiscopeEarlyZoom(p);
    if (zoom) window.Plotly.relayout(gd, zoom);
    const click = window.mpiscopeEarlyClick && window.mpiscopeEarlyClick(p);
    if (click && window.dash_clientside && window.dash_clientside.set_props) {
      window.dash_clientside.set_props(id, {clickData: click});
    }
  }
  // The still first view (mpiscope_webui/firstview.py) goes once every live timeline is
  // drawn and it and the overviews take zooms (then a zoom and a click made on the early
  // graphs are replayed), in the frame after (Plotly has drawn, the browser has not painted yet).
  // Looked for every 30 ms, and right after each graph's first draw (swapCheck).
  const still = document.getElementById("first-view");
  if (still) {
    // one per panel: the holder of its canvas, or of its early graph (which may have
    // replaced the canvas already)
    const expected = still.querySelectorAll(".timeline").length;
    let drawnAt = null;
    let swap = null;
    swapCheck = () => {
      if (swap === null) return;
      const live = [...document.querySelectorAll(".timeline .js-plotly-plot")]
        .filter((g) => !still.contains(g) && g._fullLayout && g._fullData &&
                g._fullData.length);
      if (live.length < expected) return;
      const graphs = [...document.querySelectorAll(GRAPHS)].filter((g) => !still.contains(g));
      graphs.forEach(takeOver);
      drawnAt = drawnAt || performance.now();
      // dcc.Graph binds its listeners just after its first draw; should it not (a
      // graph Dash redraws at once), the page is not kept covered for it
      if (!graphs.every((g) => g.__mpiscopeRelayout) && performance.now() - drawnAt < 2000) {
        return;
      }
      clearInterval(swap);
      swap = null;
      live.forEach(replayEarly);
      requestAnimationFrame(() => {
        still.remove();
        const data = document.getElementById("first-view-data");
        if (data) data.remove();
      });
    };
    swap = setInterval(swapCheck, 30);
  }

  // dcc.Graph binds its listeners after its first draw, and a new graph div can appear
  // (compare mode, re-mounts): a cheap periodic look is simpler than hooking React.
  setInterval(() => {
    document.querySelectorAll(GRAPHS).forEach(takeOver);
  }, 200);
})();
