"""`mpiscope serve` comes up on a damaged trace (issue 29: every Location's event count
2^64 - 1 made the reader loop and the server never listened) and serves the page."""

from __future__ import annotations

import http.client
import subprocess
from pathlib import Path

from mpiscope_testing import REPO, otf2mutate
from mpiscope_testing.webui_server import Server


def test_serve_comes_up_on_a_trace_claiming_2_64_events_per_location(tmp_path: Path) -> None:
    trace = tmp_path / "t"
    subprocess.run([str(REPO / "build" / "native" / "mpiscope-synth"), "--ranks", "4",
                    "--events", "4000", "--out", str(trace)], check=True, capture_output=True)
    defs = trace / "traces.def"
    defs.write_bytes(otf2mutate.with_location_events(defs.read_bytes(), (1 << 64) - 1))
    server = Server(str(trace))  # waits (60 s at most) until it listens
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
    finally:
        server.stop()
