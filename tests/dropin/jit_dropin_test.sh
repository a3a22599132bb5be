#!/usr/bin/env bash
# The drop-in nvJitLink and libNVVM, differentially: a program linked with -lnvJitLink -lnvvm
# (jit_client.c) runs on the real libraries, then through `progcache run` cold (every link and
# compile a miss) and warm (every one a hit), and with PCACHE_DISABLE=1. Every status, size, log
# and output byte must match the real libraries'; the warm run must be all hits and must map
# neither real library; an input edited between runs must miss and match the real libraries.
# Usage: jit_dropin_test.sh PROGCACHE JIT_CLIENT TOOLKIT
set -u
pc=$1 client=$2 toolkit=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home XDG_CONFIG_HOME=$work/config PCACHE_URI=sqlite:$work/cache.db
unset PCACHE_DISABLE PCACHE_NVJITLINK_LIBRARY PCACHE_NVVM_LIBRARY
mkdir -p "$work/in" "$HOME"
in=$work/in
real_libs=$toolkit/lib64:$toolkit/nvvm/lib64
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The inputs, made with the real NVRTC (through a cache of their own) and the toolkit's fatbinary.
nvrtc() { # nvrtc SOURCE-TEXT OUT TARGET [NVRTC OPTIONS...]
  local text=$1 out=$2 target=$3
  shift 3
  printf '%s\n' "$text" >"$work/src.cu"
  "$pc" --cache memory: compile "$work/src.cu" --target "$target" -o "$in/$out" -- -arch=sm_90 "$@" >/dev/null ||
    fail "could not make $out"
}
helper_cu() { printf 'extern "C" __device__ float helper(float x) { return x + %s.0f; }' "$1"; }
kernel_cu='extern "C" __device__ float helper(float);
extern "C" __global__ void k(float *x) { x[threadIdx.x] = helper(x[threadIdx.x]); }'
make_link_inputs() { # the helper's constant
  nvrtc 'extern "C" __global__ void k(float *x) { x[threadIdx.x] *= 3.0f; }' k.ptx ptx
  nvrtc "$kernel_cu" a.ltoir ltoir -dlto -rdc=true
  nvrtc "$(helper_cu "$1")" b.ltoir ltoir -dlto -rdc=true
  nvrtc "$kernel_cu" c.ptx ptx -rdc=true
  nvrtc "$(helper_cu "$1")" d.cubin cubin -rdc=true
  "$toolkit/bin/fatbinary" --create="$in/d.fatbin" --image3=kind=elf,sm=90,file="$in/d.cubin" ||
    fail "fatbinary failed"
  printf 'garbage' >"$in/garbage.ptx"
}
layout='target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"
target triple = "nvptx64-nvidia-cuda"'
kernel_ll() { # the function the kernel calls
  cat <<IR
$layout

define void @scale(float* %a, float %s) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %idx = zext i32 %tid to i64
  %p = getelementptr float, float* %a, i64 %idx
  %v = load float, float* %p
  %e = call float @$1(float %v)
  %r = fmul float %e, %s
  store float %r, float* %p
  ret void
}

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare float @$1(float)

!nvvm.annotations = !{!0}
!0 = !{void (float*, float)* @scale, !"kernel", i32 1}
!nvvmir.version = !{!1}
!1 = !{i32 2, i32 0}
IR
}
make_nvvm_inputs() { # the helper's constant
  kernel_ll __nv_expf >"$in/kernel.ll"
  kernel_ll helper >"$in/caller.ll"
  cat >"$in/helper.ll" <<IR
$layout

define float @helper(float %x) {
  %r = fadd float %x, $1
  ret float %r
}

!nvvmir.version = !{!0}
!0 = !{i32 2, i32 0}
IR
  printf 'define void @broken( {\n' >"$in/broken.ll"
  cp "$toolkit/nvvm/libdevice/libdevice.10.bc" "$in/"
}
make_link_inputs 1
make_nvvm_inputs 1.0

