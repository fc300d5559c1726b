"""Analyses of one trace (wait states, breakdown, statistics, iterations, findings), the
session that computes each of them once per trace (`session.Analysis`), and comparisons of
analyzed runs. Reads through mpiscope.archive; never renders or launches."""
