"""A rank killed outright (kill -9) is analyzed up to its kill, from its crash-safe log.

Real 3-rank runs of programs/killed.c under `mpiscope run`: every rank loops over a
Sendrecv and two Allreduces (MPI_COMM_WORLD and a split communicator named "half") and
prints each iteration; the test kills rank 1 with SIGKILL
once it has printed some iterations. mpirun then stops ranks 0 and 2 with SIGTERM and
they salvage their traces (test_died_jobs.py); rank 1 can write nothing, but its event
buffer was a window onto DIR/.mpiscope-live/rank1.events, which `mpiscope analyze DIR`
turns into DIR/rank1/traces.otf2 before reading the job as one trace.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope.archive import reader, recover, salvaged
from mpiscope.archive.trace import Trace
from mpiscope_testing import livelog
from mpiscope_testing.killing import ENV, KILLED, MPIRUN, RANKS, Killed, run_and_kill
from mpiscope_testing.scenarios import analyze_json, compile_program

HOST = os.environ.get("MPISCOPE_HOSTNAME") or socket.gethostname()
SOURCE = Path(__file__).parent / "programs" / "killed.c"


def callsite(marker: str) -> str:
    """`killed.c:LINE` of the line marked CALLSITE:<marker>."""
    lines = SOURCE.read_text().splitlines()
    (line,) = [i + 1 for i, text in enumerate(lines) if f"CALLSITE:{marker} " in text]
    return f"killed.c:{line}"
def analyze(path: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, dict]:
    return analyze_json(path, tmp, ENV)


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_program("killed", tmp_path_factory.mktemp("killed"))


@pytest.fixture(scope="module")
def killed(exe: Path, tmp_path_factory: pytest.TempPathFactory) -> Killed:
    return run_and_kill(exe, tmp_path_factory.mktemp("kill9") / "trace", after=40)


@pytest.fixture(scope="module")
def killed_flushing(exe: Path, tmp_path_factory: pytest.TempPathFactory) -> Killed:
    """A 4 KiB buffer holds ~20 iterations: the kill comes after several mid-run flushes,
    each moving the buffer on to the next window of the log."""
    return run_and_kill(exe, tmp_path_factory.mktemp("kill9-flush") / "trace", after=100,
                        env={"MPISCOPE_BUFFER_SIZE": "4K"})


def check_killed_rank(job: Killed, tmp: Path, init: str = "MPI_Init") -> tuple[dict, Trace]:
    assert job.returncode == 128 + signal.SIGKILL, job.stderr  # as untraced: mpirun's
    assert "exited on signal 9" in job.stderr
    # the killed rank left its crash-safe log and no trace (and so may a rank that
    # mpirun's own SIGKILL caught while it was still writing its salvaged trace)
    lost = recover.orphaned(job.out)
    assert KILLED in lost
    assert re.search(r"\(none from ranks? [0-9, ]+: killed before writing one; `mpiscope "
                     r"analyze` recovers ranks? [0-9, ]+ up to the kill from (its|their) "
                     r"crash-safe log\)", job.stderr), job.stderr
    assert (job.out / ".mpiscope-live" / f"rank{KILLED}.events").is_file()

    proc, rep = analyze(job.out, tmp)
    notice = [line for line in proc.stderr.splitlines() if "recovered rank" in line]
    assert [line.split()[3] for line in notice] == [str(r) for r in lost], proc.stderr
    assert all(line.startswith("mpiscope: recovered rank ") and " up to its kill from its "
               "crash-safe log in " in line for line in notice)
    assert rep["meta"]["num_ranks"] == RANKS
    assert [(r["rank"], r["host"]) for r in rep["ranks"]] == [(r, HOST) for r in range(RANKS)]
    row = rep["ranks"][KILLED]
    assert row["total_s"] > 0
    parts = row["compute_s"] + row["communication_s"] + row["synchronization_s"]
    assert parts == pytest.approx(row["total_s"], rel=0.01, abs=1e-9)
    assert not (job.out / ".mpiscope-live").exists()  # every log served

    trace = reader.load(job.out, use_cache=False)
    mine = trace.calls[trace.calls["rank"] == KILLED]
    # every iteration it printed, from the first one on (also those flushed mid-run), each
    # call from its call site, resolved after the process was gone
    sites = mine["callsite"].astype(str).value_counts()
    for marker in ("ring", "world", "half"):
        assert sites[callsite(marker)] >= job.printed, sites
    assert mine["function"].iloc[0] == init
    assert set(mine["function"]) == {init, "MPI_Comm_split", "MPI_Comm_set_name",
                                     "MPI_Sendrecv", "MPI_Allreduce"}
    # its communicators as it defined them: "half" is {1} alone, named by the program
    comms = {int(c.comm): (c.name, tuple(c.members)) for c in trace.comms.itertuples()}
    on_half = mine[mine["callsite"].astype(str) == callsite("half")]
    assert {comms[int(c)] for c in on_half["comm"]} == {("half", (KILLED,))}
    # its messages pair with its neighbours' (all but those cut short by the kill)
    msgs = trace.messages
    to_me = msgs[(msgs["recv_rank"] == KILLED)]
    assert len(to_me) >= job.printed
    return rep, trace


def test_killed_rank_is_analyzed_up_to_its_kill(killed: Killed, tmp_path: Path) -> None:
    rep, _ = check_killed_rank(killed, tmp_path)
    # recovery is idempotent: nothing left to do, the same analysis
    again = subprocess.run([sys.executable, "-m", "mpiscope", "recover", str(killed.out)],
                           env=ENV, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing to recover" in again.stderr
    proc, rep2 = analyze(killed.out, tmp_path)
    assert "recovered rank" not in proc.stderr
    assert rep2["ranks"] == rep["ranks"] and rep2["functions"] == rep["functions"]


def test_events_flushed_before_the_kill_are_there(killed_flushing: Killed,
                                                  tmp_path: Path) -> None:
    _, trace = check_killed_rank(killed_flushing, tmp_path)
    # the recovered rank's mid-run flushes are in its trace as in the others'
    flushes = trace.flushes.groupby("rank").size()
    assert flushes.get(KILLED, 0) >= 3


def test_killed_rank_thread_multiple(exe: Path, tmp_path: Path) -> None:
    """Under MPI_THREAD_MULTIPLE (events stamped under the interposer's lock), with
    mid-run flushes: the same."""
    job = run_and_kill(exe, tmp_path / "trace", after=60, env={"MPISCOPE_BUFFER_SIZE": "4K"},
                       args=("100000", "2000", "mt"))
    check_killed_rank(job, tmp_path, init="MPI_Init_thread")


def test_whole_job_killed(exe: Path, tmp_path: Path) -> None:
    """Every rank killed outright (a batch system's SIGKILL): no rank writes anything,
    and the whole job is still analyzed up to the kill."""
    job = run_and_kill(exe, tmp_path / "trace", after=20, ranks=2, victims=(0, 1))
    assert job.returncode == 128 + signal.SIGKILL, job.stderr
    assert ("mpiscope: job ended without MPI_Finalize and no rank wrote its trace; "
            f"`mpiscope analyze {job.out}` recovers ranks 0, 1 up to the kill") in job.stderr
    proc, rep = analyze(job.out, tmp_path)
    assert proc.stderr.count("up to its kill from its crash-safe log") == 2, proc.stderr
    assert [(r["rank"], r["host"]) for r in rep["ranks"]] == [(0, HOST), (1, HOST)]
    assert all(r["total_s"] > 0 for r in rep["ranks"])
    calls = {f["name"]: f["calls"] for f in rep["functions"]}
    assert calls["MPI_Sendrecv"] >= 2 * job.printed
    assert rep["messages"]["matched"] >= 2 * job.printed


def test_recover_command(exe: Path, tmp_path: Path) -> None:
    """`mpiscope recover DIR` does what analyze does first, and says so."""
    job = run_and_kill(exe, tmp_path / "trace", after=10)
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "recover", str(job.out)],
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"mpiscope: recovered rank {KILLED} up to its kill" in proc.stderr
    assert KILLED in salvaged.archives(job.out) and recover.orphaned(job.out) == []


def test_clean_run_leaves_no_live_log(exe: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace"
    proc = subprocess.run([*MPIRUN, "-np", "2", str(exe), "5", "0"], capture_output=True,
                          text=True, timeout=120,
                          env={**ENV, "LD_PRELOAD": lib(), "MPISCOPE_OUT": str(out)})
    assert proc.returncode == 0, proc.stderr
    assert (out / "traces.otf2").is_file()
    assert not (out / ".mpiscope-live").exists()


def lib() -> str:
    return subprocess.run([sys.executable, "-m", "mpiscope", "lib"], check=True, env=ENV,
                          capture_output=True, text=True).stdout.strip()


def without_pids(stdout: str) -> list[str]:
    return sorted(re.sub(r"pid \d+", "pid P", line) for line in stdout.splitlines())


def limit_file_size(limit: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_unusable_log_location_falls_back(exe: Path, tmp_path: Path) -> None:
    """A log that cannot be reserved (here: a file size limit below the 32 MiB window,
    EFBIG) costs the crash safety, not the job or its trace: one warning, the rest as
    untraced."""
    out = tmp_path / "trace"
    cmd = [*MPIRUN, "-np", "2", str(exe), "20", "0"]
    bare = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV,
                          preexec_fn=limit_file_size(16 << 20))
    traced = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                            env={**ENV, "LD_PRELOAD": lib(), "MPISCOPE_OUT": str(out)},
                            preexec_fn=limit_file_size(16 << 20))
    assert traced.returncode == bare.returncode == 0, traced.stderr
    assert without_pids(traced.stdout) == without_pids(bare.stdout)
    warnings = [line for line in traced.stderr.splitlines() if line.startswith("mpiscope:")]
    assert len(warnings) == 1, traced.stderr
    assert warnings[0].startswith(
        f"mpiscope: warning: crash-safe event log disabled in {out}: fallocate "), warnings
    assert "File too large" in warnings[0]
    assert (out / "traces.otf2").is_file() and not (out / ".mpiscope-live").exists()
    trace = reader.load(out, use_cache=False)
    assert (trace.calls["function"] == "MPI_Allreduce").sum() == 2 * 2 * 20


def test_full_file_system_falls_back(exe: Path, tmp_path: Path) -> None:
    """The same on a file system too small for the log (a 2 MiB tmpfs: ENOSPC)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)")
    try:
        out = mnt / "trace"
        proc = subprocess.run([*MPIRUN, "-np", "2", str(exe), "20", "0"], capture_output=True,
                              text=True, timeout=120,
                              env={**ENV, "LD_PRELOAD": lib(), "MPISCOPE_OUT": str(out)})
        assert proc.returncode == 0, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("mpiscope:")]
        assert len(warnings) == 1 and "No space left on device" in warnings[0], proc.stderr
        assert warnings[0].startswith(
            f"mpiscope: warning: crash-safe event log disabled in {out}: ")
        assert (out / "traces.otf2").is_file() and not (out / ".mpiscope-live").exists()
        trace = reader.load(out, use_cache=False)
        assert (trace.calls["function"] == "MPI_Allreduce").sum() == 2 * 2 * 20
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_compare_recovers_a_killed_rank_first(exe: Path, tmp_path: Path) -> None:
    """`compare` reads a job with a rank killed outright as `analyze` does: the rank is
    recovered from its log (one notice), then the job is compared, cut short, as one trace."""
    job = run_and_kill(exe, tmp_path / "trace", after=20)
    assert KILLED in recover.orphaned(job.out)
    md = tmp_path / "cmp.md"
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "compare", str(job.out),
                           str(job.out), "--md", str(md)], env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"mpiscope: recovered rank {KILLED} up to its kill" in proc.stderr
    assert "ranks cut short" in proc.stderr and "ranks cut short" in md.read_text()
    assert not recover.orphaned(job.out)


