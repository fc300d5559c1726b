"""MPI_THREAD_MULTIPLE: each thread that calls MPI is its own OTF2 location (programs/
threads_tags.c: 2 ranks, 2-4 threads each talking to the same thread of the other rank
at once, each thread with its own tags and message size).

What a user sees: otf2-print lists one location per thread under the rank's process,
with that thread's calls only; mpiscope's reader gives per-thread calls that never nest
and matches every message with the tag it was sent with. Run 10 times: a race in the
interposer (a shared buffer, a status taken from another thread's receive) shows up as
a wrong tag or a nested call in some runs, not all."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from mpiscope.archive.reader import load
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc

ROUNDS = 20  # programs/threads_tags.c
RUNS = 10
# per round, each worker thread: Send+Recv, Irecv+Isend+Waitall, Sendrecv
WORKER_CALLS = {"MPI_Send": ROUNDS, "MPI_Recv": ROUNDS, "MPI_Irecv": ROUNDS,
                "MPI_Isend": ROUNDS, "MPI_Waitall": ROUNDS, "MPI_Sendrecv": ROUNDS}
# Enter + Leave of each call, one message event each (two in Waitall and Sendrecv)
WORKER_EVENTS = ROUNDS * (6 * 2 + 8)
MAIN_CALLS = {"MPI_Init_thread": 1, "MPI_Barrier": 1, "MPI_Allreduce": 1, "MPI_Finalize": 1}


def check_run(out: Path, nthreads: int) -> None:
    # --- the OTF2 archive, read by otf2-print and the otf2 package
    t = tc.read_both(out)
    tc.check_well_formed(t, 2)  # per location: no call inside another
    for rank in range(2):
        main, *workers = t.threads(rank)
        assert len(workers) == nthreads
        assert t.enters(main) == Counter(MAIN_CALLS)
        tags_seen = set()
        for loc in workers:
            assert t.enters(loc) == Counter(WORKER_CALLS), t.locations[loc]
            assert len(t.events[loc]) == WORKER_EVENTS
            sent = tc.p2p_of(t, loc, "MpiSend") + tc.p2p_of(t, loc, "MpiIsend")
            recvd = tc.p2p_of(t, loc, "MpiRecv") + tc.p2p_of(t, loc, "MpiIrecv")
            assert sent == recvd  # the same thread of the peer answers in kind
            (thread,) = {tag % 100 for _peer, tag, _bytes in sent}  # one thread's tags
            assert sent == Counter({(1 - rank, kind * 100 + thread, 4 * thread): ROUNDS
                                    for kind in range(3)})
            tags_seen.add(thread)
        assert tags_seen == set(range(1, nthreads + 1))
    sends, recvs = tc.messages(t)
    assert sends == recvs

    # --- mpiscope's reader
    tr = load(out, use_cache=False)
    threads = tr.threads
    assert list(zip(threads["rank"], threads["thread"], strict=True)) == [
        (r, th) for r in range(2) for th in range(nthreads + 1)]
    assert (threads["events"][threads["thread"] > 0] == WORKER_EVENTS).all()
    calls = tr.calls
    assert (calls["depth"] == 0).all(), "a thread's call nested inside another thread's"
    per_thread = calls[calls["thread"] > 0].groupby(["rank", "thread"]).size()
    assert (per_thread == 6 * ROUNDS).all() and len(per_thread) == 2 * nthreads
    assert Counter(calls[calls["thread"] == 0]["function"].astype(str)) == \
        Counter({f: 2 for f in MAIN_CALLS})
    assert tr.unmatched.empty
    m = tr.messages
    assert len(m) == 2 * nthreads * 3 * ROUNDS
    send_thread = calls["thread"].to_numpy()[m["send_call"].to_numpy()]
    recv_thread = calls["thread"].to_numpy()[m["recv_call"].to_numpy()]
    # thread numbers follow the order threads first called MPI, which differs between
    # ranks and runs: the tag (mod 100) says which program thread a message belongs to.
    # Each location, sending or receiving, has exactly one program thread's messages.
    thread_of_tag = m["tag"].to_numpy() % 100
    for rank_col, thread in ((m["send_rank"], send_thread), (m["recv_rank"], recv_thread)):
        tags: dict[tuple[int, int], set[int]] = {}
        for key in zip(rank_col, thread, thread_of_tag, strict=True):
            tags.setdefault((int(key[0]), int(key[1])), set()).add(int(key[2]))
        assert len(tags) == 2 * nthreads and all(len(v) == 1 for v in tags.values()), tags
    assert (m["bytes"].to_numpy() == 4 * thread_of_tag).all()
    # every message matched with its true tag: the receive's status agrees with the send
    p2p = tr.p2p
    recv_rows = p2p[p2p["event"].isin(["recv", "irecv"])]
    assert Counter(zip(recv_rows["rank"], recv_rows["tag"], strict=True)) == Counter(
        zip(m["recv_rank"], m["tag"], strict=True))


def test_threads_own_locations_ten_runs(programs, tmp_path) -> None:
    exe = str(programs["threads_tags.c"])
    bare: dict[int, list[str]] = {}
    for run in range(RUNS):
        nthreads = 2 + run % 3
        if nthreads not in bare:
            job = mpijobs.run([exe, str(nthreads)], np=2, traced=False)
            assert job.returncode == 0, job.stderr
            bare[nthreads] = mpijobs.sorted_lines(job.stdout)
        out = tmp_path / f"run{run}"
        job = mpijobs.run([exe, str(nthreads)], np=2, out=out)
        assert job.returncode == 0, job.stderr
        assert mpijobs.sorted_lines(job.stdout) == bare[nthreads]
        check_run(out, nthreads)


@pytest.mark.mpich
def test_threads_own_locations_mpich(tmp_path) -> None:
    if not (mpijobs.have("mpicc.mpich") and mpijobs.have("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpicc.mpich / mpiexec.mpich missing)")
    exe = mpijobs.build("threads_tags.c", tmp_path, ["mpicc.mpich", "-g", "-O0"])
    bare = mpijobs.run([str(exe), "3"], np=2, traced=False, launcher=mpijobs.MPIEXEC_MPICH)
    assert bare.returncode == 0, bare.stderr
    for run in range(3):
        out = tmp_path / f"run{run}"
        job = mpijobs.run([str(exe), "3"], np=2, out=out, launcher=mpijobs.MPIEXEC_MPICH,
                          mpi="mpich")
        assert job.returncode == 0, job.stderr
        assert mpijobs.sorted_lines(job.stdout) == mpijobs.sorted_lines(bare.stdout)
        check_run(out, 3)
