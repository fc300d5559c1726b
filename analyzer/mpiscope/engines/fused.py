"""Several analyses' passes over the ranks, run as one pass where they can.

    fused.run_together(tasks.run, [lambda run: rankstats.compute_ranks(run), ...])

Each analysis is written as passes `run(fn)` over every rank's slice (`ranktasks`). On a
trace whose slices a worker cannot keep (3x10^8 events: each pass rebuilt every slice from
the Parquet cache, 75-220 s a pass), independent analyses that each make a pass pay for
the slices again and again. Here each analysis runs in a thread of its own with a runner
that waits: once every analysis still running waits in `run`, their plain passes with the
same `waits` go to the cluster as one task per rank calling each function on the one slice
(`_Fused`), and each analysis gets its own results back, as from its own pass. Passes that
merge on the workers or carry per-rank arguments (`slices.Reduced`, `slices.PerRank`) run
on their own in the same round. An analysis that raises gets its error, the others go on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mpiscope.engines import slices
from mpiscope.engines.slices import RankSlice

Runner = Callable[..., list]  # run(fn, *, waits=True) -> [fn(slice) for every rank]


@dataclass(frozen=True)
class _Raised:
    """A function's error on one rank, sent back in place of its result."""

    error: Exception


@dataclass(frozen=True)
class _Fused:
    """Each function on the same slice; one failing does not stop the others."""

    fns: tuple[Callable[[RankSlice], Any], ...]

    def __call__(self, s: RankSlice) -> list:
        out: list = []
        for fn in self.fns:
            try:
                out.append(fn(s))
            except Exception as err:  # noqa: BLE001 - returned to the analysis that asked
                out.append(_Raised(err))
        return out


@dataclass(eq=False)
class _Request:
    fn: Callable[[RankSlice], Any]
    waits: bool
    result: list | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass(eq=False)
class _Rounds:
    run: Runner
    cond: threading.Condition = field(default_factory=threading.Condition)
    pending: list[_Request] = field(default_factory=list)
    active: int = 0

    def runner(self, fn: Callable[[RankSlice], Any], *, waits: bool = True) -> list:
        """The `run` an analysis gets: blocks until its pass has run with the others."""
        req = _Request(fn, waits)
        with self.cond:
            self.pending.append(req)
            self.cond.notify_all()
            self.cond.wait_for(lambda: req.done)
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def job(self, fn: Callable[[Runner], None], errors: list[BaseException]) -> None:
        try:
            fn(self.runner)
        except BaseException as err:  # noqa: BLE001 - raised by run_together
            errors.append(err)
        finally:
            with self.cond:
                self.active -= 1
                self.cond.notify_all()

    def next_round(self) -> list[_Request]:
        """The passes asked for once every analysis still running waits (none: all done)."""
        with self.cond:
            self.cond.wait_for(lambda: self.active == 0 or len(self.pending) >= self.active)
            taken, self.pending = self.pending, []
            return taken

    def finish(self, reqs: list[_Request]) -> None:
        with self.cond:
            for r in reqs:
                r.done = True
            self.cond.notify_all()

    def execute(self, reqs: list[_Request]) -> None:
        plain: dict[bool, list[_Request]] = {}
        for r in reqs:
            if isinstance(r.fn, (slices.Reduced, slices.PerRank)):
                _alone(self.run, r)
            else:
                plain.setdefault(r.waits, []).append(r)
        for waits, group in plain.items():
            if len(group) == 1:
                _alone(self.run, group[0])
                continue
            try:
                rows = self.run(_Fused(tuple(r.fn for r in group)), waits=waits)
            except BaseException as err:  # noqa: BLE001 - every analysis of the pass gets it
                for r in group:
                    r.error = err
                continue
            for i, r in enumerate(group):
                mine = [row[i] for row in rows]
                raised = next((x for x in mine if isinstance(x, _Raised)), None)
                if raised is not None:
                    r.error = raised.error
                else:
                    r.result = mine


def _alone(run: Runner, r: _Request) -> None:
    try:
        r.result = run(r.fn, waits=r.waits)
    except BaseException as err:  # noqa: BLE001 - raised in the analysis that asked
        r.error = err


def run_together(run: Runner, jobs: Sequence[Callable[[Runner], None]]) -> None:
    """Each job called with a runner whose passes go to `run` fused with the other jobs'
    (see the module); returns when every job is done, raising the first job's error."""
    rounds = _Rounds(run, active=len(jobs))
    errors: list[BaseException] = []
    threads = [threading.Thread(target=rounds.job, args=(j, errors), daemon=True,
                                name=f"mpiscope-fused-{i}") for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    while True:
        reqs = rounds.next_round()
        if not reqs:
            break
        try:
            rounds.execute(reqs)
        finally:
            rounds.finish(reqs)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
