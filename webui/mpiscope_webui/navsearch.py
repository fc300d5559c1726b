"""The timeline's search, partner jump and call details, for both pages: the in-memory one
(controller.Controller, on the trace's tables) and the out-of-core one (ooc.py, on one
rank's partition of the cache at a time). What is found, where the view goes and what
the details say are these functions, whatever holds the rows.

A search value (the dropdown's): "f:FUNCTION" (its calls), "s:FUNCTION\\tSITE" (those at
a call site), "t:SIDE\\tTAG" and "c:SIDE\\tCOMM" (the receives or sends of messages with a
tag, on a communicator; SIDE "recv" or "send")."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from dash import html

from mpiscope import numbers
from mpiscope_webui import inputs
from mpiscope_webui.timeline import View

SEARCH_SITES = 300  # call sites offered to the search
SEARCH_KEYS = 100  # tags, and communicators, offered to the search
DETAIL_MESSAGES = 8  # a call's messages listed in its details
# a message search's sides: what the user calls it, the rank column the rank set filters
SIDES = {"recv": ("receive", "recv_rank"), "send": ("send", "send_rank")}
# the messages' columns a search and the details read
MESSAGE_COLUMNS = ["send_rank", "recv_rank", "send_call", "recv_call", "send_complete_call",
                   "recv_complete_call", "bytes", "tag", "comm"]


def equals(column: pd.Series, value: str) -> np.ndarray:
    """column == value, on a categorical's codes where it is one (fast on millions)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        hit = np.flatnonzero(column.cat.categories.astype(str) == value)
        return np.isin(column.cat.codes.to_numpy(), hit)
    return column.astype(str).to_numpy() == value


def most_used(counts: pd.Series, n: int) -> list[int]:
    """The n keys of `counts` (key -> times seen) seen most often, in ascending order (the
    dropdown lists tags so); negative ones (none recorded) never take a place."""
    counts = counts[counts.index.to_numpy() >= 0].sort_index()
    top = counts.index.to_numpy()[np.argsort(-counts.to_numpy(), kind="stable")[:n]]
    return sorted(int(k) for k in top)


def site_counts(calls: pd.DataFrame) -> pd.Series:
    """Calls per (function, call site): what search_options ranks the call sites by (of a
    whole trace, or one rank's calls to be added up)."""
    return calls.groupby(["function", "callsite"], observed=True).size()


def search_options(functions: Sequence[str], sites: pd.Series, tags: pd.Series,
                   comms: pd.Series, comm_name: Callable[[int], str]) -> list[dict]:
    """What the search can look for, as {"label", "value"}: every function, then its call
    sites (`sites`: calls per (function, call site); the most called, SEARCH_SITES at
    most), then receives and sends by tag and by communicator (`tags`, `comms`: messages
    per key; SEARCH_KEYS of each at most, the most used)."""
    out = [{"label": f, "value": f"f:{f}"} for f in functions]
    top = sites.sort_values(ascending=False, kind="stable").head(SEARCH_SITES)
    out += [{"label": f"{f} at {cs}", "value": f"s:{f}\t{cs}"}
            for (f, cs), _ in top.items() if str(cs)]
    out += [{"label": f"{noun} with tag {t}", "value": f"t:{side}\t{t}"}
            for t in most_used(tags, SEARCH_KEYS) for side, (noun, _) in SIDES.items()]
    keys = most_used(comms, SEARCH_KEYS)
    names = [comm_name(k) for k in keys]
    for k, name in zip(keys, names, strict=True):
        if names.count(name) > 1:  # two communicators of one name: told apart
            name = f"{name} (ref {k})"
        out += [{"label": f"{noun} on communicator {name}", "value": f"c:{side}\t{k}"}
                for side, (noun, _) in SIDES.items()]
    return out


def search_noun(what: object) -> str:
    """What a search value finds, in the words of its notes ("no later receive")."""
    if isinstance(what, str) and what[:2] in ("t:", "c:"):
        return SIDES.get(what[2:].partition("\t")[0], ("message", ""))[0]
    return "call"


