! nvs.f90: the Fortran module over libnvs (use nvs), with iso_c_binding.
!
! The NVStream wrapper (nvstream.h) and the C ABI's pool calls a Fortran code needs to
! read its data back (nvs.h). nvs_alloc takes a Fortran string (nvs_alloc(n, "temperature"),
! trailing blanks trimmed); the other calls' names and paths are C strings: pass
! trim(name)//c_null_char.
! Statuses are integer(c_int): NVS_OK (0) or an NVS_E_* code; nvs_error_message() says
! what failed last. Build: gfortran -c nvs.f90 (makes nvs.mod), then link with -lnvs
! (or libnvs.a -lpthread -ldl -lm).
module nvs
  use iso_c_binding
  implicit none
  private :: c_strlen, c_nvs_alloc

  integer(c_int), parameter :: NVS_OK = 0, NVS_E_ARG = 1, NVS_E_NOT_FOUND = 2, &
       NVS_E_TOO_SMALL = 3, NVS_E_FULL = 4, NVS_E_TOO_LARGE = 5, NVS_E_CORRUPT = 6, &
       NVS_E_BUSY = 7, NVS_E_READ_ONLY = 8, NVS_E_IO = 9, NVS_E_VERSION = 10, &
       NVS_E_DELTA = 11, NVS_E_PANIC = 12, NVS_E_OTHER = 13
  integer(c_int), parameter :: NVS_OPEN_READ_WRITE = 0, NVS_OPEN_READ_ONLY = 1
  ! NVS_LATEST of nvs.h (Fortran names ignore case: nvs_latest is the function).
  integer(c_int64_t), parameter :: NVS_VERSION_LATEST = 0

  interface
     ! --- the NVStream wrapper ---
     function nvs_init(proc_id) bind(c, name="nvs_init") result(status)
       import :: c_int
       integer(c_int), value :: proc_id
       integer(c_int) :: status
     end function nvs_init

     ! nvstream.h's nvs_alloc; the module's nvs_alloc (below) makes the C string.
     function c_nvs_alloc(n, s) bind(c, name="nvs_alloc") result(ptr)
       import :: c_long, c_char, c_ptr
       integer(c_long), value :: n
       character(kind=c_char), dimension(*) :: s
       type(c_ptr) :: ptr
     end function c_nvs_alloc

     subroutine nvs_free(ptr) bind(c, name="nvs_free")
       import :: c_ptr
       type(c_ptr), value :: ptr
     end subroutine nvs_free

     subroutine nvs_snapshot(proc_id) bind(c, name="nvs_snapshot")
       import :: c_int
       integer(c_int), value :: proc_id
     end subroutine nvs_snapshot

     function nvs_finalize() bind(c, name="nvs_finalize") result(status)
       import :: c_int
       integer(c_int) :: status
     end function nvs_finalize

     ! --- pools (nvs.h) ---
     function nvs_pool_create(path, size, opts, pool) bind(c, name="nvs_pool_create") result(status)
       import :: c_char, c_int64_t, c_ptr, c_int
       character(kind=c_char), dimension(*) :: path
       integer(c_int64_t), value :: size
       type(c_ptr), value :: opts          ! c_null_ptr: the defaults
       type(c_ptr) :: pool                 ! out
       integer(c_int) :: status
     end function nvs_pool_create

     function nvs_pool_open(path, mode, pool) bind(c, name="nvs_pool_open") result(status)
       import :: c_char, c_int, c_ptr
       character(kind=c_char), dimension(*) :: path
       integer(c_int), value :: mode
       type(c_ptr) :: pool                 ! out
       integer(c_int) :: status
     end function nvs_pool_open

     function nvs_pool_close(pool) bind(c, name="nvs_pool_close") result(status)
       import :: c_ptr, c_int
       type(c_ptr), value :: pool
       integer(c_int) :: status
     end function nvs_pool_close

     function nvs_put(pool, lane, name, data, len, version) bind(c, name="nvs_put") result(status)
       import :: c_ptr, c_int32_t, c_char, c_size_t, c_int64_t, c_int
       type(c_ptr), value :: pool
       integer(c_int32_t), value :: lane
       character(kind=c_char), dimension(*) :: name
       type(c_ptr), value :: data          ! c_loc(array)
       integer(c_size_t), value :: len     ! bytes
       integer(c_int64_t) :: version       ! out
       integer(c_int) :: status
     end function nvs_put

     function nvs_get(pool, name, version, buf, cap, len) bind(c, name="nvs_get") result(status)
       import :: c_ptr, c_char, c_int64_t, c_size_t, c_int
       type(c_ptr), value :: pool
       character(kind=c_char), dimension(*) :: name
       integer(c_int64_t), value :: version
       type(c_ptr), value :: buf           ! c_loc(array)
       integer(c_size_t), value :: cap     ! bytes
       integer(c_size_t) :: len            ! out: the object's length in bytes
       integer(c_int) :: status
     end function nvs_get

     function nvs_latest(pool, name, version) bind(c, name="nvs_latest") result(status)
       import :: c_ptr, c_char, c_int64_t, c_int
       type(c_ptr), value :: pool
       character(kind=c_char), dimension(*) :: name
       integer(c_int64_t) :: version       ! out
       integer(c_int) :: status
     end function nvs_latest

     function nvs_last_error() bind(c, name="nvs_last_error") result(msg)
       import :: c_ptr
       type(c_ptr) :: msg
     end function nvs_last_error

     function c_strlen(s) bind(c, name="strlen") result(n)
       import :: c_ptr, c_size_t
       type(c_ptr), value :: s
       integer(c_size_t) :: n
     end function c_strlen
  end interface

contains

  ! Memory for n bytes of the object `name`, registered with the rank (nvstream.h's
  ! nvs_alloc; c_null_ptr on failure). n is C's unsigned long: a non-negative
  ! integer(c_long). `name` is a Fortran string: its trailing blanks are trimmed (a
  ! character(20) variable names "cells", not "cells" and 15 blanks), and the NUL is
  ! appended here; a name that has a c_null_char ("cells"//c_null_char, the older way)
  ! ends there.
  function nvs_alloc(n, name) result(ptr)
    integer(c_long), intent(in) :: n
    character(len=*), intent(in) :: name
    type(c_ptr) :: ptr
    integer :: last
    last = index(name, c_null_char) - 1
    if (last < 0) last = len_trim(name)
    ptr = c_nvs_alloc(n, name(1:last)//c_null_char)
  end function nvs_alloc

  ! The message of the last failed call on this thread, as a Fortran string.
  function nvs_error_message() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    p = nvs_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    do i = 1, n
       msg(i:i) = chars(i)
    end do
  end function nvs_error_message

end module nvs
