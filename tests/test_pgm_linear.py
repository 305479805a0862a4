"""The graphical model on any linear measurements (HDMM+PGM): loss, fit, non-negativity, error-bar coverage."""

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Identity, Kronecker, Prefix, Sum, Total, VStack, Weighted
from mechanisms.measurement import GAUSSIAN, Measurement
from mechanisms.pgm import AutoEstimator, GraphicalModel, GraphicalModelEstimator, LinearMeasurement
from mechanisms.pgm.estimation import MarginalLoss, estimate_total, gram_terms
from mechanisms.pgm.inference import calibrate
from mechanisms.pgm.junction_tree import JunctionTree
from mechanisms.pgm.model import ACCELERATED, MIRROR
from mechanisms.reconstruction import LeastSquaresModel, NotInSpan
from mechanisms.residual import residual_strategy
from mechanisms.workload import Block, Term

DOMAIN = Domain(("a", "b", "c", "d"), (4, 6, 3, 5))


def data(rng, rows=2000, sparse=True):
    """Cell counts of a table with a skewed joint distribution (many empty cells when `sparse`)."""
    logits = rng.normal(0.0, 2.5 if sparse else 0.5, DOMAIN.size())
    p = np.exp(logits - logits.max())
    return rng.multinomial(rows, p / p.sum()).reshape(DOMAIN.shape()).astype(float)


def marginal(x, clique):
    return x.sum(axis=tuple(i for i, a in enumerate(DOMAIN.attributes) if a not in clique))


def measure(rng, x, clique, variance, strategy=None, key=None, query=None):
    """A Measurement with Gaussian noise (post-processing tests need no exact sampler)."""
    mu = marginal(x, clique).ravel()
    q = query if query is not None else strategy
    exact = mu if q is None else np.asarray(q.matvec(mu))
    values = exact + rng.normal(0.0, np.sqrt(variance), exact.shape)
    return Measurement(clique, GAUSSIAN, 1.0, variance, values, key, strategy)


def strategies():
    """Strategy matrices of every shape the loss decomposes (and one it cannot)."""
    return [
        (("a", "b"), Kronecker([Prefix(4), Identity(6)])),
        (("b", "c"), Weighted(Kronecker([Dense(np.random.default_rng(1).random((7, 6))), Prefix(3)]), 0.5)),
        (("c", "d"), Sum([Kronecker([Identity(3), Prefix(5)]), Weighted(Kronecker([Prefix(3), Prefix(5)]), -0.25)])),
        (("a", "d"), VStack([Kronecker([Identity(4), Total(5)]), Kronecker([Total(4), Prefix(5)])])),
        (("b", "d"), residual_strategy(DOMAIN, ("b", "d"))),
        (("a", "c"), Dense(np.random.default_rng(2).normal(size=(9, 12)))),  # one factor over the clique
        (("a", "b", "d"), Kronecker([Weighted(Prefix(4), 2.0), Kronecker([Identity(6), Prefix(5)])])),  # nested
        (("a", "b"), VStack([Sum([Kronecker([Identity(4), Prefix(6)]), Kronecker([Prefix(4), Identity(6)])]),
                             Kronecker([Sum([Identity(4), Prefix(4)]), Total(6)])])),  # matrix-vector form
    ]


def test_the_loss_and_its_gradient_are_the_likelihood_of_every_kind_of_measurement():
    rng = np.random.default_rng(0)
    x = data(rng)
    measurements = [LinearMeasurement(("a", "b", "c"), marginal(x, ("a", "b", "c")).ravel() + 1.0, 2.0)]
    for clique, q in strategies():
        y = np.asarray(q.matvec(marginal(x, clique).ravel())) + rng.normal(0, 3, q.shape[0])
        measurements.append(LinearMeasurement(clique, y, 1.0 + rng.random(), q))
    assert gram_terms(strategies()[5][1]) is not None  # small: a dense gram over the clique
    assert gram_terms(strategies()[-1][1]) is None  # a sum inside a Kronecker factor: kept as Q and Qᵀ
    tree = JunctionTree.build(DOMAIN, [m.clique for m in measurements])
    loss = MarginalLoss(tree, measurements)
    potentials = [rng.normal(size=DOMAIN.shape(c)) for c in tree.cliques]
    marginals, _ = calibrate(tree, potentials)
    value, counts, grads = loss(marginals, 1000.0)
    expected, by_clique = 0.0, {}
    for m in measurements:
        mu = 1000.0 * marginal(np.asarray(_joint(tree, marginals)), m.clique).ravel()
        q = m.query if m.query is not None else Identity(mu.size)
        r = np.asarray(q.matvec(mu)) - m.values
        expected += r @ r / (2 * m.variance)
        g = np.asarray(q.rmatvec(r)) / m.variance
        by_clique[m.clique] = by_clique.get(m.clique, 0) + g
    assert value == pytest.approx(expected, rel=1e-10)
    for group, grad in zip(loss.groups, grads):
        np.testing.assert_allclose(np.ravel(grad), by_clique[group.clique], rtol=1e-8, atol=1e-8)


