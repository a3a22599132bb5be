#!/usr/bin/env bash
# The drop-in NVRTC, differentially: a program linked with -lnvrtc (nvrtc_client.c) runs on the
# real NVRTC, then through `progcache run` cold (every compile a miss) and warm (every compile a
# hit), and with PCACHE_DISABLE=1. Every status, size, log and output byte must match the real
# NVRTC's; the warm run must be all hits and must not map the real libnvrtc.
# With NVRTC 12 too (CLIENT12: the client built and linked for 12), the 12 drop-in is checked the
# same way through the same cache: it forwards to 12, and no entry of one major answers the other.
# Usage: dropin_test.sh PROGCACHE NVRTC_CLIENT REAL_NVRTC_DIR [CLIENT12 REAL_NVRTC12_DIR]
set -u
pc=$1 client=$2 real_dir=$3 client12=${4:-} real12_dir=${5:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME=$work/home XDG_CONFIG_HOME=$work/config PCACHE_URI=sqlite:$work/cache.db
unset PCACHE_DISABLE PCACHE_NVRTC_LIBRARY
mkdir -p "$work/inc" "$HOME"
printf '#define DISK_FACTOR 7\n' >"$work/inc/disk_header.h"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run TAG MODE [launcher...]: the client's outputs in $work/TAG, its nvrtc mappings in TAG.maps.
run() {
  local tag=$1 mode=$2
  shift 2
  run_client "$client" "$tag" "$mode" "$@"
}
run_client() {
  local client=$1 tag=$2 mode=$3
  shift 3
  mkdir -p "$work/$tag"
  if ! "$@" "$client" "$mode" "$work/$tag" "$work/inc" "$work/$tag.maps" 2>"$work/$tag.err"; then
    fail "$tag: the client failed: $(cat "$work/$tag.err")"
  fi
}
same() {  # same TAG REFERENCE
  if diff -r "$work/$2" "$work/$1" >"$work/$1.diff"; then
    echo "ok: $1 answers exactly as $2 ($(ls "$work/$1" | wc -l) files)"
  else
    fail "$1 differs from $2: $(head -20 "$work/$1.diff")"
  fi
}
maps_real() {  # whether TAG mapped a libnvrtc (of major ${2:-any}) that is not the drop-in
  grep -v nvrtc-dropin "$work/$1.maps" | grep -v progcache/nvrtc | grep -q "libnvrtc\\.so\\.${2:-}"
}
stat_field() { "$pc" stats --json | python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }

LD_LIBRARY_PATH=$real_dir run real kernels env
grep -q 'compile: NVRTC_SUCCESS' "$work/real/transcript.txt" || fail "the real NVRTC compiled nothing"
maps_real real || fail "the real run does not show the real libnvrtc in its maps (the check is blind)"

run cold kernels "$pc" run --
same cold real
maps_real cold || fail "a cold run through the drop-in never loaded the real NVRTC"
kernels=$(grep -c 'compile: NVRTC_SUCCESS' "$work/real/transcript.txt")
misses=$(stat_field misses) hits=$(stat_field hits)
[ "$misses" = "$kernels" ] && [ "$hits" = 0 ] || fail "cold: $hits hits, $misses misses (want 0, $kernels)"

run warm kernels "$pc" run --
same warm real
! maps_real warm || fail "the warm run mapped the real libnvrtc: $(cat "$work/warm.maps")"
hits=$(stat_field hits)
[ "$hits" = "$kernels" ] || fail "warm: $hits hits, want $kernels"
saved=$(stat_field compile_us_saved)
[ "$saved" -gt 0 ] || fail "warm hits saved no compile time in the shared statistics ($saved us)"
"$pc" ls >"$work/ls.txt"
grep -q ' nvrtc .*templates\.cu$' "$work/ls.txt" || fail "ls does not show the drop-in's entries: $(cat "$work/ls.txt")"

PCACHE_DISABLE=1 run disabled kernels "$pc" run --
same disabled real
[ "$(stat_field hits)" = "$kernels" ] || fail "PCACHE_DISABLE=1 still looked up"

# A header on disk edited between runs: the next run compiles anew and matches the real NVRTC.
printf '#define DISK_FACTOR 8\n' >"$work/inc/disk_header.h"
LD_LIBRARY_PATH=$real_dir run real_edited kernels env
run edited kernels "$pc" run --
same edited real_edited
cmp -s "$work/real/diskheaders.ptx" "$work/real_edited/diskheaders.ptx" &&
  fail "editing the header changed nothing (the case is blind)"

# Mistakes and failures: the drop-in answers them as NVRTC does, the second time too (a refusal
# NVRTC gives every time is answered from the cache; a program's calls after a refused compile
# reach a real program in the state NVRTC's would be in).
LD_LIBRARY_PATH=$real_dir run real_errors errors env
grep -q 'compile: NVRTC_ERROR_COMPILATION' "$work/real_errors/transcript.txt" ||
  fail "the error cases fail nothing"
run errors_cold errors "$pc" run --
same errors_cold real_errors
run errors_warm errors "$pc" run --
same errors_warm real_errors

# A JIT library's start (jitify2): the architectures NVRTC supports, a compile that fails on
# purpose, a kernel. Warm, all of it is answered without the real NVRTC.
LD_LIBRARY_PATH=$real_dir run real_startup startup env
grep -q 'compile: NVRTC_ERROR_COMPILATION' "$work/real_startup/transcript.txt" ||
  fail "the startup probe did not fail (the case is blind)"
run startup_cold startup "$pc" run --
same startup_cold real_startup
run startup_warm startup "$pc" run --
same startup_warm real_startup
! maps_real startup_warm || fail "the warm start mapped the real libnvrtc: $(cat "$work/startup_warm.maps")"

# Four threads compiling one program at once: one compiles, the others get its result; all
# answer as the real NVRTC does, cold and warm.
LD_LIBRARY_PATH=$real_dir run real_threads threads env
misses=$(stat_field misses)
run threads_cold threads "$pc" run --
same threads_cold real_threads
[ "$(stat_field misses)" = $((misses + 1)) ] || fail "4 threads compiling one program missed $(($(stat_field misses) - misses)) times, want 1"
run threads_warm threads "$pc" run --
same threads_warm real_threads
! maps_real threads_warm || fail "the warm threads run mapped the real libnvrtc"

# libprogcache in a process `progcache run` started finds the drop-in first on LD_LIBRARY_PATH
# (CUDA_HOME unset): it must skip it (the drop-in's ELF note) and compile with the real NVRTC,
# under the key it has outside, storing no drop-in entry.
printf 'extern "C" __global__ void k(float *x) { x[0] = 2; }\n' >"$work/k.cu"
key_of() { awk '/key/{print $NF}'; }
outside=$(env -u CUDA_HOME "$pc" --cache "sqlite:$work/own1.db" compile "$work/k.cu" --arch sm_90 -o "$work/k1.cubin" | key_of)
inside=$(env -u CUDA_HOME "$pc" --cache "sqlite:$work/own2.db" run -- "$pc" compile "$work/k.cu" --arch sm_90 -o "$work/k2.cubin" | key_of)
if [ -n "$outside" ] && [ "$outside" = "$inside" ] && cmp -s "$work/k1.cubin" "$work/k2.cubin" &&
  ! "$pc" --cache "sqlite:$work/own2.db" ls | grep -q ' nvrtc '; then
  echo "ok: libprogcache under progcache run never takes the drop-in for NVRTC"
else
  fail "libprogcache under progcache run: key '$inside' vs '$outside'; $("$pc" --cache "sqlite:$work/own2.db" ls)"
fi

# `progcache run` itself.
"$pc" run -- /nonexistent/command 2>/dev/null
[ $? = 127 ] || fail "run of a missing command does not exit 127"
printf 'x\n' >"$work/not-executable"
"$pc" run -- "$work/not-executable" 2>/dev/null
[ $? = 126 ] || fail "run of a file that is not executable does not exit 126"
# A script without "#!" runs under /bin/sh, found on PATH, as execvp (and a shell) runs it.
mkdir -p "$work/bin"
printf 'echo "ran $0 $1"\nexit 3\n' >"$work/bin/no-shebang"
chmod +x "$work/bin/no-shebang"
out=$(PATH=$work/bin:$PATH "$pc" run -- no-shebang one 2>/dev/null)
rc=$?
[ "$rc" = 3 ] && [ "$out" = "ran $work/bin/no-shebang one" ] ||
  fail "run of a script without #!: exit $rc, '$out'"
"$pc" run 2>/dev/null
[ $? = 2 ] || fail "run without a command does not exit 2"
# An unusable cache is an error before the command starts (it ran uncached without a word).
out=$("$pc" --cache bogus:x run -- sh -c 'echo ran' 2>&1)
rc=$?
[ "$rc" = 2 ] && ! grep -q '^ran$' <<<"$out" || fail "run with an unusable cache: exit $rc, $out"
# The cache is checked while the command starts (cli/run_gate.hpp): a dynamically linked command
# waits before its main, in run's helper, until the check has passed; any other starts after the
# check. Either way a command whose cache is unusable runs no line of its own: a dynamic program,
# a script, a static program, and (as root) one setuid to another user, which the loader runs
# without the helper. On a usable cache each runs.
gate=$(mktemp -d /tmp/pcache-gate-XXXXXX)  # one that user can reach, for the setuid program
chmod 0777 "$gate"
printf '#!/bin/sh\ntouch "$1"\n' >"$gate/script"
chmod +x "$gate/script"
gate_cases=("dynamic:$(command -v touch)" "script:$gate/script")
[ -n "${PCACHE_TEST_STATIC_TOUCH:-}" ] && gate_cases+=("static:$PCACHE_TEST_STATIC_TOUCH")
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  cp "$(command -v touch)" "$gate/setuid-touch"
  chown nobody "$gate/setuid-touch" && chmod 4755 "$gate/setuid-touch" &&
    gate_cases+=("setuid:$gate/setuid-touch")
fi
for c in "${gate_cases[@]}"; do
  kind=${c%%:*} prog=${c#*:}
  out=$("$pc" --cache "sqlite:/proc/progcache-none/c.db" run -- "$prog" "$gate/$kind-ran" 2>&1)
  rc=$?
  [ "$rc" = 2 ] && [ ! -e "$gate/$kind-ran" ] && grep -q 'the command was not run' <<<"$out" ||
    fail "run of a $kind command on an unusable cache: exit $rc, ran: $(ls "$gate"), $out"
  "$pc" --cache "sqlite:$work/gate.db" run -- "$prog" "$gate/$kind-ran" 2>/dev/null
  [ -e "$gate/$kind-ran" ] || fail "run of a $kind command on a usable cache did not run it"
done
rm -rf "$gate"
# A command that compiles nothing through the cache (NVRTC linked statically, say) is told of,
# never left to look cached; one that compiled is not.
err=$("$pc" --cache "sqlite:$work/quiet.db" run -- sh -c 'exit 0' 2>&1 >/dev/null)
grep -q 'nothing was compiled through the cache' <<<"$err" || fail "run of a command that compiled nothing said: '$err'"
err=$("$pc" --cache "sqlite:$work/quiet.db" run -- "$pc" compile "$work/k.cu" --arch sm_90 -o "$work/k3.cubin" 2>&1 >/dev/null)
grep -q '1 compile(s) through the cache' <<<"$err" && ! grep -q 'nothing was compiled' <<<"$err" ||
  fail "run of a command that compiled said: '$err'"
# What run says is its command's: another process's compile on the same cache meanwhile (one that
# does not inherit run's report file) is not counted; a tier stack is reported as any cache is;
# a compile that was not stored is counted as such, with why.
err=$("$pc" --cache "sqlite:$work/quiet.db" run -- sh -c 'env -u PCACHE_RUN_REPORT "$0" compile "$1" --arch sm_90 -o "$2"' \
  "$pc" "$work/k.cu" "$work/k4.cubin" 2>&1 >/dev/null)
grep -q 'nothing was compiled through the cache' <<<"$err" || fail "run counted another process's compile: '$err'"
err=$("$pc" --cache "tiered:memory:|sqlite:$work/quiet.db" run -- "$pc" compile "$work/k.cu" --arch sm_90 -o "$work/k5.cubin" 2>&1 >/dev/null)
grep -q '1 compile(s) through the cache: 1 hit(s), 0 miss(es)' <<<"$err" || fail "run on a tier stack said: '$err'"
err=$(PCACHE_DISABLE=1 "$pc" --cache "sqlite:$work/quiet.db" run -- "$pc" compile "$work/k.cu" --arch sm_90 -o "$work/k6.cubin" 2>&1 >/dev/null)
grep -q '1 compile(s) not cached: compiled without a cache' <<<"$err" && ! grep -q 'nothing was compiled' <<<"$err" ||
  fail "run of a compile that was not stored said: '$err'"
# A run inside another's command: each says the compile, the outer one counting the inner's.
err=$("$pc" --cache "sqlite:$work/quiet.db" run -- "$pc" --cache "sqlite:$work/quiet.db" run -- \
  "$pc" compile "$work/k.cu" --arch sm_90 -o "$work/k7.cubin" 2>&1 >/dev/null)
[ "$(grep -c '1 compile(s) through the cache: 1 hit(s), 0 miss(es)' <<<"$err")" = 2 ] ||
  fail "nested runs said: '$err'"
# A /tmp that takes no report file (here: no file may grow) is said, and the command still runs.
err=$(bash -c 'trap "" XFSZ; ulimit -f 0; "$0" --cache memory: run -- sh -c "echo ran >&2" 2>&1' "$pc" | cat)
grep -q 'cannot make a report file in /tmp' <<<"$err" && grep -qx ran <<<"$err" && [ -z "$(find /tmp -maxdepth 1 -name 'progcache-run-*' -size 0 -newer "$work/k.cu")" ] ||
  fail "run without a report file said: '$err'"
# A relative path in the URI is made absolute: the command may change directory first.
out=$(cd "$work" && "$pc" --cache "tiered:memory:|sqlite:rel.db" run -- sh -c 'cd / && echo "$PCACHE_URI"')
[ "$out" = "tiered:memory:|sqlite:$work/rel.db" ] || fail "run exports a relative URI: $out"
out=$("$pc" --cache "sqlite:$work/other.db" run -- sh -c 'echo "$PCACHE_URI|$LD_LIBRARY_PATH"')
case $out in
  "sqlite:$work/other.db|"*nvrtc-dropin*) echo "ok: run sets PCACHE_URI and LD_LIBRARY_PATH" ;;
  *) fail "run's environment: $out" ;;
