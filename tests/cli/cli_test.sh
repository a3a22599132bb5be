#!/usr/bin/env bash
# The progcache command end to end: outputs and exit codes.
set -uo pipefail
pc=$1 kernel=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/pcache-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT
export PCACHE_DIR=$work/default XDG_CONFIG_HOME=$work/xdg  # no user's config file takes part
unset PCACHE_URI PCACHE_MAX_SIZE PCACHE_DISABLE PCACHE_SECRET_FILE PCACHE_ALLOW_SHARED
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
# A hit on an unsigned cache hashes nothing: its identity comes from a memo, its key from the
# manifest (src/core/identity_memo.hpp), so the process never loads libcrypto.
want='^libcrypto not loaded$' check "a compile hit loads no libcrypto" 0 bash -c "LD_DEBUG=files env -u OPENSSL_CONF '$pc' compile '$kernel' --name-expression 'scale_add<float>' -- --std=c++17 2>&1 | grep -q 'calling init: .*libcrypto' && echo 'libcrypto loaded' || echo 'libcrypto not loaded'"
# An OpenSSL configuration that matters is loaded as OpenSSL would (src/util/openssl_init.hpp):
# one that admits only FIPS algorithms, with no FIPS provider, leaves no digest to key with.
printf 'openssl_conf = init\n[init]\nalg_section = algs\n[algs]\ndefault_properties = fips=yes\n' >"$work/fips.cnf"
want='neither BLAKE2b-512 nor SHA-256' check "OPENSSL_CONF is honoured" 1 env OPENSSL_CONF="$work/fips.cnf" "$pc" --cache memory: compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
want='^' check "-o wrote an ELF" 0 bash -c "head -c 4 '$work/k.cubin' | grep -q ELF"
# -o - puts the binary alone on standard output (the report and lowered names go to stderr),
# so that `compile ... -o - > k.cubin` writes a cubin, not a report followed by one.
want='^' check "compile -o - writes only the binary to stdout" 0 bash -c "'$pc' compile '$kernel' --name-expression 'scale_add<float>' -o - -- --std=c++17 2>/dev/null | cmp - '$work/k.cubin'"
want='^hit: .*_Z9scale_addIfEvPT_PKS0_S0_i' check "... and its report to stderr" 0 bash -c "'$pc' compile '$kernel' --name-expression 'scale_add<float>' -o - -- --std=c++17 2>&1 >/dev/null | tr '\n' ' '"
want='option\[0\] +stored --gpu-architecture=sm_90, now --gpu-architecture=sm_80' check "explain names the option" 1 "$pc" explain "$kernel" --arch sm_80 --name-expression 'scale_add<float>' -- --std=c++17
want='^hit: ' check "explain of a cached program" 0 "$pc" explain "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
# deps: one path a line, present or absent, in the order NVRTC looks; a program never compiled
# through the cache is listed from the include scan, and a note on stderr says so and what the
# scan could not follow.
mkdir -p "$work/deps"
printf '#include "here.h"\n#if __has_include("maybe.h")\n#include "maybe.h"\n#endif\n__global__ void k() {}\n' >"$work/deps/k.cu"
: >"$work/deps/here.h"
# Where no cache exists yet, deps still lists the scan's prediction, and creates nothing.
want="^present $work/deps/here.h\$" check "deps without a cache" 0 "$pc" --cache "sqlite:$work/deps/none/c.db" deps "$work/deps/k.cu"
want='^none made$' check "deps without a cache creates none" 0 bash -c "test -e '$work/deps/none' && echo made || echo 'none made'"
want="^present $work/deps/here.h\$" check "deps lists a header read" 0 "$pc" deps "$work/deps/k.cu"
want="^absent  $work/deps/maybe.h\$" check "deps lists a place probed" 0 "$pc" deps "$work/deps/k.cu"
want='^note: this program has not been compiled through this cache$' check "deps says a list is predicted" 0 "$pc" deps "$work/deps/k.cu"
want='^stdout: paths only$' check "deps: the note is not on stdout" 0 bash -c "'$pc' deps '$work/deps/k.cu' 2>/dev/null | grep -qv '^present \\|^absent ' && echo stray || echo 'stdout: paths only'"
printf '#include "big.h"\n__global__ void k() {}\n' >"$work/deps/big.cu"
truncate -s 65M "$work/deps/big.h"
want='^note: .*incomplete: .*larger than 64 MiB' check "deps names what the scan could not follow" 0 "$pc" deps "$work/deps/big.cu"
printf '__global__ void k(const char **s) { *s = __TIME__; }\n' >"$work/deps/t.cu"
want='^uncacheable: .*__TIME__' check "deps of an uncacheable program" 1 "$pc" deps "$work/deps/t.cu"
want='hits: +[1-9]' check "stats shows shared hits" 0 "$pc" stats
want='compile time saved' check "stats shows time saved" 0 "$pc" stats
want=' cubin +13\.|cubin +1[2-9]\.' check "ls shows the entry" 0 "$pc" ls
want='stored [0-9]+ bytes' check "put" 0 "$pc" put text:hello "$kernel"
want='wrote [0-9]+ bytes' check "get" 0 "$pc" get text:hello -o "$work/out"
want='^' check "get round-trips bytes" 0 cmp "$kernel" "$work/out"
want='no entry' check "get of a missing key exits 1" 1 "$pc" get text:absent -o "$work/x"
# Input that cannot be read whole is an error, never a short value: a stream read a directory, or
# a file whose read failed, as empty, and put stored it, compile built it (and cached the build).
want="cannot read '/tmp': Is a directory" check "put of a directory exits 1" 1 "$pc" put text:dir /tmp
want='cannot read standard input: Is a directory' check "put - from a directory exits 1" 1 bash -c "'$pc' put text:dir - < /tmp"
want="cannot read '/proc/self/mem': Input/output error" check "a read error is reported" 1 "$pc" put text:dir /proc/self/mem
want='no entry' check "... and none of them stored anything" 1 "$pc" get text:dir -o "$work/x"
want="cannot read '$work': Is a directory" check "compile of a directory exits 1" 1 "$pc" compile "$work"
want='stored [0-9]+ bytes' check "put - reads a pipe whole" 0 bash -c "head -c 300000 /dev/urandom | tee '$work/rand' | '$pc' put text:rand -"
want='^' check "... byte for byte" 0 bash -c "'$pc' get text:rand -o - | cmp - '$work/rand'"
# Output that cannot be written whole is removed (a truncated cubin left behind looks like a
# good one to a build): the file size limit stops the write after 100 KiB.
want="cannot write '$work/cut': File too large" check "a failed write says why" 1 bash -c "trap '' XFSZ; ulimit -f 100; exec '$pc' get text:rand -o '$work/cut'"
want='^' check "... and leaves no partial file" 1 test -e "$work/cut"
want="cannot write '/dev/full': No space left on device" check "a full device is reported" 1 "$pc" get text:rand -o /dev/full
"$pc" rm text:rand >/dev/null
want='unknown command' check "unknown command exits 2" 2 "$pc" frobnicate
want='needs a value|usage' check "missing option value exits 2" 2 "$pc" compile "$kernel" --arch
want='usage: progcache prune' check "command --help" 0 "$pc" prune --help
want='verified 2 entries' check "verify" 0 "$pc" verify
want='evicted 0 entries' check "evict --older-than keeps fresh entries" 0 "$pc" evict --older-than 30d
want='evicted 1 entries' check "evict --nvrtc-version drops that toolkit's entries" 0 "$pc" evict --nvrtc-version "$("$pc" ls | awk '$3=="cubin"{print $4; exit}')"
want='removed text:hello' check "rm" 0 "$pc" rm text:hello
want='no entry' check "rm of a missing key exits 1" 1 "$pc" rm text:hello
want="no cache at '$work/fs'" check "a reading command creates no cache" 1 "$pc" stats --cache "filestream:$work/fs"
want='^' check "... and nothing is there" 1 test -e "$work/fs"
want="no cache at '$work/typo/x.db'" check "nor a SQLite one" 1 "$pc" ls --cache "sqlite:$work/typo/x.db"
want='^' check "... in a directory it would have made" 1 test -e "$work/typo"
# A path that names a file that was never a cache (a typo) is refused and the file left as it is,
# even by a command that only reads: it was reset to an empty database.
printf 'my notes\n' >"$work/notes.db"
want="'$work/notes.db' is not a progcache cache database \(not a SQLite database\)" check "a file that is not a cache is refused" 2 "$pc" stats --cache "sqlite:$work/notes.db"
want='^my notes$' check "... and left as it was" 0 cat "$work/notes.db"
want='stored' check "--cache after the command" 0 "$pc" put text:k "$kernel" --cache "filestream:$work/fs"
want='^' check "filestream cache was created" 0 test -f "$work/fs/format"
want='pruned to' check "prune" 0 "$pc" prune --max-size 1K
# run passes a job's stop signal on to the command and ends as it did: a timeout that stopped
# progcache run left the command running.
"$pc" --cache "sqlite:$work/run.db" run -- sleep 30 & runpid=$!
kid=''
for _ in $(seq 100); do kid=$(cat "/proc/$runpid/task/$runpid/children" 2>/dev/null) && [ -n "$kid" ] && break; sleep 0.05; done
kill -TERM "$runpid"; wait "$runpid"; runrc=$?
want='^143$' check "run ends by the command's SIGTERM" 0 echo "$runrc"
want='^' check "... which reached the command" 1 kill -0 $kid
# run keeps its check's connection to a SQLite cache open while the command runs: with it the
# WAL index stays built, and each of the command's processes that opens the cache first would
# otherwise rebuild it (~0.25 ms a process on a 2-core VM: bench/analysis.md, stop 62).
# shellcheck disable=SC2016  # expanded by the command's shell
want='run\.db-shm$' check "run holds its SQLite cache's WAL index while the command runs" 0 "$pc" --cache "sqlite:$work/run.db" run -- sh -c 'for fd in /proc/$PPID/fd/*; do readlink "$fd"; done'
# PTX, NVVM IR and links: nvJitLink and libNVVM through the cache.
"$pc" compile "$kernel" --target ptx -o "$work/k.ptx" -- --std=c++17 -rdc=true > /dev/null
want='^miss: .*k\.ptx compiled in .*nvJitLink' check "PTX compiles with nvJitLink" 0 "$pc" compile "$work/k.ptx" -o "$work/from-ptx.cubin"
want='^hit: .*k\.ptx' check "PTX hits" 0 "$pc" compile "$work/k.ptx"
printf '%s\n' 'target datalayout = "e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64"' \
  'target triple = "nvptx64-nvidia-cuda"' 'define void @k(float* %a) {' '  store float 1.0, float* %a' '  ret void' '}' \
  '!nvvm.annotations = !{!0}' '!0 = !{void (float*)* @k, !"kernel", i32 1}' '!nvvmir.version = !{!1}' '!1 = !{i32 2, i32 0}' > "$work/k.ll"
