! MPI_Alltoallw from Fortran (mpif.h): one INTEGER to every rank, datatypes per peer.
program f_alltoallw
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nprocs, i
  integer, allocatable :: sbuf(:), rbuf(:), counts(:), displs(:), types(:)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  allocate(sbuf(nprocs), rbuf(nprocs), counts(nprocs), displs(nprocs), types(nprocs))
  do i = 1, nprocs
    sbuf(i) = 100 * rank + i - 1
    counts(i) = 1
    displs(i) = 4 * (i - 1)
    types(i) = MPI_INTEGER
  end do
  call MPI_Alltoallw(sbuf, counts, displs, types, rbuf, counts, displs, types, MPI_COMM_WORLD, ierr) ! CALLSITE:alltoallw
  print '(A,I0,A,I0)', 'rank ', rank, ' got ', sum(rbuf)
  call MPI_Finalize(ierr)
end program f_alltoallw
