"""How the comparison reports (HTML and Markdown) write seconds and shares."""

from __future__ import annotations


def fmt_s(seconds: float) -> str:
    return f"{seconds:.4g} s" if seconds >= 0.01 else f"{seconds * 1e3:.3g} ms"


def fmt_pct(x: float) -> str:
    return f"{100 * x:.1f}%"
