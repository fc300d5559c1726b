! Fortran 2008 bindings (use mpi_f08): typed handles, optional ierror.
program f_f08
  use mpi_f08
  implicit none
  integer :: rank, nprocs, right, left, srank
  type(MPI_Comm) :: split
  type(MPI_Request) :: reqs(2)
  integer :: ivals(4)
  double precision :: x, y
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  right = mod(rank + 1, nprocs)
  left = mod(rank + nprocs - 1, nprocs)
  x = rank + 1
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD) ! CALLSITE:allreduce
  ivals = rank
  call MPI_Allreduce(MPI_IN_PLACE, ivals, 4, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD) ! CALLSITE:in_place
  call MPI_Bcast(ivals, 2, MPI_INTEGER, 0, MPI_COMM_WORLD)
  call MPI_Irecv(ivals(3), 2, MPI_INTEGER, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, reqs(1))
  call MPI_Isend(ivals(1), 2, MPI_INTEGER, right, 5, MPI_COMM_WORLD, reqs(2)) ! CALLSITE:isend
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
  if (nprocs > 1) then
    if (rank == 0) then
      call MPI_Send(x, 1, MPI_DOUBLE_PRECISION, 1, 9, MPI_COMM_WORLD) ! CALLSITE:send
    else if (rank == 1) then
      call MPI_Recv(x, 1, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
    end if
  end if
  call MPI_Barrier(MPI_COMM_WORLD)
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, split)
  call MPI_Comm_rank(split, srank)
  call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, split) ! CALLSITE:allreduce_split
  call MPI_Comm_free(split)
  print '(A,I0,A,F6.1)', 'rank ', rank, ' y=', y
  call MPI_Finalize()
end program f_f08
