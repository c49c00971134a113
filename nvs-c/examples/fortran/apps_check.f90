! The reader for apps.f90 (a file of its own: the nvs module's bind(C) declarations of
! nvs_snapshot and nvs_free must not meet apps.f90's implicit-interface calls of them).
subroutine check(nobj, n, steps)
  use nvs
  implicit none
  integer, intent(in) :: nobj, n, steps
  real(c_double), allocatable, target :: got(:)
  type(c_ptr) :: pool
  integer(c_size_t) :: len
  character(len=4096) :: dir
  character(len=16) :: name
  integer :: k, i, step
  call get_environment_variable("NVS_DIR", dir)
  if (len_trim(dir) == 0) dir = "/dev/shm"
  if (nvs_pool_open(trim(dir)//"/nvs.0.pool"//c_null_char, NVS_OPEN_READ_ONLY, pool) /= NVS_OK) stop 4
  allocate(got(n))
  do step = 1, steps
     do k = 1, nobj
        write(name, '(a,i0)') 'obj', k
        if (nvs_get(pool, trim(name)//c_null_char, int(step, c_int64_t), c_loc(got), int(8 * n, c_size_t), len) &
             /= NVS_OK) stop 5
        if (len /= 8 * n) stop 6
        do i = 1, n
           if (got(i) /= step * 1d6 + k * 1d3 + i) stop 7
        end do
     end do
  end do
  if (nvs_pool_close(pool) /= NVS_OK) stop 8
end subroutine check
