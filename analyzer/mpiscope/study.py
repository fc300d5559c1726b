"""The Himeno study: unpatched vs patched at several rank counts, traced and compared.

Data flows one way: run each (ranks, variant) traced -> analyze each trace ->
comparison report per rank count -> scaling report -> index page.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mpiscope import fom, launch
from mpiscope.commands.run import traced_env
from mpiscope.errors import UserError
from mpiscope.paths import REPO_ROOT

HIMENO = REPO_ROOT / "workloads" / "himeno" / "himeno"
VARIANTS = ("unpatched", "patched")


def run_dir_name(ranks: int, variant: str) -> str:
    return f"himeno-{ranks}-{variant}"


@dataclass(frozen=True)
class StudyConfig:
    out: Path
    size: str = "S"
    iterations: int = 200
    ranks: tuple[int, ...] = (1, 2, 4)
    allreduce_every: int | None = None
    cluster: str | None = None
    binary: Path = HIMENO
    timeout_s: float = 900.0


@dataclass
class RunResult:
    ranks: int
    variant: str
    trace_dir: Path
    returncode: int
    wall_s: float
    figures: dict | None = None


@dataclass
class StudyResult:
    config: StudyConfig
    runs: list[RunResult] = field(default_factory=list)

    def run(self, ranks: int, variant: str) -> RunResult:
        return next(r for r in self.runs if r.ranks == ranks and r.variant == variant)


def mpirun_command(cfg: StudyConfig, ranks: int, variant: str) -> list[str]:
    """The launcher line for one run; the cluster mode places ranks on emulated nodes."""
    args = [str(cfg.binary), "--size", cfg.size, "--iterations", str(cfg.iterations),
            "--variant", variant]
    if variant == "patched" and cfg.allreduce_every:
        args += ["--allreduce-every", str(cfg.allreduce_every)]
    if cfg.cluster:
        from mpiscope import cluster

        return cluster.mpirun_prefix(ranks) + args
    return launch.mpirun(ranks) + args


def run_one(cfg: StudyConfig, ranks: int, variant: str) -> RunResult:
    trace_dir = cfg.out / run_dir_name(ranks, variant)
    if trace_dir.exists():
        subprocess.run(["rm", "-rf", str(trace_dir)], check=True)
    cmd = mpirun_command(cfg, ranks, variant)
    env = traced_env(trace_dir, "openmpi")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=cfg.timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(shlex.join(cmd), f"timed out after {cfg.timeout_s:.0f} s") from None
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(shlex.join(cmd), f"exit code {proc.returncode}: {last}")
    trace_dir.mkdir(parents=True, exist_ok=True)
    (trace_dir / fom.OUTPUT_FILE).write_text(proc.stdout)
    return RunResult(ranks, variant, trace_dir, proc.returncode, wall,
                     fom.last_json_line(proc.stdout))


def run_all(cfg: StudyConfig, on_run: Callable[[RunResult], None] | None = None) -> StudyResult:
    if not cfg.binary.is_file():
        raise UserError(str(cfg.binary), "Himeno binary not built (run `make build`)")
    cfg.out.mkdir(parents=True, exist_ok=True)
    brought_up = None
    if cfg.cluster:  # the emulated Beowulf cluster the study ran on (needs root)
        from mpiscope import cluster

        spec = cluster.parse_spec(cfg.cluster)
        if cluster.ensure_up(spec).created:  # ours to remove; a cluster already up stays
            brought_up = spec.prefix
    result = StudyResult(cfg)
    try:
        for ranks in cfg.ranks:
            for variant in VARIANTS:
                run = run_one(cfg, ranks, variant)
                result.runs.append(run)
                if on_run:
                    on_run(run)
    finally:
        if brought_up is not None:
            cluster.down(brought_up)
    return result
