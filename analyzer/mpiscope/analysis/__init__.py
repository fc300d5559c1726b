"""Analyses of one trace (wait states, breakdown, statistics, iterations, findings) and
comparisons of analyzed runs. Reads through mpiscope.archive; never renders or launches."""
