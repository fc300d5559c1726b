! RMA and MPI-IO from `use mpi`: a Put between two fences into the next rank's window,
! then every rank writes what it received to its 16-byte slot of FILE (argument 1),
! collectively at an explicit offset. Handles, MPI_ADDRESS_KIND and MPI_OFFSET_KIND
! integers and a CHARACTER file name cross the Fortran doors.
program f_rmaio
  use mpi
  implicit none
  integer :: ierr, rank, np, win, fh
  integer(kind=MPI_ADDRESS_KIND) :: wsize, disp
  integer(kind=MPI_OFFSET_KIND) :: off
  integer :: buf(4), mine(4), status(MPI_STATUS_SIZE), n
  character(len=512) :: path
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)
  call get_command_argument(1, path)
  buf = -1
  mine = rank
  wsize = 16
  disp = 0
  call MPI_Win_create(buf, wsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Put(mine, 4, MPI_INTEGER, mod(rank + 1, np), disp, 4, MPI_INTEGER, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call MPI_Win_free(win, ierr)
  call MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE + MPI_MODE_WRONLY, &
                     MPI_INFO_NULL, fh, ierr)
  off = rank * 16
  call MPI_File_write_at_all(fh, off, buf, 4, MPI_INTEGER, status, ierr)
  call MPI_Get_count(status, MPI_BYTE, n, ierr)
  call MPI_File_close(fh, ierr)
  print '(a,i0,a,i0,a,i0)', 'rank ', rank, ' got ', buf(1), ' wrote ', n
  call MPI_Finalize(ierr)
end program f_rmaio
