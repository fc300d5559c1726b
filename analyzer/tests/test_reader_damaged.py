"""Damaged and hostile traces are bounded by their files and never make impossible numbers
(issue 29): the cases a mutation campaign found, each as the damage that found it.

- every Location's numberOfEvents 2^64 - 1 (the reader's table sizing wrapped and looped);
- a region defined with ref 0xfffffffe (lookup tables sized by the largest ref: 16 GiB);
- timestamps moved forward, backward, before the trace and to 2^64 - 1 (negative parts,
  durations of 9e9 s);
- byte counts of 2^63 + 5 (negative bytes in the JSON);
- an event file cut in its second chunk (libotf2 decoded the buffer's old contents: an
  OOM kill), and the bound that holds whatever libotf2 decodes;
- a local definition file whose id map claims more ids than its record holds (libotf2
  allocated what it claimed and read past its buffer: analyzer/native/localdefs.c);
- an anchor claiming 2^30 properties (libotf2 reserved 21 GB and spun for a minute:
  mpiscope.archive.anchor).
"""

from __future__ import annotations

import contextlib
import ctypes as C
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mpiscope.analysis.session import Analysis
from mpiscope.archive import anchor as anchor_file
from mpiscope.archive import decode, native, reader
from mpiscope_testing import otf2mutate as mut
from mpiscope_testing.jsonchecks import problems
from mpiscope_testing.tracegen import TraceBuilder, copy_trace, local_definitions

EVENT_TABLES = ("calls", "p2p", "messages", "collectives", "unmatched")


def same_events(a, b) -> None:
    for name in EVENT_TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=name)


@pytest.fixture
def trace(synth_trace, tmp_path: Path) -> Path:
    return copy_trace(synth_trace(4, 2000), tmp_path / "t")


@pytest.mark.parametrize("count", [(1 << 64) - 1, 1 << 40])
def test_huge_location_event_counts_are_bounded_by_the_event_files(
        trace: Path, synth_trace, count: int) -> None:
    defs = trace / "traces.def"
    defs.write_bytes(mut.with_location_events(defs.read_bytes(), count))
    d = decode.Definitions(trace / "traces.otf2")
    assert d.location_events == dict.fromkeys(range(4), count)  # what the file claims
    files = sum((trace / "traces" / f"{r}.evt").stat().st_size for r in range(4))
    assert d.expected_events <= files  # what the reader sizes its tables by
    same_events(reader.load(trace, use_cache=False),
                reader.load(synth_trace(4, 2000), use_cache=False))
    # the command line as the campaign ran it: it comes back (it hung before)
    p = subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace), "--no-cache"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_a_sparse_region_ref_is_searched_not_allocated(trace: Path, synth_trace) -> None:
    """Region 3 (MPI_Isend) renamed 0xfffffffe in its definition and in every Enter and
    Leave: the tables are those of the trace as written, the lookup a few entries long."""
    lo, hi = mut.clock_range(trace)
    defs = trace / "traces.def"
    defs.write_bytes(mut.with_self_ref(defs.read_bytes(), mut.REGION, 3, 0xFFFFFFFE))
    for evt in (trace / "traces").glob("*.evt"):
        evt.write_bytes(mut.with_region_ref(evt.read_bytes(), lo, hi, 3, 0xFFFFFFFE))
    d = decode.Definitions(trace / "traces.otf2")
    assert d.region_slots.sparse and len(d.region_func) < 100
    t = reader.load(trace, use_cache=False)
    same_events(t, reader.load(synth_trace(4, 2000), use_cache=False))
    assert "MPI_Isend" in set(t.calls["function"].astype(str))


def moved(trace: Path, rank: int, to: list[int]) -> list[int]:
    """The first len(to) timestamps (after the first few) of rank `rank` moved to `to`
    (relative to the trace's start; ints may be negative or huge); the old ones."""
    lo, hi = mut.clock_range(trace)
    evt = trace / "traces" / f"{rank}.evt"
    data = evt.read_bytes()
    stamps = mut.timestamps(data, lo, hi)
    old = []
    for at, t in zip(stamps[40::97], to, strict=False):
        old.append(int.from_bytes(data[at + 1:at + 9], "little") - lo)
        data = mut.with_timestamp(data, at, lo + t)
    evt.write_bytes(data)
    return old


