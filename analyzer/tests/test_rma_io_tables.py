"""RMA and MPI-IO as the analysis sees them, on traces written with the records the
interposer writes (Score-P's conventions, standard OTF2): the reader's tables, `io_s` in
the breakdown, RMA and non-blocking-collective wait states with injected lateness, the
barrier-after-fence case and the list of what the analysis does not interpret."""

import json
import os
import subprocess

import pytest

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.tracegen import TraceBuilder

MS = 1_000_000  # ns


def load(tb: TraceBuilder, tmp_path, name="trace"):
    return reader.load(tb.write(tmp_path / name))


def mpiscope(*args):
    env = {k: v for k, v in os.environ.items()
           if k in ("PATH", "PYTHONPATH", "MPISCOPE_BUILD_DIR")}
    return subprocess.run(["mpiscope", *map(str, args)], capture_output=True, text=True,
                          env={**env, "COLUMNS": "200"}, timeout=300)


def framed(tb: TraceBuilder, end: int) -> None:
    """MPI_Init at 0..1 ms and MPI_Finalize at `end` on every rank."""
    for r in range(tb.num_ranks):
        tb.call(r, 0, 1 * MS, "MPI_Init")
        tb.call(r, end, end + MS, "MPI_Finalize")


# ---------------------------------------------------------------------------- reader
def rma_io_trace() -> TraceBuilder:
    tb = TraceBuilder(ranks=2)
    framed(tb, 100 * MS)
    win = tb.window(comm=0, name="halo window")
    fh = tb.file("/scratch/dump.bin", comm=0)
    for r in (0, 1):
        tb.enter(r, 2 * MS, "MPI_Win_create")
        tb.rma_win_create(r, 3 * MS, win)
        tb.leave(r, 3 * MS, "MPI_Win_create")
        tb.fence(r, 4 * MS, 5 * MS, win)
    # rank 0: put 800 B and get 16 B from rank 1, completed by the second fence
    tb.rma_call(0, 6 * MS, 7 * MS, "MPI_Put", win, target=1, nbytes=800, matching=1)
    tb.rma_call(0, 8 * MS, 9 * MS, "MPI_Get", win, target=1, nbytes=16, matching=2)
    tb.enter(0, 10 * MS, "MPI_Fetch_and_op")
    tb.rma_atomic(0, 10 * MS, win, 1, sent=8, received=8, matching=3)
    tb.rma_complete(0, 11 * MS, win, 3)
    tb.leave(0, 11 * MS, "MPI_Fetch_and_op")
    for r in (0, 1):
        tb.enter(r, 12 * MS, "MPI_Win_fence")
        tb.rma_coll_begin(r, 12 * MS)
        if r == 0:
            tb.rma_complete(0, 13 * MS, win, 1)
            tb.rma_complete(0, 13 * MS, win, 2)
        tb.rma_coll_end(r, 14 * MS, win)
        tb.leave(r, 14 * MS, "MPI_Win_fence")
    # passive target: rank 1 locks rank 0 exclusively and flushes
    tb.enter(1, 20 * MS, "MPI_Win_lock")
    tb.rma_lock(1, 20 * MS, "request", win, 0, lock_id=7)
    tb.rma_lock(1, 21 * MS, "acquire", win, 0, lock_id=7)
    tb.leave(1, 21 * MS, "MPI_Win_lock")
    tb.enter(1, 22 * MS, "MPI_Win_flush")
    tb.rma_sync(1, 22 * MS, win, 0)
    tb.leave(1, 23 * MS, "MPI_Win_flush")
    tb.enter(1, 24 * MS, "MPI_Win_unlock")
    tb.rma_lock(1, 25 * MS, "release", win, 0, lock_id=7)
    tb.leave(1, 25 * MS, "MPI_Win_unlock")
    # MPI-IO: open, a collective write, a non-blocking read completed by MPI_Wait, sync
    for r in (0, 1):
        tb.enter(r, 30 * MS, "MPI_File_open")
        tb.io_create(r, 31 * MS, fh)
        tb.leave(r, 31 * MS, "MPI_File_open")
        tb.io_call(r, 32 * MS, 40 * MS, "MPI_File_write_at_all", fh, "write", 4096,
                   matching=1, collective=True)
    tb.enter(0, 41 * MS, "MPI_File_iread_at")
    tb.io_begin(0, 41 * MS, fh, "read", 1024, matching=2, nonblocking=True)
    tb.io_issued(0, 42 * MS, fh, 2)
    tb.leave(0, 42 * MS, "MPI_File_iread_at")
    tb.enter(0, 43 * MS, "MPI_Wait")
    tb.io_complete(0, 45 * MS, fh, 1000, 2)  # a short read: 1000 of 1024 bytes
    tb.leave(0, 45 * MS, "MPI_Wait")
    tb.enter(1, 41 * MS, "MPI_File_sync")
    tb.io_begin(1, 41 * MS, fh, "flush", 0, matching=3)
    tb.io_complete(1, 44 * MS, fh, 0, 3)
    tb.leave(1, 44 * MS, "MPI_File_sync")
    return tb


