"""Range trees and wavelets: exact least squares, published values, selection, the planner family.

Published values reproduced exactly (deterministic functions of the strategy):
- central hierarchical methods (Qardaji et al., via the LDP thesis, Table 5.4):
  average variance over all ranges at D = 256, ε = 1, Laplace noise with ε split
  evenly over the non-root levels: H_2 220.06, H_16 79.23; Privelet's Haar at
  D = 1024: 410.29;
- HDMM's journal comparison (`oned.csv`, Gaussian rootmse at unit noise per unit
  L2 sensitivity): H2 / HB / Wavelet on all ranges at n = 256 and 1024 and on
  prefixes at n = 2048.
"""

from __future__ import annotations

from fractions import Fraction
from functools import reduce

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.matrices import AllRange, Dense, Diagonal, Identity, Prefix
from mechanisms.measurement import lattice_step
from mechanisms.ranges.optimize import (
    KernelObjective,
    KroneckerWorkload,
    Ranges,
    all_range_error,
    choose_kronecker,
    choose_range_strategy,
    identity_strategy,
    prefix_error,
    range_error,
    width_k,
)
from mechanisms.ranges.tree_layouts import balanced_tree, padded_tree
from mechanisms.ranges.trees import HierarchicalStrategy, hb, hierarchical, qardaji_branching
from mechanisms.ranges.wavelet import HaarStrategy, haar
from mechanisms.workload import Block, Term, Workload
from planner.families.factorization import FACTORIZATION
from planner.families import FAMILIES
from planner.plan import PlannedMeasurement
from planner.planner import expected_rmse, plan_workload
from planner.families.ranges import RANGE_TREES, RangeTrees


def _dense_check(strategy, rng) -> None:
    """Every implicit operation equals its dense counterpart."""
    d = strategy.dense()
    n = d.shape[1]
    gram_inverse = np.linalg.inv(d.T @ d)
    y, x = rng.normal(size=(d.shape[0], 3)), rng.normal(size=(n, 2))
    np.testing.assert_allclose(strategy.pinv().matvec(y), np.linalg.lstsq(d, y, rcond=None)[0], atol=1e-9)
    np.testing.assert_allclose(strategy.pinv().transpose().matvec(x), d @ gram_inverse @ x, atol=1e-9)
    np.testing.assert_allclose(strategy.transpose().matvec(y), d.T @ y, atol=1e-9)
    np.testing.assert_allclose(strategy.gram().matvec(x), d.T @ d @ x, atol=1e-9)
    for p in (1, 2):
        np.testing.assert_allclose(strategy.column_norms(p), (np.abs(d) ** p).sum(axis=0), atol=1e-9)
    q1, q2 = rng.normal(size=(4, n)), rng.normal(size=(4, n))
    np.testing.assert_allclose(strategy.row_cross(q1, q2), np.einsum("ij,jk,ik->i", q1, gram_inverse, q2), atol=1e-9)
    a, b = np.sort(rng.integers(0, n + 1, size=(2, 40)), axis=0)
    keep = a < b
    a, b = a[keep], b[keep]
    rows = (np.arange(n) >= a[:, None]) & (np.arange(n) < b[:, None])
    np.testing.assert_allclose(
        strategy.interval_variances(a, b), np.einsum("ij,jk,ik->i", rows, gram_inverse, rows), atol=1e-9
    )
    for w in (AllRange(n), Prefix(n), Identity(n)):
        wd = w.dense()
        assert range_error(strategy, w) == pytest.approx(np.trace(wd @ gram_inverse @ wd.T), rel=1e-9)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 37])
def test_strategies_match_dense_least_squares(n):
    rng = np.random.default_rng(n)
    for b in (2, 3, 16):
        for tree in (padded_tree(n, b), balanced_tree(n, b)):
            weights = rng.uniform(0.2, 1.0, tree.depth + 1)
            _dense_check(HierarchicalStrategy(tree, weights), rng)
            if tree.depth:
                weights[0] = 0.0  # root not measured
                _dense_check(HierarchicalStrategy(tree, weights), rng)
    tree = balanced_tree(n, 2)
    _dense_check(HaarStrategy(tree, rng.uniform(0.2, 1.0, tree.depth + 1)), rng)


def test_haar_is_privelet_matrix_for_powers_of_two():
    h = haar(8).dense()
    assert set(np.unique(h)) == {-1.0, 0.0, 1.0}
    np.testing.assert_allclose(h @ h.T, np.diag(np.diag(h @ h.T)))  # orthogonal rows
    assert h[0].tolist() == [1.0] * 8 and h[1].tolist() == [1, 1, 1, 1, -1, -1, -1, -1]


def _laplace_average(strategy, n: int) -> float:
    """Average variance over all ranges with Laplace noise at ε = 1 (scale Δ₁/ε per row)."""
    return all_range_error(strategy) / (n * (n + 1) / 2) * 2 * strategy.sensitivity(1) ** 2


