"""Implicit least squares on one clique equals brute-force dense GLS, for every solver path."""

import numpy as np
import pytest

import mechanisms.reconstruction.clique as clique_lsq
from mechanisms.reconstruction.clique import CliqueLeastSquares, kron_apply
from mechanisms.domain import Domain
from mechanisms.hdmm.opt0 import p_identity_strategy
from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Ones, Prefix, Weighted
from mechanisms.measurement import Measurement
from mechanisms.ranges.trees import hierarchical
from mechanisms.workload import Block, Predicate, Term

DOMAIN = Domain(("a", "b", "c"), (5, 4, 3))
CLIQUE = ("a", "b", "c")
RNG = np.random.default_rng(0)
P_IDENTITY = Dense(p_identity_strategy(RNG.uniform(0, 1, (1, 5))))
ONE = Kronecker([P_IDENTITY, Prefix(4), Identity(3)])
OTHER = Weighted(Kronecker([Identity(5), Dense(RNG.normal(size=(6, 4))), Ones(1, 3)]), 0.7)
TREE = Kronecker([hierarchical(5, 2), Identity(4), Dense(RNG.normal(size=(3, 3)))])

BLOCKS = [
    Block("by a", ("a",), [Term(1.0, {})]),
    Block(
        "signed terms by c",
        ("c",),
        [Term(2.0, {"b": Dense([[0, 1, 1, 0]])}), Term(-1.0, {"a": Dense([[1, 0, 1, 0, 1]]), "b": Dense([[1, 2, 3, 4]])})],
    ),
    Block("restricted a by a, b", ("a", "b"), [Term(1.0, {"a": Diagonal([1, 0, 2, 0, 1])})]),
    Block("all cells", CLIQUE, [Term(1.0, {})]),
    Block(
        "or, nothing grouped",
        (),
        [
            Term(c, {k: Dense([v]) for k, v in f.items()})
            for c, f in Predicate.on("a", [1, 0, 1, 0, 0]).or_(Predicate.on("c", [0, 1, 1])).factors()
        ],
    ),
]


def dense_gls(parts, w):
    gram = sum(a.dense().T @ a.dense() / v for a, _, v in parts)
    rhs = sum(a.dense().T @ y / v for a, y, v in parts)
    pinv = np.linalg.pinv(gram)
    covered = np.abs(w @ pinv @ gram - w).max() < 1e-8
    return covered, w @ pinv @ rhs, np.einsum("ij,jk,ik->i", w, pinv, w), pinv


def measurements(parts):
    return [Measurement(CLIQUE, "gaussian", 0.1, v, y, strategy=a) for a, y, v in parts]


