"""What the callbacks do, as plain methods on the served traces (tested without a browser)."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from dash import html

from mpiscope_webui import inputs, navsearch, timeline
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import View

MIN_WINDOW_S = 1e-7
DETAIL_MESSAGES = navsearch.DETAIL_MESSAGES
SEARCH_SITES = navsearch.SEARCH_SITES
SEARCH_KEYS = navsearch.SEARCH_KEYS
SIDES = navsearch.SIDES
search_noun = navsearch.search_noun
bytes_lines = navsearch.bytes_lines

_fmt_s = navsearch.fmt_s


def run_window(model: TraceModel) -> tuple[float, float]:
    """The run's extent on the timeline (s): its first call's start to its last call's end."""
    idx = model.index
    return idx.origin / 1e9, (idx.origin + model.duration) / 1e9


def view_bounds(models: list[TraceModel]) -> tuple[float, float]:
    """The extent a view's window is checked against (inputs.window keeps a window near
    it): every run served. With one time scale for two runs, both panels show the same
    window, the longer run's end included; checked against the shorter run alone, that
    window was slid off the other panel's (a run more than twice as long as the other,
    as a busy machine makes one)."""
    w = [run_window(m) for m in models]
    return min(a for a, _ in w), max(b for _, b in w)


def parse_relayout(rd: object) -> tuple[list[float] | None, list[float] | None, bool]:
    """(x range, y range, reset) from a Plotly relayout event; (None, None, False) if none."""
    r = inputs.relayout(rd)
    return r.x, r.y, r.reset