# Each drop-in exports exactly what the real library does, under the same symbol versions.
dropin_dir=$("$pc" run -- sh -c 'echo "$PCACHE_RUN_DROPIN_DIR"')
exports() { nm -D --defined-only "$1" | awk '$2 != "A" { print $3 }' | sort; }
for lib in libnvJitLink.so.13 libnvvm.so.4; do
  if [ "$(uname -m)" = x86_64 ]; then
    diff <(exports "$toolkit/lib64/$lib") <(exports "$dropin_dir/$lib") >"$work/exports.diff" ||
      fail "$lib: the drop-in's exports differ from the real library's: $(cat "$work/exports.diff")"
  fi
  real_soname=$(objdump -p "$toolkit/lib64/$lib" | awk '/SONAME/ { print $2 }')
  [ "$(objdump -p "$dropin_dir/$lib" | awk '/SONAME/ { print $2 }')" = "$real_soname" ] ||
    fail "$lib: the drop-in's SONAME is not $real_soname"
done

run() { # run TAG MODE [launcher...]: the client's outputs in $work/TAG, its JIT mappings in TAG.maps
  local tag=$1 mode=$2
  shift 2
  mkdir -p "$work/$tag"
  "$@" "$client" "$mode" "$work/$tag" "$in" "$work/$tag.maps" 2>"$work/$tag.err" ||
    fail "$tag: the client failed: $(cat "$work/$tag.err")"
}
same() { # same TAG REFERENCE
  if diff -r "$work/$2" "$work/$1" >"$work/$1.diff"; then
    echo "ok: $1 answers exactly as $2 ($(ls "$work/$1" | wc -l) files)"
  else
    fail "$1 differs from $2: $(head -30 "$work/$1.diff")"
  fi
}
maps_real() { # whether TAG mapped a real (not drop-in) library named like $2
  grep -v nvrtc-dropin "$work/$1.maps" | grep -v progcache/nvrtc | grep -q "$2"
}
stat_field() { # 0 before the cache exists
  "$pc" stats --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])" 2>/dev/null || echo 0
}

check() { # check MODE LIBRARY-NAME: real, cold, warm, disabled
  local mode=$1 lib=$2
  LD_LIBRARY_PATH=$real_libs run "real_$mode" "$mode" env
  grep -q 'complete: 0\|compile: 0' "$work/real_$mode/transcript.txt" ||
    fail "$mode: the real library made nothing: $(head "$work/real_$mode/transcript.txt")"
  maps_real "real_$mode" "$lib" || fail "the real $mode run does not show $lib in its maps (the check is blind)"
  local made misses0 hits0
  made=$(grep -c 'complete: 0\|compile: 0' "$work/real_$mode/transcript.txt")
  misses0=$(stat_field misses) hits0=$(stat_field hits)
  run "cold_$mode" "$mode" "$pc" run --
  same "cold_$mode" "real_$mode"
  echo "$mode: $made successful runs; cold: $(($(stat_field misses) - misses0)) misses, $(($(stat_field hits) - hits0)) hits"
  hits0=$(stat_field hits)
  run "warm_$mode" "$mode" "$pc" run --
  same "warm_$mode" "real_$mode"
  local warm_hits=$(($(stat_field hits) - hits0))
  echo "$mode: warm: $warm_hits hits"
  [ "$warm_hits" -ge 1 ] || fail "$mode: the warm run hit nothing"
  hits0=$(stat_field hits)
  PCACHE_DISABLE=1 run "disabled_$mode" "$mode" "$pc" run --
  same "disabled_$mode" "real_$mode"
  [ "$(stat_field hits)" = "$hits0" ] || fail "$mode: PCACHE_DISABLE=1 still looked up"
}
check link libnvJitLink
check nvvm libnvvm

# Warm, the successful links and compiles (and the versions) are answered without the real
# libraries: a client of successes only maps neither. (The failing cases reach the real library by
# design: a refusal and its log are the real library's.)
for mode in link-ok nvvm-ok; do
  LD_LIBRARY_PATH=$real_libs run "real_$mode" "$mode" env
  run "warm_$mode" "$mode" "$pc" run --
  same "warm_$mode" "real_$mode"
  ! maps_real "warm_$mode" 'libnvJitLink\|libnvvm' ||
    fail "the warm $mode run mapped a real library: $(cat "$work/warm_$mode.maps")"
