#!/usr/bin/env bash
# Fails unless the library exports exactly the functions the public header declares, has the
# SONAME libprogcache.so.1, and does not link libcuda or libnvrtc (they are loaded at run time).
set -euo pipefail
lib=$1 header=$2 symbols=${3:-}
exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | sed 's/@.*//' | grep -v '^PCACHE_1$' | sort -u)
declared=$(tr '\n' ' ' <"$header" | grep -oE 'PCACHE_API [a-z][^(;#]+\(' | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the header:"; diff <(echo "$declared") <(echo "$exported") || true
  exit 1
fi
if nm -D --defined-only "$lib" | awk '{print $3}' | grep -q '^_Z'; then echo "C++ symbols exported"; exit 1; fi
if [ -n "$symbols" ]; then
  listed=$(grep -v '^#' "$symbols" | sed '/^$/d' | sort -u)
  if [ "$exported" != "$listed" ]; then
    echo "exported symbols differ from $symbols (update it on purpose when adding API):"
    diff <(echo "$listed") <(echo "$exported") || true
    exit 1
  fi
fi
if nm -D "$lib" | grep -E ' [TW] pcache_' | grep -v '@@PCACHE_1' | grep -q .; then
  echo "some pcache_ symbols are not in the PCACHE_1 version node"; exit 1
fi
readelf -d "$lib" | grep -q 'SONAME.*\[libprogcache\.so\.1\]' || { echo "SONAME is not libprogcache.so.1"; exit 1; }
if readelf -d "$lib" | grep NEEDED | grep -qE 'libcuda|libnvrtc'; then echo "links libcuda/libnvrtc"; exit 1; fi
echo "$(echo "$declared" | wc -l) exported symbols match the header; SONAME libprogcache.so.1; no CUDA link"