esac
if [ -z "${PCACHE_TEST_SANITIZED:-}" ]; then  # a sanitized drop-in cannot be preloaded into sh
  out=$("$pc" run --preload -- sh -c 'echo "$LD_PRELOAD"')
  case $out in
    *nvrtc-dropin/libnvrtc.so.*) echo "ok: run --preload preloads the drop-in" ;;
    *) fail "run --preload: $out" ;;
  esac
fi

# A client that dlopens NVRTC by its full path (as cuda-pathfinder does for the nvidia-cuda-nvrtc
# wheel): `progcache run` sends it to the drop-in, which compiles with the library it named, and
# says so; with another NVRTC build at another path (NVRTC 13.0.48 from PyPI) the bytes are that
# build's. A libnvrtc of a major no drop-in fronts is reported as not cached.
dl_client=${PCACHE_TEST_DLOPEN_CLIENT:-}
if [ -n "$dl_client" ] && [ -z "${PCACHE_TEST_SANITIZED:-}" ]; then
  dl_run() {  # dl_run TAG LIBNVRTC [launcher...]: the client's outputs in TAG, its stderr in TAG.err
    local tag=$1 lib=$2
    shift 2
    mkdir -p "$work/$tag"
    "$@" "$dl_client" "$lib" "$work/$tag" "$work/$tag.maps" 2>"$work/$tag.err" ||
      fail "$tag: the client failed: $(cat "$work/$tag.err")"
  }
  real_lib=${PCACHE_TEST_REAL_NVRTC:-$real_dir/libnvrtc.so}
  export PCACHE_URI=sqlite:$work/dl.db
  dl_run dl_real "$real_lib" env
  dl_run dl_cold "$real_lib" "$pc" run --
  same dl_cold dl_real
  grep -q 'through the cache: 0 hit(s), 1 miss(es)' "$work/dl_cold.err" ||
    fail "run did not say the cold compile went through the cache: $(cat "$work/dl_cold.err")"
  dl_run dl_warm "$real_lib" "$pc" run --
  same dl_warm dl_real
  grep -q '1 hit(s), 0 miss(es)' "$work/dl_warm.err" || fail "warm: $(cat "$work/dl_warm.err")"
  ! maps_real dl_warm || fail "the warm dlopen-by-path run mapped the real libnvrtc"
  if [ -n "${PCACHE_TEST_NVRTC13_OTHER:-}" ]; then
    dl_run dl_other_real "$PCACHE_TEST_NVRTC13_OTHER" env
    dl_run dl_other "$PCACHE_TEST_NVRTC13_OTHER" "$pc" run --
    same dl_other dl_other_real
    cmp -s "$work/dl_other/k.cubin" "$work/dl_real/k.cubin" &&
      fail "NVRTC 13.0.48 and the toolkit's gave one cubin (the check is blind)"
    grep -q "nvrtc13048" "$work/dl_other.maps" || fail "run did not forward to the NVRTC the client named"
    # The NVRTC PCACHE_NVRTC_LIBRARY names wins over the one the command opened, and run says so.
    PCACHE_NVRTC_LIBRARY=$PCACHE_TEST_NVRTC13_OTHER dl_run dl_chosen "$real_lib" "$pc" run --
    same dl_chosen dl_other_real
    grep -qF "the command asked for $real_lib (the drop-in used $PCACHE_TEST_NVRTC13_OTHER, named by its PCACHE_*_LIBRARY variable)" "$work/dl_chosen.err" ||
      fail "run did not say the drop-in used the NVRTC the user chose: $(cat "$work/dl_chosen.err")"
  fi
  # An error code newer than the drop-in's header: answered in the real library's words (a test
  # NVRTC that knows code 18 stands for a newer one).
  if [ -n "${PCACHE_TEST_FAKE_NVRTC:-}" ]; then
    ASK_ERROR_18=1 PCACHE_NVRTC_LIBRARY=$PCACHE_TEST_FAKE_NVRTC PCACHE_TEST_REAL_NVRTC=$real_lib \
      dl_run dl_newer "$(dirname "$pc")/nvrtc-dropin/libnvrtc.so.13" env
    grep -q 'error 18: NVRTC_ERROR_BUSY' "$work/dl_newer/transcript.txt" ||
      fail "the drop-in's nvrtcGetErrorString(18): $(cat "$work/dl_newer/transcript.txt")"
  fi
  mkdir -p "$work/major99"
  ln -sf "$real_lib" "$work/major99/libnvrtc.so.99"
  dl_run dl_bypass "$work/major99/libnvrtc.so.99" "$pc" run --
  grep -q "loaded $work/major99/libnvrtc.so.99 itself (no drop-in for this NVRTC major): its compiles were not cached" "$work/dl_bypass.err" ||
    fail "run did not report the NVRTC it could not front: $(cat "$work/dl_bypass.err")"
  unset PCACHE_URI
  export PCACHE_URI=sqlite:$work/cache.db
