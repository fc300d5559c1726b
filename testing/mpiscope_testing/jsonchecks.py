"""What every `mpiscope analyze --json` must satisfy, whatever the trace (damaged ones
too): the contract's parts add up to the totals, and no time, byte count or count is
negative, infinite or longer than the run could make it."""

from __future__ import annotations

import math

# values that may be negative: clock offsets between ranks
SIGNED = ("clock_skew.offsets_ns",)
# ... and a finding's raw replayed difference (base replay - fixed replay, in the replay's
# time: the fix may replay slower, and the base replay may be longer than the run); the
# saving shown from it is clamped and bounded (docs/simulate.md) and checked as seconds
REPLAY_TIME = ("evidence.replayed_difference_s",)
# counts and sizes: never negative; seconds (`*_s`, `seconds`): neither, nor longer than
# the run's duration on every thread at once (sums over ranks and threads)
SECONDS = ("_s", "seconds")


def problems(d: dict) -> list[str]:
    """The ways the analysis JSON `d` is inconsistent; empty if none."""
    out: list[str] = []
    duration = float(d["meta"]["duration_s"])
    threads = max(len(d.get("threads") or []), int(d["meta"]["num_ranks"]), 1)
    longest = duration * threads * 1.01 + 1e-6

    def walk(x: object, path: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(x, list):
            for v in x:
                walk(v, f"{path}[]")
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            if not math.isfinite(x):
                out.append(f"{path} = {x}")
            elif path.endswith(REPLAY_TIME):
                pass
            elif x < 0 and not path.startswith(SIGNED):
                out.append(f"{path} = {x} < 0")
            elif path.rsplit(".", 1)[-1].endswith(SECONDS) and x > longest:
                out.append(f"{path} = {x} s, beyond {duration} s x {threads} threads")

    walk(d, "")
    if not math.isfinite(duration) or duration < 0:
        out.append(f"meta.duration_s = {duration}")
    parts = ("compute_s", "communication_s", "synchronization_s", "io_s")
    for r in d.get("ranks", []):
        total, added = r["total_s"], sum(r[p] for p in parts)
        if abs(added - total) > 0.01 * abs(total) + 1e-9:
            out.append(f"rank {r['rank']}: parts add up to {added} s, total_s {total} s")
    return out
