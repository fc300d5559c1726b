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
"""

from __future__ import annotations

import flask

from mpiscope_webui import inputs

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
