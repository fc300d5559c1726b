"""mpi4py's buffer-based Allreduce: the real MPI collective, 3 times."""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
x = np.array([comm.rank + 1.0, 2.0])
y = np.empty_like(x)
for _ in range(3):
    comm.Allreduce(x, y, op=MPI.SUM)  # CALLSITE:allreduce
print(f"rank {comm.rank} sum {y[0]:g}")
