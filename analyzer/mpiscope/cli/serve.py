"""`mpiscope serve DIR [DIR_B]`: the web UI (timeline, analyses, comparison)."""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from urllib.parse import quote

from mpiscope.cli import engine
from mpiscope.errors import UserError
from mpiscope.render.cutshort import cut_short_warning
from mpiscope.render.term import clean

HELP = "open the web UI on one trace, or two to compare (http://127.0.0.1:8050)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace directory (or its traces.otf2)")
    p.add_argument("trace_b", nargs="?", help="second trace: compare mode")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only); any other "
                        "address warns and needs a token")
    tok = p.add_mutually_exclusive_group()
    tok.add_argument("--token", metavar="T",
                     help="the token every request must carry (default: a random one when "
                          "--host is not a loopback address, none on loopback)")
    tok.add_argument("--no-token", action="store_true",
                     help="serve a non-loopback address without a token (anyone who can "
                          "reach it can read the traces)")
    from mpiscope.cli.analyze import add_callpath_arguments

    add_callpath_arguments(p)
    engine.add_arguments(p)


def _check_port(host: str, port: int) -> None:
    # fail before loading anything and before Flask prints its banner
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            raise UserError(f"{host}:{port}", f"cannot listen there ({err.strerror})") from None


def warn_cut_short(path: Path, trace) -> None:
    """The warning `mpiscope analyze` prints for ranks cut short, word for word."""
    line = cut_short_warning(path, trace.meta.truncated_ranks)
    if line:
        print(clean(line), file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise UserError("--port", f"{args.port} is not a port number")
    _check_port(args.host, args.port)
    from mpiscope_webui import security
    from mpiscope_webui.app import create_app, load_models

    loopback = security.is_loopback(args.host)
    token = security.choose_token(args.token, loopback, args.no_token)
    dirs = [args.trace] + ([args.trace_b] if args.trace_b else [])
    from mpiscope.archive import recover

    for d in dirs:  # ranks killed outright: their crash-safe logs become traces first
        for line in recover.before_reading(Path(d)):
            print(clean(line), file=sys.stderr, flush=True)
    engine.prepare(args, [Path(d) for d in dirs])  # --engine dask: caches built on Dask
    guard = security.Guard.for_address(args.host, args.port, token)
    from mpiscope_webui import ooc

    if ooc.wanted(dirs):  # too big to hold (or MPISCOPE_TIMELINE_OOC=1): the timeline alone
        if len(dirs) > 1:
            raise UserError(args.trace_b, "compare mode needs the traces in memory "
                            "(MPISCOPE_TIMELINE_OOC=0)")
        app, labels = ooc.create_app(dirs[0], guard=guard), [Path(dirs[0]).name]
    else:
        # bad or missing traces: UserError, before serving
        models = load_models(dirs, skip_frames=args.skip_frames, group_by=args.group_by)
        for d, m in zip(dirs, models, strict=True):
            warn_cut_short(Path(d), m.trace)
        app, labels = create_app(models=models, guard=guard), [m.label for m in models]
    if not loopback:
        reach = "anyone with the token printed below" if token else \
            "anyone who can reach it (--no-token)"
        print(f"mpiscope: warning: serving on {args.host}, an address other machines can "
              f"reach: {reach} can read these traces", file=sys.stderr, flush=True)
    shown = socket.gethostname() if args.host.strip("[]") in ("0.0.0.0", "::") else args.host
    url = f"http://{'[' + shown + ']' if ':' in shown else shown}:{args.port}"
    if token:
        url += f"/?token={quote(token, safe='')}"
    print(f"mpiscope: serving {clean(' vs '.join(labels))} on {url} "
          f"(Ctrl-C stops)", file=sys.stderr, flush=True)
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # Dash's own "running on" line has no token and would be the second, wrong URL
    logging.getLogger("dash.dash").setLevel(logging.WARNING)
    app.run(host=args.host, port=args.port, debug=False)
    return 0
