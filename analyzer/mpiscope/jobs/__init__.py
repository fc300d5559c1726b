"""Running traced MPI jobs.

- `launch`: the one way to launch a traced job (environment, status file, run, Outcome);
- `mpirun`: the launcher command line for every target (local Open MPI or MPICH, or the
  emulated cluster);
- `capture`: the job's stdout passed through byte for byte and saved beside its trace;
- `verdict`: the line a run ends with (trace written, per-rank traces of a job that died,
  or why there is none);
- `study`: the Himeno study's runs;
- `cluster/`: the emulated cluster (network namespaces joined by tc-shaped links).

The emulated cluster stays here rather than becoming a tool of its own: it exists to run
traced jobs (`mpiscope run --cluster`, the study), its one edge to the rest is the
placement options the launcher line composes (cluster/placement.py), and its users reach
it through the `mpiscope cluster` command of the contract. It imports nothing of
mpiscope but `errors`, so it can still be lifted out whole if another tool needs it.
"""
