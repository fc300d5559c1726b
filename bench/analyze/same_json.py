"""Is `mpiscope analyze --json` unchanged by a change? The JSON of a base revision's
analyzer against this tree's, on a few traces of each kind (made once in --out, kept):
synthetic (mpiscope-synth), a hand-made two-thread trace, real traced runs (Himeno XS on
4 ranks, the untrue-case programs: RMA fence, non-blocking all-to-all, MPI-IO) and the
Score-P ping-pong if present. Prints each difference (JSON path, base value, this tree's
value); exits 1 if any.

    python3 bench/analyze/same_json.py --base main [--engine pandas] [--out DIR]

The base's analyzer is `git archive BASE analyzer` unpacked under --out; each side runs
as `python -m mpiscope analyze TRACE --no-cache --json OUT` with its own analyzer first
on the import path (ahead of an editable install's import hook too). The JSON holds no
timing of the analysis itself: every field must be equal, except --ignore (dotted
paths, e.g. meta.trace).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "testing"))
sys.path.insert(0, str(REPO / "analyzer"))

# runs mpiscope from the analyzer dir argv[1], whatever import hooks are installed
RUN = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "ScikitBuild" not in type(f).__name__]
sys.path.insert(0, sys.argv.pop(1))
sys.argv[0] = "mpiscope"
runpy.run_module("mpiscope", run_name="__main__")
"""


def traces(d: Path) -> dict[str, Path]:
    from mpiscope_testing import enginetraces, scenarios

    out: dict[str, Path] = {}
    made = d / "traces"
    made.mkdir(parents=True, exist_ok=True)

    def once(name: str, make: Any) -> None:
        p = made / name
        stamp = made / f"{name}.path"
        if not stamp.is_file():
            shutil.rmtree(p, ignore_errors=True)
            p.mkdir(parents=True)
            stamp.write_text(str(make(p)))
        out[name] = Path(stamp.read_text())

    once("synth-64x200k", lambda p: enginetraces.synth(p / "t", 64, 200_000))
    once("synth-8x40k", lambda p: enginetraces.synth(p / "t", 8, 40_000))
    once("threads", lambda p: enginetraces.threads_trace(p / "t"))
    once("himeno", lambda p: scenarios.traced_himeno(4, ["--size", "XS", "--iterations",
                                                          "20"], p))
    once("fence", lambda p: scenarios.traced_run("untrue", 3, ["fence"], p))
    once("ialltoall", lambda p: scenarios.traced_run("untrue", 3, ["ialltoall"], p))
    once("io", lambda p: scenarios.traced_run("untrue", 2, ["io", str(p / "io.dat")], p))
    if (scenarios.SCOREP_PING_PONG / "traces.otf2").is_file():
        out["scorep"] = scenarios.SCOREP_PING_PONG
    return out


def analyze(src: Path, trace: Path, out: Path, engine: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", RUN, str(src), "analyze", str(trace),
                           "--no-cache", "--engine", engine, "--json", str(out)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{src}: analyze {trace}: {proc.stderr.strip()[-1500:]}")
    return json.loads(out.read_text())


def diff(a: Any, b: Any, path: str, ignore: set[str], out: list[str]) -> None:
    if path.lstrip(".") in ignore:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'this tree' if k in b else 'the base'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", ignore, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items in the base, {len(b)} here")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            diff(x, y, f"{path}[{i}]", ignore, out)
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: {a!r} (base) != {b!r}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="main", help="git revision to compare with")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "same-json")
    ap.add_argument("--engine", default="pandas", choices=("pandas", "dask"))
    ap.add_argument("--ignore", nargs="*", default=["meta.trace"])
    a = ap.parse_args()
    base_src = a.out / "base"
    shutil.rmtree(base_src, ignore_errors=True)
    base_src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", a.base, "analyzer"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(base_src)], input=archive, check=True)
    os.environ.setdefault("MPISCOPE_BUILD_DIR", str(REPO / "build"))
    bad = 0
    for name, trace in traces(a.out).items():
        old = analyze(base_src / "analyzer", trace, a.out / f"{name}.base.json", a.engine)
        new = analyze(REPO / "analyzer", trace, a.out / f"{name}.new.json", a.engine)
        found: list[str] = []
        diff(old, new, "", set(a.ignore), found)
        print(f"{name:16} {'same' if not found else f'{len(found)} difference(s)'} "
              f"({len(old.get('findings', []))} findings)")
        for line in found[:20]:
            print(f"    {line}")
        bad += bool(found)
    print(f"{'all equal' if not bad else f'{bad} trace(s) differ'} (base {a.base})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