def test_central_hierarchical_and_wavelet_values():
    # ε = 1 split evenly over the h non-root levels (root not measured): L1 sensitivity h.
    assert _laplace_average(hierarchical(256, 2, root=False), 256) == pytest.approx(220.06, abs=0.005)
    assert _laplace_average(hierarchical(256, 4, root=False), 256) == pytest.approx(110.65, abs=0.005)
    assert _laplace_average(hierarchical(256, 16, root=False), 256) == pytest.approx(79.23, abs=0.005)
    assert _laplace_average(hierarchical(512, 2, root=False), 512) == pytest.approx(305.54, abs=0.005)
    # Privelet: the Haar matrix with per-row Laplace scale (1 + log2 D)/ε.
    assert _laplace_average(haar(1024), 1024) == pytest.approx(410.29, abs=0.005)


# HDMM journal `oned.csv` (Gaussian rootmse), full precision.
ONED = {
    (256, "all-range"): {"H2": 3.835363996450649, "Wavelet": 3.505013319547386, "HB": 4.450434025140798},
    (1024, "all-range"): {"H2": 4.654169977877171, "Wavelet": 4.318521525649876, "HB": 6.408692360218512},
    (2048, "prefix"): {"H2": 3.977631302415767, "Wavelet": 3.958484138159224, "HB": 7.713618071894534},
    (512, "width32"): {"H2": 3.8563190467438533, "Wavelet": 3.367176175660251, "HB": 4.11604032314893},
}


@pytest.mark.parametrize("key", list(ONED))
def test_hdmm_gaussian_rootmse_values(key):
    n, name = key
    workload = {"all-range": AllRange(n), "prefix": Prefix(n), "width32": width_k(n, 32)}[name]
    strategies = {"H2": hierarchical(n, 2, layout="balanced"), "Wavelet": haar(n), "HB": hb(n)}
    for label, strategy in strategies.items():
        rootmse = np.sqrt(range_error(strategy, workload) * strategy.sensitivity(2) ** 2 / workload.shape[0])
        assert rootmse == pytest.approx(ONED[key][label], rel=1e-9), label
    assert qardaji_branching(256) == 16 and qardaji_branching(1024) == 32 and qardaji_branching(2048) == 46


def test_large_domain_least_squares_is_implicit():
    n = 65536
    strategy = hierarchical(n, 4)
    x = np.random.default_rng(0).integers(0, 5, n).astype(float)
    np.testing.assert_allclose(strategy.pinv().matvec(strategy.matvec(x)), x, atol=1e-6)  # consistency, no noise
    assert prefix_error(strategy) > 0 and np.isfinite(all_range_error(haar(n)))


def test_level_weights_are_optimized_per_noise_kind():
    n = 128
    for norm in (1, 2):
        objective = all_range_error
        even = hierarchical(n, 2)
        best = choose_range_strategy(n, objective, norm, branchings=(2,))
        even_score = even.sensitivity(norm) ** 2 * objective(even)
        assert best.error < even_score * (0.9 if norm == 2 else 0.7)
        assert best.error == pytest.approx(best.strategy.sensitivity(norm) ** 2 * objective(best.strategy))
        # weights are short decimals: the measurement lattice stays coarse
        assert lattice_step(best.strategy.weights[best.strategy.weights > 0]) >= Fraction(1, 1000)


def test_kernel_objective_gradient_is_exact():
    rng = np.random.default_rng(1)
    n = 19
    q = rng.normal(size=(6, n))
    objective = KernelObjective(q.T @ q)
    for tree, cls in ((padded_tree(n, 3), HierarchicalStrategy), (balanced_tree(n, 2), HaarStrategy)):
        w = rng.uniform(0.3, 1.5, tree.depth + 1)
        value, grad = objective.value_and_gradient(cls(tree, w))
        assert value == pytest.approx(objective(cls(tree, w)))
        step = 1e-6
        numeric = [
            (objective(cls(tree, w + step * e)) - objective(cls(tree, w - step * e))) / (2 * step)
            for e in np.eye(w.size)
        ]
        np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def _interval(n, rng):
    lo = int(rng.integers(0, n))
    hi = int(rng.integers(lo + 1, n + 1))
    v = np.zeros(n)
    v[lo:hi] = 1.0
    return Dense(v[None, :])


