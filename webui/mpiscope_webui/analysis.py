"""What the analysis tabs show of one trace, read from its analysis session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from mpiscope.analysis.findings import Finding
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.stats import ProtocolSwitch
from mpiscope.archive.decode import kind_of
from mpiscope.archive.trace import Trace
from mpiscope.render.runwarnings import Shown, shown

OCCURRENCES_SHOWN = 5  # a finding zooms to its first few occurrences (instances)
T = TypeVar("T")


@dataclass
class FindingView:
    kind: str
    function: str
    callsite: str
    message: str
    time_s: float
    estimated_savings_s: float
    calls: np.ndarray  # call ids of its occurrences
    window: tuple[float, float] | None  # seconds (trace time) of the first occurrences
    callpath: list[str] = field(default_factory=list)  # frames, innermost first
    minor_reason: str = ""  # why it is below the noise floor ("": a listed finding)
    saving_stated: bool = True  # False: no saving replayed (estimated_savings_s is 0)
    # on an oversubscribed run, what its JSON message adds ("": not marked `oversubscribed`)
    oversubscribed_note: str = ""


@dataclass
class Panels:
    """The session's results the tabs draw; a result that failed is empty, and its error
    is listed instead (one analysis failing must not take the others down with it)."""

    breakdown: pd.DataFrame  # rank, host, total_s, compute_s, communication_s, ...
    functions: pd.DataFrame  # name, calls, time_s, mean_s, max_s, bytes
    message_sizes: pd.DataFrame
    comm_matrix: pd.DataFrame
    findings: list[FindingView]  # the listed ones, then those below the noise floor
    errors: list[str] = field(default_factory=list)
    protocol_switches: list[ProtocolSwitch] = field(default_factory=list)
    noise_rule: str = ""  # what the noise floor is (findings.NoiseFloor.rule)

    @classmethod
    def of(cls, session: Analysis) -> Panels:
        errors: list[str] = []

        def attempt(what: str, get: Callable[[], T], default: T) -> T:
            try:
                return get()
            except Exception as err:  # noqa: BLE001 - shown to the user, one line
                errors.append(f"{what}: {type(err).__name__}: {err}".splitlines()[0])
                return default

        empty = pd.DataFrame()
        # the breakdown and the findings need the wait states: without them, only the
        # wait states' error is listed
        waits = attempt("wait states", lambda: session.wait_states, None) is not None
        bd = attempt("breakdown", lambda: session.ranks, empty) if waits else empty
        fn = attempt("functions", lambda: session.functions, empty)
        sizes = attempt("message sizes", lambda: session.message_sizes, empty)
        switches = attempt("protocol switch", lambda: session.protocol_switches, [])
        matrix = attempt("communication matrix", lambda: session.comm_matrix, empty)
        found = attempt("findings", lambda: session.findings, []) if waits else []
        minor = attempt("findings", lambda: session.minor_findings, []) if waits else []
        rule = attempt("noise floor", lambda: session.noise_floor.rule, "") if minor else ""
        views = [finding_view(session.trace, f, session.oversubscribed_note(f))
                 for f in [*found, *minor]]
        return cls(bd, fn, sizes, matrix, views, errors, switches, rule)


@dataclass(frozen=True)
class Totals:
    """The run's lengths the page states side by side (issue: a header of 1.36 s, ranks of
    0.97 s and a critical path of 0.98 s, never explained), each read off a result the
    page shows: the JSON's `meta.duration_s`, the breakdown's `total_s`, `critical_path`."""

    run_s: float  # trace start to its last event
    rank_s: tuple[float, float]  # the least and largest rank's measured interval
    init: str | None  # MPI_Init(_thread) where the trace has it: the interval starts after it
    finalize: str | None  # MPI_Finalize where it has it: the interval ends before it
    path_s: float
    path_from_s: float  # trace time
    path_to_s: float

    @classmethod
    def of(cls, session: Analysis) -> Totals:
        total = session.ranks["total_s"].astype(float)
        path = session.critical_path
        names = [str(n) for n in session.functions["name"]]
        return cls(session.overview.meta.duration_ns / 1e9,
                   (float(total.min()), float(total.max())), _named(names, "init"),
                   _named(names, "finalize"), path.length_ns / 1e9, path.begin_ns / 1e9,
                   path.end_ns / 1e9)

    @classmethod
    def of_json(cls, doc: dict[str, Any]) -> Totals:
        """The same from `mpiscope analyze --json` (the out-of-core page's source)."""
        total = [float(r["total_s"]) for r in doc["ranks"]]
        path = doc["critical_path"]
        names = [str(f["name"]) for f in doc["functions"]]
        return cls(float(doc["meta"]["duration_s"]), (min(total), max(total)),
                   _named(names, "init"), _named(names, "finalize"), float(path["length_s"]),
                   float(path["begin_s"]), float(path["end_s"]))


def _named(functions: list[str], kind: str) -> str | None:
    """The function of a call kind ("init", "finalize") the trace has, if any."""
    return next((n for n in sorted(functions) if kind_of(n) == kind), None)


@dataclass(frozen=True)
class RunNotes:
    """What the page says above a run's timeline: the analysis session's warnings (as the
    reports word them) and its totals; None where that part of the analysis failed (the
    tabs list the error)."""

    warnings: list[Shown]
    totals: Totals | None

    @classmethod
    def of(cls, session: Analysis) -> RunNotes:
        try:
            warnings = shown(session.warnings, session.overview.meta.truncated_ranks)
        except Exception:  # noqa: BLE001 - the analysis tabs list the error
            # an analysis behind the warnings failed (e.g. the wait states): the reader's
            # own warnings and the ranks cut short still stand, when trust is least
            try:
                meta = session.overview.meta
                warnings = ([Shown(str(w), False) for w in meta.warnings]
                            + shown(None, meta.truncated_ranks))
            except Exception:  # noqa: BLE001 - as above
                warnings = []
        try:
            totals = Totals.of(session)
        except Exception:  # noqa: BLE001 - as above
            totals = None
        return cls(warnings, totals)

    @classmethod
    def of_json(cls, doc: dict[str, Any]) -> RunNotes:
        try:
            totals = Totals.of_json(doc)
        except (KeyError, TypeError, ValueError):  # a JSON without them: no line
            totals = None
        return cls(shown(doc.get("warnings"), doc.get("meta", {}).get("truncated_ranks", [])),
                   totals)


def _matches(column: pd.Series, value: str) -> np.ndarray:
    """column == value for a categorical column, on its codes (comparing 3 M strings took
    a second per finding)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        cats = column.cat.categories.astype(str)
        hit = np.flatnonzero(cats == value)
        return np.isin(column.cat.codes.to_numpy(), hit)
    return column.astype(str).to_numpy() == value


def finding_view(trace: Trace, f: Finding, oversubscribed_note: str = "") -> FindingView:
    c = trace.calls
    sel = _matches(c["function"], f.function)
    if f.group or f.callsite:  # what the session grouped the calls by
        sel &= _matches(c["callsite"], f.group or f.callsite)
    rows = np.flatnonzero(sel)
    start = c["start"].to_numpy(np.int64)[rows]
    order = np.argsort(start, kind="stable")
    rows, start = rows[order], start[order]
    window = None
    if len(rows):
        ranks = max(len(np.unique(c["rank"].to_numpy()[rows])), 1)
        first = slice(0, OCCURRENCES_SHOWN * ranks)
        lo = int(start[first].min())
        hi = int(c["end"].to_numpy(np.int64)[rows[first]].max())
        pad = max((hi - lo) // 10, 1000)
        window = ((lo - pad) / 1e9, (hi + pad) / 1e9)
    return FindingView(f.kind, f.function, f.callsite, f.message, float(f.time_s),
                       float(f.estimated_savings_s), c["call"].to_numpy(np.int64)[rows], window,
                       list(f.callpath), str(f.evidence.get("minor_reason", "")),
                       bool(f.evidence.get("saving_replayed", True)),
                       oversubscribed_note.strip())