done

# A full disk: a new cache whose files cannot grow past 64 KiB once made (RLIMIT_FSIZE, SIGXFSZ
# ignored, so writes fail with EFBIG). Every link and compile misses and is not stored, and every
# answer is still the real libraries'; the cache's file is whole afterwards.
for mode in link-ok nvvm-ok; do
  (trap '' XFSZ && ulimit -f 64 && PCACHE_URI=sqlite:$work/full.db run "full_$mode" "$mode" "$pc" run --)
  same "full_$mode" "real_$mode"
done
full_entries=$(PCACHE_URI=sqlite:$work/full.db stat_field entries)
full_misses=$(PCACHE_URI=sqlite:$work/full.db stat_field misses)
[ "$full_entries" -lt "$full_misses" ] ||
  fail "full disk: $full_entries entries for $full_misses misses: the disk was never full (the case is blind)"
echo "full disk: $full_misses misses, $full_entries stored; db and WAL bytes: $(stat -c %s "$work/full.db" "$work/full.db-wal" | tr '\n' ' ')"
"$pc" --cache "sqlite:$work/full.db" verify >/dev/null 2>&1 || fail "the full cache fails verify"

# Inputs edited between runs: the next run links and compiles anew and matches the real libraries.
make_link_inputs 2
make_nvvm_inputs 2.0
for mode in link nvvm; do
  LD_LIBRARY_PATH=$real_libs run "real_edited_$mode" "$mode" env
  cmp -s "$work/real_$mode/transcript.txt" "$work/real_edited_$mode/transcript.txt" &&
    diff -rq "$work/real_$mode" "$work/real_edited_$mode" >/dev/null &&
    fail "$mode: editing the inputs changed nothing (the case is blind)"
  misses0=$(stat_field misses)
  run "edited_$mode" "$mode" "$pc" run --
  same "edited_$mode" "real_edited_$mode"
  [ "$(stat_field misses)" -gt "$misses0" ] || fail "$mode: edited inputs did not miss"
done

