"""Figures for bench/himeno/run from the runs' JSON lines and the analyzer's JSON reports.

  report.py mflops DIR      MFLOPS per run (run-N-VARIANT-R.json), the patched/unpatched
                            ratio per rank count, and whether gosa agrees bitwise
  report.py allreduce DIR   share of run time in MPI_Allreduce (analysis-N-VARIANT.json)
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

VARIANTS = ("unpatched", "patched")


@dataclass
class Runs:
    """Every repeat of one (ranks, variant) configuration."""

    ranks: int
    variant: str
    results: list[dict]

    @property
    def best_mflops(self) -> float:
        return max(r["mflops"] for r in self.results)

    @property
    def median_mflops(self) -> float:
        return statistics.median(r["mflops"] for r in self.results)

    @property
    def gosas(self) -> set[float]:
        return {r["gosa"] for r in self.results}


def load_runs(work: Path) -> dict[tuple[int, str], Runs]:
    runs: dict[tuple[int, str], Runs] = {}
    for path in sorted(work.glob("run-*.json")):
        m = re.fullmatch(r"run-(\d+)-(\w+)-\d+\.json", path.name)
        if not m:
            continue
        key = (int(m[1]), m[2])
        runs.setdefault(key, Runs(key[0], key[1], [])).results.append(json.loads(path.read_text()))
    return runs


def mflops(work: Path) -> int:
    runs = load_runs(work)
    print(f"{'ranks':>5} {'variant':>9} {'grid':>7} {'best MFLOPS':>12} {'median':>10} "
          f"{'elapsed s':>10}  gosa")
    for (n, v), r in sorted(runs.items(), key=lambda kv: (kv[0][0], VARIANTS.index(kv[0][1]))):
        best = max(r.results, key=lambda x: x["mflops"])
        grid = "x".join(map(str, best["process_grid"]))
        print(f"{n:>5} {v:>9} {grid:>7} {r.best_mflops:>12.1f} {r.median_mflops:>10.1f} "
              f"{best['elapsed_s']:>10.3f}  {best['gosa']!r}")
    ok = True
    for n in sorted({n for n, _ in runs}):
        u, p = runs.get((n, "unpatched")), runs.get((n, "patched"))
        if not (u and p):
            continue
        same = u.gosas == p.gosas and len(u.gosas) == 1
        ok &= same
        print(f"ranks {n}: patched/unpatched MFLOPS ratio {p.best_mflops / u.best_mflops:.3f} "
              f"(best), {p.median_mflops / u.median_mflops:.3f} (median); "
              f"gosa {'identical' if same else 'DIFFERS'}")
    return 0 if ok else 1


def allreduce(work: Path) -> int:
    shares: dict[int, dict[str, float]] = defaultdict(dict)
    found = [(int(m[1]), m[2], p) for p in work.glob("analysis-*.json")
             if (m := re.fullmatch(r"analysis-(\d+)-(\w+)\.json", p.name))]
    for n, v, path in sorted(found, key=lambda t: (t[0], VARIANTS.index(t[1]))):
        report = json.loads(path.read_text())
        total = sum(r["total_s"] for r in report["ranks"])
        in_allreduce = sum(f["time_s"] for f in report["functions"]
                           if f["name"] == "MPI_Allreduce")
        calls = sum(f["calls"] for f in report["functions"] if f["name"] == "MPI_Allreduce")
        shares[n][v] = in_allreduce / total if total else float("nan")
        traced = work / f"traced-{n}-{v}.json"
        rate = json.loads(traced.read_text())["mflops"] if traced.is_file() else float("nan")
        line = (f"ranks {n} {v:>9}: MPI_Allreduce {shares[n][v]:6.1%} of run time "
                f"({calls} calls, {in_allreduce:.3f} s of {total:.3f} rank-s); "
                f"traced MFLOPS {rate:.1f}")
        wall = max((r["total_s"] for r in report["ranks"]), default=0.0)
        for f in report["findings"]:
            if f["kind"] == "frequent_collective" and f["function"] == "MPI_Allreduce" and wall:
                line += (f"; analyzer predicts {f['estimated_savings_s']:.3f} s "
                         f"({f['estimated_savings_s'] / wall:.1%}) saved reducing less often")
        print(line)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("mflops", "allreduce"):
        print(__doc__, file=sys.stderr)
        return 2
    return {"mflops": mflops, "allreduce": allreduce}[argv[1]](Path(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
