#!/usr/bin/env bash
# The exact NVRTC build is part of the key. Three builds are swapped into ONE path
# (PCACHE_NVRTC_LIBRARY=$lib/libnvrtc.so): the toolkit's NVRTC 13, NVRTC 13.0.48 from PyPI and
# NVRTC 12.9 from PyPI, each with its builtins library. Every compile through the cache must equal
# a PCACHE_DISABLE=1 compile byte for byte, and a build seen before hits its own entry.
# Then pip's way of upgrading (a new file renamed over the old one) under a live process: the
# process keeps its loaded image and must store under that image's identity, never the new file's.
# usage: nvrtc_builds_test.sh PROGCACHE_CLI PYTHON_BINDING_DIR LIBPROGCACHE
# Needs $PCACHE_TEST_NVRTC12 and $PCACHE_TEST_NVRTC13_OTHER (scripts/test installs both wheels).
set -uo pipefail
pc=$1 pydir=$2 libpc=$3
system=$(python3 - <<'PY'
import glob
print((sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so.1[3-9]")) or [""])[-1])
PY
)
for v in PCACHE_TEST_NVRTC12 PCACHE_TEST_NVRTC13_OTHER; do
  if [ -z "${!v:-}" ] || [ ! -f "${!v}" ]; then
    echo "skipped: \$$v does not name an NVRTC library (scripts/test installs it from PyPI)"
    exit 77
  fi
done
[ -f "$system" ] || { echo "skipped: no toolkit NVRTC 13 in /usr/local/cuda/lib64"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-builds-XXXXXX")
trap 'rm -rf "$work"' EXIT
lib=$work/lib
mkdir -p "$lib" "$work/src/sub"
export PCACHE_NVRTC_LIBRARY=$lib/libnvrtc.so
export PCACHE_URI=sqlite:$work/cache.db
unset PCACHE_DISABLE
printf '#include "h.h"\n__global__ void k(float *x) { x[threadIdx.x] *= VAL; }\n' >"$work/src/sub/k.cu"
printf '#define VAL 2.5f\n' >"$work/src/sub/h.h"
cd "$work/src"
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

# Installs the NVRTC next to $1 (and its builtins) into $lib the way pip does: a new file renamed
# over the old path, so a process that mapped the old file keeps it.
install_build() {
  local src=$1 dir
  dir=$(dirname "$src")
  cp "$src" "$lib/.new" && mv -f "$lib/.new" "$lib/libnvrtc.so"
  for b in "$dir"/libnvrtc-builtins.so.*.*; do
    case $b in *alt*) continue ;; esac
    cp "$b" "$lib/.new" && mv -f "$lib/.new" "$lib/$(basename "$b")"
  done
}

# Compiles through the cache and without it; prints hit/miss; fails on any byte difference.
compile_both() {  # what, want (hit|miss)
  local out
  out=$("$pc" compile sub/k.cu --arch sm_80 -o "$work/cached.bin" 2>&1) || { bad "$1: $out"; return; }
  PCACHE_DISABLE=1 "$pc" compile sub/k.cu --arch sm_80 -o "$work/fresh.bin" >/dev/null 2>&1
  if cmp -s "$work/cached.bin" "$work/fresh.bin"; then ok "$1: equals PCACHE_DISABLE=1"; else bad "$1: bytes differ from PCACHE_DISABLE=1"; fi
  if grep -q "^$2" <<<"$out"; then ok "$1: $2"; else bad "$1: want $2: $out"; fi
  cp "$work/cached.bin" "$work/$3.bin"
}

install_build "$system";                       compile_both "toolkit NVRTC 13" miss sys
install_build "$PCACHE_TEST_NVRTC13_OTHER";    compile_both "NVRTC 13.0.48 at the same path" miss w13
install_build "$PCACHE_TEST_NVRTC12";          compile_both "NVRTC 12.9 at the same path" miss w12
install_build "$system";                       compile_both "toolkit NVRTC 13 again" hit sys2
install_build "$PCACHE_TEST_NVRTC13_OTHER";    compile_both "NVRTC 13.0.48 again" hit w13b
if cmp -s "$work/sys.bin" "$work/w13.bin"; then
  echo "note: NVRTC 13.0.48 and the toolkit's NVRTC 13 produced identical bytes for this kernel"
else
  ok "the two NVRTC 13 builds produce different bytes (so one key for both would serve a wrong binary)"
fi

# A live process loads the toolkit NVRTC; pip replaces it with 13.0.48 underneath; the process
# compiles a new program: its result equals its own uncached compile, and a fresh process (which
# sees 13.0.48) gets a miss and 13.0.48's bytes, never the live process's entry.
install_build "$system"
printf '__global__ void k2(float *x) { x[threadIdx.x] += 7.0f; }\n' >"$work/src/k2.cu"
mkfifo "$work/go"
PROGCACHE_LIBRARY=$libpc PYTHONPATH=$pydir python3 - "$work/go" >"$work/live.out" 2>&1 <<'PY' &
import sys, progcache
src1 = "__global__ void k1(float *x) { x[threadIdx.x] += 1.0f; }\n"
src2 = open("k2.cu").read()
with progcache.Cache() as c:
    c.compile(src1, name="k1.cu", options=["-arch=sm_80"])   # loads the toolkit NVRTC
    open(sys.argv[1]).read()                                   # wait: NVRTC is replaced now
    r = c.compile(src2, name="k2.cu", options=["-arch=sm_80"])
    fresh = progcache.compile_uncached(src2, name="k2.cu", options=["-arch=sm_80"])
    print("live:", "hit" if r.from_cache else "miss", "same" if r.data == fresh.data else "DIFF")
    open("live.bin", "wb").write(r.data)
PY
live=$!
sleep 3
install_build "$PCACHE_TEST_NVRTC13_OTHER"
echo go >"$work/go"
wait $live
out=$(cat "$work/live.out")
if grep -q "live: miss same" <<<"$out"; then ok "live process: its own loaded NVRTC's bytes"; else bad "live process: $out"; fi
PCACHE_DISABLE=1 "$pc" compile k2.cu --arch sm_80 -o "$work/k2.fresh" >/dev/null 2>&1
out=$("$pc" compile k2.cu --arch sm_80 -o "$work/k2.cached" 2>&1)
if grep -q '^miss' <<<"$out"; then ok "a new process does not take the live process's entry"; else bad "new process: $out"; fi
if cmp -s "$work/k2.cached" "$work/k2.fresh"; then ok "new process: equals PCACHE_DISABLE=1"; else bad "new process: bytes differ"; fi
echo "nvrtc builds: $pass passed, $fail failed"
[ $fail -eq 0 ]
