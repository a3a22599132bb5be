#!/usr/bin/env python3
"""Proves the include scanner models NVRTC: NVRTC runs under strace on a corpus (nested quoted
includes, ../, absolute paths, -I order and shadowing, #include_next, __has_include,
--pre-include, a NULL name, CCCL's <cuda/std/...> from the toolkit), and every header file NVRTC
opened or probed must be in the scanner's set for the same program.

usage: include_scan_strace_test.py NVRTC_RAW SCAN_DEPS
Skips (exit 0, with a message) when strace is not installed or not permitted."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

NVRTC_RAW, SCAN_DEPS = sys.argv[1], sys.argv[2]
CUDA_INCLUDE = "/usr/local/cuda/include"

# Names NVRTC probes in the working directory for its own built-ins; a planted file of that name
# is never read (checked below), so they are not headers the key must cover.
NVRTC_INTERNAL = {"__nv_nvrtc_builtin_header.h", "__nv_name_map"}
CALL = re.compile(r'^\d+\s+(open|openat|stat|lstat|newfstatat|access|statx)\((?:AT_FDCWD, )?"([^"]*)"')


def write(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def traced_paths(args):
    """Paths NVRTC opened or probed while compiling, minus libraries and system files."""
    log = os.path.join(os.getcwd(), "strace.log")
    run = subprocess.run(["strace", "-f", "-o", log, "-e",
                          "trace=open,openat,stat,lstat,newfstatat,access,statx",
                          NVRTC_RAW] + args, capture_output=True, text=True)
    if run.returncode != 0:
        return None
    paths = set()
    for line in open(log):
        m = CALL.match(line)
        if not m or not m.group(2):
            continue
        p = m.group(2)
        if ".so" in p or p.startswith(("/etc/", "/proc/", "/sys/", "/dev/", "/lib", "/usr/lib")):
            continue
        if p.startswith("/usr/local/cuda") and "/include/" not in p:
            continue  # the toolkit's libraries and NVVM, not headers
        if os.path.basename(p) in NVRTC_INTERNAL or os.path.isdir(p):
            continue
        if re.search(r"/(tsan|asan|lsan|ubsan|msan)[._]", p):
            continue  # a sanitizer runtime's own files (sanitizer builds of nvrtc_raw)
        paths.add(p)
    os.unlink(log)
    return paths


def scanned(args):
    out = subprocess.run([SCAN_DEPS] + args, capture_output=True, text=True, check=True).stdout
    deps = set()
    for line in out.splitlines():
        if line.startswith("uncacheable:"):
            raise AssertionError("scan refused the program: " + line)
        deps.add(line.split(" ", 1)[1])
    return deps


def check(name, program, source_file, options, failures):
    args = [program, source_file] + options
    nvrtc = traced_paths(args)
    if nvrtc is None:
        failures.append(f"{name}: nvrtc_raw failed under strace")
        return 0
    nvrtc.discard(source_file)  # our own reading of the source (nvrtc_raw fopen)
    # NVRTC opens the program name (NULL: "default_program"); the source string is what counts.
    nvrtc.discard(program if program != "-" else "default_program")
    deps = scanned(args)
    normalized = {os.path.normpath(d) for d in deps}
    missing = sorted(p for p in nvrtc if p not in deps and os.path.normpath(p) not in normalized)
    if missing:
        failures.append(f"{name}: NVRTC read or probed what the scan missed: {missing}")
    return len(nvrtc)


def main():
    if not shutil.which("strace"):
        print("SKIP: strace is not installed")
        return 0
    probe = subprocess.run(["strace", "-o", "/dev/null", "true"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: strace is not permitted here: " + probe.stderr.decode(errors="replace"))
        return 0
    failures, checked = [], 0
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        write("sub/k.cu", '#include "h.h"\n#include <x.h>\n#include "y.h"\n'
              '#include "../up.h"\n#include "' + d + '/abs.h"\n'
              '#if __has_include("maybe.h") || __has_include(<maybe2.h>)\n#endif\n'
              '__global__ void k(int *x) { *x = VAL + X1 + X2 + Y + UP + ABS; }\n')
        write("sub2/h.h", '#pragma once\n#include "nested.h"\n#define VAL 1\n')
        write("inc1/x.h", "#include_next <x.h>\n#define X1 1\n")
        write("inc2/x.h", "#define X2 1\n")
        write("inc2/y.h", "#define Y 1\n")
        write("inc2/nested.h", "#define NESTED 1\n")
        write("up.h", "#define UP 1\n")
        write("abs.h", "#define ABS 1\n")
        base = ["-arch=sm_90", "-Iinc1", "-I", "inc2", "-Isub2"]
        checked += check("nested, ../, absolute, -I order, include_next, has_include",
                         "sub/k.cu", "sub/k.cu", base, failures)
        write("sub/h.h", "#define VAL 2\n")  # now the directory of the program name wins
        checked += check("quoted include beside the program", "sub/k.cu", "sub/k.cu", base,
                         failures)
        checked += check("-no-source-include", "sub/k.cu", "sub/k.cu",
                         base + ["-no-source-include"], failures)
        write("main.cu", '#include "h.h"\n__global__ void k(int *x) { *x = VAL + PRE; }\n')
        write("h.h", "#define VAL 3\n")
        write("pre/pre.h", '#include "nested.h"\n#define PRE 1\n')
        checked += check("NULL name, pre-include", "-", "main.cu",
                         ["-arch=sm_90", "--pre-include=pre.h", "-Ipre", "-Iinc2"], failures)
        write("cccl.cu", "#include <cuda/std/type_traits>\n#include <cuda_fp16.h>\n"
              "__global__ void k(int *x) { *x = cuda::std::is_same<int, int>::value; }\n")
        checked += check("CCCL from the toolkit", "cccl.cu", "cccl.cu",
                         ["-arch=sm_90", "-I" + CUDA_INCLUDE + "/cccl", "-I" + CUDA_INCLUDE],
                         failures)
        # The internal names NVRTC probes are never read: a planted one changes nothing.
        write("__nv_nvrtc_builtin_header.h", "#error planted\n")
        out = subprocess.run([NVRTC_RAW, "main.cu", "main.cu", "-arch=sm_90",
                              "--pre-include=pre.h", "-Ipre", "-Iinc2"],
                             capture_output=True, text=True).stdout.strip()
        if out != "0":
            failures.append("a planted __nv_nvrtc_builtin_header.h was read (nvrtc result "
                            + out + ")")
        os.chdir("/")
    for f in failures:
        print("FAIL: " + f)
    print(f"include scan vs strace: {checked} paths NVRTC touched, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
