#!/usr/bin/env bash
# Two NVRTC majors through one cache: the toolkit's NVRTC 13 and NVRTC 12 from PyPI
# ($PCACHE_TEST_NVRTC12, installed by scripts/test), selected with PCACHE_NVRTC_LIBRARY.
# Each compile of the example kernel misses once, then hits; the two entries have different keys.
set -uo pipefail
pc=$1 kernel=$2
if [ -z "${PCACHE_TEST_NVRTC12:-}" ] || [ ! -f "$PCACHE_TEST_NVRTC12" ]; then
  echo "skipped: PCACHE_TEST_NVRTC12 does not name a libnvrtc.so.12 (scripts/test installs one)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-nvrtc-XXXXXX")
trap 'rm -rf "$work"' EXIT
cache="sqlite:$work/cache.db"
args=(compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17)
fail=0
expect() {  # what, regex, output
  if grep -Eq -- "$2" <<<"$3"; then echo "ok: $1"; else echo "FAIL: $1: $3"; fail=1; fi
}
out=$(PCACHE_NVRTC_LIBRARY=$PCACHE_TEST_NVRTC12 "$pc" --cache "$cache" "${args[@]}" 2>&1)
expect "NVRTC 12 misses" '^miss: .* NVRTC 12\.' "$out"
key12=$(awk '/key/{print $NF}' <<<"$out")
out=$(env -u PCACHE_NVRTC_LIBRARY "$pc" --cache "$cache" "${args[@]}" 2>&1)
expect "NVRTC 13 misses (a different key)" '^miss: .* NVRTC 13\.' "$out"
key13=$(awk '/key/{print $NF}' <<<"$out")
[ -n "$key12" ] && [ "$key12" != "$key13" ] && echo "ok: keys differ ($key12 vs $key13)" || { echo "FAIL: keys equal"; fail=1; }
out=$(PCACHE_NVRTC_LIBRARY=$PCACHE_TEST_NVRTC12 "$pc" --cache "$cache" "${args[@]}" 2>&1)
expect "NVRTC 12 hits" '^hit: .*NVRTC 12\.' "$out"
out=$(env -u PCACHE_NVRTC_LIBRARY "$pc" --cache "$cache" "${args[@]}" 2>&1)
expect "NVRTC 13 hits" '^hit: .*NVRTC 13\.' "$out"
out=$("$pc" --cache "$cache" ls 2>&1)
expect "two cubin entries listed" "$(printf 'cubin +12\\.')" "$out"
expect "two cubin entries listed" "$(printf 'cubin +13\\.')" "$out"
[ $fail -eq 0 ] && echo "nvrtc versions: 6 passed, 0 failed"
exit $fail
