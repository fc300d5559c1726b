"""The reader on a real trace: a small C MPI program traced by our interposer."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from mpiscope.archive import reader
from mpiscope.archive.trace import Trace

PROGRAM = textwrap.dedent("""\
    #include <mpi.h>
    int main(int argc, char **argv) {
      MPI_Init(&argc, &argv);
      int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
      double x = r, y; char buf[1000] = {0};
      MPI_Comm half; MPI_Comm_split(MPI_COMM_WORLD, r % 2, -r, &half); /* reversed order */
      for (int i = 0; i < 5; i++) {
        MPI_Request q[2];
        int right = (r + 1) % n, left = (r + n - 1) % n;
        MPI_Irecv(buf, 500, MPI_CHAR, left, 1, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(buf + 500, 500, MPI_CHAR, right, 1, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        int hr; MPI_Comm_rank(half, &hr);
        if (hr == 0) MPI_Send(&x, 1, MPI_DOUBLE, 1, 7, half);
        else MPI_Recv(&y, 1, MPI_DOUBLE, 0, 7, half, MPI_STATUS_IGNORE);
        MPI_Bcast(&x, 1, MPI_DOUBLE, 1, half);
      }
      MPI_Comm_free(&half);
      MPI_Finalize();
      return 0;
    }
    """)
LINE = {f: i + 1 for i, text in enumerate(PROGRAM.splitlines())
        for f in ("MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce", "MPI_Send",
                  "MPI_Recv", "MPI_Bcast") if f"{f}(" in text}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    d = tmp_path_factory.mktemp("interposer")
    (d / "ring.c").write_text(PROGRAM)
    subprocess.run(["mpicc", "-g", "-O0", "-o", str(d / "ring"), str(d / "ring.c")],
                   check=True, capture_output=True)
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    proc = subprocess.run(["mpiscope", "run", "--out", str(d / "trace"), "--", "mpirun",
                           "--oversubscribe", "-np", "4", str(d / "ring")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return reader.load(d / "trace", use_cache=False)


def test_every_rank_and_call_site(traced: Trace) -> None:
    assert traced.meta.creator.startswith("mpiscope") and traced.meta.truncated_ranks == []
    assert traced.meta.clock_corrected  # libotf2 applied the interposer's clock offsets
    assert traced.ranks["rank"].tolist() == [0, 1, 2, 3]
    for fn, line in LINE.items():
        sites = set(traced.calls.loc[traced.calls["function"] == fn, "callsite"])
        assert sites == {f"ring.c:{line}"}, fn
    counts = traced.calls.groupby("function", observed=True).size()
    assert counts["MPI_Allreduce"] == 20 and counts["MPI_Waitall"] == 20
    assert counts["MPI_Send"] == 10 and counts["MPI_Recv"] == 10


def test_split_communicators_translate_to_world_ranks(traced: Trace) -> None:
    comms = {row.name: list(row.members) for row in traced.comms.itertuples()
             if row.name not in ("MPI_COMM_WORLD", "MPI_COMM_SELF")}
    assert sorted(comms.values()) == [[2, 0], [3, 1]]  # key -rank: highest rank first
    # in each half, comm rank 0 (world 2 or 3) sends to comm rank 1 (world 0 or 1)
    p2p = traced.messages[traced.messages["tag"] == 7]
    assert p2p.groupby(["send_rank", "recv_rank"]).size().to_dict() == {(2, 0): 5, (3, 1): 5}
    bcast = traced.calls[traced.calls["function"] == "MPI_Bcast"]
    assert set(zip(bcast["rank"], bcast["root"], strict=True)) == {
        (0, 0), (2, 0), (1, 1), (3, 1)}  # root: comm rank 1 = world 0 resp. 1


def test_ring_messages_and_collective_instances(traced: Trace) -> None:
    ring = traced.messages[traced.messages["tag"] == 1]
    assert ring.groupby(["send_rank", "recv_rank"]).size().to_dict() == {
        (0, 1): 5, (1, 2): 5, (2, 3): 5, (3, 0): 5}
    assert (ring["bytes"] == 500).all() and traced.unmatched.empty
    assert (ring["recv_leave"] >= ring["send_enter"]).all()
    coll = traced.collectives
    per = coll.groupby("instance").agg(fn=("function", "first"), ranks=("rank", "nunique"))
    assert (per[per["fn"] == "MPI_Allreduce"]["ranks"] == 4).all()
    assert (per[per["fn"] == "MPI_Bcast"]["ranks"] == 2).all()
    assert len(per) == 5 + 2 * 5
    allreduce = coll[coll["function"] == "MPI_Allreduce"]
    assert (allreduce["in_hash"] != 0).all()  # 8-byte payloads are hashed
    assert allreduce.groupby("instance")["out_hash"].nunique().eq(1).all()


def test_trace_path_may_be_the_anchor(traced: Trace) -> None:
    again = reader.load(Path(traced.path) / "traces.otf2", use_cache=False)
    assert len(again.calls) == len(traced.calls)
