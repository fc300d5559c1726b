"""The out-of-core page's search, partner lookup and call rows (oocnav, on the trace's
Parquet cache) find what the in-memory page finds (controller.Controller, on the loaded
tables), on traces built by construction with tags, communicators, Irecv/Wait pairs and
call sites (mpiscope_testing.tagtrace, windowtrace)."""

from __future__ import annotations

import numpy as np
import pytest
from dash import html

from mpiscope.archive import reader
from mpiscope.engines.daskcache import open_cache
from mpiscope_testing import tagtrace, windowtrace
from mpiscope_webui import oocnav
from mpiscope_webui.controller import Controller
from mpiscope_webui.model import TraceModel


@pytest.fixture(scope="module", params=["tags", "window"])
def pages(request, tmp_path_factory) -> tuple[Controller, oocnav.OocCalls]:
    build = tagtrace.build if request.param == "tags" else windowtrace.build
    d = build(tmp_path_factory.mktemp(f"oocnav-{request.param}") / "t")
    trace = reader.load(d)  # writes the cache the out-of-core page reads
    return Controller([TraceModel.build(trace)]), oocnav.OocCalls(open_cache(d))


def jumps(children: list) -> list[tuple[dict, str]]:
    return [(c.id, c.children) for c in children if isinstance(c, html.Button)]


def test_search_offers_and_finds_the_same_calls(pages):
    ctl, oc = pages
    assert oc.search_options() == ctl.search_options(0)
    starts = ctl.models[0].trace.calls["start"].to_numpy()
    for opt in ctl.search_options(0):
        for ranks in (None, [1], [0, 2]):
            want = ctl.search_calls(0, opt["value"], ranks)
            ids, st = oc.matches(opt["value"], ranks)
            assert sorted(set(ids.tolist())) == sorted(set(want.tolist())), (opt, ranks)
            assert st.tolist() == starts[ids].tolist()
    for bad in ("f:nothing", "t:recv\tx", "x:y", "c:sideways\t1"):
        assert oc.matches(bad, None) is None and ctl.search_calls(0, bad) is None


def test_rows_partners_and_jumps_are_the_in_memory_ones(pages):
    ctl, oc = pages
    calls = ctl.models[0].trace.calls
    assert oc.total == len(calls)
    for call in range(len(calls)):
        row = oc.row(call)
        for col in ("function", "callsite", "start", "end", "thread", "peer", "tag", "comm"):
            assert str(row[col]) == str(calls[col].iloc[call]), (call, col)
        assert int(row["rank"]) == int(calls["rank"].iloc[call])
        got, want = oc.partners(call), ctl.partners(0, call)
        cols = ["send_call", "recv_call", "send_complete_call", "recv_complete_call",
                "send_rank", "recv_rank", "bytes", "tag"]
        key = ["send_call", "recv_complete_call"]
        assert (got[cols].sort_values(key).to_numpy().tolist()
                == want[cols].sort_values(key).to_numpy().tolist()), call
        # the details' partner buttons: the same targets and words
        assert jumps(oc.details(0, call)) == jumps(ctl.call_details(0, call)), call
    assert np.array_equal(oc.first, np.concatenate(
        [[0], np.cumsum(np.bincount(calls["rank"], minlength=len(oc.first) - 1))]))


def test_a_calls_messages_are_read_from_its_partners_files_only(pages):
    """A click reads the files of the ranks that sent the call's messages (and its own),
    not every sender's: found from its own rank's point-to-point events."""
    ctl, oc = pages
    calls = ctl.models[0].trace.calls
    narrowed = 0
    for call in range(len(calls)):
        rank = int(calls["rank"].iloc[call])
        senders = set(ctl.partners(0, call)["send_rank"].astype(int))
        assert set(oc.senders_of(call)) <= {rank} | senders, call
        narrowed += len(oc.senders_of(call)) < len(oc.senders)
    assert narrowed  # the traces have more senders than any call's partners
