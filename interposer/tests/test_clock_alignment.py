"""Clock alignment: a rank on "another host" whose CLOCK_MONOTONIC is seconds off (an
LD_PRELOAD shim shifts it) must land on rank 0's time line, so cross-rank order holds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

SHIFT_NS = 5_000_000_000
# The offsets come from a few ping-pongs between oversubscribed ranks; on a busy 2-core
# machine one of them can be descheduled mid-exchange for tens of ms, which the estimate
# absorbs only in part. 100 ms is still 50x below the shift: a rank left unaligned (5 s
# off) or aligned the wrong way (10 s) fails by far.
TOLERANCE_NS = 100_000_000


@pytest.fixture(scope="module")
def shim(tmp_path_factory, interposer) -> Path:
    d = tmp_path_factory.mktemp("clockshift")
    for cmd in (["cc", "-O2", "-fPIC", "-shared", "-o", "libclockshift.so",
                 str(mpijobs.PROGRAMS / "clockshift.c"), "-ldl"],
                ["cc", "-O2", "-o", "clockprint", str(mpijobs.PROGRAMS / "clockprint.c")]):
        subprocess.run(cmd, cwd=d, check=True, capture_output=True)
    return d


def now_ns(shim: Path, shift: int) -> int:
    env = {**os.environ, "LD_PRELOAD": str(shim / "libclockshift.so"),
           "CLOCKSHIFT_NS": str(shift)}
    return int(subprocess.run([str(shim / "clockprint")], env=env, capture_output=True,
                              text=True, check=True).stdout)


def shifted_run(shim: Path, exe: Path, out: Path, shifts: list[int]) -> Trace:
    """MPMD launch: rank i on host-i with its clock shifted by shifts[i]."""
    lib = mpijobs.interposer_lib()
    cmd = [*mpijobs.MPIRUN, "-x", f"MPISCOPE_OUT={out}"]
    for i, shift in enumerate(shifts):
        cmd += [":"] if i else []
        cmd += ["-np", "1", "-x", f"LD_PRELOAD={shim / 'libclockshift.so'}:{lib}",
                "-x", f"CLOCKSHIFT_NS={shift}", "-x", f"MPISCOPE_HOSTNAME=host-{i}",
                str(exe), "50"]
    job = mpijobs.run(cmd, traced=False)
    assert job.returncode == 0, job.stderr
    return tc.read_both(out)


def calls(t: Trace, rank: int, region: str) -> list[tuple[int, int]]:
    """(enter, leave) times of every call of `region` on `rank`."""
    spans, start = [], 0
    for e in t.events[rank]:
        if e.kind == "Enter" and e["region"] == region:
            start = e.time
        elif e.kind == "Leave" and e["region"] == region:
            spans.append((start, e.time))
    return spans


@pytest.mark.parametrize("shifts", [[0, SHIFT_NS], [0, -SHIFT_NS, SHIFT_NS]],
                         ids=["ahead", "behind-and-ahead"])
def test_shifted_clocks_are_aligned_to_rank0(shifts, shim, programs, tmp_path) -> None:
    # the shim shifts the clock: bracketed by unshifted readings before and after (how
    # long each process takes to start does not matter)
    before, shifted, after = now_ns(shim, 0), now_ns(shim, SHIFT_NS), now_ns(shim, 0)
    assert before + SHIFT_NS <= shifted <= after + SHIFT_NS
    t = shifted_run(shim, programs["loop.c"], tmp_path / "trace", shifts)
    n = len(shifts)
    assert t.hosts == {i: f"host-{i}" for i in range(n)}
    for region in ("MPI_Allreduce", "MPI_Barrier"):
        per_rank = [calls(t, r, region) for r in range(n)]
        assert len({len(spans) for spans in per_rank}) == 1
        for spans in zip(*per_rank, strict=True):
            # nobody leaves an Allreduce/Barrier before everybody has entered it
            latest_enter = max(enter for enter, _ in spans)
            earliest_leave = min(leave for _, leave in spans)
            assert latest_enter <= earliest_leave + TOLERANCE_NS, (region, spans)
    # a message is received after it was sent
    for r in range(n):
        sends = [e.time for e in t.of(r, "MpiIsend")]
        recvs = [e.time for e in t.of((r + 1) % n, "MpiIrecv")]
        assert len(sends) == len(recvs) == 50
        for sent, received in zip(sends, recvs, strict=True):
            assert received >= sent - TOLERANCE_NS
