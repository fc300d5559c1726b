"""RMA and MPI-IO as standard OTF2 records (programs/rma.c, programs/mpiio.c, 3 ranks).

Each trace is read back with `otf2-print` and the records are checked exactly: per rank,
every RMA operation with its target and bytes, every synchronisation, every completion by
matching id; every I/O operation with the bytes asked for and the bytes the status
reported. The injected 200 ms late partner shows up as time inside the synchronising call
of the ranks that wait for it, and `mpiscope analyze` reads the traces.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import mpiscope
from mpiscope_testing import mpijobs
from mpiscope_testing.killing import KILLED, run_and_kill

NP = 3
LATE_S = 0.2
_FIELD = re.compile(r'([A-Z][\w ]*?): (\{[^}]*\}|"[^"]*" <\d+>|[^,]+)(?:, |$)')


@dataclass
class Rec:
    kind: str
    time: int
    f: dict[str, str] = field(default_factory=dict)

    def num(self, key: str) -> int | None:
        """The record's number for key ("UNDEFINED" → None; `2 ("rank 2" <2>)` → 2)."""
        m = re.match(r'(\d+)|"[^"]*" <(\d+)>', self.f[key])
        return None if m is None else int(m.group(1) or m.group(2))


@dataclass
class Printed:
    events: dict[int, list[Rec]]
    defs: list[Rec]

    def of(self, rank: int, *kinds: str) -> list[Rec]:
        return [e for e in self.events[rank] if e.kind in kinds]

    def kinds(self, rank: int, prefix: str) -> Counter[str]:
        return Counter(e.kind for e in self.events[rank] if e.kind.startswith(prefix))

    def seconds_in(self, rank: int, region: str) -> list[float]:
        """Duration of each call of `region` on `rank`."""
        out, start = [], 0
        for e in self.events[rank]:
            if e.kind in ("ENTER", "LEAVE") and e.f["Region"].startswith(f'"{region}"'):
                if e.kind == "ENTER":
                    start = e.time
                else:
                    out.append((e.time - start) / 1e9)
        return out

    def enters(self, rank: int, region: str) -> list[int]:
        """Time (ns) each call of `region` on `rank` was entered."""
        return [e.time for e in self.events[rank]
                if e.kind == "ENTER" and e.f["Region"].startswith(f'"{region}"')]

    def leaves(self, rank: int, region: str) -> list[int]:
        """Time (ns) each call of `region` on `rank` was left."""
        return [e.time for e in self.events[rank]
                if e.kind == "LEAVE" and e.f["Region"].startswith(f'"{region}"')]

    def defs_of(self, kind: str) -> list[Rec]:
        return [d for d in self.defs if d.kind == kind]


def otf2_print(trace: Path) -> Printed:
    anchor = str(trace / "traces.otf2")
    text = subprocess.run(["otf2-print", anchor], capture_output=True, text=True,
                          check=True).stdout
    events: dict[int, list[Rec]] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Z][A-Z_]+)\s+(\d+)\s+(\d+)\s*(.*)$", line)
        if m:
            rec = Rec(m[1], int(m[3]), dict(_FIELD.findall(m[4])))
            events.setdefault(int(m[2]), []).append(rec)
    gtext = subprocess.run(["otf2-print", "-G", anchor], capture_output=True, text=True,
                           check=True).stdout
    defs = []
    for line in gtext.splitlines():
        m = re.match(r"^([A-Z][A-Z_]+)\s+(\d+)\s+(.*)$", line)
        if m:
            defs.append(Rec(m[1], int(m[2]), {"ref": m[2], "line": m[3],
                                                **dict(_FIELD.findall(m[3]))}))
    return Printed(events, defs)


# each MPI: how to compile a C program for it and how to launch it
MPIS = {"openmpi": (None, None),
        "mpich": (["mpicc.mpich", "-g", "-O0", "-Wall", "-Wextra"], mpijobs.MPIEXEC_MPICH)}


@pytest.fixture(params=sorted(MPIS))
def mpi(request: pytest.FixtureRequest) -> str:
    if MPIS[request.param][0] and not mpijobs.have(MPIS[request.param][0][0]):
        pytest.skip(f"{request.param} is not installed")
    return request.param


