"""A job that dies (MPI_Abort, a rank exiting early) is analyzed as far as it goes.

Real 3-rank runs of programs/died.c under `mpiscope run`: every rank that can still run
code leaves DIR/rank<N>/traces.otf2, and `mpiscope analyze DIR` reads them as one trace,
matching messages and collective instances across the ranks' archives.

Open MPI ends the other ranks of an aborted job with SIGTERM and, 1 s later, SIGKILL
(`odls_base_sigkill_timeout`); a rank still writing its archive then is lost. The abort
run gives them `mpijobs.SALVAGE_GRACE_S` (10 s: a busy machine's margin) so that all
three archives are there to be checked; the early-exit run keeps Open MPI's defaults, so
any of the blocked ranks may be missing and the test checks what the user gets either
way.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpiscope.archive import reader, salvaged
from mpiscope_testing.mpijobs import SALVAGE_GRACE_S
from mpiscope_testing.scenarios import analyze_json, compile_program

RANKS = 3
ROUNDS = 4  # died.c
RING = [(0, 1), (1, 2), (2, 0)]  # (sender, receiver) of the ring exchange, tag 1
HALF = (2, 0)  # the Send on the split communicator {2, 0}, tag 7
HOST = os.environ.get("MPISCOPE_HOSTNAME") or socket.gethostname()
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


@dataclass
class Job:
    out: Path
    traced: subprocess.CompletedProcess
    bare: subprocess.CompletedProcess


def mpirun(exe: Path, mode: str, kill_after_s: int | None) -> list[str]:
    grace = ["--mca", "odls_base_sigkill_timeout", str(kill_after_s)] if kill_after_s else []
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", *grace, "-np", str(RANKS),
            str(exe), mode]


def run_job(exe: Path, mode: str, out: Path, kill_after_s: int | None = None) -> Job:
    cmd = mpirun(exe, mode, kill_after_s)
    # (an aborted job with a grace of g s takes about 2g s: Open MPI's fixed sleeps)
    bare = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=180)
    traced = subprocess.run([sys.executable, "-m", "mpiscope", "run", "--out", str(out), "--",
                             *cmd], env=ENV, capture_output=True, text=True, timeout=180)
    return Job(out, traced, bare)


def analyze(path: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, dict]:
    return analyze_json(path, tmp, ENV)


def mpiscope_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("mpiscope:")]


# what an early exit's stderr always says, traced or not: the program's own line and
# mpirun's report of the first rank to exit non-zero, which rank and its exit code (the
# rest of Open MPI's report, and its order, can depend on which of the other ranks it
# stopped first)
EARLY_EXIT_LINES = ("rank 2 exiting early", "exited with non-zero status", "Process name:",
                    "Exit code:")


def invariant(stderr: str) -> list[str]:
    """The EARLY_EXIT_LINES in stderr (the job id blanked)."""
    return sorted(re.sub(r"\[\[\d+,", "[[N,", " ".join(line.split()))
                  for line in stderr.splitlines()
                  if not line.startswith("mpiscope:") and any(k in line for k in EARLY_EXIT_LINES))


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_program("died", tmp_path_factory.mktemp("died"))


@pytest.fixture(scope="module")
def aborted(exe: Path, tmp_path_factory: pytest.TempPathFactory) -> Job:
    return run_job(exe, "abort", tmp_path_factory.mktemp("abort") / "trace",
                   kill_after_s=SALVAGE_GRACE_S)


@pytest.fixture(scope="module")
def exited(exe: Path, tmp_path_factory: pytest.TempPathFactory) -> Job:
    return run_job(exe, "exit", tmp_path_factory.mktemp("exit") / "trace")


def check_breakdown(report: dict) -> None:
    for row in report["ranks"]:
        parts = row["compute_s"] + row["communication_s"] + row["synchronization_s"]
        assert parts == pytest.approx(row["total_s"], rel=0.01, abs=1e-9), row


def nxn_wait_s(trace) -> float:
    """Wait at N x N collectives from the merged instances (Scalasca: last enter of the
    instance minus own enter, at most the call's duration)."""
    c = trace.collectives[trace.collectives["function"] == "MPI_Allreduce"]
    last_in = c.groupby("instance")["start"].transform("max")
    return float(np.clip(last_in - c["start"], 0, c["end"] - c["start"]).sum()) / 1e9


def test_aborted_job_is_analyzed_as_one_trace(aborted: Job, tmp_path: Path) -> None:
    job = aborted
    # the job as it would be untraced: MPI_Abort's exit code, the program's stderr
    assert job.traced.returncode == job.bare.returncode == 3, job.traced.stderr
    assert "rank 1 aborting" in job.traced.stderr and "rank 1 aborting" in job.bare.stderr
    assert mpiscope_lines(job.traced.stderr) == [
        f"mpiscope: job ended without MPI_Finalize; ranks 0, 1, 2 of 3 saved per-rank traces "
        f"in {job.out}/rank<N>/; `mpiscope analyze {job.out}` reads them as one trace"]
    assert not (job.out / "traces.otf2").exists()

    proc, rep = analyze(job.out, tmp_path)
    assert ("ranks cut short (no MPI_Finalize or truncated events): 0, 1, 2; analyzed as "
            "far as their events go") in proc.stderr
    assert rep["meta"]["num_ranks"] == 3 and rep["meta"]["truncated_ranks"] == [0, 1, 2]
    assert [(r["rank"], r["host"]) for r in rep["ranks"]] == [(0, HOST), (1, HOST), (2, HOST)]
    assert all(r["total_s"] > 0 for r in rep["ranks"])
    check_breakdown(rep)
    # every message of the program, matched across the ranks' archives on one time base
    assert rep["messages"] == {"matched": ROUNDS * (len(RING) + 1), "unmatched_sends": 0,
                               "unmatched_receives": 0}
    assert rep["clock_skew"]["violations"] == 0
    assert rep["comm_matrix"] and {(m["send_rank"], m["recv_rank"]): m["messages"]
                                   for m in rep["comm_matrix"]} == {
        (0, 1): ROUNDS, (1, 2): ROUNDS, (2, 0): 2 * ROUNDS}

    trace = reader.load(job.out, use_cache=False)
    msgs = trace.messages
    assert (msgs["recv_leave"] >= msgs["send_enter"]).all()
    assert (msgs["recv_time"] >= msgs["send_time"]).all()
    # communicators by the id agreed at creation: rank 1's half and the {2, 0} half have
    # the same OTF2 ref in their own archives but are different communicators
    members = {int(c.comm): list(c.members) for c in trace.comms.itertuples()}
    half = msgs[msgs["tag"] == 7]
    assert len(half) == ROUNDS and set(zip(half["send_rank"], half["recv_rank"],
                                           strict=True)) == {HALF}
    assert members[int(half["comm"].iloc[0])] == [2, 0]
    coll = trace.collectives[trace.collectives["function"] == "MPI_Allreduce"]
    per = coll.groupby("instance").agg(comm=("comm", "first"), ranks=("rank", frozenset))
    shapes = sorted((tuple(members[c]), tuple(sorted(r))) for c, r in
                    zip(per["comm"], per["ranks"], strict=True))
    assert shapes == sorted([((0, 1, 2), (0, 1, 2))] * ROUNDS + [((2, 0), (0, 2))] * ROUNDS
                            + [((1,), (1,))] * ROUNDS)
    # wait at N x N comes from instances spanning the ranks' archives
    assert rep["wait_states"]["wait_at_nxn_s"] > 0
    assert rep["wait_states"]["wait_at_nxn_s"] == pytest.approx(nxn_wait_s(trace), rel=1e-6)
    assert trace.calls.groupby("rank")["function"].last().tolist() == [
        "MPI_Barrier", "MPI_Abort", "MPI_Barrier"]


def test_rank_exiting_early(exited: Job, tmp_path: Path) -> None:
    """Rank 2 exits(1) without MPI_Finalize while ranks 0 and 1 wait for it in a receive:
    Open MPI aborts the job (exit code 1); rank 2 always leaves its trace, the blocked
    ranks do if they finish writing theirs before Open MPI kills them, and otherwise
    `mpiscope analyze` recovers them from their crash-safe logs."""
    job = exited
    assert job.traced.returncode == job.bare.returncode == 1, job.traced.stderr
    assert len(invariant(job.bare.stderr)) == len(EARLY_EXIT_LINES), job.bare.stderr
    assert invariant(job.traced.stderr) == invariant(job.bare.stderr)
    assert "rank 2 exiting early" in job.traced.stderr
    present = sorted(salvaged.archives(job.out))
    assert 2 in present
    lost = [r for r in range(RANKS) if r not in present]
    line = (f"{'ranks' if len(present) > 1 else 'rank'} {', '.join(map(str, present))} of 3 "
            f"saved per-rank traces in {job.out}/rank<N>/")
    assert len(mpiscope_lines(job.traced.stderr)) == 1
    assert line in job.traced.stderr
    assert (f"(none from {'ranks' if len(lost) > 1 else 'rank'} "
            f"{', '.join(map(str, lost))}: killed before writing one; `mpiscope analyze` "
            f"recovers" in job.traced.stderr) == bool(lost)

    proc, rep = analyze(job.out, tmp_path)
    assert "ranks cut short (no MPI_Finalize or truncated events): 0, 1, 2" in proc.stderr
    # a rank killed before it finished writing its trace left its crash-safe log, which
    # analyze recovered first (test_killed_rank.py): every rank is there
    for r in lost:
        assert f"mpiscope: recovered rank {r} up to its kill" in proc.stderr
    present = sorted(salvaged.archives(job.out))
    assert present == list(range(RANKS))
    assert [(r["rank"], r["host"]) for r in rep["ranks"]] == [
        (r, HOST if r in present else "unknown") for r in range(RANKS)]
    assert [r["total_s"] > 0 for r in rep["ranks"]] == [r in present for r in range(RANKS)]
    check_breakdown(rep)
    # messages between ranks that both left a trace are matched; the others are reported
    edges = RING + [HALF]
    both = sum(s in present and r in present for s, r in edges)
    one = sum((s in present) != (r in present) for s, r in edges)
    m = rep["messages"]
    assert m["matched"] == ROUNDS * both
    assert m["unmatched_sends"] + m["unmatched_receives"] == ROUNDS * one
    assert rep["clock_skew"]["violations"] == 0
    trace = reader.load(job.out, use_cache=False)
    world = trace.collectives[(trace.collectives["function"] == "MPI_Allreduce")
                              & (trace.collectives["comm"] == 0)]
    assert world.groupby("instance")["rank"].apply(sorted).tolist() == [present] * ROUNDS


def test_single_rank_archive_still_reads(aborted: Job, tmp_path: Path) -> None:
    """DIR/rank1 alone: rank 1's events, the others defined but empty."""
    trace = reader.load(aborted.out / "rank1", use_cache=False)
    assert trace.meta.num_ranks == 3 and trace.meta.truncated_ranks == [0, 1, 2]
    assert trace.ranks["host"].tolist() == ["unknown", HOST, "unknown"]
    assert set(trace.calls["rank"]) == {1}
    assert trace.calls["function"].iloc[-1] == "MPI_Abort"
    _, rep = analyze(aborted.out / "rank1", tmp_path)
    assert rep["messages"]["matched"] == 0
    assert rep["messages"]["unmatched_sends"] == ROUNDS  # to rank 2, who is not in it


def test_merged_trace_is_cached_until_an_archive_changes(aborted: Job, tmp_path: Path) -> None:
    d = tmp_path / "trace"
    shutil.copytree(aborted.out, d)
    fresh = reader.load(d, use_cache=False)
    first = reader.load(d)
    manifest = d / ".mpiscope-cache" / "manifest.json"
    assert manifest.is_file()
    again = reader.load(d)
    for name in ("calls", "p2p", "messages", "collectives", "ranks", "comms"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(fresh, name))
        pd.testing.assert_frame_equal(getattr(first, name), getattr(fresh, name))
    assert again.meta == fresh.meta
    # a rank's archive that changes (here: rank 0's is gone) is not served from the cache
    shutil.rmtree(d / "rank0")
    changed = reader.load(d)
    assert changed.ranks["host"].tolist() == ["unknown", HOST, HOST]
    assert len(changed.messages) < len(fresh.messages)


def test_earlier_jobs_rank_dirs_are_left_out(aborted: Job, exited: Job, tmp_path: Path) -> None:
    """The interposer does not clear rank<N>/ of an earlier job that died in the same
    directory: only the newest job's archives are merged."""
    old, new = sorted([aborted.out, exited.out],
                      key=lambda d: max(a.stat().st_mtime_ns
                                        for a in salvaged.archives(d).values()))
    kept = salvaged.archives(new)
    newest = max(kept, key=lambda r: kept[r].stat().st_mtime_ns)
    stale = next(r for r in salvaged.archives(old) if r != newest)
    d = tmp_path / "trace"
    shutil.copytree(new, d)  # copies keep their mtimes
    shutil.rmtree(d / f"rank{stale}", ignore_errors=True)
    shutil.copytree(old / f"rank{stale}", d / f"rank{stale}")
    trace = reader.load(d, use_cache=False)
    assert trace.ranks["host"].iloc[stale] == "unknown"
    assert set(trace.calls["rank"]) == set(kept) - {stale}
