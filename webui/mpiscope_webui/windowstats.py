"""The analysis tabs for the visible window and a rank set (Vampir's displays follow the
zoom): breakdown, functions, messages and profiles, read from the trace's session
(mpiscope.analysis.window), which sorts the trace once and keeps the last windows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
from dash import dash_table, dcc, html

from mpiscope.analysis.window import Window
from mpiscope_webui import inputs
from mpiscope_webui.analysis import Panels
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import View

WINDOW, RUN = "window", "run"
MAX_RANK_CHOICES = 4096  # rank set entries the page may send back
# every table's CSV export (this module's tables, compare's, the critical path's): all
# rows, the values as computed (seconds, bytes), the column ids as headers
EXPORT = {"export_format": "csv", "export_headers": "ids",
          "css": [{"selector": ".export", "rule": "font-size: 12px; margin: 2px 0;"}]}


def scope_bar(num_ranks: int) -> html.Div:
    """What the analysis tabs are about: the visible window or the whole run, and which
    ranks (none chosen: those the timeline shows, all unless its lanes are chosen)."""
    return html.Div([
        html.Span("Statistics of", className="muted"),
        dcc.RadioItems(id="scope", value=WINDOW, inline=True, className="scope",
                       options=[{"label": " the visible window", "value": WINDOW},
                                {"label": " the whole run", "value": RUN}]),
        dcc.Dropdown(id="rankset", multi=True, placeholder="the timeline's ranks",
                     className="rankset",
                     options=[{"label": f"rank {r}", "value": r} for r in range(num_ranks)]),
    ], className="scope-bar")


def chosen_ranks(model: TraceModel, ranks: object) -> tuple[int, ...] | None:
    """A rank set from the page (a list of rank numbers, checked), None for none."""
    if not isinstance(ranks, list) or not ranks:
        return None
    ok = [inputs.integer(r, 0, model.trace.num_ranks) for r in ranks[:MAX_RANK_CHOICES]]
    return tuple(sorted({r for r in ok if r is not None})) or None


@dataclass(frozen=True)
class Scope:
    """What one panel's tabs show: a window (ns, trace time) or the whole run, ranks."""

    window: tuple[int, int] | None  # None: the whole run
    ranks: tuple[int, ...] | None  # None: all

    @classmethod
    def of(cls, model: TraceModel, view: View, scope: object, ranks: object) -> Scope:
        chosen = chosen_ranks(model, ranks)
        if chosen is None and view.ranks:  # none chosen here: the ranks the timeline shows
            chosen = tuple(sorted({int(r) for r in view.ranks}))
        a, b = int(round(view.t0 * 1e9)), int(round(view.t1 * 1e9))
        origin = model.index.origin
        if scope == RUN or (a <= origin and b >= origin + model.duration):
            return cls(None, chosen)  # zoomed out all the way: the whole run's tables
        return cls((a, b), chosen)

    def key(self) -> str:
        return f"{self.window}|{self.ranks}"

    def text(self, model: TraceModel | None = None) -> str:
        """What the tables are of, in one line (the out-of-core page has no model)."""
        ranks = ("all ranks" if self.ranks is None else
                 "rank " + ", ".join(str(r) for r in self.ranks[:12])
                 + (f" and {len(self.ranks) - 12} more" if len(self.ranks) > 12 else ""))
        if self.window is None:
            where = "the whole run"
        else:
            a, b = self.window
            where = f"the window {a / 1e9:.6f} – {b / 1e9:.6f} s ({_dur((b - a) / 1e9)})"
        return (f"Statistics of {where}, {ranks}. A call counts if it overlaps the window; "
                "its time is the part inside it, min/median/max are of whole calls.")


def _dur(s: float) -> str:
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= f:
            return f"{s / f:.4g} {unit}"
    return f"{s * 1e9:.4g} ns"


def window_of(model: TraceModel, scope: Scope) -> Window:
    """The session's window for a scope (the whole run: the index's span)."""
    session = model.session
    if scope.window is None:
        lo, hi = session.window_index.span
        return session.window(lo, hi + 1, scope.ranks)
    return session.window(*scope.window, scope.ranks)


