#!/usr/bin/env bash
# Builds the Debian packages, installs them into a scratch root with dpkg --root, checks their
# dependencies (SQLite, OpenSSL, xxhash; never CUDA), and builds a consumer against that root.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-deb-XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work/debs" >/dev/null)
debs=("$work"/debs/*.deb)
[ ${#debs[@]} -eq 4 ] || { echo "expected 4 packages, got: ${debs[*]}"; exit 1; }
for name in libprogcache1 libprogcache-dev progcache python3-progcache; do
  deb=$(ls "$work"/debs/${name}_*.deb)
  [ "$(dpkg-deb -f "$deb" Package)" = "$name" ]
done
# Installed with dpkg into a scratch root (its own dpkg database; maintainer scripts and triggers
# run; the system's libc and python3 stand in for the dependencies), purged at the end.
mkdir -p "$work/root/var/lib/dpkg/info" "$work/root/var/lib/dpkg/updates"
touch "$work/root/var/lib/dpkg/status"
dpkg_root() { dpkg --root="$work/root" --force-depends --force-script-chrootless --log=/dev/null "$@"; }
dpkg_root -i "${debs[@]}" >/dev/null 2>&1 || { dpkg_root -i "${debs[@]}"; exit 1; }
[ "$(dpkg_root -l | grep -c '^ii ')" = 4 ]
lib=$(ls "$work"/debs/libprogcache1_*.deb)
deps=$(dpkg-deb -f "$lib" Depends)
echo "libprogcache1 Depends: $deps"
grep -q libsqlite3 <<<"$deps" && grep -q libssl3 <<<"$deps"
grep -q libhiredis <<<"$deps" && grep -q libzstd <<<"$deps"
grep -q 'libsqlite3-0 (>= 3.35.0)' <<<"$deps"  # opened with dlopen: named by cmake/packaging.cmake
grep -q 'libxxhash0 (>= 0.8.0-2~)' <<<"$deps"  # the same
if grep -qi cuda <<<"$deps"; then echo "the library package depends on CUDA"; exit 1; fi
# Lists are captured before matching: with pipefail, grep -q exiting early would kill the writer.
control_files=$(dpkg-deb --ctrl-tarfile "$lib" | tar -t)
grep -q shlibs <<<"$control_files"
dev_deps=$(dpkg-deb -f "$(ls "$work"/debs/libprogcache-dev_*.deb)" Depends)
grep -q 'libprogcache1 (= ' <<<"$dev_deps"
root=$work/root/usr
test -f "$root/include/progcache/progcache.h"
test -x "$root/bin/progcache"
test -f "$root/share/man/man1/progcache.1.gz"
test -f "$root/share/doc/libprogcache-dev/examples/cmake_fortran/app.f90"
pc=$(dirname "$(find "$root" -name progcache.pc)")
export PKG_CONFIG_PATH=$pc
# The packaged file names /usr plainly (no pkgconfig/../../.. paths), as Debian's own do; in the
# scratch root, pkg-config's sysroot puts its paths there.
grep -qx 'prefix=/usr' "$pc/progcache.pc" || { echo "progcache.pc: $(head -3 "$pc/progcache.pc")"; exit 1; }
cc -std=c99 -Wall -Werror "$src/tests/consumers/pkgconfig_c/main.c" \
  $(PKG_CONFIG_SYSROOT_DIR="$work/root" pkg-config --cflags --libs progcache) -o "$work/consumer"
LD_LIBRARY_PATH=$(dirname "$(find "$root" -name 'libprogcache.so.1')") "$work/consumer"
# The command links the library it was packaged with: unpacked anywhere, it finds that one
# (RUNPATH $ORIGIN/../lib...), and it runs.
resolved=$(ldd "$root/bin/progcache" | awk '/libprogcache/{print $3}')
case "$resolved" in "$root"/*) ;; *) echo "progcache resolves libprogcache to '$resolved', not the package's"; exit 1 ;; esac
"$root/bin/progcache" --cache memory: stats >/dev/null
# The drop-in NVRTC, in the command's package, off the loader's path, found by `progcache run`.
dropin=$(ls "$root"/lib/*-linux-gnu/progcache/nvrtc/libnvrtc.so.13)
[ "$(dpkg-deb -c "$(ls "$work"/debs/progcache_*.deb)" | grep -c 'progcache/nvrtc/libnvrtc.so.13$')" = 1 ]
# ...with the drop-in nvJitLink and libNVVM beside it, and their unversioned names.
for jit in libnvJitLink.so.13 libnvvm.so.4; do
  test -f "$(dirname "$dropin")/$jit"
  [ "$(readlink "$(dirname "$dropin")/${jit%.*}")" = "$jit" ]
done
case "$("$root/bin/progcache" run -- sh -c 'echo "$LD_LIBRARY_PATH"')" in
  "$(dirname "$dropin")"*) ;;
  *) echo "progcache run does not put the packaged drop-in first"; exit 1 ;;
esac
# The Python package where Debian's python3 looks (/usr/lib/python3/dist-packages), working
# against the packaged library.
test -f "$root/lib/python3/dist-packages/progcache/__init__.py"
test -f "$root/lib/python3/dist-packages/progcache/py.typed"
env -i PATH=/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/lib/python3/dist-packages" \
  LD_LIBRARY_PATH="$(dirname "$(find "$root" -name 'libprogcache.so.1')")" \
  python3 -c 'import progcache; c = progcache.Cache("memory:"); c[b"k"] = b"v"; assert c[b"k"] == b"v"'
# Fortran, from the module source the -dev package ships, in a clean environment.
if command -v gfortran >/dev/null; then
  (cd "$work" && env -i PATH=/usr/bin:/bin gfortran -J "$work" \
     "$root/include/progcache/progcache.f90" "$src/tests/consumers/cmake_fortran/app.f90" \
     -L"$(dirname "$(find "$root" -name 'libprogcache.so.1')")" -lprogcache -o "$work/f90" &&
   env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$(dirname "$(find "$root" -name 'libprogcache.so.1')")" \
     "$work/f90")
fi
# Multiarch library directory and Multi-Arch: same; a copyright and changelog in every package.
ls "$root"/lib/*-linux-gnu/libprogcache.so.1 >/dev/null
[ "$(dpkg-deb -f "$lib" Multi-Arch)" = same ]
for deb in "${debs[@]}"; do
  name=$(dpkg-deb -f "$deb" Package)
  test -f "$work/root/usr/share/doc/$name/copyright" && test -f "$work/root/usr/share/doc/$name/changelog.gz"
done
# lintian (scripts/deps installs it): no error or warning; overrides carry their reasons.
if command -v lintian >/dev/null; then
  report=$(lintian --tag-display-limit 0 "${debs[@]}" 2>&1 | grep -E '^[EW]: ' || true)
  if [ -n "$report" ]; then echo "lintian:"; echo "$report"; exit 1; fi
  # ...nor the informational tags a packager would fix: hardening, symbols, .comment, spelling.
  report=$(lintian -I --tag-display-limit 0 "${debs[@]}" 2>&1 | grep -E '^I: ' || true)
  if [ -n "$report" ]; then echo "lintian -I:"; echo "$report"; exit 1; fi
  echo "lintian: no errors, warnings or informational tags"
elif [ "${CI:-}" = true ]; then
  echo "lintian is not installed (scripts/deps installs it)"; exit 1
fi
# Purged, the packages leave nothing behind.
dpkg_root --purge python3-progcache progcache libprogcache-dev libprogcache1 >/dev/null 2>&1
left=$(find "$work/root/usr" -type f 2>/dev/null || true)
if [ -n "$left" ]; then echo "left after purge:"; echo "$left"; exit 1; fi
echo "package: 9 passed, 0 failed"
