! A legacy Fortran rank as older NVStream codes are written: implicit interfaces and a
! Cray pointer (gfortran -fcray-pointer). Its calls link to nvs_init_, alloc_,
! nvs_snapshot_ and nvs_finalize_. Then check (which uses the nvs module) reads every
! version back.
program legacy
  implicit none
  integer*8 alloc
  integer nvs_init, nvs_finalize
  external alloc, nvs_init, nvs_finalize, nvs_snapshot
  real*8 temp(1000)
  pointer (p, temp)
  integer*8 n
  integer rank, step, i
  rank = 1
  n = 8 * 1000
  if (nvs_init(rank) .ne. 0) stop 1
  p = alloc(n, 'temp'//char(0))
  if (p .eq. 0) stop 2
  do step = 1, 3
     do i = 1, 1000
        temp(i) = step * 1000.0d0 + i
     end do
     call nvs_snapshot(rank)
  end do
  if (nvs_finalize() .ne. 0) stop 3
  call check(3)
end program legacy

subroutine check(steps)
  use nvs
  implicit none
  integer, intent(in) :: steps
  real(c_double), allocatable, target :: got(:)
  type(c_ptr) :: pool
  integer(c_size_t) :: len
  character(len=4096) :: dir
  integer :: k, i
  call get_environment_variable("NVS_DIR", dir)
  if (len_trim(dir) == 0) dir = "/dev/shm"
  if (nvs_pool_open(trim(dir)//"/nvs.1.pool"//c_null_char, NVS_OPEN_READ_ONLY, pool) /= NVS_OK) stop 4
  allocate(got(1000))
  do k = 1, steps
     if (nvs_get(pool, "temp"//c_null_char, int(k, c_int64_t), c_loc(got), 8000_c_size_t, len) /= NVS_OK) &
          stop 5
     if (len /= 8000) stop 6
     do i = 1, 1000
        if (got(i) /= k * 1000.0d0 + i) stop 7
     end do
  end do
  if (nvs_pool_close(pool) /= NVS_OK) stop 8
  print '(a, i0, a)', "fortran (legacy, alloc_): ", steps, " versions read back exact"
end subroutine check