def test_reader_tables_of_rma_and_io(tmp_path):
    t = load(rma_io_trace(), tmp_path)
    assert t.windows.to_dict("records") == [{"win": 0, "name": "halo window", "comm": 0}]
    assert t.files.to_dict("records") == [{"handle": 0, "name": "/scratch/dump.bin",
                                           "file": "/scratch/dump.bin",
                                           "paradigm": "MPI-IO", "comm": 0}]
    fn = t.calls["function"].astype(str)

    def call_of(rank, function, nth=0):
        return int(t.calls[(t.calls["rank"] == rank) & (fn == function)]["call"].iloc[nth])

    rma = t.rma.assign(op=t.rma["op"].astype(str))
    assert rma[["rank", "op", "win", "target", "bytes_sent", "bytes_recv", "matching",
                "time"]].to_dict("records") == [
        {"rank": 0, "op": "put", "win": 0, "target": 1, "bytes_sent": 800, "bytes_recv": 0,
         "matching": 1, "time": 6 * MS},
        {"rank": 0, "op": "get", "win": 0, "target": 1, "bytes_sent": 0, "bytes_recv": 16,
         "matching": 2, "time": 8 * MS},
        {"rank": 0, "op": "atomic", "win": 0, "target": 1, "bytes_sent": 8, "bytes_recv": 8,
         "matching": 3, "time": 10 * MS}]
    assert rma["call"].tolist() == [call_of(0, "MPI_Put"), call_of(0, "MPI_Get"),
                                    call_of(0, "MPI_Fetch_and_op")]
    fence2 = call_of(0, "MPI_Win_fence", 1)
    assert rma["complete_call"].tolist() == [fence2, fence2, call_of(0, "MPI_Fetch_and_op")]
    assert rma["complete_time"].tolist() == [13 * MS, 13 * MS, 11 * MS]

    s = t.rma_sync.assign(event=t.rma_sync["event"].astype(str))
    assert s[["rank", "event", "remote", "lock_type", "lock_id", "time"]].to_dict(
        "records") == [
        {"rank": 0, "event": "win_create", "remote": -1, "lock_type": -1, "lock_id": -1,
         "time": 3 * MS},
        {"rank": 0, "event": "fence", "remote": -1, "lock_type": -1, "lock_id": -1,
         "time": 5 * MS},
        {"rank": 0, "event": "fence", "remote": -1, "lock_type": -1, "lock_id": -1,
         "time": 14 * MS},
        {"rank": 1, "event": "win_create", "remote": -1, "lock_type": -1, "lock_id": -1,
         "time": 3 * MS},
        {"rank": 1, "event": "fence", "remote": -1, "lock_type": -1, "lock_id": -1,
         "time": 5 * MS},
        {"rank": 1, "event": "fence", "remote": -1, "lock_type": -1, "lock_id": -1,
         "time": 14 * MS},
        {"rank": 1, "event": "request_lock", "remote": 0, "lock_type": 0, "lock_id": 7,
         "time": 20 * MS},
        {"rank": 1, "event": "acquire_lock", "remote": 0, "lock_type": 0, "lock_id": 7,
         "time": 21 * MS},
        {"rank": 1, "event": "sync", "remote": 0, "lock_type": -1, "lock_id": -1,
         "time": 22 * MS},
        {"rank": 1, "event": "release_lock", "remote": 0, "lock_type": -1, "lock_id": 7,
         "time": 25 * MS}]
    assert s["call"].tolist()[-4:] == [call_of(1, "MPI_Win_lock")] * 2 + [
        call_of(1, "MPI_Win_flush"), call_of(1, "MPI_Win_unlock")]

    io = t.io.assign(mode=t.io["mode"].astype(str), file=t.io["file"].astype(str))
    assert io[["rank", "mode", "file", "collective", "nonblocking", "bytes_requested",
               "bytes", "start", "end"]].to_dict("records") == [
        {"rank": 0, "mode": "write", "file": "/scratch/dump.bin", "collective": True,
         "nonblocking": False, "bytes_requested": 4096, "bytes": 4096, "start": 32 * MS,
         "end": 40 * MS},
        {"rank": 0, "mode": "read", "file": "/scratch/dump.bin", "collective": False,
         "nonblocking": True, "bytes_requested": 1024, "bytes": 1000, "start": 41 * MS,
         "end": 45 * MS},
        {"rank": 1, "mode": "write", "file": "/scratch/dump.bin", "collective": True,
         "nonblocking": False, "bytes_requested": 4096, "bytes": 4096, "start": 32 * MS,
         "end": 40 * MS},
        {"rank": 1, "mode": "flush", "file": "/scratch/dump.bin", "collective": False,
         "nonblocking": False, "bytes_requested": 0, "bytes": 0, "start": 41 * MS,
         "end": 44 * MS}]
    assert io["call"].tolist()[:2] == [call_of(0, "MPI_File_write_at_all"),
                                       call_of(0, "MPI_File_iread_at")]
    assert io["complete_call"].tolist()[:2] == [call_of(0, "MPI_File_write_at_all"),
                                                call_of(0, "MPI_Wait")]

    # the calls carry kinds, bytes and (RMA) the window's communicator
    c = t.calls.assign(function=fn, kind=t.calls["kind"].astype(str)).set_index("call")
    expect = {  # call -> (kind, bytes_sent, bytes_recv)
        call_of(0, "MPI_Win_create"): ("rma", 0, 0),
        call_of(0, "MPI_Put"): ("rma", 800, 0),
        call_of(0, "MPI_Get"): ("rma", 0, 16),
        call_of(0, "MPI_Fetch_and_op"): ("rma", 8, 8),
        fence2: ("rma_sync", 0, 0),
        call_of(1, "MPI_Win_lock"): ("rma_sync", 0, 0),
        call_of(0, "MPI_File_open"): ("io", 0, 0),
        call_of(0, "MPI_File_write_at_all"): ("io", 4096, 0),
        call_of(0, "MPI_File_iread_at"): ("io", 0, 0),
        call_of(0, "MPI_Wait"): ("wait", 0, 1000),  # completes the read: gets its bytes
        call_of(1, "MPI_File_sync"): ("io", 0, 0),
    }
    got = {k: (c.at[k, "kind"], int(c.at[k, "bytes_sent"]), int(c.at[k, "bytes_recv"]))
           for k in expect}
    assert got == expect
    assert c.at[call_of(0, "MPI_Put"), "comm"] == 0
    assert c.at[fence2, "comm"] == 0

    # the cache gives the same tables back
    again = reader.load(t.path)
    for name in ("windows", "files", "rma", "rma_sync", "io"):
        assert again is not t
        a, b = getattr(again, name), getattr(t, name)
        assert a.to_dict("list") == b.to_dict("list"), name


