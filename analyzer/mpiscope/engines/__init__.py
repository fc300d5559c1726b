"""Where an analysis runs: in this process on pandas tables, or on a Dask cluster.

    from mpiscope.engines import cluster, daskcache, choose
    with cluster.connect(workers=2, memory_limit="2GB") as client:   # or scheduler="tcp://..."
        tables = daskcache.open_cache(trace_dir)                      # dask dataframes

`choose.engine_for(trace_dir, "auto")` states when Dask is picked; `convert.convert` turns an
OTF2 archive into the partitioned Parquet cache with one Dask task per group of ranks;
`dask_engine.analyze` runs the analyses of `analysis.session` with the per-rank ones on
the cluster. This layer sits above `analysis` (it reuses its code per partition) and below
the commands, the web UI and the notebook façade.
"""
