"""Traced ping-pong sweeps (1 B .. 1 MiB) under several Open MPI transport settings: per
setting and run, the median transfer time per size and the eager/rendezvous switch that
`mpiscope.analysis.stats.protocol_switches` finds, or "no switch visible".

Whether a switch shows is a property of the machine (its MPI library, kernel, CPUs and
their load), not of mpiscope: Open MPI's shared-memory BTL copies large messages once
through CMA, which can be as fast per byte as the eager copy, leaving no step at all.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from mpiscope.analysis import stats
from mpiscope.archive import reader
from mpiscope.render.summary import size_text

# name -> Open MPI MCA settings (environment); the eager limits are Open MPI 4.1 defaults
SETTINGS: dict[str, dict[str, str]] = {
    "vader (default: CMA single copy, eager 4 KiB)": {"OMPI_MCA_btl": "self,vader"},
    "vader, single copy off": {"OMPI_MCA_btl": "self,vader",
                               "OMPI_MCA_btl_vader_single_copy_mechanism": "none"},
    "vader, eager forced to 16 KiB": {"OMPI_MCA_btl": "self,vader",
                                      "OMPI_MCA_btl_vader_eager_limit": "16384"},
    "vader, single copy off, eager 16 KiB": {
        "OMPI_MCA_btl": "self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        "OMPI_MCA_btl_vader_eager_limit": "16384"},
    "tcp over loopback (eager 64 KiB)": {"OMPI_MCA_btl": "self,tcp",
                                         "OMPI_MCA_btl_tcp_if_include": "lo"},
}


def run(exe: Path, out: Path, mca: dict[str, str], reps: int) -> Path:
    lib = subprocess.run([sys.executable, "-m", "mpiscope", "lib"], check=True,
                         capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=lib, MPISCOPE_OUT=str(out), **mca,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(["mpirun", "-np", "2", str(exe), "1", str(1 << 20), str(reps)],
                   check=True, env=env, capture_output=True, timeout=300)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--exe", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=40)
    args = ap.parse_args()
    for i, (name, mca) in enumerate(SETTINGS.items()):
        print(f"\n== {name}: {' '.join(f'{k}={v}' for k, v in mca.items())}")
        rows: dict[int, list[float]] = {}
        found: list[str] = []
        for r in range(args.runs):
            trace = reader.load(run(args.exe, args.out / f"s{i}-run{r}", mca, args.reps),
                                use_cache=False)
            for b in stats.message_sizes(trace).itertuples():
                rows.setdefault(int(b.bucket_lo), []).append(b.median_transfer_s * 1e6)
            sw = stats.protocol_switches(trace)
            found.append(", ".join(f"{s.path} at {size_text(s.bytes)} ({s.jump:.2f}x the "
                                   f"trend)" for s in sw) or "no switch visible")
        print(f"{'size':>9}  " + "  ".join(f"run {r} (us)" for r in range(args.runs)))
        for lo, us in sorted(rows.items()):
            print(f"{size_text(lo):>9}  " + "  ".join(f"{u:10.2f}" for u in us))
        for r, text in enumerate(found):
            print(f"run {r}: {text}")


if __name__ == "__main__":
    main()
