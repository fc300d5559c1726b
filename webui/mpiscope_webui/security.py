"""Request guard: the app serves its own routes and nothing else.

Dash's routes already confine assets and component suites to their directories; this
refuses anything with a `..` segment (raw or percent-encoded) and any path outside the
routes Dash uses, before Flask routes it — so no request can name a file on the machine.
"""

from __future__ import annotations

from urllib.parse import unquote

import flask

ALLOWED_PREFIXES = ("/_dash-", "/assets/", "/_favicon.ico", "/_reload-hash")


def refused(raw_path: str) -> str | None:
    """Why a request path is refused, or None if it may be served."""
    decoded = raw_path
    for _ in range(3):  # %252e%252e decodes twice
        decoded = unquote(decoded)
    parts = decoded.replace("\\", "/").split("/")
    if ".." in parts or any(p.startswith("..") and p.strip(".") == "" for p in parts):
        return "path traversal"
    path = decoded.split("?", 1)[0]
    if path != "/" and not path.startswith(ALLOWED_PREFIXES):
        return "no such page"
    return None


def install(server: flask.Flask) -> None:
    @server.before_request
    def _guard():
        env = flask.request.environ
        raw = env.get("RAW_URI") or env.get("REQUEST_URI") or flask.request.full_path
        why = refused(raw) or refused(flask.request.path)
        if why:
            return flask.Response(f"refused: {why}\n", status=404, mimetype="text/plain")
        return None
