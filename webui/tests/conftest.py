"""Fixtures for the web UI tests: real traces from the interposer, a served app (the
browser is the root conftest's `browser`).

- `himeno_traces`: {"unpatched": dir, "patched": dir}, Himeno XS on 4 ranks traced with
  LD_PRELOAD (session-wide, read-only by convention).
- `serve(*dirs) -> url`: `mpiscope serve` in a subprocess on a free port, stopped at the end.
- `synth`: a synthetic 6-rank trace of 600 k events from `mpiscope-synth` (session-wide).
- `lan_address`: an address of this machine that is not loopback (skips without one).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mpiscope_testing import REPO
from mpiscope_testing.webui_server import HIMENO, Server, non_loopback_address, trace_himeno


@pytest.fixture(scope="session")
def himeno_traces(tmp_path_factory) -> dict[str, Path]:
    if not HIMENO.exists():
        pytest.skip("workloads/himeno/himeno is not built (make build)")
    base = tmp_path_factory.mktemp("himeno")
    return {v: trace_himeno(base / v, v) for v in ("unpatched", "patched")}


@pytest.fixture(scope="module")
def serve() -> Iterator[Callable[..., str]]:
    servers: list[Server] = []

    def start(*dirs: Path) -> str:
        servers.append(Server(*map(str, dirs)))
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def lan_address() -> str:
    """An address of this machine other machines could reach (for --host tests)."""
    addr = non_loopback_address()
    if addr is None:
        pytest.skip("no non-loopback address on this machine")
    return addr


@pytest.fixture(scope="session")
def synth(tmp_path_factory) -> Path:
    """Enough calls per rank for a pyramid of several levels and detail row groups."""
    tool = REPO / "build" / "native" / "mpiscope-synth"
    if not tool.is_file():
        pytest.fail(f"{tool} not built (run `make build`)")
    out = tmp_path_factory.mktemp("synth") / "t"
    subprocess.run([str(tool), "--ranks", "6", "--events", "600000", "--out", str(out)],
                   check=True, capture_output=True)
    return out