want='^miss: .*k\.ll compiled in .*libNVVM' check "NVVM IR compiles with libNVVM" 0 "$pc" compile "$work/k.ll" -o "$work/k-nvvm.ptx"
want='^hit: .*k\.ll' check "NVVM IR hits" 0 "$pc" compile "$work/k.ll"
want='^' check "libNVVM wrote PTX" 0 grep -q '.entry k' "$work/k-nvvm.ptx"
"$pc" compile "$kernel" --target ltoir -o "$work/k.ltoir" -- --std=c++17 > /dev/null
want='^miss: .*k\.ltoir linked in .*nvJitLink' check "link misses" 0 "$pc" link "$work/k.ltoir" --lto -o "$work/linked.cubin"
want='^hit: .*k\.ltoir in ' check "link hits" 0 "$pc" link "$work/k.ltoir" --lto
want='^' check "link wrote an ELF" 0 bash -c "head -c 4 '$work/linked.cubin' | grep -q ELF"
want='extension' check "link of an unknown kind exits 2" 2 "$pc" link "$kernel"
want='nvJitLink refused' check "a refused link exits 1 with the log" 1 "$pc" link "$work/k.ltoir"
# ccache's short options, typed by habit.
want='hits:' check "-s is stats" 0 "$pc" -s
want='zeroed|set to zero' check "-z zeroes the counters" 0 "$pc" -z
want='max_size' check "-p shows the settings" 0 "$pc" -p
want='^progcache [0-9]' check "-V is the version" 0 "$pc" -V
want='stored' check "-M stores a cap" 0 "$pc" --cache "sqlite:$work/habits.db" -M 64M
want='64.0 MiB' check "... which config shows" 0 "$pc" --cache "sqlite:$work/habits.db" config
want='cleared' check "clear" 0 "$pc" clear
want='entries: +0' check "empty after clear" 0 "$pc" stats
want='is not a size' check "bad PCACHE_MAX_SIZE exits 2" 2 env PCACHE_MAX_SIZE=lots "$pc" stats
want='MAJOR.MINOR' check "evict --nvrtc-version 1.x is a usage error" 2 "$pc" evict --nvrtc-version 1.x
want='is not a size' check "an empty max_size= is refused, not unbounded" 2 "$pc" --cache "sqlite:$work/p.db?max_size=" stats
want='larger than 1 EiB' check "a max_size that would wrap is refused" 2 "$pc" --cache "sqlite:$work/p.db?max_size=16777216T" stats
want='too large' check "a 19-digit timeout is refused" 2 "$pc" --cache "sqlite:$work/p.db?busy_timeout_ms=9999999999999999999" stats

