"""bench/whatif/measure.py's own helpers (no cluster, no MPI): the MUMPS input it writes
and its option checks. The bench itself needs root and minutes; a wrong input or option
would only show there."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from mpiscope_testing import scriptload

MEASURE = Path(__file__).resolve().parents[1] / "bench" / "whatif" / "measure.py"


@pytest.fixture(scope="module")
def measure():
    return scriptload.load(MEASURE, "bench_whatif_measure")


def test_laplace_input_has_the_solution_one_to_n(measure) -> None:
    """dsimpletest reads N, NNZ, NNZ lines `i j a`, then N right-hand-side values; the
    system's solution must be 1..N (what the bench's runs solve)."""
    k = 4
    lines = measure.laplace3d(k).splitlines()
    n, nnz = int(lines[0]), int(lines[1])
    assert n == k ** 3 and len(lines) == 2 + nnz + n
    a = np.zeros((n, n))
    for line in lines[2:2 + nnz]:
        i, j, v = line.split()
        a[int(i) - 1, int(j) - 1] += float(v)
    b = np.array([float(v) for v in lines[2 + nnz:]])
    assert np.allclose(a, a.T) and np.allclose(np.diag(a), 6.0)
    assert nnz == n + 2 * 3 * k * k * (k - 1)  # the diagonal and each grid edge twice
    assert np.allclose(np.linalg.solve(a, b), np.arange(1, n + 1))


def test_local_ranks_from_two_to_the_nodes(measure) -> None:
    assert measure.rank_counts("4,2") == [4, 2]
    for bad in ("1", "5", "4,x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            measure.rank_counts(bad)


def test_apps_name_why_hpcc_is_not_one(measure) -> None:
    assert measure.app_names("himeno,lammps,mumps") == ["himeno", "lammps", "mumps"]
    with pytest.raises(argparse.ArgumentTypeError, match="LatencyBandwidth"):
        measure.app_names("himeno,hpcc")
    with pytest.raises(argparse.ArgumentTypeError, match="not one of"):
        measure.app_names("nekbone")


def test_row_labels_say_which_nodes(measure) -> None:
    assert measure.on_nodes(4, "10mbit") == "4x10mbit"
    assert measure.on_nodes(2, "10mbit") == "2 nodes of 4x10mbit"
