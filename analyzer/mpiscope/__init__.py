"""mpiscope: MPI tracing (PMPI -> OTF2) and performance analysis.

The public data model is a set of pandas DataFrames built from an OTF2 trace;
see docs/data-model.md.
"""

__version__ = "0.1.0"