def _joint(tree, marginals):
    """The model's full distribution from its calibrated clique marginals (p = Π μ_C / Π μ_S)."""
    out = np.ones(DOMAIN.shape())
    for i, clique in enumerate(tree.cliques):
        index = tuple(slice(None) if a in clique else None for a in DOMAIN.attributes)
        table = marginals[i]
        sep = tree.separators[i]
        if tree.parent[i] >= 0 and sep:
            below = table.sum(axis=tuple(k for k, a in enumerate(clique) if a not in sep), keepdims=True)
            table = table / np.where(below > 0, below, 1.0)
        out = out * table[index]
    return out


def test_with_only_marginals_the_fit_is_the_existing_estimation():
    rng = np.random.default_rng(3)
    x = data(rng)
    ms = [measure(rng, x, c, 25.0) for c in [("a", "b"), ("b", "c"), ("c", "d"), ("a",)]]
    linear = [LinearMeasurement(m.clique, m.values, m.variance) for m in ms]
    mirror = GraphicalModel.fit(DOMAIN, linear, max_iters=300)
    estimator = GraphicalModelEstimator(DOMAIN, ms, method=MIRROR, max_iters=300)
    for c in [("a", "b"), ("b", "c"), ("a", "d")]:
        np.testing.assert_array_equal(estimator.model.project(c), mirror.project(c))
    # the accelerated method (the estimator's default) reaches the same optimum in 5× fewer iterations
    slow = GraphicalModel.fit(DOMAIN, linear, max_iters=2000, tol=0.0)
    fast = GraphicalModelEstimator(DOMAIN, ms, max_iters=400, tol=0.0)
    assert fast.model.loss <= slow.loss * (1 + 1e-9)
    assert fast.model.loss == pytest.approx(slow.loss, rel=3e-3)
    for c in [("a", "b"), ("b", "c"), ("c", "d")]:
        np.testing.assert_allclose(fast.model.project(c), slow.project(c), atol=0.5)


def test_with_strategy_measurements_and_tiny_noise_the_fitted_marginals_are_the_true_ones():
    rng = np.random.default_rng(4)
    x = data(rng, sparse=False)
    ms = [measure(rng, x, c, 1e-6, strategy=q) for c, q in strategies()[:5]]
    block = Block("prefix c by a", ("a",), [Term(1.0, {"c": Dense(np.tril(np.ones((3, 3))))})], mapped_rows={"c": 3})
    ms.append(measure(rng, x, ("a", "c"), 1e-6, key=block.fingerprint(DOMAIN), query=block.matrix(DOMAIN)))
    assert estimate_total(DOMAIN, [LinearMeasurement.of(m, DOMAIN, {ms[-1].key: block}) for m in ms]) == pytest.approx(
        x.sum(), rel=1e-6
    )
    estimator = GraphicalModelEstimator(DOMAIN, ms, blocks=[block], max_iters=3000, tol=1e-12)
    assert not estimator.skipped
    # every measured clique but (a, d), where only the 1-way marginals are measured; (b, d) has its
    # residual from one strategy and its 1-way marginals from others
    for c in [("a", "b"), ("b", "c"), ("c", "d"), ("b", "d"), ("a", "c"), ("a",), ("d",)]:
        np.testing.assert_allclose(estimator.model.project(c), marginal(x, c), rtol=1e-3, atol=0.05)
    np.testing.assert_allclose(estimator.estimate(block), block.matrix(DOMAIN).matvec(marginal(x, ("a", "c")).ravel()), rtol=1e-3)
    # without the block, its direct measurement is left out of the fit (least squares still has it)
    assert len(GraphicalModelEstimator(DOMAIN, ms, max_iters=5).skipped) == 1


def test_answers_to_counting_blocks_are_never_negative():
    rng = np.random.default_rng(5)
    x = data(rng, rows=300)
    ms = [measure(rng, x, c, 400.0, strategy=q) for c, q in strategies()[:3]]
    ms += [measure(rng, x, ("a", "b", "c"), 400.0)]
    exact = LeastSquaresModel(DOMAIN, ms)
    estimator = GraphicalModelEstimator(DOMAIN, ms, exact=exact)
    blocks = [
        Block("abc", ("a", "b", "c"), [Term(1.0, {})]),
        Block("prefix d by c", ("c",), [Term(1.0, {"d": Prefix(5)})], mapped_rows={"d": 5}),
        Block("b,c", ("b", "c"), [Term(1.0, {})]),
    ]
    least = np.concatenate([exact.answer(b)[0] for b in blocks])
    assert (least < 0).mean() > 0.2  # least squares answers many negative counts here
    for b in blocks:
        est, var = estimator.answer(b)
        assert est.min() >= 0.0
        np.testing.assert_array_equal(var, exact.variance(b))
        assert estimator.source_name(b) == "graphical model"
    unmeasured_pair = Block("a,b,d", ("a", "b", "d"), [Term(1.0, {})])
    assert estimator.covers(unmeasured_pair) and not estimator.determines(unmeasured_pair)
    assert np.isnan(estimator.variance(unmeasured_pair)).all()
    # auto: the model where it agrees with least squares, least squares where it does not
    auto = AutoEstimator(estimator)
    assert estimator.agrees(blocks[0]) and auto.source_name(blocks[0]) == "graphical model"
    assert auto.answer(blocks[0])[0].min() >= 0.0
    assert not estimator.agrees(blocks[0], level=1.01)
    assert auto.source(unmeasured_pair) is estimator  # least squares cannot answer it
    # a model of other data disagrees with these measurements' least squares: auto answers from least squares
    other = GraphicalModelEstimator(DOMAIN, [measure(rng, 3 * data(rng, rows=300), m.clique, m.variance, strategy=m.strategy)
                                             for m in ms], exact=exact)
    assert not other.agrees(blocks[0])
    wrong = AutoEstimator(other)
    assert wrong.source_name(blocks[0]) == "least squares"
    np.testing.assert_array_equal(wrong.answer(blocks[0])[0], exact.answer(blocks[0])[0])
    with pytest.raises(NotInSpan):
        GraphicalModelEstimator(DOMAIN, ms[:1], max_iters=5).answer(Block("d", ("d",), [Term(1.0, {})]))