def run(programs, mpi: str, tmp_path: Path, source: str, *args: str,
        out: Path | None = None) -> mpijobs.Job:
    compiler, launcher = MPIS[mpi]
    exe = programs[source] if compiler is None else mpijobs.build(source, tmp_path, compiler)
    job = mpijobs.run([str(exe), *args], np=NP, out=out, traced=out is not None,
                      launcher=launcher, mpi=mpi)
    assert job.returncode == 0, job.stdout + job.stderr
    assert "WRONG" not in job.stdout and job.stdout.count(" ok") == NP, job.stdout
    return job


def traced(programs, mpi: str, tmp_path: Path, source: str, *args: str
           ) -> tuple[Printed, Path]:
    out = tmp_path / "trace"
    run(programs, mpi, tmp_path, source, *args, out=out)
    return otf2_print(out), out


def analyzed_functions(trace: Path, tmp_path: Path) -> dict[str, int]:
    js = tmp_path / "analysis.json"
    proc = subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(js)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return {f["name"]: f["calls"] for f in json.loads(js.read_text())["functions"]}


def ops_done(p: Printed, rank: int) -> dict[int, str]:
    """matching id → the completion record kind; each operation completed exactly once."""
    done: dict[int, str] = {}
    for e in p.of(rank, "RMA_OP_COMPLETE_REMOTE", "RMA_OP_COMPLETE_BLOCKING",
                  "RMA_OP_COMPLETE_NON_BLOCKING"):
        mid = int(e.f["Matching"])
        assert mid not in done, f"rank {rank}: operation {mid} completed twice"
        done[mid] = e.kind
    return done


def window(p: Printed) -> int:
    wins = p.defs_of("RMA_WIN")
    assert len(wins) == 1
    assert wins[0].f["Communicator"] == '"MPI_COMM_WORLD" <0>'
    assert wins[0].f["Flags"] == "{CREATE_DESTROY_EVENTS}"
    return int(wins[0].f["ref"])


# ------------------------------------------------------------------------------ RMA


def test_rma_fence(programs, mpi: str, tmp_path: Path) -> None:
    p, out = traced(programs, mpi, tmp_path, "rma.c", "fence")
    win = window(p)
    for r in range(NP):
        assert p.kinds(r, "RMA") == Counter({
            "RMA_WIN_CREATE": 1, "RMA_WIN_DESTROY": 1, "RMA_COLLECTIVE_BEGIN": 2,
            "RMA_COLLECTIVE_END": 2, "RMA_PUT": 1, "RMA_GET": 1, "RMA_ATOMIC": 1,
            "RMA_OP_COMPLETE_REMOTE": 3}), r
        put, get, acc = p.of(r, "RMA_PUT", "RMA_GET", "RMA_ATOMIC")
        assert (put.num("Remote"), put.f["Bytes"]) == ((r + 1) % NP, "16")
        assert (get.num("Remote"), get.f["Bytes"]) == ((r + NP - 1) % NP, "8")
        assert (acc.num("Remote"), acc.f["Type"], acc.f["Sent"], acc.f["Received"]) == \
            (0, "ACCUMULATE", "4", "0")
        assert {put.num("Window"), get.num("Window"), acc.num("Window")} == {win}
        for end in p.of(r, "RMA_COLLECTIVE_END"):
            assert end.f["Operation"] == "BARRIER" and end.num("Window") == win
            assert end.f["Level of Synchronicity"] == "{PROCESS, MEMORY}"
            assert end.f["Root"] == "NONE"
        # the three operations complete in the second fence, after its Begin
        ids = {int(e.f["Matching"]) for e in (put, get, acc)}
        assert set(ops_done(p, r)) == ids
        second_begin = p.of(r, "RMA_COLLECTIVE_BEGIN")[1].time
        assert all(e.time >= second_begin for e in p.of(r, "RMA_OP_COMPLETE_REMOTE"))
    # the last rank sleeps 200 ms before its second fence, and the others wait for it
    # there: from their own entry until it enters, as measured in this run (a loaded
    # machine may delay any rank's entry, so which rank enters last is not asserted)
    late = p.enters(NP - 1, "MPI_Win_fence")[1]
    assert late - p.leaves(NP - 1, "MPI_Accumulate")[0] >= LATE_S * 1e9  # the sleep
    gaps = [(late - p.enters(r, "MPI_Win_fence")[1]) / 1e9 for r in range(NP - 1)]
    for r, gap in enumerate(gaps):
        assert p.seconds_in(r, "MPI_Win_fence")[1] >= 0.9 * gap - 0.002, r
    calls = analyzed_functions(out, tmp_path)
    assert calls["MPI_Win_fence"] == 2 * NP and calls["MPI_Win_create"] == NP
    assert calls["MPI_Put"] == calls["MPI_Get"] == calls["MPI_Accumulate"] == NP


