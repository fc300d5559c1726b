! `use mpi_f08` calling functions only the wrappers generated from mpi.h record
! (Open MPI: the generated doors also answer the mpi_x_f08_ entry points).
program f_cov_f08
  use mpi_f08
  implicit none
  type(MPI_Win) :: win
  type(MPI_Comm) :: node
  integer :: mine(1), rank
  integer(kind=MPI_ADDRESS_KIND) :: winsize
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  winsize = 4
  mine(1) = rank
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node)  ! CALLSITE:split_type
  call MPI_Win_create(mine, winsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win)
  call MPI_Win_set_name(win, "f08win")
  call MPI_Win_fence(0, win)
  call MPI_Win_free(win)
  call MPI_Comm_free(node)
  print '(a,i0,a)', 'rank ', rank, ' done'
  call MPI_Finalize()
end program f_cov_f08
