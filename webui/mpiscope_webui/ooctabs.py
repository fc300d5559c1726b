"""The analysis tabs of the out-of-core page (mpiscope_webui.ooc): what the Dask engine
computes rank by rank from the Parquet cache, never holding the trace, shown as the JSON
of `mpiscope analyze --engine dask` has it (one source of truth: that command's JSON).

Out of core the tabs are of the whole run: statistics of the visible window, user regions
and the call tree group every call of the window at once, which needs the trace in
memory; those tabs say so in one line instead of showing nothing. The MPI function
profiles per process, thread, communicator and tag, and the messages per communicator and
tag are put together from per-rank parts: after the analysis a second child process (`python -m
mpiscope_webui.ooctabs`) computes them rank by rank from the Parquet cache and the wait
files the analysis left (engines.rankprofile: the in-memory profile code run on each
rank's slice, medians across ranks from the ranks' sorted values), shown with the
in-memory tab's titles, columns and formats; per call site is the analysis' JSON (its
call sites named by their call paths).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pandas as pd
from dash import html

from mpiscope.errors import UserError
from mpiscope_webui import windowstats

NICE = 10  # the analysis runs beside the timeline, below it
TABS = (("Breakdown", "breakdown"), ("Functions", "functions"), ("Messages", "messages"),
        ("Profiles", "profiles"), ("Call tree", "calltree"), ("Findings", "findings"))
SCOPE = ("Statistics of the whole run, all ranks (out of core: the Dask engine's analysis, "
         "as `mpiscope analyze --engine dask` writes it; the tabs do not follow the zoom, "
         "which needs the trace in memory).")
# the profiles computed out of core: (title, table name, keys), as windowstats.PROFILES;
# per call site the JSON's (the call sites relabelled by call path, engines.ranktasks)
COMPUTED = tuple(p for p in windowstats.PROFILES if p[1] != "per-callsite")
MESSAGES = "messages-comm-tag"  # the messages per communicator and tag, as in memory
NOT_HERE = {
    "profiles": "User regions are not available out of core (they nest every region of "
                "a rank at once: the trace in memory).",
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
        # table name of COMPUTED -> its profile, once computed, else why not
        self.profiles: dict[str, pd.DataFrame] | None = None
        self.profiles_error: str | None = None
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
                    self.error = _failed("mpiscope analyze --engine dask", proc.returncode,
                                         log)
            if self.json is not None:  # after it: its wait files are there to read
                self._run_profiles()
        except (OSError, ValueError) as err:
            self.error = f"{type(err).__name__}: {err}".splitlines()[0]
        finally:
            self._done.set()

    def _run_profiles(self) -> None:
        """The profiles (COMPUTED), in a child process of their own (niced, as the
        analysis): one Parquet file per table."""
        try:
            with tempfile.TemporaryDirectory(prefix="mpiscope-ooc-profiles-") as tmp:
                log = Path(tmp) / "log"
                with log.open("w") as err:
                    proc = subprocess.run(
                        ["nice", "-n", str(NICE), sys.executable, "-m", "mpiscope_webui.ooctabs",
                         str(self.trace_dir), tmp],
                        stdout=subprocess.DEVNULL, stderr=err, check=False)
                if proc.returncode == 0:
                    self.profiles = {name: pd.read_parquet(Path(tmp) / f"{name}.parquet")
                                     for name in [n for _t, n, _b in COMPUTED] + [MESSAGES]}
                else:
                    self.profiles_error = _failed("the profiles", proc.returncode, log)
        except (OSError, ValueError) as err:
            self.profiles_error = f"{type(err).__name__}: {err}".splitlines()[0]

    @property
    def done(self) -> bool:
        return self._done.is_set()


def _failed(what: str, code: int, log: Path) -> str:
    """One line: what exited how, and the last line it wrote."""
    lines = [x for x in log.read_text(errors="replace").splitlines() if x]
    return f"`{what}` exited {code}" + (f": {lines[-1]}" if lines else "")


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
                *_profiles(results, table(j["callsites"], "per-callsite", drop=("callpath",))),
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


def _profiles(results: Results, per_callsite) -> list:
    """The profiles in the in-memory tab's order, titles and formats (per thread only
    where a rank has more than one thread calling MPI; per call site: `per_callsite`),
    or why they are missing, in one line."""
    if results.profiles is None:
        return [html.Div(f"profiles failed — {results.profiles_error}", className="error"),
                html.H4("MPI functions per call site"), per_callsite]
    out: list = []
    for title, name, by in windowstats.PROFILES:
        if name == "per-callsite":
            out += [html.H4(f"MPI functions {title}"), per_callsite]
            continue
        df = results.profiles[name]
        if "thread" in by and not (df["thread"].to_numpy() != 0).any():
            continue  # one thread per rank: the same as per process
        out += [html.H4(f"MPI functions {title}"),
                windowstats.table(df, {"type": "otable", "name": name})]
    return out + [html.H4("Messages per communicator and tag"),
                  windowstats.table(results.profiles[MESSAGES],
                                    {"type": "otable", "name": MESSAGES})]


def main(argv: list[str] | None = None) -> int:
    """`python -m mpiscope_webui.ooctabs TRACE_DIR OUT_DIR`: the profiles (COMPUTED and
    MESSAGES) of the trace, OUT_DIR/<table name>.parquet each (Results runs it)."""
    from mpiscope.engines import rankprofile

    ap = argparse.ArgumentParser(prog="python -m mpiscope_webui.ooctabs")
    ap.add_argument("trace_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    args = ap.parse_args(argv)
    try:
        got = rankprofile.from_cache(args.trace_dir,
                                     [*(by for _t, _n, by in COMPUTED), rankprofile.MESSAGES])
    except UserError as err:
        print(err.one_line(), file=sys.stderr)  # the line the tab shows
        return 1
    for _title, name, by in COMPUTED:
        got[by].to_parquet(args.out_dir / f"{name}.parquet", index=False)
    got[rankprofile.MESSAGES].to_parquet(args.out_dir / f"{MESSAGES}.parquet", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
