// Ask for Dash's layout and dependencies while the page's scripts load and evaluate
// (issue 17). Dash's renderer asks for them only once every script has run, ~0.5 s
// after the HTML on this machine, and then waits for the server. This runs first in the
// page's body: it sets the width cookie the layout is computed for (the rule of
// assets/timeline.js, which sets the same value again later), starts both requests, and
// hands each response to the renderer when it asks (window.fetch wrapped for these two
// URLs, once each; every other request, and a failed early one, goes to the network).
// firstview.py fills in PREFIX (Dash's requests_pathname_prefix, JSON).
(function () {
  "use strict";
  const prefix = PREFIX;
  // assets/timeline.js: the page's width less .page's padding (the scrollbar is always
  // shown, style.css), at least 600
  const width = Math.max(600, document.documentElement.clientWidth - 32);
  document.cookie = "mpiscope-width=" + width + "; path=/; SameSite=Strict";
  const native = window.fetch.bind(window);
  const early = {};
  for (const name of ["_dash-layout", "_dash-dependencies"]) {
    // as the renderer asks (its fetch config): same-origin credentials, JSON
    early[prefix + name] = native(prefix + name, {
      method: "GET", credentials: "same-origin",
      headers: {Accept: "application/json", "Content-Type": "application/json"},
    }).catch(() => null);
  }
  window.fetch = function (input, init) {
    const url = typeof input === "string" ? input : input && input.url;
    const method = ((init && init.method) || "GET").toUpperCase();
    const path = url && new URL(url, location.href).pathname;
    if (method === "GET" && path && Object.prototype.hasOwnProperty.call(early, path)) {
      const got = early[path];
      delete early[path];
      if (!Object.keys(early).length) window.fetch = native;  // both handed over
      return got.then((r) => (r && r.ok ? r : native(input, init)));
    }
    return native(input, init);
  };
  // for benchmarks and tests: both requests were sent from here
  window.mpiscopeEarlyFetch = Object.keys(early);
})();
