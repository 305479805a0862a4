"""Privacy audits: lower bounds on ε estimated from outputs on neighbouring inputs.

Each audit must stay below the claimed ε. Each also has a *power check*: the
same audit on a deliberately broken mechanism (too little noise) must flag
it, so a passing audit means something. Confidence: every bound holds with
probability ≥ 1 - 2e-3 (union bound over the events tried); seeds are fixed.
"""

from fractions import Fraction

import numpy as np
import pytest

from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.measurement import calibrate
from mechanisms.noise import RandomSource, discrete_gaussian_vector, discrete_laplace_vector
from mechanisms.reconstruction import LeastSquaresModel
from tests.privacy_audit import audit

TRIALS = 100_000
DELTA = 1e-5


def counting_mechanism(kind, share, weaken=1.0):
    """A count released with the calibrated noise, its scale divided by `weaken` to break it."""
    cal = calibrate(kind, 1.0, share)
    sampler = discrete_gaussian_vector if kind == "gaussian" else discrete_laplace_vector

    def run(neighbour, seed):
        return 1000 + neighbour + sampler(cal.scale / Fraction(weaken), TRIALS, RandomSource(seed))

    return run


def test_gaussian_mechanism_audit():
    rho = 0.125
    claimed = zcdp_to_epsilon(rho, DELTA)
    assert audit(counting_mechanism("gaussian", rho), DELTA) < claimed
    assert audit(counting_mechanism("gaussian", rho, weaken=16), DELTA) > claimed  # power check


def test_laplace_mechanism_audit():
    epsilon = 1.0
    assert audit(counting_mechanism("laplace", epsilon), 0.0) < epsilon
    assert audit(counting_mechanism("laplace", epsilon, weaken=4), 0.0) > epsilon  # power check


@pytest.mark.slow
def test_least_squares_plan_audit():
    """A whole plan (planner shares, exact noise, least squares) on histograms differing by one row."""
    from dpsql.catalog import Catalog
    from dpsql.compiler import compile_query
    from mechanisms.workload import Workload
    from planner.planner import plan_workload

    catalog = Catalog.from_dict({"tables": {"t": {"columns": {
        "a": {"type": "integer", "min": 0, "max": 3}, "b": {"type": "integer", "min": 0, "max": 2}}}}})
    table = catalog.get("t")
    queries = ["SELECT a, COUNT(*) FROM t GROUP BY a", "SELECT a, b, COUNT(*) FROM t GROUP BY a, b",
               "SELECT COUNT(*) FROM t WHERE b >= 1"]
    blocks = [b for q in queries for b in compile_query(q, catalog).blocks]
    rho = 0.125
    plan = plan_workload(Workload(table.domain, blocks), rho, "gaussian", DELTA)
    base = {("a",): np.array([50, 60, 70, 80]), ("a", "b"): np.arange(12) + 10}
    base[("b",)] = base[("a", "b")].reshape(4, 3).sum(axis=0)
    target = blocks[-1]  # COUNT(*) WHERE b >= 1: the row added to D' has a = 0, b = 2
    runs = 20_000

    def run(neighbour, seed):
        rng = RandomSource(seed)
        counts = {k: v.copy() for k, v in base.items()}
        if neighbour:
            counts[("a",)][0] += 1
            counts[("a", "b")][2] += 1
            counts[("b",)][2] += 1
        out = np.empty(runs)
        for i in range(runs):
            model = LeastSquaresModel(table.domain, [
                m.release(counts[m.clique], table.domain, "gaussian", rng) for m in plan.measurements])
            out[i] = model.answer(target)[0][0]
        return out

    assert all(m.clique in base for m in plan.measurements)
    assert audit(run, DELTA) < zcdp_to_epsilon(plan.cost, DELTA)
