#!/usr/bin/env bash
# Fails unless the library exports exactly the functions the public headers declare (progcache.h
# and, beside it, the unstable progcache_admin.h), each in the version node
# capi/progcache.symbols gives it (PCACHE_1.x, or PCACHE_ADMIN_x.y for the admin API), has the
# SONAME libprogcache.so.1, and does not link libcuda or libnvrtc (they are loaded at run time).
# With STATIC_CXX_RUNTIME=1 (PCACHE_STATIC_CXX_RUNTIME) it must not need libstdc++ either.
set -euo pipefail
lib=$1 header=$2 symbols=${3:-} static_cxx_runtime=${4:-0}
# Outputs are captured before matching: with pipefail, a grep -q that exits at its first match
# would kill the writer (SIGPIPE) and fail the pipeline at random.
dynsyms=$(nm -D "$lib")
defined=$(nm -D --defined-only "$lib" | awk '{print $3}')
dynamic=$(readelf -d "$lib")
versioned=$(grep -v '^PCACHE_' <<<"$defined" | sort -u)
exported=$(sed 's/@.*//' <<<"$versioned" | sort -u)
admin_header=$(dirname "$header")/progcache_admin.h
declared=$(cat "$header" "$admin_header" | tr '\n' ' ' | grep -oE 'PCACHE_API [a-z][^(;#]+\(' | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the header:"; diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
if grep -q '^_Z' <<<"$defined"; then echo "C++ symbols exported"; exit 1; fi
if [ -n "$symbols" ]; then
  listed=$(grep -v '^#' "$symbols" | sed '/^$/d' | sort -u)
  if [ "$versioned" != "$listed" ]; then
    echo "exported symbols or their version nodes differ from $symbols (update it on purpose when adding API):"
    diff <(echo "$listed") <(echo "$versioned") || true
    exit 1
  fi
fi
unversioned=$(grep -E ' [TW] pcache_' <<<"$dynsyms" | grep -vE '@@PCACHE_(1(\.[0-9]+)?|ADMIN_[0-9]+\.[0-9]+)$' || true)
admin_in_stable=$(grep -E '^pcache_(admin|entry|explain)_.*@@PCACHE_1' <<<"$versioned" || true)
if [ -n "$admin_in_stable" ]; then
  echo "admin API symbols in a stable PCACHE_1.x node: $admin_in_stable"; exit 1
fi
if [ -n "$unversioned" ]; then
  echo "some pcache_ symbols are in no PCACHE_1.x or PCACHE_ADMIN_x.y version node: $unversioned"; exit 1
fi
grep -q 'SONAME.*\[libprogcache\.so\.1\]' <<<"$dynamic" || { echo "SONAME is not libprogcache.so.1"; exit 1; }
needed=$(grep NEEDED <<<"$dynamic" || true)
if grep -qE 'libcuda|libnvrtc' <<<"$needed"; then echo "links libcuda/libnvrtc"; exit 1; fi
if [ "$static_cxx_runtime" = 1 ] && grep -q 'libstdc++' <<<"$needed"; then
  echo "built with PCACHE_STATIC_CXX_RUNTIME but needs libstdc++ at run time"; exit 1
fi
# The test switches (src/util/test_hooks.hpp) exist only in the test build's copy of the library.
if grep -qa 'PCACHE_TEST_' "$lib"; then
  echo "the installed library reads a PCACHE_TEST_ switch: link progcache_hooks_off"; exit 1
fi
echo "$(echo "$declared" | wc -l) exported symbols match the header; SONAME libprogcache.so.1; no CUDA link; no test switches"
