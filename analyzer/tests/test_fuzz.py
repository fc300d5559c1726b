"""A seeded mutation campaign against `mpiscope analyze` (issue 29).

Each case is a copy of a small real trace damaged the ways a disk, a transfer or a hostile
hand damages one (mpiscope_testing.otf2mutate: bit flips, random bytes and truncation of
the anchor, definition, event and local definition files; huge event counts, refs and
fields in the definitions; events' fields made huge; timestamps moved), analyzed as a user
runs it, `mpiscope analyze DIR --json OUT --no-cache`, in a process of its own
(mpiscope_testing.forkrun: address space limited as `prlimit --as` limits it, killed at a
timeout). Every case must end one of two ways:
- exit 0 with a consistent JSON (mpiscope_testing.jsonchecks: the parts of each rank add up
  to its total within 1%, no time, byte count or count negative, infinite or beyond the
  run), or
- exit 2 with exactly one line on stderr;
never a hang, a signal, a traceback or more memory than the limit.

The cache cases damage the Parquet cache of an undamaged trace instead (its manifest's
fields, or its files' bytes) and analyze with the cache: a cache edited as a disk or a
hand edits it is rebuilt (the JSON is the undamaged one's); one whose manifest a forger
re-signed is used only if it is consistent, and never crashes.

MPISCOPE_FUZZ_CASES (default 160 trace cases, a quarter as many cache cases) and
MPISCOPE_FUZZ_SEED (default 0) change the campaign. A failing case is named by its seed
and what was done; its files stay in the test's tmp directory.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from mpiscope.archive import cache
from mpiscope_testing import otf2mutate
from mpiscope_testing.enginetraces import threads_trace
from mpiscope_testing.forkrun import ForkRunner, Result
from mpiscope_testing.hostile import PLAIN, hostile_example
from mpiscope_testing.jsonchecks import problems
from mpiscope_testing.tracegen import copy_trace

CASES = int(os.environ.get("MPISCOPE_FUZZ_CASES", "160"))
SEED = int(os.environ.get("MPISCOPE_FUZZ_SEED", "0"))
MEMORY = 2 << 30  # address space of each analysis: a small trace needs a fraction of it
TIMEOUT = 90  # s: a hang, not a slow machine
SERVERS = 2  # one per core

# Seeds of the first campaign (base "synth", one mutation) that found bugs, kept as
# regression cases: the damage each did and what it gave before the fix.
REGRESSIONS = {
    185: "random bytes in 0.evt: negative compute_s of an iteration",
    189: "a timestamp moved forward within the trace: MPI time of 1 s in a 3 ms run",
    204: "a timestamp moved to 0: MPI time beyond the run",
    205: "a timestamp moved beyond the trace: durations of 2.9 s in a 3 ms run",
    210: "a timestamp before the trace's start: negative synchronization_s and io_s",
    212: "a timestamp 4.5e18 ns late: mpi_s of -4.5e9 s",
    222: "random bytes in 1.evt: negative synchronization_s, function time",
    226: "a timestamp of 2^64 - 1: MPI time of 1 s in a 3 ms run",
    231: "bit flips in 0.evt: mpi_s of -4.5e6 s",
    239: "random bytes in 1.evt: negative synchronization_s",
    244: "a timestamp moved forward: negative MPI time",
    247: "a timestamp moved beyond the trace: MPI time beyond the run",
    248: "a timestamp moved back before the trace: negative parts",
}


@pytest.fixture(scope="module")
def bases(synth_trace, two_rank_trace: Path, tmp_path_factory) -> dict[str, Path]:
    """Small real traces of each kind the reader takes: the synthetic solver (mpiscope's
    format, every rank's loop), the hand-made two-rank trace (non-blocking messages,
    collectives), one with user regions and communicators, one of Score-P's conventions
    with two threads per rank."""
    d = tmp_path_factory.mktemp("fuzz-bases")
    return {"synth": synth_trace(4, 2000), "two_rank": two_rank_trace,
            "regions": hostile_example(PLAIN).write(d / "regions"),
            "threads": threads_trace(d / "threads")}


@pytest.fixture(scope="module")
def runners() -> list[ForkRunner]:
    servers = [ForkRunner().__enter__() for _ in range(SERVERS)]
    yield servers
    for s in servers:
        s.__exit__(None, None, None)


def verdict(r: Result, out: Path) -> str | None:
    """What is wrong with how a case ended, None if nothing."""
    if r.timed_out:
        return f"hung: killed after {TIMEOUT} s"
    if r.code is None:
        return f"killed by signal {r.signal}"
    if "Traceback" in r.stderr:
        return "traceback: " + r.stderr.strip().splitlines()[-1]
    if r.code == 2:
        lines = r.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("mpiscope: "):
            return f"exit 2 with {len(lines)} stderr lines: {lines[:3]}"
        return None
    if r.code != 0:
        return f"exit {r.code}: {r.stderr.strip()[-300:]}"
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError) as err:
        return f"exit 0 without a JSON ({err})"
    found = problems(doc)
    return f"inconsistent JSON: {found[:3]}" if found else None


@dataclass
class Case:
    name: str
    run: Callable[[ForkRunner, Path], str | None]  # the problem, None if none


def campaign(cases: list[Case], runners: list[ForkRunner], tmp: Path) -> list[str]:
    """Run the cases on the fork servers side by side; the failures, one line each."""
    def one(i: int) -> str | None:
        case = cases[i]
        work = tmp / case.name
        work.mkdir(parents=True)
        problem = case.run(runners[i % len(runners)], work)
        if problem is None:
            shutil.rmtree(work, ignore_errors=True)
            return None
        return f"{case.name}: {problem} (files in {work})"

    by_server = [list(range(s, len(cases), len(runners))) for s in range(len(runners))]
    with ThreadPoolExecutor(len(runners)) as pool:
        done = pool.map(lambda ids: [one(i) for i in ids], by_server)
    return [p for batch in done for p in batch if p]


def damaged(base: Path, seed: int, mutations: int | None = None) -> Case:
    """A copy of `base` damaged by `mutations` seeded mutations (1 to 3 if None)."""
    def run(runner: ForkRunner, work: Path) -> str | None:
        rng = random.Random(seed)
        trace = copy_trace(base, work / "t")
        n = mutations if mutations is not None else rng.choice((1, 1, 1, 2, 3))
        did = [otf2mutate.mutate(trace, rng) for _ in range(n)]
        out = work / "out.json"
        r = runner(["analyze", str(trace), "--json", str(out), "--no-cache"], work,
                   timeout=TIMEOUT, memory=MEMORY)
        problem = verdict(r, out)
        return f"{problem} after {'; '.join(did)}" if problem else None
    return Case(f"{base.name}-seed{seed}", run)


@pytest.mark.parametrize("seed", sorted(REGRESSIONS))
def test_regression_seeds(seed: int, bases, runners, tmp_path: Path) -> None:
    """The first campaign's findings (REGRESSIONS), each its own case."""
    assert campaign([damaged(bases["synth"], seed, mutations=1)], runners, tmp_path) == []


