! Functions only the wrappers generated from mpi.h record, called from `use mpi`:
! MPI_Comm_split_type, a window with MPI_Win_fence and MPI_Get, and MPI_Win_set_name /
! MPI_Win_get_name, whose CHARACTER arguments add hidden lengths the door forwards.
program f_cov_rma
  use mpi
  implicit none
  ! arrays, as the bindings declare the buffers: a scalar may be passed as a temporary copy
  integer :: ierr, rank, nranks, node, win, namelen, mine(1), got(1)
  integer(kind=MPI_ADDRESS_KIND) :: winsize, disp
  character(len=MPI_MAX_OBJECT_NAME) :: winname

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node, ierr)  ! CALLSITE:split_type
  mine(1) = 100 + rank
  got(1) = -1
  winsize = 4
  disp = 0
  call MPI_Win_create(mine, winsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_set_name(win, "fwin", ierr)
  call MPI_Win_get_name(win, winname, namelen, ierr)
  call MPI_Win_fence(0, win, ierr)  ! CALLSITE:fence
  call MPI_Get(got, 1, MPI_INTEGER, mod(rank + 1, nranks), disp, 1, MPI_INTEGER, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_free(win, ierr)
  call MPI_Comm_free(node, ierr)
  print '(a,i0,a,i0,a,a,a,i0)', 'rank ', rank, ' got ', got(1), ' name ', winname(1:namelen), &
       ' ierr ', ierr
  call MPI_Finalize(ierr)
end program f_cov_rma
