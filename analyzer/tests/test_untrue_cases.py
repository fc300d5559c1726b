"""The untrue things issue 14 found, on real traced runs: MPI the interposer did not
understand was counted as compute, and a barrier after RMA was 'proven' redundant."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

PROGRAM = Path(__file__).parent / "programs" / "untrue.c"
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@pytest.fixture(scope="module")
def untrue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("untrue")
    exe = d / "untrue"
    subprocess.run(["mpicc", "-g", "-O0", "-o", str(exe), str(PROGRAM)], check=True,
                   capture_output=True)
    return exe


def analyzed(exe: Path, tmp: Path, *args: str, np: int = 2, **env: str) -> dict:
    """`mpiscope run` then `mpiscope analyze --json`, as a user would."""
    out, js = tmp / "trace", tmp / "a.json"
    run = subprocess.run(["mpiscope", "run", "--out", str(out), "--", "mpirun",
                          "--oversubscribe", "-np", str(np), str(exe), *args],
                         env={**ENV, **env}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    ana = subprocess.run(["mpiscope", "analyze", str(out), "--json", str(js)], env=ENV,
                         capture_output=True, text=True, timeout=300)
    assert ana.returncode == 0, ana.stderr
    return json.loads(js.read_text())


def rank(result: dict, r: int) -> dict:
    return next(x for x in result["ranks"] if x["rank"] == r)


def test_waiting_in_a_fence_is_synchronization_not_compute(untrue: Path, tmp_path: Path) -> None:
    res = analyzed(untrue, tmp_path, "fence")
    r0 = rank(res, 0)  # rank 1 sleeps 200 ms before its second fence: rank 0 waits there
    assert r0["synchronization_s"] >= 0.12, r0
    assert r0["compute_s"] < r0["total_s"] - 0.12, r0
    assert res["wait_states"]["wait_at_nxn_s"] >= 0.12
    assert "MPI_Win_fence" in {f["name"] for f in res["functions"]}


def line_of(marker: str) -> str:
    lines = PROGRAM.read_text().splitlines()
    return f"untrue.c:{next(i + 1 for i, x in enumerate(lines) if marker in x)}"


def test_barrier_after_rma_is_not_proven_redundant(untrue: Path, tmp_path: Path) -> None:
    res = analyzed(untrue, tmp_path, "barrier_fence")
    redundant = {f["callsite"] for f in res["findings"] if f["kind"] == "redundant_collective"
                 and f["function"] == "MPI_Barrier"}
    assert line_of("AFTER_RMA") not in redundant, res["findings"]
    # the loop's back-to-back barriers (nothing between them) are still proven redundant
    assert line_of("AFTER_BARRIER") in redundant, res["findings"]
    puts = {f["name"]: f["calls"] for f in res["functions"]}
    assert puts.get("MPI_Put") == 10 and puts.get("MPI_Win_fence") == 20


def test_no_barrier_proof_when_calls_were_filtered_out(untrue: Path, tmp_path: Path) -> None:
    """With the fences and Puts filtered out, the barriers look back to back in the trace;
    the trace says calls were filtered, so nothing is 'proven' from what is missing."""
    res = analyzed(untrue, tmp_path, "barrier_fence",
                   MPISCOPE_FILTER="MPI_Win_fence,MPI_Put")
    assert "MPI_Win_fence" not in {f["name"] for f in res["functions"]}
    assert not [f for f in res["findings"] if f["kind"] == "redundant_collective"
                and f["function"] == "MPI_Barrier"], res["findings"]


def test_waiting_for_a_late_ialltoall_is_synchronization(untrue: Path, tmp_path: Path) -> None:
    res = analyzed(untrue, tmp_path, "ialltoall")
    r0 = rank(res, 0)  # rank 1 posts 100 ms late: rank 0's MPI_Wait waits for it
    assert r0["synchronization_s"] >= 0.06, r0
    assert r0["communication_s"] < r0["synchronization_s"], r0


def test_mpi_io_time_is_io(untrue: Path, tmp_path: Path) -> None:
    data = tmp_path / "out.bin"
    res = analyzed(untrue, tmp_path, "io", str(data))
    assert data.stat().st_size == 2 * (4 << 20)
    for r in (0, 1):
        x = rank(res, r)
        assert x["io_s"] > 0, x
        parts = x["compute_s"] + x["communication_s"] + x["synchronization_s"] + x["io_s"]
        assert parts == pytest.approx(x["total_s"], rel=0.01)
    file_time = sum(f["time_s"] for f in res["functions"] if f["name"].startswith("MPI_File_"))
    assert sum(x["io_s"] for x in res["ranks"]) == pytest.approx(file_time, rel=0.02, abs=1e-3)