# The command line is parsed by getopt_long against the command table: --opt=value and --opt value
# spellings, -o as --output, every usage error exits 2 with a message, and help comes from the
# same table (progcache help CMD, CMD --help, the manual).
want='^(hit|miss): ' check "--output=FILE and --name-expression=EXPR spellings" 0 "$pc" compile "$kernel" --name-expression='scale_add<float>' --output="$work/k2.cubin" -- --std=c++17
want='option\[0\] +stored --gpu-architecture=sm_90, now --gpu-architecture=sm_75' check "--arch=VALUE spelling" 1 "$pc" explain "$kernel" --arch=sm_75 --name-expression='scale_add<float>' -- --std=c++17
want='^' check "--output wrote the same binary" 0 cmp "$work/k.cubin" "$work/k2.cubin"
want="unknown option '--frob'.*NVRTC options go after --" check "an unknown compile option exits 2 and says where NVRTC options go" 2 "$pc" compile "$kernel" --frob
want="stats takes 0 operand" check "an extra operand exits 2" 2 "$pc" stats extra
want="ls takes nothing after --" check "a stray -- exits 2" 2 "$pc" ls -- x
want="get needs -o FILE" check "get without -o exits 2" 2 "$pc" get text:x
want="--max-size: .*is not a size" check "a bad --max-size exits 2" 2 "$pc" --max-size lots stats
want="--older-than: .*is not a duration" check "a bad --older-than exits 2" 2 "$pc" evict --older-than 3x
want='usage: progcache evict' check "help CMD" 0 "$pc" help evict
want='--nvrtc-version V' check "help CMD lists the command's options" 0 "$pc" evict --help
want="unknown command 'nope'" check "help of an unknown command exits 2" 2 "$pc" help nope
want='^progcache [0-9]+\.[0-9]+\.[0-9]+ \(library [0-9.]+\)$' check "--version" 0 "$pc" --version
want='^\.TH PROGCACHE 1' check "help --man prints the manual" 0 "$pc" help --man
want='^$' check "no line of help is wider than 80 columns" 0 bash -c "for c in '' \$('$pc' --help | awk '/^  [a-z]/{print \$1}'); do '$pc' \$c --help; done | awk 'length(\$0) > 80'"
# On a terminal (script(1) provides one), long commands draw a progress line with a percentage,
# then erase it for the result.
if command -v script >/dev/null; then
  for k in p1 p2 p3; do "$pc" --cache "sqlite:$work/progress.db" put "text:$k" "$kernel" >/dev/null; done
  want='verify: [0-9]+/[0-9]+ \([0-9]+%\).*verified [0-9]+ entries' check "verify shows progress on a terminal" 0 bash -c "script -qec \"'$pc' --cache sqlite:$work/progress.db verify\" /dev/null | tr '\r' '\n' | tr -d '\n'"
