"""The residual-basis least squares equals brute-force full-domain GLS."""

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.marginals import residual_weights
from mechanisms.matrices import Dense, Diagonal, Identity, Kronecker, Total
from mechanisms.measurement import Measurement
from mechanisms.reconstruction import LeastSquaresModel, NotInSpan
from mechanisms.workload import Block, Predicate, Term

DOMAIN = Domain(("a", "b", "c"), (3, 4, 2))


def marginal_operator(domain, clique):
    return Kronecker(
        [Identity(n) if a in clique else Total(n) for a, n in zip(domain.attributes, domain.sizes)]
    ).dense()


def brute_force(domain, measurements, query):
    """Full-domain GLS: estimate q x̂ and its variance q (AᵀΣ⁻¹A)⁺ qᵀ."""
    rows, ys, ws = [], [], []
    for clique, var, y in measurements:
        m = marginal_operator(domain, clique)
        rows.append(m)
        ys.append(y)
        ws.append(np.full(m.shape[0], 1.0 / var))
    a, y, w = np.vstack(rows), np.concatenate(ys), np.concatenate(ws)
    gram_pinv = np.linalg.pinv(a.T @ (w[:, None] * a))
    xhat = gram_pinv @ (a.T @ (w * y))
    return query @ xhat, np.einsum("ij,jk,ik->i", query, gram_pinv, query)


def lift(block, domain):
    """The block as a dense matrix over the full domain."""
    clique = block.attributes(domain)
    dense = block.matrix(domain, clique).dense()
    return dense @ marginal_operator(domain, clique)


