#!/usr/bin/env python3
"""Times NVIDIA cuda.core's program caches on exactly the work progcache-ops does.

    reference.py ops --backend filestream|memory --dir DIR --size BYTES --count N [--max-size BYTES]
    reference.py key --source-bytes N --count N

Prints one JSON line like progcache-ops ({"put_us", "hit_us", "miss_us"}), or
{"error": "..."} saying exactly what could not run and why. Run it inside the virtual environment
bench/run creates (cuda-core from PyPI).
"""
import argparse
import json
import os
import sys
import time


def emit(obj):
    print(json.dumps(obj))
    sys.stdout.flush()


def ops(args):
    try:
        from cuda.core.utils import FileStreamProgramCache, InMemoryProgramCache
    except Exception as exc:  # noqa: BLE001 - report whatever stops the import
        return emit({"error": "cannot import cuda.core.utils caches: %s: %s" % (type(exc).__name__, exc)})
    cap = args.max_size or None
    if args.backend == "filestream":
        cache = FileStreamProgramCache(args.dir, max_size_bytes=cap)
    else:
        cache = InMemoryProgramCache(max_size_bytes=cap)
    value = bytes((i * 131 + 7) % 256 for i in range(args.size))
    keys = [("%s%d" % (args.key_prefix, i)).encode() for i in range(args.count)]
    absent = [("absent-%d" % i).encode() for i in range(args.count)]
    t0 = time.perf_counter()
    for k in keys:
        cache[k] = value
    t1 = time.perf_counter()
    hits = sum(1 for k in keys if cache.get(k) is not None)
    t2 = time.perf_counter()
    for k in absent:
        if cache.get(k) is not None:
            return emit({"error": "unexpected hit"})
    t3 = time.perf_counter()
    cache.close()
    n = args.count
    emit({"put_us": (t1 - t0) * 1e6 / n, "hit_us": (t2 - t1) * 1e6 / n, "miss_us": (t3 - t2) * 1e6 / n,
          "hits": hits})


def key(args):
    try:
        from cuda.core import ProgramOptions
        from cuda.core.utils import make_program_cache_key
    except Exception as exc:  # noqa: BLE001
        return emit({"error": "cannot import make_program_cache_key: %s: %s" % (type(exc).__name__, exc)})
    source = "x" * args.source_bytes
    opts = ProgramOptions(arch="sm_90", std="c++17")
    try:
        make_program_cache_key(code=source, code_type="c++", options=opts, target_type="cubin")
    except Exception as exc:  # noqa: BLE001
        return emit({"error": "make_program_cache_key failed: %s: %s" % (type(exc).__name__, exc)})
    t0 = time.perf_counter()
    for _ in range(args.count):
        make_program_cache_key(code=source, code_type="c++", options=opts, target_type="cubin")
    emit({"key_us": (time.perf_counter() - t0) * 1e6 / args.count})


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("ops")
    o.add_argument("--backend", choices=["filestream", "memory"], required=True)
    o.add_argument("--dir", default=os.environ.get("TMPDIR", "/tmp") + "/pcache-ref")
    o.add_argument("--size", type=int, required=True)
    o.add_argument("--count", type=int, required=True)
    o.add_argument("--max-size", type=int, default=0)
    o.add_argument("--key-prefix", default="key-")
    k = sub.add_parser("key")
    k.add_argument("--source-bytes", type=int, required=True)
    k.add_argument("--count", type=int, default=1000)
    args = p.parse_args()
    ops(args) if args.cmd == "ops" else key(args)


if __name__ == "__main__":
    main()
