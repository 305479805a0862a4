"""MWEM+PGM, the AIM baseline (McKenna's thesis, Algorithm 5)."""

from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.mwem_pgm import mwem_pgm, uniform_score
from mechanisms.noise import RandomSource

DOMAIN = Domain(("a", "b", "c", "d"), (3, 4, 2, 5))


def _rows(n: int = 3000) -> np.ndarray:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(0, 2, n)) % 4  # b follows a
    c = rng.integers(0, 2, n)
    d = (2 * c + rng.integers(0, 2, n)) % 5  # d follows c
    return np.stack([a, b, c, d], axis=1)


def _marginal(rows):
    def counts(clique):
        cols = [DOMAIN.attributes.index(x) for x in clique]
        flat = np.ravel_multi_index(tuple(rows[:, i] for i in cols), DOMAIN.shape(clique))
        return np.bincount(flat, minlength=DOMAIN.size(clique))
    return counts


def test_uniform_score_is_exact_and_moves_by_at_most_two_per_row():
    counts = np.array([5, 0, 2])
    assert uniform_score(counts) == Fraction(abs(15 - 7) + abs(0 - 7) + abs(6 - 7), 3) - 3
    rng = np.random.default_rng(1)
    for _ in range(200):
        c = rng.integers(0, 6, size=rng.integers(1, 8))
        neighbour = c.copy()
        neighbour[rng.integers(0, c.size)] += 1
        assert abs(uniform_score(neighbour) - uniform_score(c)) <= 2


def test_charges_exactly_rho_and_learns_the_workload():
    rows = _rows()
    workload = list(combinations(DOMAIN.attributes, 2))
    result = mwem_pgm(DOMAIN, _marginal(rows), 0.5, workload, RandomSource(0), rounds=4)
    assert result.rho == 0.5
    assert len(result.chosen) == 4 and all(c in workload for c in result.chosen)
    truth = _marginal(rows)
    error = np.mean([np.abs(result.model.project(c).ravel() - truth(c)).sum() / len(rows) for c in workload])
    uniform = np.mean([np.abs(len(rows) / DOMAIN.size(c) - truth(c)).sum() / len(rows) for c in workload])
    assert error < 0.5 * uniform
    assert ("a", "b") in result.chosen and ("c", "d") in result.chosen  # the two dependent pairs


def test_refuses_an_empty_workload():
    with pytest.raises(ValueError, match="at least one workload clique"):
        mwem_pgm(DOMAIN, _marginal(_rows(10)), 0.5, [], RandomSource(0))
