"""HDMM: exact expected error, SVD bounds, analytic Gaussian calibration and the optimizers.

Reference numbers are McKenna's thesis (Ch. 3): Tables 3.2/3.3 (ε = 1; δ = 1e-6
with the analytic Gaussian σ ≈ 4.2247), Example 2 and Example 4 (unit noise
variance, i.e. Laplace at ε = √2), and the errata of the seed report (Thm 10's
multiplicity, Thm 9's scale).
"""

from itertools import combinations

import numpy as np
import pytest

from benchmarks.analytic_gaussian import analytic_gaussian_sigma, gaussian_delta
from mechanisms.domain import Domain
from mechanisms.hdmm import OPT0, OPT_KRON, OPT_M, OPT_PLUS, kron_matrix, optimize
from mechanisms.hdmm.error import (
    explicit_error,
    kron_error,
    laplace_variance,
    per_query_variance,
    svd_bound,
    union_svd_bound,
)
from mechanisms.accounting import budget_split
from mechanisms.hdmm.kron import opt_kron, opt_plus
from mechanisms.hdmm.marginals import MarginalAlgebra, opt_marginals
from mechanisms.hdmm.opt0 import (
    opt0_gaussian, opt0_laplace, p_identity_objective, p_identity_pinv_gram, p_identity_strategy,
)
from mechanisms.hdmm.workload import (
    GramOperator,
    KronGram,
    all_range_gram,
    marginals_workload,
    permuted,
    prefix_gram,
    total_gram,
    width_range_gram,
)
from mechanisms.matrices import Dense, Diagonal, Kronecker, Prefix
from mechanisms.workload import Block, Predicate, Term

SIGMA = 4.224679  # analytic Gaussian, ε = 1, δ = 1e-6


def rmse(error, queries, variance):
    return float(np.sqrt(variance * error / queries))


def test_analytic_gaussian_matches_the_published_calibration():
    sigma = analytic_gaussian_sigma(1.0, 1e-6)
    assert sigma == pytest.approx(SIGMA, abs=1e-6)
    assert gaussian_delta(sigma, 1.0) <= 1e-6 < gaussian_delta(sigma * (1 - 1e-9), 1.0)
    assert analytic_gaussian_sigma(1.0, 1e-6, sensitivity=3.0) == pytest.approx(3 * sigma, rel=1e-9)
    assert analytic_gaussian_sigma(1.0, 1e-6) < np.sqrt(2 * np.log(1.25 / 1e-6))  # beats the classic bound


