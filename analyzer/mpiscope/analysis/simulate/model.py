"""The machine a replay runs on: a network per path, a CPU factor, a node count.

A message of n bytes on a path takes `latency + n / bandwidth` (LogP's L + G·n). Sizes
up to the path's `eager_limit` go eagerly (the sender does not wait for the receiver);
larger ones by rendezvous: the request reaches the receiver after one latency, its
reply goes back once the receive is posted, then the data follow, so the data arrive
`max(send + L, recv posted) + 2L + n / bandwidth`. Contention: a rank's inter-node
sends leave through one link, one after the other.

`fit(trace)` takes the parameters from the trace's own messages: per path, the time
from each message's send to the end of the receive call that completed it (its
transfer when the receive was waiting), per power-of-two size bucket the 10th
percentile, a line through those; the latency the 10th percentile of what is left. A
low envelope, so a replay on the fitted model does not make the measured transfers
slower than they were.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mpiscope import numbers
from mpiscope.analysis import stats
from mpiscope.archive.trace import Trace
from mpiscope.errors import UserError

INTRA, INTER = "intra-node", "inter-node"
MACHINES_DIR = Path(__file__).with_name("machines")

# without messages to fit from: a typical shared-memory / gigabit path, and the limits
# Open MPI uses by default (vader 4 KiB, tcp 64 KiB)
DEFAULT_PATHS = {
    INTRA: (1e-6, 5e9, 4096),
    INTER: (50e-6, 117e6, 65536),
}
QUANTILE = 0.10  # low envelope of the transfer times per size bucket
MIN_SAMPLES = 10  # messages a size bucket needs to count (fewer: its 10th percentile is noise)


@dataclass(frozen=True)
class PathModel:
    latency_s: float
    bandwidth_Bps: float
    eager_limit: int  # largest message sent eagerly (bytes)

    def transfer_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.bandwidth_Bps


@dataclass(frozen=True)
class Machine:
    """A named model of a machine; `fitted` says its network came from the trace."""

    name: str
    paths: dict[str, PathModel]
    cpu_factor: float = 1.0  # computation takes this times its measured time
    nodes: int | None = None  # ranks spread over this many nodes (None: as traced)
    fitted: bool = False
    notes: str = ""
    collectives: str = "algorithm"  # "algorithm" models or "measured" intrinsic cost

    def to_dict(self) -> dict:
        return {"name": self.name, "fitted": self.fitted, "cpu_factor": self.cpu_factor,
                "nodes": self.nodes, "collectives": self.collectives,
                "paths": {p: {"latency_s": m.latency_s, "bandwidth_Bps": m.bandwidth_Bps,
                              "eager_limit": m.eager_limit}
                          for p, m in self.paths.items()}}

    def with_network(self, latency_s: float | None = None,
                     bandwidth_Bps: float | None = None,
                     only: str | None = None) -> Machine:
        """The same machine with the latency and/or bandwidth of every path (or of the
        path `only`) replaced."""
        paths = {p: replace(m, latency_s=m.latency_s if latency_s is None else latency_s,
                            bandwidth_Bps=m.bandwidth_Bps if bandwidth_Bps is None
                            else bandwidth_Bps) if only in (None, p) else m
                 for p, m in self.paths.items()}
        return replace(self, paths=paths)

    def describe(self) -> str:
        """One line: the paths, the CPU factor and the placement a prediction ran on."""
        def path(m: PathModel) -> str:
            return (f"{format_time(m.latency_s)} + n / {format_rate(m.bandwidth_Bps)}, "
                    f"eager <= {m.eager_limit} B")
        nodes = (f"{self.nodes} nodes" if self.nodes is not None
                 else "ranks on their traced hosts")
        cpu = f"CPU factor {self.cpu_factor:g}"
        if self.cpu_factor != 1:
            cpu += f" (computation takes {self.cpu_factor:g}x its measured time)"
        return (f"{self.name}: inter-node {path(self.paths[INTER])}; intra-node "
                f"{path(self.paths[INTRA])}; {cpu}; {nodes}")


def format_time(s: float) -> str:
    """A latency or time as the one number formatter writes seconds: 1.5 -> '1.5 s',
    8.23e-05 -> '82.3 µs', 0.00117 -> '1.17 ms'."""
    return numbers.seconds(s)


def format_rate(bytes_per_s: float) -> str:
    """Bytes per second as HPC people write it, with the bit rate: `12.5 MB/s (100 Mbit/s)`."""
    return f"{numbers.rate(bytes_per_s)} ({numbers.si(bytes_per_s * 8, 'bit/s', lowest=0)})"


def _fit_path(nbytes: np.ndarray, t_s: np.ndarray, default: tuple[float, float, int],
              eager_limit: int) -> PathModel:
    """Latency and bandwidth from the low envelope of the transfer times.

    Per power-of-two size bucket the 10th percentile (a message neither rank was
    descheduled for). The bandwidth is the slope through the buckets whose time is
    mostly transfer (at least twice the smallest bucket's), so the largest messages set
    it: a link that passes a few packets faster than its rate (a token bucket's burst)
    or a latency-dominated bucket cannot inflate it. The latency is what the
    latency-dominated buckets leave at that bandwidth (the least of them, >= 0); with
    transfer-dominated buckets only, the latency is 0 and the bandwidth the least-squares
    rate through the origin. Too few transfer-dominated buckets: a relative-error line
    through all, else the default."""
    latency, bandwidth, _ = default
    if not len(nbytes):
        return PathModel(latency, bandwidth, eager_limit)
    lo = np.where(nbytes > 0, 2 ** np.floor(np.log2(np.maximum(nbytes, 1))), 0)
    xs, ys, ns = [], [], []
    for b in np.unique(lo):
        sel = lo == b
        if sel.sum() >= MIN_SAMPLES:
            xs.append(float(np.median(nbytes[sel])))
            ys.append(float(np.quantile(t_s[sel], QUANTILE)))
            ns.append(float(sel.sum()))
    if not xs:  # too few messages for a percentile: the fastest one, as latency
        i = int(np.argmin(t_s))
        return PathModel(float(max(t_s[i] - nbytes[i] / bandwidth, 0.0)), bandwidth,
                         eager_limit)
    x, y = np.array(xs), np.maximum(np.array(ys), 1e-9)
    bulk = y >= 2 * y.min()
    if bulk.sum() >= 2 and np.ptp(x[bulk]) > 0:
        slope = np.polyfit(x[bulk], y[bulk], 1)[0]
    elif bulk.sum() == 1:
        f = int(np.argmin(y))
        slope = (y[bulk][0] - y[f]) / max(x[bulk][0] - x[f], 1.0)
    elif len(x) > 1 and np.ptp(x) > 0:
        slope = np.polyfit(x, y, 1, w=1 / y)[0]
    else:
        slope = 0.0
    if slope > 0:
        bandwidth = 1 / slope
    # the fastest latency-dominated bucket (its transfer at most half its time): no
    # such size is slower in the model than its low envelope, so the replay does not
    # stretch measured transfers; sizes a burst passed faster than the rate say nothing
    # about the latency
    small = ~bulk & (x / bandwidth <= y / 2)
    if small.any():
        latency = float(np.min(y[small] - x[small] / bandwidth))
    elif bulk.any():
        # every size is mostly transfer (an application's few halo sizes): none of them
        # resolves the latency, and a line through them may cross zero below them (a
        # burst passed the first KB at once). The rate that fits their transfers best
        # with no latency: least squares through the origin over the messages
        w = np.array(ns)
        bandwidth = float((w * x * x).sum() / (w * x * y).sum())
        latency = 0.0
    else:  # sizes alike in time (one size, say): nothing tells transfer from latency
        latency = float(y.min())
    return PathModel(max(latency, 0.0), float(bandwidth), eager_limit)


def fit(trace: Trace) -> Machine:
    """The trace's own machine: its paths fitted from its messages (see module doc)."""
    m = trace.messages
    calls = trace.calls
    switches = {s.path: s for s in stats.protocol_switches(trace)} if len(m) else {}
    paths: dict[str, PathModel] = {}
    if len(m):
        hosts = trace.host_of()
        same = (m["send_rank"].map(hosts).to_numpy()
                == m["recv_rank"].map(hosts).to_numpy())
        done = m["recv_complete_call"].to_numpy()
        ok = done >= 0
        c_start = np.full(len(m), -1, np.int64)
        c_end = np.full(len(m), -1, np.int64)
        c_start[ok] = calls["start"].to_numpy()[done[ok]]
        c_end[ok] = calls["end"].to_numpy()[done[ok]]
        send = m["send_enter"].to_numpy()
        # from the send to the end of the receive that completed it: the transfer where
        # the receive was already waiting, an upper bound elsewhere (the low envelope
        # below picks the former)
        waiting = ok & (c_end >= send)
        t = (c_end - send) / 1e9
        nbytes = m["bytes"].to_numpy()
        for name, sel in ((INTRA, same), (INTER, ~same)):
            s = switches.get(name)
            limit = s.last_below_bytes if s else DEFAULT_PATHS[name][2]
            # rendezvous sizes count too: their handshake is part of what they cost here
            use = waiting & sel
            paths[name] = _fit_path(nbytes[use], t[use], DEFAULT_PATHS[name], limit)
    for name, (lat, bw, limit) in DEFAULT_PATHS.items():
        paths.setdefault(name, PathModel(lat, bw, limit))
    return Machine(name="fitted", paths=paths, fitted=True,
                   notes="fitted from the trace's own message timings")


# ---------------------------------------------------------------------- machine files
_UNITS_TIME = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
# HPC's and tc's units: "bit"/"bps" count bits (100Mbit = 100Mbps = 12.5 MB/s), "B"
# counts bytes (MB = MB/s = 10^6 bytes per second); a bare "mb" says neither
_UNITS_RATE = {"bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
               "bps": 1 / 8, "kbps": 1e3 / 8, "mbps": 1e6 / 8, "gbps": 1e9 / 8,
               "B": 1.0, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9,
               "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}


def _number_unit(text: str, what: str) -> tuple[float, str]:
    s = text.strip()
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    try:
        value = float(s[:i])
    except ValueError:
        raise UserError(what, f"not a number with a unit: {text!r}") from None
    if value <= 0 or not np.isfinite(value):
        raise UserError(what, f"must be positive: {text!r}")
    return value, s[i:].strip()


def parse_time(text: str, what: str = "--latency") -> float:
    """`60us`, `1.5ms`, `2e-6s` -> seconds (no unit: seconds)."""
    value, unit = _number_unit(text, what)
    if unit.lower() not in {**_UNITS_TIME, "": 1}:
        raise UserError(what, f"unknown time unit {unit!r} in {text!r} (ns, us, ms, s)")
    return value * _UNITS_TIME.get(unit.lower(), 1.0)


def parse_rate(text: str, what: str = "--bandwidth") -> float:
    """A rate -> bytes per second: `100Mbit` and `100Mbps` are bits (12.5e6 B/s),
    `117MB` and `117MB/s` bytes; no unit: bytes per second."""
    value, unit = _number_unit(text, what)
    u = unit.removesuffix("/s")
    if u == "":
        return value
    if u.lower() in {"bit", "kbit", "mbit", "gbit", "bps", "kbps", "mbps", "gbps"}:
        return value * _UNITS_RATE[u.lower()]
    if u in _UNITS_RATE:
        return value * _UNITS_RATE[u]
    raise UserError(what, f"unknown rate unit {unit!r} in {text!r}: bits as in 100Mbit or "
                    "100Mbps, bytes as in 12.5MB or 12.5MB/s")


def parse_path(text: str, what: str = "--inter-node") -> tuple[float | None, float | None]:
    """`100Mbit`, `50us` or `100Mbit,50us` -> (latency_s, bandwidth_Bps), None: unchanged."""
    latency = bandwidth = None
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise UserError(what, f"expected BANDWIDTH[,LATENCY], e.g. 100Mbit,50us; "
                            f"got {text!r}")
        _, unit = _number_unit(part, what)
        if unit.lower() in _UNITS_TIME:
            if latency is not None:
                raise UserError(what, f"two latencies in {text!r}")
            latency = parse_time(part, what)
        else:
            if bandwidth is not None:
                raise UserError(what, f"two bandwidths in {text!r}")
            if not unit:
                raise UserError(what, f"{part!r} needs a unit: 100Mbit, 12.5MB/s, 50us")
            bandwidth = parse_rate(part, what)
    return latency, bandwidth


def machine_names() -> list[str]:
    return sorted(p.stem for p in MACHINES_DIR.glob("*.toml"))


def load_machine(spec: str) -> Machine:
    """A machine by name (machines/NAME.toml shipped here) or from a TOML file."""
    path = Path(spec)
    if not path.suffix:
        path = MACHINES_DIR / f"{spec}.toml"
        if not path.is_file():
            raise UserError("--machine", f"no machine named {spec!r} (known: "
                            f"{', '.join(machine_names())}; or give a .toml file)")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the tomli package, if installed
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise UserError("--machine", "machine files need Python 3.11 or the tomli "
                            "package") from None
    try:
        data = tomllib.loads(path.read_text())
    except OSError as err:
        raise UserError(str(path), err.strerror or "cannot read") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(str(path), f"not a machine file: {err}") from None
    try:
        paths = {}
        for name in (INTRA, INTER):
            p = data["network"][name]
            paths[name] = PathModel(parse_time(str(p["latency"]), f"{path}: latency"),
                                    parse_rate(str(p["bandwidth"]), f"{path}: bandwidth"),
                                    int(p.get("eager_limit", DEFAULT_PATHS[name][2])))
        return Machine(name=str(data.get("name", path.stem)), paths=paths,
                       cpu_factor=float(data.get("cpu_factor", 1.0)),
                       nodes=int(data["nodes"]) if "nodes" in data else None,
                       notes=str(data.get("assumptions", "")).strip())
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(str(path), f"not a machine file: missing or bad {err}") from None


@dataclass
class Placement:
    """Which node each rank runs on in the replay."""

    node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def of(cls, trace: Trace, machine: Machine) -> Placement:
        n = trace.num_ranks
        if machine.nodes is None:
            codes = trace.ranks.sort_values("rank")["host"].astype(str)
            return cls(codes.factorize()[0].astype(np.int64))
        # block placement: consecutive ranks share a node, as mpirun --map-by slot does
        per = -(-n // machine.nodes)
        return cls(np.arange(n, dtype=np.int64) // per)