def is_message_search(what: str) -> bool:
    return what[:2] in ("t:", "c:")


def function_of(what: str) -> str | None:
    """The function a call search ("f:", "s:") names, None for any other value."""
    kind, _, key = what.partition(":")
    return key.partition("\t")[0] if kind in ("f", "s") else None


def call_matches(calls: pd.DataFrame, what: str, ranks: Sequence[int] | None = None
                 ) -> np.ndarray:
    """The ids (`call` column) of the calls among `calls` a function or call-site search
    stands for, on the ranks given (all: None)."""
    kind, _, key = what.partition(":")
    function, _, site = key.partition("\t")
    sel = equals(calls["function"], function)
    if kind == "s":
        sel &= equals(calls["callsite"], site)
    if ranks:
        sel &= np.isin(calls["rank"].to_numpy(), ranks)
    return calls["call"].to_numpy(np.int64)[sel]


def message_key(what: str) -> tuple[str, str, int] | None:
    """(column, side, value) of a message search ("t:recv\\t5": tag, receive, 5); None
    if `what` is not one."""
    kind, _, key = what.partition(":")
    side, _, value = key.partition("\t")
    # ASCII digits only: str.isdigit takes "²", which int() refuses
    ok = value.isascii() and value.isdigit() and len(value) < 12
    k = inputs.integer(int(value), 0, 2**31) if ok else None
    if kind not in ("t", "c") or side not in SIDES or k is None:
        return None
    return ("tag" if kind == "t" else "comm"), side, k


def message_matches(messages: pd.DataFrame, what: str, ranks: Sequence[int] | None = None
                    ) -> np.ndarray | None:
    """The receives (or sends) of the messages among `messages` with a tag or on a
    communicator, as call ids: a receive is the call that completed it (the partner
    jump's), a send the one that posted it. None if `what` is not such a search."""
    key = message_key(what)
    if key is None:
        return None
    column, side, k = key
    sel = messages[column].to_numpy() == k
    if ranks:
        sel &= np.isin(messages[SIDES[side][1]].to_numpy(), ranks)
    if side == "recv":
        done, posted = (messages["recv_complete_call"].to_numpy(),
                        messages["recv_call"].to_numpy())
        calls = np.where(done >= 0, done, posted)[sel]
    else:
        calls = messages["send_call"].to_numpy()[sel]
    return calls[calls >= 0].astype(np.int64)


def next_match(rows: np.ndarray, start: np.ndarray, ref: tuple[int, int], forward: bool
               ) -> int | None:
    """The call among `rows` (ids, `start` their starts, ns) that comes next after (or
    last before) `ref` = (start, id) in (start, id) order; None if there is none."""
    rows, keep = np.unique(np.asarray(rows, np.int64), return_index=True)
    start = np.asarray(start, np.int64)[keep]
    order = np.lexsort((rows, start))
    rows, start = rows[order], start[order]
    if forward:
        i = int(np.searchsorted(start, ref[0], side="left"))
        while i < len(rows) and (start[i], rows[i]) <= ref:
            i += 1
        return int(rows[i]) if i < len(rows) else None
    i = int(np.searchsorted(start, ref[0], side="right")) - 1
    while i >= 0 and (start[i], rows[i]) >= ref:
        i -= 1
    return int(rows[i]) if i >= 0 else None


def reference(view: View, forward: bool, focus_start: int | None, calls: int
              ) -> tuple[int, int]:
    """Where a search goes on from: the call found (or jumped to) last, as (start, id),
    else the window's start (forward) or end; `calls`: the trace's number of calls."""
    if view.focus is not None and focus_start is not None:
        return focus_start, int(view.focus)
    return (int(round((view.t0 if forward else view.t1) * 1e9)), -1 if forward else calls)