def group_members(p: Printed, ref: int | None) -> list[int]:
    (g,) = [d for d in p.defs_of("GROUP") if int(d.f["ref"]) == ref]
    return [int(x) for x in re.findall(r'(\d+) \("rank', g.f["line"])]


def test_rma_pscw(programs, mpi: str, tmp_path: Path) -> None:
    p, out = traced(programs, mpi, tmp_path, "rma.c", "pscw")
    win = window(p)
    post, wait = p.of(0, "RMA_GROUP_SYNC")
    assert p.kinds(0, "RMA") == Counter({"RMA_WIN_CREATE": 1, "RMA_WIN_DESTROY": 1,
                                         "RMA_GROUP_SYNC": 2})
    assert post.f["Level of Synchronicity"] == "{PROCESS}"
    assert wait.f["Level of Synchronicity"] == "{PROCESS, MEMORY}"
    assert post.num("Group") == wait.num("Group")
    assert group_members(p, post.num("Group")) == list(range(1, NP))
    for r in range(1, NP):
        assert p.kinds(r, "RMA") == Counter({"RMA_WIN_CREATE": 1, "RMA_WIN_DESTROY": 1,
                                             "RMA_GROUP_SYNC": 2, "RMA_PUT": 1,
                                             "RMA_OP_COMPLETE_REMOTE": 1})
        start, complete = p.of(r, "RMA_GROUP_SYNC")
        assert start.num("Group") == complete.num("Group")
        assert group_members(p, start.num("Group")) == [0]
        (put,) = p.of(r, "RMA_PUT")
        assert (put.num("Remote"), put.f["Bytes"], put.num("Window")) == (0, "16", win)
        assert ops_done(p, r) == {int(put.f["Matching"]): "RMA_OP_COMPLETE_REMOTE"}
    # the late origin sleeps 200 ms before its epoch; the target waits for its complete:
    # from its own entry until the complete is entered, as measured in this run (a loaded
    # machine may delay the target's own entry past it: not asserted), and its wait
    # cannot end before that
    complete = p.enters(NP - 1, "MPI_Win_complete")[0]
    assert p.enters(NP - 1, "MPI_Win_start")[0] - p.leaves(NP - 1, "MPI_Win_create")[0] \
        >= LATE_S * 1e9  # the sleep
    assert p.leaves(0, "MPI_Win_wait")[0] >= complete
    gap = (complete - p.enters(0, "MPI_Win_wait")[0]) / 1e9
    assert p.seconds_in(0, "MPI_Win_wait")[0] >= 0.9 * gap - 0.002
    calls = analyzed_functions(out, tmp_path)
    assert calls["MPI_Win_post"] == calls["MPI_Win_wait"] == 1
    assert calls["MPI_Win_start"] == calls["MPI_Win_complete"] == NP - 1


