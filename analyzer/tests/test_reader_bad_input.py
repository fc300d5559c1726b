"""Bad input: one clear line naming the path; traces of jobs that died are read anyway."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope.archive import reader
from mpiscope.errors import UserError
from mpiscope_testing.tracegen import TraceBuilder, copy_trace


def problem(path: Path) -> str:
    with pytest.raises(UserError) as info:
        reader.load(path, use_cache=False)
    assert info.value.subject.startswith(str(path))  # the path, or the file in it at fault
    line = info.value.one_line()
    assert "\n" not in line and line.startswith(f"mpiscope: {info.value.subject}: ")
    return info.value.problem


def test_missing_path(tmp_path: Path) -> None:
    assert problem(tmp_path / "nope") == "no such file or directory"


def test_directory_without_archive(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    assert problem(tmp_path) == "not an OTF2 archive (no traces.otf2)"


def test_garbage_anchor(tmp_path: Path) -> None:
    (tmp_path / "traces.otf2").write_text("this is not a trace\n" * 10)
    assert problem(tmp_path).startswith("not an OTF2 anchor file")


def test_garbage_definitions(two_rank_trace: Path, tmp_path: Path) -> None:
    trace = copy_trace(two_rank_trace, tmp_path / "t")
    (trace / "traces.def").write_bytes(b"\x00garbage" * 50)
    assert problem(trace).startswith("corrupt OTF2 definitions: ")


def test_all_event_files_garbage(two_rank_trace: Path, tmp_path: Path) -> None:
    trace = copy_trace(two_rank_trace, tmp_path / "t")
    for evt in (trace / "traces").glob("*.evt"):
        evt.write_bytes(b"\xff" * 64)
    assert problem(trace).startswith("corrupt OTF2 events: ")


def test_cli_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "traces.otf2").write_bytes(b"\x03BOTF2" + b"\x00" * 40)  # signature, no body
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(tmp_path),
                           "--no-cache"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mpiscope: {tmp_path}"), proc.stderr


def test_rank_without_leaves_or_finalize_is_closed_at_its_last_event(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    for rank in (0, 1):
        tb.call(rank, 0, 10, "MPI_Init")
        tb.send_call(rank, 20, 30, dest=1 - rank, tag=0, nbytes=8) if rank == 0 else \
            tb.recv_call(rank, 15, 35, src=0, tag=0, nbytes=8)
    tb.call(0, 100, 200, "MPI_Finalize")
    tb.enter(1, 50, "MPI_Allreduce")  # rank 1 died inside the Allreduce ...
    tb.coll_begin(1, 50)
    tb.enter(1, 60, "MPI_Barrier")  # ... (nested call, e.g. inside the library)
    tb.send(1, 70, 0, tag=9, nbytes=4)  # last event of rank 1
    t = reader.load(write_trace(tb), use_cache=False)
    assert t.meta.truncated_ranks == [1]
    last = t.calls[t.calls["rank"] == 1].tail(2)
    assert last[["function", "start", "end", "depth", "truncated"]].values.tolist() == [
        ["MPI_Allreduce", 50, 70, 0, True], ["MPI_Barrier", 60, 70, 1, True]]
    assert int(t.ranks.loc[1, "last_ns"]) == 70
    assert len(t.messages) == 1
    assert t.unmatched[["rank", "event", "peer", "tag"]].values.tolist() == [[1, "send", 0, 9]]


def test_cut_event_file_is_read_as_far_as_it_goes(synth_trace, tmp_path: Path) -> None:
    trace = copy_trace(synth_trace(4, 40000), tmp_path / "t")
    full = reader.load(trace, use_cache=False)
    evt = trace / "traces" / "2.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])
    cut = reader.load(trace, use_cache=False)
    assert cut.meta.truncated_ranks == [2]
    events = dict(zip(cut.ranks["rank"], cut.ranks["events"], strict=True))
    full_events = dict(zip(full.ranks["rank"], full.ranks["events"], strict=True))
    assert 0 < events[2] < full_events[2]
    assert {r: events[r] for r in (0, 1, 3)} == {r: full_events[r] for r in (0, 1, 3)}
    # what rank 2 did before the cut is there; its partners' later messages are unmatched
    assert len(cut.calls[cut.calls["rank"] == 2]) > 0
    assert 0 < len(cut.messages) < len(full.messages) and len(cut.unmatched) > 0
    assert full.unmatched.empty


def test_missing_event_file_leaves_an_empty_truncated_rank(synth_trace, tmp_path) -> None:
    trace = copy_trace(synth_trace(4, 40000), tmp_path / "t")
    (trace / "traces" / "1.evt").unlink()
    t = reader.load(trace, use_cache=False)
    assert t.meta.truncated_ranks == [1]
    assert t.ranks["events"].tolist()[1] == 0 and (t.calls["rank"] != 1).all()


@pytest.mark.parametrize("keep", [0.2, 0.5, 0.9])
def test_cut_definitions_give_one_line_and_print_nothing(two_rank_trace: Path, tmp_path: Path,
                                                         capfd, keep: float) -> None:
    trace = copy_trace(two_rank_trace, tmp_path / "t")
    defs = trace / "traces.def"
    defs.write_bytes(defs.read_bytes()[: int(defs.stat().st_size * keep)])
    assert problem(trace).startswith("corrupt OTF2 definitions: ")
    out, err = capfd.readouterr()
    assert out == "" and err == ""


@pytest.mark.parametrize("seed", range(12))
def test_damaged_bytes_never_crash(synth_trace, tmp_path: Path, seed: int) -> None:
    """Random damage to an event or definition file: the trace reads, or one UserError."""
    rng = random.Random(seed)
    trace = copy_trace(synth_trace(4, 20000), tmp_path / "t")
    victim = rng.choice(sorted((trace / "traces").glob("*.evt")) + [trace / "traces.def"])
    data = bytearray(victim.read_bytes())
    for _ in range(rng.randint(1, 20)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    victim.write_bytes(bytes(data[: rng.randrange(len(data) // 2, len(data) + 1)]))
    try:
        t = reader.load(trace, use_cache=False)
    except UserError as err:
        assert "\n" not in err.one_line()
    else:
        assert t.meta.num_ranks == 4
