"""Where the trace goes: the default directory, an existing one, MPISCOPE_VERBOSE."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc


def test_default_directory_is_one_per_job(programs, tmp_path: Path) -> None:
    """Without MPISCOPE_OUT: ./mpiscope-YYYYmmdd-HHMMSS, the same for every rank."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPISCOPE")}
    env["LD_PRELOAD"] = mpijobs.interposer_lib()
    proc = subprocess.run([*mpijobs.MPIRUN, "-np", "4", str(programs["colls.c"])],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=mpijobs.TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    (out,) = list(tmp_path.iterdir())
    assert re.fullmatch(r"mpiscope-\d{8}-\d{6}", out.name)
    t = tc.read_both(out)
    tc.check_definitions(t, 4)


def test_existing_trace_is_moved_aside(programs, tmp_path: Path) -> None:
    """README "Output directory": never deleted, never mixed: the earlier run goes to
    DIR.1 (rank 0 says so, once) and the new one is written into a clean DIR."""
    out = tmp_path / "trace"
    for iterations in (30, 20):
        job = mpijobs.run([str(programs["loop.c"]), str(iterations)], np=2, out=out)
        assert job.returncode == 0, job.stderr
    assert [line for line in job.stderr.splitlines() if "mpiscope" in line] == [
        f"mpiscope: the earlier run in {out} was moved to {out}.1"]
    for trace, iterations in ((out, 20), (tmp_path / "trace.1", 30)):
        t = tc.read_both(trace)
        for r in range(2):
            assert t.enters(r)["MPI_Allreduce"] == iterations


def test_verbose_names_the_trace_once(programs, tmp_path: Path) -> None:
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["loop.c"]), "5"], np=2, out=out,
                      env={"MPISCOPE_VERBOSE": "1"})
    assert job.returncode == 0, job.stderr
    lines = [line for line in job.stderr.splitlines() if "mpiscope" in line]
    assert lines[0] == f"mpiscope: trace written to {out}/traces.otf2"
    # and what encoding rank 0's events into OTF2 cost (5 iterations: no mid-run flush)
    assert len(lines) == 2
    assert re.fullmatch(r"mpiscope: rank 0: \d+ events encoded in [0-9.]+ ms "
                        r"\(0 flushes during the run\), (tsc|monotonic) clock", lines[1])
