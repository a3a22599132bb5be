"""nvJitLink and libNVVM clients nobody here wrote: NVIDIA's Python bindings
(cuda.bindings.nvjitlink and cuda.bindings.nvvm, which find the libraries through
cuda-pathfinder and dlopen them). The JIT drop-in test runs this on the real libraries and through
`progcache run --preload`, cold and warm, and compares what it writes.

Usage: cuda_bindings_jit_client.py OUTDIR INPUTDIR MAPS_FILE
OUTDIR gets transcript.txt (every status, size and log) and one file per output's bytes; MAPS_FILE
the lines of /proc/self/maps that name libnvJitLink or libnvvm.
"""
import os
import sys

from cuda.bindings import nvjitlink, nvvm


def read(indir, name):
    with open(os.path.join(indir, name), "rb") as f:
        return f.read()


def save(out, name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def link_case(out, log, indir, case, options, inputs):
    handle = nvjitlink.create(len(options), options)
    log.write(f"{case} create\n")
    try:
        for kind, name in inputs:
            data = read(indir, name)
            nvjitlink.add_data(handle, kind, data, len(data), name)
        nvjitlink.complete(handle)
        log.write(f"{case} complete\n")
        if "-ptx" in options:
            size = nvjitlink.get_linked_ptx_size(handle)
            buf = bytearray(size)
            nvjitlink.get_linked_ptx(handle, buf)
        else:
            size = nvjitlink.get_linked_cubin_size(handle)
            buf = bytearray(size)
            nvjitlink.get_linked_cubin(handle, buf)
        save(out, f"{case}.out", bytes(buf))
    except nvjitlink.nvJitLinkError as e:
        log.write(f"{case} error {e}\n")
        size = nvjitlink.get_error_log_size(handle)
        buf = bytearray(size)
        nvjitlink.get_error_log(handle, buf)
        save(out, f"{case}.error_log", bytes(buf))
    size = nvjitlink.get_info_log_size(handle)
    buf = bytearray(size)
    nvjitlink.get_info_log(handle, buf)
    save(out, f"{case}.info_log", bytes(buf))
    nvjitlink.destroy(handle)


def nvvm_case(out, log, indir, case, modules, options):
    prog = nvvm.create_program()
    try:
        for how, name in modules:
            data = read(indir, name)
            add = nvvm.lazy_add_module_to_program if how == "lazy" else nvvm.add_module_to_program
            add(prog, data, len(data), name)
        nvvm.verify_program(prog, len(options), options)
        nvvm.compile_program(prog, len(options), options)
        log.write(f"{case} compile\n")
        size = nvvm.get_compiled_result_size(prog)
        buf = bytearray(size)
        nvvm.get_compiled_result(prog, buf)
        save(out, f"{case}.out", bytes(buf))
    except nvvm.nvvmError as e:
        log.write(f"{case} error {e}\n")
    size = nvvm.get_program_log_size(prog)
    buf = bytearray(size)
    nvvm.get_program_log(prog, buf)
    save(out, f"{case}.log", bytes(buf))
    nvvm.destroy_program(prog)


def main():
    out, indir, maps = sys.argv[1:4]
    T = nvjitlink.InputType
    with open(os.path.join(out, "transcript.txt"), "w") as log:
        link_case(out, log, indir, "ptx", ["-arch=sm_90"], [(T.PTX, "k.ptx")])
        link_case(out, log, indir, "lto", ["-arch=sm_90", "-lto"],
                  [(T.LTOIR, "a.ltoir"), (T.LTOIR, "b.ltoir")])
        link_case(out, log, indir, "ptx_cubin", ["-arch=sm_90"],
                  [(T.PTX, "c.ptx"), (T.CUBIN, "d.cubin")])
        log.write(f"nvjitlink version {nvjitlink.version()}\n")
        nvvm_case(out, log, indir, "libdevice", [("named", "kernel.ll"), ("lazy", "libdevice.10.bc")],
                  ["-arch=compute_90"])
        nvvm_case(out, log, indir, "two", [("named", "caller.ll"), ("named", "helper.ll")],
                  ["-arch=compute_90", "-opt=3"])
        nvvm_case(out, log, indir, "bad_ir", [("named", "broken.ll")], ["-arch=compute_90"])
        log.write(f"nvvm version {nvvm.version()} ir {nvvm.ir_version()}\n")
    with open("/proc/self/maps") as f, open(maps, "w") as m:
        m.writelines(line for line in f if "libnvJitLink" in line or "libnvvm" in line)


if __name__ == "__main__":
    main()