def test_kronecker_error_matches_dense_least_squares():
    rng = np.random.default_rng(2)
    domain = Domain(("a", "b", "c"), (9, 6, 3))
    blocks = [
        Block("box", (), [Term(1.0, {"a": _interval(9, rng), "b": _interval(6, rng)})]),
        Block("or", ("c",), [
            Term(1.0, {"a": _interval(9, rng)}),
            Term(-0.5, {"a": _interval(9, rng), "b": _interval(6, rng), "c": Diagonal(rng.uniform(size=3))}),
        ], weight=0.7),
        Block("group", ("a", "c"), [Term(1.0, {})], weight=2.0),
    ]
    clique = ("a", "b", "c")
    strategies = [hierarchical(9, 3, weights=[0.5, 1.0, 0.7]), haar(6, [1.0, 0.5, 0.8, 1.0]), identity_strategy(3)]
    full = reduce(np.kron, [s.dense() for s in strategies])
    gram_inverse = np.linalg.inv(full.T @ full)
    work = KroneckerWorkload(blocks, domain, clique)
    for norm in (1, 2):
        expected = sum(
            b.weight * np.trace(b.matrix(domain, clique).dense() @ gram_inverse @ b.matrix(domain, clique).dense().T)
            for b in blocks
        ) * ((np.abs(full) ** norm).sum(axis=0).max() ** (2 / norm))
        assert work.error(strategies, norm) == pytest.approx(expected, rel=1e-9)
        attribute = work.attribute_error(1, strategies, norm)
        assert strategies[1].sensitivity(norm) ** 2 * attribute(strategies[1]) == pytest.approx(expected, rel=1e-9)
    choices, error = choose_kronecker(blocks, domain, clique, 2)
    assert error <= work.error(strategies, 2)


def _range_workload(domain, attribute, count, seed):
    rng = np.random.default_rng(seed)
    n = domain.size_of(attribute)
    return [Block(f"r{i}", (), [Term(1.0, {attribute: _interval(n, rng)})]) for i in range(count)]


def test_family_error_is_what_the_model_reports():
    domain = Domain(("age", "hours", "sex"), (60, 30, 2))
    blocks = _range_workload(domain, "age", 30, 0)
    rng = np.random.default_rng(5)
    blocks += [Block(f"b{i}", (), [Term(1.0, {"age": _interval(60, rng), "hours": _interval(30, rng)})]) for i in range(8)]
    blocks += [Block("g", ("sex",), [Term(1.0, {"hours": _interval(30, rng)})])]
    for noise in ("gaussian", "laplace"):
        family = RangeTrees(domain, noise)
        unit = family.unit_error(blocks)
        planned = []  # the family's own allocation, with the continuous noise variances
        for a in family.allocate(blocks):
            var = a.sensitivity**2 / (2 * a.fraction) if noise == "gaussian" else 2 * a.sensitivity**2 / a.fraction**2
            planned.append(PlannedMeasurement(a.clique, None, a.fraction, a.sensitivity, var, RANGE_TREES, a.strategy, a.label))
        rmse = expected_rmse(Workload(domain, blocks), planned)
        total = sum(b.weight * b.num_rows(domain) * rmse[b.name] ** 2 for b in blocks)
        assert total == pytest.approx(unit, rel=1e-6)


def test_planner_chooses_trees_for_many_ranges_and_explains_them():
    # 300 bins: beyond what the HDMM family optimizes at planning time, where trees take over
    domain = Domain(("age", "sex"), (300, 2))
    few = Workload(domain, _range_workload(domain, "age", 2, 1))
    many = Workload(domain, _range_workload(domain, "age", 60, 2))
    # (the optimal factorization, certified optimal among linear strategies, is left out here
    # and checked last: it handles these 60 ranges too, and must do at least as well)
    without = [f.name for f in FAMILIES if f.name != FACTORIZATION]
    assert plan_workload(few, 0.1, families=without).chosen != RANGE_TREES
    plan = plan_workload(many, 0.1, families=without)
    # trees, with direct top-ups for queries they would leave above their even split (planner.fairness)
    assert plan.chosen in (RANGE_TREES, "mixed")
    assert sum(m.share for m in plan.measurements if m.family == RANGE_TREES) > 0.9 * plan.cost
    text = plan.explain()
    assert "tree" in text or "Haar" in text
    per_query = next(a for a in plan.alternatives if a.name == "per-query")
    chosen = next(a for a in plan.alternatives if a.name == plan.chosen)
    assert chosen.total_squared_error < per_query.total_squared_error / 3
    optimal = next(a for a in plan_workload(many, 0.1).alternatives if a.name == FACTORIZATION)
    assert optimal.total_squared_error <= chosen.total_squared_error


def test_ranges_matrix_and_width_k():
    r = width_k(10, 3)
    d = r.dense()
    assert d.shape == (8, 10) and np.all(d.sum(axis=1) == 3)
    np.testing.assert_allclose(r.transpose().dense(), d.T)
    np.testing.assert_allclose(r.column_norms(1), d.sum(axis=0))
    s = hierarchical(10, 2)
    assert range_error(s, r) == pytest.approx(range_error(s, Dense(d)))
    assert range_error(s, Ranges(10, [0, 2], [10, 5])) == pytest.approx(range_error(s, Dense(Ranges(10, [0, 2], [10, 5]).dense())))
