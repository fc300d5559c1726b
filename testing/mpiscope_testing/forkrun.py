"""Run the `mpiscope` command line many times, fast and fenced: for the fuzz suite.

A server process imports mpiscope and what `analyze` needs (pandas, pyarrow, rich …)
once, then forks one child per command. The child is the command as a user runs it
(`mpiscope.cli.main(argv)`, an uncaught exception printed as the interpreter prints it,
exit code as `python -m mpiscope` exits) with its address space limited (RLIMIT_AS, as
`prlimit --as` sets it), stdout and stderr in files, and killed at a timeout. A fork
costs milliseconds where starting Python and importing pandas costs a second or more.

    with ForkRunner() as run:
        r = run(["analyze", str(trace), "--json", str(out), "--no-cache"], tmp_dir,
                timeout=60, memory=3 << 30)
        r.code, r.stdout, r.stderr, r.timed_out
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mpiscope_testing import REPO

PRELOAD = ("pandas", "pyarrow", "pyarrow.parquet", "rich.console", "otf2",
           "mpiscope.cli.dispatch", "mpiscope.cli.analyze", "mpiscope.cli.compare",
           "mpiscope.analysis.session", "mpiscope.render.summary", "mpiscope.archive.reader",
           "mpiscope.render.loading")


@dataclass
class Result:
    code: int | None  # exit code; None if killed (timeout, or a signal: see `signal`)
    stdout: str
    stderr: str
    timed_out: bool
    signal: int  # the signal that ended it, 0 if none
    seconds: float


def _child(argv: list[str], out: str, err: str, memory: int) -> None:
    import resource
    import traceback

    fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd_out, 1)
    os.dup2(fd_err, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's own, to its end
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    if memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    code = 1
    try:
        from mpiscope.cli import main

        sys.argv = ["mpiscope", *argv]
        code = int(main(argv) or 0)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - shown as the interpreter would, exit 1
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    """The server loop: one JSON request per stdin line, one JSON reply per stdout line."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    reply = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write the replies' channel
    reply.write(json.dumps({"ready": os.getpid()}) + "\n")
    reply.flush()
    for line in sys.stdin:
        req = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.chdir(req["cwd"])
            _child(req["argv"], req["stdout"], req["stderr"], req["memory"])
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - start > req["timeout"]:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
                timed_out = True
                break
            time.sleep(0.005)
        code = os.waitstatus_to_exitcode(status)
        reply.write(json.dumps({"code": code if code >= 0 else None,
                                "signal": -code if code < 0 else 0, "timed_out": timed_out,
                                "seconds": time.monotonic() - start}) + "\n")
        reply.flush()


class ForkRunner:
    """The client: a server process started on enter, ended on exit."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        # pytest puts testing/ on its own sys.path only: the server needs it on its own
        path = os.pathsep.join(filter(None, [str(REPO / "testing"),
                                             os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, **(env or {}), "PYTHONPATH": path,
                    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "100"}
        self.proc: subprocess.Popen | None = None
        self.count = 0

    def __enter__(self) -> ForkRunner:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from mpiscope_testing.forkrun import serve; serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self.env,
            cwd=REPO)
        ready = self.proc.stdout.readline()
        if not ready:
            raise RuntimeError("the fork server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)

    def __call__(self, argv: list[str], workdir: Path, *, timeout: float = 60,
                 memory: int = 0) -> Result:
        assert self.proc is not None
        self.count += 1
        out, err = workdir / f"stdout.{self.count}", workdir / f"stderr.{self.count}"
        self.proc.stdin.write(json.dumps({
            "argv": argv, "cwd": str(workdir), "stdout": str(out), "stderr": str(err),
            "timeout": timeout, "memory": memory}) + "\n")
        self.proc.stdin.flush()
        r = json.loads(self.proc.stdout.readline())
        return Result(r["code"], out.read_text(errors="replace"), err.read_text(
            errors="replace"), r["timed_out"], r["signal"], r["seconds"])
