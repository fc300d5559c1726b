// Call paths through C++ layers, built without -g: every frame is named by its
// demangled function (test_callpath.py).
#include <mpi.h>
#include <cstdio>

namespace physics {
struct Halo {
    double exchange(double x);
};
struct Solver {
    Halo halo;
    double step(double x);
};

__attribute__((noinline)) double Halo::exchange(double x)
{
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}

__attribute__((noinline)) double Solver::step(double x)
{
    return halo.exchange(x) + 1;
}
}  // namespace physics

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    physics::Solver s;
    double r = s.step(1.0);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::printf("%g\n", r);
    MPI_Finalize();
    return 0;
}
