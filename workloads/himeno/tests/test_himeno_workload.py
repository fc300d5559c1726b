"""Himeno: same answer at any rank count and in both variants, as the original computes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mpiscope.jobs.mpirun import launcher

ARGS = ("--size", "XS", "--iterations", "12")
CONTRACT_KEYS = {"size", "ranks", "process_grid", "iterations", "elapsed_s", "gosa", "mflops",
                 "variant"}


def run_himeno(binary: Path, ranks: int, *args: str) -> tuple[dict, str]:
    """Run the benchmark; return its last stdout line (JSON) and the whole stdout."""
    proc = subprocess.run(launcher(ranks) + [str(binary), *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stdout


@pytest.fixture(scope="module")
def runs(himeno: Path) -> dict[tuple[int, str], dict]:
    return {(n, v): run_himeno(himeno, n, *ARGS, "--variant", v)[0]
            for n in (1, 2, 4) for v in ("unpatched", "patched")}


def reference_gosa(grid: tuple[int, int, int], iterations: int) -> float:
    """The benchmark's initmt + jacobi in numpy, on a grid of imax x jmax x kmax points."""
    ni, nj, nk = grid
    p = np.empty(grid)
    p[:] = (np.arange(ni, dtype=float) ** 2 / (ni - 1) ** 2)[:, None, None]
    a = [np.ones(grid), np.ones(grid), np.ones(grid), np.full(grid, 1 / 6)]
    b = [np.zeros(grid)] * 3
    c = [np.ones(grid)] * 3
    bnd, wrk1 = np.ones(grid), np.zeros(grid)
    inner = (slice(1, -1),) * 3

    def sh(di: int, dj: int, dk: int) -> np.ndarray:
        """p shifted by (di, dj, dk), over the interior points."""
        return p[1 + di:ni - 1 + di, 1 + dj:nj - 1 + dj, 1 + dk:nk - 1 + dk]

    gosa = 0.0
    for _ in range(iterations):
        s0 = (a[0][inner] * sh(1, 0, 0) + a[1][inner] * sh(0, 1, 0) + a[2][inner] * sh(0, 0, 1)
              + b[0][inner] * (sh(1, 1, 0) - sh(1, -1, 0) - sh(-1, 1, 0) + sh(-1, -1, 0))
              + b[1][inner] * (sh(0, 1, 1) - sh(0, -1, 1) - sh(0, 1, -1) + sh(0, -1, -1))
              + b[2][inner] * (sh(1, 0, 1) - sh(-1, 0, 1) - sh(1, 0, -1) + sh(-1, 0, -1))
              + c[0][inner] * sh(-1, 0, 0) + c[1][inner] * sh(0, -1, 0)
              + c[2][inner] * sh(0, 0, -1) + wrk1[inner])
        ss = (s0 * a[3][inner] - p[inner]) * bnd[inner]
        gosa = float((ss * ss).sum())
        p[inner] = p[inner] + 0.8 * ss
    return gosa


def test_gosa_is_the_same_at_1_2_and_4_ranks(runs):
    ref = runs[(1, "unpatched")]["gosa"]
    assert ref > 0
    for n in (2, 4):
        assert runs[(n, "unpatched")]["gosa"] == pytest.approx(ref, rel=1e-12, abs=0)


def test_patched_gives_bitwise_the_same_gosa_as_unpatched(runs):
    for n in (1, 2, 4):
        assert runs[(n, "patched")]["gosa"] == runs[(n, "unpatched")]["gosa"]


def test_allreduce_every_k_keeps_the_answer(himeno, runs):
    out, text = run_himeno(himeno, 2, *ARGS, "--variant", "patched", "--allreduce-every", "5")
    assert out["gosa"] == runs[(2, "unpatched")]["gosa"]
    assert "Allreduce every 5 iterations" in text