def test_window_creation_bracketed_as_a_collective_is_not_a_fence(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 100 * MS)
    win = tb.window()
    for r, t in ((0, 10), (1, 60)):  # rank 1 creates it 50 ms later
        tb.enter(r, t * MS, "MPI_Win_allocate")
        tb.rma_coll_begin(r, t * MS)
        tb.rma_win_create(r, (t + 1) * MS, win)
        tb.rma_coll_end(r, 61 * MS, win, op="CREATE_HANDLE_AND_ALLOCATE")
        tb.leave(r, 61 * MS, "MPI_Win_allocate")
    t = load(tb, tmp_path)
    assert t.rma_sync["event"].astype(str).tolist() == ["win_create", "win_create"]
    assert Analysis(t).wait_states.totals()["wait_at_fence"] == 0


def test_otf2_print_sees_the_records(tmp_path):
    path = rma_io_trace().write(tmp_path / "trace")
    out = subprocess.run(["otf2-print", str(path / "traces.otf2")], capture_output=True,
                         text=True, check=True).stdout
    words = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert words.count("RMA_PUT") == 1 and words.count("RMA_GET") == 1
    assert words.count("IO_OPERATION_BEGIN") == 4 and words.count("IO_OPERATION_COMPLETE") == 4
    assert words.count("RMA_COLLECTIVE_END") == 4


