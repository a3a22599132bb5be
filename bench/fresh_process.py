"""A fresh process's hit, whole processes timed: the `progcache compile` command and a minimal C
program (fresh_hit.c) against the floor, a process that reads the same cubin from a file and
writes it out (read_write.c); and `progcache version`, the cost of starting with the library
loaded. Runs alternate so that machine noise falls on all of them. Prints one JSON line: medians
in ms and the ratios to the floor.

Usage: fresh_process.py PROGCACHE FRESH_HIT READ_WRITE KERNEL.cu [RUNS]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv, env):
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1e3


def main():
    progcache, fresh_hit, read_write, kernel = sys.argv[1:5]
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 21
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=tmp, PCACHE_URI="sqlite:%s/c.db" % tmp)
        env.pop("PCACHE_DISABLE", None)
        k = os.path.join(tmp, "k.cu")
        shutil.copy(kernel, k)
        cli = [progcache, "compile", k, "--arch", "sm_90", "-o", os.path.join(tmp, "cli.cubin")]
        app = [fresh_hit, k, os.path.join(tmp, "app.cubin")]
        subprocess.run(cli, env=env, check=True, stdout=subprocess.DEVNULL)  # the misses
        subprocess.run(app, env=env, check=True)
        floor_cmd = [read_write, os.path.join(tmp, "app.cubin"), os.path.join(tmp, "copy.cubin")]
        version = [progcache, "version"]
        times = {"floor": [], "cli": [], "app": [], "version": []}
        for _ in range(runs):
            for name, argv in (("floor", floor_cmd), ("cli", cli), ("app", app), ("version", version)):
                times[name].append(timed(argv, env))
    med = {name: statistics.median(t) for name, t in times.items()}
    print(json.dumps({"runs": runs, "floor_ms": round(med["floor"], 2), "cli_ms": round(med["cli"], 2),
                      "app_ms": round(med["app"], 2), "version_ms": round(med["version"], 2),
                      "cli_ratio": round(med["cli"] / med["floor"], 2),
                      "app_ratio": round(med["app"] / med["floor"], 2)}))


if __name__ == "__main__":
    main()
