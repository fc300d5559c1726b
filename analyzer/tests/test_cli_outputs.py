"""Output files a command cannot write are refused up front in one line, exit 2 — not a
traceback after the whole analysis has run."""

import os
import re
import subprocess

import pytest


def mpiscope(*args):
    return subprocess.run(["mpiscope", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("command", ["analyze", "compare", "scaling"])
def test_an_output_in_a_missing_directory_is_one_line_and_exit_2(command, two_rank_trace,
                                                                  tmp_path):
    out = tmp_path / "missing" / "out.json"
    option = "--json" if command != "compare" else "--md"
    traces = [two_rank_trace] * (1 if command == "analyze" else 2)
    proc = mpiscope(command, *traces, option, out)
    assert proc.returncode == 2
    assert proc.stderr == (f"mpiscope: {out}: cannot write: directory {out.parent} "
                           "does not exist\n")
    assert proc.stdout == ""  # refused before reading anything


def test_a_directory_given_as_output_file_is_refused(two_rank_trace, tmp_path):
    proc = mpiscope("analyze", two_rank_trace, "--json", tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"mpiscope: {tmp_path}: is a directory; give a file name to write\n"


def test_a_good_output_path_is_written(two_rank_trace, tmp_path):
    proc = mpiscope("analyze", two_rank_trace, "--json", tmp_path / "a.json")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.json").read_text().startswith("{")


@pytest.mark.parametrize("top", ["0", "-1", "many"])
def test_top_must_be_a_positive_count(top, two_rank_trace):
    proc = mpiscope("analyze", two_rank_trace, "--top", top)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        f"mpiscope analyze: error: argument --top: expected a whole number of at least 1, "
        f"not '{top}'")


def test_reading_shows_a_progress_bar_of_events_on_a_terminal(synth_trace):
    """On a terminal (FORCE_COLOR makes rich treat the pipe as one) `analyze` draws a bar
    of events decoded on stderr while reading; stdout keeps only the summary."""
    trace = synth_trace(ranks=4, events=200_000)
    proc = subprocess.run(["mpiscope", "analyze", str(trace), "--no-cache"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    frames = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", proc.stderr)  # colours, cursor moves
    assert f"reading {trace}: events" in frames
    assert "━" in frames and "100%" in frames
    assert f"reading {trace}" not in proc.stdout
