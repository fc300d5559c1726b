"""What the user sees when the CLI cannot write, is given a FIFO, or reads a trace cut short.

Every failure is one line `mpiscope: <path>: <problem>` on stderr, exit code 2, no
traceback; a report that could not be written completely is not there at all (or the
old one is, unchanged). The faults are real: /proc, /dev/full, `ulimit -f`, a pipe whose
reader has gone, FIFOs made with os.mkfifo.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

TIMEOUT = 120  # a reader that blocks on a FIFO fails the test instead of hanging it
CUT_SHORT = ("ranks cut short (no MPI_Finalize or truncated events): 2; "
             "analyzed as far as their events go")


def mpiscope(*args: object, stdout: int | None = subprocess.PIPE, cwd: Path | None = None,
             shell_prefix: str = "") -> subprocess.CompletedProcess:
    """`python3 -m mpiscope ARGS` as a user runs it; `shell_prefix` (e.g. `ulimit -f 20;`)
    runs first in a bash that then execs it."""
    cmd = [sys.executable, "-m", "mpiscope", *map(str, args)]
    if shell_prefix:
        cmd = ["bash", "-c", f'{shell_prefix} exec "$@"', "bash", *cmd]
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          timeout=TIMEOUT)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The failed command's single stderr line (and that it is single, no traceback)."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def trace(synth_trace, tmp_path: Path) -> Path:
    """A private copy of a small 4-rank trace (tests may damage it)."""
    out = tmp_path / "trace"
    shutil.copytree(synth_trace(ranks=4, events=20000), out,
                    ignore=shutil.ignore_patterns(".mpiscope-cache*"))
    return out


@pytest.fixture
def cut(trace: Path, tmp_path: Path) -> Path:
    """The trace with rank 2's event file cut in half: rank 2 is cut short."""
    out = tmp_path / "cut"
    shutil.copytree(trace, out)
    evt = out / "traces" / "2.evt"
    evt.write_bytes(evt.read_bytes()[: evt.stat().st_size // 2])
    return out


# --- outputs that cannot be written ----------------------------------------------------


def test_an_output_under_proc_is_refused_before_the_analysis(trace: Path) -> None:
    """os.access says root may write in /proc; creating a file there says otherwise."""
    proc = mpiscope("analyze", trace, "--json", "/proc/x.json")
    line = one_error_line(proc)
    assert line.startswith("mpiscope: /proc/x.json: cannot write: ")
    assert proc.stdout == ""  # refused before reading the trace


@pytest.mark.parametrize("command, option", [("analyze", "--json"), ("compare", "--md"),
                                             ("compare", "--html")])
def test_a_full_device_as_output_is_one_line(trace: Path, command: str, option: str) -> None:
    traces = [trace] * (1 if command == "analyze" else 2)
    proc = mpiscope(command, *traces, option, "/dev/full")
    assert one_error_line(proc) == "mpiscope: /dev/full: cannot write: No space left on device"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written into, never replaced


def test_stdout_on_a_full_device_is_one_line(trace: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = mpiscope("analyze", trace, stdout=full.fileno())
    assert one_error_line(proc) == "mpiscope: <stdout>: No space left on device"


def test_help_on_a_full_device_is_one_line() -> None:
    """argparse prints --help itself and exits; the failed flush still is one line."""
    with open("/dev/full", "w") as full:
        proc = mpiscope("--help", stdout=full.fileno())
    assert one_error_line(proc) == "mpiscope: <stdout>: No space left on device"


def test_a_reader_that_goes_away_ends_the_display_quietly(trace: Path,
                                                         tmp_path: Path) -> None:
    """`mpiscope analyze T --json out.json | head -1`: head closes the pipe early. Like
    any Unix filter, no error for that (exit 0, nothing on stderr); the files asked for
    are still written in full."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write is EPIPE
    try:
        proc = mpiscope("analyze", trace, "--json", tmp_path / "out.json", stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert json.loads((tmp_path / "out.json").read_text())["ranks"]


def test_ulimit_leaves_no_partial_report(trace: Path, tmp_path: Path) -> None:
    """The HTML report (megabytes: Plotly inlined) does not fit in `ulimit -f 20` (20 KiB):
    one line, exit 2, and no 20 KiB stump of it, nor a temporary file."""
    work = tmp_path / "out"
    work.mkdir()
    proc = mpiscope("compare", trace, trace, "--html", "r.html", cwd=work,
                    shell_prefix="ulimit -f 20;")
    assert one_error_line(proc) == "mpiscope: r.html: cannot write: File too large"
    assert os.listdir(work) == []


def test_a_failed_write_leaves_the_old_report_unchanged(trace: Path, tmp_path: Path) -> None:
    old = tmp_path / "r.html"
    old.write_text("the report of yesterday\n")
    os.chmod(old, 0o640)
    before = os.stat(old)
    proc = mpiscope("compare", trace, trace, "--html", old, shell_prefix="ulimit -f 20;")
    assert one_error_line(proc) == f"mpiscope: {old}: cannot write: File too large"
    assert old.read_text() == "the report of yesterday\n"
    after = os.stat(old)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(os.listdir(tmp_path)) == sorted(["r.html", "trace"])


def test_a_rewritten_report_keeps_its_permissions(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    out.write_text("{}")
    os.chmod(out, 0o640)
    proc = mpiscope("analyze", trace, "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["ranks"]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


def test_an_output_through_a_symlink_replaces_its_target(trace: Path, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    real = tmp_path / "reports" / "a.json"
    real.write_text("{}")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    proc = mpiscope("analyze", trace, "--json", link)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink()
    assert json.loads(real.read_text())["ranks"]


def test_an_output_fifo_is_written_into_not_replaced(trace: Path, tmp_path: Path) -> None:
    """`--json >(jq .)` hands over a pipe: the JSON goes into it, the pipe stays a pipe."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    proc = mpiscope("analyze", trace, "--json", fifo)
    reader.join(TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(got[0])["ranks"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_json_to_dev_stdout_follows_the_summary(trace: Path, tmp_path: Path) -> None:
    """`--json /dev/stdout > out.txt`: /dev/stdout resolves to out.txt, a regular file; it
    must be written through fd 1, after the summary, not renamed over or truncated."""
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        proc = mpiscope("analyze", trace, "--json", "/dev/stdout", stdout=f.fileno())
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    summary, brace, rest = text.partition("\n{")
    assert "Time per rank" in summary
    assert json.loads(brace.strip() + rest)["ranks"]


def test_an_unwritable_directory_is_refused_up_front(trace: Path, tmp_path: Path) -> None:
    """A directory on a read-only mount: /proc/sys is one every machine has."""
    proc = mpiscope("analyze", trace, "--json", "/proc/sys/x.json")
    assert one_error_line(proc).startswith("mpiscope: /proc/sys/x.json: cannot write: ")
    assert proc.stdout == ""


def test_a_study_directory_that_cannot_be_made_is_refused_before_any_run() -> None:
    proc = mpiscope("study", "himeno", "--out", "/proc/mpiscope-study")
    assert one_error_line(proc).startswith("mpiscope: /proc/mpiscope-study: cannot write: ")


# --- non-regular files in place of trace files -----------------------------------------


@pytest.mark.parametrize("name", ["traces.otf2", "traces.def", "traces/0.evt",
                                  "traces/3.def"])
def test_a_fifo_in_the_trace_is_refused_not_read(trace: Path, name: str) -> None:
    fifo = trace / name
    fifo.unlink()
    os.mkfifo(fifo)
    proc = mpiscope("analyze", trace)
    assert one_error_line(proc) == f"mpiscope: {fifo}: not a regular file"


def test_a_fifo_given_as_the_trace_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "traces.otf2"
    os.mkfifo(fifo)
    proc = mpiscope("analyze", fifo)
    assert one_error_line(proc) == f"mpiscope: {fifo}: not a regular file"


def test_a_character_device_given_as_the_trace_is_refused() -> None:
    proc = mpiscope("analyze", "/dev/zero")  # would read zeros for ever
    assert one_error_line(proc) == "mpiscope: /dev/zero: not a regular file"


# --- traces with ranks cut short -------------------------------------------------------


def test_compare_warns_about_ranks_cut_short_like_analyze(trace: Path, cut: Path,
                                                           tmp_path: Path) -> None:
    """One sentence wherever the trace cut short is shown: the JSON's warning, analyze's
    and compare's stderr, the HTML and the Markdown report."""
    analyzed = mpiscope("analyze", cut, "--no-cache", "--json", tmp_path / "cut.json")
    assert analyzed.returncode == 0, analyzed.stderr
    doc = json.loads((tmp_path / "cut.json").read_text())
    assert [w for w in doc["warnings"] if "cut short" in w] == [CUT_SHORT]
    warning = f"mpiscope: warning: {cut}: {CUT_SHORT}"
    assert warning in analyzed.stderr.splitlines()

    html, md = tmp_path / "r.html", tmp_path / "r.md"
    proc = mpiscope("compare", trace, cut, "--html", html, "--md", md)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert warning in lines
    assert not any(str(trace) + ":" in line for line in lines)  # the complete run: no warning
    report = html.read_text()
    assert report.count('class="warning cut-short"') == 1
    shown = re.search(r'<p class="warning cut-short">(.*?)</p>', report, re.S)[1]
    assert htmllib.unescape(re.sub(r"<[^>]+>", "", shown)) == (
        f"warning: cut ({cut}): {CUT_SHORT}")  # as a reader sees the paragraph
    assert f"> **warning:** cut (`{cut}`): {CUT_SHORT}" in md.read_text().splitlines()


def test_compare_of_complete_runs_has_no_warning(trace: Path, tmp_path: Path) -> None:
    proc = mpiscope("compare", trace, trace, "--html", tmp_path / "r.html",
                    "--md", tmp_path / "r.md")
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr
    assert "cut-short" not in (tmp_path / "r.html").read_text()
    assert "warning" not in (tmp_path / "r.md").read_text()


# --- the Parquet cache -------------------------------------------------------------------


def test_ulimit_leaves_no_half_written_cache(trace: Path) -> None:
    """The cache's per-rank files exceed 20 KiB: it cannot be written, which only costs
    speed (exit 0); no cache and no temporary cache is left in the trace directory."""
    before = sorted(os.listdir(trace))
    proc = mpiscope("analyze", trace, shell_prefix="ulimit -f 20;")
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(trace)) == before
    again = mpiscope("analyze", trace)  # and the next run writes it whole
    assert again.returncode == 0, again.stderr
    assert (trace / ".mpiscope-cache" / "manifest.json").is_file()
    assert sorted(os.listdir(trace)) == sorted([*before, ".mpiscope-cache"])


@pytest.mark.parametrize("name", ["manifest.json", "ranks.parquet",
                                  "calls/rank=1/part-0.parquet"])
def test_a_fifo_in_the_cache_is_not_read_and_the_cache_is_rebuilt(trace: Path,
                                                                   name: str) -> None:
    """A FIFO in place of one of the cache's files (the cache is mpiscope's own, but the
    directory is the user's): opening it would wait forever for a writer. The cache is
    skipped and written anew, and the summary is the same as from a good cache."""
    first = mpiscope("analyze", trace)
    assert first.returncode == 0, first.stderr
    fifo = trace / ".mpiscope-cache" / name
    fifo.unlink()
    os.mkfifo(fifo)
    proc = mpiscope("analyze", trace)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout == first.stdout
    assert fifo.is_file()  # the rebuilt cache replaced it
    assert not any(stat.S_ISFIFO(p.lstat().st_mode) for p in trace.rglob("*"))


def test_a_killed_writers_temporary_cache_is_cleared(trace: Path) -> None:
    """A writer killed by SIGKILL leaves `.mpiscope-cache.tmp<pid>`; the next writer
    removes it (its pid is gone), while the cache it writes is used."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = trace / f".mpiscope-cache.tmp{dead.pid}"
    (stale / "calls").mkdir(parents=True)
    proc = mpiscope("analyze", trace)
    assert proc.returncode == 0, proc.stderr
    assert not stale.exists()
    assert (trace / ".mpiscope-cache" / "manifest.json").is_file()


def test_an_interrupted_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    """Ctrl-C half-way through a write (in-process: the signal's exception)."""
    from mpiscope import output

    old = tmp_path / "r.json"
    old.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), output.atomic_path(old) as tmp:
        tmp.write_text("half of the new")
        raise KeyboardInterrupt
    assert old.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["r.json"]
