"""`mpiscope run` and the job's stdout, as a user sees it: passed through unchanged, and
kept beside the trace so `mpiscope compare` can quote the program's figures of merit."""

from __future__ import annotations

import json
import os
import re
import resource
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpiscope.jobs.mpirun import launcher

ROOT = Path(__file__).resolve().parents[1]
SAVED = "program-output.txt"  # fom.OUTPUT_FILE, spelled out: it is what users find there


def himeno_cmd(himeno: Path, ranks: int, *args: str) -> list[str]:
    return [*launcher(ranks), str(himeno), "--size", "XS", *args]


def traced(out: Path, cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["mpiscope", "run", "--out", str(out), "--", *cmd],
                          capture_output=True, timeout=120, **kw)


def timing_masked(text: str) -> str:
    """Himeno's report with the run-to-run timing figures blanked (all else is exact)."""
    return re.sub(r"(MFLOPS measured : |cpu : |600MHz : |\"elapsed_s\": |\"mflops\": )[\d.e+-]+",
                  r"\1#", text)


def test_two_traced_himeno_runs_compare_by_their_mflops(himeno, tmp_path):
    figures = {}
    for variant in ("unpatched", "patched"):
        cmd = himeno_cmd(himeno, 2, "--iterations", "20", "--variant", variant)
        run = traced(tmp_path / variant, cmd)
        assert run.returncode == 0, run.stderr
        # the user's stdout is the program's, and so is the copy beside the trace
        assert (tmp_path / variant / SAVED).read_bytes() == run.stdout
        bare = subprocess.run(cmd, capture_output=True, timeout=120)
        assert timing_masked(run.stdout.decode()) == timing_masked(bare.stdout.decode())
        assert run.stdout.decode().count("\n") == 10  # the whole report, nothing added
        figures[variant] = json.loads(run.stdout.decode().splitlines()[-1])
        assert (tmp_path / variant / "traces.otf2").is_file()
    md = tmp_path / "report.md"
    proc = subprocess.run(["mpiscope", "compare", str(tmp_path / "unpatched"),
                           str(tmp_path / "patched"), "--md", str(md)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    u, p = figures["unpatched"]["mflops"], figures["patched"]["mflops"]
    text = md.read_text()
    assert f"| MFLOPS (program output) | {u:.1f} | {p:.1f} |" in text
    assert f"**speed-up {p / u:.3f}×** (MFLOPS)" in text  # not the wall-time fallback
    assert re.search(rf"MFLOPS\s.*{u:.1f}\s.*{p:.1f}", proc.stdout)  # the terminal table too


def test_output_is_passed_on_as_it_comes_byte_for_byte(tmp_path):
    go = tmp_path / "go"
    # binary, no newline at the end of the first part: nothing may wait for a line or a block
    job = ("import os, sys, time\n"
           "os.write(1, b'\\x00first\\r\\xff')\n"
           f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
           "os.write(1, bytes(range(256)) * 4000)\n"
           "sys.exit(5)\n")
    proc = subprocess.Popen(["mpiscope", "run", "--out", str(tmp_path / "t"), "--",
                             sys.executable, "-c", job],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the first bytes did not arrive while the job was running"
        first = os.read(proc.stdout.fileno(), 100)
        assert first == b"\x00first\r\xff"
        assert proc.poll() is None  # still running: they came through unbuffered
        go.touch()
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 5  # the job's own exit code
    assert first + rest == b"\x00first\r\xff" + bytes(range(256)) * 4000
    assert (tmp_path / "t" / SAVED).read_bytes() == first + rest


def test_the_job_runs_and_prints_when_the_directory_cannot_be_written(himeno, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    run = traced(blocker / "trace", himeno_cmd(himeno, 1, "--iterations", "5"), text=True)
    assert run.returncode == 0
    assert json.loads(run.stdout.splitlines()[-1])["iterations"] == 5
    warnings = [line for line in run.stderr.splitlines() if line.startswith("mpiscope")]
    assert len(warnings) == 1 and "cannot write trace directory" in warnings[0], run.stderr


def test_a_copy_that_cannot_be_saved_loses_no_output_and_is_told_in_one_line(tmp_path):
    """A file-size limit on `mpiscope run` itself: its copy of the job's stdout fails
    (EFBIG) half-way; the terminal still gets every byte, the job's exit code stands, the
    partial copy is removed, and one line says so (not a traceback)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    job = "import sys; [print(i) for i in range(40000)]; sys.exit(4)"
    out = tmp_path / "t"
    run = subprocess.run(["mpiscope", "run", "--out", str(out), "--", sys.executable, "-c", job],
                         capture_output=True, text=True, timeout=120, preexec_fn=limit)
    bare = subprocess.run([sys.executable, "-c", job], capture_output=True, text=True,
                          timeout=120)
    assert run.returncode == bare.returncode == 4
    assert run.stdout == bare.stdout and len(run.stdout) > 64 * 1024
    assert run.stderr.splitlines() == [
        f"mpiscope: no trace written to {out} (the program's output was not saved to "
        f"{out / SAVED}: File too large)"]
    assert not (out / SAVED).exists()


def test_a_refused_job_keeps_its_exit_code_and_output(himeno, tmp_path):
    cmd = himeno_cmd(himeno, 2, "--iterations", "0")
    bare = subprocess.run(cmd, capture_output=True, timeout=120)
    run = traced(tmp_path / "t", cmd)
    assert bare.returncode == 2 and run.returncode == bare.returncode
    assert run.stdout == bare.stdout
    assert b"himeno: --iterations wants N >= 1" in run.stderr  # stderr is the job's own


def test_terminating_mpiscope_run_terminates_the_job(tmp_path):
    job = "import os, time; print(os.getpid(), flush=True); time.sleep(120)"
    proc = subprocess.Popen(["mpiscope", "run", "--out", str(tmp_path / "t"), "--",
                             sys.executable, "-c", job], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # as a shell reports the job
    finally:
        proc.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the job outlived `mpiscope run`")


def test_bench_himeno_names_a_failed_traced_run(himeno, tmp_path):
    """bench/himeno/run keeps traced runs' stderr in files; a failure must still be told."""
    fake = tmp_path / "bin" / "mpiscope"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n"
                    "[ \"$1\" = run ] || exit 0\n"
                    "echo 'first line' >&2; echo 'mpiscope: the reason it failed' >&2; exit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}", HIMENO_SIZE="XS",
               HIMENO_ITERATIONS="5", HIMENO_RANKS="1", REPEATS="1")
    proc = subprocess.run(["bash", str(ROOT / "bench" / "himeno" / "run")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "traced run failed (ranks 1, unpatched, exit code 3)" in proc.stderr
    assert "mpiscope: the reason it failed" in proc.stderr
    assert "ratio" in proc.stdout  # the untraced part ran and reported before
