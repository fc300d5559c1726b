"""mpi4py's pickle-based allreduce: Python objects travel by point-to-point messages."""
from mpi4py import MPI

comm = MPI.COMM_WORLD
total = 0
for _ in range(3):
    total = comm.allreduce(comm.rank + 1, op=MPI.SUM)
print(f"rank {comm.rank} sum {total}")
