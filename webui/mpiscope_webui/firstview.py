"""The first view without a callback round trip (issue 17: page load to the first drawn
timeline in ≤ 1 s).

Dash draws a page in steps: the scripts, then GET /_dash-layout, then the graph's chunk
(dcc's async-graph.js), then one POST /_dash-update-component per initial callback, and
only then the timeline. The timeline's first figure is therefore part of the layout
(computed while Dash asks for the layout) and its callback does not run on page load.

The level of detail is per pixel, so the layout needs the width the page will measure.
assets/timeline.js computes it with the same rule the page uses later
(`mpiscopePlotWidth`) and puts it in a cookie before Dash asks for the layout; the
layout reads it (`page_width`). The page's width store starts at that width, and the
clientside callback that measures the real width changes it only when it differs (a
window resized since), which is the one case that still costs a round trip.

`index_string` preloads the graph's chunk with the page's scripts instead of after the
layout arrives.

The still picture: even so, the page's scripts take about a second to evaluate and start
(Plotly alone most of it) before the live timeline can be drawn. So the page itself
(`Page`, Dash's index) carries a static copy of the top of the page, with the first
view's figures (the same ones the layout holds, `StaticPanel`) painted on canvases by a
small inline script (firstview_paint.js) as soon as the HTML is parsed. It covers the
page until every live timeline is drawn, then assets/timeline.js removes it: the user
sees the timeline early, and the live graph, which is interactive, in its place.

Sooner live: Plotly's script goes first among the page's scripts, and right after it
the still timelines become Plotly graphs a user can zoom (`mpiscopeEarlyLive` in
firstview_paint.js), before React and Dash are evaluated; a zoom made there is replayed
on Dash's graph (assets/timeline.js), and so is the last click (the details of a call or
message, as a click on Dash's graph shows them). An inline script first in the body
(firstview_early.js) asks for the layout and the dependencies while the scripts load
and evaluate, instead of after; Dash's renderer gets those answers when it asks. The
Babel polyfill Dash loads is left out (bundle.py says why).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import flask
from dash import Dash
from plotly.io.json import to_json_plotly

from mpiscope_webui import bundle, inputs

WIDTH_COOKIE = "mpiscope-width"  # set by assets/timeline.js

# the "viewport" store's clientside callback: the plot width, unless the layout already
# has it (then no callback depends on a change)
MEASURE_WIDTH = """function(_, laid) {
    const w = window.mpiscopePlotWidth();
    return w === laid ? window.dash_clientside.no_update : w;
}"""

PRELOAD = ("_dash-component-suites/dash/dcc/async-graph.js",)


def page_width(default: int) -> int:
    """The plot width the requesting page measures (its cookie), else `default`."""
    try:
        raw = flask.request.cookies.get(WIDTH_COOKIE)
    except RuntimeError:  # no request (the layout built in a test)
        raw = None
    return inputs.width_px(inputs.cookie_int(raw), default)


def index_string(prefix: str = "/") -> str:
    """Dash's page with the graph's chunk preloaded."""
    links = "\n".join(f'        <link rel="preload" as="script" href="{prefix}{p}">'
                      for p in PRELOAD)
    return f"""<!DOCTYPE html>
<html>
    <head>
        {{%metas%}}
        <title>{{%title%}}</title>
        {{%favicon%}}
        {{%css%}}
{links}
    </head>
    <body>
        {{%app_entry%}}
        <footer>
            {{%config%}}
            {{%scripts%}}
            {{%renderer%}}
        </footer>
    </body>
