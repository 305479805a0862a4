"""Matrices in marginal coordinates (X·P) equal the same matrices written out on the cells, in every use:
products, pseudo-inverse, sensitivities, exact answers and releases, ledger specs and least squares."""

import json

import numpy as np
import pytest

import mechanisms.marginal_stack as marginal_stack
import mechanisms.reconstruction.clique as clique_lsq
from mechanisms.domain import Domain
from mechanisms.marginal_stack import MarginalStack, MarginalStrategy
from mechanisms.matrices import DecimalDense, Dense, Weighted, from_spec, to_spec
from mechanisms.measurement import Measurement, exact_answer, exact_work, release
from mechanisms.noise import RandomSource
from mechanisms.reconstruction.clique import CliqueLeastSquares
from mechanisms.workload import Block, Predicate, Term

DOMAIN = Domain(("a", "b", "c"), (5, 4, 3))
CLIQUE = ("a", "b", "c")
STACK = MarginalStack((5, 4, 3), [(0, 1), (1, 2), (0,), ()])  # overlapping cliques, one inside another, the total


def strategy(rows: int, seed: int, exponent: int = 3) -> MarginalStrategy:
    rng = np.random.default_rng(seed)
    return MarginalStrategy(STACK, rng.integers(-999, 1000, size=(rows, STACK.rows)), exponent)


def written_out(s: MarginalStrategy) -> DecimalDense:
    return DecimalDense(STACK.expand(s.units), s.exponent)


