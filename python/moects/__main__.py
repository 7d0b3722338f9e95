"""python -m moects ARGS: the moects command line (`python -m moects run --kernel-py M:N ...`), by
exec of the moects binary of the loaded libmoects's build ($MOECTS_BIN, else ../bin/moects beside
the library, else moects on PATH), with MOECTS_PYTHON set to this interpreter so that the runner's
Python workers use it (and see the same packages)."""
import os
import shutil
import sys


def binary():
    env = os.environ.get("MOECTS_BIN")
    if env:
        return env
    try:
        from . import _lib
        libdir = os.path.dirname(os.path.abspath(_lib.path()))
        for cand in (os.path.join(libdir, "..", "bin", "moects"), os.path.join(libdir, "moects")):
            if os.access(cand, os.X_OK):
                return os.path.normpath(cand)
    except Exception:
        pass
    return shutil.which("moects")


def main():
    exe = binary()
    if not exe:
        sys.stderr.write("python -m moects: moects binary not found (set MOECTS_BIN, build the checkout, "
                         "or put moects on PATH)\n")
        return 2
    os.environ.setdefault("MOECTS_PYTHON", sys.executable)
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