@pytest.mark.parametrize(
    "gram, queries, identity, svdb",
    [
        (all_range_gram(64), 64 * 65 // 2, (6.63, 19.82), (3.22, 9.62)),
        (all_range_gram(256), 256 * 257 // 2, (13.11, 39.18), (4.07, 12.15)),
        (prefix_gram(64), 64, (8.06, 24.08), (2.89, 8.62)),
        (width_range_gram(256, 32), 225, (8.00, 23.90), (3.26, 9.73)),
    ],
)
def test_identity_and_svd_bound_reproduce_tables_3_2_and_3_3(gram, queries, identity, svdb):
    identity_error = explicit_error(gram, np.eye(gram.shape[0]), 1)
    for noise, variance in ((0, laplace_variance(1.0)), (1, SIGMA**2)):
        assert round(rmse(identity_error, queries, variance), 2) == identity[noise]
        assert round(rmse(svd_bound(gram), queries, variance), 2) == svdb[noise]


def test_permutation_leaves_the_svd_bound_unchanged():
    assert svd_bound(permuted(all_range_gram(64), 3)) == pytest.approx(svd_bound(all_range_gram(64)))


def test_opt0_gaussian_is_optimal_with_a_certificate():
    gram = all_range_gram(64)
    result = opt0_gaussian(gram)
    assert rmse(result.error, 2080, SIGMA**2) == pytest.approx(9.726, abs=1e-3)  # Table 3.3: 9.73
    assert result.lower_bound <= result.error <= result.lower_bound * (1 + 1e-5)
    assert svd_bound(gram) <= result.lower_bound
    assert explicit_error(gram, result.strategy, 2) == pytest.approx(result.error, rel=1e-9)
    assert np.allclose((result.strategy**2).sum(axis=0), 1.0)  # unit L2 sensitivity


def test_opt0_gaussian_handles_singular_workloads():
    gram = width_range_gram(64, 32)  # rank 33
    result = opt0_gaussian(gram, max_iter=300)
    assert explicit_error(gram, result.strategy, 2) == pytest.approx(result.error, rel=1e-9)
    assert rmse(result.error, 33, SIGMA**2) < 8.74  # Table 3.3 OPT₀
    assert result.error <= result.lower_bound * (1 + 1e-3)


@pytest.mark.parametrize("gram, p", [(prefix_gram(12), 2), (all_range_gram(40), 3), (GramOperator.all_range(40), 3)])
def test_p_identity_gradient_and_strategy(gram, p):
    rng = np.random.default_rng(0)
    dense = gram.dense() if isinstance(gram, GramOperator) else gram
    n = dense.shape[0]
    theta = rng.uniform(0, 1, p * n)
    f, g = p_identity_objective(theta, gram, p)
    q = p_identity_strategy(theta.reshape(p, n))
    assert np.allclose(np.abs(q).sum(axis=0), 1.0)
    assert f == pytest.approx(explicit_error(dense, q, 1), rel=1e-10)
    for i in (0, 7, 19, p * n - 1):
        e = np.zeros_like(theta)
        e[i] = 1e-6
        fd = (p_identity_objective(theta + e, gram, p)[0] - p_identity_objective(theta - e, gram, p)[0]) / 2e-6
        assert g[i] == pytest.approx(fd, rel=1e-5)


@pytest.mark.parametrize("scale", [1.0, 100.0, 1e4])  # 1e4: column sums past _RUNAWAY, through the SVD
def test_p_identity_pinv_gram_is_the_inverse_of_the_strategy_gram(scale):
    theta = scale * np.random.default_rng(3).uniform(0, 1, (4, 30))
    pinv = np.linalg.pinv(p_identity_strategy(theta))
    exact = pinv @ pinv.T
    assert np.linalg.norm(p_identity_pinv_gram(theta) - exact) <= 1e-9 * np.linalg.norm(exact)


def test_opt_kron_errors_from_closed_forms_equal_the_exact_error():
    # Both axes share one optimum (the second is a memo hit): every error comes from the closed forms.
    gram = KronGram.product([all_range_gram(32), all_range_gram(32)], 528 * 528)
    strategy = opt_kron(gram, 1, restarts=3)
    assert strategy.templates == ["p-Identity(p=2)", "p-Identity(p=2)"]
    assert strategy.error == pytest.approx(kron_error(gram, strategy.factors, 1), rel=1e-9)


def test_opt0_laplace_reaches_the_published_values_and_is_deterministic():
    gram = prefix_gram(64)
    a, b = opt0_laplace(gram, restarts=3, seed=0), opt0_laplace(gram, restarts=3, seed=0)
    assert a.error == b.error and np.array_equal(a.strategy, b.strategy)
    assert round(rmse(a.error, 64, laplace_variance(1.0)), 2) <= 5.32  # Table 3.2 OPT₀
    assert explicit_error(gram, a.strategy, 1) == pytest.approx(a.error, rel=1e-9)


def test_gram_operators_equal_the_dense_grams():
    n = 40
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, n))
    pairs = [
        (GramOperator.all_range(n), all_range_gram(n)),
        (GramOperator.all_range(n).permuted(5), permuted(all_range_gram(n), 5)),
        (GramOperator.of_matrix(Prefix(n)), prefix_gram(n)),
    ]
    for op, dense in pairs:
        assert np.allclose(op.right(x), x @ dense)
        assert np.allclose(op.diagonal, np.diag(dense))
        theta = rng.uniform(0, 1, 2 * n)
        assert p_identity_objective(theta, op, 2)[0] == pytest.approx(p_identity_objective(theta, dense, 2)[0])


EXAMPLE4 = (2, 5, 50, 100)


