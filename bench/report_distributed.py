#!/usr/bin/env python3
"""Writes bench/distributed's figures between the figure markers of the given Markdown files."""
import json
import os
import platform
import re
import subprocess
import sys

bench_path, distributed_md, performance_md = sys.argv[1:4]
bench = json.load(open(bench_path))
# With --benchmark_repetitions, the median of the repetitions (named like the plain row).
rows = {b["name"]: b for b in bench["benchmarks"] if b.get("run_type", "iteration") == "iteration"}
rows.update({b["run_name"]: b for b in bench["benchmarks"] if b.get("aggregate_name") == "median"})


def ns(name):
    b = rows[name]
    return b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]


def size_name(n):
    return "%d KiB" % (n >> 10) if n < 1 << 20 else "%d MiB" % (n >> 20)


def us(v):
    return "%.1f µs" % (v / 1e3) if v < 1e6 else "%.2f ms" % (v / 1e6)


def rate(v, size):
    return "%.0f/s, %.0f MB/s" % (1e9 / v, size * 1e9 / v / 1e6)


cpu = "unknown CPU"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()
machine = "%s, %d cores, %s, %s %s" % (cpu, os.cpu_count() or 0, platform.platform(), redis[0] if redis else "redis", redis[2] if len(redis) > 2 else "")

d = ["<!-- figures:begin (written by bench/distributed) -->",
     "Measured by `bench/distributed` on %s; client and server on one machine over" % machine,
     "loopback (a real network adds its round trip, ~50–500 µs in one data centre, to every row).",
     "Each progcache row has its baseline from the same run; times are medians of 5 repetitions.",
     "",
     "| hit, one thread | progcache | bare hiredis `GET` (baseline) | ratio | progcache rate |",
     "| --- | --- | --- | --- | --- |"]
for size in (4096, 65536, 1048576):
    ours, bare = ns("BM_RedisGet/plain/%d" % size), ns("BM_RedisBareGet/%d" % size)
    d.append("| redis, %s | %s | %s | %.2f× | %s |" % (size_name(size), us(ours), us(bare), ours / bare, rate(ours, size)))
for size in (4096, 65536, 1048576):
    t, r = ns("BM_TieredHit/%d" % size), ns("BM_RedisGet/plain/%d" % size)
    d.append("| tiered (memory tier serves), %s | %s | redis hit %s | %.3f× | %s |" % (size_name(size), us(t), us(r), t / r, rate(t, size)))
cz, cp = rows["BM_RedisGetCubin/zstd"], rows["BM_RedisGetCubin/plain"]
d.append("| real %d-byte cubin, zstd (default) | %s | stored plain %s | %.2f× | %.0f/s |" % (
    cz["cubin_bytes"], us(ns("BM_RedisGetCubin/zstd")), us(ns("BM_RedisGetCubin/plain")),
    ns("BM_RedisGetCubin/zstd") / ns("BM_RedisGetCubin/plain"), 1e9 / ns("BM_RedisGetCubin/zstd")))
cold_nvrtc, cold_tier = rows["BM_ColdStart/nvrtc_only/iterations:1"], rows["BM_ColdStart/redis_tier/iterations:3"]
n = int(cold_nvrtc["kernels"])
t_nvrtc, t_tier = ns("BM_ColdStart/nvrtc_only/iterations:1"), ns("BM_ColdStart/redis_tier/iterations:3")
d += ["",
      "| cold start: a node with an empty local cache compiles %d distinct kernels | time | per kernel |" % n,
      "| --- | --- | --- |",
      "| NVRTC only (no shared tier) | %.0f ms | %.0f ms |" % (t_nvrtc / 1e6, t_nvrtc / 1e6 / n),
      "| `tiered:sqlite:…\\|redis://…`, Redis warmed by another node | %.1f ms | %.2f ms |" % (t_tier / 1e6, t_tier / 1e6 / n),
      "| speed-up | %.0f× | |" % (t_nvrtc / t_tier),
      "<!-- figures:end -->"]

z = rows["BM_ZstdRealOutputs/1"]
p = ["<!-- figures:begin (written by bench/distributed) -->",
     "zstd on real NVRTC output (`BM_ZstdRealOutputs`: `examples/kernels.cu` compiled for sm_75, sm_80,",
     "sm_86, sm_89 and sm_90 as cubin (%d bytes in all), PTX (%d) and LTO-IR (%d)), measured by" % (
         z.get("bytes_cubin", 0), z.get("bytes_ptx", 0), z.get("bytes_ltoir", 0)),
     "`bench/distributed` on %s. Ratio = raw bytes / stored bytes." % machine,
     "",
     "| zstd level | cubin | PTX | LTO-IR | all | decompression |",
     "| --- | --- | --- | --- | --- | --- |"]
for level in (1, 3, 9, 19):
    b = rows["BM_ZstdRealOutputs/%d" % level]
    p.append("| %d%s | %.2f× | %.2f× | %.2f× | %.2f× | %.0f MB/s |" % (
        level, " (default)" if level == 3 else "", b.get("ratio_cubin", 0), b.get("ratio_ptx", 0),
        b.get("ratio_ltoir", 0), b["ratio"], b["bytes_per_second"] / 1e6))
p.append("<!-- figures:end -->")


def splice(path, block):
    text = open(path).read()
    new, n = re.subn(r"<!-- figures:begin.*?<!-- figures:end -->", lambda _: "\n".join(block), text, flags=re.S)
    if n != 1:
        sys.exit("%s: no figures markers" % path)
    open(path, "w").write(new)


splice(distributed_md, d)
splice(performance_md, p)
print("\n".join(d + [""] + p))
