"""The out-of-core page's tabs (ooctabs.py) without a browser: what a tab shows while the
analysis runs, when it cannot run, the tabs out of core cannot fill, and the profiles
out of core (per process, communicator, tag; messages; a window's messages) against
those in memory."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from dash import html

from mpiscope.analysis import window
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_testing.oversubscribed import imbalanced
from mpiscope_webui import ooctabs, windowstats


def text(node) -> str:
    """The text a user reads in a Dash component tree."""
    if isinstance(node, (list, tuple)):
        return " ".join(text(n) for n in node)
    if isinstance(node, html.Div | html.Span | html.B | html.Li | html.Ol | html.H4):
        return text(node.children)
    return "" if node is None else str(node)


def test_a_failed_analysis_is_one_line_naming_the_command(tmp_path):
    (tmp_path / "not-a-trace").mkdir()
    r = ooctabs.Results(tmp_path / "not-a-trace", start=False)
    r._run()  # the real command on a directory without a trace
    assert r.done and r.json is None
    shown = ooctabs.tab(r, "functions")
    assert len(shown) == 1 and "error" in shown[0].className
    line = text(shown)
    assert line.startswith("analysis failed — `mpiscope analyze --engine dask` exited ")
    assert "\n" not in line


def test_findings_out_of_core_carry_the_warnings_and_the_mark(tmp_path):
    """The analysis JSON the out-of-core tab reads (here the pandas engine's, which the
    Dask engine's equals: test_dask_engine), for 4 ranks on 2 CPUs (built): its warnings
    above the findings, word for word, the totals line, and the imbalance marked."""
    trace = imbalanced(["node0"] * 4, "2").write(tmp_path / "trace")
    doc = Analysis(reader.load(trace)).to_dict()
    r = ooctabs.Results(trace, start=False)
    r.json = doc
    r._done.set()
    shown = ooctabs.tab(r, "findings")
    warned = [" ".join(text(d).split()) for d in shown
              if getattr(d, "className", "") == "run-warning"]
    assert warned and warned == [f"warning: {w}" for w in doc["warnings"]]
    assert any("totals" in str(getattr(d, "className", "")) for d in shown)
    [found] = [d for d in shown if getattr(d, "className", "") == "findings"]
    marks = [[c.children for c in li.children if getattr(c, "className", "")
              == "mark oversubscribed"] for li in found.children]
    assert marks == [["oversubscribed"] if f["oversubscribed"] else []
                     for f in doc["findings"]] and any(marks)


def test_running_and_unavailable_tabs_say_so_in_one_line(tmp_path):
    r = ooctabs.Results(tmp_path, start=False)  # never finishes: still running
    assert "Analysing out of core" in text(ooctabs.tab(r, "breakdown"))
    note = ooctabs.tab(r, "calltree")  # no analysis can fill it: said at once
    assert len(note) == 1 and "not available out of core" in text(note)


def test_profiles_out_of_core_equal_those_in_memory(himeno_traces, tmp_path):
    """On a real traced run: what the out-of-core page computes (the Dask engine's analysis,
    then the per-rank pass over the cache) is the in-memory Profiles tab's tables per
    process, communicator and tag and of messages, exactly in their counts, within float
    sums' rounding in their times."""
    d = shutil.copytree(himeno_traces["unpatched"], tmp_path / "t")  # shared: not written
    mem = Analysis(reader.load(d))  # writes the Parquet cache
    in_memory = mem.window_index.whole()
    r = ooctabs.Results(d, start=False)
    r._run()  # the real commands, as the page starts them
    assert r.error is None and r.profiles_error is None, (r.error, r.profiles_error)
    assert r.profiles is not None
    for _title, name, by in ooctabs.COMPUTED:
        want, got = in_memory.profile(by), r.profiles[name]
        assert list(got.columns) == list(want.columns) == [*by, *window.PROFILE_COLUMNS]
        keys = [*by, "calls", "bytes"]
        assert sorted(got[keys].values.tolist()) == sorted(want[keys].values.tolist())
        # row by row on the keys (the order is by time: equal only to the sums' rounding)
        got = got.set_index(list(by)).loc[want.set_index(list(by)).index].reset_index()
        assert got[keys].values.tolist() == want[keys].values.tolist()
        for col in ("time_s", "mean_s", "min_s", "median_s", "max_s", "wait_s"):
            assert got[col].to_numpy() == pytest.approx(want[col].to_numpy(), rel=1e-9,
                                                        abs=1e-12), col
    want, got = in_memory.message_profile(), r.profiles[ooctabs.MESSAGES]
    assert list(got.columns) == list(want.columns) and len(want) > 0
    keys = ["comm", "tag", "messages", "bytes"]
    assert sorted(got[keys].values.tolist()) == sorted(want[keys].values.tolist())
    got = got.set_index(["comm", "tag"]).loc[want.set_index(["comm", "tag"]).index]
    assert got["median_transfer_s"].to_numpy() == pytest.approx(
        want["median_transfer_s"].to_numpy(), rel=1e-9, abs=1e-12)
    # a window's messages out of core (each rank's sent messages, written by the same
    # pass) are the in-memory window's, on a real run's nonblocking halo exchanges
    lo, hi = mem.window_index.span
    sent = np.sort(in_memory.message_rows().time)  # the run's messages are at its end
    m0, m1 = int(sent[len(sent) // 4]), int(sent[3 * len(sent) // 4])
    for a, b, ranks in ((m0, m1, None), (m0, m1, (1,)), (lo, hi + 1, (0, 3))):
        w = mem.window(a, b, ranks)
        got = r.messages.tables(a, b, ranks, 4)
        assert got.messages > 0
        pd.testing.assert_frame_equal(got.matrix, w.comm_matrix())
        pd.testing.assert_frame_equal(got.sizes, w.message_sizes())
        pd.testing.assert_frame_equal(r.messages.profile(a, b, ranks), w.message_profile())
    per_rank = r.profiles["per-rank"]
    assert sorted(set(per_rank["rank"])) == [0, 1, 2, 3]  # Himeno on 4 ranks
    assert (per_rank["calls"] > 0).all() and len(per_rank) >= 4 * 3

    shown = ooctabs.tab(r, "profiles")
    titles = [n.children for n in shown if isinstance(n, html.H4)]
    # the in-memory tab's, in its order; one thread per rank: no table per thread
    assert titles[:4] == [f"MPI functions {t}" for t, name, _by in windowstats.PROFILES
                          if name != "per-thread"]
    table = next(n for n in shown if getattr(n, "id", None) == {"type": "otable",
                                                                  "name": "per-rank"})
    # what the in-memory table shows of the same frame (windowstats.shown: its units)
    assert table.data == windowstats.shown(r.profiles["per-rank"])[0]
    # nothing it lacks: its user regions (none in an MPI-only trace) from each rank's rows
    assert not [n for n in shown if "ooc-note" in (getattr(n, "className", "") or "")]


def test_profiles_that_cannot_be_made_say_why_in_one_line(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    assert ooctabs.main([str(tmp_path), str(tmp_path / "out")]) == 1  # no cache, no trace
    err = capsys.readouterr().err
    assert err.startswith(f"mpiscope: {tmp_path}: ") and err.count("\n") == 1
    r = ooctabs.Results(tmp_path, start=False)
    r.json = {"callsites": [], "wait_states_per_rank": [], "threads": []}
    r.profiles_error = "`the profiles` exited 1: " + err.strip()
    r._done.set()
    shown = ooctabs.tab(r, "profiles")
    failed = [n for n in shown if getattr(n, "className", None) == "error"]
    assert len(failed) == 1 and text(failed).startswith("profiles failed — ")
    # the rest of the tab is still there
    assert "MPI functions per call site" in [n.children for n in shown
                                             if isinstance(n, html.H4)]
    # a window's messages need the files of the same pass: the whole run's, said so
    r.json.update(comm_matrix=[{"send_rank": 0, "recv_rank": 1, "messages": 3, "bytes": 24}],
                  message_sizes=[], ranks=[{"rank": 0}, {"rank": 1}])
    window = ooctabs.Scope((10, 20), None)
    shown = ooctabs.tab(r, "messages", window)
    assert text(shown[0]) == ooctabs.NOT_IN_WINDOW["messages"]
    assert "whole run" in text(shown[1])
    table = next(n for n in shown if getattr(n, "id", None) == {"type": "otable",
                                                                  "name": "matrix"})
    assert table.data == windowstats.shown(pd.DataFrame(r.json["comm_matrix"]))[0]


def test_a_windows_messages_wait_for_the_per_rank_pass(tmp_path):
    r = ooctabs.Results(tmp_path, start=False)  # never finishes: still running
    shown = ooctabs.tab(r, "messages", ooctabs.Scope((10, 20), (1,)))
    assert len(shown) == 1 and "the window's messages" in text(shown)
