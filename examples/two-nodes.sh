#!/usr/bin/env bash
# Two "nodes" on one machine sharing compiled kernels through Redis: each has its own local
# SQLite cache in front of one redis-server, started here on a free port and stopped at the end.
# Node A compiles examples/kernels.cu (a miss: NVRTC runs); node B, with an empty local cache,
# gets it from Redis (a hit: NVRTC is never loaded).
#   examples/two-nodes.sh [path/to/progcache]     (default: build/progcache)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pc=${1:-$here/../build/progcache}
work=$(mktemp -d "${TMPDIR:-/tmp}/progcache-two-nodes-XXXXXX")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --maxmemory 256mb --maxmemory-policy allkeys-lru >"$work/redis.log" 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
shared="redis://127.0.0.1:$port/0?prefix=demo:"
for node in A B; do
  echo "== node $node: tiered:sqlite:$work/node-$node.db|$shared"
  "$pc" --cache "tiered:sqlite:$work/node-$node.db|$shared" compile "$here/kernels.cu" \
    --name-expression 'scale_add<float>' -- --std=c++17
done
echo "== what the shared tier holds"
"$pc" --cache "$shared" stats
