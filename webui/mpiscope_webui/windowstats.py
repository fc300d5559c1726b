"""The analysis tabs for the visible window and a rank set (Vampir's displays follow the
zoom): breakdown, functions, messages and profiles, read from the trace's session
(mpiscope.analysis.window), which sorts the trace once and keeps the last windows."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from dash import dash_table, dcc, html

from mpiscope import numbers
from mpiscope.analysis.window import Window
from mpiscope_webui import inputs
from mpiscope_webui.analysis import Panels
from mpiscope_webui.model import TraceModel
from mpiscope_webui.timeline import View

WINDOW, RUN = "window", "run"
MAX_RANK_CHOICES = 4096  # rank set entries the page may send back
# every table's CSV export (this module's tables, compare's, the critical path's): all
# rows, as the table shows them: its headers (each numeric column's unit) over the values
# in that unit; the header line as plain text, without the soft hyphens the page breaks
# long words at (assets/export.js: the DataTable exports the headers as they are named)
EXPORT = {"export_format": "csv", "export_headers": "names",
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
    return numbers.seconds(s, digits=4)


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


SHY = "\u00ad"  # a soft hyphen: where a word may break, hyphenated (invisible otherwise)
# column id -> (label, kind). Kinds: "s" seconds and "MB/s" bandwidth (one unit per
# column, numbers.Column: its prefix chosen from the values and named in the header, the
# cells scaled to it), "n" count, "id" rank/tag numbers, "B" bytes, "%" percent, "r" a
# plain number, "t" text
COLUMNS: dict[str, tuple[str, str]] = {
    "name": ("function", "t"), "function": ("function", "t"), "callsite": ("call site", "t"),
    "comm": ("communicator", "t"), "tag": ("tag", "id"), "rank": ("rank", "id"),
    "thread": ("thread", "id"), "host": ("host", "t"), "calls": ("calls", "n"),
    "messages": ("messages", "n"), "time_s": ("time", "s"), "share_%": ("% of MPI", "%"),
    "mean_s": ("mean", "s"), "min_s": ("min", "s"), "median_s": ("median", "s"),
    "max_s": ("max", "s"), "wait_s": ("waiting", "s"), "bytes": ("data (B)", "B"),
    "inclusive_s": ("inclusive", "s"), "exclusive_s": ("exclusive", "s"),
    "total_s": ("total", "s"), "compute_s": ("compute", "s"),
    # soft hyphens: in a half-page table (compare mode at 1024 px) the long words break,
    # hyphenated, where they must (the CSV's headers drop them: assets/export.js)
    "communication_s": (f"com{SHY}mu{SHY}ni{SHY}ca{SHY}tion", "s"),
    "synchronization_s": (f"syn{SHY}chro{SHY}ni{SHY}za{SHY}tion", "s"), "io_s": ("I/O", "s"),
    "descheduled_s": (f"de{SHY}sched{SHY}uled", "s"),
    "transfer_s": ("in flight", "s"),
    "median_transfer_s": ("median transfer", "s"), "p90_transfer_s": ("p90 transfer", "s"),
    "bandwidth_MBps": ("bandwidth", "MB/s"),
    "bucket_lo": ("size from (B)", "B"), "bucket_hi": ("size to (B)", "B"),
    "send_rank": ("sender", "id"), "recv_rank": ("receiver", "id"),
    "late_sender": ("late sender", "s"), "late_receiver": ("late receiver", "s"),
    "wait_at_barrier": ("wait at barrier", "s"), "wait_at_nxn": ("wait at N×N", "s"),
    "late_broadcast": ("late broadcast", "s"), "early_reduce": ("early reduce", "s"),
    "wait_at_fence": ("wait at fence", "s"), "late_post": ("late post", "s"),
    "early_wait": ("early wait", "s"), "lock_contention": ("lock contention", "s"),
    "mpi_s": ("MPI", "s"),
    # compare mode's findings predicted vs measured (compare.findings_frame; short: ten
    # columns fit at 1024 px)
    "kind": ("kind", "t"), "predicted_s": ("predicted", "s"),
    "measured_s": ("measured", "s"), "site_a_s": ("site, A", "s"),
    "site_b_s": ("site, B", "s"), "path_a_s": ("path, A", "s"),
    "path_b_s": ("path, B", "s"), "outcome": ("outcome", "t"),
}
FORMATS = {"n": {"specifier": ",d"}, "id": {"specifier": "d"}, "B": {"specifier": ",d"},
           "%": {"specifier": ".1f"}, "r": {"specifier": ".4~r"}}  # r: decimal, no exponent
SCALED = {"s": ("s", 1.0), "MB/s": ("B/s", 1e6)}  # kind -> (unit, factor to it)
# columns that share one unit where a table has several of them: parts of one total,
# statistics of the same calls, the two sides of a comparison
UNIT_GROUPS: tuple[frozenset[str], ...] = tuple(map(frozenset, (
    ("total_s", "compute_s", "communication_s", "synchronization_s", "io_s",
     "descheduled_s"),
    ("time_s", "wait_s"), ("mean_s", "min_s", "median_s", "max_s"),
    ("inclusive_s", "exclusive_s"), ("median_transfer_s", "p90_transfer_s"),
    ("late_sender", "late_receiver", "wait_at_barrier", "wait_at_nxn", "late_broadcast",
     "early_reduce", "wait_at_fence", "late_post", "early_wait", "lock_contention"),
    ("predicted_s", "measured_s", "site_a_s", "site_b_s", "path_a_s", "path_b_s"))))
Labels = dict[str, tuple[str, str]]


def _unit_group(key: str, keys: Sequence[str], extra: Sequence[frozenset[str]]) -> list[str]:
    """The columns of `keys` that share `key`'s unit: those of the first group holding it
    and another of `keys` (itself alone if none)."""
    for group in (*extra, *UNIT_GROUPS):
        members = [k for k in keys if k in group]
        if key in group and len(members) > 1:
            return members
    return [key]


def _floats(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(np.float64)


def units(df: pd.DataFrame, kinds: Labels,
          shared: Sequence[frozenset[str]] = ()) -> dict[str, numbers.Column]:
    """Each scaled column's unit (numbers.Column), one per group of columns sharing it."""
    out: dict[str, numbers.Column] = {}
    keys = [k for k in df.columns if kinds.get(k, ("", "t"))[1] in SCALED]
    for key in keys:
        if key not in out:
            group = _unit_group(key, keys, shared)
            unit, factor = SCALED[kinds[key][1]]
            values = np.concatenate([_floats(df[k]) for k in group]) * factor
            col = numbers.Column.of(values, unit, lowest=0 if unit != "s" else -3)
            out.update(dict.fromkeys(group, _smallest_shown(col, values)))
    return out