else
  echo "skip: dlopen by full path (no client, or a sanitizer build)"
fi

# NVIDIA's Python bindings (they dlopen libnvrtc.so.N by name), through a cache of their own.
if [ -n "${PCACHE_TEST_CUDA_CORE:-}" ]; then
  py=(env PYTHONPATH="$PCACHE_TEST_CUDA_CORE" python3 "$(cd "$(dirname "$0")" && pwd)/cuda_bindings_client.py")
  for tag in py_real py_cold py_warm; do mkdir -p "$work/$tag"; done
  LD_LIBRARY_PATH=$real_dir "${py[@]}" "$work/py_real" "$work/inc" "$work/py_real.maps" ||
    fail "cuda-bindings on the real NVRTC failed"
  maps_real py_real || fail "cuda-bindings did not load the real NVRTC (the check is blind)"
  for tag in py_cold py_warm; do
    PCACHE_URI=sqlite:$work/py.db "$pc" run -- "${py[@]}" "$work/$tag" "$work/inc" "$work/$tag.maps" ||
      fail "cuda-bindings through the drop-in ($tag) failed"
  done
  same py_cold py_real
  same py_warm py_real
  ! maps_real py_warm || fail "cuda-bindings' warm run mapped the real libnvrtc"
  py_hits=$(PCACHE_URI=sqlite:$work/py.db stat_field hits)
  [ "$py_hits" = 5 ] || fail "cuda-bindings' warm run: $py_hits hits, want 5"