class Controller:
    def __init__(self, models: list[TraceModel]) -> None:
        self.models = models
        # a few widths, not one per resize forever
        self._first = functools.lru_cache(maxsize=16)(self._draw_first)
        # the search's choices, once per trace (every page load lists them)
        self.search_options = functools.cache(self._search_options)
        # every zoom in compare mode asks where the event is: found once per choice
        self._first_calls = functools.lru_cache(maxsize=64)(self._first_call)

    def first_view(self, panel: int, width: int) -> tuple[dict, str, dict]:
        """Panel's first view (timeline figure, status, overview figure) for `width`:
        computed once for both the page (its still picture, firstview.py) and the layout
        the page asks for next."""
        # drawn again, shaded, once the wait states are there
        return self._first(panel, width, self.models[panel].waits_ready)

    def _draw_first(self, panel: int, width: int, _waits_ready: bool
                    ) -> tuple[dict, str, dict]:
        view = self.initial_view(panel)
        fig, status = self.render(panel, view, width)
        return fig, status, timeline.overview(self.models[panel], view, width)

    # -- windows ---------------------------------------------------------------------------
    def full_window(self, panel: int) -> tuple[float, float]:
        return run_window(self.models[panel])

    def shared_window(self) -> tuple[float, float]:
        return view_bounds(self.models)

    def iteration_starts(self, panel: int) -> np.ndarray | None:
        """The panel's main-loop iterations' start times (s, trace time; the mean over
        its ranks), None without a loop of two iterations or more."""
        try:
            loop = self.models[panel].session.loop
        except Exception:  # noqa: BLE001 - no loop found: compare by time instead
            return None
        if loop is None or loop.iterations < 2 or not loop.starts.size:
            return None
        return loop.starts.astype(np.float64).mean(axis=0) / 1e9

    def aligned_window(self, p: int, q: int, t0: float, t1: float) -> tuple[float, float]:
        """Panel p's window [t0, t1] as panel q's: the same (fractional) iterations of
        each run's main loop; before the first or after the last iteration, the same
        time from it. Without a loop in both runs, the same times."""
        a, b = self.iteration_starts(p), self.iteration_starts(q)
        if a is None or b is None:
            return t0, t1
        k = min(len(a), len(b))
        a, b = a[:k], b[:k]
        i = np.arange(k, dtype=np.float64)

        def one(t: float) -> float:
            if t <= a[0]:
                return float(b[0] + (t - a[0]))
            if t >= a[-1]:
                return float(b[-1] + (t - a[-1]))
            return float(np.interp(np.interp(t, a, i), i, b))

        u0, u1 = one(t0), one(t1)
        return (u0, u1) if u1 > u0 else (u0, u0 + (t1 - t0))

    # -- alignment by an event (compare mode) ----------------------------------------------
    def event_options(self) -> list[dict]:
        """The events two runs can be aligned by: the functions and call sites the search
        offers (not tags or communicators: a message is no point in time of its own) that
        both runs have, in the first run's order."""
        both = [[o for o in self.search_options(p) if o["value"][:2] in ("f:", "s:")]
                for p in range(len(self.models))]
        common = set.intersection(*({o["value"] for o in opts} for opts in both))
        return [o for o in both[0] if o["value"] in common]

    def first_call(self, panel: int, what: object) -> int | None:
        """The run's first call (earliest start, on any rank) of a function ("f:NAME") or
        call site ("s:NAME\tSITE"); None if there is none or `what` is not such a value."""
        if not isinstance(what, str) or what[:2] not in ("f:", "s:") \
                or len(what) > 2 * inputs.MAX_NAME:
            return None
        return self._first_calls(panel, what)

    def _first_call(self, panel: int, what: str) -> int | None:
        rows = self.search_calls(panel, what)
        if rows is None or not len(rows):
            return None
        start = self.models[panel].trace.calls["start"].to_numpy(np.int64)[rows]
        return int(rows[np.argmin(start)])  # the lowest row of equal starts: stable

    def event_shift(self, p: int, q: int, what: object) -> float | None:
        """How much later (s) the event starts in panel q's run than in panel p's: panel
        q shows p's window moved by this. None if either run lacks it."""
        a, b = self.first_call(p, what), self.first_call(q, what)
        if a is None or b is None:
            return None
        start = [m.trace.calls["start"] for m in (self.models[p], self.models[q])]
        return (int(start[1].iloc[b]) - int(start[0].iloc[a])) / 1e9

    def align_on_event(self, views: list[View], what: object) -> list[View] | None:
        """Both panels at the event (`first_call`), which lines up: panel 0 keeps its
        window if the event starts in it, else is centred on it at its width; panel 1
        shows that window moved by the event's shift; in each the event is selected and
        marked. None if either run lacks it."""
        calls = [self.first_call(p, what) for p in range(len(views))]
        d = self.event_shift(0, 1, what) if len(views) == 2 else None
        if d is None or None in calls:
            return None
        out = []
        for p, (v, call) in enumerate(zip(views, calls, strict=True)):
            new = View.from_dict(v.to_dict())
            t = int(self.models[p].trace.calls["start"].iloc[call]) / 1e9
            if p == 0 and not v.t0 <= t <= v.t1:
                half = (v.t1 - v.t0) / 2
                new.t0, new.t1 = t - half, t + half
            elif p > 0:
                new.t0, new.t1 = out[0].t0 + d, out[0].t1 + d
            new.selected, new.focus = [call], call
            out.append(new)
        return out

    def follow(self, p: int, q: int, t0: float, t1: float, mode: str,
               event: object = None) -> tuple[float, float]:
        """Panel p's window [t0, t1] as panel q shows it: "time" the same, "iteration" the
        same iterations of each run's loop, "event" moved so that `event` lines up (the
        same times where a run lacks it)."""
        if mode == "iteration":
            return self.aligned_window(p, q, t0, t1)
        if mode == "event":
            d = self.event_shift(p, q, event) or 0.0
            return t0 + d, t1 + d
        return t0, t1

    def initial_view(self, panel: int) -> View:
        return View(*self.full_window(panel))

    def view(self, panel: int, data: object) -> View | None:
        """A view sent back by the page, checked (None: not one this panel can show)."""
        m = self.models[panel]
        return inputs.view(data, view_bounds(self.models), MIN_WINDOW_S, len(m.trace.calls),
                           timeline.curve_names(m), len(m.streams.rank), m.trace.num_ranks)

    def with_lanes(self, panel: int, view: View, chosen: object, order: object,
                   threads: object, grouped: object = None) -> View | None:
        """The view with the lanes the bar chose: `chosen` ranks ("r:3") and hosts
        ("h:node0"), none: all; `order` one of ORDERS; `threads` the ranks drawn with a
        lane per thread (-1: every rank with several threads); `grouped` the hosts drawn
        as one lane each. None: not a choice."""
        m = self.models[panel]
        return inputs.lane_choice(view, chosen, order, threads, grouped, m.trace.num_ranks,
                                  m.trace.host_of(), m.streams.threads_of())

    def zoom(self, view: View, x: list[float] | None, y: list[float] | None,
             reset: bool, panel: int) -> View:
        v = View.from_dict(view.to_dict())
        if reset:
            v.t0, v.t1 = self.full_window(panel)
            v.y_range = None
        w = None if x is None else inputs.window(*x, view_bounds(self.models), MIN_WINDOW_S)
        if w is not None:
            v.t0, v.t1 = w
        if y is not None:
            nl = len(self.models[panel].lanes_for(v.lanes).ranks)
            lo, hi = -0.5 - nl, 2 * nl + 0.5  # lanes run 0..nl-1; keep near them
            y = [min(max(float(b), lo), hi) for b in y]
            if y[0] != y[1]:
                v.y_range = [max(y), min(y)]  # lanes run downwards
        return v

    def toggle(self, view: View, panel: int, restyle: list | None) -> View:
        """A legend click: Plotly's restyle [{'visible': [...]}, [curve, ...]]."""
        names = timeline.curve_names(self.models[panel])
        change = inputs.restyle(restyle, len(names))
        if change is None:
            return view
        hidden = set(view.hidden)
        for value, curve in zip(*change, strict=True):
            if names[curve] not in ("summary", "hover", "selected", timeline.REGION_HOVER):
                if value is True:
                    hidden.discard(names[curve])
                else:
                    hidden.add(names[curve])
        v = View.from_dict(view.to_dict())
        v.hidden = sorted(hidden)
        return v

    def focus_call(self, view: View, panel: int, call: int, also: int | None = None) -> View:
        """Centre the window on a call (e.g. a message's partner) and outline it."""
        c = self.models[panel].trace.calls
        if inputs.integer(call, 0, len(c)) is None:
            return view
        if also is not None and inputs.integer(also, 0, len(c)) is None:
            also = None

        def span(k: int) -> tuple[int, int]:
            return int(c["start"].iloc[k]), int(c["end"].iloc[k])

        return navsearch.focused(view, call, span(call), also,
                                 None if also is None else span(also))

    # -- search (navsearch: the values, what they find, where the view goes) -------------
    def _search_options(self, panel: int) -> list[dict]:
        """What the search can look for (navsearch.search_options), of the whole trace."""
        model = self.models[panel]
        m = model.trace.messages
        return navsearch.search_options(
            model.index.functions, navsearch.site_counts(model.trace.calls),
            m["tag"].value_counts(), m["comm"].value_counts(), model.comm_name)

    def search_calls(self, panel: int, what: str, ranks: list[int] | None = None
                     ) -> np.ndarray | None:
        """The calls a search value stands for (row ids, ascending) on the ranks given
        (all: None); None if it is not a value the search offers."""
        model = self.models[panel]
        if navsearch.is_message_search(what):
            found = navsearch.message_matches(model.trace.messages, what, ranks)
            return None if found is None else np.unique(found)
        if navsearch.function_of(what) not in model.index.functions:
            return None
        return navsearch.call_matches(model.trace.calls, what, ranks)

    def search(self, view: View, panel: int, what: str, forward: bool,
               ranks: list[int] | None = None) -> tuple[View, int] | None:
        """The next (or previous) call a search value stands for (search_calls) on the
        ranks given, after (before) the call found last, else the window's start (end):
        the view centred on it, the call selected and marked; None if there is none."""
        rows = self.search_calls(panel, what, ranks)
        c = self.models[panel].trace.calls
        start = c["start"].to_numpy(np.int64)
        focus = view.focus if view.focus is not None and 0 <= view.focus < len(c) else None
        return navsearch.found_next(
            view, None if rows is None else (rows, start[rows]), forward,
            None if focus is None else int(start[focus]), len(c),
            lambda k: (int(start[k]), int(c["end"].iloc[k])), self.full_window(panel))

    def focus_finding(self, view: View, panel: int, i: int) -> View:
        findings = self.models[panel].analysis().findings
        if inputs.integer(i, 0, len(findings)) is None:
            return view
        f = findings[i]
        v = View.from_dict(view.to_dict())
        if f.window:
            v.t0, v.t1 = f.window
        v.selected = [int(c) for c in f.calls[:500]]
        v.focus = None
        v.y_range = None
        return v

    # -- drawing ---------------------------------------------------------------------------
    def render(self, panel: int, view: View, width_px: int) -> tuple[object, str]:
        model = self.models[panel]
        r = timeline.render(model, view, width_px)
        return r.figure, r.status(model)

    # -- hover and click -------------------------------------------------------------------
    def _point(self, panel: int, data: object) -> tuple[str, inputs.Point] | None:
        """The curve a hover or click event is about and its point, with the point's
        customdata kept only if it names a row of that curve's table."""
        names = timeline.curve_names(self.models[panel])
        pt = inputs.point(data, len(names))
        if pt is None:
            return None
        name = names[pt.curve]
        trace = self.models[panel].trace
        rows = {"hover": len(trace.calls), "messages": len(trace.messages),
                timeline.REGION_HOVER: len(trace.regions)}.get(name, 0)
        if pt.customdata is not None and pt.customdata >= rows:
            pt = inputs.Point(pt.curve, None, pt.x, pt.y, pt.bbox)
        return name, pt

    def call_lines(self, panel: int, call: int) -> list[tuple[str, str]]:
        model = self.models[panel]
        c = model.call_row(call)
        pid = self.callpath_id(panel, call)
        paths = model.session.paths
        frames = paths.path(pid)
        site = paths.frame(pid) if frames else str(c["callsite"])
        wait = None if model.wait_ns is None else int(model.wait_ns[call])
        return navsearch.call_lines(c, model.comm_name, site, frames, wait)

    def callpath_id(self, panel: int, call: int) -> int:
        """The call path id of a call, -1 if none was recorded."""
        c = self.models[panel].trace.calls
        return int(c["callpath"].iloc[int(call)]) if "callpath" in c.columns else -1

    def callpath_list(self, panel: int, call: int) -> list:
        """The frames of a call's path, innermost first, each with its function; the one
        naming the call (the first outside MPI and the wrapper layers) marked. Empty
        without a path of more than one frame."""
        paths = self.models[panel].session.paths
        pid = self.callpath_id(panel, call)
        frames = paths.path(pid)
        if len(frames) < 2:
            return []
        functions, chosen = paths.functions[pid], paths.chosen[pid]
        items = [html.Li([html.Code(f), " ", html.Span(fn, className="muted"),
                          " (call site)" if i == chosen else ""],
                         className="chosen" if i == chosen else "")
                 for i, (f, fn) in enumerate(zip(frames, functions, strict=True))]
        return [html.H4("Call path"), html.Ol(items, className="callpath")]

    def region_lines(self, panel: int, row: int) -> list[tuple[str, str]]:
        """A user region: its name, where and how long, and how deep in the call tree."""
        model = self.models[panel]
        r = model.trace.regions.iloc[int(row)]
        ri = model.regions
        nest = 0
        if ri is not None:
            at = np.flatnonzero(ri.row == int(row))
            nest = int(ri.nest[at[0]]) if len(at) else 0
        rows = [("user region", str(r["function"])), ("rank", str(int(r["rank"]))),
                ("start", _fmt_s(int(r["start"]) / 1e9)),
                ("duration", _fmt_s((int(r["end"]) - int(r["start"])) / 1e9)),
                ("nesting", "outermost" if nest == 0 else f"inside {nest} other region"
                            f"{'s' if nest > 1 else ''}")]
        if str(r["callsite"]):
            rows.append(("call site", str(r["callsite"])))
        return rows

    def message_lines(self, panel: int, row: int) -> list[tuple[str, str]]:
        model = self.models[panel]
        m = model.trace.messages.iloc[int(row)]
        lat = (int(m["recv_time"]) - int(m["send_time"])) / 1e9
        return [("message", f"rank {int(m['send_rank'])} → rank {int(m['recv_rank'])}"),
                ("bytes", f"{int(m['bytes']):,}"), ("tag", str(int(m["tag"]))),
                ("communicator", model.comm_name(int(m["comm"]))),
                ("sent", _fmt_s(int(m["send_time"]) / 1e9)),
                ("received", _fmt_s(int(m["recv_time"]) / 1e9)), ("in flight", _fmt_s(lat))]

    def bin_lines(self, panel: int, view: View, width_px: int, x: float, lane: int) \
            -> list[tuple[str, str]]:
        """What a summary cell stands for: time per function in that pixel of that lane."""
        model = self.models[panel]
        idx = model.lane_index  # keyed by stream
        lanes = model.lanes_for(view.lanes)
        lane = int(round(lane))
        rank = int(lanes.ranks[lane])
        streams = np.flatnonzero(lanes.lane_of_stream == lane)
        a, b = self.full_window(panel)
        x = min(max(x, a - (b - a)), b + (b - a))  # near the trace: int64 ns stay in range
        px = (view.t1 - view.t0) / max(width_px - timeline.MARGIN_L - timeline.MARGIN_R, 50)
        t0 = int((x - px / 2) * 1e9) - idx.origin
        t1 = int((x + px / 2) * 1e9) - idx.origin
        nf = len(idx.functions)
        segs = (streams[:, None] * nf + np.arange(nf, dtype=np.int64)[None, :]).ravel()
        per = np.diff(idx.time_upto(segs, np.array([t0, t1], np.int64)), axis=1)[:, 0]
        # a collapsed rank's threads together: shares of the threads' summed time
        per = per.reshape(len(streams), nf).sum(axis=0)
        width = max(t1 - t0, 1) * max(len(streams), 1)
        top = np.argsort(-per)[:4]
        who = (f"{lanes.hosts[lane]}, {int(lanes.members[lane])} ranks"
               if lanes.members[lane] > 1 else f"rank {rank}" + (
                   f" thread {int(lanes.threads[lane])}" if lanes.threads[lane] >= 0 else ""))
        rows = [("summary", f"{who}, {_fmt_s(t0 / 1e9 + idx.origin / 1e9)} + "
                            f"{_fmt_s(max(t1 - t0, 1) / 1e9)}")]
        rows += [(idx.functions[k], f"{100 * per[k] / width:.0f}%") for k in top if per[k] > 0]
        rows.append(("compute", f"{100 * max(width - per.sum(), 0) / width:.0f}%"))
        return rows

    def tooltip(self, panel: int, hover: dict | None, view: View, width_px: int) \
            -> tuple[bool, dict | None, list]:
        hit = self._point(panel, hover)
        if hit is None:
            return False, None, []
        name, pt = hit
        lanes = len(self.models[panel].lanes_for(view.lanes).ranks)
        if name == "hover" and pt.customdata is not None:
            lines = self.call_lines(panel, pt.customdata)
        elif name == "messages" and pt.customdata is not None:
            lines = self.message_lines(panel, pt.customdata)
        elif name == timeline.REGION_HOVER and pt.customdata is not None:
            lines = self.region_lines(panel, pt.customdata)
        elif (name == "summary" and pt.x is not None and pt.y is not None
              and -0.5 <= pt.y < lanes - 0.5):
            lines = self.bin_lines(panel, view, width_px, pt.x, int(round(pt.y)))
        else:
            return False, None, []
        return True, pt.bbox, [navsearch.table(lines)]

    def partners(self, panel: int, call: int) -> pd.DataFrame:
        """Messages this call sent or received (posting or completing them)."""
        return navsearch.partner_messages(self.models[panel].trace.messages, call)

    def call_details(self, panel: int, call: int, came_from: int | None = None) -> list:
        """A call's details, its path and a jump to the partner of each of its messages
        (navsearch.call_details). `came_from`: the call a partner jump left."""
        c = self.models[panel].trace.calls
        who = int(c["rank"].iloc[call]), str(c["function"].iloc[call])
        return navsearch.call_details(panel, call, who, self.call_lines(panel, call),
                                      self.callpath_list(panel, call),
                                      self.partners(panel, call), came_from)

    def details(self, panel: int, click: dict | None) -> list:
        hit = self._point(panel, click)
        if hit is None:
            return [html.Div("Click a state or a message arrow for details.", className="muted")]
        name, pt = hit
        if name == "hover" and pt.customdata is not None:
            return self.call_details(panel, pt.customdata)
        if name == "messages" and pt.customdata is not None:
            row = pt.customdata
            m = self.models[panel].trace.messages.iloc[row]
            out = [html.H4("Message"), navsearch.table(self.message_lines(panel, row))]
            send, recv = int(m["send_call"]), int(m["recv_complete_call"])
            if send >= 0:
                out.append(navsearch.jump(panel, send, recv if recv >= 0 else None,
                                          "→ the send"))
            if recv >= 0:
                out.append(navsearch.jump(panel, recv, send if send >= 0 else None,
                                          "→ the receive"))
            return out
        if name == timeline.REGION_HOVER and pt.customdata is not None:
            return [html.H4("User region"),
                    navsearch.table(self.region_lines(panel, pt.customdata))]
        return [html.Div("Zoom in to see the single calls of a summary block.",
                         className="muted")]
