"""The ``progcache`` command of a pip install: the console script runs the command the wheel
carries inside the package (progcache/bin/progcache, beside the library and the drop-in NVRTC
that ``progcache run`` uses)."""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "progcache")
    if not os.access(exe, os.X_OK):
        sys.exit("progcache: this installation of the Python package has no command (a wheel "
                 "from pip install carries it; cmake --install puts it in <prefix>/bin)")
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    main()
