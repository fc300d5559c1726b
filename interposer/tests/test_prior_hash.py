"""The receive buffer's hash at entry (`mpiscope:prior_hash`) on real collectives
(programs/redundant.c, 2 ranks): what each buffer held before the call, against the
values the program put there; and what `mpiscope analyze` concludes from it: the
reduction into a buffer that already holds its result is redundant, the gather into a
buffer refilled with -1 before each call is not (deleting it would leave the -1s)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

NP, ITERATIONS = 2, 10
PROGRAM = Path(__file__).parent / "programs" / "redundant.c"


def line(marker: str) -> str:
    src = PROGRAM.read_text().splitlines()
    return f"redundant.c:{next(i for i, s in enumerate(src, 1) if f'/* {marker} */' in s)}"


def doubles(*values: float) -> int:
    return tc.fnv1a(struct.pack(f"<{len(values)}d", *values))


@pytest.fixture(scope="module")
def run(programs, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Trace]:
    out = tmp_path_factory.mktemp("redundant") / "trace"
    job = mpijobs.run([str(programs["redundant.c"])], np=NP, out=out)
    assert job.returncode == 0, job.stderr
    return out, tc.read_both(out)


def test_prior_hash_is_the_receive_buffer_before_the_call(run) -> None:
    _, t = run
    mine = [r + 1.0 for r in range(NP)]
    total = sum(mine)
    for r in range(NP):
        ends = t.of(r, "MpiCollectiveEnd")
        gathers = [e for e in ends if e["op"] == "ALLGATHER"]
        reduces = [e for e in ends if e["op"] == "ALLREDUCE"]
        kept, changing = reduces[0::2], reduces[1::2]
        assert len(gathers) == len(kept) == len(changing) == ITERATIONS
        for it in range(ITERATIONS):
            # refilled with -1 before every call: never the result it receives
            assert gathers[it]["mpiscope:prior_hash"] == doubles(*[-1.0] * NP)
            assert gathers[it]["mpiscope:out_hash"] == doubles(*mine)
            # 0 before the first call, then the result of the one before
            assert kept[it]["mpiscope:prior_hash"] == doubles(0.0 if it == 0 else total)
            assert kept[it]["mpiscope:out_hash"] == doubles(total)
            before = 0.0 if it == 0 else float(NP * (it - 1))  # each rank adds `it`
            assert changing[it]["mpiscope:prior_hash"] == doubles(before)
        # nonblocking: the buffer as it was when the call was posted
        done = [e for e in t.of(r, "NonBlockingCollectiveComplete") if e["op"] == "ALLREDUCE"]
        assert [e["mpiscope:prior_hash"] for e in done] == \
            [doubles(0.0)] + [doubles(float(NP))] * (ITERATIONS - 1)


def test_only_the_kept_buffer_is_redundant(run, tmp_path: Path) -> None:
    out, _ = run
    js = tmp_path / "a.json"
    ana = subprocess.run(["mpiscope", "analyze", str(out), "--json", str(js)],
                         capture_output=True, text=True, timeout=300)
    assert ana.returncode == 0, ana.stderr
    doc = json.loads(js.read_text())
    # listed or below the noise floor, the verdict is the same
    red = {f["callsite"]: f for f in doc["findings"] + doc.get("minor", [])
           if f["kind"] == "redundant_collective"}
    assert set(red) == {line("KEPT")}, red
    f = red[line("KEPT")]
    assert f["calls"] == NP * (ITERATIONS - 1) and f["evidence"]["instances"] == ITERATIONS - 1
    assert f"in all {ITERATIONS - 1} calls after the first of this run" in f["message"]
