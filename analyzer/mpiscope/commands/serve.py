"""`mpiscope serve DIR [DIR_B]`: the web UI (timeline, analyses, comparison)."""

from __future__ import annotations

import argparse
import socket
import sys

from mpiscope.errors import UserError

HELP = "open the web UI on one trace, or two to compare (http://127.0.0.1:8050)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="trace directory (or its traces.otf2)")
    p.add_argument("trace_b", nargs="?", help="second trace: compare mode")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")


def _check_port(host: str, port: int) -> None:
    # fail before loading anything and before Flask prints its banner
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            raise UserError(f"{host}:{port}", f"cannot listen there ({err.strerror})") from None


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise UserError("--port", f"{args.port} is not a port number")
    _check_port(args.host, args.port)
    from mpiscope_webui.app import create_app, load_models

    dirs = [args.trace] + ([args.trace_b] if args.trace_b else [])
    models = load_models(dirs)  # bad or missing traces: UserError, before serving
    app = create_app(models=models)
    url = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}"
    print(f"mpiscope: serving {' vs '.join(m.label for m in models)} on {url} "
          f"(Ctrl-C stops)", file=sys.stderr, flush=True)
    import logging

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app.run(host=args.host, port=args.port, debug=False)
    return 0