def test_95_percent_intervals_cover_the_true_answers_about_95_percent_of_the_time():
    """200 noise draws of one small table; the model's answers ± 1.96 error bars (fixed seeds)."""
    small = Domain(("a", "b", "c"), (3, 4, 5))
    rng = np.random.default_rng(6)
    logits = rng.normal(0.0, 1.5, small.size())
    x = rng.multinomial(3000, np.exp(logits) / np.exp(logits).sum()).reshape(small.shape()).astype(float)
    strategy = Kronecker([Identity(4), Prefix(5)])
    exact_values = {
        ("a", "b"): x.sum(axis=2).ravel(),
        ("b", "c"): np.asarray(strategy.matvec(x.sum(axis=0).ravel())),
    }
    variances = {("a", "b"): 100.0, ("b", "c"): 64.0}
    blocks = [
        Block("a,b", ("a", "b"), [Term(1.0, {})]),
        Block("prefix c by b", ("b",), [Term(1.0, {"c": Prefix(5)})], mapped_rows={"c": 5}),
        Block("b", ("b",), [Term(1.0, {})]),
        Block("total", (), [Term(1.0, {"a": Total(3)})]),
    ]
    truth = np.concatenate([
        x.sum(axis=2).ravel(),
        np.asarray(strategy.matvec(x.sum(axis=0).ravel())),
        x.sum(axis=(0, 2)),
        [x.sum()],
    ])
    covered, rows, errors = 0, 0, []
    first = None
    for draw in range(200):
        noise = np.random.default_rng(1000 + draw)
        ms = [
            Measurement(c, GAUSSIAN, 1.0, variances[c], v + noise.normal(0.0, np.sqrt(variances[c]), v.size),
                        None, strategy if c == ("b", "c") else None)
            for c, v in exact_values.items()
        ]
        estimator = GraphicalModelEstimator(small, ms, max_iters=200, tol=1e-7, warm_start=first)
        first = first or estimator.model
        est = np.concatenate([estimator.estimate(b) for b in blocks])
        sd = np.sqrt(np.concatenate([estimator.variance(b) for b in blocks]))
        covered += int((np.abs(est - truth) <= 1.96 * sd).sum())
        rows += truth.size
        errors.append(est - truth)
    coverage = covered / rows
    assert 0.88 <= coverage <= 0.99, coverage
    assert np.abs(np.mean(errors, axis=0)).max() < 3.0  # no visible bias on this dense table


def test_set_estimator_answers_sql_from_a_graphical_model_without_negative_counts():
    import duckdb

    import dpsql
    from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML, create_people_table

    con = duckdb.connect()
    create_people_table(con, rows=3000)
    conn = dpsql.connect(con=con, catalog=PEOPLE_CATALOG_TOML, epsilon=1.0, seed=4)
    cur = conn.cursor()
    cur.execute("BEGIN WORKLOAD WITH (epsilon = 0.05); SELECT race, region, COUNT(*) FROM people GROUP BY race, region; "
                "SELECT education, COUNT(*) FROM people GROUP BY education; END WORKLOAD")
    least_squares = cur.execute("SELECT race, region, COUNT(*) FROM people GROUP BY race, region").fetchall()
    spent = conn.budget.spent.rho
    cur.execute("SET dpsql.estimator = 'pgm'")
    fitted = cur.execute("SELECT race, region, COUNT(*) FROM people GROUP BY race, region").fetchall()
    assert min(n for *_, n in fitted) >= 0 and len(fitted) == len(least_squares) == 20
    assert cur.result.answered_by == ["graphical model"] and conn.budget.spent.rho == spent
    assert cur.execute("SHOW dpsql.estimator").fetchall() == [("pgm",)]
    cur.execute("SET dpsql.estimator = 'auto'")
    assert len(cur.execute("SELECT education, COUNT(*) FROM people GROUP BY education").fetchall()) == 8
    with pytest.raises(dpsql.ProgrammingError, match="one of least_squares"):
        cur.execute("SET dpsql.estimator = 'magic'")
