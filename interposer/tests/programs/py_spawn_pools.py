"""mpi4py's process pools, whose workers are jobs spawned with MPI_Comm_spawn
(test_spawn.py): an mpi4py.futures.MPIPoolExecutor, then an mpi4py.util.pool.Pool, each of
2 workers, each mapping a function over a range. Run as `python3 py_spawn_pools.py` in a
job of one process."""

from mpi4py.futures import MPIPoolExecutor
from mpi4py.util import pool


def square(x: int) -> int:
    return x * x


if __name__ == "__main__":
    with MPIPoolExecutor(max_workers=2) as executor:
        print("futures: sum of squares", sum(executor.map(square, range(10))))
    with pool.Pool(2) as p:
        print("pool: sum of squares", sum(p.map(square, range(20))))
