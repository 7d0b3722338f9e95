"""Paths shared by the Python tests: the checkout, its build (MOECTS_BUILD, set by ctest), the
examples."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def build_dir():
    d = os.environ.get("MOECTS_BUILD", os.path.join(ROOT, "build"))
    if not os.path.exists(os.path.join(d, "bin", "moects")):
        pytest.skip("no moects build at %s (set MOECTS_BUILD)" % d)
    return d


def needs(module):
    """A marker skipping the test when module (torch, triton) is not importable (CI has neither)."""
    try:
        __import__(module)
        return pytest.mark.skipif(False, reason="")
    except ImportError:
        return pytest.mark.skipif(True, reason="%s is not installed" % module)
