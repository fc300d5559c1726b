"""recover.py never takes a failed `mpiscope-recover` run for a recovery.

The real tool's refusals are tested on real damaged logs (test_killed_rank.py,
interposer/tests/test_recover_hostile.py). Here stand-in programs play the failures the
real tool must not have but recover.py must survive all the same — a hang, a crash, a
success claimed without an archive (as when the tool once printed "rank 1: 11518 events"
and left 2 of them), an exit status without a word — each must end as one problem line
for the rank, the log kept with the line beside it, and `analyze`'s reader warning.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from mpiscope.archive import recover, salvaged

LOG = b"not read by the stand-in programs"


def stand_in(tmp: Path, script: str) -> Path:
    exe = tmp / "mpiscope-recover"
    exe.write_text("#!/bin/sh\n" + script + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def job_dir(tmp: Path) -> Path:
    live = tmp / "trace" / recover.LIVE_DIR
    live.mkdir(parents=True)
    for suffix in ("defs", "events"):
        (live / f"rank1.{suffix}").write_bytes(LOG)
    return tmp / "trace"


CASES = [
    ("hangs", "exec sleep 60", "rank 1: mpiscope-recover did not finish within 1 s (killed); "
     "its log is kept"),
    ("crashes", "kill -SEGV $$", "rank 1: mpiscope-recover died of signal 11"),
    ("claims success, writes nothing", 'echo "rank 1: 11518 events, 1.000 s from MPI_Init"',
     "rank 1: mpiscope-recover reported success but left no complete archive in "),
    ("exits 0 without a word", "exit 0", "rank 1: mpiscope-recover exited with status 0"),
    ("exits 1 without a word", "exit 1", "rank 1: mpiscope-recover exited with status 1"),
    ("refuses", 'echo "mpiscope-recover: rank 1: X.defs: byte 24: header: bad" >&2; exit 1',
     "rank 1: X.defs: byte 24: header: bad"),
]


@pytest.mark.parametrize("name,script,says", CASES, ids=[c[0] for c in CASES])
def test_a_failed_run_is_a_problem_never_a_recovery(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   name: str, script: str, says: str) -> None:
    trace = job_dir(tmp_path)
    monkeypatch.setattr(recover, "tool", lambda: stand_in(tmp_path, script))
    monkeypatch.setattr(recover, "TIMEOUT_BASE_S", 1.0)
    done, problems = recover.recover(trace)
    assert done == []
    assert len(problems) == 1 and problems[0].startswith(says), problems
    live = trace / recover.LIVE_DIR
    assert (live / "rank1.defs").read_bytes() == (live / "rank1.events").read_bytes() == LOG
    assert salvaged.unrecovered(trace) == {1: problems[0]}
    assert salvaged.unrecovered_warnings(trace) == [
        f"rank 1 left a crash-safe log that could not be recovered, so the analysis has none "
        f"of its events ({problems[0]})"]


def test_the_timeout_grows_with_the_log(tmp_path: Path) -> None:
    trace = job_dir(tmp_path)
    small = recover.timeout_for(trace, 1)
    with open(trace / recover.LIVE_DIR / "rank1.events", "r+b") as f:
        f.truncate(1 << 30)  # sparse: 1 GiB of log
    big = recover.timeout_for(trace, 1)
    assert small == pytest.approx(recover.TIMEOUT_BASE_S, abs=1)
    assert big == pytest.approx(recover.TIMEOUT_BASE_S + 1024 * recover.TIMEOUT_PER_MIB_S,
                                abs=1)
