"""python -m moects ARGS, and the `moects` command pip installs: the moects command line (`moects run
--kernel-py M:N ...`), by exec of a moects binary: $MOECTS_BIN, else the one `pip install ./python`
bundled (moects/_native/bin), else ../bin/moects beside the loaded libmoects (a checkout's build),
else moects on PATH. MOECTS_PYTHON is set to this interpreter, so that the runner's Python workers use
it (and see the same packages), and MOECTS_PROGRAM to the command as typed, which the binary's repro
lines then call (the bundled binary alone would not find this interpreter)."""
import os
import shlex
import shutil
import sys

from ._lib import NATIVE


def binary():
    env = os.environ.get("MOECTS_BIN")
    if env:
        return env
    bundled = os.path.join(NATIVE, "bin", "moects")
    if os.access(bundled, os.X_OK):
        return bundled
    try:
        from . import _lib
        libdir = os.path.dirname(os.path.abspath(_lib.path()))
        for cand in (os.path.join(libdir, "..", "bin", "moects"), os.path.join(libdir, "moects")):
            if os.access(cand, os.X_OK):
                return os.path.normpath(cand)
    except Exception:
        pass
    found = shutil.which("moects")
    return found if found and not _is_entry_point(found) else None


def _is_entry_point(path):
    """True when path is a Python script (pip's `moects` entry point), not the binary: exec'ing it from
    here would loop."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def program():
    """The command that runs this again, as a user types it: `moects` when argv[0] is the entry point
    that PATH finds, else its path, else PYTHON -m moects."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "moects" and not argv0.endswith(".py"):
        on_path = shutil.which("moects")
        if on_path and os.path.realpath(on_path) == os.path.realpath(argv0):
            return "moects"
        return shlex.quote(os.path.abspath(argv0))
    return "%s -m moects" % shlex.quote(sys.executable)


def main():
    exe = binary()
    if not exe:
        sys.stderr.write("moects: the moects binary not found (pip install ./python from a moects checkout bundles "
                         "it; or set MOECTS_BIN, or build the checkout)\n")
        return 2
    os.environ.setdefault("MOECTS_PYTHON", sys.executable)
    os.environ.setdefault("MOECTS_PROGRAM", program())
    os.execv(exe, [exe] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
