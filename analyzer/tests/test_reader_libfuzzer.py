"""The native reader's entry point (reader.c's mpsr_read) under libFuzzer (issue 29).

analyzer/native/fuzz/fuzz_reader.c is built with clang, AddressSanitizer and UBSan, the
reader's source compiled in. It damages one file of a small real archive per input (a
location's events: replaced, patched at an offset or cut; not the anchor nor the local
definitions, which libotf2 alone parses, see fuzz_reader.c), and/or
the fields of the definitions Python hands over unchecked (clock, event counts,
attribute refs, subset reads), then reads it as read_events does, with the config Python
made for the undamaged archive (mpiscope.archive.native.config), and checks the tables
as Python relies on them. The archive (`template()`) holds every kind of record the
reader decodes: two ranks of two threads, blocking and non-blocking point-to-point
(completed on the other thread), polling, collectives with hashes, a non-blocking
collective, RMA, MPI-IO, a buffer flush, call paths and run-queue delays; one location
has local definitions (clock offsets, id maps) as Score-P writes them.

First the inputs of analyzer/native/fuzz/regressions/ (`KNOWN`: what found a problem,
and issue 29's damages to the reader) are replayed, then the fuzzer runs for a fixed
budget from seeds made of the archive's own files; any crash, leak, undefined
behaviour, broken table or input running 10 s fails the test with the input's path and
the sanitizer's report.
"""

from __future__ import annotations

import ctypes as C
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mpiscope.archive import native
from mpiscope.archive.decode import Definitions
from mpiscope.archive.memory import kept_events_budget
from mpiscope_testing.ownpeak import own_peak
from mpiscope_testing.tracegen import TraceBuilder, local_definitions

FUZZ_SECONDS = 60
NATIVE = Path(__file__).resolve().parents[1] / "native"
FUZZ = NATIVE / "fuzz"
REGRESSIONS = FUZZ / "regressions"
# Its inputs, replayed first: what each does to `template()`'s archive (they name its
# files and offsets: a changed template changes what they damage) and what it found.
KNOWN = {
    "huge-event-counts.bin": "every location claims 2^64 - 1 events (issue 29: the sum "
                             "wrapped and table_reserve's doubling never ended)",
    "timestamp-before-the-start.bin": "rank 0's first timestamp at 0 (issue 29: negative "
                                      "times)",
    "timestamp-beyond-the-trace.bin": "a timestamp of 2^64 - 1 (issue 29: durations of "
                                      "9e9 s)",
    "timestamp-backwards.bin": "a timestamp moved back to the trace's start (issue 29: "
                               "negative durations)",
    "coarse-clock-far-offset.bin": "a 251 Hz clock with an offset near 2^56: times "
                                   "computed from two rounded doubles (the offset's last "
                                   "16 ticks lost) fell 24 ms beyond the trace's end",
    "event-array-of-2e32.bin": "an event whose array claims 2^32 entries: libotf2 "
                               "malloc'd 16 GB (2 GB of ASan shadow)",
    "unbounded-times-near-2e63.bin": "the trace's length unknown and rank 1's polling "
                                     "calls at times beyond 2^63 ns (saturated, merged)",
}
# Damaged local definition files with which libotf2 itself read out of bounds (SEGV under
# ASan) or allocated what they claimed, replayed with MPSR_FUZZ_LOCAL_DEFS=1: localdefs.c
# now refuses them before libotf2 reads them
LIBOTF2 = FUZZ / "libotf2"
KNOWN_LIBOTF2 = {
    "id-map-of-2e32-entries.bin": "a MappingTable's id map claiming 2^32 entries: libotf2 "
                                  "allocated 32 GB before reading them",
    "id-map-read-past-its-buffer.bin": "an id map claiming ~17 M entries in a 28-byte "
                                       "file: otf2_id_map_read read past its buffer",
}
US = 1000
CHUNK = 256 << 10  # OTF2's smallest event chunk: libotf2 clears one per location and read


