"""MPI-4's large-count functions (MPI_Send_c, MPI_Allgatherv_c, MPI_Win_create_c,
MPI_File_read_at_c, ...: MPI_Count counts, MPI_Aint displacements) are recorded exactly as
their int twins: programs/largecount.c built twice from one source, with the int functions
and with -DLARGE, gives the same records rank by rank — messages, requests, collectives
with their bytes and payload hashes, nonblocking collectives, RMA and I/O operations —
only the regions' names differ, and the analysis reads the same tables. A count beyond
INT_MAX is not truncated. mpi4py 4 on MPICH 4 calls only these. MPICH only: Open MPI 4.1
has none.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pandas as pd
import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.scenarios import analyze_json
from mpiscope_testing.traceread import Trace

pytestmark = pytest.mark.mpich

NP = 3
SOURCE = "largecount.c"
GIB3 = 3 << 30
# programs/largecount.c's messages: 0 -> 1 twice, then per rank a Sendrecv, an Isend, two
# persistent sends and two sends received through a matched probe
MESSAGES = 2 + NP * (1 + 1 + 2 + 2)
N = 64  # doubles in its arrays


def base(name: str) -> str:
    return name[:-2] if name.endswith("_c") else name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """largecount.c built with the int functions and with the `_c` ones, each run on NP
    ranks under the MPICH interposer: {"int": trace dir, "large": trace dir}."""
    out: dict[str, Path] = {}
    for variant, flags in (("int", []), ("large", ["-DLARGE"])):
        tmp = tmp_path_factory.mktemp(variant)
        # payload hashes of every collective of the program (its largest moves 512 B)
        job = mpijobs.run_mpich(SOURCE, tmp, NP, out=tmp / "trace",
                                args=[str(tmp / "scratch.dat")], flags=flags,
                                env={"MPISCOPE_HASH_BYTES": "1024"})
        assert job.returncode == 0, job.stderr[-3000:]
        assert job.stdout.count("read back the same") == NP, job.stdout
        out[variant] = tmp / "trace"
    return out


@pytest.fixture(scope="module")
def printed(runs) -> dict[str, Trace]:
    return {v: tc.read_both(path) for v, path in runs.items()}


def records(trace: Trace) -> dict[int, list[tuple]]:
    """Every record of every rank without its time, regions named by their int twin."""
    out = {}
    for rank, events in trace.events.items():
        out[rank] = [(e.kind, {k: base(v) if k == "region" else v for k, v in e.recorded.items()})
                     for e in events]
    return out


def test_the_large_count_build_calls_the_c_functions(printed) -> None:
    regions = {str(e["region"]) for e in printed["large"].of(0, "Enter")}
    assert {"MPI_Send_c", "MPI_Isend_c", "MPI_Send_init_c", "MPI_Mrecv_c", "MPI_Imrecv_c",
            "MPI_Allgatherv_c", "MPI_Iallgatherv_c", "MPI_Ialltoallv_c", "MPI_Win_create_c",
            "MPI_Put_c", "MPI_File_write_at_c", "MPI_File_read_at_c"} <= regions
    assert not {r for r in regions if r.endswith("_c")} & {
        str(e["region"]) for e in printed["int"].of(0, "Enter")}
    for variant in ("int", "large"):
        tc.check_well_formed(printed[variant], NP)


def test_both_traces_hold_the_same_records(printed) -> None:
    """Record for record, rank by rank: what the `_c` calls record is what their int
    twins record (call sites included: both builds call on the same lines)."""
    plain, large = records(printed["int"]), records(printed["large"])
    assert plain.keys() == large.keys() == set(range(NP))
    for rank in plain:
        assert large[rank] == plain[rank], f"rank {rank}"
    # a `_c` region has its int twin's role
    roles = printed["int"].regions
    for name, role in printed["large"].regions.items():
        if name.endswith("_c") and base(name) in tc.ROLE_OF:
            assert role == roles[base(name)], name


def test_v_collectives_read_mpi_count_counts_and_aint_displacements(printed) -> None:
    """Results hashed from MPI_Count counts and MPI_Aint displacements (the nonblocking
    ones' from arrays the program overwrote once they were posted), against the data:
    Allgatherv's block of rank i is the first i + 1 doubles of the broadcast 0..63; in
    Alltoallv every rank sends rank r the r + 1 doubles from 8r."""
    gathered = tc.fnv1a(b"".join(struct.pack(f"<{i + 1}d", *range(i + 1)) for i in range(NP)))
    t = printed["large"]
    for rank in range(NP):
        mine = struct.pack(f"<{rank + 1}d", *range(8 * rank, 8 * rank + rank + 1))
        for op, want, received in (("ALLGATHERV", gathered, 8 * NP * (NP + 1) // 2),
                                   ("ALLTOALLV", tc.fnv1a(mine * NP), len(mine) * NP)):
            ends = [e for e in t.of(rank, "MpiCollectiveEnd") if e["op"] == op]
            done = [e for e in t.of(rank, "NonBlockingCollectiveComplete") if e["op"] == op]
            assert [e["mpiscope:out_hash"] for e in ends + done] == [want, want], (rank, op)
            assert [e["received"] for e in ends + done] == [received] * 2, (rank, op)


def test_a_count_beyond_int_is_not_truncated(printed) -> None:
    """3 GiB broadcast on MPI_COMM_SELF: MPI_Bcast_c's count 3 * 2^30 and, in the int
    build, MPI_Bcast's one element of a 3 GiB datatype."""
    for variant, region in (("int", "MPI_Bcast"), ("large", "MPI_Bcast_c")):
        t = printed[variant]
        huge = [e for e in t.of(0, "MpiCollectiveEnd") if e["comm"] == 1]
        assert [(e["op"], e["sent"], e["received"]) for e in huge] == [("BCAST", GIB3, 0)]
        sites = tc.callsites(t, 0, region)
        assert mpijobs.callsite(SOURCE, "huge") in sites


def tables(path: Path) -> dict[str, pd.DataFrame]:
    """What mpiscope.load reads, without times and row ids, functions by their int twin."""
    t = mpiscope.load(path)
    calls = t.calls.assign(function=t.calls["function"].astype(str).map(base))
    return {
        "calls": calls[["rank", "function", "kind", "comm", "peer", "tag", "bytes_sent",
                        "bytes_recv", "root", "coll_seq", "in_hash", "out_hash", "coll_op",
                        "callsite"]].astype({"kind": str, "callsite": str}),
        "messages": t.messages[["send_rank", "recv_rank", "comm", "tag", "bytes"]],
        "collectives": t.collectives[["rank", "comm", "coll_seq", "root", "bytes_sent",
                                      "bytes_recv", "in_hash", "out_hash"]],
        "rma": t.rma[["rank", "op", "target", "bytes_sent", "bytes_recv"]].astype({"op": str}),
        "io": t.io[["rank", "mode", "collective", "nonblocking", "bytes_requested",
                    "bytes"]].astype({"mode": str}),
    }


def test_the_analyzer_reads_the_same_tables(runs) -> None:
    plain, large = tables(runs["int"]), tables(runs["large"])
    for name in plain:
        pd.testing.assert_frame_equal(large[name].reset_index(drop=True),
                                      plain[name].reset_index(drop=True), obj=name)
    assert len(large["messages"]) == MESSAGES
    assert (large["calls"]["kind"] != "other").sum() > 40  # interpreted, not just timed
    assert sorted(large["rma"]["op"]) == sorted(["atomic", "get", "put"] * NP)
    assert set(zip(large["io"]["mode"], large["io"]["bytes"], strict=True)) == {
        ("write", 8 * N), ("write", 8 * N // 2), ("read", 8 * N), ("read", 64)}


def test_analyze_matches_the_messages_and_interprets_the_c_functions(runs, tmp_path) -> None:
    _, plain = analyze_json(runs["int"], tmp_path)
    _, large = analyze_json(runs["large"], tmp_path)
    assert large["messages"]["matched"] == MESSAGES
    assert large["messages"] == plain["messages"]
    def pairs(doc: dict) -> list[dict]:  # what was sent, not how long it took this run
        return [{k: v for k, v in c.items() if k != "transfer_s"} for c in doc["comm_matrix"]]

    assert pairs(large) == pairs(plain)
    assert sum(c["bytes"] for c in large["comm_matrix"]) > 0
    # the `_c` calls are interpreted (messages, collectives, RMA, I/O), none only timed
    assert not [u["name"] for u in large["uninterpreted"] if u["name"].endswith("_c")]
    # (sorted by time: the same names, maybe not in the same order)
    assert {u["name"] for u in large["uninterpreted"]} == \
        {u["name"] for u in plain["uninterpreted"]}
