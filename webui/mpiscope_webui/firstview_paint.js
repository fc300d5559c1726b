// The first view as a still picture, drawn before Plotly and Dash have loaded (issue 17:
// they take ~1 s to evaluate and start). Inlined in the page by firstview.py, right
// after the static copy of the page's top it paints into; assets/timeline.js removes
// that copy once the live graphs are drawn. It draws the figures the layout will hold
// (the same dicts), in the subset of Plotly the timeline uses: a heatmap, filled
// scatter polygons, path/line/rect shapes, lane labels, a few time ticks, the legend.
(function () {
  "use strict";
  const holder = document.getElementById("first-view");
  const src = document.getElementById("first-view-data");
  if (!holder || !src) return;
  const figures = JSON.parse(src.textContent);
  const DTYPES = {f8: Float64Array, f4: Float32Array, u1: Uint8Array, u2: Uint16Array};
  // names come HTML-escaped for Plotly (render/plottext.py); a canvas draws them as text
  const ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": "\"", "&#x27;": "'"};
  const text = (s) => String(s).replace(/&(lt|gt|amp|quot|#x27);/g, (e) => ENTITIES[e]);

  function array(spec) {  // a Plotly typed array ({dtype, bdata}) or a plain list
    if (!spec || Array.isArray(spec)) return spec || [];
    const bin = atob(spec.bdata);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new DTYPES[spec.dtype](bytes.buffer);
  }

  function rgba(c) {
    if (!c) return [0, 0, 0, 0];
    if (c[0] === "#") {
      const h = c.length === 4 ? c.slice(1).split("").map((d) => d + d).join("") : c.slice(1);
      return [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)).concat([1]);
    }
    const v = c.slice(c.indexOf("(") + 1, c.indexOf(")")).split(",").map(Number);
    return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
  }

  function lut(scale, zmin, zmax) {  // colour of each integer z, as Plotly interpolates
    const stops = scale.map(([p, c]) => [p, rgba(c)]);
    const out = new Uint8ClampedArray((zmax + 1) * 4);
    for (let z = 0; z <= zmax; z++) {
      const p = zmax > zmin ? (z - zmin) / (zmax - zmin) : 0;
      let k = 0;
      while (k < stops.length - 2 && p > stops[k + 1][0]) k++;
      const [p0, c0] = stops[k], [p1, c1] = stops[Math.min(k + 1, stops.length - 1)];
      const f = p1 > p0 ? Math.min(Math.max((p - p0) / (p1 - p0), 0), 1) : 0;
      for (let i = 0; i < 4; i++) {
        const v = c0[i] + (c1[i] - c0[i]) * f;
        out[z * 4 + i] = i === 3 ? Math.round(v * 255) : Math.round(v);
      }
    }
    return out;
  }

  function niceStep(span, n) {
    const raw = span / Math.max(n, 1);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const m = [1, 2, 5, 10].find((x) => x * mag >= raw);
    return m * mag;
  }

  function draw(canvas, fig) {
    const L = fig.layout, m = L.margin;
    const w = canvas.parentElement.clientWidth, h = L.height;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    canvas.style.width = w + "px";
    canvas.style.height = h + "px";
    const ctx = canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    const pw = w - m.l - m.r, ph = h - m.t - m.b;
    const [x0, x1] = L.xaxis.range, [ya, yb] = L.yaxis.range;
    const X = (x) => m.l + (x - x0) / (x1 - x0) * pw;
    const Y = (y) => m.t + (yb - y) / (yb - ya) * ph;
    const font = (L.font && L.font.size) || 12;
    ctx.fillStyle = L.paper_bgcolor || "#ffffff";
    ctx.fillRect(0, 0, w, h);
    ctx.fillStyle = L.plot_bgcolor || "#ffffff";
    ctx.fillRect(m.l, m.t, pw, ph);

    // time ticks (Plotly's own choice may differ by a step; the live graph follows)
    const step = niceStep(x1 - x0, pw / 110);
    const digits = Math.max(0, -Math.floor(Math.log10(step)));
    ctx.font = font + "px sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) {
      const px = X(t);
      if (L.xaxis.showgrid) {
        ctx.fillStyle = L.xaxis.gridcolor || "#eeeeee";
        ctx.fillRect(Math.round(px), m.t, 1, ph);
      }
      ctx.fillStyle = "#444444";
      ctx.fillText(t.toFixed(digits), px, m.t + ph + 4);
    }
    if (L.xaxis.title && L.xaxis.title.text) {
      ctx.fillText(text(L.xaxis.title.text), m.l + pw / 2, m.t + ph + 6 + font + 4);
    }
    // lane labels
    const ya_ = L.yaxis;
    if (ya_.ticktext && ya_.showticklabels !== false) {
      ctx.font = ((ya_.tickfont && ya_.tickfont.size) || font) + "px sans-serif";
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      ctx.fillStyle = "#444444";
      ya_.ticktext.forEach((s, i) => ctx.fillText(text(s), m.l - 4, Y(ya_.tickvals[i])));
    }

    ctx.save();
    ctx.beginPath();
    ctx.rect(m.l, m.t, pw, ph);
    ctx.clip();
    const shapes = L.shapes || [];
    const shape = (s) => {
      const sx = (v) => (s.xref === "paper" ? m.l + v * pw : X(v));
      const sy = (v) => (s.yref === "paper" ? m.t + (1 - v) * ph : Y(v));
      const p = new Path2D();
      if (s.type === "path") {
        // the only paths drawn: rectangles, "M x,y H x V y H x Z" repeated
        const re = /([MHVZ])([^MHVZ]*)/g;
        let cx = 0, cy = 0, g;
        while ((g = re.exec(s.path))) {
          const v = g[2].split(",").map(Number);
          if (g[1] === "M") { cx = v[0]; cy = v[1]; p.moveTo(sx(cx), sy(cy)); }
          else if (g[1] === "H") { cx = v[0]; p.lineTo(sx(cx), sy(cy)); }
          else if (g[1] === "V") { cy = v[0]; p.lineTo(sx(cx), sy(cy)); }
          else p.closePath();
        }
      } else if (s.type === "rect") {
        p.rect(sx(s.x0), sy(s.y1), sx(s.x1) - sx(s.x0), sy(s.y0) - sy(s.y1));
      } else {
        p.moveTo(sx(s.x0), sy(s.y0));
        p.lineTo(sx(s.x1), sy(s.y1));
      }
      if (s.fillcolor && s.type !== "line") { ctx.fillStyle = s.fillcolor; ctx.fill(p); }
      const line = s.line || {};
      if (line.width !== 0 && (s.type === "line" || s.type === "rect" || line.color)) {
        ctx.strokeStyle = line.color || "#444444";
        ctx.lineWidth = line.width || 1;
        ctx.setLineDash(line.dash === "dot" ? [2, 3] : []);
        ctx.stroke(p);
      }
    };
    shapes.filter((s) => s.layer === "between" || s.layer === "below").forEach(shape);
    const legend = [];
    for (const tr of fig.data) {
      if (tr.visible === false) continue;
      if (tr.type === "heatmap") {
        const dims = String(tr.z.shape || "").split(",").map(Number);
        const z = array(tr.z);
        if (!z.length || dims.length !== 2) continue;
        const [rows, cols] = dims;
        const colours = lut(tr.colorscale, tr.zmin, tr.zmax);
        const img = new ImageData(cols, rows);
        for (let i = 0; i < z.length; i++) img.data.set(colours.subarray(z[i] * 4, z[i] * 4 + 4), i * 4);
        const tile = document.createElement("canvas");
        tile.width = cols;
        tile.height = rows;
        tile.getContext("2d").putImageData(img, 0, 0);
        const left = X(tr.x0 - tr.dx / 2), right = X(tr.x0 + (cols - 0.5) * tr.dx);
        const top = Y(tr.y0 - tr.dy / 2), bottom = Y(tr.y0 + (rows - 0.5) * tr.dy);
        ctx.save();
        ctx.imageSmoothingEnabled = false;
        ctx.translate(left, top);
        ctx.scale((right - left) / cols, (bottom - top) / rows);
        ctx.drawImage(tile, 0, 0);
        ctx.restore();
        continue;
      }
      if (tr.showlegend !== false && tr.name) legend.push(tr);
      if (tr.visible === "legendonly" || tr.fill !== "toself" || !tr.fillcolor) continue;
      const xs = array(tr.x), ys = array(tr.y);
      const p = new Path2D();
      let open = false;
      for (let i = 0; i < xs.length; i++) {
        const x = xs[i], y = ys[i];
        if (x === null || y === null || Number.isNaN(x) || Number.isNaN(y)) { open = false; continue; }
        if (open) p.lineTo(X(x), Y(y)); else { p.moveTo(X(x), Y(y)); open = true; }
      }
      ctx.fillStyle = tr.fillcolor;
      ctx.fill(p, "nonzero");
    }
    shapes.filter((s) => s.layer !== "between" && s.layer !== "below").forEach(shape);
    ctx.restore();

    if (L.showlegend !== false && legend.length) {  // rows above the plot, as Plotly's
      ctx.font = font + "px sans-serif";
      ctx.textAlign = "left";
      ctx.textBaseline = "middle";
      const rows = [[]];
      let lx = m.l + 6;
      for (const tr of legend) {
        const item = 40 + ctx.measureText(text(tr.name)).width;
        if (lx + item > w && rows[rows.length - 1].length) { rows.push([]); lx = m.l + 6; }
        rows[rows.length - 1].push([tr, lx]);
        lx += item;
      }
      rows.forEach((row, r) => {
        const ly = m.t - 12 - (rows.length - 1 - r) * 24;
        for (const [tr, x] of row) {
          ctx.globalAlpha = tr.visible === "legendonly" ? 0.5 : 1;
          ctx.fillStyle = tr.fillcolor || "#888888";
          ctx.fillRect(x, ly - 5, 24, 10);
          ctx.fillStyle = "#444444";
          ctx.fillText(text(tr.name), x + 30, ly);
        }
      });
      ctx.globalAlpha = 1;
    }
  }

  // The still timelines made live (issue 17): called by the page right after Plotly's
  // script ran (firstview.py), about a second before Dash's own graph is drawn. Each
  // becomes a Plotly graph of the same figure, with the live graph's config: a user can
  // zoom and pan it (what it shows is the first view's data, stretched), and click a
  // state or a message arrow. What the user did is kept: once Dash's timeline is there,
  // assets/timeline.js replays the window on it (mpiscopeEarlyZoom), and that zoom goes to
  // the server as any other, and then the last click (mpiscopeEarlyClick), which shows
  // that call's or message's details as a click on Dash's graph does (the early graph
  // draws the same figure as Dash's first, so the same curves and points).
  const early = [];
  window.mpiscopeEarlyLive = function () {
    if (!window.Plotly || !holder.isConnected) return;
    const config = JSON.parse(holder.dataset.config || "{}");
    holder.querySelectorAll(".timeline canvas[data-figure]").forEach((c, p) => {
      const fig = figures[Number(c.dataset.figure)];
      // copies: Plotly changes the layout's range arrays in place on a zoom
      const x = fig.layout.xaxis.range.slice(), y = fig.layout.yaxis.range.slice();
      const div = document.createElement("div");
      c.after(div);
      try {
        Plotly.newPlot(div, fig.data, fig.layout, config);
        c.remove();  // in the same task as the draw: the user never sees both
        const e = early[p] = {div: div, x: x, y: y, click: null};
        div.on("plotly_click", (ev) => { e.click = clickData(div, ev); });
      } catch (e) {
        div.remove();  // the still picture stays until the live graph is drawn
      }
    });
    performance.mark("mpiscope:first-view-live");
  };
  // A click's points as dcc.Graph puts them in `clickData` (its filterEventData): each
  // point's plain values, its bbox, and its curve's customdata for that point.
  function clickData(gd, ev) {
    if (!ev || !Array.isArray(ev.points)) return null;
    const points = ev.points.map((pt) => {
      const out = {};
      for (const [k, v] of Object.entries(pt)) {
        if (v === null || typeof v !== "object") out[k] = v;
      }
      if (pt.bbox) out.bbox = pt.bbox;
      const tr = gd.data[pt.curveNumber];
      if (tr && tr.customdata && pt.pointNumber !== undefined) {
        out.customdata = tr.customdata[pt.pointNumber];
      }
      return out;
    });
    return {points: points};
  }
  // The last click on panel p's early graph, as dcc.Graph's clickData; null if none (or
  // already handed over).
  window.mpiscopeEarlyClick = function (p) {
    const e = early[p];
    if (!e || !e.click) return null;
    const out = e.click;
    e.click = null;
    return out;
  };
  // The axes the user moved on panel p's early graph, as a Plotly relayout; null if
  // none (or already handed over).
  window.mpiscopeEarlyZoom = function (p) {
    const e = early[p];
    if (!e || e.done || !e.div._fullLayout) return null;
    e.done = true;
    const out = {};
    for (const [ax, was] of [["xaxis", e.x], ["yaxis", e.y]]) {
      const now = e.div._fullLayout[ax].range;
      if (was && (now[0] !== was[0] || now[1] !== was[1])) {
        out[ax + ".range[0]"] = now[0];
        out[ax + ".range[1]"] = now[1];
      }
    }
    return Object.keys(out).length ? out : null;
  };

  holder.querySelectorAll("canvas[data-figure]").forEach((c) => {
    try { draw(c, figures[Number(c.dataset.figure)]); } catch (e) { /* the live graph follows */ }
  });
  // for benchmarks and tests: when the still picture was ready to be painted
  performance.mark("mpiscope:first-view-still");
})();