def test_timestamps_out_of_order_or_range_are_kept_in_order_and_said(trace: Path) -> None:
    lo, hi = mut.clock_range(trace)
    length = hi - lo
    moved(trace, 1, [length + 9 * 10**18 // 2, -5, length // 2, (1 << 64) - 1 - lo])
    moved(trace, 2, [length * 3])
    t = reader.load(trace, use_cache=False)
    for table in (t.calls, t.regions):
        assert (table["end"] >= table["start"]).all() and (table["start"] >= 0).all()
    assert t.calls["end"].max() <= length and t.p2p["time"].between(0, length).all()
    for rank in (1, 2):  # per location, time never goes back
        calls = t.calls[t.calls["rank"] == rank]
        assert (np.diff(calls["start"].to_numpy()) >= 0).all()
    (line,) = [w for w in t.meta.warnings if w.startswith("damaged timestamps")]
    assert "outside the trace's time range" in line and "earlier than the event" in line
    assert "rank 1" in line and "rank 2" in line and "rank 0" not in line
    doc = Analysis(t).to_dict()
    assert problems(doc) == []
    assert any(w.startswith("damaged timestamps") for w in doc["warnings"])


def test_implausible_byte_counts_are_dropped_and_said(write_trace) -> None:
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10, "MPI_Init")
    tb.send_call(0, 20, 30, dest=1, tag=1, nbytes=(1 << 63) + 5)
    tb.recv_call(1, 20, 40, src=0, tag=1, nbytes=(1 << 63) + 5)
    tb.send_call(0, 50, 60, dest=1, tag=2, nbytes=4096)
    tb.recv_call(1, 50, 70, src=0, tag=2, nbytes=4096)
    for r in (0, 1):
        tb.collective(r, 80, 90, "MPI_Allreduce", sent=1 << 50, received=8)
        tb.call(r, 100, 110, "MPI_Finalize")
    t = reader.load(write_trace(tb), use_cache=False)
    assert sorted(t.messages["bytes"].tolist()) == [0, 4096]
    assert (t.calls[["bytes_sent", "bytes_recv"]] >= 0).all().all()
    assert t.meta.warnings == ["4 byte count(s) beyond 2^48 (256 TiB) dropped as damaged in "
                               "rank 0, rank 1"]
    doc = Analysis(t).to_dict()
    assert problems(doc) == [] and doc["warnings"][0] == t.meta.warnings[0]
    assert sum(f["bytes"] for f in doc["functions"]) == 2 * 4096 + 2 * 8


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks whose event files span several 1 MiB chunks."""
    from mpiscope_testing.enginetraces import synth

    return synth(tmp_path_factory.mktemp("long") / "t", 2, 300_000)


def test_a_file_cut_in_a_later_chunk_reads_as_far_as_its_bytes(long_trace: Path,
                                                              tmp_path: Path) -> None:
    trace = copy_trace(long_trace, tmp_path / "t")
    evt = trace / "traces" / "1.evt"
    assert evt.stat().st_size > 2 << 20
    data = evt.read_bytes()
    first_chunk = int.from_bytes(data[10:18], "little")  # its header: last event number
    evt.write_bytes(data[:(1 << 20) + 77_777])
    full = reader.load(long_trace, use_cache=False)
    cut = reader.load(trace, use_cache=False)
    events = cut.ranks["events"].tolist()
    assert events[0] == full.ranks["events"].tolist()[0]
    assert first_chunk < events[1] < full.ranks["events"].tolist()[1]
    assert cut.meta.truncated_ranks == [1] and cut.meta.warnings == []
    same_calls = cut.calls[cut.calls["rank"] == 1].iloc[:1000]
    pd.testing.assert_frame_equal(same_calls, full.calls[full.calls["rank"] == 1].iloc[:1000])


def test_no_event_stream_outgrows_its_file(long_trace: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound itself, whatever libotf2 decodes: here libotf2 reads the cut file
    directly (no padded copy) and decodes the chunk buffer's old contents past its end;
    the reader stops at as many events as the file has bytes, and says so."""
    trace = copy_trace(long_trace, tmp_path / "t")
    evt = trace / "traces" / "1.evt"
    evt.write_bytes(evt.read_bytes()[:(2 << 20) + 4321])
    monkeypatch.setattr(native, "_complete", contextlib.contextmanager(lambda a, _l: (yield a)))
    t = reader.load(trace, use_cache=False)
    assert t.ranks["events"].tolist()[1] <= (2 << 20) + 4321 + 1
    assert 1 in t.meta.truncated_ranks
    assert problems(Analysis(t).to_dict()) == []


def test_a_stream_beyond_the_bound_is_stopped_and_said(trace: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode, "event_file_bytes", lambda _a, loc: 300 if loc == 2 else 10**9)
    t = reader.load(trace, use_cache=False)
    assert t.ranks["events"].tolist()[2] == 301 and t.meta.truncated_ranks == [2]
    assert t.meta.warnings == ["more events than their event files' bytes can hold (damaged): "
                               "read as far as those bytes go in rank 2"]


def _analyze(trace: Path, tmp: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiscope", "analyze", str(trace),
                           "--no-cache", "--json", str(tmp / "out.json")],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("claimed", [1 << 32, 17_000_000, (1 << 64) - 1, "one more"])
def test_an_id_map_claiming_more_ids_than_it_holds_is_refused_in_one_line(
        trace: Path, tmp_path: Path, claimed: int | str) -> None:
    # rank 1 with local definitions as Score-P writes them: read as they are
    nregions = len(decode.Definitions(trace / "traces.otf2").lookup().region_func)
    local = trace / "traces" / "1.def"
    data = local_definitions(tmp_path, nregions)
    local.write_bytes(data)
    assert _analyze(trace, tmp_path).returncode == 0
    # its region map (the first) made to claim more ids than follow it
    held = nregions & ~1
    local.write_bytes(mut.with_id_map_count(data, 0, held + 1 if claimed == "one more"
                                            else claimed))
    p = _analyze(trace, tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert "damaged local definitions (traces/1.def): a mapping table at offset" in p.stderr
    assert (f"holds {held} of the {held + 1} ids" if claimed == "one more"
            else f"claims {claimed} ids in") in p.stderr, p.stderr


def test_local_definitions_of_several_chunks_are_checked_chunk_by_chunk(tmp_path: Path) -> None:
    # three 256 KiB chunks of id maps (each chunk ends with END_OF_CHUNK, the rest unused)
    chunk = 256 << 10
    data = local_definitions(tmp_path, 4, chunk_size=chunk, large_maps=3)
    assert len(data) > 2 * chunk
    lib = native.library()
    why = C.create_string_buffer(200)
    ok = tmp_path / "ok.def"
    ok.write_bytes(data)
    assert lib.mpsr_local_defs_check(str(ok).encode(), C.c_uint64(chunk), why, 200) == 0
    # the map that opens the second chunk made to claim 65,535 ids
    records = mut.def_records(data[chunk:])
    assert records[0].type == mut.MAPPING_TABLE
    bad = tmp_path / "bad.def"
    bad.write_bytes(data[:chunk] + mut.with_id_map_count(data[chunk:], 0, 65535))
    assert lib.mpsr_local_defs_check(str(bad).encode(), C.c_uint64(chunk), why, 200) == 1
    assert why.value.decode() == (f"a mapping table at offset {chunk + mut.HEADER} holds "
                                  "60000 of the 65535 ids it claims")


@pytest.mark.parametrize("top", [0x50, 0x01])
def test_an_anchor_claiming_more_properties_than_its_bytes_is_refused_in_one_line(
        trace: Path, tmp_path: Path, top: int) -> None:
    anchor = trace / "traces.otf2"
    data = bytearray(anchor.read_bytes())
    count, at = anchor_file._property_count(bytes(data))
    assert count == 4  # the synthetic trace's own (program, command line, MPI, version)
    data[at - 1] = top  # the count's most significant byte (little-endian)
    anchor.write_bytes(bytes(data))
    claimed = (top << 24) + 4
    p = _analyze(trace, tmp_path)
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.strip() == (f"mpiscope: {anchor}: damaged anchor file: it claims "
                                f"{claimed:,} properties in {len(data) - at:,} bytes")

