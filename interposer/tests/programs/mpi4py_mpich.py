"""mpi4py's buffer methods on numpy arrays. On an MPI-4 library (MPICH 4) mpi4py 4 calls the
large-count functions: comm.Send is MPI_Send_c, comm.Allreduce MPI_Allreduce_c, ..."""

import numpy as np
from mpi4py import MPI  # CALLSITE:import

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
N = 1000
a = np.arange(N, dtype="d") + rank
if rank == 0:
    comm.Send(a, dest=1, tag=7)  # CALLSITE:send
elif rank == 1:
    b = np.empty(N, dtype="d")
    comm.Recv(b, source=0, tag=7)  # CALLSITE:recv
ring = np.empty(N, dtype="d")
MPI.Request.Waitall([comm.Irecv(ring, source=(rank - 1) % size, tag=8),
                     comm.Isend(a, dest=(rank + 1) % size, tag=8)])
total = np.empty(N, dtype="d")
comm.Allreduce(a, total, op=MPI.SUM)  # CALLSITE:allreduce
# rank i gives its first i + 1 integers
counts = [i + 1 for i in range(size)]
displs = [sum(counts[:i]) for i in range(size)]
gathered = np.empty(sum(counts), dtype="d")
comm.Allgatherv(np.arange(rank + 1, dtype="d"), [gathered, counts, displs, MPI.DOUBLE])
print(f"rank {rank}: sum {total.sum():.0f} gathered {gathered.sum():.0f}", flush=True)