def warm(model: TraceModel) -> None:
    """Compute the whole run's window tables ahead (kept by the session for good): the
    page's first view is the whole run, and a whole-run profile of a big trace takes a
    while. A failure is shown when the tab asks again."""
    try:
        w = window_of(model, Scope(None, None))
        w.breakdown(), w.functions(), w.comm_matrix(), w.message_sizes()
        for _, _, by in PROFILES:
            w.profile(by)
        w.message_profile(), w.wait_states(), w.regions(), w.regions(by_rank=True)
    except Exception:  # noqa: BLE001, S110 - the tabs list it when they ask
        pass


def panels(model: TraceModel, scope: Scope) -> Panels:
    """The breakdown, functions and messages of the scope, as the tabs draw them; a
    failure is listed, as Panels does."""
    empty = pd.DataFrame()
    try:
        w = window_of(model, scope)
        return Panels(w.breakdown(), w.functions(), w.message_sizes(), w.comm_matrix(), [])
    except Exception as err:  # noqa: BLE001 - shown to the user, one line
        return Panels(empty, empty, empty, empty, [],
                      [f"window statistics: {type(err).__name__}: {err}".splitlines()[0]])


# column id -> (header, kind): "s" seconds (SI prefixes, one unit per column), "n" count,
# "B" bytes, "t" text, "%" percent
COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("function", "t"), "function": ("function", "t"), "callsite": ("call site", "t"),
    "comm": ("communicator", "t"), "tag": ("tag", "n"), "rank": ("rank", "n"),
    "thread": ("thread", "n"), "host": ("host", "t"), "calls": ("calls", "n"),
    "messages": ("messages", "n"), "time_s": ("time (s)", "s"), "share_%": ("% of MPI", "%"),
    "mean_s": ("mean (s)", "s"), "min_s": ("min (s)", "s"), "median_s": ("median (s)", "s"),
    "max_s": ("max (s)", "s"), "wait_s": ("waiting (s)", "s"), "bytes": ("bytes", "B"),
    "inclusive_s": ("inclusive (s)", "s"), "exclusive_s": ("exclusive (s)", "s"),
    "total_s": ("total (s)", "s"), "compute_s": ("compute (s)", "s"),
    "communication_s": ("communication (s)", "s"), "synchronization_s":
    ("synchronization (s)", "s"), "io_s": ("I/O (s)", "s"),
    "median_transfer_s": ("median transfer (s)", "s"),
    "p90_transfer_s": ("p90 transfer (s)", "s"), "bandwidth_MBps": ("bandwidth (MB/s)", "n"),
    "bucket_lo": ("size from (B)", "B"), "bucket_hi": ("size to (B)", "B"),
    "send_rank": ("sender", "n"), "recv_rank": ("receiver", "n"),
    "late_sender": ("late sender (s)", "s"), "late_receiver": ("late receiver (s)", "s"),
    "wait_at_barrier": ("wait at barrier (s)", "s"), "wait_at_nxn": ("wait at N×N (s)", "s"),
    "late_broadcast": ("late broadcast (s)", "s"), "early_reduce": ("early reduce (s)", "s"),
    "wait_at_fence": ("wait at fence (s)", "s"), "late_post": ("late post (s)", "s"),
    "early_wait": ("early wait (s)", "s"), "lock_contention": ("lock contention (s)", "s"),
    # compare mode's findings predicted vs measured (compare.findings_frame; short: ten
    # columns fit at 1024 px)
    "kind": ("kind", "t"), "predicted_s": ("predicted (s)", "s"),
    "measured_s": ("measured (s)", "s"), "site_a_s": ("site, A (s)", "s"),
    "site_b_s": ("site, B (s)", "s"), "path_a_s": ("path, A (s)", "s"),
    "path_b_s": ("path, B (s)", "s"), "outcome": ("outcome", "t"),
}
FORMATS = {"s": {"specifier": ".4~s"}, "n": {"specifier": ",~r"}, "B": {"specifier": ","},
           "%": {"specifier": ".1f"}}