def test_damaged_traces_end_in_a_result_or_one_line(bases, runners, tmp_path: Path) -> None:
    names = sorted(bases)
    cases = [damaged(bases[names[i % len(names)]], SEED * 1_000_003 + i) for i in range(CASES)]
    failures = campaign(cases, runners, tmp_path)
    assert failures == [], f"{len(failures)} of {CASES} cases failed:\n" + "\n".join(failures)


# ---------------------------------------------------------------- the cache
def _paths(x: object, at: tuple = ()) -> list[tuple]:
    """Every path to a value in a JSON document."""
    if isinstance(x, dict):
        return [at] + [p for k, v in x.items() for p in _paths(v, (*at, k))]
    if isinstance(x, list):
        return [at] + [p for i, v in enumerate(x) for p in _paths(v, (*at, i))]
    return [at]


WEIRD = [-1, 0, 1 << 63, 10**12, 2.5, "x", "int64", "category", None, [], {}, [[0, 10**9]],
         True]


def edit_manifest(path: Path, rng: random.Random, sign: bool) -> str:
    man = json.loads(path.read_text())
    where = rng.choice([p for p in _paths(man) if p and p[0] != "self"])
    parent = man
    for k in where[:-1]:
        parent = parent[k]
    value = rng.choice(WEIRD)
    if rng.random() < 0.15:
        del parent[where[-1]]
        what = f"deleted {where}"
    else:
        parent[where[-1]] = value
        what = f"{where} = {value!r}"
    if sign:
        man["self"] = cache._self_hash(man)
    path.write_text(json.dumps(man))
    return ("forged " if sign else "") + what


def damage_cache(d: Path, rng: random.Random) -> tuple[str, bool]:
    """One damage to the cache in `d`; (what, whether the manifest was re-signed)."""
    files = sorted(f for f in d.rglob("*.parquet"))
    kind = rng.choice(["edit", "edit", "forge", "forge", "flip", "truncate", "swap"])
    if kind in ("edit", "forge"):
        return edit_manifest(d / "manifest.json", rng, kind == "forge"), kind == "forge"
    f = rng.choice(files)
    data = bytearray(f.read_bytes())
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        data = data[:rng.randrange(len(data))]
    else:
        data = bytearray(rng.choice(files).read_bytes())
    f.write_bytes(bytes(data))
    return f"{kind} {f.relative_to(d)}", False


def cache_case(base: Path, seed: int) -> Case:
    def run(runner: ForkRunner, work: Path) -> str | None:
        rng = random.Random(seed)
        trace = copy_trace(base, work / "t")
        first, again = work / "first.json", work / "again.json"
        argv = ["analyze", str(trace), "--json"]
        r = runner([*argv, str(first)], work, timeout=TIMEOUT, memory=MEMORY)
        problem = verdict(r, first)
        if problem or r.code != 0:
            return f"the undamaged trace: {problem or r.stderr}"
        what, forged = damage_cache(trace / cache.CACHE_NAME, rng)
        r = runner([*argv, str(again)], work, timeout=TIMEOUT, memory=MEMORY)
        problem = verdict(r, again)
        if problem is None and r.code != 0:
            problem = f"exit {r.code}: {r.stderr.strip()}"
        if problem is None and not forged:
            a, b = (json.loads(p.read_text()) for p in (first, again))
            if any(a[k] != b[k] for k in ("ranks", "functions", "wait_states", "messages",
                                          "warnings", "meta")):
                problem = "a damaged cache was used: the JSON differs"
        return f"{problem} after {what}" if problem else None
    return Case(f"cache-{base.name}-seed{seed}", run)


def test_damaged_caches_are_rebuilt_or_consistent(bases, runners, tmp_path: Path) -> None:
    names = sorted(bases)
    n = max(CASES // 4, 1)
    cases = [cache_case(bases[names[i % len(names)]], SEED * 1_000_003 + 500_000 + i)
             for i in range(n)]
    failures = campaign(cases, runners, tmp_path)
    assert failures == [], f"{len(failures)} of {n} cases failed:\n" + "\n".join(failures)
