"""Scenario builders for the analysis tests.

- `build(...)`: a `Trace` made directly from a few hand-written calls and messages, shaped
  exactly as docs/data-model.md says, so expected results can be computed by hand.
- `traced_run(...)`: compile one of analyzer/tests/programs with -g and run it under the
  interposer (a real MPI job writing a real OTF2 trace).
- `marker_line(...)`: the line of a `MARK:<name>` comment, so tests never hard-code lines.
- `traced_himeno(...)`: trace workloads/himeno/himeno with `mpiscope run`, as a user does.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.archive.trace import Trace, TraceMeta
from mpiscope_testing import REPO

PROGRAMS = REPO / "analyzer" / "tests" / "programs"
HIMENO = REPO / "workloads" / "himeno" / "himeno"
# the Score-P trace of a 2-rank ping-pong shipped beside the repository (../shared/testdata);
# read-only for tests: they use the `scorep_trace` fixture, a private copy (analyzing a
# trace writes a cache beside it)
SCOREP_PING_PONG = Path(os.environ.get(
    "MPISCOPE_TESTDATA", REPO.parent / "shared" / "testdata")
) / "scorep-ping-pong"

COLLECTIVES = {"MPI_Allreduce", "MPI_Bcast", "MPI_Reduce", "MPI_Allgather", "MPI_Alltoall",
               "MPI_Gather", "MPI_Scatter"}


def _kind(function: str) -> str:
    if function == "MPI_Init":
        return "init"
    if function == "MPI_Finalize":
        return "finalize"
    if function == "MPI_Barrier":
        return "barrier"
    if function in COLLECTIVES:
        return "collective"
    if function in ("MPI_Send", "MPI_Ssend", "MPI_Isend"):
        return "p2p_send"
    if function in ("MPI_Recv", "MPI_Irecv"):
        return "p2p_recv"
    if function.startswith(("MPI_Wait", "MPI_Test")):
        return "wait"
    return "other"


@dataclass
class Scenario:
    """Calls in the order given; call ids are their positions in the list."""

    hosts: dict[int, str] = field(default_factory=dict)
    calls: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)

    def call(self, rank: int, function: str, start: int, end: int, **kw) -> int:
        self.calls.append({"rank": rank, "function": function, "start": start, "end": end,
                           **kw})
        return len(self.calls) - 1

    def message(self, send_call: int, recv_call: int, nbytes: int = 8, *,
                send_complete: int | None = None, recv_complete: int | None = None,
                send_time: int | None = None, recv_time: int | None = None,
                tag: int = 0) -> None:
        self.messages.append({"send_call": send_call, "recv_call": recv_call,
                              "bytes": nbytes, "send_complete": send_complete,
                              "recv_complete": recv_complete, "send_time": send_time,
                              "recv_time": recv_time, "tag": tag})

    def trace(self) -> Trace:
        return build(self)


def build(sc: Scenario) -> Trace:
    rows = []
    for i, c in enumerate(sc.calls):
        fn = c["function"]
        rows.append({
            "call": i, "rank": c["rank"], "thread": c.get("thread", 0), "function": fn,
            "kind": c.get("kind", _kind(fn)),
            "start": c["start"], "end": c["end"], "depth": c.get("depth", 0),
            "callsite": c.get("callsite", ""), "comm": c.get("comm", 0 if _kind(fn) in (
                "collective", "barrier", "p2p_send", "p2p_recv") else -1),
            "peer": c.get("peer", -1), "tag": c.get("tag", -1),
            "bytes_sent": c.get("bytes_sent", 0), "bytes_recv": c.get("bytes_recv", 0),
            "root": c.get("root", -1), "coll_seq": -1, "coll_op": -1,
            "in_hash": c.get("in_hash", 0), "out_hash": c.get("out_hash", 0),
            "prior_hash": c.get("prior_hash", 0),
            "truncated": False})
    calls = pd.DataFrame(rows)
    if any("polls" in c for c in sc.calls):  # merged polling visits (interposer README)
        calls["polls"] = [int(c.get("polls", 1)) for c in sc.calls]
    if any("run_delay" in c for c in sc.calls):  # (at Enter, at Leave), -1: not sampled
        delays = np.array([c.get("run_delay", (-1, -1)) for c in sc.calls], dtype=np.int64)
        calls["run_delay_enter"], calls["run_delay_leave"] = delays[:, 0], delays[:, 1]
    calls = calls.astype({
        "call": np.int64, "rank": np.int32, "thread": np.int16, "start": np.int64,
        "end": np.int64,
        "depth": np.int8, "comm": np.int32, "peer": np.int32, "tag": np.int32,
        "bytes_sent": np.int64, "bytes_recv": np.int64, "root": np.int32,
        "coll_seq": np.int64, "coll_op": np.int16, "in_hash": np.uint64,
        "out_hash": np.uint64, "prior_hash": np.uint64})
    for col in ("function", "kind", "callsite"):
        calls[col] = calls[col].astype("category")
    is_coll = calls["kind"].isin(["collective", "barrier"]).to_numpy()
    order = calls[is_coll].sort_values("start")
    seq = order.groupby(["rank", "comm"]).cumcount()
    calls.loc[seq.index, "coll_seq"] = seq.to_numpy()
    coll = calls[is_coll][["rank", "call", "function", "comm", "coll_seq", "start", "end",
                           "root", "bytes_sent", "bytes_recv", "in_hash", "out_hash",
                           "prior_hash"]].copy()
    coll["instance"] = coll.groupby(["comm", "coll_seq"]).ngroup().astype(np.int64)
    coll = coll.reset_index(drop=True)

    mrows = []
    for m in sc.messages:
        s, r = sc.calls[m["send_call"]], sc.calls[m["recv_call"]]
        scc = m["send_complete"] if m["send_complete"] is not None else m["send_call"]
        rcc = m["recv_complete"] if m["recv_complete"] is not None else m["recv_call"]
        mrows.append({
            "send_rank": s["rank"], "recv_rank": r["rank"], "comm": 0, "tag": m["tag"],
            "bytes": m["bytes"], "send_call": m["send_call"], "recv_call": m["recv_call"],
            "send_complete_call": scc, "recv_complete_call": rcc,
            "send_time": m["send_time"] if m["send_time"] is not None else s["start"],
            "recv_time": m["recv_time"] if m["recv_time"] is not None
            else sc.calls[rcc]["end"],
            "send_enter": s["start"], "recv_enter": r["start"],
            "recv_leave": sc.calls[rcc]["end"]})
    mcols = ["send_rank", "recv_rank", "comm", "tag", "bytes", "send_call", "recv_call",
             "send_complete_call", "recv_complete_call", "send_time", "recv_time",
             "send_enter", "recv_enter", "recv_leave"]
    messages = pd.DataFrame(mrows, columns=mcols).astype(np.int64)

    nranks = int(calls["rank"].max()) + 1
    ranks = pd.DataFrame({
        "rank": np.arange(nranks, dtype=np.int32),
        "host": [sc.hosts.get(r, "node0") for r in range(nranks)],
        "location": np.arange(nranks, dtype=np.int64),
        "first_ns": calls.groupby("rank")["start"].min().to_numpy(),
        "last_ns": calls.groupby("rank")["end"].max().to_numpy()})
    empty = pd.DataFrame()
    unmatched = pd.DataFrame(columns=["rank", "event", "peer", "comm", "tag", "bytes", "call"])
    meta = TraceMeta(program="scenario", creator="scenarios.py", num_ranks=nranks,
                     duration_ns=int(ranks["last_ns"].max()))
    return Trace(Path("scenario"), meta, ranks, empty, calls, calls.iloc[0:0], empty,
                 messages, coll, empty, unmatched)


def marker_line(source: Path, name: str) -> int:
    """Line number of the `MARK:<name>` comment in a program's source."""
    for no, text in enumerate(source.read_text().splitlines(), 1):
        if f"MARK:{name} " in text + " ":
            return no
    raise LookupError(f"no MARK:{name} in {source}")


