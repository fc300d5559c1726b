! Matched probe, a nonblocking collective and Comm_idup from Fortran (use mpi): the doors
! convert MPI_Message and request handles (Open MPI) or forward (MPICH).
program f_mprobe
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, partner, msg, req, dup, x, y
  integer :: sbuf(3), rbuf(3), a2a_s(2), a2a_r(2)
  integer :: status(MPI_STATUS_SIZE)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  partner = 1 - rank
  sbuf = rank + 1
  call MPI_Isend(sbuf, 3, MPI_INTEGER, partner, 7, MPI_COMM_WORLD, req, ierr)
  call MPI_Mprobe(partner, 7, MPI_COMM_WORLD, msg, status, ierr)
  call MPI_Mrecv(rbuf, 3, MPI_INTEGER, msg, MPI_STATUS_IGNORE, ierr) ! CALLSITE:mrecv
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  a2a_s = 10 * rank + [0, 1]
  call MPI_Ialltoall(a2a_s, 1, MPI_INTEGER, a2a_r, 1, MPI_INTEGER, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Comm_idup(MPI_COMM_WORLD, dup, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  x = 1
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, dup, ierr)
  print '(A,I0,A,I0,A,I0,A,I0)', 'rank ', rank, ' got ', sum(rbuf), ' a2a ', sum(a2a_r), &
    ' n ', y
  call MPI_Comm_free(dup, ierr)
  call MPI_Finalize(ierr)
end program f_mprobe