@pytest.mark.parametrize("suffix", ["events", "defs"])
def test_a_fifo_in_place_of_a_live_log_is_not_read(exe: Path, tmp_path: Path,
                                                   suffix: str) -> None:
    """A FIFO in place of a killed rank's log file (as in place of a trace file): the
    recovery would wait forever for a writer. `recover` says in one line that the rank
    cannot be recovered and why, exit 2; analyze says the same, analyzes the rest and
    lists the rank in its JSON `warnings`."""
    job = run_and_kill(exe, tmp_path / "trace", after=10)
    log = job.out / recover.LIVE_DIR / f"rank{KILLED}.{suffix}"
    assert log.is_file()
    log.unlink()
    os.mkfifo(log)
    why = f"rank {KILLED}: {log}: not a regular file"
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "recover", str(job.out)],
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"mpiscope: cannot recover {why} (log kept)" in proc.stderr.splitlines()
    proc, rep = analyze(job.out, tmp_path)
    assert f"mpiscope: warning: cannot recover {why} (analyzed without it; log kept)" in \
        proc.stderr.splitlines() and "Traceback" not in proc.stderr
    assert "ranks cut short" in proc.stderr
    assert {r["rank"] for r in rep["ranks"]} == set(range(RANKS))
    assert KILLED not in salvaged.archives(job.out)  # nothing made up from the FIFO
    assert [w for w in rep["warnings"] if w.startswith(f"rank {KILLED} left a crash-safe")] \
        == [f"rank {KILLED} left a crash-safe log that could not be recovered, so the "
            f"analysis has none of its events ({why})"]


