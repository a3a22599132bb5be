#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds independent consumers against it: CMake
# find_package (C++ and Fortran), plain cc with pkg-config (C), and dlopen by symbol name (C).
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-consumers-XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libprogcache.so.1' | head -1)")
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
here=$src/tests/consumers

cmake -S "$here/cmake_cxx" -B "$work/cxx" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cxx" >/dev/null
"$work/cxx/consumer" "sqlite:$work/cache.db"

export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c99 -Wall -Wextra -Werror -pedantic "$here/pkgconfig_c/main.c" $(pkg-config --cflags --libs progcache) -o "$work/pc"
"$work/pc"

cc -std=c99 -Wall -Wextra -Werror "$here/dlopen_c/main.c" -I"$prefix/include" -ldl -o "$work/dl"
"$work/dl"

# Fortran through find_package and progcache_FORTRAN_MODULE (when a Fortran compiler is there).
if command -v gfortran >/dev/null; then
  cmake -S "$here/cmake_fortran" -B "$work/f90" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$work/f90" >/dev/null
  "$work/f90/consumer"
fi

# The Python package under this prefix, with the system's python3 and no LD_LIBRARY_PATH: it
# finds the library it was installed with (_installed.py).
if [ -x /usr/bin/python3 ]; then
  site=$(find "$prefix" -path '*/python3.*/dist-packages' -type d | head -1)
  [ -n "$site" ] || { echo "python: no package in $prefix/lib/python3.X/dist-packages"; exit 1; }
  env -i PATH=/usr/bin:/bin PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import progcache
with progcache.Cache("memory:") as c:
    c[b"k"] = b"v"
    assert c[b"k"] == b"v"
print("python: progcache", progcache.__version__, "loaded", progcache._installed_library())
'
fi

# Kernels compiled into a bundle at build time (progcache_add_bundle), imported into a fresh
# cache: the compile the application then makes (same name, options, arch) is a hit.
PATH=$prefix/bin:$PATH cmake -S "$here/cmake_bundle" -B "$work/bundle" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/bundle" >/dev/null
"$prefix/bin/progcache" --cache "sqlite:$work/node.db" import "$work/bundle/kernels.pcb" | grep -q 'imported 2 entries'
(cd "$here/cmake_bundle" && "$prefix/bin/progcache" --cache "sqlite:$work/node.db" compile scale.cu \
   --arch sm_90 --name-expression 'scale<float>' --name-expression 'scale<double>' -- --std=c++17) |
  grep -q '^hit:' || { echo "cmake_bundle: the bundled kernel did not hit"; exit 1; }
echo "cmake_bundle: 2 kernels bundled at build time; the imported one hits"

# The installed command works too.
"$prefix/bin/progcache" --cache "sqlite:$work/cache.db" stats >/dev/null
echo "consumers: 5 passed, 0 failed"
