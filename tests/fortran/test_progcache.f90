! End-to-end use of the progcache Fortran module: open, put, get, stats, compile, lowered names.
program test_progcache
  use, intrinsic :: iso_c_binding
  use progcache
  implicit none
  type(c_ptr) :: cache, result, data_ptr
  integer(c_int32_t) :: st
  integer(c_int8_t), allocatable :: got(:)
  integer(c_int64_t) :: n
  integer(c_size_t) :: nbytes
  integer(c_int32_t) :: hit
  type(pcache_program) :: prog
  type(pcache_stats) :: stats
  character(kind=c_char, len=:), allocatable, target :: source, name, opt1, expr1
  type(c_ptr), target :: options(1), exprs(1)
  integer :: failures = 0

  st = pcache_open("memory:" // c_null_char, c_null_ptr, cache)
  call check(st == PCACHE_OK, "pcache_open with C types")
  st = pcache_close(cache)
  st = pcache_open_f("memory:", cache)
  call check(st == PCACHE_OK, "pcache_open_f")

  st = pcache_put_f(cache, "fortran-key", [1_c_int8_t, 2_c_int8_t, 3_c_int8_t])
  call check(st == PCACHE_OK, "put")
  st = pcache_get_f(cache, "fortran-key", got)
  call check(st == PCACHE_OK .and. size(got) == 3, "get hit")
  call check(all(got == [1_c_int8_t, 2_c_int8_t, 3_c_int8_t]), "get bytes")
  st = pcache_get_f(cache, "absent", got)
  call check(st == PCACHE_NOT_FOUND .and. size(got) == 0, "get miss")
  st = pcache_count(cache, n)
  call check(st == PCACHE_OK .and. n == 1, "count")
  stats%struct_size = int(c_sizeof(stats), c_int32_t)
  st = pcache_get_stats(cache, stats)
  call check(st == PCACHE_OK .and. stats%hits == 1 .and. stats%misses == 1, "stats")
  st = pcache_put_f(cache, "", [1_c_int8_t])
  call check(st == PCACHE_ERR_INVALID_ARG, "empty key refused")
  call check(len(pcache_last_error_f()) > 0, "last error text")
  call check(pcache_string_f(pcache_status_string(PCACHE_NOT_FOUND)) == "not found", "status string")

  source = "template <typename T> __global__ void axpy(T a, T *x, T *y, int n) {" // &
           " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }" // c_null_char
  name = "axpy.cu" // c_null_char
  opt1 = "-arch=sm_90" // c_null_char
  expr1 = "axpy<double>" // c_null_char
  options(1) = c_loc(opt1)
  exprs(1) = c_loc(expr1)
  prog%struct_size = int(c_sizeof(prog), c_int32_t)
  prog%code_type = PCACHE_CODE_CXX
  prog%target = PCACHE_TARGET_CUBIN
  prog%nvrtc_version = 0
  prog%name = c_loc(name)
  prog%source = c_loc(source)
  prog%source_size = 0
  prog%options = c_loc(options)
  prog%num_options = 1
  prog%header_names = c_null_ptr
  prog%header_sources = c_null_ptr
  prog%num_headers = 0
  prog%name_expressions = c_loc(exprs)
  prog%num_name_expressions = 1
  prog%extra_digest = c_null_ptr
  prog%extra_digest_size = 0

  st = pcache_compile(cache, prog, result)
  call check(st == PCACHE_OK, "compile (miss): " // pcache_last_error_f())
  hit = pcache_compiled_from_cache(result)
  call check(hit == 0, "first compile is a miss")
  call pcache_compiled_free(result)
  st = pcache_compile(cache, prog, result)
  hit = pcache_compiled_from_cache(result)
  call check(st == PCACHE_OK .and. hit == 1, "second compile is a hit")
  data_ptr = pcache_compiled_data(result, nbytes)
  call check(nbytes > 64, "cubin has bytes")
  call check(pcache_lowered_name_f(result, "axpy<double>") == "_Z4axpyIdEvT_PS0_S1_i", &
             "lowered name: " // pcache_lowered_name_f(result, "axpy<double>"))
  call pcache_compiled_free(result)

  call check_compile_f(cache, nbytes)
  call check_link_f(cache)

  st = pcache_close(cache)
  call check(st == PCACHE_OK, "close")

  if (failures > 0) then
    print '(i0, a)', failures, " checks failed"
    error stop 1
  end if
  print '(a)', "fortran: all checks passed"

contains
  ! The compile above from Fortran strings, through pcache_compile_f: a hit, with the binary and
  ! the lowered names as Fortran arrays; a compile error with its log; the shared counters.
  subroutine check_compile_f(cache, nbytes)
    type(c_ptr), intent(in) :: cache
    integer(c_size_t), intent(in) :: nbytes
    type(pcache_shared_stats) :: shared
    integer(c_int8_t), allocatable :: binary(:)
    type(pcache_lowered), allocatable :: lowered(:)
    character(len=:), allocatable :: compile_log
    logical :: cached
    integer(c_int32_t) :: st
    st = pcache_compile_f(cache, &
      "template <typename T> __global__ void axpy(T a, T *x, T *y, int n) {" // &
      " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }", &
      "axpy.cu", [character(len=16) :: "-arch=sm_90"], [character(len=16) :: "axpy<double>"], &
      binary, lowered, log=compile_log, from_cache=cached)
    call check(st == PCACHE_OK .and. cached, "pcache_compile_f hits: " // pcache_last_error_f())
    call check(size(binary) == nbytes, "pcache_compile_f returns the binary")
    call check(size(lowered) == 1, "one lowered name")
    call check(lowered(1)%expression == "axpy<double>", "the expression")
    call check(lowered(1)%symbol == "_Z4axpyIdEvT_PS0_S1_i", "its lowered name")
    st = pcache_compile_f(cache, "__global__ void broken( {", "broken.cu", &
      [character(len=16) :: "-arch=sm_90"], [character(len=1) ::], binary, lowered, log=compile_log)
    call check(st == PCACHE_ERR_COMPILE, "a compile error is PCACHE_ERR_COMPILE")
    call check(index(compile_log, "error") > 0, "with NVRTC's log: " // compile_log)
    call check(size(binary) == 0, "and no binary")
    shared%struct_size = int(c_sizeof(shared), c_int32_t)
    st = pcache_get_shared_stats(cache, shared)
    call check(st == PCACHE_OK .and. shared%hits >= 3, "shared stats")
  end subroutine

  ! LTO-IR compiled from Fortran, linked with nvJitLink through the cache: a miss, then a hit of
  ! the same cubin; a link nvJitLink refuses comes back with its log.
  subroutine check_link_f(cache)
    type(c_ptr), intent(in) :: cache
    type(pcache_link_data) :: inputs(1)
    integer(c_int8_t), allocatable :: ltoir(:), cubin(:), again(:)
    type(pcache_lowered), allocatable :: lowered(:)
    character(len=:), allocatable :: link_log
    logical :: cached
    integer(c_int32_t) :: st
    st = pcache_compile_f(cache, 'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }', &
      "k.cu", [character(len=16) :: "-arch=sm_90", "-rdc=true"], [character(len=1) ::], &
      ltoir, lowered, target=PCACHE_TARGET_LTOIR)
    call check(st == PCACHE_OK .and. size(ltoir) > 0, "LTO-IR: " // pcache_last_error_f())
    inputs(1)%kind = PCACHE_INPUT_LTOIR
    inputs(1)%name = "k.ltoir"
    inputs(1)%bytes = ltoir
    st = pcache_link_f(cache, inputs, [character(len=16) :: "-arch=sm_90", "-lto"], cubin, &
      from_cache=cached)
    call check(st == PCACHE_OK .and. .not. cached, "pcache_link_f links: " // pcache_last_error_f())
    call check(size(cubin) > 4, "a linked cubin")
    st = pcache_link_f(cache, inputs, [character(len=16) :: "-arch=sm_90", "-lto"], again, &
      from_cache=cached)
    call check(st == PCACHE_OK .and. cached, "pcache_link_f hits")
    call check(all(again == cubin), "the same cubin")
    st = pcache_link_f(cache, inputs, [character(len=16) :: "-arch=sm_90"], again, log=link_log)
    call check(st == PCACHE_ERR_COMPILE, "LTO-IR without -lto is refused")
    call check(index(link_log, "nvJitLink") > 0, "with nvJitLink's log: " // link_log)
  end subroutine

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(2a)', "FAILED: ", what
      failures = failures + 1
    end if
  end subroutine
end program