# Another build of each library (PCACHE_TEST_JIT_OTHER: the nvidia-nvjitlink and nvidia-nvvm
# 13.5 wheels, against the toolkit's 13.0), on the same cache and the same (edited) inputs: the
# drop-ins run it (PCACHE_*_LIBRARY) and never answer with the toolkit build's entries (every
# success misses cold, then hits warm), the answers are that build's, and the toolkit's entries
# still hit afterwards. pcache_compile (the CLI) the same, and with another libdevice.
if [ -n "${PCACHE_TEST_JIT_OTHER:-}" ]; then
  other=$PCACHE_TEST_JIT_OTHER/nvidia/cu13
  export PCACHE_NVJITLINK_LIBRARY=$other/lib/libnvJitLink.so.13 PCACHE_NVVM_LIBRARY=$other/lib/libnvvm.so.4
  for mode in link-ok nvvm-ok; do
    LD_LIBRARY_PATH=$other/lib run "real_other_$mode" "$mode" env
    maps_real "real_other_$mode" "$other/lib" || fail "the other build's real run did not map it"
    made=$(grep -c 'complete: 0\|compile: 0' "$work/real_other_$mode/transcript.txt")
    misses0=$(stat_field misses) hits0=$(stat_field hits)
    run "other_cold_$mode" "$mode" "$pc" run --
    same "other_cold_$mode" "real_other_$mode"
    [ $(($(stat_field misses) - misses0)) = "$made" ] && [ "$(stat_field hits)" = "$hits0" ] ||
      fail "$mode: the other build hit the toolkit build's entries ($(($(stat_field hits) - hits0)) hits)"
    hits0=$(stat_field hits)
    run "other_warm_$mode" "$mode" "$pc" run --
    same "other_warm_$mode" "real_other_$mode"
    [ $(($(stat_field hits) - hits0)) = "$made" ] || fail "$mode: the other build's warm run is not all hits"
    echo "$mode: the 13.5 build: $made misses cold, $made hits warm, none from 13.0's entries"
  done
  cmp -s "$work/real_other_nvvm-ok/libdevice.result" "$work/real_edited_nvvm/libdevice.result" &&
    echo "note: libNVVM 13.5 and 13.0 compile the libdevice case to the same PTX"
  unset PCACHE_NVJITLINK_LIBRARY PCACHE_NVVM_LIBRARY
  LD_LIBRARY_PATH=$real_libs run real_edited_link-ok link-ok env
  misses0=$(stat_field misses)
  run edited_again_link-ok link-ok "$pc" run --
  same edited_again_link-ok real_edited_link-ok
  [ "$(stat_field misses)" = "$misses0" ] || fail "the toolkit's links missed after the other build's run"
  # pcache_compile and pcache_link through the CLI: the library build and libdevice are keyed.
  cli() { "$pc" --cache "sqlite:$work/cli.db" compile "$@" 2>/dev/null | awk 'NR == 1 { sub(":", "", $1); print $1 }'; }
  [ "$(cli "$in/k.ptx" -o "$work/k1.cubin")" = miss ] || fail "cli: the first PTX compile did not miss"
  [ "$(cli "$in/k.ptx" -o "$work/k1.cubin")" = hit ] || fail "cli: the second PTX compile did not hit"
  [ "$(PCACHE_NVJITLINK_LIBRARY=$other/lib/libnvJitLink.so.13 cli "$in/k.ptx" -o "$work/k2.cubin")" = miss ] ||
    fail "cli: nvJitLink 13.5 hit 13.0's entry"
  [ "$(cli "$in/kernel.ll" -o "$work/k1.ptx" -- -use-libdevice)" = miss ] || fail "cli: libdevice compile did not miss"
  [ "$(cli "$in/kernel.ll" -o "$work/k1.ptx" -- -use-libdevice)" = hit ] || fail "cli: libdevice compile did not hit"
  [ "$(PCACHE_LIBDEVICE=$other/nvvm/libdevice/libdevice.10.bc cli "$in/kernel.ll" -o "$work/k2.ptx" -- -use-libdevice)" = miss ] ||
    fail "cli: another libdevice hit the first one's entry"
  [ "$(PCACHE_NVVM_LIBRARY=$other/lib/libnvvm.so.4 cli "$in/kernel.ll" -o "$work/k3.ptx" -- -use-libdevice)" = miss ] ||
    fail "cli: libNVVM 13.5 hit 13.0's entry"
  echo "cli: another nvJitLink, libNVVM or libdevice misses"
else
  echo "skip: another nvJitLink and libNVVM build (PCACHE_TEST_JIT_OTHER unset: no PyPI)"
fi

# NVIDIA's Python bindings (cuda-pathfinder finds the libraries and dlopens them by full path:
# run's helper sends each to its drop-in), through a cache of their own. The inputs are the edited
# ones; the bad IR fails on purpose, so the warm run maps libNVVM for that one (the C client
# covers nvJitLink's failures: here every link succeeds and the warm run maps no nvJitLink).
if [ -n "${PCACHE_TEST_CUDA_CORE:-}" ]; then
  py=(env PYTHONPATH="$PCACHE_TEST_CUDA_CORE" CUDA_HOME="$toolkit" python3
      "$(cd "$(dirname "$0")" && pwd)/cuda_bindings_jit_client.py")
  for tag in py_real py_cold py_warm; do mkdir -p "$work/$tag"; done
  "${py[@]}" "$work/py_real" "$in" "$work/py_real.maps" 2>"$work/py_real.err" ||
    fail "cuda-bindings on the real libraries failed: $(tail -5 "$work/py_real.err")"
  maps_real py_real libnvJitLink || fail "cuda-bindings did not load the real nvJitLink (the check is blind)"
  for tag in py_cold py_warm; do
    PCACHE_URI=sqlite:$work/py.db "$pc" run --preload -- "${py[@]}" "$work/$tag" "$in" "$work/$tag.maps" \
      2>"$work/$tag.err" || fail "cuda-bindings through the drop-ins ($tag) failed: $(tail -5 "$work/$tag.err")"
  done
  same py_cold py_real
  same py_warm py_real
  ! maps_real py_warm libnvJitLink || fail "cuda-bindings' warm run mapped the real nvJitLink"
  py_hits=$(PCACHE_URI=sqlite:$work/py.db stat_field hits)
  [ "$py_hits" = 5 ] || fail "cuda-bindings' warm run: $py_hits hits, want 5 (3 links, 2 compiles)"
  echo "cuda-bindings: warm run $py_hits hits; maps: $(cut -c74- "$work/py_warm.maps" | sort -u | tr '\n' ' ')"
