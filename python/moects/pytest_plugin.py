"""pytest_plugin.py: moects cases as pytest tests (registered with the pytest11 entry point).

    @pytest.mark.moects("ep_gather/*", tier="smoke", kernel=my_kernel)
    def test_my_kernel(moects_case):
        args = moects_case.args()
        my_kernel["run"](moects_case.shape, args)
        moects_case.check(args["out"])     # AssertionError with the TAP's diagnostics

The marker takes case globs (none: every case of the tier) and the keywords tier ("smoke", "full",
"large", "all" or a list), config (a model file or raw config.json) with tp/ep, root, and kernel (the
description check() judges by: name, op, recipe, bound or tolerance). Each case is one test whose id
is the case id. Options: --moects-results PATH writes the session's results as results.json (the
file `moects run --out` writes), --moects-seed N (default 1, as `moects run`), --moects-shard i/n
(every n-th case, as `moects run --shard`; `moects merge` joins the shards' results.json). A test that raises
anything but the check's AssertionError is recorded as FAIL_CRASH with the exception's text;
pytest.skip() as SKIP; moects_case.outcome("UNSUPPORTED", why) records a refusal.

A failed check (and a crash) prints two repro lines that run that case alone again: the pytest
command selecting its test by node id, and `moects run --kernel-py FILE:NAME` with the kernel's
module-level name in the test file (repro.py). A libmoects that cannot be loaded is one collection
error line naming where it was looked for.
"""
import pytest

from . import repro as _repro
from ._lib import MoectsError
from .case import DEFAULT_SEED, cases as _cases
from .kernel import error_text

def pytest_addoption(parser):
    g = parser.getgroup("moects", "moects conformance cases")
    g.addoption("--moects-results", metavar="PATH", default=None,
                help="write the moects results of this session to PATH (results.json for moects gate, "
                     "coverage and merge)")
    g.addoption("--moects-seed", metavar="N", type=int, default=DEFAULT_SEED,
                help="input seed of the moects cases (default 1, as moects run)")
    g.addoption("--moects-shard", metavar="i/n", default=None,
                help="run every n-th case of each marker's selection, from the i-th (0-based), as moects "
                     "run --shard; results.json records the shard for moects merge")


def _shard(config):
    spec = config.getoption("moects_shard")
    if not spec:
        return None
    try:
        i, n = (int(x) for x in spec.split("/"))
        if not 0 <= i < n:
            raise ValueError
    except ValueError:
        raise pytest.UsageError("--moects-shard: want i/n with 0 <= i < n, got %r" % spec)
    return i, n


def pytest_configure(config):
    config._moects_shard = _shard(config)
    config.addinivalue_line("markers", "moects(*globs, tier='smoke', config=None, tp=0, ep=0, kernel=None): "
                                       "run the test once per moects case (fixture moects_case)")
    config._moects_ran = []  # (case id, that test's judgements) for each test that ran, in order


def _select(config, marker):
    kw = dict(marker.kwargs)
    kernel = kw.pop("kernel", None)
    unknown = set(kw) - {"tier", "config", "tp", "ep", "root"}
    if unknown:
        raise pytest.UsageError("@pytest.mark.moects: unknown keyword %s" % sorted(unknown)[0])
    cases = _cases(*marker.args, seed=config.getoption("moects_seed"), **kw)
    if kernel is not None:
        from .kernel import describe
        k = describe(kernel)
        for c in cases:
            c.kernel, c.kernel_source = k, kernel
    return cases


def pytest_generate_tests(metafunc):
    if "moects_case" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("moects")
    if marker is None:
        raise pytest.UsageError("%s uses moects_case without @pytest.mark.moects(...)" % metafunc.function.__name__)
    try:
        cases = _select(metafunc.config, marker)
    except (MoectsError, ValueError) as e:  # one line (libmoects not found, a bad glob or kernel), no traceback
        raise pytest.Collector.CollectError("moects: %s: %s" % (metafunc.function.__name__, e)) from None
    shard = metafunc.config._moects_shard
    if shard:
        cases = [c for pos, c in enumerate(cases) if pos % shard[1] == shard[0]]
    metafunc.parametrize("moects_case", cases, ids=[c.id for c in cases], indirect=True)


@pytest.fixture
def moects_case(request):
    """The moects.Case this test runs (its inputs are freed after the test)."""
    c = request.param  # one Case object for every test of a parametrized function: each test gets a
    c.judgements = []  # list of its own, which _moects_ran keeps (the next test's is a new one)
    c.repro_lines = lambda case, j: _repro.lines(request.node, case, j)
    request.node._moects_case = c
    request.config._moects_ran.append((c.id, c.judgements))
    yield c
    c.release()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    c = getattr(item, "_moects_case", None)
    if c is None:
        return
    rep = outcome.get_result()
    if call.when == "call" and call.excinfo is not None and not c.judgements:
        e = call.excinfo
        if e.errisinstance(pytest.skip.Exception):
            _record(c, "SKIP", str(e.value))
        else:  # the kernel raised (anything but check()'s verdict): that case's FAIL_CRASH
            j = _record(c, "FAIL_CRASH", error_text(e.value))
            if j is not None:
                rep.sections.append(("moects repro", "\n".join(_repro.lines(item, c, j))))
    elif call.when == "setup" and rep.skipped and not c.judgements:
        _record(c, "SKIP", str(call.excinfo.value) if call.excinfo else "skipped")


def _record(c, verdict, reason):
    try:
        return c.outcome(verdict, reason)
    except Exception as e:  # never hide the test's own failure behind a recording error
        c.judgements.append(None)
        import warnings
        warnings.warn("moects: %s: could not record %s: %s" % (c.id, verdict, e))
        return None


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("moects_results")
    if not path:
        return
    from .results import Results
    ran = session.config._moects_ran
    seed = session.config.getoption("moects_seed")
    try:
        res = Results("pytest " + " ".join(str(a) for a in session.config.args), seed)
    except MoectsError as e:  # one line, not a traceback out of this hook
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        line = "moects: --moects-results %s not written: %s" % (path, e)
        tr.write_line(line, red=True) if tr else print(line)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    order = {}
    for i, (cid, _) in enumerate(ran):  # case-major, as a run writes them: by case, then test order
        order.setdefault(cid, i)
    for _, judgements in sorted(ran, key=lambda r: order[r[0]]):
        for j in judgements:
            if j is not None:
                res.add(j)
    res.write(path)
    if session.config._moects_shard:
        _set_shard(path, "%d/%d" % session.config._moects_shard)


def _set_shard(path, shard):
    """Record the shard in results.json (as moects run --shard does), through a temp file + rename."""
    import json
    import os
    with open(path) as f:
        doc = json.load(f)
    doc["shard"] = shard
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