CASES = {
    "one Kronecker strategy": [(ONE, 2.0)],
    "a repeated strategy (averaged)": [(ONE, 2.0), (ONE, 3.0)],
    "range tree factor (pinv contract)": [(TREE, 1.5)],
    "two strategies": [(ONE, 2.0), (OTHER, 0.5)],
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dense_limit", [4096, 10])  # 10: the implicit CG path for unions
def test_matches_dense_gls(case, dense_limit, monkeypatch):
    monkeypatch.setattr(clique_lsq, "DENSE_LIMIT", dense_limit)
    rng = np.random.default_rng(1)
    parts = [(a, rng.normal(size=a.shape[0]) * 3 + 5, v) for a, v in CASES[case]]
    est = CliqueLeastSquares(DOMAIN, CLIQUE, measurements(parts))
    for block in BLOCKS:
        w = block.matrix(DOMAIN, CLIQUE).dense()
        covered, estimate, variance, pinv = dense_gls(parts, w)
        assert est.covers(block) == covered
        np.testing.assert_allclose(est.estimate(block), estimate, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(est.variance(block), variance, rtol=1e-8, atol=1e-10)
    first, second = BLOCKS[1], Block("count by c", ("c",), [Term(1.0, {})])
    w1, w2 = first.matrix(DOMAIN, CLIQUE).dense(), second.matrix(DOMAIN, CLIQUE).dense()
    pinv = dense_gls(parts, w1)[3]
    np.testing.assert_allclose(est.covariance(first, second), np.einsum("ij,jk,ik->i", w1, pinv, w2), atol=1e-9)


def test_rank_deficient_strategies_cover_only_their_row_space():
    strategy = Kronecker([Ones(1, 5), Identity(4), Identity(3)])
    est = CliqueLeastSquares(DOMAIN, CLIQUE, measurements([(strategy, np.arange(12.0), 1.0)]))
    assert [est.covers(b) for b in BLOCKS] == [False, False, False, False, False]
    by_bc = Block("by b, c", ("b", "c"), [Term(1.0, {})])
    assert est.covers(by_bc)
    np.testing.assert_allclose(est.estimate(by_bc), np.arange(12.0))
    # Terms outside the row space that cancel are still determined.
    cancel = Block("cancel", ("b",), [Term(1.0, {"a": Dense([[1, 0, 0, 0, 0]])}), Term(-1.0, {"a": Dense([[1, 0, 0, 0, 0]])}), Term(1.0, {})])
    assert est.covers(cancel)


def test_singular_unions_on_large_cliques_use_the_sufficient_test(monkeypatch):
    monkeypatch.setattr(clique_lsq, "DENSE_LIMIT", 10)
    parts = [
        (Kronecker([Ones(1, 5), Identity(4), Identity(3)]), np.ones(12), 1.0),
        (Kronecker([Identity(5), Ones(1, 4), Identity(3)]), np.ones(15), 1.0),
    ]
    est = CliqueLeastSquares(DOMAIN, CLIQUE, measurements(parts))
    by_c = Block("by c", ("c",), [Term(1.0, {})])
    by_ac = Block("by a, c", ("a", "c"), [Term(1.0, {})])
    assert est.covers(by_c) and est.covers(by_ac) and not est.covers(BLOCKS[3])
    w = by_ac.matrix(DOMAIN, CLIQUE).dense()
    _, estimate, variance, _ = dense_gls(parts, w)
    np.testing.assert_allclose(est.estimate(by_ac), estimate, atol=1e-9)
    np.testing.assert_allclose(est.variance(by_ac), variance, atol=1e-9)


def test_planning_needs_no_values():
    m = Measurement(CLIQUE, "gaussian", 0.1, 2.0, np.empty(0), strategy=ONE)
    est = CliqueLeastSquares(DOMAIN, CLIQUE, [m])
    w = BLOCKS[3].matrix(DOMAIN, CLIQUE).dense()
    np.testing.assert_allclose(est.variance(BLOCKS[3]), np.diag(w @ np.linalg.pinv(ONE.dense().T @ ONE.dense() / 2.0) @ w.T))


@pytest.mark.parametrize("chunk", [1 << 25, 7])  # 7: force the chunked path
def test_kron_apply_matches_dense_kronecker(chunk, monkeypatch):
    monkeypatch.setattr(clique_lsq, "_CHUNK_ELEMENTS", chunk)
    rng = np.random.default_rng(2)
    mats = [rng.normal(size=(3, 4)), rng.normal(size=(1, 2)), rng.normal(size=(5, 5)), rng.normal(size=(2, 3))]
    x = rng.normal(size=4 * 2 * 5 * 3)
    full = mats[0]
    for m in mats[1:]:
        full = np.kron(full, m)
    np.testing.assert_allclose(kron_apply(mats, x), full @ x, atol=1e-10)


def test_solution_is_the_full_least_squares_estimate():
    y = np.random.default_rng(3).normal(size=ONE.shape[0])
    est = CliqueLeastSquares(DOMAIN, CLIQUE, measurements([(ONE, y, 1.0)]))
    np.testing.assert_allclose(est.solution(), np.linalg.pinv(ONE.dense()) @ y, atol=1e-10)


@pytest.mark.parametrize(
    "matrix",
    [
        Identity(4),
        Diagonal([2.0, 0.0, -1.0]),
        Ones(2, 3),
        Weighted(Prefix(4), -2.5),
        Kronecker([Ones(1, 3), Dense(np.random.default_rng(4).normal(size=(3, 2)))]),
        Dense(np.random.default_rng(5).normal(size=(2, 4))),
    ],
)
def test_structured_pinv_is_the_moore_penrose_inverse(matrix):
    np.testing.assert_allclose(matrix.pinv().dense(), np.linalg.pinv(matrix.dense()), atol=1e-12)
