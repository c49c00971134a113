! NVStream's applications, by their shapes, unchanged Fortran calling the wrapper:
! - GTC: alloc through a bind(C) interface taking character(kind=c_char) :: varname(10),
!   so the name arrives blank-padded with no NUL and no length; `call nvs_snapshot()`
!   with no argument; a read and a write one element before an array (chargei's
!   zonali(0), a 0- vs 1-based port).
! - CM1: 120 registered objects (more than NVS_DELTA=mprotect used to track: 64).
! - miniAMR: nvs_free of every object after nvs_finalize (a silent no-op).
! Then check (apps_check.f90, through the nvs module) reads every version of every object
! back by its trimmed name, byte-exact. Run with NVS_DIR set; NVS_DELTA as the caller likes.
module apps_alloc
  use, intrinsic :: iso_c_binding
  implicit none
  interface
     type(c_ptr) function alloc(vsize, varname) bind(C)
       import :: c_long, c_char, c_ptr
       integer(kind=c_long) :: vsize
       character(kind=c_char) :: varname(10)
     end function alloc
  end interface
end module apps_alloc

program apps
  use apps_alloc
  implicit none
  integer, parameter :: nobj = 120, n = 1000, steps = 3
  type arr
     real(c_double), pointer :: v(:)
  end type arr
  type(arr) :: objs(nobj)
  integer nvs_init, nvs_finalize
  external nvs_init, nvs_finalize, nvs_snapshot, nvs_free
  character(len=10) :: name
  type(c_ptr) :: cp
  integer(c_long) :: bytes
  integer :: rank, k, i, step, below
  real(c_double) :: s
  rank = 0
  if (nvs_init(rank) /= 0) stop 1
  bytes = 8 * n
  do k = 1, nobj
     write(name, '(a,i0)') 'obj', k
     cp = alloc(bytes, name)
     if (.not. c_associated(cp)) stop 2
     call c_f_pointer(cp, objs(k)%v, [n])
  end do
  s = 0
  below = 0
  do step = 1, steps
     do k = 1, nobj
        do i = 1, n
           objs(k)%v(i) = step * 1d6 + k * 1d3 + i
        end do
     end do
     s = s + objs(1)%v(below)
     objs(1)%v(below) = -1d0
     call nvs_snapshot()
  end do
  if (nvs_finalize() /= 0) stop 3
  do k = 1, nobj
     call nvs_free(objs(k)%v(1))
  end do
  call check(nobj, n, steps)
  if (s == 12345.678d0) print *, "(an unlikely value read before the first array)"
  print '(a, i0, a, i0, a)', "fortran (apps' shapes): ", nobj, " objects x ", steps, &
       " snapshots read back exact (the element before the first array read and written)"
end program apps
