"""A fresh process's hit, whole processes timed side by side, each against its floor measured in
the same run (runs alternate, so that machine noise falls on all of them):

- `fresh_hit` (bench/fresh_hit.c: open the cache, compile one kernel through it, a hit, write
  the cubin, close) on SQLite against `floor_hit --db` (read the source, BLAKE2b-512 it with
  OpenSSL at its least initialisation, one SELECT on a WAL database, write), and on file-stream
  against `floor_hit` with the cubin from a file;
- both also against the self-contained floor, `read_write` (read the cubin from a file, write it:
  no OpenSSL, no SQLite);
- `progcache compile` of the same kernel (a hit) against the self-contained floor;
- `progcache version` against `noop`, a C process that does nothing.

And where the SQLite hit's time goes, phase by phase, beside its floor's phases (phase_breakdown).

Prints one JSON line: medians in ms and the ratios, and the phases in us.
Usage: fresh_process.py PROGCACHE FRESH_HIT READ_WRITE FLOOR_HIT NOOP KERNEL.cu [RUNS]
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


PHASES = ("start", "read source", "open", "compile (a hit)", "write", "close", "exit")
FLOOR_PHASES = ("start", "read source", "key", "open + SELECT", "write", "close", "exit")


def phase_breakdown(programs, marks_file, runs):
    """Where a SQLite hit's time goes: each program's marks (CLOCK_MONOTONIC, the clock
    time.monotonic_ns reads; fresh_hit.c, floor_hit.c) between this process's start and end of
    each run, the programs alternated. "start" is spawning, exec, loading and relocating the
    libraries and their constructors; "exit" is returning from main, the destructors and atexit
    handlers, and the wait. programs: {name: (argv, env, phase names)}. Medians in us."""
    spans = {name: {phase: [] for phase in phases} for name, (_, _, phases) in programs.items()}
    for _ in range(runs):
        for name, (argv, env, phases) in programs.items():
            t0 = time.monotonic_ns()
            subprocess.run(argv, env=dict(env, PCACHE_BENCH_PHASES=marks_file), check=True)
            t1 = time.monotonic_ns()
            with open(marks_file) as f:
                marks = [int(line) for line in f]
            edges = [t0] + marks + [t1]
            for phase, (a, b) in zip(phases, zip(edges, edges[1:])):
                spans[name][phase].append((b - a) / 1e3)
    return {name: {phase: round(statistics.median(v), 1) for phase, v in by_phase.items()}
            for name, by_phase in spans.items()}


def main():
    progcache, fresh_hit, read_write, floor_hit, noop, kernel = sys.argv[1:7]
    runs = int(sys.argv[7]) if len(sys.argv) > 7 else 21
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ, HOME=tmp, XDG_CONFIG_HOME=tmp)
        base.pop("PCACHE_DISABLE", None)
        sqlite_env = dict(base, PCACHE_URI="sqlite:%s/c.db" % tmp)
        fs_env = dict(base, PCACHE_URI="filestream:%s/fs" % tmp)
        k = os.path.join(tmp, "k.cu")
        shutil.copy(kernel, k)
        out = lambda name: os.path.join(tmp, name)
        cli = [progcache, "compile", k, "--arch", "sm_90", "-o", out("cli.cubin")]
        app = [fresh_hit, k, out("app.cubin")]
        subprocess.run(cli, env=sqlite_env, check=True, stdout=subprocess.DEVNULL)  # the misses
        subprocess.run(app, env=sqlite_env, check=True)
        subprocess.run(app, env=fs_env, check=True)
        db = out("floor.db")
        subprocess.run([floor_hit, k, "--make-db", db, out("app.cubin")], check=True)
        cases = {
            "floor": ([read_write, out("app.cubin"), out("copy.cubin")], base),
            "floor_sqlite": ([floor_hit, k, "--db", db, out("copy.cubin")], base),
            "floor_filestream": ([floor_hit, k, out("app.cubin"), out("copy.cubin")], base),
            "noop": ([noop], base),
            "cli": (cli, sqlite_env),
            "app": (app, sqlite_env),
            "app_filestream": (app, fs_env),
            "version": ([progcache, "version"], base),
        }
        times = {name: [] for name in cases}
        for _ in range(runs):
            for name, (argv, env) in cases.items():
                times[name].append(timed(argv, env))
        phases = phase_breakdown({
            "app": (app, sqlite_env, PHASES),
            "floor": ([floor_hit, k, "--db", db, out("copy.cubin")], base, FLOOR_PHASES),
        }, out("marks"), runs)
    med = {name: statistics.median(t) for name, t in times.items()}
    ratio = lambda a, b: round(med[a] / med[b], 2)
    result = {"runs": runs}
    result.update({name + "_ms": round(v, 2) for name, v in med.items()})
    result.update({
        "sqlite_ratio": ratio("app", "floor_sqlite"),
        "filestream_ratio": ratio("app_filestream", "floor_filestream"),
        "version_ratio": ratio("version", "noop"),
        "app_ratio": ratio("app", "floor"),
        "app_filestream_ratio": ratio("app_filestream", "floor"),
        "cli_ratio": ratio("cli", "floor"),
    })
    result["phases_us"] = phases["app"]
    result["floor_phases_us"] = phases["floor"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