def test_a_damaged_log_is_refused_and_the_rest_analyzed(exe: Path, tmp_path: Path) -> None:
    """A killed rank's log damaged after the kill (here its communicator record claims 2^30
    name words, which once made the recovery read past its heap): `recover` refuses it in
    the tool's one line, naming the file, the byte and the problem, exit 2, the log kept;
    `analyze` says so in one line, analyzes the other ranks, and its JSON `warnings` say
    that rank 1's events are missing and why. Each later read says it again."""
    job = run_and_kill(exe, tmp_path / "trace", after=10)
    defs = job.out / recover.LIVE_DIR / f"rank{KILLED}.defs"
    data = bytearray(defs.read_bytes())
    (comm,) = livelog.of_type(bytes(data), "COMM")
    data[comm.at + 20: comm.at + 24] = (1 << 30).to_bytes(4, "little")  # its name words
    defs.write_bytes(data)
    why = (f"rank {KILLED}: {defs}: byte {comm.at + 20}: COMM record: 1073741824 name words "
           "where")

    proc = subprocess.run([sys.executable, "-m", "mpiscope", "recover", str(job.out)],
                          env=ENV, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "cannot recover" in x]
    assert line.startswith(f"mpiscope: cannot recover {why}") and line.endswith("(log kept)")
    assert defs.read_bytes() == data and KILLED not in salvaged.archives(job.out)

    for _ in range(2):
        proc, rep = analyze(job.out, tmp_path)
        (line,) = [x for x in proc.stderr.splitlines() if "cannot recover" in x]
        assert line.startswith(f"mpiscope: warning: cannot recover {why}"), proc.stderr
        assert line.endswith("(analyzed without it; log kept)")
        rows = {r["rank"]: r for r in rep["ranks"]}
        assert sorted(rows) == list(range(RANKS))
        assert rows[KILLED]["host"] == "unknown" and rows[KILLED]["total_s"] == 0
        assert all(rows[r]["total_s"] > 0 and rows[r]["host"] == HOST
                   for r in rows if r != KILLED)
        (warning,) = [w for w in rep["warnings"] if w.startswith(f"rank {KILLED} left")]
        assert warning.startswith(f"rank {KILLED} left a crash-safe log that could not be "
                                  f"recovered, so the analysis has none of its events ({why}")
        assert defs.read_bytes() == data
