"""The one way mpiscope writes numbers, for the terminal, HTML, Markdown and the web UI.

- Prose (`seconds`, `si`, `size`, `rate`): three significant digits with an SI prefix,
  never scientific notation (`82.3 µs`, not `8.23e-05 s`; `1170 µs` is `1.17 ms`).
- Columns (`Column`): one unit for the whole column, chosen from its largest value and
  named in the header (`time (ms)`), so "0.399 ms" never sits beside "0.0010"; a table
  that sorts by value (the web UI's) keeps `value(x)` and writes it with `d3()`.
- Plain numbers (`number`): significant digits without a unit (ratios, factors).
- Counts (`count`): `1 rank`, `4 ranks`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# prefixes by power of 1000, from pico to tera; µ (not u): the reports are UTF-8
_PREFIXES = {-4: "p", -3: "n", -2: "µ", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T"}
MINUS = "−"  # U+2212: lines up with + in proportional fonts


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _exponent(x: float, lowest: int = -3, highest: int = 4) -> int:
    """The power of 1000 that puts |x| in [1, 1000) (0 for zero), within the prefixes."""
    if x == 0:
        return 0
    e = math.floor(math.log10(abs(x)) / 3)
    return min(max(e, lowest), highest)


def _sig(v: float, digits: int) -> str:
    """|v| in fixed notation with `digits` significant digits (no trailing exponent);
    whole numbers of >= digits digits keep all of them."""
    v = abs(v)
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(v)))
    text = f"{v:.{decimals}f}"
    if "." in text:  # 1.50 ms reads as noise: 1.5 ms
        text = text.rstrip("0").rstrip(".")
    return text


def si(x: float, unit: str, digits: int = 3, signed: bool = False, lowest: int = -3) -> str:
    """`x` with an SI prefix: si(8.23e-05, 's') -> '82.3 µs'; signed adds '+' to positive
    values (and always writes − as U+2212)."""
    if not _finite(x):
        return "–"
    e = _exponent(x, lowest)
    v = x / 1000.0 ** e
    # rounding can carry into the next prefix (999.7 µs -> 1000 µs): take the next one
    if abs(float(_sig(v, digits))) >= 1000 and e < 4:
        e += 1
        v = x / 1000.0 ** e
    sign = MINUS if x < 0 else ("+" if signed and x > 0 else "")
    return f"{sign}{_sig(v, digits)} {_PREFIXES[e]}{unit}"


def seconds(x: float, digits: int = 3, signed: bool = False) -> str:
    """8.23e-05 -> '82.3 µs', 1.3641 -> '1.36 s', 0 -> '0 s' (never past seconds: 1200 s
    stays '1200 s')."""
    if _finite(x) and abs(x) >= 1:
        sign = MINUS if x < 0 else ("+" if signed and x > 0 else "")
        return f"{sign}{_sig(x, digits)} s"
    return si(x, "s", digits, signed, lowest=-3)


def size(n: float) -> str:
    """Bytes with binary prefixes (message sizes are powers of two): 4096 -> '4 KiB',
    1536 -> '1.5 KiB', 100 -> '100 B'."""
    if not _finite(n):
        return "–"
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= scale:
            return f"{_sig(n / scale, 3)} {unit}"
    return f"{n:.0f} B"


def data(n: float) -> str:
    """Amounts of data with SI prefixes: 40650000 -> '40.6 MB'."""
    return si(n, "B", lowest=0)


def rate(bytes_per_s: float) -> str:
    """Bandwidth: 9.5e7 -> '95 MB/s'."""
    return si(bytes_per_s, "B/s", lowest=0)


def count(n: int, noun: str, plural: str | None = None) -> str:
    """count(1, 'rank') -> '1 rank', count(4, 'rank') -> '4 ranks'."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def number(x: float, digits: int = 3) -> str:
    """A number without a unit, never in scientific notation: 0.0000123 -> '0.0000123',
    2.5 -> '2.5', 123456 -> '123456'."""
    if not _finite(x):
        return "–"
    return (MINUS if x < 0 else "") + _sig(x, digits)


def pct(x: float, decimals: int = 1) -> str:
    """A share (0..1) as a percentage: 0.1234 -> '12.3%'."""
    return "–" if not _finite(x) else f"{100 * x:.{decimals}f}%"


@dataclass(frozen=True)
class Column:
    """One unit for a column of values: `Column.of(values, 's')` picks the prefix that
    writes the largest value with 1-3 digits before the point; `header('time')` is
    'time (ms)' and `cell(x)` the value in that unit with the column's decimals."""

    unit: str
    scale: float  # divide by this
    decimals: int

    @classmethod
    def of(cls, values: Iterable[float], unit: str = "s", digits: int = 4,
           lowest: int = -3) -> Column:
        vals = [abs(v) for v in values if _finite(v)]
        top = max(vals, default=0.0)
        e = _exponent(top, lowest) if unit != "s" or top < 1 else 0
        scale = 1000.0 ** e
        # `digits` significant digits for the largest value, whole numbers at least
        lead = math.floor(math.log10(top / scale)) + 1 if top > 0 else 1
        return cls(f"{_PREFIXES[e]}{unit}", scale, max(0, digits - lead))

    def header(self, label: str) -> str:
        return f"{label} ({self.unit})"

    def value(self, x: float) -> float:
        """`x` in the column's unit, unrounded: what a table sorting by value holds (the
        rounding is `d3()`'s, when it is written)."""
        return x / self.scale

    def d3(self) -> str:
        """The d3-format specifier writing `value(x)` as `cell(x)` writes `x` (Dash
        DataTable, Plotly): fixed decimals, no exponent, no SI suffix; d3 writes minus as
        U+2212 and drops it where the value rounds to 0, as `cell` does."""
        return f".{self.decimals}f"

    def cell(self, x: float, signed: bool = False) -> str:
        if not _finite(x):
            return "–"
        text = f"{abs(x) / self.scale:.{self.decimals}f}"
        zero = float(text) == 0
        sign = "" if zero else MINUS if x < 0 else ("+" if signed and x > 0 else "")
        return sign + text


# The comparison reports' names for the same formatting (HTML and Markdown)
def fmt_s(x: float) -> str:
    return seconds(x, digits=4)


def fmt_pct(x: float) -> str:
    return pct(x)
