"""What `mpiscope analyze`, `scaling` and `compare` print in an 80-column terminal, on
traces built by construction: no header cut short, no word wrapped inside, one unit per
column, no scientific notation, and beyond 16 ranks a per-rank summary (`--ranks all`:
every row)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope import numbers
from mpiscope_testing.comparetraces import halo_pair
from mpiscope_testing.tracegen import TraceBuilder

US = 1000
LATE = 900  # µs into each iteration the late rank enters the Allreduce (the others ~100)


def imbalanced(n: int, path: Path) -> Path:
    """n ranks, 5 iterations of 1 ms: rank n-2 computes 900 µs before the Allreduce (the
    others 100-163 µs), a redundant Barrier of 5 µs, and pairs exchange a message."""
    tb = TraceBuilder(ranks=n)
    late = n - 2
    for r in range(n):
        tb.call(r, 0, 10 * US, "MPI_Init", callsite="app.c:20")
        tb.call(r, 5010 * US, 5020 * US, "MPI_Finalize", callsite="app.c:50")
    for i in range(5):
        b = (10 + 1000 * i) * US
        for r in range(n):
            tb.collective(r, b + (LATE if r == late else 100 + r) * US, b + 910 * US,
                          "MPI_Allreduce", sent=8, received=8, in_hash=i * n + r + 1,
                          out_hash=100 + i, callsite="frequent_collective_solver.c:30")
            tb.collective(r, b + 910 * US, b + 915 * US, "MPI_Barrier", callsite="app.c:31")
        for r in range(0, n - 1, 2):
            tb.recv_call(r, b + 920 * US, b + 990 * US, src=r + 1, tag=7, nbytes=8,
                         callsite="app.c:41")
            tb.send_call(r + 1, b + 980 * US, b + 985 * US, dest=r, tag=7, nbytes=8,
                         callsite="app.c:39")
    return tb.write(path)


def run80(*args: object) -> str:
    p = subprocess.run([sys.executable, "-m", "mpiscope", *map(str, args)],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    return p.stdout


def table(text: str, title: str) -> list[list[str]]:
    """The body rows of the table titled `title` (cells stripped)."""
    lines = text[text.index(title):].splitlines()
    head = next(i for i, s in enumerate(lines) if s.startswith("┡"))
    rows = []
    for s in lines[head + 1:]:
        if s.startswith("└"):
            break
        if s.startswith("│"):
            rows.append([c.strip() for c in s.strip("│").split("│")])
    return rows


def assert_readable(text: str) -> None:
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text  # no header or cell cut short
    assert not re.search(r"\d[eE][-+]?\d", text)  # no scientific notation
    assert "ms s" not in text and not re.search(r"\b1 (ranks|hosts|calls)\b", text)


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("t80")
    return {n: imbalanced(n, base / f"t{n}") for n in (4, 64)}


def test_analyze_at_80_columns_keeps_headers_words_and_units(traces):
    text = run80("analyze", traces[4])
    assert_readable(text)
    # the headers whole, each column's unit in its header
    for header in ("communication", "synchronization", "time (ms)", "waiting (ms)"):
        assert header in text
    assert "4 ranks on 1 host, 5.02 ms" in text
    # a finding's kind is never wrapped inside the word
    kinds = [r[0] for r in table(text, "findings (by estimated savings)") if r[0]]
    assert set(kinds) == {"load_imbalance"}
    # the redundant Barrier saves 5 x 5 µs, under 1% of the run: named among the minor
    minor = " ".join(text[text.index("Minor, "):text.index("Critical path")].split())
    assert "redundant_collective MPI_Barrier at app.c:31 (saves 25 µs)" in minor
    # every rank listed; rank 2 is late by 900 - 102 µs in each of 5 iterations and so
    # computes 4.575 ms of its 5 ms (by construction)
    rows = table(text, "Time per rank")
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert rows[2][3] == "4.575 (92%)"


def test_many_ranks_are_summarised_and_all_lists_them(traces):
    text = run80("analyze", traces[64])
    assert_readable(text)
    rows = table(text, "Time per rank")
    # min, median, max of each column, then the one rank that computes far longer
    assert [r[0] for r in rows] == ["min", "median", "max", "62"]
    compute = {r[0]: r[3] for r in rows}
    assert compute["max"] == "4.575" and compute["62"].startswith("4.575 ")
    # rank 0, the first into each Allreduce, computes least
    assert compute["min"] == "0.575"
    assert "64 ranks: min, median and max of each column, then the 1 rank outside" in \
        " ".join(text.split())
    every = table(run80("analyze", traces[64], "--ranks", "all"), "Time per rank")
    assert [r[0] for r in every] == [str(r) for r in range(64)]


def threaded(n: int, path: Path) -> Path:
    """n ranks of two threads: each main thread in a 50 µs Barrier, each second thread 100
    µs in an MPI_Send, except rank 7's: 900 µs."""
    tb = TraceBuilder(ranks=n, threads=2)
    for r in range(n):
        tb.call(r, 0, 10 * US, "MPI_Init")
        tb.collective(r, 100 * US, 150 * US, "MPI_Barrier")
        tb.call((r, 1), 200 * US, (1100 if r == 7 else 300) * US, "MPI_Send")
        tb.call(r, 2000 * US, 2010 * US, "MPI_Finalize")
    return tb.write(path)


