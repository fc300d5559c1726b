"""What cluster to emulate: node count, link rate, optional delay (`4x100mbit+0.1ms`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mpiscope.errors import UserError

MAX_NODES = 250  # nodes are 198.18.0.1 .. 198.18.0.N; .254 is the host side
_PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,9}")
_RATE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)", re.I)
_DELAY_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(us|ms|s)", re.I)
_SPEC_RE = re.compile(r"(\d+)x([^+]+?)(?:\+(.+))?")

# tc's units: "bit" units count bits, "bps" units count bytes
_RATE_FACTORS = {
    "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
    "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9,
}
_DELAY_FACTORS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


@dataclass(frozen=True)
class ClusterSpec:
    """An emulated cluster: `nodes` namespaces, each linked at `rate_bps` (bits/s)."""

    nodes: int
    rate_bps: float
    delay_ms: float | None = None
    prefix: str = "mpiscope"
    slots: int = 2  # hostfile slots per node: `--map-by slot` packs this many ranks per node

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise UserError("cluster", f"--nodes must be between 1 and {MAX_NODES}")
        if self.rate_bps < 8000:
            raise UserError("cluster", "link rate must be at least 8kbit")
        if self.delay_ms is not None and not 0 <= self.delay_ms <= 10_000:
            raise UserError("cluster", "delay must be between 0 and 10s")
        if not _PREFIX_RE.fullmatch(self.prefix):
            raise UserError("cluster", f"prefix {self.prefix!r}: use 1-10 of [a-z0-9], "
                            "starting with a letter")
        if self.slots < 1:
            raise UserError("cluster", "--slots must be at least 1")

    @property
    def rate(self) -> str:
        return format_rate(self.rate_bps)

    def __str__(self) -> str:
        delay = f"+{self.delay_ms:g}ms" if self.delay_ms else ""
        return f"{self.nodes}x{self.rate}{delay}"


def parse_rate(text: str) -> float:
    """`100mbit` -> 1e8 bits/s (tc's units: kbit/mbit/gbit are bits, kbps/mbps bytes)."""
    m = _RATE_RE.fullmatch(text.strip())
    if not m:
        raise UserError("cluster", f"rate {text!r}: expected e.g. 100mbit, 1gbit, 500kbit")
    return float(m.group(1)) * _RATE_FACTORS[m.group(2).lower()]


def parse_delay(text: str) -> float:
    """`0.1ms` -> 0.1 (milliseconds)."""
    m = _DELAY_RE.fullmatch(text.strip())
    if not m:
        raise UserError("cluster", f"delay {text!r}: expected e.g. 0.1ms, 50us")
    return float(m.group(1)) * _DELAY_FACTORS[m.group(2).lower()]


def format_rate(bps: float) -> str:
    for unit, factor in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bps >= factor and (bps / factor) == int(bps / factor):
            return f"{int(bps / factor)}{unit}"
    return f"{int(bps)}bit"


def parse_spec(text: str) -> ClusterSpec:
    """`4x100mbit` or `4x100mbit+0.1ms` -> ClusterSpec (the Himeno study's `--cluster`)."""
    m = _SPEC_RE.fullmatch(text.strip().lower())
    if not m:
        raise UserError("cluster", f"spec {text!r}: expected NODESxRATE[+DELAY], "
                        "e.g. 4x100mbit or 4x100mbit+0.1ms")
    delay = parse_delay(m.group(3)) if m.group(3) else None
    return ClusterSpec(nodes=int(m.group(1)), rate_bps=parse_rate(m.group(2)), delay_ms=delay)