# ---------------------------------------------------------------------------- io_s
def io_run(write_ms: int) -> TraceBuilder:
    """Two ranks: 10 ms compute, a collective write of `write_ms`, 10 ms compute."""
    tb = TraceBuilder(ranks=2)
    framed(tb, (21 + write_ms) * MS)
    fh = tb.file("out.dat")
    for r in (0, 1):
        tb.io_call(r, 11 * MS, (11 + write_ms) * MS, "MPI_File_write_all", fh, "write",
                   1 << 20, matching=1, collective=True, callsite="dump.c:12")
    return tb


def test_io_time_is_its_own_part_of_the_breakdown(tmp_path):
    a = Analysis(load(io_run(30), tmp_path))
    ranks = a.ranks.set_index("rank")
    assert ranks["io_s"].tolist() == pytest.approx([0.030, 0.030])
    assert ranks["compute_s"].tolist() == pytest.approx([0.020, 0.020])
    assert ranks["communication_s"].tolist() == pytest.approx([0.0, 0.0])
    assert ranks["synchronization_s"].tolist() == pytest.approx([0.0, 0.0])
    parts = ranks[["compute_s", "communication_s", "synchronization_s", "io_s"]].sum(axis=1)
    assert parts.tolist() == pytest.approx(ranks["total_s"].tolist())
    bins = a.time_bins
    assert bins["io_s"].sum() == pytest.approx(0.060)
    assert a.functions.set_index("name").at["MPI_File_write_all", "bytes"] == 2 << 20
    assert a.uninterpreted.empty  # MPI-IO is interpreted: it is the I/O part


def test_the_wait_completing_a_nonblocking_read_is_io(tmp_path):
    tb = TraceBuilder(ranks=1)
    framed(tb, 100 * MS)
    fh = tb.file("in.dat")
    tb.enter(0, 10 * MS, "MPI_File_iread")
    tb.io_begin(0, 10 * MS, fh, "read", 4096, matching=1, nonblocking=True)
    tb.io_issued(0, 11 * MS, fh, 1)
    tb.leave(0, 11 * MS, "MPI_File_iread")
    tb.enter(0, 50 * MS, "MPI_Wait")
    tb.io_complete(0, 70 * MS, fh, 4096, 1)
    tb.leave(0, 70 * MS, "MPI_Wait")
    r = Analysis(load(tb, tmp_path)).ranks.iloc[0]
    assert r["io_s"] == pytest.approx(0.001 + 0.020)
    assert r["communication_s"] == pytest.approx(0.0)


