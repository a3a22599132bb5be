! progcache for Fortran: bind(C) interfaces over the whole C API of libprogcache.so.1, keeping the
! C names and types (handles as type(c_ptr), statuses as integer(c_int32_t), NUL-terminated
! strings as character(kind=c_char) :: s(*), options as type(c_ptr), value), plus a few
! idiomatic wrappers (the *_f procedures). See include/progcache/progcache.h for each function.
!
!   use progcache
!   type(c_ptr) :: cache
!   st = pcache_open("memory:" // c_null_char, c_null_ptr, cache)
module progcache
  use, intrinsic :: iso_c_binding
  implicit none

  integer(c_int32_t), parameter :: PCACHE_OK = 0, PCACHE_NOT_FOUND = 1, &
    PCACHE_ERR_INVALID_ARG = -1, PCACHE_ERR_NO_MEMORY = -2, PCACHE_ERR_IO = -3, &
    PCACHE_ERR_CORRUPT = -4, PCACHE_ERR_UNSUPPORTED = -5, PCACHE_ERR_BUSY = -6, &
    PCACHE_ERR_PERMISSION = -7, PCACHE_ERR_TOO_LARGE = -8, PCACHE_ERR_COMPILE = -9, &
    PCACHE_ERR_CUDA_UNAVAILABLE = -10, PCACHE_ERR_CUDA = -11, PCACHE_ERR_REMOTE = -12, &
    PCACHE_ERR_INTERNAL = -13
  integer(c_int32_t), parameter :: PCACHE_CODE_CXX = 0, PCACHE_CODE_PTX = 1, PCACHE_CODE_NVVM = 2
  integer(c_int32_t), parameter :: PCACHE_TARGET_CUBIN = 0, PCACHE_TARGET_PTX = 1, &
    PCACHE_TARGET_LTOIR = 2
  integer(c_int32_t), parameter :: PCACHE_INPUT_CUBIN = 0, PCACHE_INPUT_PTX = 1, &
    PCACHE_INPUT_LTOIR = 2, PCACHE_INPUT_FATBIN = 3, PCACHE_INPUT_OBJECT = 4, &
    PCACHE_INPUT_LIBRARY = 5
  integer, parameter :: PCACHE_KEY_SIZE = 32
  integer(c_int32_t), parameter :: PCACHE_OPEN_ALLOW_SHARED = 1, PCACHE_OPEN_ALLOW_PRIVILEGED = 2

  type, bind(C) :: pcache_options
    integer(c_int32_t) :: struct_size
    integer(c_int32_t) :: flags
    integer(c_int64_t) :: max_size_bytes
    type(c_ptr) :: secret
    integer(c_int64_t) :: secret_size
  end type

  type, bind(C) :: pcache_stats
    integer(c_int32_t) :: struct_size
    integer(c_int32_t) :: reserved
    integer(c_int64_t) :: hits, misses, puts, deletes, evictions, bytes_read, bytes_written, &
      corrupt, healed, tier_errors, tier_skips
    integer(c_int64_t) :: uncacheable  ! since 0.4
  end type

  !> The counters every process using a cache shares (pcache_get_shared_stats, since 0.4).
  type, bind(C) :: pcache_shared_stats
    integer(c_int32_t) :: struct_size
    integer(c_int32_t) :: reserved
    integer(c_int64_t) :: hits, misses, evictions, compile_us_saved, corrupt, uncacheable, &
      tier_errors, tier_timeouts
    integer(c_int64_t) :: healed  ! since 0.5
  end type

  !> A name expression and its lowered (mangled) symbol, as pcache_compile_f returns them.
  type :: pcache_lowered
    character(len=:), allocatable :: expression, symbol
  end type

  ! A NUL-terminated copy of a Fortran string, for the pointer arrays pcache_program takes.
  type :: pcache_cstring
    character(kind=c_char, len=:), allocatable :: s
  end type

  !> One input of pcache_link_f: its kind (PCACHE_INPUT_*), a name, and its bytes.
  type :: pcache_link_data
    integer(c_int32_t) :: kind = PCACHE_INPUT_CUBIN
    character(len=:), allocatable :: name
    integer(c_int8_t), allocatable :: bytes(:)
  end type

  type, bind(C) :: pcache_link_input
    integer(c_int32_t) :: struct_size
    integer(c_int32_t) :: kind
    type(c_ptr) :: name
    type(c_ptr) :: data
    integer(c_size_t) :: size
  end type

  type, bind(C) :: pcache_link_job
    integer(c_int32_t) :: struct_size
    integer(c_int32_t) :: target
    type(c_ptr) :: options
    integer(c_size_t) :: num_options
    type(c_ptr) :: inputs
    integer(c_size_t) :: num_inputs
  end type

  type, bind(C) :: pcache_view
    type(c_ptr) :: data
    integer(c_size_t) :: size
    type(c_ptr) :: token
  end type

  type, bind(C) :: pcache_program
    integer(c_int32_t) :: struct_size
    integer(c_int32_t) :: code_type
    integer(c_int32_t) :: target
    integer(c_int32_t) :: nvrtc_version
    type(c_ptr) :: name
    type(c_ptr) :: source
    integer(c_size_t) :: source_size
    type(c_ptr) :: options
    integer(c_size_t) :: num_options
    type(c_ptr) :: header_names
    type(c_ptr) :: header_sources
    integer(c_size_t) :: num_headers
    type(c_ptr) :: name_expressions
    integer(c_size_t) :: num_name_expressions
    type(c_ptr) :: extra_digest
    integer(c_size_t) :: extra_digest_size
  end type

  interface
    function pcache_program_init(program, struct_size) bind(C, name="pcache_program_init")
      import :: pcache_program, c_int32_t
      type(pcache_program), intent(inout) :: program
      integer(c_int32_t), value :: struct_size
      integer(c_int32_t) :: pcache_program_init
    end function
    function pcache_stats_init(stats, struct_size) bind(C, name="pcache_stats_init")
      import :: pcache_stats, c_int32_t
      type(pcache_stats), intent(inout) :: stats
      integer(c_int32_t), value :: struct_size
      integer(c_int32_t) :: pcache_stats_init
    end function
    function pcache_get_shared_stats(cache, stats) bind(C, name="pcache_get_shared_stats")
      import :: c_ptr, pcache_shared_stats, c_int32_t
      type(c_ptr), value :: cache
      type(pcache_shared_stats), intent(inout) :: stats
      integer(c_int32_t) :: pcache_get_shared_stats
    end function
    function pcache_options_init(options, struct_size) bind(C, name="pcache_options_init")
      import :: c_int32_t, pcache_options
      type(pcache_options), intent(inout) :: options
      integer(c_int32_t), value :: struct_size
      integer(c_int32_t) :: pcache_options_init
    end function
    function pcache_open(uri, options, cache) bind(C, name="pcache_open")
      import :: c_char, c_ptr, c_int32_t
      character(kind=c_char), intent(in) :: uri(*)
      type(c_ptr), value :: options
      type(c_ptr), intent(out) :: cache
      integer(c_int32_t) :: pcache_open
    end function
    function pcache_close(cache) bind(C, name="pcache_close")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: cache
      integer(c_int32_t) :: pcache_close
    end function
    function pcache_get(cache, key, key_size, data, size) bind(C, name="pcache_get")
      import :: c_ptr, c_size_t, c_int32_t
      type(c_ptr), value :: cache, key
      integer(c_size_t), value :: key_size
      type(c_ptr), intent(out) :: data
      integer(c_size_t), intent(out) :: size
      integer(c_int32_t) :: pcache_get
    end function
    function pcache_get_into(cache, key, key_size, buffer, capacity, size) bind(C, name="pcache_get_into")
      import :: c_ptr, c_size_t, c_int32_t
      type(c_ptr), value :: cache, key, buffer
      integer(c_size_t), value :: key_size, capacity
      integer(c_size_t), intent(out) :: size
      integer(c_int32_t) :: pcache_get_into
    end function
    subroutine pcache_free(data) bind(C, name="pcache_free")
      import :: c_ptr
      type(c_ptr), value :: data
    end subroutine
    function pcache_get_view(cache, key, key_size, view) bind(C, name="pcache_get_view")
      import :: c_ptr, c_size_t, c_int32_t, pcache_view
      type(c_ptr), value :: cache, key
      integer(c_size_t), value :: key_size
      type(pcache_view), intent(out) :: view
      integer(c_int32_t) :: pcache_get_view
    end function
    subroutine pcache_view_release(view) bind(C, name="pcache_view_release")
      import :: pcache_view
      type(pcache_view), intent(inout) :: view
    end subroutine
    function pcache_put(cache, key, key_size, data, size) bind(C, name="pcache_put")
      import :: c_ptr, c_size_t, c_int32_t
      type(c_ptr), value :: cache, key, data
      integer(c_size_t), value :: key_size, size
      integer(c_int32_t) :: pcache_put
    end function
    function pcache_delete(cache, key, key_size) bind(C, name="pcache_delete")
      import :: c_ptr, c_size_t, c_int32_t
      type(c_ptr), value :: cache, key
      integer(c_size_t), value :: key_size
      integer(c_int32_t) :: pcache_delete
    end function
    function pcache_count(cache, entries) bind(C, name="pcache_count")
      import :: c_ptr, c_int64_t, c_int32_t
      type(c_ptr), value :: cache
      integer(c_int64_t), intent(out) :: entries
      integer(c_int32_t) :: pcache_count
    end function
    function pcache_size(cache, bytes) bind(C, name="pcache_size")
      import :: c_ptr, c_int64_t, c_int32_t
      type(c_ptr), value :: cache
      integer(c_int64_t), intent(out) :: bytes
      integer(c_int32_t) :: pcache_size
    end function
    function pcache_clear(cache) bind(C, name="pcache_clear")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: cache
      integer(c_int32_t) :: pcache_clear
    end function
    function pcache_get_stats(cache, stats) bind(C, name="pcache_get_stats")
      import :: c_ptr, c_int32_t, pcache_stats
      type(c_ptr), value :: cache
      type(pcache_stats), intent(inout) :: stats
      integer(c_int32_t) :: pcache_get_stats
    end function
    function pcache_get_tier_stats(cache, tier, stats) bind(C, name="pcache_get_tier_stats")
      import :: c_ptr, c_int32_t, pcache_stats
      type(c_ptr), value :: cache
      integer(c_int32_t), value :: tier
      type(pcache_stats), intent(inout) :: stats
      integer(c_int32_t) :: pcache_get_tier_stats
    end function
    function pcache_status_string(status) bind(C, name="pcache_status_string")
      import :: c_ptr, c_int32_t
      integer(c_int32_t), value :: status
      type(c_ptr) :: pcache_status_string
    end function
    function pcache_last_error() bind(C, name="pcache_last_error")
      import :: c_ptr
      type(c_ptr) :: pcache_last_error
    end function
    function pcache_version() bind(C, name="pcache_version")
      import :: c_int32_t
      integer(c_int32_t) :: pcache_version
    end function
    function pcache_version_string() bind(C, name="pcache_version_string")
      import :: c_ptr
      type(c_ptr) :: pcache_version_string
    end function
    function pcache_make_key(program, key_out) bind(C, name="pcache_make_key")
      import :: c_ptr, c_int32_t, pcache_program
      type(pcache_program), intent(in) :: program
      type(c_ptr), value :: key_out
      integer(c_int32_t) :: pcache_make_key
    end function
    function pcache_compile(cache, program, out) bind(C, name="pcache_compile")
      import :: c_ptr, c_int32_t, pcache_program
      type(c_ptr), value :: cache
      type(pcache_program), intent(in) :: program
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: pcache_compile
    end function
    function pcache_compiled_data(result, size) bind(C, name="pcache_compiled_data")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: result
      integer(c_size_t), intent(out) :: size
      type(c_ptr) :: pcache_compiled_data
    end function
    function pcache_compiled_from_cache(result) bind(C, name="pcache_compiled_from_cache")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: result
      integer(c_int32_t) :: pcache_compiled_from_cache
    end function
    function pcache_compiled_log(result) bind(C, name="pcache_compiled_log")
      import :: c_ptr
      type(c_ptr), value :: result
      type(c_ptr) :: pcache_compiled_log
    end function
    function pcache_compiled_lowered_name(result, name_expression) bind(C, name="pcache_compiled_lowered_name")
      import :: c_ptr, c_char
      type(c_ptr), value :: result
      character(kind=c_char), intent(in) :: name_expression(*)
      type(c_ptr) :: pcache_compiled_lowered_name
    end function
    function pcache_compiled_key(result) bind(C, name="pcache_compiled_key")
      import :: c_ptr
      type(c_ptr), value :: result
      type(c_ptr) :: pcache_compiled_key
    end function
    function pcache_compiled_nvrtc_version(result) bind(C, name="pcache_compiled_nvrtc_version")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: result
      integer(c_int32_t) :: pcache_compiled_nvrtc_version
    end function
    function pcache_compiled_compile_us(result) bind(C, name="pcache_compiled_compile_us")
      import :: c_ptr, c_int64_t
      type(c_ptr), value :: result
      integer(c_int64_t) :: pcache_compiled_compile_us
    end function
    function pcache_compiled_elapsed_us(result) bind(C, name="pcache_compiled_elapsed_us")
      import :: c_ptr, c_int64_t
      type(c_ptr), value :: result
      integer(c_int64_t) :: pcache_compiled_elapsed_us
    end function
    subroutine pcache_compiled_free(result) bind(C, name="pcache_compiled_free")
      import :: c_ptr
      type(c_ptr), value :: result
    end subroutine
    function pcache_link_job_init(job, struct_size) bind(C, name="pcache_link_job_init")
      import :: pcache_link_job, c_int32_t
      type(pcache_link_job), intent(inout) :: job
      integer(c_int32_t), value :: struct_size
      integer(c_int32_t) :: pcache_link_job_init
    end function
    function pcache_link(cache, job, out) bind(C, name="pcache_link")
      import :: c_ptr, pcache_link_job, c_int32_t
      type(c_ptr), value :: cache
      type(pcache_link_job), intent(in) :: job
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: pcache_link
    end function
    function pcache_load_module(cache, program, out) bind(C, name="pcache_load_module")
      import :: c_ptr, c_int32_t, pcache_program
      type(c_ptr), value :: cache
      type(pcache_program), intent(in) :: program
      type(c_ptr), intent(out) :: out
      integer(c_int32_t) :: pcache_load_module
    end function
    function pcache_module_handle(module) bind(C, name="pcache_module_handle")
      import :: c_ptr
      type(c_ptr), value :: module
      type(c_ptr) :: pcache_module_handle
    end function
    function pcache_module_compiled(module) bind(C, name="pcache_module_compiled")
      import :: c_ptr
      type(c_ptr), value :: module
      type(c_ptr) :: pcache_module_compiled
    end function
    function pcache_module_get_function(module, name, function) bind(C, name="pcache_module_get_function")
      import :: c_ptr, c_char, c_int32_t
      type(c_ptr), value :: module
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), intent(out) :: function
      integer(c_int32_t) :: pcache_module_get_function
    end function
    function pcache_module_unload(module) bind(C, name="pcache_module_unload")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: module
      integer(c_int32_t) :: pcache_module_unload
    end function
    ! strlen, for pcache_string_f (public because a binding label cannot be private)
    function c_strlen(s) bind(C, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function
  end interface

contains

  !> A Fortran copy of a NUL-terminated C string ("" for a null pointer).
  function pcache_string_f(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function

  !> The calling thread's last error, as a Fortran string.
  function pcache_last_error_f() result(s)
    character(len=:), allocatable :: s
    s = pcache_string_f(pcache_last_error())
  end function

  !> pcache_open with a Fortran string URI ("" = the default cache) and default options.
  function pcache_open_f(uri, cache) result(status)
    character(len=*), intent(in) :: uri
    type(c_ptr), intent(out) :: cache
    integer(c_int32_t) :: status
    status = pcache_open(trim(uri) // c_null_char, c_null_ptr, cache)
  end function

  !> Stores the bytes of data under the bytes of key.
  function pcache_put_f(cache, key, data) result(status)
    type(c_ptr), intent(in) :: cache
    character(len=*), intent(in), target :: key
    integer(c_int8_t), intent(in), target :: data(:)
    integer(c_int32_t) :: status
    status = pcache_put(cache, c_loc(key), int(len(key), c_size_t), c_loc(data), &
                        int(size(data), c_size_t))
  end function

  !> Looks key up; on a hit data is allocated with the value's bytes (size 0 on a miss).
  function pcache_get_f(cache, key, data) result(status)
    type(c_ptr), intent(in) :: cache
    character(len=*), intent(in), target :: key
    integer(c_int8_t), allocatable, intent(out) :: data(:)
    integer(c_int32_t) :: status
    type(c_ptr) :: p
    integer(c_size_t) :: n
    integer(c_int8_t), pointer :: bytes(:)
    status = pcache_get(cache, c_loc(key), int(len(key), c_size_t), p, n)
    if (status /= PCACHE_OK) then
      allocate(data(0))
      return
    end if
    allocate(data(n))
    if (n > 0) then
      call c_f_pointer(p, bytes, [n])
      data = bytes
    end if
    call pcache_free(p)
  end function

  !> Compiles CUDA C++ through the cache (pcache_compile) from Fortran strings. options and
  !> name_expressions are arrays of strings (trailing blanks are trimmed; pass an empty array for
  !> none). On PCACHE_OK, binary holds the cubin (or PTX, LTO-IR: target) and lowered(i) the
  !> expression and mangled symbol of name_expressions(i) (symbol "" if unknown). log receives
  !> NVRTC's log, also on PCACHE_ERR_COMPILE; from_cache whether the cache answered.
  !> cache may be c_null_ptr (compile without caching).
  function pcache_compile_f(cache, source, name, options, name_expressions, binary, lowered, &
                            log, from_cache, target, code_type) result(status)
    type(c_ptr), intent(in) :: cache
    character(len=*), intent(in) :: source, name
    character(len=*), intent(in) :: options(:), name_expressions(:)
    integer(c_int8_t), allocatable, intent(out) :: binary(:)
    type(pcache_lowered), allocatable, intent(out) :: lowered(:)
    character(len=:), allocatable, intent(out), optional :: log
    logical, intent(out), optional :: from_cache
    integer(c_int32_t), intent(in), optional :: target
    integer(c_int32_t), intent(in), optional :: code_type  ! PCACHE_CODE_* (default CXX)
    integer(c_int32_t) :: status
    type(pcache_cstring), allocatable, target :: option_strings(:), expression_strings(:)
    type(c_ptr), allocatable, target :: option_pointers(:), expression_pointers(:)
    character(kind=c_char, len=:), allocatable, target :: c_source, c_name
    type(pcache_program) :: prog
    type(c_ptr) :: result, p
    integer(c_size_t) :: n
    integer(c_int8_t), pointer :: bytes(:)
    integer :: i
    call c_strings(options, option_strings, option_pointers)
    call c_strings(name_expressions, expression_strings, expression_pointers)
    c_source = source // c_null_char
    c_name = trim(name) // c_null_char
    status = pcache_program_init(prog, int(c_sizeof(prog), c_int32_t))
    if (status /= PCACHE_OK) return
    prog%code_type = PCACHE_CODE_CXX
    if (present(code_type)) prog%code_type = code_type
    prog%target = PCACHE_TARGET_CUBIN
    if (prog%code_type == PCACHE_CODE_NVVM) prog%target = PCACHE_TARGET_PTX
    if (present(target)) prog%target = target
    prog%name = c_loc(c_name)
    prog%source = c_loc(c_source)
    prog%options = c_loc(option_pointers)
    prog%num_options = size(options, kind=c_size_t)
    prog%name_expressions = c_loc(expression_pointers)
    prog%num_name_expressions = size(name_expressions, kind=c_size_t)
    status = pcache_compile(cache, prog, result)
    if (present(log)) log = ""
    if (present(from_cache)) from_cache = .false.
    allocate(binary(0), lowered(0))
    if (.not. c_associated(result)) return
    if (present(log)) log = pcache_string_f(pcache_compiled_log(result))
    if (status == PCACHE_OK) then
      if (present(from_cache)) from_cache = pcache_compiled_from_cache(result) /= 0
      p = pcache_compiled_data(result, n)
      deallocate(binary)
      allocate(binary(n))
      if (n > 0) then
        call c_f_pointer(p, bytes, [n])
        binary = bytes
      end if
      deallocate(lowered)
      allocate(lowered(size(name_expressions)))
      do i = 1, size(name_expressions)
        lowered(i)%expression = trim(name_expressions(i))
        lowered(i)%symbol = pcache_lowered_name_f(result, name_expressions(i))
      end do
    end if
    call pcache_compiled_free(result)
  end function

  !> Links inputs with nvJitLink through cache (pcache_link): the linked cubin (or PTX with
  !> target=PCACHE_TARGET_PTX) in binary; PCACHE_ERR_COMPILE with nvJitLink's log in log.
  function pcache_link_f(cache, inputs, options, binary, log, from_cache, target) result(status)
    type(c_ptr), intent(in) :: cache
    type(pcache_link_data), intent(in), target :: inputs(:)
    character(len=*), intent(in) :: options(:)
    integer(c_int8_t), allocatable, intent(out) :: binary(:)
    character(len=:), allocatable, intent(out), optional :: log
    logical, intent(out), optional :: from_cache
    integer(c_int32_t), intent(in), optional :: target
    integer(c_int32_t) :: status
    type(pcache_cstring), allocatable, target :: option_strings(:), name_strings(:)
    type(c_ptr), allocatable, target :: option_pointers(:)
    type(pcache_link_input), allocatable, target :: c_inputs(:)
    type(pcache_link_job) :: job
    type(c_ptr) :: result, p
    integer(c_size_t) :: n
    integer(c_int8_t), pointer :: bytes(:)
    integer :: i
    call c_strings(options, option_strings, option_pointers)
    allocate(c_inputs(max(1, size(inputs))), name_strings(size(inputs)))
    do i = 1, size(inputs)
      name_strings(i)%s = inputs(i)%name // c_null_char
      c_inputs(i)%struct_size = int(c_sizeof(c_inputs(i)), c_int32_t)
      c_inputs(i)%kind = inputs(i)%kind
      c_inputs(i)%name = c_loc(name_strings(i)%s)
      c_inputs(i)%data = c_loc(inputs(i)%bytes)
      c_inputs(i)%size = size(inputs(i)%bytes, kind=c_size_t)
    end do
    status = pcache_link_job_init(job, int(c_sizeof(job), c_int32_t))
    if (status /= PCACHE_OK) return
    if (present(target)) job%target = target
    job%options = c_loc(option_pointers)
    job%num_options = size(options, kind=c_size_t)
    job%inputs = c_loc(c_inputs)
    job%num_inputs = size(inputs, kind=c_size_t)
    status = pcache_link(cache, job, result)
    if (present(log)) log = ""
    if (present(from_cache)) from_cache = .false.
    allocate(binary(0))
    if (.not. c_associated(result)) return
    if (present(log)) log = pcache_string_f(pcache_compiled_log(result))
    if (status == PCACHE_OK) then
      if (present(from_cache)) from_cache = pcache_compiled_from_cache(result) /= 0
      p = pcache_compiled_data(result, n)
      deallocate(binary)
      allocate(binary(n))
      if (n > 0) then
        call c_f_pointer(p, bytes, [n])
        binary = bytes
      end if
    end if
    call pcache_compiled_free(result)
  end function

  ! NUL-terminated copies of strings (trailing blanks trimmed) and an array of pointers to them
  ! (one element at least, so that c_loc has an address to take).
  subroutine c_strings(strings, copies, pointers)
    character(len=*), intent(in) :: strings(:)
    type(pcache_cstring), allocatable, target, intent(out) :: copies(:)
    type(c_ptr), allocatable, intent(out) :: pointers(:)
    integer :: i
    allocate(copies(size(strings)), pointers(max(1, size(strings))))
    pointers = c_null_ptr
    do i = 1, size(strings)
      copies(i)%s = trim(strings(i)) // c_null_char
      pointers(i) = c_loc(copies(i)%s)
    end do
  end subroutine

  !> The lowered symbol of a name expression of a compiled result ("" if unknown).
  function pcache_lowered_name_f(result, expression) result(s)
    type(c_ptr), intent(in) :: result
    character(len=*), intent(in) :: expression
    character(len=:), allocatable :: s
    s = pcache_string_f(pcache_compiled_lowered_name(result, trim(expression) // c_null_char))
  end function
end module progcache
