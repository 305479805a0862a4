"""Private-PGM: junction trees, belief propagation and queries against brute force."""

from itertools import combinations

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Total
from mechanisms.pgm.estimation import LinearMeasurement, MarginalLoss, estimate_total, mirror_descent
from mechanisms.pgm.inference import Beliefs, calibrate
from mechanisms.pgm.junction_tree import JunctionTree, model_size, model_sizes
from mechanisms.pgm.model import GraphicalModel
from mechanisms.workload import Block, Term

DOMAIN = Domain(tuple("abcdef"), (2, 3, 2, 4, 3, 2))
STRUCTURES = [
    [("a", "b"), ("b", "c", "d"), ("d", "e"), ("a", "e"), ("f",)],  # a cycle: needs fill-in
    [("a", "b", "c"), ("c", "d"), ("d", "e", "f")],  # a chain
    [("a",), ("b",), ("c", "d"), ("e", "f")],  # disconnected parts
]


def joint(domain, tree, potentials):
    """The normalized full-domain distribution of the model, by brute force."""
    full = np.zeros(domain.shape())
    for clique, table in zip(tree.cliques, potentials):
        index = tuple(slice(None) if a in clique else None for a in domain.attributes)
        full = full + table[index]
    full = np.exp(full - full.max())
    return full / full.sum()


def marginal_of(domain, p, attrs):
    return p.sum(axis=tuple(i for i, a in enumerate(domain.attributes) if a not in attrs))


@pytest.mark.parametrize("cliques", STRUCTURES)
def test_junction_tree_is_a_valid_tree_of_maximal_cliques(cliques):
    tree = JunctionTree.build(DOMAIN, cliques)
    assert set().union(*map(set, tree.cliques)) == set(DOMAIN.attributes)
    assert all(any(set(c) <= set(t) for t in tree.cliques) for c in cliques)
    # running intersection: the cliques holding an attribute form a connected subtree
    for a in DOMAIN.attributes:
        holding = [i for i, c in enumerate(tree.cliques) if a in c]
        tops = [i for i in holding if tree.parent[i] not in holding]
        assert len(tops) == 1
    assert tree.size == model_size(DOMAIN, cliques)  # the estimate is the real size
    assert model_sizes(DOMAIN, cliques[:-1], [cliques[-1]]) == {cliques[-1]: tree.size}


@pytest.mark.parametrize("cliques", STRUCTURES)
@pytest.mark.parametrize("scale", [1.0, 500.0])
def test_belief_propagation_matches_brute_force(cliques, scale):
    tree = JunctionTree.build(DOMAIN, cliques)
    rng = np.random.default_rng(7)
    potentials = [scale * rng.normal(size=DOMAIN.shape(c)) for c in tree.cliques]
    marginals, log_z = calibrate(tree, potentials)
    p = joint(DOMAIN, tree, potentials)
    for clique, mu in zip(tree.cliques, marginals):
        np.testing.assert_allclose(mu, marginal_of(DOMAIN, p, clique), atol=1e-12)
    if scale == 1.0:
        full = sum(
            t[tuple(slice(None) if a in c else None for a in DOMAIN.attributes)]
            for c, t in zip(tree.cliques, potentials)
        )
        assert log_z == pytest.approx(np.log(np.exp(full).sum()), rel=1e-12)


@pytest.mark.parametrize("cliques", STRUCTURES)
def test_out_of_clique_marginals_and_kronecker_queries(cliques):
    tree = JunctionTree.build(DOMAIN, cliques)
    rng = np.random.default_rng(3)
    potentials = [rng.normal(size=DOMAIN.shape(c)) for c in tree.cliques]
    beliefs = Beliefs(tree, calibrate(tree, potentials)[0])
    p = joint(DOMAIN, tree, potentials)
    for attrs in combinations(DOMAIN.attributes, 3):
        np.testing.assert_allclose(beliefs.marginal(attrs), marginal_of(DOMAIN, p, attrs), atol=1e-14)
    ranges = np.tril(np.ones((4, 4)))  # prefix ranges on d
    signs = rng.normal(size=(2, 3))
    got = beliefs.contract(["a"], {"d": ranges, "e": signs})
    np.testing.assert_allclose(got, np.einsum("abcdef,xd,ye->axy", p, ranges, signs), atol=1e-14)


