"""`mpiscope-recover` reads a killed rank's crash-safe log as hostile input.

A real log is made once: programs/crashlog.c traced with a 4 KiB buffer (so its events
fill several windows, recycling the ring's two slots), rank 1 kill -9ed mid-loop; it holds
every record kind (header, strings, call sites, a named split communicator, an RMA window
and a file, windows, windows spilled). Then:

- the log as the kill left it recovers whole: the trace holds exactly the events the log
  holds, counted by an independent walk of the events and ring files
  (mpiscope_testing.livelog);
- each damage that once crashed, hung or flooded the tool, crafted at its offset (the
  layout is read from live.h): the tool exits 1 with one line naming the file, the byte
  and the problem, under a timeout and an address-space limit, and the log stays as it was;
- a seeded mutation campaign (bit flips, truncations, huge counts/ids/lengths, in .defs,
  .events and .ring): every case either recovers whole (exit 0, log gone, otf2-print reads the
  trace, as many events as the oracle counts in the damaged log) or fails in one line with
  the log kept; never a signal, a hang, or success with fewer events than the log held;
- under memory limits from too small to ample: whole or nothing, never a partial trace.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mpiscope.paths import interposer_tool
from mpiscope_testing import livelog
from mpiscope_testing.killing import KILLED, run_and_kill
from mpiscope_testing.ownpeak import own_peak

TOOL = interposer_tool("mpiscope-recover")
AS_LIMIT = 512 << 20  # address space the tool gets: a log asking for more is refused
TIMEOUT = 30
LINE = re.compile(rf"mpiscope-recover: rank {KILLED}: (\S+): byte (\d+): (.+)")


@dataclass
class Log:
    defs: bytes
    events: bytes
    ring: bytes
    events_in_trace: int  # the oracle's count for the log as the kill left it


@pytest.fixture(scope="module")
def crash(programs, tmp_path_factory: pytest.TempPathFactory) -> Log:
    tmp = tmp_path_factory.mktemp("crashlog")
    job = run_and_kill(programs["crashlog.c"], tmp / "trace", after=60,
                       env={"MPISCOPE_BUFFER_SIZE": "4K"},
                       args=("100000", str(tmp / "crash.dat")))
    live = job.out / ".mpiscope-live"
    defs = (live / f"rank{KILLED}.defs").read_bytes()
    events = (live / f"rank{KILLED}.events").read_bytes()
    ring = (live / f"rank{KILLED}.ring").read_bytes()
    kinds = {r.type for r in livelog.records(defs)}
    assert kinds == set(livelog.layout().rec.values()), kinds  # every record kind
    return Log(defs, events, ring, livelog.expected_events(defs, events, ring))


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    dir: Path

    @property
    def log(self) -> Path:
        return self.dir / ".mpiscope-live"


def recover(tmp: Path, defs: bytes, events: bytes | None, ring: bytes | None) -> Outcome:
    """The tool on a trace directory holding just this log, as `mpiscope recover` runs it,
    in at most AS_LIMIT of address space and TIMEOUT seconds."""
    if tmp.exists():
        shutil.rmtree(tmp)
    live = tmp / ".mpiscope-live"
    live.mkdir(parents=True)
    (live / f"rank{KILLED}.defs").write_bytes(defs)
    if events is not None:
        (live / f"rank{KILLED}.events").write_bytes(events)
    if ring is not None:
        (live / f"rank{KILLED}.ring").write_bytes(ring)
    proc = subprocess.run(["prlimit", f"--as={AS_LIMIT}", str(TOOL), str(tmp), str(KILLED)],
                          capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
    return Outcome(proc.returncode, proc.stdout, proc.stderr, tmp)


def otf2_events(trace: Path) -> int:
    """Events otf2-print lists for the recovered rank's location."""
    proc = subprocess.run(["otf2-print", "-L", str(KILLED), str(trace / "traces.otf2")],
                          capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr[-2000:]
    return sum(1 for line in proc.stdout.splitlines()
               if re.match(rf"[A-Z_]+\s+{KILLED}\s+(\d+|UNDEFINED)\s", line))


def assert_whole(out: Outcome, expected: int) -> None:
    """Recovered whole: one summary line, the log gone, otf2-print lists every event."""
    assert out.returncode == 0 and out.stderr == "", out.stderr
    (line,) = out.stdout.splitlines()
    m = re.fullmatch(rf"rank {KILLED}: (\d+) events, .* s from MPI_Init to its last event", line)
    assert m, line
    assert int(m.group(1)) == expected
    assert not out.log.exists()
    assert otf2_events(out.dir / f"rank{KILLED}") == expected


def assert_refused(out: Outcome, defs: bytes, events: bytes | None,
                   ring: bytes | None) -> re.Match:
    """Refused in one line naming a file of the log, a byte and the problem; nothing
    written, the log as it was."""
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    m = LINE.fullmatch(lines[0])
    assert m, lines[0]
    assert m.group(1) in {str(out.log / f"rank{KILLED}.{suffix}")
                          for suffix in ("defs", "events", "ring")}
    assert (out.log / f"rank{KILLED}.defs").read_bytes() == defs
    if events is not None:
        assert (out.log / f"rank{KILLED}.events").read_bytes() == events
    if ring is not None:
        assert (out.log / f"rank{KILLED}.ring").read_bytes() == ring
    assert sorted(p.name for p in out.dir.iterdir()) == [".mpiscope-live"]  # no rank1/
    assert not (out.log / f"rank{KILLED}.part").exists()
    return m


def test_the_log_a_kill_leaves_recovers_whole(crash: Log, tmp_path: Path) -> None:
    assert crash.events_in_trace > 200
    assert len(livelog.of_type(crash.defs, "WINDOW")) >= 3  # mid-run flushes
    assert livelog.spilled(crash.defs) >= 2  # ring slots reused
    assert_whole(recover(tmp_path / "t", crash.defs, crash.events, crash.ring),
                 crash.events_in_trace)


# ------------------------------------------------------------ crafted damage

LAY = livelog.layout()
HEADER_AT = 8  # the header record's payload


def _u32(data: bytearray, at: int, value: int) -> None:
    struct.pack_into("<I", data, at, value & 0xFFFFFFFF)


def _header(field: str, value: int):
    def mutate(d: bytearray, e: bytearray) -> int:
        LAY.header.put(d, field, value, HEADER_AT)
        return HEADER_AT + LAY.header.fields[field].offset
    return mutate


def _comm_word(word: int, value: int):
    """Word `word` of the first COMM record (ref, parent, size, name words, members...)."""
    def mutate(d: bytearray, e: bytearray) -> int:
        rec = livelog.of_type(bytes(d), "COMM")[0]
        _u32(d, rec.at + 8 + 4 * word, value)
        return rec.at + 8 + 4 * word
    return mutate


def _comm_parent_itself(d: bytearray, e: bytearray) -> int:
    """A communicator its own parent: defined only after it (parents come first)."""
    rec = livelog.of_type(bytes(d), "COMM")[0]
    d[rec.at + 12: rec.at + 16] = rec.payload[0:4]
    return rec.at + 8


def _comm_name_unterminated(d: bytearray, e: bytearray) -> int:
    rec = livelog.of_type(bytes(d), "COMM")[0]
    size, nwords = struct.unpack_from("<ii", rec.payload, 8)
    at = rec.at + 8 + 16 + 4 * size
    d[at: at + 4 * nwords] = b"A" * (4 * nwords)
    return at


def _object_words(d: bytearray, e: bytearray) -> int:
    rec = livelog.of_type(bytes(d), "OBJECT")[0]
    _u32(d, rec.at + 8 + 16, 0x7FFFFFFF)
    return rec.at + 8 + 16


def _callsite_id(value: int):
    def mutate(d: bytearray, e: bytearray) -> int:
        rec = livelog.of_type(bytes(d), "CALLSITE")[-1]
        _u32(d, rec.at + 8 + LAY.callsite.fields["id"].offset, value)
        return rec.at + 8
    return mutate


def _window_index(d: bytearray, e: bytearray) -> int:
    rec = livelog.of_type(bytes(d), "WINDOW")[0]
    LAY.window.put(d, "index", 1 << 60, rec.at + 8)
    return rec.at + 8


def _record_length(d: bytearray, e: bytearray) -> int:
    rec = livelog.of_type(bytes(d), "CALLSITE")[0]
    _u32(d, rec.at + 4, 0xFFFFFFF0)
    return rec.at + 4


def _event_region(d: bytearray, e: bytearray) -> int:
    """The region of window 0's first Enter: one no build has."""
    words = struct.unpack(f"<{len(e) // 8}Q", bytes(e))
    wwords = int(LAY.header.get(bytes(d), "window_bytes", HEADER_AT)) // 8
    _, starts = livelog.window_end(words, 0, wwords, False)
    p = next(s for s in starts if words[s + 1] & 0xFF == LAY.ev["ENTER"])
    struct.pack_into("<Q", e, 8 * (p + 1), words[p + 1] | 0xFFFF << 16)
    return 8 * (p + 1)


def _event_after_end(d: bytearray, e: bytearray) -> int:
    """A word written after window 0's last record (window 0 ended long before the kill)."""
    wbytes = int(LAY.header.get(bytes(d), "window_bytes", HEADER_AT))
    struct.pack_into("<Q", e, wbytes - 8, 1)
    return wbytes - 8


def _events_truncated(d: bytearray, e: bytearray) -> int:
    del e[len(e) - 100:]
    return len(e)


def _defs_lose_last_window(d: bytearray, e: bytearray) -> int:
    """.defs cut inside its last WINDOW record: the events outgrow the windows it names."""
    rec = livelog.of_type(bytes(d), "WINDOW")[-1]
    del d[rec.at + 20:]
    return len(e)


# (name, mutation -> byte it names, the file it names, what the line says)
CRAFTED = [
    # COMM name words of 2^30: over-read the heap (comm_rec_inter_a)
    ("comm_name_length_huge", _comm_word(3, 1 << 30), "defs", 0,
     "COMM record: 1073741824 name words where "),
    # COMM member count of 2^30: a 4 GiB memcpy
    ("comm_members_huge", _comm_word(2, 1 << 30), "defs", 0,
     "COMM record: 1073741824 members in a record of "),
    ("comm_name_unterminated", _comm_name_unterminated, "defs", 0,
     "COMM record: name not NUL-terminated"),
    ("comm_parent_defined_later", _comm_parent_itself, "defs", 4,
     "COMM record: its parent communicator "),
    # OBJECT word count overflowing an int
    ("object_words_overflow", _object_words, "defs", 0, "OBJECT record: "),
    # call-site id 2^32-1: ncs = id + 1 wrapped, written out of bounds
    ("callsite_id_wraps", _callsite_id(0xFFFFFFFF), "defs", 0,
     "CALLSITE record: id 4294967295, but the log holds"),
    # call-site id 2^24: quadratic resolution of 16M sites
    ("callsite_id_2_24", _callsite_id(1 << 24), "defs", 0,
     "CALLSITE record: id 16777216, but the log holds"),
    # window size 0 and a huge window index: an endless loop
    ("window_bytes_zero", _header("window_bytes", 0), "defs", 0,
     "header: event window of 0 bytes"),
    ("window_index_huge", _window_index, "defs", 0, "WINDOW record for window "),
    # job size 44000: one OTF2 writer per claimed rank
    ("job_size_44000", _header("size", 44000), "defs", 0,
     "header: a job of 44000 ranks, but the files in "),
    ("job_size_2_30", _header("size", 1 << 30), "defs", 0, "header: a job of 1073741824 ranks"),
    ("rank_beyond_size", _header("size", 1), "defs", None, "header: rank 1 of a job of 1 "),
    ("pid_zero", _header("pid", 0), "defs", 0, "header: process id 0"),
    ("record_length_huge", _record_length, "defs", 0, "CALLSITE record of 4294967280 bytes"),
    ("event_region", _event_region, "events", 0, "window 0: an event in region 65535 of "),
    ("event_after_end", _event_after_end, "events", 0,
     "window 0: data after its last whole event record"),
    ("events_truncated", _events_truncated, "events", 0, "bytes, where its definitions "),
    ("defs_lose_last_window", _defs_lose_last_window, "ring", None,
     "data in a window the log never started"),
]


@pytest.mark.parametrize("name,mutate,file,check_offset,says", CRAFTED,
                         ids=[c[0] for c in CRAFTED])
def test_crafted_damage_is_refused_in_one_line(crash: Log, tmp_path: Path, name: str, mutate,
                                                file: str, check_offset: int | None,
                                                says: str) -> None:
    d, e = bytearray(crash.defs), bytearray(crash.events)
    at = mutate(d, e)
    out = recover(tmp_path / "t", bytes(d), bytes(e), crash.ring)
    m = assert_refused(out, bytes(d), bytes(e), crash.ring)
    assert m.group(1).endswith(f".{file}"), m.group(0)
    if check_offset is not None:
        assert int(m.group(2)) == at + check_offset, (at, m.group(0))
    assert says in m.group(3), m.group(0)


def test_a_long_communicator_name_is_no_damage(crash: Log, tmp_path: Path) -> None:
    """MPICH takes names of up to 127 bytes (MPI_MAX_OBJECT_NAME 128), which the log keeps
    as given: recovered whole, the name cut to the 63 bytes a definition keeps."""
    (rec,) = livelog.of_type(crash.defs, "COMM_NAME")
    name = b"n" * 127
    d = crash.defs[: rec.at] + struct.pack("<II", rec.type, 4 + len(name)) + \
        rec.payload[:4] + name + crash.defs[rec.end:]
    out = recover(tmp_path / "t", d, crash.events, crash.ring)
    assert_whole(out, crash.events_in_trace)
    defs = subprocess.run(["otf2-print", "-G", str(out.dir / f"rank{KILLED}" / "traces.otf2")],
                          capture_output=True, text=True, check=True).stdout
    assert f'"{"n" * 63}"' in defs


def test_no_events_file(crash: Log, tmp_path: Path) -> None:
    out = recover(tmp_path / "t", crash.defs, None, crash.ring)
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "rank1.events: No such file or directory" in out.stderr
    assert (out.log / f"rank{KILLED}.defs").read_bytes() == crash.defs


# ------------------------------------------------------------ the campaign

SPECIAL32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 24, 0xFFFF, 4096]
SPECIAL64 = [0, 1, 1 << 63, (1 << 64) - 1, 1 << 40, 0xFFFFFFFF]