fi
# Progress lines are for terminals: piped output holds the results only.
want='^verified [0-9]+ entries' check "verify prints no progress line when not on a terminal" 0 bash -c "'$pc' verify 2>&1 | head -1"

# A cap that lasts: stored in the cache by `config`, applied by every later command that stores,
# shown by stats and config with where it came from, and what prune prunes to without --max-size.
cc="sqlite:$work/config.db"
head -c 1000 /dev/zero >"$work/1k"
want='max_size +2\.0 KiB \(2048 bytes\) +from the cache' check "config max_size stores a cap" 0 "$pc" --cache "$cc" config max_size 2K
for k in a b c; do "$pc" --cache "$cc" put "text:$k" "$work/1k" >/dev/null; done
want='^2 entries' check "later puts apply the stored cap" 0 bash -c "'$pc' --cache '$cc' ls | tail -1"
want='cap: +2\.0 KiB \([0-9.]+% full\), from the cache' check "stats shows the stored cap and its source" 0 "$pc" --cache "$cc" stats
want='"cap_bytes": 2048, "cap_source": "the cache' check "stats --json too" 0 "$pc" --cache "$cc" stats --json
want='max_size +3\.0 KiB .*from environment \(PCACHE_MAX_SIZE\)' check "the environment wins over the stored cap" 0 env PCACHE_MAX_SIZE=3K "$pc" --cache "$cc" config
want='pruned to .*cap 1\.0 KiB' check "prune takes --max-size" 0 "$pc" --cache "$cc" prune --max-size 1K
"$pc" --cache "$cc" config max_size 1M >/dev/null
want='pruned to .*cap 1\.0 MiB' check "prune without --max-size prunes to the configured cap" 0 "$pc" --cache "$cc" prune
want='removed the cap' check "config max_size none removes it" 0 "$pc" --cache "$cc" config max_size none
want='stored max_size 0 \(no cap: the cache grows without bound\)' check "config max_size 0 says it stores no cap (it said '0 B')" 0 "$pc" --cache "$cc" config max_size 0
"$pc" --cache "$cc" config max_size none >/dev/null
want='no cap is configured' check "prune without any cap is a usage error" 2 "$pc" --cache "$cc" prune
want='--max-size 0 would keep nothing: progcache clear' check "prune --max-size 0 says what it would do and what does it" 2 "$pc" --cache "$cc" prune --max-size 0
want='only max_size is stored' check "other settings are not stored in the cache" 2 "$pc" --cache "$cc" config secret_file /x
mkdir -p "$work/xdg/progcache"; printf 'max_size = 64K\n' >"$work/xdg/progcache/progcache.conf"
want="max_size +64\.0 KiB .*from $work/xdg/progcache/progcache.conf" check "config shows a config file's setting and the file" 0 "$pc" --cache "$cc" config
rm -r "$work/xdg"
want='max_size +5\.0 GiB .*from the default for the default cache' check "the default cache has a default cap" 0 "$pc" config

