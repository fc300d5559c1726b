// A namespaced C++ method calling MPI, built without -g: its call site is the
// demangled name.
#include <mpi.h>
#include <cstdio>

namespace physics {
struct Halo {
    double exchange(double x);
};

__attribute__((noinline)) double Halo::exchange(double x)
{
    double sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum;
}
}  // namespace physics

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    physics::Halo h;
    std::printf("%g\n", h.exchange(1.0));
    MPI_Finalize();
    return 0;
}
