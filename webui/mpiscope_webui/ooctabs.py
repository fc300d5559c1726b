"""The analysis tabs of the out-of-core page (mpiscope_webui.ooc): what the Dask engine
computes rank by rank from the Parquet cache, never holding the trace, shown as the JSON
of `mpiscope analyze --engine dask` has it (one source of truth: that command's JSON).

Out of core the tabs are of the whole run: statistics of the visible window, the
profiles per process, communicator and tag, user regions and the call tree group every
call of the window at once, which needs the trace in memory; those tabs say so in one
line instead of showing nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pandas as pd
from dash import html

from mpiscope_webui import windowstats

NICE = 10  # the analysis runs beside the timeline, below it
TABS = (("Breakdown", "breakdown"), ("Functions", "functions"), ("Messages", "messages"),
        ("Profiles", "profiles"), ("Call tree", "calltree"), ("Findings", "findings"))
SCOPE = ("Statistics of the whole run, all ranks (out of core: the Dask engine's analysis, "
         "as `mpiscope analyze --engine dask` writes it; the tabs do not follow the zoom, "
         "which needs the trace in memory).")
NOT_HERE = {
    "profiles": "Profiles per process, communicator and tag and user regions are not "
                "available out of core (they group every call at once: the trace in memory).",
    "calltree": "The call tree is not available out of core (it groups every call by its "
                "call path: the trace in memory); the call sites with their paths are in "
                "Profiles.",
}


class Results:
    """The analysis of the trace as `mpiscope analyze --engine dask --json` writes it, run
    once in a child process (niced: the timeline's callbacks keep the CPU and the GIL,
    and the analysis' memory is not the server's); `json` once done, else `error`."""

    def __init__(self, trace_dir: Path, start: bool = True) -> None:
        self.trace_dir = trace_dir
        self.json: dict[str, Any] | None = None
        self.error: str | None = None
        self._done = threading.Event()
        if start:
            threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            with tempfile.TemporaryDirectory(prefix="mpiscope-ooc-") as tmp:
                out = Path(tmp) / "analysis.json"
                log = Path(tmp) / "log"
                with log.open("w") as err:
                    proc = subprocess.run(
                        ["nice", "-n", str(NICE), sys.executable, "-m", "mpiscope", "analyze",
                         "--engine", "dask", str(self.trace_dir), "--json", str(out)],
                        stdout=subprocess.DEVNULL, stderr=err, check=False)
                if proc.returncode == 0 and out.is_file():
                    self.json = json.loads(out.read_text())
                else:
                    lines = [x for x in log.read_text(errors="replace").splitlines() if x]
                    self.error = (f"`mpiscope analyze --engine dask` exited "
                                  f"{proc.returncode}" + (f": {lines[-1]}" if lines else ""))
        except (OSError, ValueError) as err:
            self.error = f"{type(err).__name__}: {err}".splitlines()[0]
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()


def _frame(rows: list[dict], drop: tuple[str, ...] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    return df.drop(columns=[c for c in drop if c in df.columns])


def tab(results: Results, name: str) -> list:
    """The contents of one tab (a value of TABS)."""
    if name in NOT_HERE and name != "profiles":
        return [html.Div(NOT_HERE[name], className="muted ooc-note")]
    if not results.done:
        return [html.Div("Analysing out of core (Dask engine, rank by rank)… the tab fills "
                         "in when it is done.", className="muted ooc-running")]
    if results.json is None:
        return [html.Div(f"analysis failed — {results.error}", className="error")]
    j = results.json
    out: list = [html.Div(SCOPE, className="muted scope-text")]

    def table(rows: list[dict], ident: str, drop: tuple[str, ...] = ()):
        return windowstats.table(_frame(rows, drop), {"type": "otable", "name": ident})

    if name == "breakdown":
        out += [table(j["ranks"], "breakdown")]
    elif name == "functions":
        out += [table(j["functions"], "functions")]
    elif name == "messages":
        out += [html.H4("Communication matrix"), table(j["comm_matrix"], "matrix"),
                html.H4("Message sizes"), table(j["message_sizes"], "message-sizes")]
    elif name == "profiles":
        out += [html.Div(NOT_HERE["profiles"], className="muted ooc-note"),
                html.H4("MPI functions per call site"),
                table(j["callsites"], "per-callsite", drop=("callpath",)),
                html.H4("Wait states per rank"), table(j["wait_states_per_rank"], "waits"),
                html.H4("MPI time per thread"), table(j["threads"], "threads")]
    elif name == "findings":
        found = j["findings"]
        out += [html.Ol([html.Li([html.B(f"{f['kind']}: {f['function']} at "
                                         f"{f['callsite'] or '?'}"),
                                  html.Div(f["message"], className="finding-msg")])
                         for f in found], className="findings")
                if found else html.Div("No findings above the noise floor.",
                                       className="muted no-findings")]
    return out
