"""The drop-in libNVVM and nvJitLink, timed in fresh processes (issue #30's benchmarks):

1. numba-cuda compiling 20 kernels (`cuda.compile_ptx`, sm_90) in a fresh process, on the real
   libNVVM and through a warm drop-in (`progcache run --preload`), alternated: the process, the 20
   compiles, the library's loading (cuda.bindings' first call: cuda-pathfinder, dlopen, and the
   drop-in opening the cache), and the time spent inside libNVVM's API during the compiles (every
   cuda.bindings.nvvm call, timed), whose ratio is the target (>= 50x); numba's own typing and
   lowering are not ours to cache.
2. An LTO link of NVRTC -dlto output (two modules, one calling the other) through
   cuda.bindings.nvjitlink, 20 times in one process: per link, the real nvJitLink against a warm
   drop-in (every link a hit; target >= 50x).

Prints one JSON line of medians (ms). Usage:
  jit_startup.py PROGCACHE PYTHONPATH TOOLKIT [RUNS]
PYTHONPATH holds numba-cuda, numba, llvmlite, cuda-bindings, cuda-pathfinder and numpy.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

NUMBA_CHILD = r'''
import json, os, site, sys, time
for p in list(sys.path):  # numba-cuda's .pth file redirects numba.cuda to it
    if os.path.isfile(os.path.join(p, "_numba_cuda_redirector.pth")):
        site.addsitedir(p)
t0 = time.perf_counter()
from cuda.bindings import nvvm
spent = [0.0]
def timed(f):
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t
    return wrapper
for name in dir(nvvm):
    if not name.startswith("_") and callable(getattr(nvvm, name)) and name[0].islower():
        setattr(nvvm, name, timed(getattr(nvvm, name)))
t_load = time.perf_counter()
nvvm.version()  # cuda.bindings finds and loads the library (cuda-pathfinder) on its first call
load_ms = (time.perf_counter() - t_load) * 1e3
spent[0] = 0.0
from numba import cuda, float32
import math
assert "numba_cuda" in cuda.__file__, cuda.__file__
import gc
gc.disable()  # as timeit does: a collection that happens to start inside a timed call is not its cost
t1 = time.perf_counter()
for i in range(20):
    src = ("def k(x, y):\n    j = cuda.grid(1)\n    if j < x.size:\n"
           "        y[j] = math.sin(x[j] * %d.0) + math.exp(-x[j]) * %d.0\n" % (i + 1, i + 2))
    scope = {"cuda": cuda, "math": math}
    exec(src, scope)
    cuda.compile_ptx(scope["k"], (float32[:], float32[:]), cc=(9, 0))
t2 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "compile_ms": (t2 - t1) * 1e3,
                  "load_ms": load_ms, "nvvm_ms": spent[0] * 1e3}))
'''

LINK_CHILD = r'''
import json, sys, time, statistics
from cuda.bindings import nvjitlink
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
T = nvjitlink.InputType
times = []
for _ in range(20):
    t = time.perf_counter()
    h = nvjitlink.create(2, ["-arch=sm_90", "-lto"])
    nvjitlink.add_data(h, T.LTOIR, a, len(a), "a.ltoir")
    nvjitlink.add_data(h, T.LTOIR, b, len(b), "b.ltoir")
    nvjitlink.complete(h)
    n = nvjitlink.get_linked_cubin_size(h)
    buf = bytearray(n)
    nvjitlink.get_linked_cubin(h, buf)
    nvjitlink.destroy(h)
    times.append((time.perf_counter() - t) * 1e3)
print(json.dumps({"link_ms": statistics.median(times), "cubin_bytes": n}))
'''


def run(argv, env):
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("jit_startup.py: %s failed: %s" % (" ".join(argv[:5]), done.stderr[-2000:]))
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_ms"] = (time.perf_counter() - t0) * 1e3
    return result


def medians(results, field):
    return round(statistics.median(r[field] for r in results), 3)


def main():
    progcache, pythonpath, toolkit = sys.argv[1:4]
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 7
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=tmp, PYTHONPATH=pythonpath,
                    CUDA_HOME=toolkit, PCACHE_URI="sqlite:%s/warm.db" % tmp)
        base.pop("PCACHE_DISABLE", None)
        through = [progcache, "run", "--preload", "--"]
        numba = [sys.executable, "-c", NUMBA_CHILD]
        cold = run(through + numba, base)
        real, warm = [], []
        for _ in range(runs):
            real.append(run(numba, base))
            warm.append(run(through + numba, base))
        # The link's inputs: NVRTC -dlto output of a kernel and the helper it calls.
        for name, text in [("a", 'extern "C" __device__ float helper(float);\n'
                                 'extern "C" __global__ void k(float *x) { x[0] = helper(x[0]); }\n'),
                           ("b", 'extern "C" __device__ float helper(float x) { return x * 2.0f; }\n')]:
            with open("%s/%s.cu" % (tmp, name), "w") as f:
                f.write(text)
            subprocess.run([progcache, "--cache", "memory:", "compile", "%s/%s.cu" % (tmp, name),
                            "--target", "ltoir", "-o", "%s/%s.ltoir" % (tmp, name), "--",
                            "-arch=sm_90", "-dlto", "-rdc=true"], env=base, check=True,
                           capture_output=True)
        link = [sys.executable, "-c", LINK_CHILD, tmp + "/a.ltoir", tmp + "/b.ltoir"]
        run(through + link, base)  # fills the cache
        link_real, link_warm = [], []
        for _ in range(runs):
            link_real.append(run(link, base))
            link_warm.append(run(through + link, base))
    result = {"runs": runs, "kernels": 20}
    for tag, rs in [("real", real), ("warm", warm)]:
        for field in ("process_ms", "import_ms", "compile_ms", "load_ms", "nvvm_ms"):
            result["numba_%s_%s" % (tag, field)] = medians(rs, field)
    result["numba_cold_nvvm_ms"] = round(cold["nvvm_ms"], 3)
    result["numba_nvvm_ratio"] = round(result["numba_real_nvvm_ms"] / result["numba_warm_nvvm_ms"], 1)
    result["link_real_ms"] = medians(link_real, "link_ms")
    result["link_warm_ms"] = medians(link_warm, "link_ms")
    result["link_ratio"] = round(result["link_real_ms"] / result["link_warm_ms"], 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
