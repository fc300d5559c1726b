// The view in the URL and the zoom history (app.py's url callbacks): every new view is a
// history entry (#view=...), so the browser's back/forward, the ◀ ▶ buttons and the [ ]
// keys step through the views, and a URL copied from the address bar opens that view.
(function () {
  "use strict";
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
  document.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (ev.ctrlKey || ev.metaKey || ev.altKey ||
        (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)))) return;
    if (ev.key === "[") { history.back(); ev.preventDefault(); }
    else if (ev.key === "]") { history.forward(); ev.preventDefault(); }
    else if (ev.key === "n" || ev.key === "p") {  // search: next / previous call
      const b = document.querySelector(ev.key === "n" ? "#panel-0 button.search-next"
                                                      : "#panel-0 button.search-prev");
      if (b) { b.click(); ev.preventDefault(); }
    }
  });
})();