def test_example_4_errors():
    workload = marginals_workload(EXAMPLE4, combinations(range(4), 2))
    algebra = MarginalAlgebra(EXAMPLE4)
    w = workload.marginal_weights()
    as_strategy = np.zeros(16)
    as_strategy[[3, 5, 6, 9, 10, 12]] = 1.0
    assert algebra.error(as_strategy, w, 1) == pytest.approx(206_964)
    assert algebra.error(np.eye(16)[15], w, 1) == pytest.approx(300_000)
    marginal = opt_marginals(EXAMPLE4, w, 1, restarts=8)
    assert marginal.error == pytest.approx(62_886.05, abs=0.1)
    assert {s: round(t, 2) for s, t in marginal.measured()} == {(2, 3): 0.44, (0, 1, 3): 0.31, (0, 1, 2): 0.25}
    kron = opt_kron(workload, 1, restarts=2)
    assert kron.error == pytest.approx(213_270, abs=1)
    assert kron_error(workload, kron.factors, 1) == pytest.approx(kron.error)
    parts = [marginals_workload(EXAMPLE4, [s]) for s in combinations(range(4), 2)]
    plus = opt_plus(parts, 1, restarts=2)
    assert plus.error == pytest.approx(85_070, abs=1)
    assert sorted(round(s, 2) for s in plus.shares) == [0.05, 0.11, 0.13, 0.14, 0.18, 0.39]


def test_example_2_union_strategy_beats_a_single_kronecker_product():
    n = 100
    terms = [(1.0, [prefix_gram(n), total_gram(n)]), (1.0, [total_gram(n), prefix_gram(n)])]
    workload = KronGram.from_terms((n, n), terms, 2 * n)
    parts = [KronGram.from_terms((n, n), [t], n) for t in terms]
    kron, plus = opt_kron(workload, 1), opt_plus(parts, 1)
    assert kron.error <= 33_385 and plus.error <= 14_252  # the thesis' values
    assert [s.templates[1 - i] for i, s in enumerate(plus.parts)] == ["Total", "Total"]


def test_budget_split_is_the_lagrange_optimum():
    errors = [3.0, 1.0, 7.0]
    for exponent in (1, 2):
        shares, total = budget_split(errors, exponent)
        assert sum(e / s**exponent for e, s in zip(errors, shares)) == pytest.approx(total)
        for other in np.random.default_rng(0).dirichlet(np.ones(3), 50):
            assert total <= sum(e / s**exponent for e, s in zip(errors, other)) + 1e-9


SMALL = (2, 3, 4)


def marginal_strategy_matrix(sizes, theta):
    rows = []
    d = len(sizes)
    for mask, t in enumerate(theta):
        k = np.ones((1, 1))
        for i, n in enumerate(sizes):
            k = np.kron(k, np.eye(n) if mask >> (d - 1 - i) & 1 else np.ones((1, n)))
        rows.append(t * k)
    return np.vstack(rows)


def test_marginal_algebra_matches_explicit_matrices_and_the_corrected_svd_bound():
    workload = marginals_workload(SMALL, combinations(range(3), 2))
    algebra = MarginalAlgebra(SMALL)
    w = workload.marginal_weights()
    assert algebra.svd_bound(w) == pytest.approx(svd_bound(workload.dense()))
    assert algebra.svd_bound(w) == pytest.approx(50.850, abs=1e-3)
    printed = np.sum(algebra.cells * np.sqrt(np.clip(algebra.eigenvalues(w), 0, None))) ** 2 / 24
    assert printed == pytest.approx(189.34, abs=0.01)  # Thm 10 as printed is wrong
    rng = np.random.default_rng(2)
    for theta in (rng.uniform(0, 1, 8), np.sqrt(w)):  # the second one is singular
        q = marginal_strategy_matrix(SMALL, theta)
        for p in (1, 2):
            assert algebra.error(theta, w, p) == pytest.approx(explicit_error(workload.dense(), q, p), rel=1e-9)


def test_theorem_11_closed_form_attains_the_svd_bound_on_all_marginals():
    workload = marginals_workload(EXAMPLE4, [s for k in range(5) for s in combinations(range(4), k)])
    algebra = MarginalAlgebra(EXAMPLE4)
    w = workload.marginal_weights()
    theta = algebra.closed_form(w)
    assert algebra.error(theta, w, 2) == pytest.approx(algebra.svd_bound(w), rel=1e-9)
    assert algebra.error(theta, w, 2) == pytest.approx(232_742.4, abs=0.1)


