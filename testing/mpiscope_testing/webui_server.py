"""Helpers for the web UI tests: Himeno traces, `mpiscope serve` in a subprocess, ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from mpiscope_testing import REPO

HIMENO = REPO / "workloads" / "himeno" / "himeno"
ARTIFACTS = REPO / "test-artifacts" / "webui"
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"]


def trace_himeno(out: Path, variant: str, iterations: int = 40) -> Path:
    lib = subprocess.run([sys.executable, "-m", "mpiscope", "lib"], check=True,
                         capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=lib, MPISCOPE_OUT=str(out))
    subprocess.run([*MPIRUN, str(HIMENO), "--size", "XS", "--iterations", str(iterations),
                    "--variant", variant], check=True, env=env, capture_output=True,
                   timeout=120)
    assert (out / "traces.otf2").is_file()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60,
                  host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = getattr(proc, "log", None)
            text = (log.seek(0), log.read())[1] if log else ""
            raise RuntimeError(f"mpiscope serve exited {proc.returncode}: {text}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError("mpiscope serve did not start listening")


class Server:
    """`mpiscope serve ARGS` in a subprocess, its stdout and stderr in a file (a pipe could
    fill up and block a chatty server)."""

    def __init__(self, *args: str, port: int | None = None, wait_host: str = "127.0.0.1"):
        import tempfile

        self.port = port or free_port()
        self._log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mpiscope", "serve", *args, "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT, text=True)
        self.proc.log = self._log
        wait_for_port(self.port, self.proc, host=wait_host)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        self._log.flush()
        self._log.seek(0)
        return self._log.read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (e.g. eth0's), if any."""
    import ipaddress

    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    v4 = [a for a in out if ipaddress.ip_address(a).version == 4
          and not ipaddress.ip_address(a).is_loopback]
    return v4[0] if v4 else None


def printed_url(server: Server) -> str:
    """The URL `mpiscope serve` printed (with its token, if any)."""
    import re

    line = next(x for x in server.log().splitlines() if x.startswith("mpiscope: serving"))
    return re.search(r" on (http://\S+) \(Ctrl-C stops\)", line).group(1)