# Administration reads without using: ls, verify, export and explain read every entry, which
# used to count each as a hit and refresh its recency (ls walks newest first, so one ls
# reversed the LRU order and a capped put then evicted the hot entries).
head -c 1000 /dev/zero >"$work/1k"
for adm in "sqlite:$work/adm.db?max_size=3000" "filestream:$work/adm-fs?max_size=3000&touch_interval_ms=0"; do
  for k in a b c; do "$pc" --cache "$adm" put "text:$k" "$work/1k" >/dev/null; done
  hits_before=$("$pc" --cache "$adm" stats | awk '/^hits:/{print $2}')
  "$pc" --cache "$adm" ls >/dev/null
  "$pc" --cache "$adm" verify >/dev/null
  "$pc" --cache "$adm" export "$work/adm.pcb" >/dev/null 2>&1
  "$pc" --cache "$adm" explain "$kernel" >/dev/null 2>&1
  rm -f "$work/adm.pcb"
  want="^$hits_before\$" check "administration counts no hits (${adm%%:*})" 0 bash -c "'$pc' --cache '$adm' stats | awk '/^hits:/{print \$2}'"
  "$pc" --cache "$adm" put text:d "$work/1k" >/dev/null
  want='no entry' check "the least recently used entry goes first after ls/verify/export/explain (${adm%%:*})" 1 "$pc" --cache "$adm" get text:a -o "$work/x"
  want='wrote' check "the others stay (${adm%%:*})" 0 "$pc" --cache "$adm" get text:b -o "$work/x"
done

