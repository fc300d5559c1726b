// C++: the same C symbols, called from C++ code with its own call sites.
#include <mpi.h>
#include <cstdio>
#include <vector>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<double> v(4, rank), sum(4);
    MPI_Allreduce(v.data(), sum.data(), 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); // CALLSITE:allreduce
    if (size > 1 && rank == 0)
        MPI_Send(v.data(), 4, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD); // CALLSITE:send
    else if (size > 1 && rank == 1)
        MPI_Recv(v.data(), 4, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::printf("rank %d sum %g\n", rank, sum[0]);
    MPI_Finalize();
    return 0;
}