def test_blocks_answered_from_the_model_match_the_full_distribution():
    tree = JunctionTree.build(DOMAIN, STRUCTURES[0])
    rng = np.random.default_rng(5)
    potentials = [rng.normal(size=DOMAIN.shape(c)) for c in tree.cliques]
    marginals, _ = calibrate(tree, potentials)
    model = GraphicalModel(tree, potentials, marginals, 1000.0, [])
    block = Block(
        "q",
        ("b",),
        [
            Term(2.0, {"b": Identity(3), "d": Dense(np.array([[0.0, 1.0, 1.0, 0.0]]))}),
            Term(-1.0, {"b": Diagonal([1.0, 0.0, 2.0]), "e": Dense(np.array([[1.0, 2.0, 3.0]]))}),
        ],
    )
    x = 1000.0 * joint(DOMAIN, tree, potentials)
    clique = block.attributes(DOMAIN)
    expected = block.matrix(DOMAIN, clique).matvec(marginal_of(DOMAIN, x, clique).ravel())
    np.testing.assert_allclose(model.estimate(block), expected, rtol=1e-12)
    assert not model.covers(block)  # nothing measured: no finite error estimate


def consistent_measurements(rng, cliques, total=500.0):
    """Exact marginals of a random distribution (noise-free), some via non-identity queries."""
    p = rng.dirichlet(np.ones(DOMAIN.size())).reshape(DOMAIN.shape()) * total
    out = []
    for c in cliques:
        x = marginal_of(DOMAIN, p, c).ravel()
        out.append(LinearMeasurement(c, x, 1.0 + rng.random()))
    prefix = Kronecker([Dense(np.tril(np.ones((2, 2)))), Dense(np.tril(np.ones((3, 3))))])
    out.append(LinearMeasurement(("a", "b"), prefix.matvec(marginal_of(DOMAIN, p, ("a", "b")).ravel()), 2.0, prefix))
    return p, out


def test_mirror_descent_reaches_the_least_squares_optimum_on_consistent_measurements():
    rng = np.random.default_rng(11)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e", "f")]
    p, measurements = consistent_measurements(rng, cliques)
    model = GraphicalModel.fit(DOMAIN, measurements, max_iters=20000, tol=1e-15)
    assert model.total == pytest.approx(500.0, rel=1e-9)
    assert model.loss < 1e-6  # consistent data: the optimum fits every measurement exactly
    for c in cliques:
        np.testing.assert_allclose(model.project(c), marginal_of(DOMAIN, p, c), atol=1e-3)


def test_total_is_the_inverse_variance_weighted_estimate():
    y1, y2 = np.array([10.0, 20.0, 30.0]), np.array([40.0, 25.0])
    ms = [LinearMeasurement(("b",), y1, 2.0), LinearMeasurement(("a",), y2, 1.0)]
    w1, w2 = 1 / (2.0 * 3), 1 / (1.0 * 2)
    assert estimate_total(DOMAIN, ms) == pytest.approx((60 * w1 + 65 * w2) / (w1 + w2))
    prefix = Dense(np.tril(np.ones((3, 3))))  # the last prefix is the total
    assert estimate_total(DOMAIN, [LinearMeasurement(("b",), np.array([1.0, 3.0, 7.0]), 1.0, prefix)]) == pytest.approx(7.0)
    assert estimate_total(DOMAIN, [LinearMeasurement(("b",), np.array([1.0]), 1.0, Dense([[1.0, 0.0, 0.0]]))]) is None