else
  echo "skip: cuda-bindings (PCACHE_TEST_CUDA_CORE unset: no PyPI)"
fi

if [ -n "$client12" ]; then
  LD_LIBRARY_PATH=$real12_dir run_client "$client12" real12 kernels env
  maps_real real12 12 || fail "the real 12 run does not show libnvrtc.so.12 in its maps"
  hits=$(stat_field hits) misses=$(stat_field misses)
  # The drop-in finds the real 12 where the loader would: on LD_LIBRARY_PATH after itself.
  LD_LIBRARY_PATH=$real12_dir run_client "$client12" cold12 kernels "$pc" run --
  same cold12 real12
  [ "$(stat_field misses)" = $((misses + kernels)) ] && [ "$(stat_field hits)" = "$hits" ] ||
    fail "NVRTC 12's cold run was answered by another major's entries"
  LD_LIBRARY_PATH=$real12_dir run_client "$client12" warm12 kernels "$pc" run --
  same warm12 real12
  ! maps_real warm12 || fail "the warm 12 run mapped a real libnvrtc: $(cat "$work/warm12.maps")"
  [ "$(stat_field hits)" = $((hits + kernels)) ] || fail "NVRTC 12's warm run was not all hits"
  LD_LIBRARY_PATH=$real12_dir run_client "$client12" real12_errors errors env
  LD_LIBRARY_PATH=$real12_dir run_client "$client12" errors12 errors "$pc" run --
  same errors12 real12_errors
  grep -q '^version: NVRTC_SUCCESS 12\.' "$work/errors12/transcript.txt" ||
    fail "the 12 drop-in reports another version: $(grep ^version "$work/errors12/transcript.txt")"
  run warm13_again kernels "$pc" run --
  same warm13_again real_edited  # the header on disk says 8 since the edit
  ! maps_real warm13_again || fail "13 after 12 mapped a real libnvrtc"
fi

[ "$failures" = 0 ] && echo "all drop-in checks passed"
exit $((failures ? 1 : 0))
