"""progcache run's gate, from the helper's side (run_preload/preload.c, cli/run_gate.hpp): a
process started with PCACHE_RUN_GATE naming its end of a socket says it waits, then runs only on
the word 'g'; when the gate closes without it, the process ends with 125 before its main. A
variable that names no such socket holds nothing, and none is left for what the process starts.

Usage: run_gate_test.py HELPER (libprogcache-run.so)
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile

helper = sys.argv[1]
touch = shutil.which("touch")
failures = []


def check(what, ok):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def start(argv, gate_value):
    """Starts argv with the helper preloaded and PCACHE_RUN_GATE=gate_value(their end); returns
    (our end, process)."""
    ours, theirs = socket.socketpair()
    env = dict(os.environ, LD_PRELOAD=helper, PCACHE_RUN_GATE=gate_value(theirs))
    p = subprocess.Popen(argv, env=env, pass_fds=[theirs.fileno()], stdout=subprocess.PIPE)
    theirs.close()
    return ours, p


def ours_named(s):
    return "%d:%d" % (s.fileno(), os.fstat(s.fileno()).st_ino)


with tempfile.TemporaryDirectory() as d:
    marker = os.path.join(d, "go")
    ours, p = start([touch, marker], ours_named)
    check("the process says it waits", ours.recv(1) == b"w")
    check("... and has run nothing of its own", not os.path.exists(marker))
    ours.send(b"g")
    ours.close()
    check("the word 'g' lets it run", p.wait() == 0 and os.path.exists(marker))

    marker = os.path.join(d, "closed")
    ours, p = start([touch, marker], ours_named)
    ours.recv(1)
    ours.close()
    check("a gate closed without the word ends it with 125, unrun",
          p.wait() == 125 and not os.path.exists(marker))

    marker = os.path.join(d, "refused")
    ours, p = start([touch, marker], ours_named)
    ours.recv(1)
    ours.send(b"x")
    ours.close()
    check("another word ends it too", p.wait() == 125 and not os.path.exists(marker))

    for what, value in [
        ("another socket's inode", lambda s: "%d:%d" % (s.fileno(), os.fstat(s.fileno()).st_ino + 1)),
        ("a descriptor that is not a socket", lambda s: "0:%d" % os.fstat(0).st_ino),
        ("a closed descriptor", lambda s: "987:1"),
        ("a value that is no number", lambda s: "x:y"),
    ]:
        marker = os.path.join(d, "free")
        if os.path.exists(marker):
            os.unlink(marker)
        ours, p = start([touch, marker], value)
        check("%s holds nothing" % what, p.wait() == 0 and os.path.exists(marker))
        ours.close()

    ours, p = start(["sh", "-c", 'echo "${PCACHE_RUN_GATE-unset}"; ls -l /proc/$$/fd'], ours_named)
    ours.recv(1)
    ours.send(b"g")
    out = p.communicate()[0].decode()
    check("nothing the process starts inherits the variable", out.splitlines()[0] == "unset")
    check("... or the socket", "socket:" not in out)
    ours.close()

sys.exit(1 if failures else 0)