def test_io_s_in_json_summary_and_compare_report(tmp_path):
    a = io_run(30).write(tmp_path / "a")
    b = io_run(10).write(tmp_path / "b")
    p = mpiscope("analyze", a, "--json", tmp_path / "a.json")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    assert [r["io_s"] for r in doc["ranks"]] == pytest.approx([0.030, 0.030])
    assert "I/O" in p.stdout
    rows = [line for line in p.stdout.splitlines() if "node0" in line]
    assert len(rows) == 2 and all(r.rstrip(" │").endswith("30.00 (60%)") for r in rows)
    p = mpiscope("compare", a, b, "--md", tmp_path / "cmp.md", "--html", tmp_path / "cmp.html")
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "cmp.md").read_text()
    io_row = next(line for line in md.splitlines() if line.startswith("| I/O "))
    assert "60.0%" in io_row and "33.3%" in io_row  # 30 of 50 ms, 10 of 30 ms
    html = (tmp_path / "cmp.html").read_text()
    assert "<td>I/O</td>" in html or ">I/O<" in html
    assert "I/O share" in p.stdout


# ---------------------------------------------------------------------------- wait states
def fence_run(late_ms: int) -> TraceBuilder:
    """Rank 1 computes `late_ms` longer before the second fence."""
    tb = TraceBuilder(ranks=2)
    framed(tb, (20 + late_ms) * MS)
    win = tb.window()
    for r in (0, 1):
        tb.fence(r, 2 * MS, 3 * MS, win, callsite="md.c:40")
    tb.rma_call(0, 4 * MS, 5 * MS, "MPI_Put", win, 1, 64, 1)
    tb.fence(0, 10 * MS, (10 + late_ms) * MS + MS, win, callsite="md.c:42")
    tb.fence(1, (10 + late_ms) * MS, (10 + late_ms) * MS + MS, win, callsite="md.c:42")
    return tb


def test_fence_wait_is_nxn_synchronization_not_compute(tmp_path):
    a = Analysis(load(fence_run(200), tmp_path))
    pc = a.wait_states.per_call
    w = pc[pc["wait_ns"] > 0]
    assert w[["rank", "function", "callsite", "wait_ns"]].astype(str).to_dict("records") == [
        {"rank": "0", "function": "MPI_Win_fence", "callsite": "md.c:42",
         "wait_ns": str(200 * MS)}]
    assert w["wait_kind"].astype(str).tolist() == ["wait_at_fence"]
    tot = a.wait_states.totals()
    assert tot["wait_at_fence"] == pytest.approx(0.2)
    assert tot["wait_at_nxn"] == pytest.approx(0.2)  # a fence is an N×N synchronization
    r0 = a.ranks.set_index("rank").loc[0]
    assert r0["synchronization_s"] == pytest.approx(0.2)
    assert r0["compute_s"] < 0.03  # was 100% compute when fences were not traced
    doc = a.to_dict()
    assert doc["wait_states"]["wait_at_nxn_s"] == pytest.approx(0.2)
    assert doc["wait_states"]["wait_at_fence_s"] == pytest.approx(0.2)