def test_products_and_pseudo_inverse_match_the_matrix_written_out():
    s = strategy(7, 1)
    dense = written_out(s).dense()
    assert np.array_equal(s.dense(), dense)
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(STACK.cells, 3)), rng.normal(size=(7, 2))
    assert np.allclose(s.matvec(x), dense @ x, rtol=1e-12, atol=1e-12)
    assert np.allclose(s.rmatvec(y), dense.T @ y, rtol=1e-12, atol=1e-12)
    assert np.allclose(s.gram().matvec(x), dense.T @ dense @ x, rtol=1e-10, atol=1e-10)
    pinv = s.pinv()
    assert pinv.shape == (STACK.cells, 7)
    assert np.allclose(pinv.dense(), np.linalg.pinv(dense), rtol=1e-9, atol=1e-12)
    assert np.allclose(pinv.transpose().matvec(x), np.linalg.pinv(dense).T @ x, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("chunk", [1 << 21, 7])  # one range of cells; ranges of one cell
def test_sensitivities_and_lattice_are_those_of_the_matrix_written_out(monkeypatch, chunk):
    monkeypatch.setattr(marginal_stack, "_CHUNK_ENTRIES", chunk)
    s, dense = strategy(5, 3), written_out(strategy(5, 3))
    for p in (1, 2):
        assert np.array_equal(s.column_norms(p), dense.column_norms(p))  # bit for bit
        assert s.sensitivity(p) == dense.sensitivity(p)
    assert s.lattice[0] == dense.lattice[0]
    # Odd integers on two disjoint marginals: every cell sums two of them, so the lattice is twice theirs.
    disjoint = MarginalStack((3, 2), [(0,), (1,)])
    odd = MarginalStrategy(disjoint, [[1, 3, 5, 7, 9], [3, 1, 1, 5, 7]], 2)
    assert odd.lattice[0] == DecimalDense(disjoint.expand(odd.units), 2).lattice[0] == pytest.approx(0.02)


def test_exact_answers_and_releases_are_those_of_the_matrix_written_out():
    s = strategy(6, 4)
    dense = written_out(s)
    counts = np.random.default_rng(5).integers(0, 10**6, size=STACK.cells)
    for kind in ("gaussian", "laplace"):
        ours, theirs = exact_answer(counts, s, kind), exact_answer(counts, dense, kind)
        assert (ours.step, ours.units, ours.sensitivity) == (theirs.step, theirs.units, theirs.sensitivity)
        mine, cal = release(ours, kind, 0.5, RandomSource(seed=7))
        other, cal_other = release(theirs, kind, 0.5, RandomSource(seed=7))
        assert np.array_equal(mine, other) and cal == cal_other
    assert exact_work(s) == (0, STACK.cells * 4 + s.units.size)  # no entry read as a decimal, nothing n × rows


def test_a_ledger_spec_rebuilds_the_strategy():
    s = strategy(4, 6, exponent=5)
    spec = json.loads(json.dumps(to_spec(s)))
    assert spec["type"] == "MarginalStrategy"
    back = from_spec(spec)
    assert isinstance(back, MarginalStrategy) and np.array_equal(back.units, s.units)
    assert np.array_equal(back.dense(), s.dense()) and back.stack.cliques == STACK.cliques


def test_coefficients_past_ten_to_the_fifteen_on_a_cell_are_refused():
    with pytest.raises(ValueError, match="10\\^15"):
        MarginalStrategy(STACK, np.full((1, STACK.rows), 3 * 10**14), 0)  # four cliques: 1.2·10^15 on a cell


def _blocks():
    def block(name, group_by, predicate):
        return Block(name, group_by, [Term(c, {k: Dense([v]) for k, v in f.items()}) for c, f in predicate.factors()])

    return [
        Block("by a", ("a",), [Term(1.0, {})]),
        Block("by a, b", ("a", "b"), [Term(1.0, {})]),
        Block("by c, b restricted", ("b", "c"), [Term(2.0, {"b": Dense([[1, 0, 2, 0]])})]),
        Block("total", (), [Term(1.0, {})]),
        # On (a, c), inside no clique: a sum of two marginals' rows (in P's span) ...
        block("a in S plus c in T", (), Predicate.on("a", [1, 0, 1, 0, 0]) + Predicate.on("c", [0, 1, 1])),
        # ... and a product (outside it).
        block("a in S or c in T", (), Predicate.on("a", [1, 0, 1, 0, 0]).or_(Predicate.on("c", [0, 1, 1]))),
        Block("by a, c", ("a", "c"), [Term(1.0, {})]),
    ]


def _dense_gls(a, y, variance, w):
    pinv = np.linalg.pinv(a)
    covered = np.abs(w @ pinv @ a - w).max() <= 1e-8 * max(np.abs(w).max(), 1.0)
    return covered, w @ pinv @ y, variance * np.einsum("ij,ij->i", w @ pinv, w @ pinv)


def partial() -> MarginalStrategy:
    """The marginal on a (times 7) and 4 random rows: determines a's blocks and the total, nothing else."""
    units = np.zeros((9, STACK.rows), dtype=np.int64)
    units[:5, STACK.block(2)] = 7 * np.eye(5, dtype=np.int64)
    units[5:] = strategy(4, 10).units
    return MarginalStrategy(STACK, units, 2)


@pytest.mark.parametrize("spanning", [True, False])  # 40 random rows spanning P's row space; `partial()`
@pytest.mark.parametrize("weight", [1.0, 0.5])
def test_least_squares_on_marginals_equals_dense_least_squares(spanning, weight):
    s = strategy(40, 8) if spanning else partial()
    rows = s.shape[0]
    a = written_out(s).dense()
    measured = s if weight == 1.0 else Weighted(s, weight)
    y = np.random.default_rng(9).normal(size=rows) * 100
    model = CliqueLeastSquares(DOMAIN, CLIQUE, [Measurement(CLIQUE, "gaussian", 0.1, 2.5, y, strategy=measured)])
    assert model._marginal is not None  # solved in marginal coordinates
    outcomes = []
    for block in _blocks():
        w = block.matrix(DOMAIN, CLIQUE).dense()
        covered, estimate, variance = _dense_gls(weight * a, y, 2.5, w)
        assert model.covers(block) == covered, block.name
        outcomes.append(covered)
        if covered:
            assert np.allclose(model.estimate(block), estimate, rtol=1e-9, atol=1e-9)
            assert np.allclose(model.variance(block), variance, rtol=1e-9, atol=1e-12)
    assert any(outcomes) and not all(outcomes)  # both outcomes are tested
    first, second = _blocks()[0], Block("a again, weighted", ("a",), [Term(3.0, {})])
    pinv = np.linalg.pinv(weight * a)
    w1, w2 = (b.matrix(DOMAIN, CLIQUE).dense() for b in (first, second))
    assert np.allclose(model.covariance(first, second), 2.5 * np.einsum("ij,ij->i", w1 @ pinv, w2 @ pinv), rtol=1e-9)
    assert np.allclose(model.solution(), pinv @ y, rtol=1e-9, atol=1e-9)


def test_several_strategies_on_marginals_are_solved_together_as_dense_gls():
    """Two strategies on different cliques of the same cells, one of them measured twice: whitened into one."""
    other_stack = MarginalStack((5, 4, 3), [(0, 2), (1,)])
    other = MarginalStrategy(other_stack, np.random.default_rng(11).integers(-99, 100, size=(6, other_stack.rows)), 1)
    parts = [(partial(), 2.0), (other, 0.5), (partial(), 3.0)]
    rng = np.random.default_rng(12)
    answers = [rng.normal(size=s.shape[0]) * 50 for s, _ in parts]
    model = CliqueLeastSquares(DOMAIN, CLIQUE, [Measurement(CLIQUE, "gaussian", 0.1, v, y, strategy=s)
                                                for (s, v), y in zip(parts, answers)])
    assert model._marginal is not None
    gram = sum(s.dense().T @ s.dense() / v for s, v in parts)
    rhs = sum(s.dense().T @ y / v for (s, v), y in zip(parts, answers))
    pinv = np.linalg.pinv(gram)
    outcomes = []
    for block in _blocks():
        w = block.matrix(DOMAIN, CLIQUE).dense()
        covered = np.abs(w @ pinv @ gram - w).max() <= 1e-8 * max(np.abs(w).max(), 1.0)
        assert model.covers(block) == covered, block.name
        outcomes.append(covered)
        if covered:
            assert np.allclose(model.estimate(block), w @ pinv @ rhs, rtol=1e-9, atol=1e-9)
            assert np.allclose(model.variance(block), np.einsum("ij,jk,ik->i", w, pinv, w), rtol=1e-9, atol=1e-12)
    assert any(outcomes) and not all(outcomes)


@pytest.mark.parametrize("dense_limit", [4096, 1])  # the dense pinv of G; conjugate gradients on its implicit gram
def test_a_strategy_on_marginals_beside_another_kind_is_solved_by_the_general_union(monkeypatch, dense_limit):
    from mechanisms.matrices import Identity, Kronecker

    monkeypatch.setattr(clique_lsq, "DENSE_LIMIT", dense_limit)
    parts = [(partial(), 2.0), (Kronecker([Identity(5), Identity(4), Dense(np.ones((1, 3)))]), 1.0)]
    answers = [np.arange(s.shape[0], dtype=float) for s, _ in parts]
    model = CliqueLeastSquares(DOMAIN, CLIQUE, [Measurement(CLIQUE, "gaussian", 0.1, v, y, strategy=s)
                                                for (s, v), y in zip(parts, answers)])
    assert model._marginal is None and model._union is not None
    gram = sum(np.asarray(s.dense()).T @ np.asarray(s.dense()) / v for s, v in parts)
    rhs = sum(np.asarray(s.dense()).T @ y / v for (s, v), y in zip(parts, answers))
    block = _blocks()[1]  # by a, b: determined by the second strategy
    w = block.matrix(DOMAIN, CLIQUE).dense()
    assert model.covers(block)
    assert np.allclose(model.estimate(block), w @ np.linalg.pinv(gram) @ rhs, rtol=1e-9, atol=1e-9)