def test_many_threads_are_summarised_and_all_lists_them(tmp_path):
    trace = threaded(20, tmp_path / "threads")
    text = run80("analyze", trace)
    assert_readable(text)
    rows = table(text, "MPI time per thread")
    # per thread number min, median and max (of calls, then time), then the one thread
    # far outside its number's quartiles: rank 7's second
    assert [r[:2] for r in rows] == [["min", "0"], ["median", "0"], ["max", "0"],
                                     ["min", "1"], ["median", "1"], ["max", "1"], ["7", "1"]]
    assert [r[3:] for r in rows[3:6]] == [["1", "100.0"], ["1", "100.0"], ["1", "900.0"]]
    assert rows[6][2:] == ["rank 7 thread 1", "1", "900.0"]
    assert "20 ranks: min, median and max of each thread number's column, then the 1 " \
        "thread outside" in " ".join(text.split())
    every = table(run80("analyze", trace, "--ranks", "all"), "MPI time per thread")
    assert [(r[0], r[1]) for r in every] == [(str(r), str(t)) for r in range(20)
                                             for t in (0, 1)]


def test_scaling_at_80_columns(traces):
    text = run80("scaling", traces[4], traces[64])
    assert_readable(text)
    for header in ("speed-up", "efficiency", "communication", "synchronization", "4 ranks",
                   "64 ranks", "wall (ms)"):
        assert header in text
    assert f"  64 ranks: {traces[64]}" in text


def test_compare_at_80_columns_wraps_between_words(tmp_path):
    text = run80("compare", *halo_pair(tmp_path))
    assert_readable(text)
    for header in ("before", "after", "wall time (ms)", "synchronization share"):
        assert header in text
    # the explanation's long sentences come whole, broken only between words
    lines = text[text.index("speed-up "):].splitlines()
    assert not [line for line in lines if line.endswith(" ")]
    prose = " ".join(lines)
    for sentence in (
            "the 16 ms of MPI_Allreduce at app.c:60 moved to waiting in MPI_Waitall at "
            "app.c:50 (+13.5 ms): ranks now wait for a late sender (MPI_Isend at app.c:41)",
            "run-to-run noise ±3 ms = 2·√(σa²·Na + σb²·Nb): σ the standard deviation of a "
            "run's iteration time (mean over ranks), N its iterations; iterations taken as "
            "independent (before: 9 iterations, σ 0 s; after: 9 iterations, σ 500 µs)"):
        assert sentence in prose
        assert "\n" in text[text.index(sentence[:40]):][:len(sentence)]  # wrapped


@pytest.mark.parametrize("x, text", [
    (8.23e-05, "82.3 µs"), (1.17e-3, "1.17 ms"), (0.000629, "629 µs"), (1.3641, "1.36 s"),
    (-0.831, "−831 ms"), (0, "0 s"), (0.0009997, "1 ms"), (1234.5, "1234 s")])
def test_seconds_in_prose(x, text):
    assert numbers.seconds(x) == text


def test_a_column_has_one_unit():
    col = numbers.Column.of([0.000399, 0.0000010])
    assert (col.header("time"), [col.cell(v) for v in (0.000399, 0.0000010)]) == (
        "time (µs)", ["399.0", "1.0"])
    col = numbers.Column.of([-0.831, 0.7607])
    assert [col.cell(v, signed=True) for v in (-0.831, 0.7607)] == ["−831.0", "+760.7"]
    assert numbers.count(1, "rank") == "1 rank" and numbers.rate(9.5e7) == "95 MB/s"
