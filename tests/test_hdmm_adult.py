"""Monte-Carlo check of HDMM's expected error on real data (the 14-attribute adult table).

An HDMM strategy (planned by the HDMM family) is released `draws` times with
the engine's exact discrete noise on adult's (age, sex) and hours-per-week
marginals, reconstructed by least squares, and the squared errors are compared
with the expected error: the model's exact variances, which must equal the
planner's prediction from the strategy and workload alone (HDMM's expected
error). The total squared error per draw has mean Σ_rows Var, so its average
over the draws (the Monte-Carlo MSE, RMSE²) must lie within 4 estimated
standard errors of it, and every block's mean squared error within
4·sqrt(2/draws) of its expectation (the worst case, fully correlated rows).
Seeds are fixed, so the test is deterministic; its false-alarm rate is below 1e-3.
"""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.matrices import Dense
from mechanisms.measurement import calibrate, query_step
from mechanisms.noise import RandomSource
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block, Term
from planner.families.hdmm import HDMMFamily
from planner.plan import PlannedMeasurement

DATA = Path(__file__).parents[2] / "shared" / "data" / "adult"
pytestmark = pytest.mark.skipif(not (DATA / "adult.csv").exists(), reason="shared/data/adult is not checked out")


def load():
    domain = Domain.from_dict(json.loads((DATA / "adult-domain.json").read_text()))
    with open(DATA / "adult.csv", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = np.asarray([[int(v) for v in r] for r in reader], dtype=np.int64)
    return domain, {name: rows[:, i] for i, name in enumerate(header)}


def counts(domain, columns, clique):
    index = np.zeros(len(columns["age"]), dtype=np.int64)
    for a in clique:
        index = index * domain.size_of(a) + columns[a]
    return np.bincount(index, minlength=domain.size(clique))


def indicator(n, lo, hi):
    v = np.zeros(n)
    v[lo : hi + 1] = 1.0
    return Dense([v])


COMPONENTS = (("age", "sex"), ("hours-per-week",))


def workload(domain):
    """Age ranges by sex, the age histogram, the sex totals, and prefixes of hours-per-week."""
    age, hours = domain.size_of("age"), domain.size_of("hours-per-week")
    ranges = [(0, 10), (5, 30), (20, 50), (40, 84), (10, 60), (17, 24), (25, 64)]
    blocks = [Block(f"sex, age in [{a}, {b}]", ("sex",), [Term(1.0, {"age": indicator(age, a, b)})]) for a, b in ranges]
    blocks += [Block("age", ("age",), [Term(1.0, {})]), Block("sex", ("sex",), [Term(1.0, {})])]
    blocks += [Block(f"hours < {h}", (), [Term(1.0, {"hours-per-week": indicator(hours, 0, h - 1)})]) for h in range(10, 99, 8)]
    return blocks


@pytest.mark.parametrize("draws", [100])
def test_monte_carlo_error_matches_expected_error_on_adult(draws):
    domain, columns = load()
    blocks = workload(domain)
    family = HDMMFamily(domain, "gaussian")
    rho = 0.05
    planned = []
    for a in family.allocate(blocks):
        share = rho * a.fraction
        pm = PlannedMeasurement(a.clique, None, share, a.sensitivity, 0.0, "hdmm", a.strategy, a.label)
        cal = calibrate("gaussian", a.sensitivity, share, query_step(pm.query(domain)))
        planned.append(PlannedMeasurement(a.clique, None, share, a.sensitivity, cal.variance, "hdmm", a.strategy, a.label))
    assert any(p.strategy is not None for p in planned)  # an optimized (not identity) strategy is measured
    truth = {b.name: b.matrix(domain).matvec(counts(domain, columns, b.attributes(domain))) for b in blocks}
    marginal = {p.clique: counts(domain, columns, p.clique) for p in planned}

    reference = LeastSquaresModel(domain, [p.release(marginal[p.clique], domain, "gaussian", RandomSource(0)) for p in planned])
    expected = {b.name: reference.variance(b) for b in blocks}
    rng = RandomSource(2024)
    squared = {b.name: [] for b in blocks}
    for _ in range(draws):
        model = LeastSquaresModel(domain, [pm.release(marginal[pm.clique], domain, "gaussian", rng) for pm in planned])
        for b in blocks:
            squared[b.name].append(float(((model.answer(b)[0] - truth[b.name]) ** 2).sum()))
    totals = np.sum([squared[b.name] for b in blocks], axis=0)
    mean = sum(float(v.sum()) for v in expected.values())
    # Continuous-noise prediction vs the discrete noise's exact variances: equal up to the lattice's ~1e-9.
    assert mean == pytest.approx(family.unit_error(blocks) / rho, rel=1e-6)
    assert abs(totals.mean() - mean) <= 4 * totals.std(ddof=1) / np.sqrt(draws), (totals.mean(), mean)
    for b in blocks:  # each block: its mean squared error over draws has relative sd ≤ sqrt(2/draws)
        ratio = np.mean(squared[b.name]) / expected[b.name].sum()
        assert abs(ratio - 1) <= 4 * np.sqrt(2 / draws), (b.name, ratio)