def test_warm_start_reproduces_the_previous_model_on_a_larger_tree():
    rng = np.random.default_rng(2)
    _, measurements = consistent_measurements(rng, [("a", "b"), ("c", "d")])
    first = GraphicalModel.fit(DOMAIN, measurements, max_iters=500, tol=1e-12)
    tree = JunctionTree.build(DOMAIN, [("a", "b"), ("c", "d"), ("b", "c")])
    marginals, _ = calibrate(tree, first._potentials_on(tree))
    for clique, mu in zip(tree.cliques, marginals):
        np.testing.assert_allclose(mu * first.total, first.project(clique), atol=1e-9)


def test_line_search_never_increases_the_loss():
    rng = np.random.default_rng(4)
    _, measurements = consistent_measurements(rng, [("a", "b", "c"), ("c", "d"), ("a", "e")])
    noisy = [LinearMeasurement(m.clique, m.values + rng.normal(0, 3, m.values.size), m.variance, m.query) for m in measurements]
    tree = JunctionTree.build(DOMAIN, [m.clique for m in noisy])
    losses = []
    mirror_descent(
        tree, MarginalLoss(tree, noisy), 500.0, [np.zeros(DOMAIN.shape(c)) for c in tree.cliques],
        max_iters=200, tol=0.0, callback=lambda it, value: losses.append(value),
    )
    assert all(b <= a for a, b in zip(losses, losses[1:]))


def test_model_variance_is_theorem_14_on_supported_marginals():
    ms = [
        LinearMeasurement(("a", "b"), np.full(6, 10.0), 4.0),
        LinearMeasurement(("b",), np.full(3, 20.0), 1.0),
    ]
    model = GraphicalModel.fit(DOMAIN, ms, max_iters=50)
    # b: the (a,b) marginal summed over a has cell variance 2·4 = 8, combined with 1: 1/(1/8 + 1)
    expected = 1.0 / (1.0 / 8.0 + 1.0)
    assert model.cell_variance(("b",)) == pytest.approx(expected)
    block = Block("count by b", ("b",), [Term(1.0, {"b": Identity(3)})])
    np.testing.assert_allclose(model.variance(block), expected)
    total = Block("total", (), [Term(1.0, {"b": Total(3)})])
    assert model.variance(total)[0] == pytest.approx(3 * expected)
    assert model.cell_variance(("a", "c")) == float("inf")  # nothing measured on c
    assert model.covers(block) and not model.covers(Block("c", ("c",), [Term(1.0, {"c": Identity(2)})]))


def test_synthetic_rows_follow_the_model_marginals():
    tree = JunctionTree.build(DOMAIN, STRUCTURES[0])
    rng = np.random.default_rng(9)
    potentials = [rng.normal(size=DOMAIN.shape(c)) for c in tree.cliques]
    marginals, _ = calibrate(tree, potentials)
    model = GraphicalModel(tree, potentials, marginals, 20000.0, [])
    rows = model.sample(rng=1)
    assert rows.shape == (20000, len(DOMAIN))
    for clique in tree.cliques + (("a", "c", "f"),):
        columns = [DOMAIN.attributes.index(a) for a in clique]
        index = np.ravel_multi_index(tuple(rows[:, c] for c in columns), DOMAIN.shape(clique))
        counts = np.bincount(index, minlength=DOMAIN.size(clique))
        expected = model.project(clique).ravel()
        # randomized rounding: 1-way and within-clique counts are close to N·p (chi-square, fixed seed)
        chi2 = float(((counts - expected) ** 2 / np.maximum(expected, 1e-9)).sum())
        assert chi2 < 2 * DOMAIN.size(clique), (clique, chi2)
    first = DOMAIN.attributes.index(tree.elimination[-1])  # sampled first: exact rounding
    np.testing.assert_array_less(
        np.abs(np.bincount(rows[:, first]) - model.project((tree.elimination[-1],))), 1.0
    )