# A cap given to a command that only reads never evicts (--max-size 1K stats used to empty it).
rd="sqlite:$work/read-only-cap.db"
"$pc" --cache "$rd" put text:big "$kernel" >/dev/null
want='cap: +1(\.0)? ?K' check "stats shows the cap it was given" 0 "$pc" --cache "$rd" --max-size 1K stats
want='wrote' check "a read with a small --max-size evicted nothing" 0 "$pc" --cache "$rd" get text:big -o "$work/x"
want='entries: +1' check "and the count says so" 0 "$pc" --cache "$rd" --max-size 1K stats
# Standard streams: get -o - writes the bytes and nothing else; put KEY - reads them.
want='^' check "put from standard input" 0 bash -c "'$pc' --cache '$rd' put text:piped - < '$kernel'"
want='^' check "get to standard output is exactly the bytes" 0 bash -c "'$pc' --cache '$rd' get text:piped -o - | cmp - '$kernel'"
# verify is fsck-like: exit 1 when it found (and removed) damage, 0 when all was well.
vd="$work/verify-fs"
"$pc" --cache "filestream:$vd" put text:v "$kernel" >/dev/null
entry=$(find "$vd" -path '*/[0-9a-f][0-9a-f]/*' -type f | head -1)
printf '\xff' | dd of="$entry" bs=1 seek=200 conv=notrunc status=none
want='1 damaged and removed' check "verify finds damage and exits 1" 1 "$pc" --cache "filestream:$vd" verify
want='0 damaged' check "verify of a sound cache exits 0" 0 "$pc" --cache "filestream:$vd" verify
want='^ok$' check "the damage verify removed is in the shared counters" 0 bash -c "'$pc' --cache 'filestream:$vd' stats --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"corrupt\"]==1 and d[\"uncacheable\"]==0, d; print(\"ok\")'"
want='damaged, removed: +1$' check "stats says so" 0 "$pc" --cache "filestream:$vd" stats
"$pc" --cache "filestream:$vd" put text:v "$kernel" >/dev/null
entry=$(find "$vd" -path '*/[0-9a-f][0-9a-f]/*' -type f | head -1)
printf '\xff' | dd of="$entry" bs=1 seek=200 conv=notrunc status=none
want='warning: removed a damaged cache entry' check "the library's warnings reach stderr" 1 "$pc" --cache "filestream:$vd" get text:v -o "$work/x"

# stats --zero resets the shared counters and keeps the entries; clear does the reverse.
for zc in "sqlite:$work/zero.db" "filestream:$work/zero-fs"; do
  "$pc" --cache "$zc" put text:z "$kernel" >/dev/null
  "$pc" --cache "$zc" get text:z -o "$work/x" >/dev/null
  want='hits: +1' check "a hit is counted (${zc%%:*})" 0 "$pc" --cache "$zc" stats
  want='statistics zeroed \(1 entries kept\)' check "stats --zero (${zc%%:*})" 0 "$pc" --cache "$zc" stats --zero
  want='hits: +0' check "hits are zero after stats --zero (${zc%%:*})" 0 "$pc" --cache "$zc" stats
  want='entries: +1' check "entries stay after stats --zero (${zc%%:*})" 0 "$pc" --cache "$zc" stats
done

# NVRTC's warnings and ptxas output are shown, and replayed from the stored log on a hit (a hit
# that drops them breaks tools that parse -Xptxas -v, as NVRTC's own cache did for nvFuser).
printf '__global__ void k(float *x) { int unused; x[threadIdx.x] = 1.0f; }\n' >"$work/warn.cu"
shows_log() {  # hit|miss: the compile was that, and showed NVRTC's warning and ptxas -v output
  local out
  out=$("$pc" --cache "sqlite:$work/log.db" compile "$work/warn.cu" -- -Xptxas -v 2>&1)
  grep -q "^$1:" <<<"$out" && grep -q 'warning #177' <<<"$out" &&
    grep -q 'ptxas info *: Compiling entry function' <<<"$out" && echo shown
}
want='^shown$' check "a miss shows NVRTC's warnings and ptxas output" 0 shows_log miss
want='^shown$' check "a hit replays them from the stored log" 0 shows_log hit

# One compile is one lookup: a miss counts one miss (the look again under the lock counted a second).
"$pc" --cache "sqlite:$work/one.db" compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17 >/dev/null
want='misses: +1$' check "a compile that missed counts one miss" 0 "$pc" --cache "sqlite:$work/one.db" stats