def centred(view: View, call: int, s: int, e: int, full: tuple[float, float]) -> View:
    """The view centred on a call found (start s, end e, ns), at its width (from the
    whole run `full`: close enough to see the call), the call selected and marked."""
    width = view.t1 - view.t0
    if width >= 0.9 * (full[1] - full[0]):
        width = max(40 * (e - s), 100_000) / 1e9
    mid = (s + e) / 2e9
    v = View.from_dict(view.to_dict())
    v.t0, v.t1 = mid - width / 2, mid + width / 2
    v.selected, v.focus = [call], call
    return v


def found_next(view: View, found: tuple[np.ndarray, np.ndarray] | None, forward: bool,
               focus_start: int | None, calls: int,
               span: Callable[[int], tuple[int, int]], full: tuple[float, float]
               ) -> tuple[View, int] | None:
    """A search step on either page: of the matches `found` (ids, starts), the next (or
    previous) after the call found last (`focus_start`: its start) or the window's edge,
    and the view centred on it (`span`: a call's start and end, ns); None if none."""
    if found is None or not len(found[0]):
        return None
    call = next_match(*found, reference(view, forward, focus_start, calls), forward)
    if call is None:
        return None
    return centred(view, call, *span(call), full), call


def none_found(what: object, forward: bool) -> str:
    """The search's note when there is no further match."""
    return f"no {'later' if forward else 'earlier'} {search_noun(what)}"


def focused(view: View, call: int, span: tuple[int, int], also: int | None = None,
            also_span: tuple[int, int] | None = None) -> View:
    """The window centred on a call (e.g. a message's partner, its (start, end) ns) and
    the call it came from (`also`), both outlined, the call marked."""
    lo, hi = span
    if also is not None and also_span is not None:
        lo, hi = min(lo, also_span[0]), max(hi, also_span[1])
    pad = max((hi - lo) * 4, 20_000)
    v = View.from_dict(view.to_dict())
    v.t0, v.t1 = (lo - pad) / 1e9, (hi + pad) / 1e9
    v.selected = [call] + ([also] if also is not None else [])
    v.focus = int(call)
    v.y_range = None
    return v


def partner_messages(messages: pd.DataFrame, call: int) -> pd.DataFrame:
    """The messages (of `messages`) this call sent or received, posting or completing
    them, DETAIL_MESSAGES at most."""
    m = messages
    hit = ((m["send_call"] == call) | (m["recv_call"] == call)
           | (m["send_complete_call"] == call) | (m["recv_complete_call"] == call))
    return m[hit].head(DETAIL_MESSAGES)


def fmt_s(s: float) -> str:
    return numbers.seconds(s, digits=4)


def call_lines(c: pd.Series, comm_name: Callable[[int], str], site: str,
               frames: Sequence[str], wait_ns: int | None) -> list[tuple[str, str]]:
    """What the details say of a call: its row `c` (the calls table's columns), the name
    of a communicator, its call site and path (innermost frame first), its waiting
    (None: not known)."""
    dur = (int(c["end"]) - int(c["start"])) / 1e9
    rows = [("function", str(c["function"])), ("rank", str(int(c["rank"]))),
            ("start", fmt_s(int(c["start"]) / 1e9)), ("duration", fmt_s(dur))]
    rows += bytes_lines(str(c["function"]), str(c["kind"]), int(c["bytes_sent"]),
                        int(c["bytes_recv"]))
    if int(c["peer"]) >= 0:
        rows.append(("peer", f"rank {int(c['peer'])}"))
    if int(c["tag"]) >= 0:
        rows.append(("tag", str(int(c["tag"]))))
    if int(c["comm"]) >= 0:
        rows.append(("communicator", comm_name(int(c["comm"]))))
    rows.append(("call site", site or "unknown"))
    if len(frames) > 1:
        rows.append(("call path", " <- ".join(frames)))
    if wait_ns is not None and wait_ns > 0:
        share = 100 * wait_ns / 1e9 / max(dur, 1e-12)
        rows.append(("waiting", f"{fmt_s(wait_ns / 1e9)} ({share:.0f}%)"))
    return rows