MORE_DECIMALS = 3  # at most, beyond the largest value's


def _smallest_shown(col: numbers.Column, values: np.ndarray) -> numbers.Column:
    """`col` with enough decimals that its smallest non-zero value does not read 0 (a
    300 µs part beside a 1.3 s total: 0.0003, not 0.000), a few more at most."""
    small = np.abs(values[np.isfinite(values) & (values != 0)])
    if not len(small):
        return col
    need = -math.floor(math.log10(float(small.min()) / col.scale))
    return dataclasses.replace(col, decimals=min(max(col.decimals, need),
                                                 col.decimals + MORE_DECIMALS))


def _guess(key: str, values: pd.Series) -> tuple[str, str]:
    """The kind of a column COLUMNS does not name: `*_s` seconds, other numbers counts
    (or plain numbers), the rest text."""
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return key, "t"
    if key.endswith("_s"):
        return key[:-2].replace("_", " "), "s"
    return key.replace("_", " "), "n" if pd.api.types.is_integer_dtype(values) else "r"


def shown(df: pd.DataFrame, labels: Labels | None = None,
          shared: Sequence[frozenset[str]] = ()) -> tuple[list[dict], list[dict]]:
    """A DataTable's rows and columns for `df` (column ids kept): numbers stay numbers (the
    table sorts by value), seconds and rates scaled to one unit per column that the header
    names (`time (ms)`), written with fixed decimals (numbers.Column), never "399µ" nor
    1e-05; `labels` add or override COLUMNS, `shared` adds UNIT_GROUPS. No + on positive
    differences: d3 would write +0.000 and −0.000 where the terminal writes 0.000."""
    kinds = {**COLUMNS, **(labels or {})}
    kinds.update({k: _guess(k, df[k]) for k in df.columns if k not in kinds})
    out = df.copy()
    cols = units(df, kinds, shared)
    columns = []
    for key in df.columns:
        label, kind = kinds[key]
        if kind != "t" and df[key].isna().all() and len(df):
            continue  # nothing measured (descheduled time without the tracer's data)
        c: dict = {"id": key, "name": label}
        if key in cols:
            col = cols[key]
            factor = SCALED[kind][1]
            out[key] = _floats(df[key]) * factor / col.scale
            c.update(name=col.header(label), type="numeric", format={"specifier": col.d3()})
        elif kind != "t":
            c.update(type="numeric", format=FORMATS[kind])
        columns.append(c)
    return out.to_dict("records"), columns


def text_left(columns: list[dict]) -> list[dict]:
    """Text columns read from the left (numbers line up on the right); a host name breaks
    anywhere rather than widen a half-page table."""
    return [{"if": {"column_id": c["id"]}, "textAlign": "left",
             **({"whiteSpace": "normal", "overflowWrap": "anywhere"} if c["id"] == "host"
                else {})}
            for c in columns if c.get("type") != "numeric"]


# headers wrap between words, a little smaller than the cells (a half-page table in
# compare mode fits its half at 1024 px); cells stay one line
HEADER_STYLE = {"fontWeight": "bold", "whiteSpace": "normal", "height": "auto",
                "textAlign": "center", "fontSize": 11, "padding": "2px 3px"}
CELL_STYLE = {"fontFamily": "sans-serif", "fontSize": 12, "padding": "2px 4px"}


def table(df: pd.DataFrame, ident: dict | str, *, selectable: bool = False,
          selected: int = 0, page_size: int = 15) -> dash_table.DataTable:
    """A table of `df` with a CSV export of every row: the values as the table holds them
    (in the unit its header names), the headers as shown; `selectable`: one row can be
    chosen, row `selected` at first."""
    data, columns = shown(df)
    extra = {"row_selectable": "single",
             "selected_rows": [selected] if 0 <= selected < len(df) else []} \
        if selectable else {}
    return dash_table.DataTable(
        id=ident, data=data, columns=columns, sort_action="native",
        page_size=page_size, **EXPORT,
        style_cell=CELL_STYLE, style_cell_conditional=text_left(columns),
        style_header=HEADER_STYLE,
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
