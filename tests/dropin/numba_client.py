"""libNVVM clients nobody here wrote: numba-cuda, which turns each @cuda.jit function into PTX
through libNVVM (cuda.bindings.nvvm, found by cuda-pathfinder), and numba's own CUDA target
(libNVVM through ctypes, dlopen("libnvvm.so")). The JIT drop-in test runs this on
the real libNVVM and through `progcache run --preload`, cold and warm, and compares the PTX.

Usage: numba_client.py [--numba-cuda] OUTDIR MAPS_FILE
OUTDIR gets transcript.txt (each kernel's return type and PTX digest) and each kernel's PTX;
MAPS_FILE the lines of /proc/self/maps that name libnvJitLink or libnvvm. No GPU is needed:
compile_ptx only compiles.
"""
import hashlib
import os
import site
import sys

# --numba-cuda: the numba-cuda package (its .pth file redirects numba.cuda to it, which a
# PYTHONPATH entry does not process); without it, numba's own CUDA target (ctypes libNVVM).
NUMBA_CUDA = "--numba-cuda" in sys.argv
if NUMBA_CUDA:
    sys.argv.remove("--numba-cuda")
    for p in list(sys.path):
        if os.path.isfile(os.path.join(p, "_numba_cuda_redirector.pth")):
            site.addsitedir(p)

from numba import cuda, float32, int32  # noqa: E402

if NUMBA_CUDA and "numba_cuda" not in cuda.__file__:
    sys.exit("numba.cuda is not numba-cuda's: " + cuda.__file__)

def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a

def k2(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i] ** 2 + 1.0

def k3(x):
    i = cuda.grid(1)
    s = 0.0
    for j in range(x.size):
        s += x[j]
    x[i] = s


out = sys.argv[1]
with open(os.path.join(out, "transcript.txt"), "w") as log:
    for name, fn, sig in [("scale", k1, (float32[:], float32)), ("square", k2, (float32[:], float32[:])),
                          ("sum", k3, (float32[:],)), ("iscale", k1, (int32[:], int32))]:
        ptx, resty = cuda.compile_ptx(fn, sig, cc=(9, 0))
        with open(os.path.join(out, name + ".ptx"), "w") as f:
            f.write(ptx)
        log.write(f"{name} {resty} {hashlib.sha256(ptx.encode()).hexdigest()[:16]}\n")
with open("/proc/self/maps") as f, open(sys.argv[2], "w") as m:
    m.writelines(line for line in f if "libnvJitLink" in line or "libnvvm" in line)
