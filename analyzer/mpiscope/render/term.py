"""Text from a trace on the terminal: data, never markup and never control sequences.

A trace names hosts, functions, files, communicators and the program as its writer
pleases: `[/i]` would be Rich markup (an exception, or a style the name switches on),
`ESC ] 0 ; … BEL` would set the terminal's window title, C1 controls (U+0080..U+009F)
act as ESC on terminals that honour them. So:

- `name(text)`: a name for a markup string or table cell: control characters shown as
  `\\xNN`, markup escaped (rich.markup.escape).
- `clean(text)`: control characters shown as `\\xNN` (for text printed without markup).
- `console(...)`: every Console mpiscope prints to; whatever reaches it, its text
  (not Rich's own styling) has its control characters replaced, as a last line of defence
  for a name printed without `name()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderHook
from rich.markup import escape
from rich.segment import Segment

# C0 controls (tab and newline too: a name has neither), DEL and C1
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# in rendered text Rich's own line breaks stay
_CONTROL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _shown(m: re.Match) -> str:
    return f"\\x{ord(m.group()):02x}"


def clean(text: object) -> str:
    """`text` with its control characters shown as `\\xNN`."""
    return _CONTROL.sub(_shown, str(text))


def name(text: object) -> str:
    """`text` as data in a Rich markup string or table cell."""
    return escape(clean(text))


class _Cleaned:
    """A renderable rendered with its text's control characters replaced."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions
                         ) -> Iterator[Segment]:
        for seg in console.render(self.inner, options):
            if seg.control or not _CONTROL_BUT_NEWLINE.search(seg.text):
                yield seg
            else:
                yield Segment(_CONTROL_BUT_NEWLINE.sub(_shown, seg.text), seg.style)


class _Hook(RenderHook):
    def process_renderables(self, renderables: list[RenderableType]
                            ) -> list[RenderableType]:
        return [_Cleaned(r) for r in renderables]


def console(**kwargs: Any) -> Console:
    """A Console (Rich's arguments) whose output carries no control character from data."""
    c = Console(**kwargs)
    c.push_render_hook(_Hook())
    return c
