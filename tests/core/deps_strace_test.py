#!/usr/bin/env python3
"""Proves progcache keys what NVRTC reads. NVRTC runs under strace on a corpus (nested quoted
includes, ../, absolute paths, -I order and shadowing, #include_next, __has_include behind
macros, digraph and trigraph directives, computed includes, #pragma once through a symbolic
link, --pre-include, a NULL name, CCCL from the toolkit, -dlto, -lineinfo, precompiled headers),
and every file NVRTC opened or probed must be among the paths progcache's observation of the
same compile keys (observe_deps), and, for the programs the include scan can key without
compiling (pcache_make_key), among the scan's (scan_deps). The same runs with a getenv logger
preloaded must find no variable of the environment libnvrtc reads that progcache does not key.
With $PCACHE_TEST_NVRTC12, all of it again with NVRTC 12.

usage: deps_strace_test.py NVRTC_RAW SCAN_DEPS OBSERVE_DEPS GETENV_LOGGER
Skips the strace part (exit 0, with a message) when strace is not installed or not permitted."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

NVRTC_RAW, SCAN_DEPS, OBSERVE_DEPS, GETENV_LOGGER = sys.argv[1:5]
CUDA_INCLUDE = "/usr/local/cuda/include"

# Names NVRTC probes in the working directory for its own built-ins; a planted file of that name
# is never read (checked below), so they are not headers the key must cover.
NVRTC_INTERNAL = {"__nv_nvrtc_builtin_header.h", "__nv_name_map"}
CALL = re.compile(
    r'^\d+\s+(open|openat|stat|lstat|newfstatat|access|statx)\((?:AT_FDCWD, )?"([^"]*)"')


def write(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def nvrtc_env(nvrtc):
    env = dict(os.environ)
    if nvrtc:
        env["PCACHE_TEST_RAW_NVRTC"] = nvrtc
        env["PCACHE_NVRTC_LIBRARY"] = nvrtc
    return env


def ignorable(p):
    if ".so" in p or p.startswith(("/etc/", "/proc/", "/sys/", "/dev/", "/lib", "/usr/lib")):
        return True
    if p.startswith("/usr/local/cuda") and "/include/" not in p:
        return True  # the toolkit's libraries and NVVM, not headers
    if "nvidia/cu" in p and "/include/" not in p:
        return True  # a wheel's libraries
    if os.path.basename(p) in NVRTC_INTERNAL or os.path.isdir(p) or p.endswith(".pch"):
        return True  # precompiled headers are NVRTC's own cache, never inputs
    if re.search(r"/edg\d+_\d+$", p):
        return True  # EDG's scratch file
    return bool(re.search(r"/(tsan|asan|lsan|ubsan|msan)[._]", p))  # a sanitizer's files


def traced_paths(args, nvrtc):
    """Paths NVRTC opened or probed while compiling, minus libraries and system files."""
    log = os.path.join(os.getcwd(), "strace.log")
    run = subprocess.run(["strace", "-f", "-o", log, "-e",
                          "trace=open,openat,stat,lstat,newfstatat,access,statx",
                          NVRTC_RAW] + args, capture_output=True, text=True, env=nvrtc_env(nvrtc))
    if run.returncode != 0:
        return None
    paths = set()
    for line in open(log):
        m = CALL.match(line)
        if m and m.group(2) and not ignorable(m.group(2)):
            paths.add(m.group(2))
    os.unlink(log)
    return paths


def listed(tool, args, nvrtc):
    out = subprocess.run([tool] + args, capture_output=True, text=True, check=True,
                         env=nvrtc_env(nvrtc)).stdout
    deps, env = set(), set()
    for line in out.splitlines():
        if line.startswith("uncacheable:"):
            raise AssertionError(os.path.basename(tool) + " refused the program: " + line)
        kind, rest = line.split(" ", 1)
        (env if kind == "env" else deps).add(rest)
    return deps, env


def missing_from(nvrtc_paths, deps):
    normalized = {os.path.normpath(d) for d in deps}
    return sorted(p for p in nvrtc_paths if p not in deps and os.path.normpath(p) not in normalized)


def check(case, nvrtc, failures, observed_env):
    name, program, source_file, options, scannable = case
    args = [program, source_file] + options
    nvrtc_paths = traced_paths(args, nvrtc)
    if nvrtc_paths is None:
        failures.append(f"{name}: nvrtc_raw failed under strace")
        return 0
    nvrtc_paths.discard(source_file)  # our own reading of the source (nvrtc_raw fopen)
    # NVRTC stats the program name (NULL: "default_program"); the source string is what counts.
    program_name = program if program != "-" else "default_program"
    nvrtc_paths = {p for p in nvrtc_paths
                   if p != program_name and not p.endswith("/" + program_name)}
    observed, env = listed(OBSERVE_DEPS, args, nvrtc)
    observed_env |= env
    missing = missing_from(nvrtc_paths, observed)
    if missing:
        failures.append(f"{name}: NVRTC read or probed what the observation missed: {missing}")
    if scannable:
        scanned, _ = listed(SCAN_DEPS, args, None if not nvrtc else nvrtc)
        missing = missing_from(nvrtc_paths, scanned)
        if missing:
            failures.append(f"{name}: NVRTC read or probed what the scan missed: {missing}")
    return len(nvrtc_paths)


def corpus(d):
    """(name, program name, source file, options, the include scan can key it)."""
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
    cases = [("nested, ../, absolute, -I order, include_next, has_include", "sub/k.cu",
              "sub/k.cu", base, True)]
    write("main.cu", '#include "h.h"\n__global__ void k(int *x) { *x = VAL + PRE; }\n')
    write("h.h", "#define VAL 3\n")
    write("pre/pre.h", '#include "nested.h"\n#define PRE 1\n')
    cases.append(("NULL name, pre-include", "-", "main.cu",
                  ["-arch=sm_90", "--pre-include=pre.h", "-Ipre", "-Iinc2"], True))
    write("cccl.cu", "#include <cuda/std/type_traits>\n#include <cuda_fp16.h>\n"
          "__global__ void k(int *x) { *x = cuda::std::is_same<int, int>::value; }\n")
    cccl = ["-arch=sm_90", "-I" + CUDA_INCLUDE + "/cccl", "-I" + CUDA_INCLUDE]
    cases.append(("CCCL from the toolkit", "cccl.cu", "cccl.cu", cccl, True))
    write("graphs.cu", '%:include "dg.h"\n??=include "tg.h"\n%:if __has_include(<dgopt.h>)\n'
          '%:endif\n__global__ void k(int *x) { *x = DG + TG; }\n')
    write("dg.h", "#define DG 1\n")
    write("inc2/tg.h", "#define TG 1\n")
    cases.append(("digraph and trigraph directives", "graphs.cu", "graphs.cu",
                  ["-arch=sm_90", "-std=c++14", "-Iinc2"], True))
    write("macros.cu", '#define STR(x) #x\n#define HAS(x) __has_include(STR(x))\n'
          '#define OPT_H "opt.h"\n#define HAS2(x) __has_include(x)\n#define HDR(n) <n.h>\n'
          '#if HAS(opt1.h) || HAS2(OPT_H) || HAS2(HDR(opt3))\n#endif\n'
          '#define COMPUTED "y.h"\n#include COMPUTED\n__global__ void k(int *x) { *x = Y; }\n')
    cases.append(("__has_include behind macros, a computed include", "macros.cu", "macros.cu",
                  ["-arch=sm_90", "-Iinc2"], False))
    if not os.path.exists("alias"):
        os.symlink("inc2", "alias")
    write("once.cu", '#include "inc2/nested.h"\n#include "alias/nested.h"\n'
          "__global__ void k(int *x) { *x = NESTED; }\n")
    cases.append(("the same header through a symbolic link", "once.cu", "once.cu",
                  ["-arch=sm_90"], True))
    cases.append(("-dlto and -lineinfo", "main.cu", "main.cu",
                  ["-arch=sm_90", "-dlto", "-lineinfo", "-Ipre", "-DPRE=1"], True))
    os.makedirs("pchdir", exist_ok=True)
    cases.append(("precompiled headers", "cccl.cu", "cccl.cu",
                  cccl + ["-pch", "--pch-dir=pchdir"], False))
    return cases


def environment_read(cases, nvrtc):
    """The variables libnvrtc asked for while compiling the corpus (a getenv logger)."""
    log = os.path.join(os.getcwd(), "getenv.log")
    env = nvrtc_env(nvrtc)
    env["LD_PRELOAD"] = GETENV_LOGGER
    env["PCACHE_TEST_GETENV_LOG"] = log
    for _, program, source_file, options, _ in cases:
        subprocess.run([NVRTC_RAW, program, source_file] + options, env=env, capture_output=True)
    names = set(open(log).read().split()) if os.path.exists(log) else set()
    if os.path.exists(log):
        os.unlink(log)
    return names


def run_all(nvrtc, label, failures):
    checked = 0
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        cases = corpus(d)
        observed_env = set()
        strace = shutil.which("strace") and subprocess.run(
            ["strace", "-o", "/dev/null", "true"], capture_output=True).returncode == 0
        if strace:
            for case in cases:
                checked += check(case, nvrtc, failures, observed_env)
        else:
            print(f"SKIP ({label}): strace is not installed or not permitted here")
            for case in cases:
                observed_env |= listed(OBSERVE_DEPS, list(case[1:3]) + case[3], nvrtc)[1]
        keyed = set(subprocess.run([OBSERVE_DEPS, "--load-time-variables"], capture_output=True,
                                   text=True, check=True).stdout.split())
        read = environment_read(cases, nvrtc)
        if not read:
            failures.append(f"{label}: the getenv logger saw no variable (not preloaded?)")
        unkeyed = sorted(read - keyed - observed_env - {"PWD"})  # $PWD: the logical directory
        if unkeyed:
            failures.append(f"{label}: libnvrtc reads variables progcache does not key: {unkeyed}")
        if strace:
            # The internal names NVRTC probes are never read: a planted one changes nothing.
            write("__nv_nvrtc_builtin_header.h", "#error planted\n")
            out = subprocess.run([NVRTC_RAW, "main.cu", "main.cu", "-arch=sm_90",
                                  "--pre-include=pre.h", "-Ipre", "-Iinc2"],
                                 capture_output=True, text=True,
                                 env=nvrtc_env(nvrtc)).stdout.strip()
            if out != "0":
                failures.append(f"{label}: a planted __nv_nvrtc_builtin_header.h was read "
                                f"(nvrtc result {out})")
        print(f"{label}: {checked} paths NVRTC touched, {len(read)} variables it read "
              f"({len(keyed)} keyed as read at load)")
        os.chdir("/")


def main():
    failures = []
    run_all(None, "toolkit NVRTC", failures)
    nvrtc12 = os.environ.get("PCACHE_TEST_NVRTC12")
    if nvrtc12:
        run_all(nvrtc12, "NVRTC 12", failures)
    else:
        print("SKIP (NVRTC 12): PCACHE_TEST_NVRTC12 is not set (scripts/test sets it)")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