def test_json_line_has_the_contract_keys_and_types(runs):
    out = runs[(4, "patched")]
    assert set(out) == CONTRACT_KEYS
    assert out["size"] == "XS" and out["ranks"] == 4 and out["iterations"] == 12
    assert out["variant"] == "patched"
    assert isinstance(out["process_grid"], list) and len(out["process_grid"]) == 3
    assert np.prod(out["process_grid"]) == 4
    assert isinstance(out["elapsed_s"], float) and out["elapsed_s"] > 0
    assert isinstance(out["gosa"], float) and isinstance(out["mflops"], float)
    # MFLOPS is the original's count: 34 flops per interior point per iteration.
    points = (64 - 2) * (32 - 2) * (32 - 2)
    assert out["mflops"] == pytest.approx(34 * points * 12 / out["elapsed_s"] / 1e6, rel=1e-3)


def test_human_readable_report_precedes_the_json(himeno):
    out, text = run_himeno(himeno, 1, "--iterations", "1")
    lines = text.splitlines()
    assert lines[0] == "mimax = 129 mjmax = 65 mkmax = 65"  # size S by default
    assert "imax = 128 jmax = 64 kmax = 64" in lines
    assert "I-decomp = 1 J-decomp = 1 K-decomp = 1 (1 ranks)" in lines
    assert "Loop executed for 1 times" in lines
    assert f"Gosa : {out['gosa']!r}" in lines
    assert any(line.startswith("MFLOPS measured : ") for line in lines)
    assert out["size"] == "S" and out["variant"] == "unpatched"


@pytest.mark.parametrize("iterations", [1, 3])
def test_agrees_with_a_numpy_reference_on_xs(himeno, iterations):
    out, _ = run_himeno(himeno, 2, "--size", "XS", "--iterations", str(iterations))
    assert out["gosa"] == pytest.approx(reference_gosa((64, 32, 32), iterations), rel=1e-12)


@pytest.mark.parametrize(("ranks", "grid"), [(4, (21, 17, 9)), (8, (14, 11, 10))])
def test_uneven_custom_grids_agree_with_the_reference(himeno, ranks, grid):
    """Blocks of unequal size, and at 8 ranks a split of all three dimensions."""
    out, _ = run_himeno(himeno, ranks, "--dims", "x".join(map(str, grid)), "--iterations", "4")
    assert out["size"] == "custom" and np.prod(out["process_grid"]) == ranks
    assert out["gosa"] == pytest.approx(reference_gosa(grid, 4), rel=1e-12)


def test_timing_mode_fits_the_target_time(himeno):
    out, text = run_himeno(himeno, 2, "--size", "XS", "--seconds", "0.5")
    rehearsal = re.search(r"^rehearsal: 3 iterations in ([\d.]+) s", text, re.M)
    assert rehearsal, text
    # as many iterations as the rehearsal's pace fits in the target time
    expected = 0.5 / (float(rehearsal[1]) / 3)
    assert abs(out["iterations"] - expected) <= 1
    assert f"target 0.5 s: running {out['iterations']} iterations" in text
    # as in the original, the rehearsal's sweeps are not undone
    fixed, _ = run_himeno(himeno, 2, "--size", "XS", "--iterations", str(out["iterations"] + 3))
    assert fixed["gosa"] == out["gosa"]


@pytest.mark.parametrize("args", [["--bogus"], ["--size", "XXL"], ["--iterations", "0"],
                                  ["--variant", "fast"], ["--iterations", "3", "--seconds", "1"],
                                  ["--size"], ["--dims", "9x9"], ["--iterations", "3x"],
                                  ["--allreduce-every", "2"], ["--size", "XS", "--dims", "9x9x9"]])
def test_bad_arguments_print_usage_and_exit_2(himeno, args):
    proc = subprocess.run(launcher(2) + [str(himeno), *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("usage: himeno") == 1  # once, from rank 0
    assert proc.stdout == ""


def test_a_grid_smaller_than_the_process_grid_is_refused(himeno):
    proc = subprocess.run(launcher(5) + [str(himeno), "--dims", "4x4x4", "--iterations", "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "grid too small" in proc.stderr


def test_help_prints_usage_and_succeeds(himeno):
    proc = subprocess.run(launcher(1) + [str(himeno), "--help"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: himeno")
