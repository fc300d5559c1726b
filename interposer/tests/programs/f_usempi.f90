! Fortran with use mpi (the module over the same bindings).
program f_usempi
  use mpi
  implicit none

  integer :: ierr, rank, nprocs, right, left, split, srank
  integer :: reqs(2), ivals(4)
  double precision :: x, y
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  right = mod(rank + 1, nprocs)
  left = mod(rank + nprocs - 1, nprocs)
  x = rank + 1
  call MPI_ALLREDUCE(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr) ! CALLSITE:allreduce
  ivals = rank
  call MPI_ALLREDUCE(MPI_IN_PLACE, ivals, 4, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr) ! CALLSITE:in_place
  call MPI_BCAST(ivals, 2, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  call MPI_IRECV(ivals(3), 2, MPI_INTEGER, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_ISEND(ivals(1), 2, MPI_INTEGER, right, 5, MPI_COMM_WORLD, reqs(2), ierr) ! CALLSITE:isend
  call MPI_WAITALL(2, reqs, MPI_STATUSES_IGNORE, ierr)
  if (nprocs > 1) then
    if (rank == 0) then
      call MPI_SEND(x, 1, MPI_DOUBLE_PRECISION, 1, 9, MPI_COMM_WORLD, ierr) ! CALLSITE:send
    else if (rank == 1) then
      call MPI_RECV(x, 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    end if
  end if
  call MPI_BARRIER(MPI_COMM_WORLD, ierr)
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, mod(rank, 2), rank, split, ierr)
  call MPI_COMM_RANK(split, srank, ierr)
  call MPI_ALLREDUCE(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, split, ierr) ! CALLSITE:allreduce_split
  call MPI_COMM_FREE(split, ierr)
  print '(A,I0,A,F6.1)', 'rank ', rank, ' y=', y
  call MPI_FINALIZE(ierr)
end program f_usempi