</html>"""


PAINT_JS = (Path(__file__).parent / "firstview_paint.js").read_text()
EARLY_JS = (Path(__file__).parent / "firstview_early.js").read_text()
PLOTLY_TAG = r'(<script src="[^"]*/assets/vendor/plotly-[^"]*"></script>)'
STATIC_ID = "first-view"  # removed by assets/timeline.js once the live timelines are drawn


@dataclass
class StaticPanel:
    """One panel of the still first view: its head, status line, and figures (class of
    the live graph it stands for, e.g. "overview" or "timeline"; the figure), in order."""

    label: str
    info: str
    status: str
    figures: list[tuple[str, dict]] = field(default_factory=list)


@dataclass
class StaticView:
    header: list[str]  # the header's texts after the title
    panels: list[StaticPanel]
    config: dict = field(default_factory=dict)  # the live timeline's Plotly config


class Page(Dash):
    """Dash whose index page carries the still first view (`first_view(width)`, for the
    width the page measured last: its cookie, as the layout's) and makes its timelines
    live right after Plotly's script (`early_live`), asks for the layout early
    (`early_fetch`), leaves out the Babel polyfill (`polyfill` False) and sends Plotly with
    V8's compile hint (`compile_hints`, bundle.py). The switches
    are for benchmarks (bench/webui: the page with and without each)."""

    first_view: Callable[[int], StaticView] | None = None
    default_width: int = 1400
    early_fetch: bool = True
    polyfill: bool = False
    early_live: bool = True
    compile_hints: bool = True  # Plotly's script sent with V8's compile hint (bundle.py)

    def interpolate_index(self, **kwargs) -> str:
        entry = kwargs["app_entry"]
        tag = re.search(PLOTLY_TAG, kwargs["scripts"])
        if self.first_view is not None and self.early_live and tag:
            # Plotly first (it needs none of the others), then the still view's timelines
            # made live (firstview_paint.js), before React and Dash are even evaluated
            rest = kwargs["scripts"].replace(tag.group(0), "", 1)
            kwargs["scripts"] = (tag.group(0) + "\n<script>window.mpiscopeEarlyLive && "
                                 "mpiscopeEarlyLive()</script>\n" + rest)
        if self.first_view is not None:
            entry = static_html(self.first_view(page_width(self.default_width))) + entry
        if self.early_fetch:
            entry = early_script(self.config.requests_pathname_prefix) + entry
        kwargs["app_entry"] = entry
        if not self.polyfill:
            kwargs["scripts"] = re.sub(bundle.POLYFILL, "", kwargs["scripts"])
        return super().interpolate_index(**kwargs)


def early_script(prefix: str) -> str:
    """firstview_early.js for the app's URL prefix (JSON without "<": see static_html)."""
    value = json.dumps(prefix).replace("<", "\\u003c")
    return "<script>" + EARLY_JS.replace("= PREFIX;", f"= {value};", 1) + "</script>"


def static_html(view: StaticView) -> str:
    """The still first view: the page's top as plain HTML (the live page's classes, so the
    same look), a canvas per figure, the figures' JSON and the script that paints them."""
    esc = html.escape
    figures: list[dict] = []
    panels = []
    for p in view.panels:
        parts = [f'<div class="panel-head"><h3 class="trace-label">{esc(p.label)}</h3>'
                 f'<span class="muted">{esc(p.info)}</span></div>']
        for kind, fig in p.figures:
            if kind == "timeline":
                parts.append(f'<div class="status">{esc(p.status)}</div>')
            parts.append(f'<div class="{esc(kind)}"><canvas data-figure="{len(figures)}">'
                         "</canvas></div>")
            figures.append(fig)
        panels.append(f'<div class="panel">{"".join(parts)}</div>')
    head = "".join(f'<span class="muted">{esc(t)}</span>' for t in view.header)
    # JSON in a script element: no "<" at all (a name with "</script>" or "<!--" would
    # end it or change how it is parsed); "<" occurs in JSON only inside strings
    data = to_json_plotly(figures).replace("<", "\\u003c")
    config = html.escape(json.dumps(view.config), quote=True)
    return (f'<div id="{STATIC_ID}" class="page" aria-hidden="true" data-config="{config}">'
            f'<div class="header"><h1>mpiscope</h1>{head}</div>'
            f'<div class="static-timelines">{"".join(panels)}</div></div>'
            f'<script type="application/json" id="first-view-data">{data}</script>'
            f"<script>{PAINT_JS}</script>")
