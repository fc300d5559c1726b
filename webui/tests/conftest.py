"""Fixtures for the web UI tests: real traces from the interposer, a served app, a browser.

- `himeno_traces`: {"unpatched": dir, "patched": dir}, Himeno XS on 4 ranks traced with
  LD_PRELOAD (session-wide, read-only by convention).
- `serve(*dirs) -> url`: `mpiscope serve` in a subprocess on a free port, stopped at the end.
- `browser`: headless Debian Chromium driven by Selenium (module-wide).
- `lan_address`: an address of this machine that is not loopback (skips without one).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from webui_support import (
    ARTIFACTS,
    HIMENO,
    chromium_options,
    free_port,
    non_loopback_address,
    trace_himeno,
    wait_for_port,
)


@pytest.fixture(scope="session")
def himeno_traces(tmp_path_factory) -> dict[str, Path]:
    if not HIMENO.exists():
        pytest.skip("workloads/himeno/himeno is not built (make build)")
    base = tmp_path_factory.mktemp("himeno")
    return {v: trace_himeno(base / v, v) for v in ("unpatched", "patched")}


@pytest.fixture(scope="module")
def serve() -> Iterator[Callable[..., str]]:
    procs: list[subprocess.Popen] = []

    def start(*dirs: Path) -> str:
        port = free_port()
        # a file, not a pipe: a chatty server must never block on a full pipe
        log = tempfile.TemporaryFile("w+")
        proc = subprocess.Popen(
            [sys.executable, "-m", "mpiscope", "serve", *map(str, dirs), "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, text=True)
        proc.log = log
        procs.append(proc)
        wait_for_port(port, proc)
        return f"http://127.0.0.1:{port}"

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="session")
def lan_address() -> str:
    """An address of this machine other machines could reach (for --host tests)."""
    addr = non_loopback_address()
    if addr is None:
        pytest.skip("no non-loopback address on this machine")
    return addr


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (shutil.which("chromium") and Path("/usr/bin/chromedriver").exists()):
        pytest.skip("needs Debian's chromium and chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"),
                              options=chromium_options(tmp_path_factory.mktemp("chrome")))
    driver.set_script_timeout(30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()
