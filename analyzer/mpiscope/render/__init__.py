"""Presenting analyses: terminal summary, HTML and Markdown reports, static figures, and
the one colour palette the web UI shares. Depends on analysis and archive only."""