def test_marginal_weights_are_exact_against_marginal_strategies():
    """Thm 8: tr[G(u) WᵀW] = tr[G(u) G(w)] for every marginal gram G(u), even for ranges."""
    sizes = (3, 4)
    workload = KronGram.from_terms(
        sizes, [(2.0, [all_range_gram(3), prefix_gram(4)]), (0.5, [np.eye(3), total_gram(4)])], 10
    )
    w = workload.marginal_weights()
    rng = np.random.default_rng(4)
    for _ in range(3):
        u = rng.uniform(0, 1, 4)
        g = marginal_strategy_matrix(sizes, np.sqrt(u))
        gram_u = g.T @ g
        assert np.sum(gram_u * workload.dense()) == pytest.approx(np.sum(gram_u * KronGram.from_terms(
            sizes, [(w[m], [np.eye(n) if m >> (1 - i) & 1 else np.ones((n, n)) for i, n in enumerate(sizes)])
                    for m in range(4)], 1).dense()))


def test_blocks_become_their_exact_gram():
    domain = Domain(("a", "b", "c"), (3, 4, 2))
    predicate = Predicate.on("a", [1, 0, 1]).or_(Predicate.on("b", [0, 1, 1, 0]))
    blocks = [
        Block("or by c", ("c",), [Term(c, {k: Dense([v]) for k, v in f.items()}) for c, f in predicate.factors()], 2.0),
        Block("sum b by a", ("a",), [Term(1.0, {"a": Diagonal([1, 0, 1]), "b": Dense([[1, 2, 3, 4]])})]),
    ]
    clique = ("a", "b", "c")
    gram = KronGram.from_blocks(blocks, domain, clique)
    expected = sum(b.weight * b.matrix(domain, clique).dense().T @ b.matrix(domain, clique).dense() for b in blocks)
    assert np.allclose(gram.dense(), expected)
    rng = np.random.default_rng(5)
    factors = [rng.normal(size=(n + 1, n)) for n in (3, 4, 2)]
    q = factors[0]
    for f in factors[1:]:
        q = np.kron(q, f)
    strategy = Kronecker([Dense(f) for f in factors])
    for p in (1, 2):
        assert kron_error(gram, factors, p) == pytest.approx(explicit_error(expected, q, p), rel=1e-9)
        per_row = sum(b.weight * per_query_variance(b, domain, clique, strategy, p, 2.0).sum() for b in blocks)
        assert per_row == pytest.approx(2.0 * kron_error(gram, factors, p), rel=1e-9)


def test_kron_error_refuses_unsupported_strategies():
    gram = KronGram.product([prefix_gram(4), np.eye(3)], 12)
    assert kron_error(gram, [np.ones((1, 4)), np.eye(3)], 1) == float("inf")
    assert union_svd_bound(gram) == pytest.approx(svd_bound(gram.dense()))


def test_meta_optimizer_keeps_the_best_and_is_deterministic():
    sizes = (6, 5)
    workload = KronGram.from_terms(
        sizes, [(1.0, [prefix_gram(6), total_gram(5)]), (1.0, [total_gram(6), np.eye(5)]), (1.0, [np.eye(6), np.eye(5)])], 41
    )
    parts = [KronGram.from_terms(sizes, [t], 1) for t in workload.terms()]
    for p in (1, 2):
        a = optimize(workload, p, parts, restarts=2, seed=3)
        b = optimize(workload, p, parts, restarts=2, seed=3)
        assert [c.operator for c in a.candidates] == [c.operator for c in b.candidates]
        assert [c.error for c in a.candidates] == [c.error for c in b.candidates]
        assert {c.operator for c in a.candidates} == {OPT0, OPT_KRON, OPT_PLUS, OPT_M}
        assert a.best.error == min(c.error for c in a.candidates)
        kron = next(c.strategy for c in a.candidates if c.operator == OPT_KRON)
        matrix = kron_matrix(kron, [0, 1])
        assert explicit_error(workload.dense(), matrix.dense(), p) == pytest.approx(kron.error, rel=1e-9)


def test_svd_bound_of_prefix_times_marginals_factorizes():
    """P ⊗ (all marginals of two attributes): the CPS prefix-marginal structure of Table 3.4."""
    sizes = (3, 4, 2)
    terms = [(1.0, [prefix_gram(3), np.eye(4) if a else total_gram(4), np.eye(2) if b else total_gram(2)])
             for a in (0, 1) for b in (0, 1)]
    gram = KronGram.from_terms(sizes, terms, 1)
    assert union_svd_bound(gram) == pytest.approx(svd_bound(gram.dense()), rel=1e-9)
    assert union_svd_bound(KronGram.from_terms((5,), [(1.0, [all_range_gram(5)]), (1.0, [prefix_gram(5)])], 1)) is None
