#!/usr/bin/env bash
# The progcache command end to end: outputs and exit codes.
set -uo pipefail
pc=$1 kernel=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT
export PCACHE_DIR=$work/default
unset PCACHE_URI PCACHE_MAX_SIZE PCACHE_DISABLE
passed=0 failed=0
check() {  # description, expected exit code, command..., then stdout must match $want (regex)
  local what=$1 code=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$code" ] || ! grep -Eq -- "$want" <<<"$out"; then
    echo "FAIL: $what (exit $rc, want $code; want /$want/):"; echo "$out" | sed 's/^/    /'
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
}
want='^miss: .* compiled in' check "first compile misses" 0 "$pc" compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
want='^hit: ' check "second compile hits" 0 "$pc" compile "$kernel" --name-expression 'scale_add<float>' -o "$work/k.cubin" -- --std=c++17
want='_Z9scale_addIfEvPT_PKS0_S0_i' check "lowered name shown on a hit" 0 "$pc" compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
want='^' check "-o wrote an ELF" 0 bash -c "head -c 4 '$work/k.cubin' | grep -q ELF"
want='option\[0\] +stored --gpu-architecture=sm_90, now --gpu-architecture=sm_80' check "explain names the option" 1 "$pc" explain "$kernel" --arch sm_80 --name-expression 'scale_add<float>' -- --std=c++17
want='^hit: ' check "explain of a cached program" 0 "$pc" explain "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
want='hits: +[1-9]' check "stats shows shared hits" 0 "$pc" stats
want='compile time saved' check "stats shows time saved" 0 "$pc" stats
want=' cubin +13\.|cubin +1[2-9]\.' check "ls shows the entry" 0 "$pc" ls
want='stored [0-9]+ bytes' check "put" 0 "$pc" put text:hello "$kernel"
want='wrote [0-9]+ bytes' check "get" 0 "$pc" get text:hello -o "$work/out"
want='^' check "get round-trips bytes" 0 cmp "$kernel" "$work/out"
want='no entry' check "get of a missing key exits 1" 1 "$pc" get text:absent -o "$work/x"
want='unknown command' check "unknown command exits 2" 2 "$pc" frobnicate
want='needs a value|usage' check "missing option value exits 2" 2 "$pc" compile "$kernel" --arch
want='usage: progcache prune' check "command --help" 0 "$pc" prune --help
want='verified 3 entries' check "verify" 0 "$pc" verify
want='evicted 0 entries' check "evict --older-than keeps fresh entries" 0 "$pc" evict --older-than 30d
want='evicted 1 entries' check "evict --nvrtc-version drops that toolkit's entries" 0 "$pc" evict --nvrtc-version "$("$pc" ls | awk '$3=="cubin"{print $4; exit}')"
want='removed text:hello' check "rm" 0 "$pc" rm text:hello
want='no entry' check "rm of a missing key exits 1" 1 "$pc" rm text:hello
want='^' check "--cache after the command" 0 "$pc" stats --cache "filestream:$work/fs"
want='^' check "filestream cache was created" 0 test -f "$work/fs/format"
want='pruned to' check "prune" 0 "$pc" prune --max-size 1K
want='cleared' check "clear" 0 "$pc" clear
want='entries: +0' check "empty after clear" 0 "$pc" stats
want='is not a size' check "bad PCACHE_MAX_SIZE exits 2" 2 env PCACHE_MAX_SIZE=lots "$pc" stats
echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