def pscw(tb: TraceBuilder, win: int, *, post: int, start: tuple[int, int],
         complete: tuple[int, int], wait: tuple[int, int]) -> None:
    """Rank 0 exposes its window to rank 1 (post/wait); rank 1 accesses it (start/put/
    complete). Times in ms."""
    tb.enter(0, post * MS, "MPI_Win_post")
    tb.rma_group_sync(0, post * MS, win, [1])
    tb.leave(0, post * MS + MS // 10, "MPI_Win_post")
    tb.enter(1, start[0] * MS, "MPI_Win_start")
    tb.rma_group_sync(1, start[1] * MS, win, [0])
    tb.leave(1, start[1] * MS, "MPI_Win_start")
    tb.rma_call(1, start[1] * MS + MS // 10, start[1] * MS + MS // 5, "MPI_Put", win, 0, 8, 9)
    tb.enter(1, complete[0] * MS, "MPI_Win_complete")
    tb.rma_group_sync(1, complete[1] * MS, win, [0])
    tb.rma_complete(1, complete[1] * MS, win, 9)
    tb.leave(1, complete[1] * MS, "MPI_Win_complete")
    tb.enter(0, wait[0] * MS, "MPI_Win_wait")
    tb.rma_group_sync(0, wait[1] * MS, win, [1])
    tb.leave(0, wait[1] * MS, "MPI_Win_wait")


def waits(a: Analysis) -> list[tuple[int, str, str, float]]:
    pc = a.wait_states.per_call
    w = pc[pc["wait_ns"] > 0]
    return [(int(r.rank), str(r.function), str(r.wait_kind), r.wait_ns / 1e9)
            for r in w.itertuples()]


def test_late_post_in_a_blocking_start(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 500 * MS)
    win = tb.window()
    # the target posts 200 ms after the origin entered MPI_Win_start, which blocks
    pscw(tb, win, post=210, start=(10, 211), complete=(212, 213), wait=(211, 213))
    a = Analysis(load(tb, tmp_path))
    assert waits(a) == [(0, "MPI_Win_wait", "early_wait", pytest.approx(0.001)),
                        (1, "MPI_Win_start", "late_post", pytest.approx(0.200))]
    assert a.wait_states.totals()["late_post"] == pytest.approx(0.2)
    assert a.ranks.set_index("rank").at[1, "synchronization_s"] == pytest.approx(0.2)


def test_late_post_where_start_returns_at_once_is_in_complete(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 500 * MS)
    win = tb.window()
    pscw(tb, win, post=210, start=(10, 10), complete=(11, 212), wait=(211, 213))
    a = Analysis(load(tb, tmp_path))
    assert (1, "MPI_Win_complete", "late_post", pytest.approx(0.199)) in waits(a)


def test_late_post_in_a_put_that_blocks(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 500 * MS)
    win = tb.window()
    pscw(tb, win, post=210, start=(10, 10), complete=(212, 213), wait=(211, 213))
    tb.rma_call(1, 11 * MS, 211 * MS, "MPI_Accumulate", win, 0, 8, 10)  # blocks until post
    a = Analysis(load(tb, tmp_path))
    assert (1, "MPI_Accumulate", "late_post", pytest.approx(0.199)) in waits(a)
    assert not [w for w in waits(a) if w[1] == "MPI_Win_complete"]


def test_early_wait_at_the_target(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 500 * MS)
    win = tb.window()
    # the origin computes 200 ms inside its epoch; the target waits in MPI_Win_wait
    pscw(tb, win, post=10, start=(10, 11), complete=(221, 222), wait=(21, 222))
    a = Analysis(load(tb, tmp_path))
    assert waits(a) == [(0, "MPI_Win_wait", "early_wait", pytest.approx(0.200))]
    assert a.wait_states.totals()["early_wait"] == pytest.approx(0.2)


def test_lock_contention(tmp_path):
    tb = TraceBuilder(ranks=3)
    framed(tb, 500 * MS)
    win = tb.window()
    # rank 0 holds an exclusive lock on rank 2 for 200 ms; rank 1 asks for it meanwhile
    tb.enter(0, 10 * MS, "MPI_Win_lock")
    tb.rma_lock(0, 10 * MS, "request", win, 2, lock_id=1)
    tb.rma_lock(0, 11 * MS, "acquire", win, 2, lock_id=1)
    tb.leave(0, 11 * MS, "MPI_Win_lock")
    tb.enter(0, 210 * MS, "MPI_Win_unlock")
    tb.rma_lock(0, 211 * MS, "release", win, 2, lock_id=1)
    tb.leave(0, 211 * MS, "MPI_Win_unlock")
    tb.enter(1, 12 * MS, "MPI_Win_lock")
    tb.rma_lock(1, 12 * MS, "request", win, 2, lock_id=1)
    tb.rma_lock(1, 212 * MS, "acquire", win, 2, lock_id=1)
    tb.leave(1, 212 * MS, "MPI_Win_lock")
    tb.enter(1, 213 * MS, "MPI_Win_unlock")
    tb.rma_lock(1, 214 * MS, "release", win, 2, lock_id=1)
    tb.leave(1, 214 * MS, "MPI_Win_unlock")
    a = Analysis(load(tb, tmp_path))
    assert waits(a) == [(1, "MPI_Win_lock", "lock_contention", pytest.approx(0.199))]


def test_shared_locks_do_not_contend(tmp_path):
    tb = TraceBuilder(ranks=3)
    framed(tb, 500 * MS)
    win = tb.window()
    for r, (a0, a1) in ((0, (10, 210)), (1, (12, 212))):
        tb.enter(r, a0 * MS, "MPI_Win_lock")
        tb.rma_lock(r, a0 * MS, "request", win, 2, lock_id=1, exclusive=False)
        tb.rma_lock(r, (a0 + 1) * MS, "acquire", win, 2, lock_id=1, exclusive=False)
        tb.leave(r, (a0 + 1) * MS, "MPI_Win_lock")
        tb.enter(r, a1 * MS, "MPI_Win_unlock")
        tb.rma_lock(r, a1 * MS, "release", win, 2, lock_id=1)
        tb.leave(r, a1 * MS, "MPI_Win_unlock")
    assert waits(Analysis(load(tb, tmp_path))) == []


def test_nonblocking_collective_waiting_is_split_from_transfer(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 500 * MS)
    # rank 1 posts its MPI_Ialltoall 100 ms after rank 0 entered MPI_Wait; rank 0's
    # Wait ends 5 ms after that post: 100 ms waiting, 5 ms transfer
    for r, post in ((0, 10), (1, 120)):
        tb.enter(r, post * MS, "MPI_Ialltoall")
        tb.nbc_request(r, post * MS, 5)
        tb.leave(r, post * MS + MS, "MPI_Ialltoall")
    tb.enter(0, 20 * MS, "MPI_Wait")
    tb.nbc_complete(0, 125 * MS, "MPI_Alltoall", 5, sent=16, received=16)
    tb.leave(0, 125 * MS, "MPI_Wait")
    tb.enter(1, 121 * MS, "MPI_Wait")
    tb.nbc_complete(1, 126 * MS, "MPI_Alltoall", 5, sent=16, received=16)
    tb.leave(1, 126 * MS, "MPI_Wait")
    a = Analysis(load(tb, tmp_path))
    assert waits(a) == [(0, "MPI_Wait", "wait_at_nxn", pytest.approx(0.100))]
    r0 = a.ranks.set_index("rank").loc[0]
    assert r0["synchronization_s"] == pytest.approx(0.100)
    assert r0["communication_s"] == pytest.approx(0.005 + 0.001)  # transfer + the post


# ---------------------------------------------------------------------------- findings
def barriers_around(tb: TraceBuilder, between) -> None:
    for r in range(tb.num_ranks):
        tb.collective(r, 1 * MS, 2 * MS, "MPI_Barrier", callsite="app.c:10")
        between(r)
        tb.collective(r, 20 * MS, 21 * MS, "MPI_Barrier", callsite="app.c:20")


def test_no_redundant_barrier_after_fence_put_fence(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 50 * MS)
    win = tb.window()

    def epoch(r):
        tb.fence(r, 3 * MS, 4 * MS, win)
        if r == 0:
            tb.rma_call(0, 5 * MS, 6 * MS, "MPI_Put", win, 1, 8, 1)
        tb.fence(r, 7 * MS, 8 * MS, win)
    barriers_around(tb, epoch)
    found = Analysis(load(tb, tmp_path)).findings
    assert [f for f in found if f.kind == "redundant_collective"] == []


def test_a_barrier_right_after_a_barrier_is_still_redundant(tmp_path):
    # the same program without the RMA epoch, twice: the proof holds for the second
    # barrier in both rounds (the test above can fail)
    tb = TraceBuilder(ranks=2)
    framed(tb, 50 * MS)
    for r in range(tb.num_ranks):
        for t in (0, 20 * MS):
            tb.collective(r, t + 1 * MS, t + 2 * MS, "MPI_Barrier", callsite="app.c:10")
            tb.collective(r, t + 10 * MS, t + 11 * MS, "MPI_Barrier", callsite="app.c:20")
    found = Analysis(load(tb, tmp_path)).findings
    [f] = [f for f in found if f.kind == "redundant_collective"]
    assert (f.function, f.callsite) == ("MPI_Barrier", "app.c:20")


def test_a_time_only_call_between_barriers_breaks_the_proof(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 50 * MS)
    barriers_around(tb, lambda r: tb.call(r, 5 * MS, 6 * MS, "MPI_Comm_split_type"))
    found = Analysis(load(tb, tmp_path)).findings
    assert [f for f in found if f.kind == "redundant_collective"] == []


# ---------------------------------------------------------------------------- uninterpreted
def test_uninterpreted_functions_are_listed(tmp_path):
    tb = TraceBuilder(ranks=2)
    framed(tb, 50 * MS)
    win = tb.window()
    for r in range(2):
        tb.call(r, 2 * MS, 5 * MS, "MPI_Comm_split_type")
        tb.call(r, 6 * MS, 7 * MS, "MPI_Win_get_group")
        tb.call(r, 8 * MS, 9 * MS, "MPI_Win_get_group")
        tb.fence(r, 10 * MS, 11 * MS, win)
        tb.collective(r, 12 * MS, 13 * MS, "MPI_Allreduce", sent=8, received=8)
    path = tb.write(tmp_path / "t")
    a = Analysis(reader.load(path))
    assert a.uninterpreted.to_dict("records") == [
        {"name": "MPI_Comm_split_type", "calls": 2, "time_s": pytest.approx(0.006)},
        {"name": "MPI_Win_get_group", "calls": 4, "time_s": pytest.approx(0.004)}]
    p = mpiscope("analyze", path, "--json", tmp_path / "t.json")
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert [(u["name"], u["calls"]) for u in doc["uninterpreted"]] == [
        ("MPI_Comm_split_type", 2), ("MPI_Win_get_group", 4)]
    line = next(x for x in p.stdout.splitlines() if x.startswith("Not interpreted"))
    assert "MPI_Comm_split_type (2 calls" in line and "MPI_Win_get_group (4 calls" in line
    assert "MPI_Allreduce" not in line and "MPI_Win_fence" not in line


def test_scaling_table_and_figure_have_the_io_part(tmp_path):
    from mpiscope.analysis import scaling
    from mpiscope.render import scaling as render_scaling
    from mpiscope.render.palette import PART_COLOURS

    rows = [scaling.row(Analysis(load(io_run(ms), tmp_path, f"t{ms}"))) for ms in (30, 10)]
    df = scaling.table(rows).set_index("trace")
    assert df.loc[[str(r.trace) for r in rows], "io_share"].tolist() == pytest.approx(
        [0.6, 1 / 3])  # 30 of 50 ms, 10 of 30 ms
    df = df.reset_index()
    shares = df[["compute_share", "communication_share", "synchronization_share",
                 "io_share"]].sum(axis=1)
    assert shares.tolist() == pytest.approx([1.0, 1.0])
    fig = render_scaling.figure(df)
    io = next(bar for bar in fig.data if bar.name == "I/O")
    assert io.marker.color == PART_COLOURS["io"]
