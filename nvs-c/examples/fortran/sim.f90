! A Fortran rank instrumented for NVStream: two arrays from nvs_alloc, a snapshot per
! step, then the same program reads every version back through the pool calls and checks
! each value. NVS_DIR says where the pool goes (nvs_init's default: /dev/shm). Names are
! given to nvs_alloc as Fortran strings: a literal, a blank-padded variable, and (the
! older way) one ending in c_null_char.
program sim
  use nvs
  implicit none
  integer(c_int), parameter :: rank = 0
  integer, parameter :: n = 4096, steps = 5
  real(c_double), pointer :: temp(:)
  integer(c_int), pointer :: cells(:)
  real(c_double), allocatable, target :: got(:)
  type(c_ptr) :: pool
  integer(c_size_t) :: len
  integer(c_int64_t) :: latest
  character(len=4096) :: dir
  character(len=20) :: cells_name = "cells"
  integer(c_int), pointer :: old(:)
  integer :: step, i, k

  if (nvs_init(rank) /= NVS_OK) stop 1
  call c_f_pointer(nvs_alloc(int(8 * n, c_long), "temperature"), temp, [n])
  call c_f_pointer(nvs_alloc(int(4 * n, c_long), cells_name), cells, [n])
  call c_f_pointer(nvs_alloc(4_c_long, "old"//c_null_char), old, [1])
  old(1) = 7
  do step = 1, steps
     do i = 1, n
        temp(i) = step * 1000.0d0 + i
        cells(i) = step * 7 + i
     end do
     call nvs_snapshot(rank)
  end do
  if (nvs_finalize() /= NVS_OK) stop 2

  call get_environment_variable("NVS_DIR", dir)
  if (len_trim(dir) == 0) dir = "/dev/shm"
  if (nvs_pool_open(trim(dir)//"/nvs.0.pool"//c_null_char, NVS_OPEN_READ_ONLY, pool) /= NVS_OK) then
     print *, "open: ", nvs_error_message()
     stop 3
  end if
  if (nvs_latest(pool, "temperature"//c_null_char, latest) /= NVS_OK) stop 4
  ! Every name as given, no more, no less.
  if (nvs_latest(pool, "cells"//c_null_char, latest) /= NVS_OK) stop 10
  if (nvs_latest(pool, "old"//c_null_char, latest) /= NVS_OK) stop 11
  if (latest /= steps) stop 12
  allocate(got(n))
  do k = 1, int(latest)
     if (nvs_get(pool, "temperature"//c_null_char, int(k, c_int64_t), c_loc(got), &
          int(8 * n, c_size_t), len) /= NVS_OK) then
        print *, "get: ", nvs_error_message()
        stop 5
     end if
     if (len /= 8 * n) stop 6
     do i = 1, n
        if (got(i) /= k * 1000.0d0 + i) stop 7
     end do
  end do
  ! A version that does not exist: an error with a message, never a crash.
  if (nvs_get(pool, "temperature"//c_null_char, latest + 1, c_loc(got), int(8 * n, c_size_t), len) &
       /= NVS_E_NOT_FOUND) stop 8
  if (nvs_pool_close(pool) /= NVS_OK) stop 9
  print '(a, i0, a, i0, a)', "fortran: ", latest, " versions of ", n, " values read back exact"
end program sim