def test_rma_passive(programs, mpi: str, tmp_path: Path) -> None:
    p, out = traced(programs, mpi, tmp_path, "rma.c", "passive")
    win = window(p)
    for r in range(NP):
        t = (r + 1) % NP
        origin = r != 0  # ranks 1.. take rank 0's lock after rank 0 and operate under it
        assert p.kinds(r, "RMA") == Counter({
            "RMA_WIN_CREATE": 1, "RMA_WIN_DESTROY": 1, "RMA_REQUEST_LOCK": 2,
            "RMA_ACQUIRE_LOCK": 2, "RMA_RELEASE_LOCK": 2, "RMA_PUT": 2, "RMA_GET": 1,
            "RMA_ATOMIC": 4 + 2 * origin, "RMA_OP_COMPLETE_NON_BLOCKING": 4,
            "RMA_OP_COMPLETE_REMOTE": 2 + 2 * origin, "RMA_OP_COMPLETE_BLOCKING": 1,
            "RMA_SYNC": 4}), r
        locks = [(e.kind, e.num("Remote"), e.f.get("Type")) for e in
                 p.of(r, "RMA_REQUEST_LOCK", "RMA_ACQUIRE_LOCK", "RMA_RELEASE_LOCK")]
        assert locks == [("RMA_REQUEST_LOCK", 0, "EXCLUSIVE"), ("RMA_ACQUIRE_LOCK", 0, "EXCLUSIVE"),
                         ("RMA_RELEASE_LOCK", 0, None),
                         ("RMA_REQUEST_LOCK", None, "SHARED"), ("RMA_ACQUIRE_LOCK", None, "SHARED"),
                         ("RMA_RELEASE_LOCK", None, None)]
        atomics = [(e.num("Remote"), e.f["Type"], e.f["Sent"], e.f["Received"])
                   for e in p.of(r, "RMA_ATOMIC")]
        assert atomics == [(0, "FETCH_AND_ACCUMULATE", "4", "4"),
                           (0, "COMPARE_AND_SWAP", "8", "4")] * origin + [
            (t, "FETCH_AND_ACCUMULATE", "4", "4"), (t, "ACCUMULATE", "8", "0"),
            (t, "FETCH_AND_ACCUMULATE", "4", "4"), (t, "ACCUMULATE", "4", "0")]
        assert [(e.kind, e.num("Remote"), e.f["Bytes"]) for e in p.of(r, "RMA_PUT", "RMA_GET")] \
            == [("RMA_PUT", t, "16"), ("RMA_GET", t, "8"), ("RMA_PUT", t, "4")]
        assert [e.num("Remote") for e in p.of(r, "RMA_SYNC")] == [t, None, None, None]
        assert all(e.num("Window") == win for e in p.of(r, "RMA_PUT", "RMA_ATOMIC", "RMA_SYNC"))
        # each operation completed once, where it is known complete
        ops = p.of(r, "RMA_PUT", "RMA_GET", "RMA_ATOMIC")
        kinds = [ops_done(p, r)[int(e.f["Matching"])] for e in ops]
        nb, rem, blk = ("RMA_OP_COMPLETE_NON_BLOCKING", "RMA_OP_COMPLETE_REMOTE",
                        "RMA_OP_COMPLETE_BLOCKING")
        # [FOP, CAS] Rput, Rget, Get_accumulate, Raccumulate, Rget_accumulate, Accumulate, Put
        assert kinds == [rem, rem] * origin + [nb, nb, rem, nb, nb, blk, rem]
    # rank 0 holds its exclusive lock 200 ms after the Barrier the others pass to ask for
    # it; their epochs cannot end before rank 0 releases it (where they wait depends on
    # the MPI: Open MPI in MPI_Win_lock, MPICH later; how long, on when a busy machine
    # let each reach its epoch: not asserted)
    release = p.enters(0, "MPI_Win_unlock")[0]
    assert release - p.leaves(0, "MPI_Barrier")[1] >= LATE_S * 1e9  # the hold
    for r in range(1, NP):
        assert p.enters(r, "MPI_Win_lock")[0] >= p.leaves(0, "MPI_Win_lock")[0]
        assert p.leaves(r, "MPI_Win_unlock")[0] >= release, r
    calls = analyzed_functions(out, tmp_path)
    for name in ("MPI_Win_allocate", "MPI_Win_lock_all", "MPI_Rput", "MPI_Rget",
                 "MPI_Get_accumulate", "MPI_Raccumulate", "MPI_Rget_accumulate",
                 "MPI_Win_flush", "MPI_Win_flush_local_all", "MPI_Win_flush_all",
                 "MPI_Win_sync", "MPI_Win_unlock_all", "MPI_Win_free"):
        assert calls[name] == NP, name
    assert calls["MPI_Fetch_and_op"] == calls["MPI_Compare_and_swap"] == NP - 1


# --------------------------------------------------------------------------- MPI-IO

