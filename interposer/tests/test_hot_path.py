"""No allocation per event: the interposer's malloc count does not grow with the number
of MPI calls (counted by an LD_PRELOAD malloc shim, traced minus bare)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mpiscope_testing import mpijobs


def mallocs(shim: Path, exe: Path, iterations: int, traced: bool, tmp: Path) -> int:
    """malloc/calloc/realloc calls of both ranks together."""
    counts = tmp / f"counts-{iterations}-{traced}"
    counts.mkdir()
    preload = f"{shim}:{mpijobs.interposer_lib()}" if traced else str(shim)
    cmd = [*mpijobs.MPIRUN, "-x", f"MALLOCCOUNT_DIR={counts}", "-x", f"LD_PRELOAD={preload}",
           "-x", f"MPISCOPE_OUT={counts / 'trace'}", "-np", "2", str(exe), str(iterations)]
    job = mpijobs.run(cmd, traced=False)
    assert job.returncode == 0, job.stderr
    files = [f for f in counts.iterdir() if f.name.isdigit()]
    assert len(files) >= 2  # the two ranks (mpirun/orted are not given the shim)
    return sum(int(f.read_text()) for f in files)


def test_no_allocation_per_event(programs, tmp_path: Path) -> None:
    shim = tmp_path / "libmalloccount.so"
    subprocess.run(["cc", "-O2", "-fPIC", "-shared", "-o", str(shim),
                    str(mpijobs.PROGRAMS / "malloccount.c")], check=True, capture_output=True)
    exe = programs["loop.c"]
    few, many = 500, 5000
    added = {n: mallocs(shim, exe, n, True, tmp_path) - mallocs(shim, exe, n, False, tmp_path)
             for n in (few, many)}
    # 4.1 wrapped calls and ~14 events per iteration and rank: 9000 iterations more
    # would add tens of thousands of allocations if any were per call
    assert abs(added[many] - added[few]) < 100, added