def _mutations(crash: Log, rng: random.Random):
    """(description, defs, events, ring) cases: damage of every kind, in all three files
    (events_*: the events file or, one time in three, the ring)."""
    recs = livelog.records(crash.defs)
    kinds = ["defs_bit", "defs_u32", "defs_len", "defs_cut", "header_u32",
             "events_bit", "events_u64", "events_cut", "events_kind"]
    for case in range(300):
        kind = kinds[case % len(kinds)]
        in_ring = kind.startswith("events") and case % 3 == 0
        d = bytearray(crash.defs)
        e = bytearray(crash.ring if in_ring else crash.events)
        used = [i for i in range(0, len(e), 8) if e[i: i + 8] != bytes(8)] or [0]
        if kind == "defs_bit":
            i = rng.randrange(len(d))
            d[i] ^= 1 << rng.randrange(8)
            what = f"defs bit at {i}"
        elif kind == "defs_u32":
            r = rng.choice(recs)
            i = r.at + 8 + 4 * rng.randrange(max(1, len(r.payload) // 4))
            if i + 4 > len(d):
                i = r.at
            v = rng.choice(SPECIAL32 + [rng.getrandbits(32)])
            _u32(d, i, v)
            what = f"defs u32 {v:#x} at {i} (record type {r.type})"
        elif kind == "defs_len":
            r = rng.choice(recs)
            v = rng.choice([0, len(r.payload) - 1, len(r.payload) + 4, 0xFFFFFFFF, 1 << 20])
            _u32(d, r.at + 4, max(v, 0))
            what = f"defs length {v} of record type {r.type} at {r.at}"
        elif kind == "defs_cut":
            n = rng.randrange(len(d))
            del d[n:]
            what = f"defs cut to {n}"
        elif kind == "header_u32":
            field = rng.choice(sorted(LAY.header.fields))
            f = LAY.header.fields[field]
            if f.fmt in ("<Q", "<q"):
                struct.pack_into("<Q", d, HEADER_AT + f.offset, rng.choice(SPECIAL64))
            elif f.fmt in ("<I", "<i"):
                _u32(d, HEADER_AT + f.offset, rng.choice(SPECIAL32))
            else:
                d[HEADER_AT + f.offset] ^= 0x20
            what = f"header {field}"
        elif kind == "events_bit":
            i = rng.choice(used) + rng.randrange(8) if rng.random() < 0.8 else \
                rng.randrange(len(e))
            e[i] ^= 1 << rng.randrange(8)
            what = f"events bit at {i}"
        elif kind == "events_u64":
            i = rng.choice(used)
            v = rng.choice(SPECIAL64 + [rng.getrandbits(64)])
            struct.pack_into("<Q", e, i, v)
            what = f"events u64 {v:#x} at {i}"
        elif kind == "events_cut":
            n = rng.randrange(len(e))
            del e[n:]
            what = f"events cut to {n}"
        else:  # a record's kind byte: another kind, or none
            i = rng.choice(used)
            e[i] = rng.randrange(64)
            what = f"events byte {e[i]} at {i}"
        if in_ring:
            yield (f"#{case} ring: {what}", bytes(d), crash.events, bytes(e),
                   kind.startswith(("defs", "header")))
        else:
            yield (f"#{case} {what}", bytes(d), bytes(e), crash.ring,
                   kind.startswith(("defs", "header")))


def test_mutation_campaign(crash: Log, tmp_path: Path) -> None:
    """300 seeded mutations: each one recovered whole or refused in one line, never a
    crash, a hang or a partial trace passed off as the rank's."""
    rng = random.Random(20240529)
    whole = refused = 0
    for what, d, e, r, defs_only in _mutations(crash, rng):
        out = recover(tmp_path / "t", d, e, r)
        assert out.returncode in (0, 1), f"{what}: exit {out.returncode}: {out.stderr}"
        if out.returncode == 0:
            # the events file holds what the oracle counts (for .defs damage: unchanged)
            expected = crash.events_in_trace if defs_only else \
                livelog.expected_events(d, e, r)
            try:
                assert_whole(out, expected)
            except AssertionError as err:
                raise AssertionError(f"{what}: {err}") from None
            whole += 1
        else:
            try:
                assert_refused(out, d, e, r)
            except AssertionError as err:
                raise AssertionError(f"{what}: {err}") from None
            refused += 1
    print(f"mutation campaign: {whole} recovered whole, {refused} refused in one line")
    assert whole > 20 and refused > 100, (whole, refused)  # both outcomes exercised


# ------------------------------------------------------------ memory limits

def test_whole_or_nothing_under_memory_limits(crash: Log, tmp_path: Path) -> None:
    """From an address space too small to start in to an ample one: every run either
    recovers every event or refuses in one line and keeps the log."""
    outcomes = set()
    for limit_mib in range(6, 42, 3):
        tmp = tmp_path / f"as{limit_mib}"
        live = tmp / ".mpiscope-live"
        live.mkdir(parents=True)
        (live / f"rank{KILLED}.defs").write_bytes(crash.defs)
        (live / f"rank{KILLED}.events").write_bytes(crash.events)
        (live / f"rank{KILLED}.ring").write_bytes(crash.ring)
        proc = subprocess.run(["prlimit", f"--as={limit_mib << 20}", str(TOOL), str(tmp),
                               str(KILLED)], capture_output=True, text=True, timeout=TIMEOUT)
        out = Outcome(proc.returncode, proc.stdout, proc.stderr, tmp)
        # the dynamic loader itself may fail below some limit: a signal-free exit 127
        if proc.returncode == 127 and "error while loading shared libraries" in proc.stderr:
            outcomes.add("no start")
            continue
        assert proc.returncode in (0, 1), (limit_mib, proc.returncode, proc.stderr)
        if proc.returncode == 0:
            assert_whole(out, crash.events_in_trace)
            outcomes.add("whole")
        else:
            assert len(proc.stderr.splitlines()) == 1, proc.stderr
            assert (live / f"rank{KILLED}.events").read_bytes() == crash.events
            assert not (tmp / f"rank{KILLED}").exists()
            outcomes.add("refused")
    assert "whole" in outcomes, outcomes


# ------------------------------------------------------------ libFuzzer

FUZZ_SECONDS = 60
HERE = Path(__file__).parent
REGRESSIONS = HERE / "data" / "recover-regressions"  # inputs that once found a bug


def test_a_fuzzer_started_late_in_the_run_sees_its_own_peak_memory() -> None:
    """libFuzzer's -rss_limit_mb reads the process's peak RSS, which Linux carries over
    from the launcher: a launcher (the test process, late in `make test`) that once held
    400 MB made a plain child report 400 MB from its start; started through `own_peak`
    the child reports its own."""
    code = ("import resource, subprocess, sys\n"
            "big = bytearray(400 << 20)\n"
            "for i in range(0, len(big), 4096): big[i] = 1\n"
            "del big\n"
            "child = [sys.executable, '-c', 'import resource; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)']\n"
            "for cmd in (child, sys.argv[1:] + child):\n"
            "    print(subprocess.run(cmd, capture_output=True, text=True).stdout.strip())\n")
    out = subprocess.run([sys.executable, "-c", code, *own_peak([])], capture_output=True,
                         text=True, check=True).stdout.split()
    plain, own = map(int, out)
    assert plain >= 400 and own < 200, (plain, own)


@pytest.mark.skipif(shutil.which("clang") is None,
                    reason="clang not installed (`make setup` installs it)")
def test_libfuzzer_on_the_reader(crash: Log, tmp_path: Path) -> None:
    """The reader (liveread.c) under libFuzzer with AddressSanitizer and UBSan for a
    fixed budget, from the real log: no input makes it read or write out of bounds, hit
    undefined behaviour, leak, or run 10 s (fuzz/fuzz_liveread.c uses what it accepts
    as mpiscope-recover does). The inputs that found bugs are run first."""
    src = HERE.parent / "src"
    exe = tmp_path / "fuzz_liveread"
    subprocess.run(["clang", "-g", "-O1", "-fsanitize=fuzzer,address,undefined",
                    "-fno-sanitize-recover=all", "-Wall", "-Wextra", "-Werror", "-I", str(src),
                    str(src / "liveread.c"), str(src / "evbuf.c"),
                    str(HERE / "fuzz" / "fuzz_liveread.c"), "-lotf2", "-o", str(exe)],
                   check=True, capture_output=True, timeout=300)
    known = sorted(REGRESSIONS.glob("*.bin"))
    assert known
    proc = subprocess.run([str(exe), *map(str, known)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seeds, corpus = tmp_path / "seeds", tmp_path / "corpus"
    seeds.mkdir()
    corpus.mkdir()
    (seeds / "killed").write_bytes(struct.pack("<I", len(crash.defs)) + crash.defs +
                                   crash.events)
    proc = subprocess.run(own_peak([str(exe), f"-max_total_time={FUZZ_SECONDS}", "-max_len=65536",
                           "-timeout=10", "-rss_limit_mb=2048", "-seed=20240529",
                           f"-artifact_prefix={tmp_path}/", str(corpus), str(seeds)]),
                          capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    found = sorted(p.name for p in tmp_path.iterdir()
                   if p.name.startswith(("crash-", "leak-", "timeout-", "oom-")))
    assert proc.returncode == 0 and not found, (found, proc.stderr[-3000:])
    assert re.search(r"Done \d+ runs", proc.stderr), proc.stderr[-1000:]