W, R, F = "WRITE", "READ", "FLUSH"
NONE, COLL, NB, NBC = "NONE", "{COLLECTIVE}", "{NON_BLOCKING}", "{NON_BLOCKING, COLLECTIVE}"
# (mode, flags, bytes requested, bytes done) of every operation of programs/mpiio.c, in order
IO_OPS = [
    (W, NONE, 16, 16), (W, COLL, 16, 16), (W, NONE, 16, 16), (W, COLL, 16, 16),
    (W, NB, 16, 16), (W, NBC, 16, 16), (W, NBC, 16, 16), (W, COLL, 16, 16), (W, NONE, 16, 16),
    (W, NB, 16, 16), (F, NONE, 0, 0),
    (R, NONE, 16, 16), (R, COLL, 16, 16), (R, NONE, 16, 16), (R, COLL, 16, 16),
    (R, NB, 16, 16), (R, NBC, 16, 16), (R, NBC, 16, 16), (R, NB, 16, 16), (R, COLL, 16, 16),
    (R, NONE, 16, 16), (R, NONE, 16, 8),  # the last one reads past the end of the file
]


def test_mpiio(programs, mpi: str, tmp_path: Path) -> None:
    untraced = tmp_path / "untraced.dat"
    run(programs, mpi, tmp_path, "mpiio.c", str(untraced))
    data = tmp_path / "traced.dat"
    p, out = traced(programs, mpi, tmp_path, "mpiio.c", str(data))
    assert data.read_bytes() == untraced.read_bytes()
    assert data.stat().st_size == 10 * 16 * NP
    # definitions: one paradigm, the data file and rank 0's scratch file, a handle per open
    (paradigm,) = p.defs_of("IO_PARADIGM")
    assert paradigm.f["Name"].startswith('"MPI-IO"') and paradigm.f["Class"] == "PARALLEL"
    files = {d.f["Name"].split('"')[1]: int(d.f["ref"]) for d in p.defs_of("IO_REGULAR_FILE")}
    assert files.keys() == {str(data), f"{data}.scratch"}
    handles = p.defs_of("IO_HANDLE")
    assert len(handles) == NP + 1
    on_world = [h for h in handles if h.f["Communicator"] == '"MPI_COMM_WORLD" <0>']
    assert len(on_world) == NP and all(h.num("File") == files[str(data)] for h in on_world)
    for r in range(NP):
        kinds = p.kinds(r, "IO_")
        nb = sum("NON_BLOCKING" in flags for _, flags, _, _ in IO_OPS)
        assert kinds == Counter({
            "IO_CREATE_HANDLE": 1 + (r == 0), "IO_DESTROY_HANDLE": 1 + (r == 0),
            "IO_DELETE_FILE": r == 0, "IO_OPERATION_BEGIN": len(IO_OPS),
            "IO_OPERATION_ISSUED": nb, "IO_OPERATION_COMPLETE": len(IO_OPS), "IO_SEEK": 8,
        }) - Counter(), r
        create = p.of(r, "IO_CREATE_HANDLE")[0]
        assert (create.f["Access Mode"], create.f["Creation Flags"]) == ("READ_WRITE", "{CREATE}")
        done = {int(e.f["Matching Id"]): int(e.f["Bytes Result"])
                for e in p.of(r, "IO_OPERATION_COMPLETE")}
        issued = {int(e.f["Matching Id"]) for e in p.of(r, "IO_OPERATION_ISSUED")}
        got = []
        for b in p.of(r, "IO_OPERATION_BEGIN"):
            mid = int(b.f["Matching Id"])
            got.append((b.f["Mode"], b.f["Operation Flags"], int(b.f["Bytes Request"]), done[mid]))
            assert (mid in issued) == ("NON_BLOCKING" in b.f["Operation Flags"])
        assert got == IO_OPS, r
        seeks = [(int(s.f["Offset Request"]), s.f["Whence"]) for s in p.of(r, "IO_SEEK")]
        region, slot = 16 * NP, 16 * r
        assert seeks == [(2 * region + slot, "FROM_START"), (3 * region + slot, "FROM_START"),
                         (7 * region, "FROM_START"), (2 * region + slot, "FROM_START"),
                         (3 * region + slot, "FROM_START"), (6 * region + slot, "FROM_START"),
                         (7 * region, "FROM_START"), (8 * region, "FROM_START")]
    (delete,) = p.of(0, "IO_DELETE_FILE")
    assert delete.num("File") == files[f"{data}.scratch"]
    calls = analyzed_functions(out, tmp_path)
    for name in ("MPI_File_write_at", "MPI_File_write_at_all", "MPI_File_iwrite_shared",
                 "MPI_File_read_ordered", "MPI_File_write_at_all_begin"):
        assert calls[name] == NP, name
    assert calls["MPI_File_open"] == calls["MPI_File_close"] == NP + 1  # + rank 0's scratch