def template() -> TraceBuilder:
    tb = TraceBuilder(ranks=2, hosts=["node0", "node1"], threads=2)
    win = tb.window(comm=0, name="halo")
    fh = tb.file("/scratch/out.bin", comm=0)
    for r in (0, 1):
        tb.call(r, 0, 10 * US, "MPI_Init", callpath=[("main.c:3", "main")],
                run_delay=(0, 5))
        tb.enter(r, 11 * US, "main")
    # blocking p2p, a non-blocking pair completed on the other thread
    tb.send_call(0, 20 * US, 30 * US, dest=1, tag=1, nbytes=64, callsite="a.c:10")
    tb.recv_call(1, 20 * US, 35 * US, src=0, tag=1, nbytes=64, callsite="a.c:11")
    tb.isend_call((0, 1), 40 * US, 41 * US, dest=1, tag=2, nbytes=4096, request=7,
                  callsite="a.c:20")
    tb.enter(0, 42 * US, "MPI_Wait", callsite="a.c:21")
    tb.isend_complete(0, 50 * US, request=7)
    tb.leave(0, 50 * US, "MPI_Wait")
    tb.irecv_call((1, 1), 38 * US, 39 * US, request=9, callsite="a.c:22")
    # polling: three idle MPI_Test visits, then the one completing the receive
    for k in range(3):
        t = 43 * US + k * 300
        tb.enter(1, t, "MPI_Test", callsite="a.c:23")
        tb.request_test(1, t + 100, request=9)
        tb.leave(1, t + 200, "MPI_Test")
    tb.enter(1, 45 * US, "MPI_Test", callsite="a.c:23")
    tb.irecv(1, 52 * US, src=0, tag=2, nbytes=4096, request=9)
    tb.leave(1, 52 * US, "MPI_Test")
    tb.irecv_call(0, 53 * US, 54 * US, request=11, callsite="a.c:30")
    tb.enter(0, 55 * US, "MPI_Cancel")
    tb.cancelled(0, 56 * US, request=11)
    tb.leave(0, 56 * US, "MPI_Cancel")
    tb.send_call(1, 57 * US, 58 * US, dest=0, tag=3, nbytes=8)  # never received
    for r in (0, 1):
        tb.collective(r, 60 * US, 70 * US + r, "MPI_Allreduce", sent=8, received=8,
                      in_hash=r + 1, out_hash=3, prior_hash=9, callsite="a.c:40")
        tb.collective(r, 71 * US, 72 * US, "MPI_Bcast", root=1, sent=16 * (r == 1),
                      received=16 * (r == 0), callpath=[("a.c:41", "solve"), ("main.c:9", "main")])
        tb.enter(r, 73 * US, "MPI_Ialltoall")
        tb.nbc_request(r, 74 * US, request=20 + r)
        tb.leave(r, 74 * US, "MPI_Ialltoall")
        tb.enter(r, 75 * US, "MPI_Wait")
        tb.nbc_complete(r, 78 * US, "MPI_Alltoall", request=20 + r, sent=32, received=32)
        tb.leave(r, 78 * US, "MPI_Wait")
        tb.buffer_flush((r, 1), 79 * US, 80 * US)
    # RMA: a window, a fence epoch with a put and a get, a lock epoch with an atomic
    for r in (0, 1):
        tb.enter(r, 90 * US, "MPI_Win_create")
        tb.rma_win_create(r, 91 * US, win)
        tb.leave(r, 91 * US, "MPI_Win_create")
        tb.fence(r, 92 * US, 93 * US, win)
    tb.rma_call(0, 94 * US, 95 * US, "MPI_Put", win, target=1, nbytes=800, matching=1)
    tb.rma_call(0, 96 * US, 97 * US, "MPI_Get", win, target=1, nbytes=16, matching=2)
    for r in (0, 1):
        tb.enter(r, 98 * US, "MPI_Win_fence")
        tb.rma_coll_begin(r, 98 * US)
        if r == 0:
            tb.rma_complete(0, 99 * US, win, 1)
            tb.rma_complete(0, 99 * US, win, 2)
        tb.rma_coll_end(r, 100 * US, win)
        tb.leave(r, 100 * US, "MPI_Win_fence")
    tb.enter(1, 101 * US, "MPI_Win_lock")
    tb.rma_lock(1, 101 * US, "request", win, 0, lock_id=5)
    tb.rma_lock(1, 102 * US, "acquire", win, 0, lock_id=5)
    tb.leave(1, 102 * US, "MPI_Win_lock")
    tb.enter(1, 103 * US, "MPI_Fetch_and_op")
    tb.rma_atomic(1, 103 * US, win, 0, sent=8, received=8, matching=3)
    tb.rma_complete(1, 104 * US, win, 3)
    tb.leave(1, 104 * US, "MPI_Fetch_and_op")
    tb.enter(1, 105 * US, "MPI_Win_flush")
    tb.rma_sync(1, 105 * US, win, 0)
    tb.leave(1, 106 * US, "MPI_Win_flush")
    tb.enter(1, 107 * US, "MPI_Win_unlock")
    tb.rma_lock(1, 108 * US, "release", win, 0, lock_id=5)
    tb.leave(1, 108 * US, "MPI_Win_unlock")
    for r in (0, 1):
        tb.enter(r, 109 * US, "MPI_Win_post")
        tb.rma_group_sync(r, 109 * US, win, [1 - r])
        tb.leave(r, 110 * US, "MPI_Win_post")
        tb.enter(r, 111 * US, "MPI_Win_free")
        tb.rma_win_destroy(r, 112 * US, win)
        tb.leave(r, 112 * US, "MPI_Win_free")
    # MPI-IO: open, a collective write, a non-blocking read completed by MPI_Wait
    for r in (0, 1):
        tb.enter(r, 120 * US, "MPI_File_open")
        tb.io_create(r, 121 * US, fh)
        tb.leave(r, 121 * US, "MPI_File_open")
        tb.io_call(r, 122 * US, 130 * US, "MPI_File_write_at_all", fh, "write", 4096,
                   matching=1, collective=True)
    tb.enter(0, 131 * US, "MPI_File_iread_at")
    tb.io_begin(0, 131 * US, fh, "read", 1024, matching=2, nonblocking=True)
    tb.io_issued(0, 132 * US, fh, 2)
    tb.leave(0, 132 * US, "MPI_File_iread_at")
    tb.enter(0, 133 * US, "MPI_Wait")
    tb.io_complete(0, 135 * US, fh, 1000, 2)
    tb.leave(0, 135 * US, "MPI_Wait")
    for r in (0, 1):
        tb.enter(r, 136 * US, "MPI_File_close")
        tb.io_destroy(r, 137 * US, fh)
        tb.leave(r, 137 * US, "MPI_File_close")
        tb.leave(r, 140 * US, "main")
        tb.call(r, 150 * US, 160 * US, "MPI_Finalize", run_delay=(7, 9))
    return tb


