"""Crafted callback requests against a running `mpiscope serve`: no 5xx, no traceback.

The server is asked what callbacks it has (/_dash-dependencies) and what the page holds
(/_dash-layout), as a client would; then every input and state of every server-side
callback is sent hostile values (out-of-range numbers, NaN, inf, strings, lists, dicts,
null, missing keys, windows off the trace, wrong ids) and the requests themselves are
mangled. Each answer must be below 500, the server's log must hold no traceback and no
"callback error" (the safety net is not what catches these: the input checks are), and
the page must still work afterwards.
"""

from __future__ import annotations

import copy
import json
import math
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from mpiscope_testing.webui_server import Server
from mpiscope_webui.pyramid import ENV as OOC_ENV

HOSTILE = [None, -1, 10**9, 2**70, -(2**70), 1e308, -1e308, math.nan, math.inf, -math.inf,
           0.5, True, "x", "", "1e308", [], [1, 2, 3], {}, {"a": 1}]


def post(url: str, path: str, body: bytes, ctype: str = "application/json") \
        -> tuple[int, bytes]:
    req = urllib.request.Request(url + path, data=body, method="POST",
                                 headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def get(url: str, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url + path, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def prop_id(ident: str | dict, prop: str) -> str:
    """How Dash names an input in changedPropIds (pattern ids: sorted-key JSON)."""
    if isinstance(ident, dict):
        ident = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return f"{ident}.{prop}"


def layout_props(node) -> dict[str, dict]:
    """Every component of the layout with an id: its props, by prop_id-style id key."""
    out: dict[str, dict] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, list):
            stack.extend(n)
        elif isinstance(n, dict) and "props" in n:
            props = n["props"]
            if "id" in props:
                out[prop_id(props["id"], "")[:-1]] = props
            stack.append(props.get("children"))
            for v in props.values():  # dcc.Tabs' children sit under children too
                if isinstance(v, dict | list):
                    stack.append(v)
    return out


class Page:
    """What the fuzzer knows of the app: callbacks, the layout's values, a valid view."""

    def __init__(self, url: str):
        self.url = url
        status, deps = get(url, "/_dash-dependencies")
        assert status == 200
        self.deps = [d for d in json.loads(deps) if not d.get("clientside_function")]
        status, layout = get(url, "/_dash-layout")
        assert status == 200
        self.props = layout_props(json.loads(layout))
        self.panels = sum(1 for k in self.props if k.startswith('{"panel":')
                          and '"type":"view"' in k)
        self.view = self.props[prop_id({"panel": 0, "type": "view"}, "")[:-1]]["data"]

    def concrete(self, pattern: str, wildcard: str) -> list[dict | str]:
        """The ids a pattern names (panel 0 for MATCH, every panel for ALL)."""
        if not pattern.startswith("{"):
            return [pattern]
        ident = json.loads(pattern)
        panels = range(self.panels) if wildcard == "ALL" else [0]
        out = []
        for p in panels:
            c = {}
            for k, v in ident.items():
                if v in (["MATCH"], ["ALL"], ["ALLSMALLER"]):
                    c[k] = p if k == "panel" else (-1 if k == "also" else 0)
                else:
                    c[k] = v
            out.append(c)
        return out

    def good_value(self, ident: dict | str, prop: str):
        """What the page would send for this input."""
        kind = ident.get("type") if isinstance(ident, dict) else ident
        known = self.props.get(prop_id(ident, "")[:-1], {})
        if prop in known and known[prop] is not None:
            return copy.deepcopy(known[prop])
        t0, t1 = self.view["t0"], self.view["t1"]
        mid, w = (t0 + t1) / 2, (t1 - t0) / 10
        return {
            "relayoutData": {"xaxis.range[0]": mid - w, "xaxis.range[1]": mid + w},
            "restyleData": [{"visible": ["legendonly"]}, [2]],
            "hoverData": {"points": [{"curveNumber": 1, "x": mid, "y": 0,
                                      "bbox": {"x0": 1, "x1": 2, "y0": 1, "y1": 2}}]},
            "clickData": {"points": [{"curveNumber": 1, "x": mid, "y": 0}]},
            "n_clicks": 1, "n_intervals": 1, "selected_rows": [0],
            "value": ["shared"], "id": ident,
        }.get(prop, {"idx": 0, "at": 1} if str(kind).startswith("finding-click")
              else [{"name": "MPI_Send"}] if kind == "ftable"
              else 1400 if kind == "viewport" else None)

    def request(self, dep: dict) -> dict:
        """A valid callback request for `dep`, every input marked as changed."""
        outs = dep["output"].strip(".").split("...") if dep["output"].startswith("..") \
            else [dep["output"]]
        outputs = []
        for o in outs:
            ident, prop = o.rsplit(".", 1)
            wild = "ALL" if '["ALL"]' in ident else "MATCH"
            ids = self.concrete(ident, wild)
            spec = [{"id": i, "property": prop} for i in ids]
            outputs.append(spec if wild == "ALL" and ident.startswith("{") else spec[0])

        def slots(items: list[dict]) -> list:
            res = []
            for it in items:
                wild = "ALL" if '["ALL"]' in it["id"] else "MATCH"
                ids = self.concrete(it["id"], wild)
                vals = [{"id": i, "property": it["property"],
                         "value": self.good_value(i, it["property"])} for i in ids]
                res.append(vals if wild == "ALL" and it["id"].startswith("{") else vals[0])
            return res

        inputs, state = slots(dep["inputs"]), slots(dep["state"])
        changed = [prop_id(v["id"], v["property"])
                   for s in inputs for v in (s if isinstance(s, list) else [s])]
        return {"output": dep["output"],
                "outputs": outputs if len(outputs) > 1 else outputs[0],
                "inputs": inputs, "state": state, "changedPropIds": changed}


def _slot_values(body: dict) -> Iterator[tuple[str, dict]]:
    """Each input/state entry of a request (the first of an ALL list)."""
    for part in ("inputs", "state"):
        for s in body[part]:
            entries = s if isinstance(s, list) else [s]
            if entries:
                yield part, entries[0]


def payloads(page: Page) -> Iterator[tuple[str, dict | bytes]]:
    """(label, body) for every hostile request."""
    span = page.view["t1"] - page.view["t0"]
    t0, t1 = page.view["t0"], page.view["t1"]
    windows = [(t0 - 3 * span, t0 - 2 * span), (t0 - span, t0 - span / 2),
               (t1 + 2 * span, t1 + 3 * span), (t1 + span / 2, t1 + span), (t1, t1),
               (t1, t0), (-1e308, 1e308), (0, 1e300), (t0 - 1e-12, t0)]
    for dep in page.deps:
        base = page.request(dep)
        name = dep["output"][:60]
        yield f"{name}: valid", base
        for i, (_, entry) in enumerate(_slot_values(base)):
            good = entry["value"]
            for v in HOSTILE:  # the whole value
                body = copy.deepcopy(base)
                list(_slot_values(body))[i][1]["value"] = v
                yield f"{name}: {entry['property']} = {v!r}", body
            if isinstance(good, dict):  # each key of a dict value: hostile, or missing
                for k in list(good):
                    for v in [*HOSTILE, "missing"]:
                        body = copy.deepcopy(base)
                        d = list(_slot_values(body))[i][1]["value"]
                        if v == "missing":
                            del d[k]
                        else:
                            d[k] = v
                        yield f"{name}: {entry['property']}.{k} = {v!r}", body
            if isinstance(good, dict) and "t0" in good:  # views off the trace
                for a, b in windows:
                    body = copy.deepcopy(base)
                    list(_slot_values(body))[i][1]["value"].update(t0=a, t1=b)
                    yield f"{name}: view window {a}..{b}", body
            if entry["property"] == "relayoutData":  # drags and zooms off the trace
                for a, b in windows:
                    body = copy.deepcopy(base)
                    list(_slot_values(body))[i][1]["value"] = {"xaxis.range[0]": a,
                                                               "xaxis.range[1]": b}
                    yield f"{name}: relayout {a}..{b}", body
                    body = copy.deepcopy(body)
                    list(_slot_values(body))[i][1]["value"] = {"xaxis.range": [a, b],
                                                               "yaxis.range": [b, a]}
                    yield f"{name}: relayout ranges {a}..{b}", body
            if entry["property"] in ("hoverData", "clickData"):  # the point's fields
                for k in ("curveNumber", "customdata", "x", "y", "bbox"):
                    for v in [*HOSTILE, 3, 10**6]:
                        for curve in (1, 9, 11):  # summary, functions, messages/hover
                            body = copy.deepcopy(base)
                            pt = list(_slot_values(body))[i][1]["value"]["points"][0]
                            pt["curveNumber"] = curve
                            pt[k] = v
                            yield f"{name}: {entry['property']} curve {curve} {k}={v!r}", body
            if isinstance(entry["id"], dict):  # ids naming panels or calls that do not exist
                for k in entry["id"]:
                    if k == "type":
                        continue
                    for v in (-1, 1, 7, 10**12, "0", None, 0.5):
                        body = copy.deepcopy(base)
                        e = list(_slot_values(body))[i][1]
                        e["id"] = {**e["id"], k: v}
                        body["changedPropIds"] = [prop_id(e["id"], e["property"])]
                        yield f"{name}: id {k}={v!r}", body
        # the outputs: a panel that does not exist
        for v in (-1, 5, "0", None, [0]):
            body = copy.deepcopy(base)
            outs = body["outputs"]
            for o in outs if isinstance(outs, list) else [outs]:
                for oo in o if isinstance(o, list) else [o]:
                    if isinstance(oo["id"], dict):
                        oo["id"] = {**oo["id"], "panel": v}
            yield f"{name}: outputs panel {v!r}", body
        # triggers the page never sends
        for changed in (["nope"], ["nope.x"], ["{bad json.relayoutData"], ["[1].data"],
                        ['{"type":"timeline"}.relayoutData'],
                        ["finding-click-9.data"], ["finding-click-" + "9" * 5000 + ".data"],
                        "x", None, [None], [{}]):
            body = copy.deepcopy(base)
            body["changedPropIds"] = changed
            yield f"{name}: changedPropIds {str(changed)[:40]}", body
        # requests Dash itself cannot take apart
        for key in ("output", "outputs", "inputs", "state", "changedPropIds"):
            for v in ("missing", None, 1, "x", {}, [[[]]]):
                body = copy.deepcopy(base)
                if v == "missing":
                    del body[key]
                else:
                    body[key] = v
                yield f"{name}: {key} = {v!r}", body
        # a stored view that is not one (every field), and views for the wrong panel count
        for k in ("t0", "t1", "hidden", "selected", "y_range"):
            for v in [*HOSTILE, ["MPI_Send"] * 5000, list(range(10**4))]:
                body = copy.deepcopy(base)
                hit = False
                for part in ("inputs", "state"):
                    for s in body[part]:
                        for e in s if isinstance(s, list) else [s]:
                            if isinstance(e["value"], dict) and "t0" in e["value"]:
                                e["value"][k] = v
                                hit = True
                if hit:
                    yield f"{name}: view {k} = {str(v)[:30]}", body
    for raw in (b"", b"{", b"[]", b"null", b'"x"', b"1", b"{}", b'{"output": 1}',
                b"\xff\xfe", b"NaN", b"[" * 10000 + b"]" * 10000):
        yield f"raw body {raw[:20]!r}", raw


@pytest.fixture(scope="module", params=["one trace", "compare", "out of core"])
def server(request, himeno_traces):
    dirs = [himeno_traces["unpatched"]]
    if request.param == "compare":
        dirs.append(himeno_traces["patched"])
    with pytest.MonkeyPatch.context() as mp:  # the server's environment, not ours
        if request.param == "out of core":
            mp.setenv(OOC_ENV, "1")
        srv = Server(*map(str, dirs))
    srv.panels = len(dirs)
    srv.ooc = request.param == "out of core"
    yield srv
    srv.stop()


def timeline_figure(dep: dict) -> bool:
    """The callback that draws a timeline (in memory: a panel's; out of core: the one)."""
    return "timeline\"}.figure" in dep["output"] or "ooc-timeline.figure" in dep["output"]


def test_crafted_callback_requests_get_no_5xx_and_no_traceback(server):
    page = Page(server.url)
    assert page.panels == server.panels and len(page.deps) >= (2 if server.ooc else 6)
    bad = []
    count = 0
    statuses: dict[int, int] = {}
    for label, body in payloads(page):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        status, text = post(server.url, "/_dash-update-component", raw)
        count += 1
        statuses[status] = statuses.get(status, 0) + 1
        if status >= 500:
            bad.append((label, status, text[:200]))
        if label.endswith(": valid") and "render" not in label:
            assert status in (200, 204), (label, status, text[:300])
    log = server.log()
    print(f"{count} payloads: statuses {statuses}")
    assert count >= 300
    assert not bad, f"{len(bad)} of {count} payloads gave 5xx, e.g. {bad[:5]}"
    assert "Traceback" not in log, log[-3000:]
    # the checks, not the safety net, turned them away
    assert "callback error" not in log, log[-3000:]
    # and the page still works: a normal zoom draws the timeline
    body = page.request(next(d for d in page.deps if timeline_figure(d)))
    status, text = post(server.url, "/_dash-update-component", json.dumps(body).encode())
    assert status == 200 and b'"figure"' in text
    assert get(server.url, "/")[0] == 200


def test_a_drag_off_the_trace_draws_an_empty_window(server):
    """A normal drag past the end of the trace (the render callback's ValueError)."""
    page = Page(server.url)
    dep = next(d for d in page.deps if timeline_figure(d))
    t0, t1 = page.view["t0"], page.view["t1"]
    span = t1 - t0
    for a, b in ((t1 + 2 * span, t1 + 3 * span), (t0 - 3 * span, t0 - 2 * span),
                 (t1 + 0.5 * span, t1 + 1.5 * span)):
        body = page.request(dep)
        view = next(e for e in body["inputs"] if isinstance(e, dict)
                    and isinstance(e["value"], dict) and "t0" in e["value"])
        view["value"].update(t0=a, t1=b)
        body["changedPropIds"] = [prop_id(view["id"], view["property"])]
        status, text = post(server.url, "/_dash-update-component", json.dumps(body).encode())
        assert status == 200, text[:300]
        resp = json.loads(text)["response"]
        key = "ooc-status" if server.ooc else prop_id({"panel": 0, "type": "status"}, "")[:-1]
        status_line = resp[key]["children"]
        assert "0 states drawn" in status_line
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("path", [
    "/_dash-component-suites/nope/x.js", "/_dash-component-suites/dash/nope.js",
    "/_dash-component-suites/dash/dcc/nope.v1_2_3m4.js", "/_dash-component-suites/os/x.py",
    "/_dash-component-suites/sys/x.js", "/_dash-component-suites/dash/",
    "/_dash-component-suites/dash/dash.py", "/_dash-component-suites/mpiscope/x.js",
    "/_dash-component-suites/" + "a" * 3000 + "/x.js",
    "/_dash-component-suites/dash/%00.js", "/_dash-component-suites/dash/x.js%00.py"])
def test_bad_component_suite_paths_are_404(server, path):
    status, body = get(server.url, path)
    assert status == 404, (path, status, body[:200])
    assert "Traceback" not in server.log()