# Machine-readable output: stats --json and ls --json are one JSON object each, even for a
# cache whose path is not UTF-8 (the byte becomes U+FFFD).
jd="filestream:$work/json-$(printf '\xff')dir"
"$pc" --cache "$jd" put text:j "$kernel" >/dev/null
want='^ok$' check "stats --json" 0 bash -c "'$pc' --cache '$jd' --max-size 1M stats --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"entries\"]==1 and d[\"cap_bytes\"]==1048576 and 0<d[\"fill_ratio\"]<1 and \"\\ufffd\" in d[\"cache\"], d; print(\"ok\")'"
want='^ok$' check "ls --json" 0 bash -c "'$pc' --cache '$jd' ls --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"count\"]==1 and d[\"entries\"][0][\"key\"]==\"text:j\" and d[\"entries\"][0][\"target\"] is None, d; print(\"ok\")'"
want='^ok$' check "stats --json of a tiered cache lists its tiers" 0 bash -c "'$pc' --cache 'tiered:memory:|$jd' stats --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d[\"tiers\"])==2 and d[\"tiers\"][1][\"entries\"]==1, d; print(\"ok\")'"
want='cap: +1\.0 MiB \([0-9.]+% full\)' check "stats shows how full the cap is" 0 "$pc" --cache "$jd" --max-size 1M stats