def table(df: pd.DataFrame, ident: dict | str, *, selectable: bool = False,
          page_size: int = 15) -> dash_table.DataTable:
    """A table of `df` with a CSV export of every row (the values as computed: seconds,
    bytes; the column ids as headers)."""
    columns = []
    for key in df.columns:
        header, kind = COLUMNS.get(key, (key, "t"))
        c: dict = {"id": key, "name": header}
        if kind != "t":
            c.update(type="numeric", format=FORMATS[kind])
        columns.append(c)
    extra = {"row_selectable": "single", "selected_rows": [0] if len(df) else []} \
        if selectable else {}
    return dash_table.DataTable(
        id=ident, data=df.to_dict("records"), columns=columns, sort_action="native",
        page_size=page_size, **EXPORT,
        style_cell={"fontFamily": "sans-serif", "fontSize": 12, "padding": "2px 8px"},
        style_cell_conditional=[{"if": {"column_id": k}, "textAlign": "left"}
                                for k in df.columns if COLUMNS.get(k, ("", "t"))[1] == "t"],
        style_header={"fontWeight": "bold"},
        style_table={"overflowX": "auto"},  # a wide table scrolls inside, not the page
        **extra)


def functions_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    if not out.empty:
        out.insert(3, "share_%", 100 * out["time_s"] / (out["time_s"].sum() or 1.0))
    return out


PROFILES: Sequence[tuple[str, str, tuple[str, ...]]] = (
    ("per process", "per-rank", ("rank", "function")),
    ("per call site", "per-callsite", ("function", "callsite")),
    ("per communicator", "per-comm", ("function", "comm")),
    ("per tag", "per-tag", ("function", "tag")),
    ("per thread", "per-thread", ("rank", "thread", "function")),
)


def profiles_tab(model: TraceModel, scope: Scope, panel: int) -> list:
    """Every profile of the scope, each a table with its CSV export."""
    try:
        w = window_of(model, scope)
        return [html.Div(scope.text(model), className="muted scope-text"),
                *profile_tables(w, _threaded(model),
                                lambda name: {"type": "ptable", "panel": panel,
                                              "name": name})]
    except Exception as err:  # noqa: BLE001 - shown to the user, one line
        return [html.Div(f"profiles: {type(err).__name__}: {err}".splitlines()[0],
                         className="error")]


def profile_tables(w: Window, threaded: bool, ident: Callable[[str], dict],
                   messages: list | None = None) -> list:
    """The Profiles tab's tables of a window (the out-of-core page's too): the MPI
    function profiles (per thread only if `threaded`: a rank has more than one thread
    calling MPI), messages per communicator and tag (`messages`: what stands for them
    instead), wait states per rank, user regions if any; `ident(name)`: a table's id."""
    out: list = []
    for title, name, by in PROFILES:
        if by[-2:] == ("thread", "function") and not threaded:
            continue  # one thread per rank: the same as per process
        out += [html.H4(f"MPI functions {title}"), table(w.profile(by), ident(name))]
    out += [html.H4("Messages per communicator and tag"),
            *(messages if messages is not None else
              [table(w.message_profile(), ident("messages-comm-tag"))]),
            html.H4("Wait states per rank"), table(w.wait_states(), ident("waits"))]
    return out + region_tables(w, ident)


def region_tables(w: Window, ident: Callable[[str], dict]) -> list:
    """The user regions of a window, in all and per process (none without regions)."""
    reg = w.regions(by_rank=False)
    if not len(reg):
        return []
    return [html.H4("User regions (inclusive: with what they call; exclusive: their own "
                    "time)"),
            table(reg, ident("regions")),
            html.H4("User regions per process"),
            table(w.regions(by_rank=True), ident("regions-per-rank"))]


def _threaded(model: TraceModel) -> bool:
    c = model.trace.calls
    return "thread" in c.columns and bool((c["thread"].to_numpy() != 0).any())
