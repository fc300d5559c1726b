"""A job that spawns another (programs/spawn.c: 2 ranks spawn 2 children, which talk to
their parents over the intercommunicator and reduce among themselves) keeps both traces:
the children inherit MPISCOPE_OUT, where the parents' run is in progress, and write
their own run in DIR/spawn-1 instead of taking the parents' for an earlier run (they once
moved it to DIR.1 and the parents' trace was lost). `mpiscope analyze DIR` names the
spawned run in its warnings; `mpiscope analyze DIR/spawn-1` reads it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc


def test_spawned_children_write_their_own_run(programs, tmp_path) -> None:
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["spawn.c"])], np=2, out=out)
    assert job.returncode == 0, job.stderr[-3000:]
    assert mpijobs.sorted_lines(job.stdout) == ["child 0 sum 8", "child 1 sum 8",
                                                "parent 0 got 8", "parent 1 got 0"]
    assert "trace not written" not in job.stderr and "moved to" not in job.stderr
    assert not list(tmp_path.glob("trace.*"))  # nothing moved aside
    parents, children = tc.read_both(out), tc.read_both(out / "spawn-1")
    tc.check_well_formed(parents, 2)
    tc.check_well_formed(children, 2)
    for r in range(2):
        assert parents.enters(r)["MPI_Comm_spawn"] == 1
        assert children.enters(r)["MPI_Allreduce"] == 1
        assert "MPI_Comm_spawn" not in children.enters(r)
    for d in (out, out / "spawn-1"):
        p = subprocess.run(["otf2-print", str(d / "traces.otf2")], capture_output=True)
        assert p.returncode == 0
    a = subprocess.run(["mpiscope", "analyze", str(out), "--json", str(tmp_path / "a.json")],
                       capture_output=True, text=True, timeout=300)
    assert a.returncode == 0, a.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert len(doc["ranks"]) == 2
    assert [w for w in doc["warnings"] if "spawned" in w] == [
        "1 job(s) this one spawned (MPI_Comm_spawn) were traced as runs of their own, not "
        f"analyzed here: `mpiscope analyze {out / 'spawn-1'}`"]
    b = subprocess.run(["mpiscope", "analyze", str(out / "spawn-1"), "--json",
                        str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stderr
    assert len(json.loads((tmp_path / "b.json").read_text())["ranks"]) == 2


def test_a_new_run_moves_the_earlier_one_with_its_spawned_runs(programs, tmp_path) -> None:
    out = tmp_path / "trace"
    for _ in range(2):
        job = mpijobs.run([str(programs["spawn.c"])], np=2, out=out)
        assert job.returncode == 0, job.stderr[-3000:]
    # the second run's rank 0 moved the whole first run, its children's run included
    assert (tmp_path / "trace.1" / "traces.otf2").is_file()
    assert (tmp_path / "trace.1" / "spawn-1" / "traces.otf2").is_file()
    assert (out / "traces.otf2").is_file() and (out / "spawn-1" / "traces.otf2").is_file()
    assert not (out / "spawn-2").exists()


def test_mpi4py_pools_spawn_traced_jobs(tmp_path) -> None:
    """mpi4py.futures.MPIPoolExecutor and mpi4py.util.pool.Pool spawn their workers (from
    a thread of the parent, programs/py_spawn_pools.py): one job of 2 workers each, each
    traced in a run of its own; the parent's run stays whole."""
    pytest.importorskip("mpi4py")
    cmd = [sys.executable, str(mpijobs.PROGRAMS / "py_spawn_pools.py")]
    plain = mpijobs.run(cmd, np=1, traced=False)
    out = tmp_path / "trace"
    job = mpijobs.run(cmd, np=1, out=out)
    assert plain.returncode == job.returncode == 0, job.stderr[-3000:]
    assert mpijobs.sorted_lines(job.stdout) == mpijobs.sorted_lines(plain.stdout) == [
        "futures: sum of squares 285", "pool: sum of squares 2470"]
    assert "trace not written" not in job.stderr and not list(tmp_path.glob("trace.*"))
    assert sorted(p.name for p in out.glob("spawn-*")) == ["spawn-1", "spawn-2"]
    parent = tc.read_both(out)
    tc.check_well_formed(parent, 1)
    # the pools spawn from a thread of their own (a location of rank 0's)
    assert sum(parent.enters(loc).get("MPI_Comm_spawn", 0) for loc in parent.events) == 2
    for d in ("spawn-1", "spawn-2"):
        workers = tc.read_both(out / d)
        tc.check_well_formed(workers, 2)
        for r in range(2):
            assert workers.enters(r)["MPI_Init_thread"] == 1
    a = subprocess.run(["mpiscope", "analyze", str(out), "--json", str(tmp_path / "a.json")],
                       capture_output=True, text=True, timeout=300)
    assert a.returncode == 0, a.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert [w for w in doc["warnings"] if "spawned" in w] == [
        "2 job(s) this one spawned (MPI_Comm_spawn) were traced as runs of their own, not "
        f"analyzed here: `mpiscope analyze {out / 'spawn-1'}`, "
        f"`mpiscope analyze {out / 'spawn-2'}`"]
