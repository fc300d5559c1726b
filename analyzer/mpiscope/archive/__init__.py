"""Reading traces: OTF2 decoding (native reader), salvaged and recovered ranks, the
Parquet cache, and the files a trace directory holds. Depends only on the base modules
(errors, paths, output)."""
