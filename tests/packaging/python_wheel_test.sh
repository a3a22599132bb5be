#!/usr/bin/env bash
# pip install . into a fresh virtual environment, then import progcache from a clean environment
# (no PROGCACHE_LIBRARY, no PYTHONPATH, another directory): the wheel must carry the library.
# Needs PyPI (scikit-build-core); skipped (77) unless PCACHE_TEST_WHEEL=1 (scripts/test sets it).
set -euo pipefail
src=$1
[ "${PCACHE_TEST_WHEEL:-0}" = 1 ] || { echo "set PCACHE_TEST_WHEEL=1 to build the wheel"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-wheel-XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
# Without PyPI there is no build backend to fetch: that is the machine's, not the package's fault.
if ! "$work/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$work/probe" \
     'scikit-build-core>=0.10' >/dev/null 2>&1; then
  echo "PyPI is not reachable (scikit-build-core): skipped"; exit 77
fi
start=$(date +%s)
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$src"
echo "pip install built and installed the wheel in $(($(date +%s) - start)) s"
cd "$work"
env -i HOME="$work" PATH=/usr/bin:/bin "$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
import progcache
venv = sys.argv[1]
assert progcache.__file__.startswith(venv), progcache.__file__
bundled = os.path.join(os.path.dirname(progcache.__file__), "libprogcache.so.1")
assert os.path.exists(bundled), "the wheel has no libprogcache.so.1 beside the package"
assert progcache._lib._name == bundled, progcache._lib._name
assert progcache.version() == progcache.__version__, (progcache.version(), progcache.__version__)
with progcache.Cache("memory:") as c:
    c[b"k"] = b"v"
    assert c[b"k"] == b"v"
try:
    progcache.Cache("nonsense:")
except progcache.InvalidArgumentError as e:
    assert "nonsense" in str(e)
else:
    raise AssertionError("a bad URI opened")
print("wheel: progcache", progcache.__version__, "imported from", os.path.dirname(progcache.__file__))
PY
# The command and `progcache run` come with the wheel, and the wheel serves every Python 3.
wheel=$(ls "$work/venv/lib"/python3*/site-packages/progcache-*.dist-info/WHEEL)
grep -q '^Tag: py3-none-linux' "$wheel" || { echo "the wheel is not py3-none-<platform>: $(cat "$wheel")"; exit 1; }
env -i HOME="$work" PATH="$work/venv/bin:/usr/bin:/bin" progcache --version | grep -q '^progcache [0-9]' ||
  { echo "the wheel's progcache command does not run"; exit 1; }
out=$(env -i HOME="$work" PATH="$work/venv/bin:/usr/bin:/bin" PCACHE_URI="memory:" \
  progcache run -- sh -c 'echo "$LD_LIBRARY_PATH"')
case "$out" in
  *site-packages/progcache/nvrtc-dropin*) echo "wheel: progcache run finds the drop-in in the package" ;;
  *) echo "the wheel's progcache run has no drop-in: $out"; exit 1 ;;
esac