@pytest.mark.parametrize(
    "cliques",
    [
        [("a", "b"), ("b", "c"), ("a",), ()],
        [("a", "b", "c")],
        [("a", "b"), ("a", "c"), ("b", "c")],
    ],
)
def test_residual_gls_matches_full_domain_gls(cliques):
    rng = np.random.default_rng(0)
    measured = []
    model = LeastSquaresModel(DOMAIN)
    for i, clique in enumerate(cliques):
        var = 0.5 + i
        y = rng.normal(size=DOMAIN.size(clique)) * 5 + 20
        measured.append((clique, var, y))
        model.add(Measurement(clique, "gaussian", 0.1, var, y))
    blocks = [
        Block("count by a", ("a",), [Term(1.0, {})]),
        Block("sum c by b", ("b",), [Term(1.0, {"c": Dense([[1.0, 3.0]])})]),
        Block(
            "a in {0,2} or b = 1, by nothing",
            (),
            [
                Term(c, {k: Dense([v]) for k, v in f.items()})
                for c, f in Predicate.on("a", [1, 0, 1]).or_(Predicate.on("b", [0, 1, 0, 0])).factors()
            ],
        ),
        Block("restricted a by b", ("a",), [Term(2.0, {"a": Diagonal([1, 0, 1]), "b": Dense([[1, 1, 0, 0]])})]),
    ]
    for block in blocks:
        covered = model.covers(block)
        if not covered:
            with pytest.raises(NotInSpan):
                model.answer(block)
            continue
        est, var = model.answer(block)
        ref_est, ref_var = brute_force(DOMAIN, measured, lift(block, DOMAIN))
        np.testing.assert_allclose(est, ref_est, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(var, ref_var, rtol=1e-9, atol=1e-9)


def test_covariance_matches_brute_force():
    rng = np.random.default_rng(1)
    cliques = [("a", "b"), ("b", "c")]
    measured = []
    model = LeastSquaresModel(DOMAIN)
    for clique in cliques:
        y = rng.normal(size=DOMAIN.size(clique))
        measured.append((clique, 2.0, y))
        model.add(Measurement(clique, "gaussian", 0.1, 2.0, y))
    s = Block("sum", ("b",), [Term(1.0, {"c": Dense([[0.0, 7.0]])})])
    c = Block("count", ("b",), [Term(1.0, {})])
    dense_s, dense_c = lift(s, DOMAIN), lift(c, DOMAIN)
    a = np.vstack([marginal_operator(DOMAIN, cl) for cl in cliques])
    gram_pinv = np.linalg.pinv(a.T @ a / 2.0)
    expected = np.einsum("ij,jk,ik->i", dense_s, gram_pinv, dense_c)
    np.testing.assert_allclose(model.covariance(s, c), expected, atol=1e-9)


def test_direct_and_marginal_estimates_combine_by_precision():
    block = Block("count by a", ("a",), [Term(1.0, {})])
    model = LeastSquaresModel(DOMAIN)
    model.add(Measurement(("a",), "gaussian", 0.1, 4.0, np.array([10.0, 20.0, 30.0])))
    key = block.fingerprint(DOMAIN)
    model.add(Measurement(("a",), "gaussian", 0.1, 1.0, np.array([12.0, 22.0, 32.0]), key=key))
    est, var = model.answer(block)
    np.testing.assert_allclose(est, [11.6, 21.6, 31.6])
    np.testing.assert_allclose(var, [0.8, 0.8, 0.8])


def test_a_re_asked_block_is_computed_once_per_set_of_measurements(monkeypatch):
    block = Block("count by a", ("a",), [Term(1.0, {})])
    model = LeastSquaresModel(DOMAIN)
    model.add(Measurement(("a",), "gaussian", 0.1, 4.0, np.array([10.0, 20.0, 30.0])))
    first = model.answer(block)
    assert model.covers(block)
    first[0][:] = -1  # a caller's change to its answer is not the model's
    calls = []
    for e in model.estimators:
        monkeypatch.setattr(e, "covers", lambda b, covers=e.covers: calls.append(b) or covers(b))
    assert model.covers(block) and model.answer(block)[0].tolist() == [10.0, 20.0, 30.0]
    assert np.allclose(model.variance(block), 4.0) and calls == []  # remembered: the estimators are not asked
    model.add(Measurement(("a",), "gaussian", 0.1, 4.0, np.array([12.0, 22.0, 32.0]),
                          key=block.fingerprint(DOMAIN)))  # a new measurement: computed again
    np.testing.assert_allclose(model.answer(block)[0], [11.0, 21.0, 31.0])
    np.testing.assert_allclose(model.variance(block), 2.0)


def test_residual_weights_sum_to_total_error():
    block = Block("count by a,b", ("a", "b"), [Term(1.0, {})])
    weights = residual_weights(block, DOMAIN)
    # Measuring the (a, b) marginal with unit cell variance gives v_S = n((a, b) \ S);
    # then the block's total error must be one unit per cell.
    v = {s: DOMAIN.size(("a", "b")) // DOMAIN.size(s) for s in weights}
    assert sum(weights[s] * v[s] for s in weights) == pytest.approx(DOMAIN.size(("a", "b")))


def test_strategy_measurements_are_solved_on_their_clique():
    from mechanisms.matrices import Prefix, from_spec, to_spec

    rng = np.random.default_rng(3)
    strategy = Kronecker([Prefix(3), Identity(4)])
    assert np.array_equal(from_spec(to_spec(strategy)).dense(), strategy.dense())
    y = rng.normal(size=12) * 3 + 10
    model = LeastSquaresModel(DOMAIN, [Measurement(("a", "b"), "gaussian", 0.1, 2.0, y, strategy=strategy)])
    block = Block("a in {0,1} by b", ("b",), [Term(1.0, {"a": Dense([[1.0, 1.0, 0.0]])})])
    assert model.covers(block)
    est, var = model.answer(block)
    a = strategy.dense()
    w = block.matrix(DOMAIN, ("a", "b")).dense()
    np.testing.assert_allclose(est, w @ np.linalg.solve(a, y))
    np.testing.assert_allclose(var, 2.0 * np.einsum("ij,jk,ik->i", w, np.linalg.inv(a.T @ a), w))
    assert not model.covers(Block("by c", ("c",), [Term(1.0, {})]))
