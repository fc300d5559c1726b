"""Text from a trace in Markdown: shown as the text it is, never as Markdown or HTML.

A name may hold `|` (a table's cell separator), `*_[]` (emphasis, links), backticks,
`<script>` (HTML, which many renderers pass through) or control characters. `md(text)`
makes any value safe in running text or a table cell; `code(text)` makes a code span of
it; both return `Markdown`, which `md` leaves as it is (already safe), so a table writer
may take plain values and pre-rendered cells alike.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# HTML's specials as entities (every renderer decodes them, none runs them); Markdown's
# inline specials backslash-escaped (CommonMark: any ASCII punctuation may be)
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_INLINE = re.compile(r"([\\`*\[\]|~])")
# an underscore inside a word never starts emphasis (MPI_Allreduce stays as it is)
_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


class Markdown(str):
    """Text that is Markdown already (its data escaped where it was made)."""


def _plain(value: object) -> str:
    """One line: control characters and runs of white space as one space."""
    return " ".join(_CONTROL.sub(" ", str(value)).split())


def md(value: object) -> Markdown:
    """`value` as literal text in Markdown (running text or a table cell)."""
    if isinstance(value, Markdown):
        return value
    text = _UNDERSCORE.sub(r"\\_", _INLINE.sub(r"\\\1", _plain(value)))
    return Markdown("".join(_HTML.get(c, c) for c in text))


def code(value: object) -> Markdown:
    """`value` as a code span (literal: no Markdown or HTML inside one), in a table cell
    too: a fence longer than any run of backticks in it, `|` escaped (GFM tables split
    cells on it even in code)."""
    text = _plain(value).replace("|", "\\|")
    if not text:
        return Markdown("")
    longest = max((len(m) for m in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Markdown(f"{fence}{pad}{text}{pad}{fence}")
