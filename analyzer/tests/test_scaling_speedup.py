"""`mpiscope scaling`: speed-up and parallel efficiency against the smallest run, exact on
written traces, and the one-line refusal of runs of different programs or problem sizes
(program: the executable recorded in the trace; size: the program's printed figures of
merit, as Himeno's last JSON line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope_testing.tracegen import TraceBuilder

US = 1_000


def run_of(tmp: Path, name: str, ranks: int, wall_us: int, program: str = "/opt/app/solver",
           size: str | None = None) -> Path:
    """A run of `ranks` ranks, each computing for `wall_us` µs between MPI_Init (ends at
    10 µs) and MPI_Finalize; with `size`, the program printed `{"size": ...}` last."""
    tb = TraceBuilder(ranks=ranks, program=program)
    for r in range(ranks):
        tb.call(r, 0, 10 * US, "MPI_Init")
        tb.call(r, (10 + wall_us) * US, (20 + wall_us) * US, "MPI_Finalize")
    path = tb.write(tmp / name)
    if size is not None:
        (path / "program-output.txt").write_text(
            f'result: ok\n{{"size": "{size}", "ranks": {ranks}}}\n')
    return path


def scaling(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiscope", "scaling", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_speedup_and_efficiency_against_the_smallest_run(tmp_path):
    # 2 ranks are the smallest run (the fastest of the two 2-rank runs is the base: 800 µs)
    runs = [run_of(tmp_path, "r4", 4, 250, size="S"), run_of(tmp_path, "r2", 2, 800, size="S"),
            run_of(tmp_path, "r2-slow", 2, 1000, size="S"),
            run_of(tmp_path, "r8", 8, 200, size="S")]
    out, html = tmp_path / "s.json", tmp_path / "s.html"
    p = scaling(*runs, "--json", out, "--html", html)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [(Path(r["trace"]).name, r["ranks"]) for r in rows] == [
        ("r2", 2), ("r2-slow", 2), ("r4", 4), ("r8", 8)]
    assert [r["wall_s"] for r in rows] == pytest.approx([800e-6, 1000e-6, 250e-6, 200e-6])
    assert [r["speedup"] for r in rows] == pytest.approx([1.0, 0.8, 3.2, 4.0])
    # efficiency = speed-up × 2 ranks / ranks
    assert [r["efficiency"] for r in rows] == pytest.approx([1.0, 0.8, 1.6, 1.0])
    assert "speed-up and efficiency against the 2-rank run" in p.stdout
    assert "3.20×" in p.stdout and "160%" in p.stdout
    page = html.read_text()
    assert "Speed-up and parallel efficiency against 2 ranks" in page
    assert "Time breakdown vs rank count" in page


def test_runs_of_different_programs_are_refused_in_one_line(tmp_path):
    a = run_of(tmp_path, "a", 1, 100, program="/opt/app/solver")
    b = run_of(tmp_path, "b", 2, 100, program="/home/me/other")
    c = run_of(tmp_path, "c", 4, 100, program="/elsewhere/solver")  # same name: same program
    p = scaling(a, b, c)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"mpiscope: runs of different programs: solver ({a}, {c}); other "
                        f"({b}); scaling compares one program at several rank counts\n")


def test_runs_of_different_problem_sizes_are_refused_in_one_line(tmp_path):
    a = run_of(tmp_path, "a", 1, 100, size="S")
    b = run_of(tmp_path, "b", 2, 100, size="M")
    c = run_of(tmp_path, "c", 4, 100)  # printed no size: not held against it
    p = scaling(a, b, c)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"mpiscope: runs of different problem sizes: size S ({a}); size M "
                        f"({b}); scaling compares one problem at several rank counts\n")
    assert scaling(a, c).returncode == 0
