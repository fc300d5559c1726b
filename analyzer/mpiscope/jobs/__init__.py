"""Running traced MPI jobs: the launcher (local Open MPI or MPICH, or the emulated
cluster), capture of the program's output, and the Himeno study."""
