"""An NVRTC client nobody here wrote: NVIDIA's Python bindings (cuda-bindings, which dlopens
libnvrtc.so.N through cuda-pathfinder). The drop-in test runs it on the real NVRTC and through
`progcache run`, cold and warm, and compares what it writes.

Usage: cuda_bindings_client.py OUTDIR INCLUDE_DIR MAPS_FILE
OUTDIR gets transcript.txt (every status, size and log) and one file per output's bytes; MAPS_FILE
the lines of /proc/self/maps that name an nvrtc library.
"""
import os
import sys

from cuda.bindings import nvrtc

TEMPLATES = (b"template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }\n"
             b'extern "C" __global__ void plain(float *x) { x[threadIdx.x] += 1.0f; }\n')
MEM_HEADER = (b'#include "params.h"\n'
              b'extern "C" __global__ void with_params(int *x) { x[threadIdx.x] = FACTOR; }\n')
DISK_HEADER = (b'#include "disk_header.h"\n'
               b'extern "C" __global__ void with_disk(int *x) { x[threadIdx.x] = DISK_FACTOR; }\n')


def name(result):
    return result.name


def run_case(out, log, case, source, program_name, headers, exprs, options):
    err, prog = nvrtc.nvrtcCreateProgram(source, program_name, len(headers),
                                         [h[1] for h in headers], [h[0] for h in headers])
    log.write(f"{case}\n  create: {name(err)}\n")
    for e in exprs:
        log.write(f"  add {e.decode()}: {name(nvrtc.nvrtcAddNameExpression(prog, e)[0])}\n")
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
    log.write(f"  compile: {name(err)}\n")
    getters = [("log", nvrtc.nvrtcGetProgramLogSize, nvrtc.nvrtcGetProgramLog),
               ("ptx", nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX),
               ("cubin", nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN),
               ("ltoir", nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR),
               ("optixir", nvrtc.nvrtcGetOptiXIRSize, nvrtc.nvrtcGetOptiXIR)]
    for what, size_of, data_of in getters:
        err, size = size_of(prog)
        log.write(f"  {what} size: {name(err)} {size if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else 0}\n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            continue
        buf = b" " * size
        (err,) = data_of(prog, buf)
        log.write(f"  {what} data: {name(err)}\n")
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS:
            with open(os.path.join(out, f"{case}.{what}"), "wb") as f:
                f.write(buf)
    for e in exprs + [b"never_added<char>"]:
        err, lowered = nvrtc.nvrtcGetLoweredName(prog, e)
        ok = err == nvrtc.nvrtcResult.NVRTC_SUCCESS
        log.write(f"  lowered {e.decode()}: {name(err)} {lowered.decode() if ok else '-'}\n")
    log.write(f"  destroy: {name(nvrtc.nvrtcDestroyProgram(prog)[0])}\n")


def main():
    out, include_dir, maps = sys.argv[1:4]
    with open(os.path.join(out, "transcript.txt"), "w") as log:
        exprs = [b"scale<float>", b"scale<int>", b"&plain"]
        run_case(out, log, "templates", TEMPLATES, b"templates.cu", [], exprs, [b"-arch=sm_90"])
        run_case(out, log, "memheaders", MEM_HEADER, b"memheaders.cu",
                 [(b"params.h", b"#define FACTOR 3\n")], [], [b"--gpu-architecture=sm_80"])
        run_case(out, log, "diskheaders", DISK_HEADER, b"diskheaders.cu", [], [],
                 [b"-I", include_dir.encode(), b"-arch=sm_90"])
        run_case(out, log, "ptx", TEMPLATES, b"ptx.cu", [], exprs[:1], [b"-arch=compute_90"])
        run_case(out, log, "ltoir", TEMPLATES, b"ltoir.cu", [], exprs[:2],
                 [b"-arch=sm_90", b"-dlto"])
        err, major, minor = nvrtc.nvrtcVersion()
        log.write(f"version: {name(err)} {major}.{minor}\n")
    with open("/proc/self/maps") as f, open(maps, "w") as m:
        m.writelines(line for line in f if "nvrtc" in line)


if __name__ == "__main__":
    main()
