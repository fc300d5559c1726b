"""mpi4py calls at marked lines: each is its own call site, file.py:LINE (python.c)."""
from mpi4py import MPI  # CALLSITE:import

comm = MPI.COMM_WORLD
rank = comm.Get_rank()


def exchange(value):
    if rank == 0:
        comm.send(value, dest=1, tag=7)  # CALLSITE:send
        return comm.recv(source=1, tag=8)  # CALLSITE:recv0
    value = comm.recv(source=0, tag=7)  # CALLSITE:recv1
    comm.send(value + 1, dest=0, tag=8)  # CALLSITE:send1
    return value


total = 0
for i in range(20):
    total += exchange(i)  # CALLSITE:exchange
    comm.Barrier()  # CALLSITE:barrier-loop
comm.Barrier()  # CALLSITE:barrier-end
s = comm.allreduce(total)  # CALLSITE:allreduce
print(f"rank {rank}: total {total} sum {s}")