def config_file(anchor: Path, out: Path) -> None:
    """The config read_events gives mpsr_read for this archive, in fuzz_reader.c's format,
    with the event count each location's definition claims."""
    defs = Definitions(anchor)
    cfg, arrays = native.config(defs.lookup(), max_kept_events=kept_events_budget())
    raw = bytearray(C.string_at(C.addressof(cfg), C.sizeof(cfg)))
    parts = []
    for name, a in arrays.items():
        off = getattr(native.Config, name).offset
        raw[off:off + 8] = bytes(8)
        data = np.ascontiguousarray(a).tobytes()
        if not data:
            continue  # NULL, as _ptr gives an empty array
        parts.append(struct.pack("<QQ", off, len(data)) + data + bytes(-len(data) % 8))
    claimed = [defs.location_events.get(int(loc), 0) for _r, _t, loc, _n in defs.threads]
    out.write_bytes(b"MPSRFUZ1" + struct.pack("<Q", len(raw)) + bytes(raw) +
                    struct.pack("<Q", len(parts)) + b"".join(parts) +
                    struct.pack(f"<Q{len(claimed)}Q", len(claimed), *claimed))


def build(tmp: Path) -> Path:
    gen = tmp / "generated"
    gen.mkdir()
    subprocess.run([sys.executable, str(NATIVE / "schemagen.py"), "header",
                    str(gen / "schema.h")], check=True, capture_output=True, timeout=120)
    exe = tmp / "fuzz_reader"
    subprocess.run(["clang", "-g", "-O1", "-fsanitize=fuzzer,address,undefined",
                    "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror", "-I", str(gen),
                    "-I", str(NATIVE), str(NATIVE / "reader.c"), str(NATIVE / "localdefs.c"),
                    str(FUZZ / "fuzz_reader.c"),
                    "-lotf2", "-o", str(exe)], check=True, capture_output=True, timeout=300)
    return exe


