#!/usr/bin/env python3
"""Every C, C++, Fortran and Python block in README.md and docs/getting-started/*.md is a complete
program: install the build into a scratch prefix, then compile and run each block against it,
with HOME, XDG_CONFIG_HOME and PCACHE_DIR in a scratch directory (no real cache is touched).

usage: doc_snippets_test.py SOURCE_DIR BUILD_DIR
Python blocks that import cuda.core run when $PCACHE_TEST_CUDA_CORE names where it is installed.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

src, build = sys.argv[1], sys.argv[2]
work = tempfile.mkdtemp(prefix="pcache-docs-")
prefix = os.path.join(work, "prefix")
subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True,
               stdout=subprocess.DEVNULL)
libdir = os.path.dirname(glob.glob(os.path.join(prefix, "lib", "**", "libprogcache.so.1"),
                                   recursive=True)[0])
env = dict(os.environ, HOME=os.path.join(work, "home"), XDG_CONFIG_HOME=os.path.join(work, "xdg"),
           PCACHE_DIR=os.path.join(work, "cache"), LD_LIBRARY_PATH=libdir,
           PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
for name in ("PCACHE_URI", "PCACHE_MAX_SIZE", "PROGCACHE_LIBRARY"):
    env.pop(name, None)
python_path = [os.path.join(prefix, "lib", "python3", "dist-packages")]
if os.environ.get("PCACHE_TEST_CUDA_CORE"):
    python_path.append(os.environ["PCACHE_TEST_CUDA_CORE"])
env["PYTHONPATH"] = os.pathsep.join(python_path)
pkg = subprocess.run(["pkg-config", "--cflags", "--libs", "progcache"], env=env, check=True,
                     capture_output=True, text=True).stdout.split()
module = os.path.join(prefix, "include", "progcache", "progcache.f90")

BUILDERS = {
    "c": lambda f, exe: ["cc", "-std=c99", "-Wall", "-Werror", f, *pkg, "-o", exe],
    "cpp": lambda f, exe: ["c++", "-std=c++17", "-Wall", "-Werror", f, *pkg, "-o", exe],
    "fortran": lambda f, exe: ["gfortran", "-J", os.path.dirname(exe), module, f, *pkg, "-o", exe],
}
SUFFIX = {"c": ".c", "cpp": ".cpp", "fortran": ".f90", "python": ".py"}

pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "getting-started", "*.md")))
failed = ran = skipped = 0
for page in pages:
    text = open(page).read()
    for n, (lang, code) in enumerate(re.findall(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)):
        if lang not in SUFFIX:
            continue
        where = "%s block %d (%s)" % (os.path.relpath(page, src), n + 1, lang)
        if lang == "python" and "cuda.core" in code and not os.environ.get("PCACHE_TEST_CUDA_CORE"):
            print("skipped %s: cuda.core is not installed" % where)
            skipped += 1
            continue
        d = tempfile.mkdtemp(dir=work)
        f = os.path.join(d, "snippet" + SUFFIX[lang])
        open(f, "w").write(code)
        steps = [[sys.executable, f]] if lang == "python" else [
            BUILDERS[lang](f, os.path.join(d, "snippet")), [os.path.join(d, "snippet")]]
        for step in steps:
            r = subprocess.run(step, env=env, cwd=d, capture_output=True, text=True)
            if r.returncode != 0:
                print("FAIL %s: %s\n%s%s" % (where, " ".join(step), r.stdout, r.stderr))
                failed += 1
                break
        else:
            ran += 1
shutil.rmtree(work, ignore_errors=True)
print("doc snippets: %d ran, %d skipped, %d failed" % (ran, skipped, failed))
sys.exit(1 if failed or ran == 0 else 0)