# ------------------------------------------------- a real MPI-IO application: PnetCDF

CDL = Path(__file__).parent / "data" / "pnetcdf.cdl"  # v: 64 x 4 ints, d: 64 doubles


@pytest.mark.skipif(not mpijobs.have("ncmpigen"), reason="pnetcdf-bin is not installed")
def test_pnetcdf_tools(tmp_path: Path) -> None:
    """ncmpigen writes a netCDF file with collective MPI-IO on 2 ranks, ncmpidiff reads two
    of them back: same file and output traced and untraced, and the writes in the trace."""
    np = 2
    plain = tmp_path / "untraced.nc"
    job = mpijobs.run(["ncmpigen", "-v", "2", "-o", str(plain), str(CDL)], np=np,
                      traced=False)
    assert job.returncode == 0, job.stderr
    nc = tmp_path / "traced.nc"
    out = tmp_path / "gen"
    gen = mpijobs.run(["ncmpigen", "-v", "2", "-o", str(nc), str(CDL)], np=np, out=out)
    assert (gen.returncode, gen.stdout) == (0, job.stdout), gen.stderr
    assert nc.read_bytes() == plain.read_bytes()
    p = otf2_print(out)
    (f,) = p.defs_of("IO_REGULAR_FILE")
    assert f.f["Name"].split('"')[1] == str(nc)
    for r in range(np):
        writes = [(b.f["Operation Flags"], int(b.f["Bytes Request"]))
                  for b in p.of(r, "IO_OPERATION_BEGIN") if b.f["Mode"] == "WRITE"]
        done = [int(c.f["Bytes Result"]) for c in p.of(r, "IO_OPERATION_COMPLETE")]
        # every rank writes both variables collectively; rank 0 also the header
        assert [w for w in writes if w[0] == COLL] == [(COLL, 64 * 4 * 4), (COLL, 64 * 8)]
        header = [w for w in writes if w[0] != COLL]
        assert len(header) == (r == 0) and all(0 < b < 512 for _, b in header)
        assert done == [b for _, b in writes]
        assert p.kinds(r, "IO_") == Counter({"IO_CREATE_HANDLE": 1, "IO_DESTROY_HANDLE": 1,
                                             "IO_OPERATION_BEGIN": len(writes),
                                             "IO_OPERATION_COMPLETE": len(writes)})
    # the analysis: its MPI-IO time is the I/O part of each rank's breakdown
    trace = mpiscope.load(out)
    ranks = mpiscope.analyze(trace).ranks.set_index("rank")
    calls = trace.calls[(trace.calls["depth"] == 0)
                        & trace.calls["function"].str.startswith("MPI_File_")]
    file_s = (calls["end"] - calls["start"]).groupby(calls["rank"]).sum() / 1e9
    for r in range(np):
        assert ranks.loc[r, "io_s"] > 0
        assert ranks.loc[r, "io_s"] == pytest.approx(file_s[r], rel=0.01)
    # ncmpidiff reads both files: same verdict traced, and reads of the variables' bytes
    diff = ["ncmpidiff", str(plain), str(nc)]
    want = mpijobs.run(diff, np=np, traced=False)
    out = tmp_path / "diff"
    got = mpijobs.run(diff, np=np, out=out)
    assert (got.returncode, got.stdout) == (want.returncode, want.stdout) == (0, want.stdout)
    assert "All variables of two files are the same" in got.stdout
    p = otf2_print(out)
    for r in range(np):
        reads = [int(c.f["Bytes Result"]) for c in p.of(r, "IO_OPERATION_COMPLETE")]
        assert reads.count(64 * 8) >= 2 and sum(reads) > 0


# ----------------------------------------------------------- Fortran (`use mpi`)

