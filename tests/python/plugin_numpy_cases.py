"""The numpy ep_gather judged through the pytest plugin on the smoke ep_gather cases (run by
test_equivalence.py with --moects-results; not collected by default: its name has no test_ prefix)."""
import pytest

import numpy_ep_gather as ne


@pytest.mark.moects("ep_gather/*", tier="smoke", kernel=ne.kernel)
def test_numpy_ep_gather(moects_case):
    if "large" in moects_case.info["tiers"]:
        pytest.skip("also in the large tier (more than 2^31 elements): the C suite runs it")
    args = moects_case.args()
    ne.ep_gather(moects_case.shape, args)
    moects_case.check(args["out"])