# export / import: a warmed cache shipped as one file into another backend.
src="sqlite:$work/src.db"
"$pc" --cache "$src" compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17 >/dev/null
"$pc" --cache "$src" put text:note "$kernel" >/dev/null
want='exported 2 entries' check "export" 0 "$pc" --cache "$src" export "$work/warm.pcb"
want='imported 2 entries .* 0 rejected' check "import into filestream" 0 "$pc" --cache "filestream:$work/warm" import "$work/warm.pcb"
want='^hit: ' check "imported kernel hits" 0 "$pc" --cache "filestream:$work/warm" compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
want='wrote' check "imported bytes" 0 "$pc" --cache "filestream:$work/warm" get text:note -o "$work/note"
want='^' check "imported bytes are identical" 0 cmp "$kernel" "$work/note"
want='imported 2 entries' check "import from stdin" 0 bash -c "'$pc' --cache sqlite:$work/src.db export - | '$pc' --cache memory: import -"
# What is not a regular file is written in place, never renamed over: as root, export to
# /dev/null put a regular file where the device was. A FIFO stays a FIFO and its reader gets the
# bundle; a symlink stays a link to the new bundle.
mkfifo "$work/pipe"
(timeout 20 cat "$work/pipe" >"$work/from-pipe.pcb") & reader=$!
want='exported 2 entries' check "export to a FIFO" 0 timeout 20 "$pc" --cache "$src" export "$work/pipe"
wait "$reader"
want='^' check "... which is still a FIFO" 0 test -p "$work/pipe"
want='imported 2 entries' check "... and its reader got the bundle" 0 "$pc" --cache memory: import "$work/from-pipe.pcb"
ln -s warm.pcb "$work/link.pcb"
want='exported 2 entries' check "export to a symlink" 0 "$pc" --cache "$src" export "$work/link.pcb"
want='^' check "... which is still a link" 0 test -L "$work/link.pcb"
python3 - "$work/warm.pcb" "$work/tampered.pcb" <<'PY'
import sys
d = bytearray(open(sys.argv[1], 'rb').read())
d[len(d) // 2] ^= 1
open(sys.argv[2], 'wb').write(d)
PY
want='imported 1 entries.* 1 rejected' check "a tampered record is rejected, the rest imported" 1 "$pc" --cache memory: import "$work/tampered.pcb"
head -c 1000 "$work/warm.pcb" >"$work/short.pcb"
want='truncated' check "a truncated bundle is reported" 1 "$pc" --cache memory: import "$work/short.pcb"
want='not a progcache bundle' check "a foreign file is refused" 1 "$pc" --cache memory: import "$kernel"
printf 'fleet secret' >"$work/secret"; chmod 600 "$work/secret"
# Two entries and the manifest of observations their compile is filed under (core/bundle.hpp).
want='imported 0 entries .* 3 rejected' check "with a secret, unsigned records are rejected" 1 env PCACHE_SECRET_FILE="$work/secret" "$pc" --cache memory: import "$work/warm.pcb"
signed="sqlite:$work/signed.db"
PCACHE_SECRET_FILE="$work/secret" "$pc" --cache "$signed" put text:a "$kernel" >/dev/null
PCACHE_SECRET_FILE="$work/secret" "$pc" --cache "$signed" put text:b "$kernel" >/dev/null
PCACHE_SECRET_FILE="$work/secret" "$pc" --cache "$signed" export "$work/signed.pcb" >/dev/null 2>&1
want='imported 2 entries .* 0 rejected' check "signed records import under the same secret" 0 env PCACHE_SECRET_FILE="$work/secret" "$pc" --cache memory: import "$work/signed.pcb"
printf 'another secret' >"$work/secret2"; chmod 600 "$work/secret2"
want='MAC does not match' check "signed records are rejected under another secret" 1 env PCACHE_SECRET_FILE="$work/secret2" "$pc" --cache memory: import "$work/signed.pcb"

# Exporting over a file of the cache being exported would destroy it (the bundle is renamed into
# place): refused, and the cache keeps its entries. Bundles are created 0600, like the cache.
live="$work/live.db"
"$pc" --cache "sqlite:$live" put text:a "$kernel" >/dev/null
want='is a file of the cache' check "export over the live database is refused" 2 "$pc" --cache "sqlite:$live" export "$live"
want='is a file of the cache' check "export over its WAL is refused" 2 "$pc" --cache "sqlite:$live" export "$live-wal"
want='is a file of the cache' check "export into a filestream cache is refused" 2 "$pc" --cache "filestream:$work/warm" export "$work/warm/b.pcb"
want='entries: +1' check "the cache keeps its entries" 0 "$pc" --cache "sqlite:$live" stats
"$pc" --cache "sqlite:$live" export "$work/mode.pcb" >/dev/null 2>&1
want='^600$' check "bundles are created 0600" 0 stat -c %a "$work/mode.pcb"
# A bundle whose one record declares 64 MiB of zeros (a few KB compressed), imported under a 1 MiB
# cap: refused before anything is inflated.
"$pc" --cache "sqlite:$work/bomb.db" put text:bomb <(head -c 67108864 /dev/zero) >/dev/null
"$pc" --cache "sqlite:$work/bomb.db" export "$work/bomb.pcb" >/dev/null 2>&1
want='more than this cache can store' check "a record over the cap is refused before inflating" 1 "$pc" --cache memory: --max-size 1M import "$work/bomb.pcb"
want='imported 1 entries' check "the same bundle imports without the cap" 0 "$pc" --cache memory: import "$work/bomb.pcb"

# A Redis tier through the CLI (the server is this test's own, on a free port).
if command -v redis-server >/dev/null; then
  for attempt in 1 2 3 4 5; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --requirepass pw >"$work/redis.log" 2>&1 &
    redis_pid=$!
    trap 'kill $redis_pid 2>/dev/null; rm -rf "$work"' EXIT
    for i in $(seq 50); do redis-cli -p "$port" -a pw --no-auth-warning ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    kill -0 $redis_pid 2>/dev/null && break
  done
  redis="redis://:pw@127.0.0.1:$port/0?prefix=cli:"
  want='imported 2 entries' check "import into redis" 0 "$pc" --cache "$redis" import "$work/warm.pcb"
  want='entries: +2' check "redis stats counts entries" 0 "$pc" --cache "$redis" stats
  want='redis://:\*\*\*@127' check "the password is never printed" 0 "$pc" --cache "$redis" stats
  want='^' check "a password holding '/' is never printed either" 0 bash -c "! '$pc' --cache 'tiered:memory:|redis://:se/cret@127.0.0.1:$port/0' stats 2>&1 | grep -q cret"
  tiered="tiered:sqlite:$work/node.db|$redis"
  want='tier 0: +sqlite:.* entries 1, .*hits 0, misses 1 .*tier 1: +redis://:\*\*\*@.* hits 1' check "tiered stats per tier" 0 bash -c "'$pc' --cache '$tiered' get text:note -o '$work/n2' >/dev/null && '$pc' --cache '$tiered' stats | tr '\n' ' '"
  want='maxmemory' check "prune refuses a redis cache with the reason" 2 "$pc" --cache "$redis" prune --max-size 1K
  want='exported 2 entries' check "export from redis" 0 "$pc" --cache "$redis" export "$work/from-redis.pcb"
  want='imported 2 entries .* 0 rejected' check "a redis bundle imports into sqlite" 0 "$pc" --cache "sqlite:$work/from-redis.db" import "$work/from-redis.pcb"
  want='^hit: ' check "a node with an empty local cache hits through redis" 0 "$pc" --cache "tiered:sqlite:$work/node3.db|$redis" compile "$kernel" --name-expression 'scale_add<float>' -- --std=c++17
fi
echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
