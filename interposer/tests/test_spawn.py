"""A job that spawns another (programs/spawn.c: 2 ranks spawn 2 children, which talk to
their parents over the intercommunicator and reduce among themselves) keeps both traces:
the children inherit MPISCOPE_OUT, where the parents' run is in progress, and write
their own run in DIR/spawn-1 instead of taking the parents' for an earlier run (they once
moved it to DIR.1 and the parents' trace was lost). `mpiscope analyze DIR` reads the
spawned run as part of the job (`spawned`, its ranks named "spawn-1 rank 0", when it
started in the parents' run); `mpiscope analyze DIR/spawn-1` reads it alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mpiscope_testing import mpijobs, traceread
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
    doc, text = _analyze(out, tmp_path / "a.json")
    assert len(doc["ranks"]) == 2
    [job] = doc["spawned"]
    assert (job["name"], job["path"], job["num_ranks"]) == ("spawn-1", str(out / "spawn-1"), 2)
    assert [(r["rank"], r["label"]) for r in job["ranks"]] == [(0, "spawn-1 rank 0"),
                                                               (1, "spawn-1 rank 1")]
    calls = {f["name"]: f["calls"] for f in job["functions"]}
    assert calls["MPI_Allreduce"] == 2 and "MPI_Comm_spawn" not in calls
    for r in job["ranks"]:  # the contract's parts, as for the parents' ranks
        parts = sum(r[f"{p}_s"] for p in ("compute", "communication", "synchronization",
                                           "io"))
        assert parts == pytest.approx(r["total_s"], rel=0.01)
    assert {"wait_states", "findings", "critical_path", "warnings"} <= set(job)
    # both runs on one kernel's monotonic clock: the start is known, and equals what the
    # archives' events say (the children's first event against the parents' first)
    assert job["start_offset_unknown"] is None
    first = min(e.time for evs in children.events.values() for e in evs)
    origin = min(e.time for evs in parents.events.values() for e in evs)
    assert job["start_offset_s"] == pytest.approx((first - origin) / 1e9, abs=1e-9)
    # and it lines up: the children's rank 0 began its MPI_Init while the parents' rank 0
    # was in MPI_Comm_spawn (the spawn returns only once the children are in MPI_Init)
    spawn = [e.time for e in parents.events[0] if e.kind in ("Enter", "Leave")
             and e.get("region") == "MPI_Comm_spawn"]
    init = next(e.time for e in children.events[0] if e.kind == "Enter")
    assert spawn[0] <= init <= spawn[1]
    assert [w for w in doc["warnings"] if "spawned" in w] == [
        "1 job(s) this one spawned (MPI_Comm_spawn), each with an MPI_COMM_WORLD of its own, "
        "are analyzed on their own under `spawned` (ranks named like 'spawn-1 rank 0'): "
        "spawn-1 (2 ranks); every other result covers this job's ranks only, and messages "
        "between the jobs are unmatched on both sides"]
    assert "Spawned job spawn-1" in text and "into this run" in text
    assert "spawn-1 rank 0" in text and "spawn-1 rank 1" in text
    b = subprocess.run(["mpiscope", "analyze", str(out / "spawn-1"), "--json",
                        str(tmp_path / "b.json")], capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stderr
    assert len(json.loads((tmp_path / "b.json").read_text())["ranks"]) == 2


def test_a_spawned_job_on_another_clock_has_an_unknown_start(programs, tmp_path) -> None:
    """A job whose rank 0 ran on another clock than its parent's (another host, boot or
    time namespace; made here by renaming the children's clock in their anchor file, as
    their MPISCOPE::CLOCK would read) is still read as part of the run, with its start
    said to be unknown rather than computed from clocks that do not line up."""
    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["spawn.c"])], np=2, out=out)
    assert job.returncode == 0, job.stderr[-3000:]
    anchor = out / "spawn-1" / "traces.otf2"
    clock = traceread.archive_properties(out / "spawn-1")["MPISCOPE::CLOCK"]
    assert clock == traceread.archive_properties(out)["MPISCOPE::CLOCK"]
    assert clock.startswith("CLOCK_MONOTONIC boot ")
    other = clock.replace("CLOCK_MONOTONIC boot ", "CLOCK_MONOTONIC boot X", 1)[:len(clock)]
    data = anchor.read_bytes()
    assert data.count(clock.encode()) == 1
    anchor.write_bytes(data.replace(clock.encode(), other.encode()))
    doc, text = _analyze(out, tmp_path / "a.json")
    [spawned] = doc["spawned"]
    assert spawned["start_offset_s"] is None
    assert "another clock" in spawned["start_offset_unknown"]
    assert [r["label"] for r in spawned["ranks"]] == ["spawn-1 rank 0", "spawn-1 rank 1"]
    assert "Spawned job spawn-1" in text and "start within this run unknown" in text
    # an archive that does not name its clock (another tool's, an older mpiscope's)
    data = anchor.read_bytes()
    assert data.count(b"MPISCOPE::CLOCK") == 1
    anchor.write_bytes(data.replace(b"MPISCOPE::CLOCK", b"MPISCOPE::OTHER"))
    doc, _ = _analyze(out, tmp_path / "b.json")
    [spawned] = doc["spawned"]
    assert spawned["start_offset_s"] is None
    assert "does not name its clock" in spawned["start_offset_unknown"]


def test_spawned_children_on_mpich(tmp_path) -> None:
    """The same job under MPICH, where its launcher can spawn: skipped where MPICH cannot
    spawn even untraced (hydra without a process manager able to add processes)."""
    if not (mpijobs.have("mpicc.mpich") and mpijobs.have("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpicc.mpich / mpiexec.mpich missing)")
    exe = mpijobs.build("spawn.c", tmp_path, ["mpicc.mpich", "-g", "-O0"])
    plain = mpijobs.run([str(exe)], np=2, traced=False, mpi="mpich",
                        launcher=mpijobs.MPIEXEC_MPICH, timeout=60)
    if plain.returncode != 0:
        why = ([line for line in plain.stderr.splitlines() if "spawn" in line.lower()]
               or [f"exit code {plain.returncode}"])[-1]
        pytest.skip(f"MPICH cannot run MPI_Comm_spawn here even untraced: {why.strip()}")
    out = tmp_path / "trace"
    job = mpijobs.run([str(exe)], np=2, out=out, mpi="mpich", launcher=mpijobs.MPIEXEC_MPICH)
    assert job.returncode == 0, job.stderr[-3000:]
    assert mpijobs.sorted_lines(job.stdout) == mpijobs.sorted_lines(plain.stdout)
    doc, text = _analyze(out, tmp_path / "a.json")
    [spawned] = doc["spawned"]
    assert [r["label"] for r in spawned["ranks"]] == ["spawn-1 rank 0", "spawn-1 rank 1"]
    assert spawned["start_offset_unknown"] is None and spawned["start_offset_s"] >= 0
    assert "Spawned job spawn-1" in text


def _analyze(trace, json_out) -> tuple[dict, str]:
    """`mpiscope analyze` as a user runs it: the JSON and the terminal summary."""
    a = subprocess.run(["mpiscope", "analyze", str(trace), "--no-cache", "--json",
                        str(json_out)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "160"})
    assert a.returncode == 0, a.stderr
    return json.loads(json_out.read_text()), a.stdout


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
    doc, text = _analyze(out, tmp_path / "a.json")
    assert [(j["name"], j["num_ranks"], [r["label"] for r in j["ranks"]]) for j in
            doc["spawned"]] == [(d, 2, [f"{d} rank 0", f"{d} rank 1"])
                                for d in ("spawn-1", "spawn-2")]
    for j in doc["spawned"]:
        assert j["start_offset_unknown"] is None and 0 <= j["start_offset_s"]
        assert {f["name"]: f["calls"] for f in j["functions"]}["MPI_Init_thread"] == 2
    assert "Spawned job spawn-2" in text and "spawn-2 rank 1" in text
