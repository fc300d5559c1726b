"""The last line of defence: an error no input check foresaw costs one log line, not a
traceback in the log and a 500 for the page.

Callbacks check what they get (mpiscope_webui.inputs) and answer "no update" to what
they cannot use; this is only for what slips past that. A callback that fails anyway is
answered as "no update" (204) and named in one line on stderr. A request Dash itself
cannot take apart (no output named, inputs not a list, ...) is a 400, a bad
component-suite path a 404, each with one line.
"""

from __future__ import annotations

import sys

import flask
from dash.exceptions import PreventUpdate
from werkzeug.exceptions import HTTPException

MAX_MESSAGE = 200


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + "…"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def log(what: str) -> None:
    print(f"mpiscope: {what}", file=sys.stderr, flush=True)


def callback_failed(err: Exception) -> None:
    """Dash's on_error for every callback: log one line, leave the page as it is."""
    from dash import ctx

    name = "?"
    try:
        outs = ctx.outputs_list
        first = outs[0] if isinstance(outs, list) and outs else outs
        name = str(first.get("id", "?")) if isinstance(first, dict) else "?"
    except Exception:  # noqa: BLE001 - naming the callback must not fail in turn
        pass
    log(f"callback error (answered with no update) for {name[:100]}: {one_line(err)}")
    raise PreventUpdate


def install(server: flask.Flask) -> None:
    @server.errorhandler(Exception)
    def _unexpected(err: Exception):
        if isinstance(err, HTTPException):  # 404, 405, 415...: Flask's own answer
            return err
        path = flask.request.path
        if path.startswith("/_dash-component-suites/"):
            return flask.Response("not found\n", status=404, mimetype="text/plain")
        log(f"request refused ({flask.request.method} {path[:100]}): {one_line(err)}")
        if path.startswith("/_dash-update-component"):
            return flask.Response("bad callback request\n", status=400,
                                  mimetype="text/plain")
        return flask.Response("internal error (see the server's log)\n", status=500,
                              mimetype="text/plain")
