#!/usr/bin/env bash
# Fails if an ELF file given has an empty entry in its RUNPATH or RPATH. The loader reads an
# empty entry as the current directory, so a program run from a directory holding a libc.so.6
# (or any library it needs) would load that file. CMake pads the RUNPATH of a build-tree binary
# that is rewritten at install with such entries, so the CLI's installed copy is linked apart
# (progcache-cli-installed in CMakeLists.txt). A directory given stands for the ELF files the
# build made in it, three levels deep (not a Python environment's).
set -euo pipefail
files=()
for arg in "$@"; do
  if [ -d "$arg" ]; then
    while IFS= read -r f; do
      [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && files+=("$f")
    done < <(find "$arg" -maxdepth 3 \( -name venv -o -name '*-packages' -o -name jitdeps \) -prune \
               -o -type f \( -perm -u+x -o -name '*.so*' \) -print)
  else
    files+=("$arg")
  fi
done
[ "${#files[@]}" -gt 0 ] || { echo "no ELF file found in $*"; exit 1; }
status=0
for f in "${files[@]}"; do
  dynamic=$(readelf -d "$f" 2>/dev/null || true)
  paths=$(sed -nE 's/.*\((RUNPATH|RPATH)\).*\[(.*)\]$/\2/p' <<<"$dynamic")
  while IFS= read -r p; do
    [ -z "$p" ] && continue
    if [[ "$p" == :* || "$p" == *: || "$p" == *::* ]]; then
      echo "$f: empty entry in its search path [$p]: the current directory is searched"
      status=1
    fi
  done <<<"$paths"
done
[ "$status" -eq 0 ] && echo "no empty search path entry in ${#files[@]} files"
exit "$status"