FORTRAN = {
    "openmpi": (None, None),
    "mpich": (["mpif90.mpich", "-g", "-O0", "-ffree-line-length-none",
               "-fallow-argument-mismatch"], mpijobs.MPIEXEC_MPICH),
}


@pytest.mark.parametrize("mpi", sorted(FORTRAN))
def test_fortran_rma_and_io(mpi: str, tmp_path: Path) -> None:
    compiler, launcher = FORTRAN[mpi]
    if compiler and not mpijobs.have(compiler[0]):
        pytest.skip(f"{compiler[0]} not installed")
    exe = mpijobs.build("f_rmaio.f90", tmp_path, compiler)
    plain, data, out = tmp_path / "untraced.dat", tmp_path / "traced.dat", tmp_path / "trace"
    want = mpijobs.run([str(exe), str(plain)], np=2, traced=False, launcher=launcher, mpi=mpi)
    got = mpijobs.run([str(exe), str(data)], np=2, out=out, launcher=launcher, mpi=mpi)
    assert got.returncode == want.returncode == 0, got.stderr
    assert mpijobs.sorted_lines(got.stdout) == mpijobs.sorted_lines(want.stdout) == [
        "rank 0 got 1 wrote 16", "rank 1 got 0 wrote 16"]
    assert data.read_bytes() == plain.read_bytes()
    p = otf2_print(out)
    window(p)
    (f,) = p.defs_of("IO_REGULAR_FILE")
    assert f.f["Name"].split('"')[1] == str(data)  # the CHARACTER name, blanks trimmed
    for r in range(2):
        (put,) = p.of(r, "RMA_PUT")
        assert (put.num("Remote"), put.f["Bytes"]) == (1 - r, "16")
        assert ops_done(p, r) == {int(put.f["Matching"]): "RMA_OP_COMPLETE_REMOTE"}
        (begin,) = p.of(r, "IO_OPERATION_BEGIN")
        (done,) = p.of(r, "IO_OPERATION_COMPLETE")
        assert (begin.f["Mode"], begin.f["Operation Flags"], begin.f["Bytes Request"]) == \
            ("WRITE", COLL, "16")
        assert done.f["Bytes Result"] == "16"
        create = p.of(r, "IO_CREATE_HANDLE")[0]
        assert (create.f["Access Mode"], create.f["Creation Flags"]) == ("WRITE_ONLY", "{CREATE}")


# ------------------------------------------ a rank killed amid RMA and I/O: recovered

def test_killed_rank_with_rma_and_io_recovers(programs, tmp_path: Path) -> None:
    """kill -9 rank 1 of programs/rmaio_loop.c: `mpiscope analyze` recovers it from its
    crash-safe log with its RMA and I/O records and the window, file and handle they name."""
    job = run_and_kill(programs["rmaio_loop.c"], tmp_path / "trace", after=30,
                       args=("100000", str(tmp_path / "loop.dat")))
    assert job.returncode == 128 + signal.SIGKILL, job.stderr
    assert (job.out / ".mpiscope-live" / f"rank{KILLED}.events").is_file()
    calls = analyzed_functions(job.out, tmp_path)  # recovers rank 1 first
    assert calls["MPI_Put"] >= 3 * job.printed and calls["MPI_File_iwrite_at"] >= 3 * job.printed
    p = otf2_print(job.out / f"rank{KILLED}")
    window(p)
    (f,) = p.defs_of("IO_REGULAR_FILE")
    assert f.f["Name"].split('"')[1] == str(tmp_path / "loop.dat")
    (h,) = p.defs_of("IO_HANDLE")
    assert h.num("File") == int(f.f["ref"])
    ev = p.events[KILLED]
    puts = [e for e in ev if e.kind == "RMA_PUT"]
    assert len(puts) >= job.printed
    assert all((e.num("Remote"), e.f["Bytes"]) == (2, "16") for e in puts)
    assert set(ops_done(p, KILLED)) <= {int(e.f["Matching"]) for e in puts}
    assert len(ops_done(p, KILLED)) >= job.printed
    writes = [int(e.f["Bytes Request"]) for e in ev if e.kind == "IO_OPERATION_BEGIN"]
    assert len(writes) >= 2 * job.printed and set(writes) == {16}
    assert all(e.num("Handle") == int(h.f["ref"]) for e in ev if e.kind.startswith("IO_"))
