! A Fortran module procedure calling MPI, built without -g: its call site is the
! demangled `comm_layer::global_sum`.
module comm_layer
  use mpi
  implicit none
contains
  subroutine global_sum(x, s)
    double precision, intent(in) :: x
    double precision, intent(out) :: s
    integer :: ierr
    call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  end subroutine global_sum
end module comm_layer

program f_names
  use mpi
  use comm_layer
  implicit none
  integer :: ierr
  double precision :: s
  call MPI_Init(ierr)
  call global_sum(1.0d0, s)
  print *, s
  call MPI_Finalize(ierr)
end program f_names
