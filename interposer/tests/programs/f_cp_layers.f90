! Call paths through Fortran module procedures, built without -g: frames are named
! `comm_mod::global_sum`, `solver_mod::step` (test_callpath.py).
module comm_mod
  use mpi
  implicit none
contains
  subroutine global_sum(x, s)
    double precision, intent(in) :: x
    double precision, intent(out) :: s
    integer :: ierr
    call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end subroutine global_sum
end module comm_mod

module solver_mod
  use comm_mod
  implicit none
contains
  subroutine step(x, s)
    double precision, intent(in) :: x
    double precision, intent(out) :: s
    call global_sum(x, s)
    s = s + 1
  end subroutine step
end module solver_mod

program f_cp_layers
  use mpi
  use solver_mod
  implicit none
  integer :: ierr, rank
  double precision :: s
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call step(1.0d0, s)
  if (rank == 0) print *, s
  call MPI_Finalize(ierr)
end program f_cp_layers
