"""Text from a trace in a Plotly figure: Plotly renders names, labels, titles and hover
text as a subset of HTML (`<a href>` becomes a link, `<b>` bold), and decodes entities, so
a name goes in HTML-escaped and shows as the text it is (reports and the web UI alike)."""

from __future__ import annotations

import html


def plot_text(value: object) -> str:
    return html.escape(str(value), quote=False)
