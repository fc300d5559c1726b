"""`mpiscope study himeno`: unpatched vs patched Himeno at several rank counts, traced,
compared, with a scaling report and an index page."""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UserError

HELP = "run the Himeno study: both variants at 1, 2, 4 ranks, traced and compared"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("workload", choices=["himeno"], help="the study to run")
    p.add_argument("--out", type=Path, default=Path("mpiscope-study"),
                   help="output directory (default: ./mpiscope-study)")
    p.add_argument("--size", default="S", help="Himeno size XS|S|M|L|XL (default: S)")
    p.add_argument("--iterations", type=int, default=200,
                   help="Jacobi iterations per run (default: 200; the original study: 7000)")
    p.add_argument("--ranks", default="1,2,4", help="rank counts (default: 1,2,4)")
    p.add_argument("--allreduce-every", type=int, default=None,
                   help="patched variant: reduce every K iterations (default: only the last)")
    p.add_argument("--repeat", type=int, default=3, metavar="R",
                   help="run each variant R times per rank count, alternating, and keep the "
                   "run with the best MFLOPS for the reports (default: 3)")
    p.add_argument("--cluster", default=None, metavar="NxRATE",
                   help="run on the emulated cluster, e.g. 4x100mbit (needs root)")


def parse_ranks(text: str) -> tuple[int, ...]:
    """`1,2,4` -> (1, 2, 4); anything else is a one-line error (exit code 2)."""
    try:
        ranks = tuple(int(r) for r in text.split(","))
    except ValueError:
        ranks = ()
    if not ranks or min(ranks) < 1:
        raise UserError("study", f"--ranks wants rank counts >= 1 like 1,2,4, not {text!r}")
    return tuple(dict.fromkeys(ranks))  # each rank count once, in the order given


def run(args: argparse.Namespace) -> int:
    from mpiscope.jobs.study import StudyConfig, run_all
    from mpiscope.render import study as pages
    from mpiscope.render import term

    ranks = parse_ranks(args.ranks)
    # checked here, in one line, before any job starts (Himeno checks the rest itself)
    if args.allreduce_every is not None and args.allreduce_every < 1:
        raise UserError("study", f"--allreduce-every wants K >= 1, not {args.allreduce_every}")
    if args.repeat < 1:
        raise UserError("study", f"--repeat wants R >= 1, not {args.repeat}")
    # the pages are written after minutes of runs: a directory we cannot write is
    # refused now, in one line
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise output.cannot_write(args.out, err) from None
    output.check_writable(args.out / "study.json")
    cfg = StudyConfig(out=args.out, size=args.size, iterations=args.iterations, ranks=ranks,
                      allreduce_every=args.allreduce_every, cluster=args.cluster,
                      repeat=args.repeat)
    console = term.console(stderr=True)
    with console.status("running Himeno") as status:
        def progress(run):
            mflops = run.mflops or 0.0
            console.print(f"  {run.ranks} ranks {run.variant:9s} run {run.attempt}/"
                          f"{cfg.repeat} {mflops:9.1f} MFLOPS ({run.wall_s:.1f} s)")
            status.update("running Himeno")
        result = run_all(cfg, progress)
    summary = pages.write(result)
    for n in ranks:
        console.print(pages.ratio_line(summary, n, cfg.repeat))
    console.print(f"reports: {cfg.out / 'index.html'}")
    return 0
