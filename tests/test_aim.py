"""AIM: exact accounting, selection, rounds, bounds; the exact exponential mechanism."""

import math
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from mechanisms.aim import aim, workload_candidates
from mechanisms.domain import Domain
from mechanisms.noise import RandomSource
from mechanisms.exponential import ExactBudget, epsilon_for, exponential_mechanism, l1_distance

DOMAIN = Domain(tuple("abcdef"), (3, 4, 2, 5, 3, 2))


def chain_data(n: int = 3000, seed: int = 0) -> np.ndarray:
    """Rows where each attribute depends on the previous one (a Markov chain)."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((n, len(DOMAIN)), dtype=np.int64)
    rows[:, 0] = rng.integers(0, DOMAIN.sizes[0], n)
    for j in range(1, len(DOMAIN)):
        noise = rng.integers(0, DOMAIN.sizes[j], n)
        rows[:, j] = np.where(rng.random(n) < 0.7, rows[:, j - 1] % DOMAIN.sizes[j], noise)
    return rows


ROWS = chain_data()


def counts(clique) -> np.ndarray:
    columns = [DOMAIN.attributes.index(a) for a in clique]
    index = np.ravel_multi_index(tuple(ROWS[:, c] for c in columns), DOMAIN.shape(clique))
    return np.bincount(index, minlength=DOMAIN.size(clique))


WORKLOAD = [(c, 1.0) for c in combinations(DOMAIN.attributes, 2)]


def test_candidates_are_the_downward_closure_with_overlap_weights():
    got = workload_candidates(DOMAIN, [(("a", "b"), 1.0), (("b", "c"), 2.0)])
    assert got == {("a",): 1.0, ("b",): 3.0, ("a", "b"): 4.0, ("c",): 2.0, ("b", "c"): 5.0}


@pytest.mark.parametrize("rho", [0.1 / 3, 2.0])
def test_total_charge_equals_the_budget_exactly(rho):
    result = aim(DOMAIN, counts, rho, WORKLOAD, RandomSource(1), rounds=12, max_iters=100)
    costs = [m.cost for m in result.measurements]
    assert sum(costs) == rho  # exact, in plain sequential float addition
    assert math.fsum(costs) == rho == result.rho
    assert result.selection_rho + result.measurement_rho == rho
    assert all(c > 0 for c in costs)
    first = len(result.measurements) - len(result.rounds)
    assert [m.clique for m in result.measurements[:first]] == [(a,) for a in DOMAIN.attributes]
    for r, m in zip(result.rounds, result.measurements[first:]):
        assert m.clique == r.clique and r.clique in r.candidates
        assert m.cost == r.selection_rho + r.measurement_rho
        assert r.epsilon**2 / 8 <= r.selection_rho
    last = result.rounds[-1]  # the final round splits what remained 10% / 90%
    assert last.selection_rho == pytest.approx(0.1 * (last.selection_rho + last.measurement_rho), rel=1e-9)


def test_rounds_anneal_and_the_model_beats_independence():
    result = aim(DOMAIN, counts, 0.5, WORKLOAD, RandomSource(3), rounds=10, max_iters=200)
    sigmas = [r.sigma for r in result.rounds]
    for r, nxt in zip(result.rounds, result.rounds[1:-1]):
        assert nxt.sigma == pytest.approx(r.sigma / 2 if r.annealed else r.sigma, rel=1e-9)
    assert sigmas[-1] <= sigmas[0]

    def error(model):
        return np.mean([np.abs(counts(c) - model.project(c).ravel()).sum() for c, _ in WORKLOAD])

    from mechanisms.pgm.model import GraphicalModel

    independent = GraphicalModel.fit(DOMAIN, [m for m in result.measurements if len(m.clique) == 1])
    assert error(result.model) < 0.5 * error(independent)


def test_progress_reports_the_budget_fraction_up_to_one():
    seen = []
    aim(DOMAIN, counts, 0.05, WORKLOAD, RandomSource(0), progress=seen.append, rounds=8, max_iters=50)
    fractions = [p.fraction for p in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert [p.stage for p in seen][0] == "initialize" and seen[-1].stage == "finalize"


def test_bounds_cover_the_true_marginals():
    result = aim(DOMAIN, counts, 0.2, WORKLOAD, RandomSource(5), rounds=12, max_iters=200)
    checked = 0
    for c, _ in WORKLOAD:
        estimate = result.model.project(c).ravel()
        bound = result.bound(c, estimate)
        if bound is not None:
            checked += 1
            assert np.abs(counts(c) - estimate).sum() <= bound
    assert checked > 0


def test_exponential_mechanism_has_the_exact_distribution():
    scores = [Fraction(0), Fraction(3, 2), Fraction(4), Fraction(-7)]
    epsilon, sensitivity = 1.0, Fraction(1)
    rng = RandomSource(12)
    draws = np.bincount([exponential_mechanism(scores, epsilon, sensitivity, rng) for _ in range(4000)], minlength=4)
    weights = np.exp([epsilon * float(s) / 2 for s in scores])
    expected = 4000 * weights / weights.sum()
    chi2 = float(((draws - expected) ** 2 / expected).sum())
    assert chi2 < 16.3  # chi-square, 3 degrees of freedom: false alarm 0.001


def test_selection_parameter_never_exceeds_its_share():
    for rho in [1e-6, 0.1 / 3, 0.7, 3.0]:
        eps = epsilon_for(rho)
        assert Fraction(eps) ** 2 / 8 <= Fraction(rho)
        assert Fraction(math.nextafter(eps, math.inf)) ** 2 / 8 > Fraction(rho)


def test_l1_score_is_exact_so_its_sensitivity_is_one():
    assert l1_distance(np.array([3, 0]), np.array([2.5, 0.25])) == Fraction(3, 4)
    rng = np.random.default_rng(0)
    estimate = rng.random(50) * 10
    base = rng.integers(0, 10, 50)
    for i in range(50):
        neighbour = base.copy()
        neighbour[i] += 1
        assert abs(l1_distance(neighbour, estimate) - l1_distance(base, estimate)) <= 1


def test_exact_budget_shares_sum_exactly():
    budget = ExactBudget(0.1 / 7)
    spent = [budget.spend(budget.share(budget.total / 9)) for _ in range(8)]
    spent.append(budget.spend(budget.remaining))
    assert sum(spent) == budget.total and budget.remaining == 0.0
    with pytest.raises(ValueError):
        ExactBudget(1.0).spend(0.1)  # not a multiple of the unit
