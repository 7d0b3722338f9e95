"""repro.py: the two command lines a failed moects case under pytest prints, each running that case
alone again from where it was printed (same environment, any folder):

    pytest repro: PYTEST '/abs/test_mine.py::test_mine[ep_gather/deepseek-v3/ep2/t16]'
    moects repro: MOECTS run --kernel NAME --seed S --out reports/repro/ID --kernel-py /abs/test_mine.py:ATTR ID

PYTEST is `pytest` when the pytest on PATH is this interpreter's, else `PYTHON -m pytest` (the same for
MOECTS and the `moects` entry point). The node id selects the case's test (a -k expression cannot: case
ids hold '/' and '-'). ATTR is where the kernel's description lives in the test's module: the marker's
or check()'s kernel= object, a list holding it, or a description of the same name, at module level or
one import down (`ne.kernel`), as `moects run --kernel-py` reads it. The moects line goes through
moects_judgement_repro, which also makes it the repro line of the judgement's diagnostics.
"""
import os
import shlex
import shutil
import sys
import types

from .case import DEFAULT_SEED


def _command(script, module):
    """`script` when PATH's `script` sits beside this interpreter, else PYTHON -m module."""
    found = shutil.which(script)
    here = os.path.dirname(os.path.abspath(sys.executable))
    if found and os.path.dirname(os.path.abspath(found)) == here:
        return script
    return "%s -m %s" % (shlex.quote(sys.executable), module)


def _plugin_option(config):
    """" -p moects.pytest_plugin" when this session loaded the plugin by -p (no entry point then)."""
    args = list(getattr(getattr(config, "invocation_params", None), "args", ()) or ())
    for i, a in enumerate(args):
        if a == "-p" and i + 1 < len(args) and args[i + 1] == "moects.pytest_plugin" or a == "-pmoects.pytest_plugin":
            return " -p moects.pytest_plugin"
    return ""


def pytest_line(item, case):
    path = str(getattr(item, "path", None) or item.fspath)
    cmd = "%s%s %s" % (_command("pytest", "pytest"), _plugin_option(item.config), shlex.quote("%s::%s" % (path, item.name)))
    if case.seed != DEFAULT_SEED:
        cmd += " --moects-seed %d" % case.seed
    return cmd


def _describes(v, name):
    """v is a kernel description named name with a run() (a dict, a Kernel, an object)."""
    try:
        if isinstance(v, dict):
            return v.get("name") == name and callable(v.get("run"))
        return (not isinstance(v, (type, types.ModuleType)) and getattr(v, "name", None) == name
                and getattr(v, "op", None) is not None and callable(getattr(v, "run", None)))
    except Exception:
        return False


def kernel_attr(module, source, name):
    """The attribute path (NAME of FILE:NAME) under module that holds the kernel: source itself (or a
    list holding it), else a description named name; None when there is none."""
    def find(match):
        for attr, v in vars(module).items():
            if match(v):
                return attr
        for attr, sub in vars(module).items():  # one import down: `import numpy_ep_gather as ne`; ne.kernel
            if isinstance(sub, types.ModuleType) and not attr.startswith("_") and \
                    os.path.dirname(getattr(sub, "__file__", "") or "") == os.path.dirname(module.__file__ or ""):
                for a, v in vars(sub).items():
                    if match(v):
                        return attr + "." + a
        return None

    if module is None:
        return None
    if source is not None:
        hit = find(lambda v: v is source or (isinstance(v, (list, tuple)) and any(x is source for x in v)))
        if hit:
            return hit
    return find(lambda v: _describes(v, name))


def lines(item, case, judgement):
    """["pytest repro: ...", "moects repro: ..."] for a failed judgement of case in test item."""
    out = ["pytest repro: " + pytest_line(item, case)]
    path = str(getattr(item, "path", None) or item.fspath)
    k = judgement.kernel
    attr = kernel_attr(getattr(item, "module", None), judgement.source, k.name) if k is not None else None
    if attr is None:
        out.append("moects repro: none (kernel %r is no module-level description in %s: `moects run --kernel-py "
                   "FILE:NAME` needs one, with its run(shape, args))" % (k.name if k else None, path))
        return out
    cmd = judgement.repro(_command("moects", "moects"), " --kernel-py " + shlex.quote("%s:%s" % (path, attr)))
    out.append("moects repro: " + (cmd or "none (libmoects too old for moects_judgement_repro)"))
    return out