def compile_program(name: str, dest: Path) -> Path:
    exe = dest / name
    if not exe.exists():
        subprocess.run(["mpicc", "-g", "-O0", "-o", str(exe), str(PROGRAMS / f"{name}.c")],
                       check=True)
    return exe


def traced_run(name: str, ranks: int, args: list[str], workdir: Path,
               env: dict[str, str] | None = None) -> Path:
    """Compile programs/<name>.c and run it under the interposer (with `env` added);
    return the trace dir."""
    exe = compile_program(name, workdir)
    out = workdir / f"{name}-{ranks}"
    lib = subprocess.run(["mpiscope", "lib"], check=True, capture_output=True,
                         text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=lib, MPISCOPE_OUT=str(out),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **(env or {}))
    subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks), str(exe), *args],
                   check=True, env=env, capture_output=True, timeout=120)
    assert (out / "traces.otf2").exists(), f"no trace written to {out}"
    return out


def traced_himeno(ranks: int, args: list[str], workdir: Path) -> Path:
    """`mpiscope run --out DIR -- mpirun -np RANKS himeno ARGS`; return the trace dir."""
    assert HIMENO.is_file(), f"{HIMENO} not built (run `make build`)"
    out = workdir / f"himeno-{ranks}-{'-'.join(args).replace('--', '')}"
    subprocess.run(["mpiscope", "run", "--out", str(out), "--", "mpirun", "--allow-run-as-root",
                    "--oversubscribe", "-np", str(ranks), str(HIMENO), *args],
                   check=True, capture_output=True, timeout=300)
    assert (out / "traces.otf2").exists(), f"no trace written to {out}"
    return out


def analyze_json(path: Path, tmp: Path, env: dict[str, str] | None = None,
                 timeout: float = 120) -> tuple[subprocess.CompletedProcess, dict]:
    """`mpiscope analyze PATH --json` as a user runs it: the process (stderr: its notices
    and warnings) and the JSON it wrote."""
    import json
    import sys
    import time

    out = tmp / f"{path.name}-{time.monotonic_ns()}.json"
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(path), "--json",
                           str(out)], env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(out.read_text())