else
  echo "skip: cuda-bindings (PCACHE_TEST_CUDA_CORE unset: no PyPI)"
fi

# numba-cuda and numba's own CUDA target (PCACHE_TEST_NUMBA: a directory with numba-cuda, numba,
# llvmlite and packaging; cuda-bindings from PCACHE_TEST_CUDA_CORE): cuda.compile_ptx of four
# kernels, real vs cold vs warm, the warm run all hits and no real libNVVM mapped. numba-cuda
# reaches libNVVM through cuda.bindings.nvvm (and asks NVRTC for its architectures); numba's own
# target through ctypes, dlopen("libnvvm.so").
if [ -n "${PCACHE_TEST_NUMBA:-}" ] && [ -n "${PCACHE_TEST_CUDA_CORE:-}" ]; then
  for variant in numba-cuda numba; do
    flag=$([ $variant = numba-cuda ] && echo --numba-cuda || true)
    nb=(env PYTHONPATH="$PCACHE_TEST_NUMBA:$PCACHE_TEST_CUDA_CORE" CUDA_HOME="$toolkit" python3
        "$(cd "$(dirname "$0")" && pwd)/numba_client.py" $flag)
    for tag in real cold warm; do mkdir -p "$work/$variant-$tag"; done
    "${nb[@]}" "$work/$variant-real" "$work/$variant-real.maps" 2>"$work/$variant-real.err" ||
      fail "$variant on the real libNVVM failed: $(tail -5 "$work/$variant-real.err")"
    maps_real "$variant-real" libnvvm || fail "$variant did not load the real libNVVM (the check is blind)"
    for tag in cold warm; do
      PCACHE_URI=sqlite:$work/$variant.db "$pc" run --preload -- "${nb[@]}" "$work/$variant-$tag" \
        "$work/$variant-$tag.maps" 2>"$work/$variant-$tag.err" ||
        fail "$variant through the drop-ins ($tag) failed: $(tail -5 "$work/$variant-$tag.err")"
    done
    same "$variant-cold" "$variant-real"
    same "$variant-warm" "$variant-real"
    ! maps_real "$variant-warm" libnvvm || fail "$variant's warm run mapped the real libNVVM"
    nb_hits=$(PCACHE_URI=sqlite:$work/$variant.db stat_field hits)
    nb_misses=$(PCACHE_URI=sqlite:$work/$variant.db stat_field misses)
    [ "$nb_hits" = 4 ] && [ "$nb_misses" = 4 ] ||
      fail "$variant: $nb_misses misses cold and $nb_hits hits warm, want 4 and 4"
    echo "$variant: 4 kernels, cold $nb_misses misses, warm $nb_hits hits, no real libNVVM mapped warm"
  done
else
  echo "skip: numba-cuda (PCACHE_TEST_NUMBA unset: no PyPI)"
fi

"$pc" ls >"$work/ls.txt"
grep -q 'nvJitLink' "$work/ls.txt" || fail "ls does not show the nvJitLink drop-in's entries: $(cat "$work/ls.txt")"
grep -q 'libNVVM' "$work/ls.txt" || fail "ls does not show the libNVVM drop-in's entries"

if [ "$failures" -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all JIT drop-in checks passed"