def table(rows: list[tuple[str, str]]) -> html.Table:
    return html.Table([html.Tr([html.Th(k), html.Td(v)]) for k, v in rows],
                      className="kv")


def jump(panel: int, call: int, also: int | None, text: str) -> html.Button:
    """A button to another call (e.g. a message's partner), `also` the call it leaves."""
    return html.Button(text, id={"type": "jump", "panel": panel, "call": int(call),
                                 "also": -1 if also is None else int(also)},
                       n_clicks=0, className="jump")


def call_details(panel: int, call: int, who: tuple[int, str], lines: list[tuple[str, str]],
                 extra: list, partners: pd.DataFrame, came_from: int | None = None) -> list:
    """A call's details (`lines`, then `extra`, e.g. its path) and a jump to the partner
    of each of its messages (`partners`), saying which way the message went. `who`: its
    rank and function; `came_from`: the call a partner jump left (the details then say
    the jump's result: this call is selected and marked)."""
    head = "Call"
    if came_from is not None:
        head = (f"Partner selected: rank {who[0]}, {who[1]} (marked in the timeline)")
    out = [html.H4(head, className="partner-head" if came_from is not None else ""),
           table(lines), *extra]
    for _, m in partners.iterrows():
        sender = call in (int(m["send_call"]), int(m["send_complete_call"]))
        other = int(m["recv_complete_call"] if sender else m["send_call"])
        what = (f"sent {int(m['bytes']):,} B to rank {int(m['recv_rank'])}" if sender else
                f"received {int(m['bytes']):,} B from rank {int(m['send_rank'])}")
        if other >= 0:
            out.append(jump(panel, other, call, f"{what} (tag {int(m['tag'])}) → jump to "
                                                f"the {'receive' if sender else 'send'}"))
    return out


def jump_target(tid: object, calls: int) -> tuple[int, int | None] | None:
    """(call, the call it leaves or None) of a jump button's id, checked against the
    trace's `calls`; None if it is not one."""
    tid = tid if isinstance(tid, dict) else {}
    call = inputs.integer(tid.get("call"), 0, calls)
    also = inputs.integer(tid.get("also"), -1, calls)
    if call is None or also is None:
        return None
    return call, None if also < 0 else also


# what an RMA or MPI-IO call's bytes are (docs/data-model.md: bytes_sent holds the bytes
# put, written or sent to an atomic; bytes_recv those got, read or fetched)
RMA_PUT = ("MPI_Put", "MPI_Rput")
RMA_GET = ("MPI_Get", "MPI_Rget")
RMA_ATOMIC = ("MPI_Accumulate", "MPI_Raccumulate", "MPI_Get_accumulate", "MPI_Rget_accumulate",
              "MPI_Fetch_and_op", "MPI_Compare_and_swap")


def _bytes(n: int) -> str:
    """Exact bytes, and in KiB/MiB/GiB beside them where that reads easier."""
    return f"{n:,} B" if n < 1024 else f"{n:,} B ({numbers.size(n)})"


def bytes_lines(function: str, kind: str, sent: int, received: int) -> list[tuple[str, str]]:
    """The bytes a call moved, said as what they are for its kind of call."""
    if not sent and not received:
        return []
    if function in RMA_PUT:
        return [("bytes put", f"{_bytes(sent)} into the target's window")]
    if function in RMA_GET:
        return [("bytes got", f"{_bytes(received)} from the target's window")]
    if function in RMA_ATOMIC:
        out = [("bytes to target", f"{_bytes(sent)} (origin data of the atomic update)")]
        if received:
            out.append(("bytes fetched", f"{_bytes(received)} (the target's former data)"))
        return out
    if function.startswith("MPI_File_") or kind == "io":
        out = []
        if sent:
            out.append(("bytes written", _bytes(sent)))
        if received:
            out.append(("bytes read", _bytes(received)))
        return out
    if kind in ("rma", "rma_sync"):
        return [("bytes", f"{_bytes(sent)} to the target, {_bytes(received)} from it")]
    return [("bytes", f"{sent:,} sent, {received:,} received")]
