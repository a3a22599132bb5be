! Compiles a kernel through an in-memory cache twice: a miss, then a hit with its lowered name.
program consumer
  use, intrinsic :: iso_c_binding
  use progcache
  implicit none
  type(c_ptr) :: cache
  integer(c_int8_t), allocatable :: cubin(:)
  type(pcache_lowered), allocatable :: lowered(:)
  logical :: hit
  integer(c_int32_t) :: st
  integer :: round
  st = pcache_open_f("memory:", cache)
  if (st /= PCACHE_OK) error stop "open"
  do round = 1, 2
    st = pcache_compile_f(cache, &
      "template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }", &
      "scale.cu", [character(len=16) :: "-arch=sm_90"], [character(len=16) :: "scale<float>"], &
      cubin, lowered, from_cache=hit)
    if (st /= PCACHE_OK) error stop "compile"
    if (hit .neqv. (round == 2)) error stop "miss, then hit"
    if (size(cubin) < 64 .or. lowered(1)%symbol /= "_Z5scaleIfEvPT_S0_") error stop "result"
  end do
  st = pcache_close(cache)
  print '(a)', "fortran consumer: miss then hit, " // lowered(1)%symbol
end program