def seeds(trace: Path, dest: Path) -> None:
    """Each event file whole (as a replacement and as a patch at offset 0, the selector
    bytes fuzz_reader.c decodes); the definitions' fields as they are, alone and with the
    trace's length unknown (no bound on timestamps) before each replacement."""
    defs = Definitions(trace / "traces.otf2")
    lk = defs.lookup()
    files = [trace / "traces" / f"{loc}.evt" for loc in lk.locations.tolist()]
    n = len(files)
    claimed = [defs.location_events.get(loc, 0) for loc in lk.locations.tolist()]
    attrs = [lk.attr_callsite, lk.attr_in, lk.attr_out, lk.attr_callpath, lk.attr_calls,
             lk.attr_prior, lk.attr_run_delay]
    fields = struct.pack(f"<5Q{len(claimed)}Q7I", lk.timer_resolution, lk.global_offset, 0, 0,
                         0, *claimed, *attrs)
    (dest / "definitions").write_bytes(bytes([2 * n]))
    for i, f in enumerate(files):
        data = f.read_bytes()
        (dest / f"replace-{i}").write_bytes(bytes([i]) + data)
        (dest / f"patch-{i}").write_bytes(bytes([n + i]) + struct.pack("<I", 0) + data[:64])
        (dest / f"unbounded-{i}").write_bytes(bytes([2 * n]) + fields + bytes([i]) + data)


def report(proc: subprocess.CompletedProcess, where: Path) -> str:
    found = sorted(str(p) for p in where.iterdir()
                   if p.name.startswith(("crash-", "leak-", "timeout-", "oom-")))
    return f"inputs: {found}\n{proc.stderr[-4000:]}"


@pytest.mark.skipif(shutil.which("clang") is None,
                    reason="clang not installed (`make setup` installs it)")
def test_libfuzzer_on_the_native_reader(tmp_path: Path) -> None:
    trace = template().write(tmp_path / "trace", chunk_size_events=CHUNK)
    config_file(trace / "traces.otf2", tmp_path / "config.bin")
    # rank 0's second thread as Score-P writes a location: with local definitions
    nregions = len(Definitions(trace / "traces.otf2").lookup().region_func)
    (trace / "traces" / "1.def").write_bytes(local_definitions(tmp_path, nregions))
    exe = build(tmp_path)
    env = {"MPSR_FUZZ_TEMPLATE": str(trace), "MPSR_FUZZ_CONFIG": str(tmp_path / "config.bin"),
           "TMPDIR": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           # libotf2 allocates what a damaged event says before reading it (16 GB):
           # refused, as a smaller machine refuses it, it reports the damage
           # (fuzz_reader.c); ours never need 1 GB for these files
           "ASAN_OPTIONS": "detect_leaks=1:allocator_may_return_null=1:"
                           "max_allocation_size_mb=1024",
           "UBSAN_OPTIONS": "print_stacktrace=1"}
    known = sorted(REGRESSIONS.glob("*.bin"))
    assert {p.name for p in known} == set(KNOWN)
    proc = subprocess.run(own_peak([str(exe), "-rss_limit_mb=2048", *map(str, known)]),
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # from here on the local definition files are damaged too (fuzz_reader.c): localdefs.c
    # checks them before libotf2 reads them; first the inputs that libotf2 alone failed
    env["MPSR_FUZZ_LOCAL_DEFS"] = "1"
    known = sorted(LIBOTF2.glob("*.bin"))
    assert {p.name for p in known} == set(KNOWN_LIBOTF2)
    proc = subprocess.run(own_peak([str(exe), "-rss_limit_mb=2048", *map(str, known)]),
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    corpus, seed_dir = tmp_path / "corpus", tmp_path / "seeds"
    corpus.mkdir()
    seed_dir.mkdir()
    seeds(trace, seed_dir)
    # -len_control=0: whole files replaced from the start, not only short inputs
    proc = subprocess.run(own_peak([str(exe), f"-max_total_time={FUZZ_SECONDS}", "-max_len=16384",
                           "-len_control=0",
                           "-timeout=10", "-rss_limit_mb=2048", "-seed=20261129",
                           f"-artifact_prefix={tmp_path}/", str(corpus), str(seed_dir)]),
                          capture_output=True, text=True, timeout=FUZZ_SECONDS + 180, env=env)
    assert proc.returncode == 0, report(proc, tmp_path)
    assert not any(p.name.startswith(("crash-", "leak-", "timeout-", "oom-"))
                   for p in tmp_path.iterdir()), report(proc, tmp_path)
    assert re.search(r"Done \d+ runs", proc.stderr), proc.stderr[-1000:]
