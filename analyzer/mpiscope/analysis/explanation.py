"""Did the predicted saving come true, and if not, where did the time go?

Works on a `Comparison` (two runs' contract JSON, plus their sessions when analyzed here):

- per finding of run A: its predicted saving, its call site's time per rank in A and B
  (the measured change) and on both runs' critical paths;
- the run-to-run noise (`noise`): from the iteration-to-iteration spread of the main loop;
- the verdict: predicted gain (the resolved findings' savings) against the measured gain
  (wall time A − B), and whether they differ by more than the noise;
- where they do, sentences saying where the time went: per call site, the change of its
  waiting and transfer time (mean per rank, from the wait states of both runs), the change
  of compute, and the critical paths of both runs, e.g. "the 0.3 s of MPI_Allreduce at
  himeno.c:286 moved to waiting in MPI_Waitall at himeno.c:233 (+0.28 s): ranks now wait
  for a late sender (MPI_Isend at himeno.c:231)";
- the per-iteration breakdown of both runs (`per_iteration`), so a slow phase is not
  averaged away.

Numbers per call site are means per rank (summed over ranks / rank count), so they are on
the scale of wall time; critical-path numbers are time on the path (wall time by
construction).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from mpiscope.analysis.comparison import OUTSIDE_INTERVAL, Comparison, RunSummary
from mpiscope.numbers import seconds

# noise when a run has no main loop to measure it from (share of its wall time): assumed
FALLBACK_NOISE_SHARE = 0.02
# a destination gets named when it took at least this share of the freed time
MIN_SHARE_OF_MOVE = 0.1
MAX_DESTINATIONS = 3

WAIT_REASON = {
    "late_sender": "ranks now wait for a late sender",
    "late_receiver": "senders now wait for a late receiver",
    "wait_at_barrier": "ranks now wait at the barrier for the last rank to arrive",
    "wait_at_nxn": "ranks now wait in the collective for the last rank to arrive",
    "late_broadcast": "ranks now wait for a late root",
    "early_reduce": "the root now waits for the last contributor",
    "wait_at_fence": "ranks now wait at the fence for the last rank",
    "late_post": "origins now wait for the target's post",
    "early_wait": "the target now waits for the last origin",
    "lock_contention": "ranks now wait for a lock another rank holds",
}


def _num(x: float) -> str:
    """Seconds as the explanation writes them: 3 significant digits, an SI prefix."""
    return seconds(x)


@dataclass
class Noise:
    """Run-to-run noise of the measured gain.

    Model: a run's iterations are independent draws of its iteration time (the mean over
    ranks of an iteration's length), so a run of N iterations with standard deviation σ
    varies by σ·√N; the gain (A − B) by √(σa²·Na + σb²·Nb); `gain_s` is twice that (≈95%).
    A run without a main loop is assumed to vary by 2% of its wall time (`basis` says so).
    """

    a_s: float
    b_s: float
    gain_s: float
    basis: str

    @property
    def model(self) -> str:
        return ("2·√(σa²·Na + σb²·Nb): σ the standard deviation of a run's iteration time "
                "(mean over ranks), N its iterations; iterations taken as independent")


def run_noise(run: RunSummary) -> tuple[float, str]:
    """(σ·√N of the run, how it was obtained)."""
    it = per_iteration(run)
    if len(it) >= 3:
        sigma = float(it["total_s"].std(ddof=1))
        return sigma * math.sqrt(len(it)), f"{len(it)} iterations, σ {seconds(sigma)}"
    return FALLBACK_NOISE_SHARE * run.wall_s, "no main loop: assumed 2% of wall time"


def noise(cmp: Comparison) -> Noise:
    a, why_a = run_noise(cmp.a)
    b, why_b = run_noise(cmp.b)
    return Noise(a, b, 2 * math.hypot(a, b), f"{cmp.a.label}: {why_a}; {cmp.b.label}: {why_b}")


def per_iteration(run: RunSummary) -> pd.DataFrame:
    """The run's main-loop iterations: `iteration`, each part's seconds and `total_s`, as
    means per rank (the JSON's `iterations` are summed over ranks). Empty without a loop."""
    rows = run.report.get("iterations") or []
    parts = ["compute_s", "communication_s", "synchronization_s", "io_s"]
    if not rows:
        return pd.DataFrame(columns=["iteration", *parts, "total_s"])
    df = pd.DataFrame(rows)
    n = max(len(run.report["ranks"]), 1)
    out = pd.DataFrame({"iteration": df["iteration"].astype(int)})
    for p in parts:
        out[p] = df[p] / n if p in df else 0.0
    out["total_s"] = out[parts].sum(axis=1)
    return out


@dataclass
class SiteDelta:
    """One call site in both runs, seconds per rank (mean over ranks) and on the path."""

    function: str
    callsite: str
    wait_a_s: float = 0.0
    wait_b_s: float = 0.0
    transfer_a_s: float = 0.0
    transfer_b_s: float = 0.0
    path_a_s: float = 0.0
    path_b_s: float = 0.0
    wait_kind_b: str | None = None  # the waiting's main kind in B (runs analyzed here)
    partner_b: str | None = None  # late sender's call site in B, "MPI_Isend at x.c:3"

    @property
    def time_a_s(self) -> float:
        return self.wait_a_s + self.transfer_a_s

    @property
    def time_b_s(self) -> float:
        return self.wait_b_s + self.transfer_b_s

    @property
    def wait_delta_s(self) -> float:
        return self.wait_b_s - self.wait_a_s

    @property
    def transfer_delta_s(self) -> float:
        return self.transfer_b_s - self.transfer_a_s

    def to_dict(self) -> dict:
        return {**asdict(self), "wait_delta_s": self.wait_delta_s,
                "transfer_delta_s": self.transfer_delta_s}


@dataclass
class FindingCheck:
    """A finding of A: predicted saving against what its call site measured in B."""

    kind: str
    function: str
    callsite: str
    predicted_s: float
    resolved: bool
    site_a_s: float  # the call site's time per rank in A
    site_b_s: float  # ... and in B
    path_a_s: float  # its time on A's critical path
    path_b_s: float

    @property
    def measured_s(self) -> float:
        """The time its call site stopped costing, per rank (A − B)."""
        return self.site_a_s - self.site_b_s

    def to_dict(self) -> dict:
        return {**asdict(self), "measured_s": self.measured_s}


@dataclass
class Destination:
    """Where freed time went: waiting or transfer at a call site, or compute."""

    what: str  # "waiting", "transfer" or "compute"
    function: str
    callsite: str
    delta_s: float
    reason: str | None = None

    def phrase(self) -> str:
        if self.what == "compute":
            return f"compute (+{_num(self.delta_s)})"
        return f"{self.what} in {self.function} at {self.callsite} (+{_num(self.delta_s)})"


@dataclass
class Move:
    """The freed time of one finding's call site and where it went."""

    function: str
    callsite: str
    freed_s: float
    to: list[Destination] = field(default_factory=list)

    def sentence(self) -> str:
        head = f"the {_num(self.freed_s)} of {self.function} at {self.callsite}"
        if not self.to:
            return (f"{head} is gone and no call site's waiting or transfer, nor compute, "
                    "grew in its place")
        text = f"{head} moved to " + " and ".join(d.phrase() for d in self.to)
        reasons = [d.reason for d in self.to if d.reason]
        return text + (f": {'; '.join(reasons)}" if reasons else "")

    def to_dict(self) -> dict:
        return {"function": self.function, "callsite": self.callsite, "freed_s": self.freed_s,
                "to": [asdict(d) for d in self.to], "sentence": self.sentence()}


@dataclass
class Explanation:
    predicted_gain_s: float
    measured_gain_s: float
    noise: Noise
    findings: list[FindingCheck]
    sites: list[SiteDelta]
    compute_a_s: float  # per rank (mean)
    compute_b_s: float
    path_a_s: float  # critical path lengths
    path_b_s: float
    moves: list[Move]
    sentences: list[str]

    @property
    def difference_s(self) -> float:
        return self.predicted_gain_s - self.measured_gain_s

    @property
    def beyond_noise(self) -> bool:
        return abs(self.difference_s) > self.noise.gain_s

    @property
    def verdict(self) -> str:
        head = (f"predicted gain {_num(self.predicted_gain_s)}, measured "
                f"{_num(self.measured_gain_s)}")
        if not self.beyond_noise:
            return f"{head}: they agree within the noise (±{_num(self.noise.gain_s)})"
        return (f"{head}: they differ by {_num(abs(self.difference_s))}, more than the "
                f"noise (±{_num(self.noise.gain_s)})")

    def to_dict(self) -> dict:
        return {
            "predicted_gain_s": self.predicted_gain_s, "measured_gain_s": self.measured_gain_s,
            "difference_s": self.difference_s, "beyond_noise": self.beyond_noise,
            "verdict": self.verdict,
            "noise": {"gain_s": self.noise.gain_s, "a_s": self.noise.a_s, "b_s": self.noise.b_s,
                      "model": self.noise.model, "basis": self.noise.basis},
            "findings": [f.to_dict() for f in self.findings],
            "call_sites": [s.to_dict() for s in self.sites],
            "compute_per_rank_s": {"a": self.compute_a_s, "b": self.compute_b_s},
            "critical_path_s": {"a": self.path_a_s, "b": self.path_b_s},
            "moves": [m.to_dict() for m in self.moves],
            "explanation": self.sentences,
        }


def _ranks(run: RunSummary) -> int:
    return max(len(run.report["ranks"]), 1)


def _site_times(run: RunSummary) -> dict[tuple[str, str], tuple[float, float]]:
    """(function, callsite) -> (waiting, transfer) per rank; transfer = time − waiting."""
    n = _ranks(run)
    out = {}
    for c in run.report.get("callsites") or []:
        if c["function"] in OUTSIDE_INTERVAL:
            continue
        wait = float(c.get("wait_s", 0.0))
        out[(c["function"], c["callsite"])] = (wait / n, (float(c["time_s"]) - wait) / n)
    return out


def _path_times(run: RunSummary) -> dict[tuple[str, str], float]:
    """(function, callsite) -> seconds on the run's critical path (MPI calls only)."""
    out: dict[tuple[str, str], float] = {}
    for f in (run.report.get("critical_path") or {}).get("functions", []):
        if f["name"] != "compute":
            key = (f["name"], f["callsite"])
            out[key] = out.get(key, 0.0) + float(f["time_s"])
    return out


def _wait_details(run: RunSummary) -> dict[tuple[str, str], tuple[str, str | None]]:
    """(function, callsite) -> (main wait kind, for a late sender the senders' call site);
    empty for a run read from saved JSON (no session)."""
    session = run.analysis
    if session is None:
        return {}
    per_call = session.wait_states.per_call
    waited = per_call[per_call["wait_ns"] > 0]
    if waited.empty:
        return {}
    trace = session.trace
    calls = trace.calls.set_index("call")
    msgs = trace.messages
    out = {}
    by_site = waited.groupby(["function", "callsite", "wait_kind"], observed=True)["wait_ns"]
    kinds = by_site.sum().reset_index().sort_values("wait_ns", ascending=False)
    for row in kinds.drop_duplicates(["function", "callsite"]).itertuples():
        kind, partner = str(row.wait_kind), None
        if kind == "late_sender" and not msgs.empty:
            ids = waited.loc[(waited["function"] == row.function)
                             & (waited["callsite"] == row.callsite), "call"].to_numpy()
            done = msgs["recv_complete_call"].where(msgs["recv_complete_call"] >= 0,
                                                    msgs["recv_call"]).to_numpy()
            senders = msgs["send_call"].to_numpy()[np.isin(done, ids)]
            senders = senders[senders >= 0]
            if len(senders):
                s = calls.loc[senders, ["function", "callsite"]].astype(str)
                top = s.value_counts().index[0]
                partner = f"{top[0]} at {top[1]}"
        out[(str(row.function), str(row.callsite))] = (kind, partner)
    return out


def site_deltas(cmp: Comparison) -> list[SiteDelta]:
    """Every call site of either run, largest change of its time first."""
    ta, tb = _site_times(cmp.a), _site_times(cmp.b)
    pa, pb = _path_times(cmp.a), _path_times(cmp.b)
    details = _wait_details(cmp.b)
    out = []
    for key in set(ta) | set(tb):
        (wa, xa), (wb, xb) = ta.get(key, (0.0, 0.0)), tb.get(key, (0.0, 0.0))
        kind, partner = details.get(key, (None, None))
        out.append(SiteDelta(key[0], key[1], wa, wb, xa, xb, pa.get(key, 0.0),
                             pb.get(key, 0.0), kind, partner))
    out.sort(key=lambda s: (-abs(s.time_b_s - s.time_a_s), s.function, s.callsite))
    return out


def _compute_per_rank(run: RunSummary) -> float:
    return sum(r["compute_s"] for r in run.report["ranks"]) / _ranks(run)


def _reason(site: SiteDelta) -> str | None:
    if not site.wait_kind_b:
        return None
    text = WAIT_REASON.get(site.wait_kind_b, f"ranks now wait ({site.wait_kind_b})")
    return f"{text} ({site.partner_b})" if site.partner_b else text


def _destinations(sites: list[SiteDelta], freed: set[tuple[str, str]], compute_delta: float,
                  amount: float) -> list[Destination]:
    """Where `amount` seconds went: the largest growths of waiting, transfer and compute
    outside the freed call sites, each at least MIN_SHARE_OF_MOVE of it."""
    cands = [Destination("compute", "", "", compute_delta)]
    for s in sites:
        if (s.function, s.callsite) in freed:
            continue
        cands.append(Destination("waiting", s.function, s.callsite, s.wait_delta_s,
                                 _reason(s)))
        cands.append(Destination("transfer", s.function, s.callsite, s.transfer_delta_s))
    cands = [d for d in cands if d.delta_s > 0 and d.delta_s >= MIN_SHARE_OF_MOVE * amount]
    cands.sort(key=lambda d: (-d.delta_s, d.what, d.function, d.callsite))
    return cands[:MAX_DESTINATIONS]


def _path_sentence(cmp: Comparison, sites: list[SiteDelta]) -> str | None:
    """The critical paths of both runs: their lengths and the largest changes on them."""
    pa = (cmp.a.report.get("critical_path") or {}).get("length_s")
    pb = (cmp.b.report.get("critical_path") or {}).get("length_s")
    if pa is None or pb is None:
        return None
    entries = [(f"{s.function} at {s.callsite}", s.path_a_s, s.path_b_s) for s in sites]
    entries.append(("compute", _path_compute(cmp.a), _path_compute(cmp.b)))
    moved = sorted((e for e in entries if e[1] != e[2]),
                   key=lambda e: (-abs(e[2] - e[1]), e[0]))[:3]
    text = f"critical path {_num(pa)} → {_num(pb)}"
    if moved:
        text += "; on it " + ", ".join(f"{name} {_num(x)} → {_num(y)}" for name, x, y in moved)
    return text


def _path_compute(run: RunSummary) -> float:
    """Seconds of compute bursts on the run's critical path."""
    return sum(float(f["time_s"]) for f in
               (run.report.get("critical_path") or {}).get("functions", [])
               if f["name"] == "compute")


def explain(cmp: Comparison) -> Explanation:
    sites = site_deltas(cmp)
    by_key = {(s.function, s.callsite): s for s in sites}
    checks = []
    for o in cmp.outcomes:
        f = o.finding
        s = by_key.get((f["function"], f["callsite"]), SiteDelta(f["function"], f["callsite"]))
        checks.append(FindingCheck(f["kind"], f["function"], f["callsite"],
                                   float(f["estimated_savings_s"]), o.resolved, s.time_a_s,
                                   s.time_b_s, s.path_a_s, s.path_b_s))
    ca, cb = _compute_per_rank(cmp.a), _compute_per_rank(cmp.b)
    pa = float((cmp.a.report.get("critical_path") or {}).get("length_s", 0.0))
    pb = float((cmp.b.report.get("critical_path") or {}).get("length_s", 0.0))
    ex = Explanation(cmp.predicted_gain_s, cmp.measured_gain_s, noise(cmp), checks, sites,
                     ca, cb, pa, pb, [], [])
    ex.sentences.append(ex.verdict)
    if not ex.beyond_noise:
        return ex
    freed_sites = {(c.function, c.callsite) for c in checks if c.resolved}
    if ex.difference_s > 0:
        # less gain than predicted: follow each resolved finding's freed time (once a site)
        seen: set[tuple[str, str]] = set()
        for c in sorted(checks, key=lambda c: -c.measured_s):
            key = (c.function, c.callsite)
            if not c.resolved or c.measured_s <= 0 or key in seen:
                continue
            seen.add(key)
            move = Move(c.function, c.callsite, c.measured_s,
                        _destinations(sites, freed_sites, cb - ca, c.measured_s))
            ex.moves.append(move)
            ex.sentences.append(move.sentence())
        if not ex.moves:  # no finding freed time: say where the run lost it
            grew = _destinations(sites, set(), cb - ca, ex.difference_s)
            if grew:
                ex.sentences.append("the run gained less than predicted; time grew in "
                                    + ", ".join(d.phrase() for d in grew))
    else:
        # more gain than predicted: what else got faster
        falls = [(-(cb - ca), "compute", "", "")] + [
            (-(s.time_b_s - s.time_a_s), "time", s.function, s.callsite) for s in sites
            if (s.function, s.callsite) not in freed_sites]
        falls = sorted((x for x in falls if x[0] > MIN_SHARE_OF_MOVE * -ex.difference_s),
                       key=lambda x: -x[0])[:MAX_DESTINATIONS]
        if falls:
            ex.sentences.append("the run gained more than predicted; time also fell in "
                                + ", ".join(f"compute (−{_num(d)})" if what == "compute"
                                            else f"{fn} at {cs} (−{_num(d)})"
                                            for d, what, fn, cs in falls))
    path = _path_sentence(cmp, sites)
    if path:
        ex.sentences.append(path)
    return ex
