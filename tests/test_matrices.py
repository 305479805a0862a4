"""Implicit matrices and workload blocks agree with their dense equivalents.

Every implicit class is checked against an explicit NumPy matrix: products on
vectors and on (n, k) matrices, transposes, Gram matrices, column norms and
sensitivities (largest column L1 / L2 norm). Random shapes and entries come from
hypothesis (property tests for the linear algebra, DESIGN.md section 7).
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mechanisms.domain import Domain
from mechanisms.matrices import (
    AllRange,
    Dense,
    Diagonal,
    Identity,
    Kronecker,
    Matrix,
    Ones,
    Prefix,
    Product,
    Sum,
    Total,
    VStack,
    Weighted,
)
from mechanisms.workload import MAX_PREDICATE_TERMS, Block, Predicate, Term

PROPERTY = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

ATOL = 1e-9


# ---------------------------------------------------------------------------
# The dense reference check


def assert_matches_dense(m: Matrix, d, seed: int = 0) -> None:
    """Every operation of `m` equals the same operation on the explicit matrix `d`."""
    d = np.asarray(d, dtype=float)
    rows, cols = d.shape
    assert m.shape == (rows, cols)
    np.testing.assert_allclose(m.dense(), d, atol=ATOL)

    rng = np.random.default_rng(seed)
    x, xs = rng.normal(size=cols), rng.normal(size=(cols, 3))
    y, ys = rng.normal(size=rows), rng.normal(size=(rows, 2))
    np.testing.assert_allclose(m.matvec(x), d @ x, atol=ATOL)
    np.testing.assert_allclose(m.matvec(xs), d @ xs, atol=ATOL)
    np.testing.assert_allclose(m.matvec(xs[:, :1]), d @ xs[:, :1], atol=ATOL)
    np.testing.assert_allclose(m @ x, d @ x, atol=ATOL)
    np.testing.assert_allclose(m.rmatvec(y), d.T @ y, atol=ATOL)
    np.testing.assert_allclose(m.rmatvec(ys), d.T @ ys, atol=ATOL)
    assert m.matvec(x).shape == (rows,)
    assert m.matvec(xs).shape == (rows, 3)

    t = m.transpose()
    assert t.shape == (cols, rows)
    np.testing.assert_allclose(t.dense(), d.T, atol=ATOL)
    np.testing.assert_allclose(m.T.matvec(y), d.T @ y, atol=ATOL)
    np.testing.assert_allclose(t.transpose().dense(), d, atol=ATOL)

    g = m.gram()
    assert g.shape == (cols, cols)
    np.testing.assert_allclose(g.dense(), d.T @ d, atol=1e-8)

    l1, l2 = np.abs(d).sum(axis=0), (d**2).sum(axis=0)
    np.testing.assert_allclose(m.column_norms(1), l1, atol=1e-8)
    np.testing.assert_allclose(m.column_norms(2), l2, atol=1e-8)
    assert m.sensitivity(1) == pytest.approx(l1.max(), abs=1e-8)
    # A certified upper bound: a column whose terms cancel exactly keeps a rounding-sized margin
    # (√(c·eps) of the terms' own norms), so the L2 sensitivity is never below the exact one (but
    # for the last ulps of a product of rounded factor norms: relative 1e-14).
    own = sum(np.sqrt((t.dense() ** 2).sum(axis=0)) for t in getattr(m, "terms", [m]))  # Σ_t ‖term t's column‖
    exact = np.sqrt(l2.max())
    assert exact * (1 - 1e-14) - 1e-12 <= m.sensitivity(2) <= exact + 1e-6 * (1 + own.max())

    with pytest.raises(ValueError):
        m.matvec(np.ones(cols + 1))


def suffix(n):
    return np.triu(np.ones((n, n)))


def allrange(n):
    out = np.zeros((n * (n + 1) // 2, n))
    for r, (i, j) in enumerate((i, j) for i in range(n) for j in range(i, n)):
        out[r, i : j + 1] = 1
    return out


def kron(*ds):
    return reduce(np.kron, ds, np.ones((1, 1)))


# ---------------------------------------------------------------------------
# Each class on fixed examples


RNG = np.random.default_rng(7)
D23 = RNG.normal(size=(2, 3))
D34 = RNG.integers(-3, 4, size=(3, 4)).astype(float)
DIAG = np.array([0.5, -2.0, 0.0, 3.0])

CASES = {
    "identity": (lambda: Identity(4), lambda: np.eye(4)),
    "identity1": (lambda: Identity(1), lambda: np.eye(1)),
    "ones": (lambda: Ones(3, 5), lambda: np.ones((3, 5))),
    "total": (lambda: Total(6), lambda: np.ones((1, 6))),
    "prefix": (lambda: Prefix(5), lambda: np.tril(np.ones((5, 5)))),
    "suffix": (lambda: Prefix(5).transpose(), lambda: suffix(5)),
    "allrange": (lambda: AllRange(5), lambda: allrange(5)),
    "allrange1": (lambda: AllRange(1), lambda: allrange(1)),
    "allrange_t": (lambda: AllRange(4).transpose(), lambda: allrange(4).T),
    "dense": (lambda: Dense(D23), lambda: D23),
    "dense_row": (lambda: Dense([1.0, -2.0, 0.5]), lambda: np.array([[1.0, -2.0, 0.5]])),
    "diagonal": (lambda: Diagonal(DIAG), lambda: np.diag(DIAG)),
    "weighted": (lambda: Weighted(Prefix(4), -2.5), lambda: -2.5 * np.tril(np.ones((4, 4)))),
    "scalar_mul": (lambda: 3.0 * Dense(D34), lambda: 3.0 * D34),
    "product": (lambda: Product(Dense(D23), Dense(D34)), lambda: D23 @ D34),
    "matmul": (lambda: AllRange(3) @ Diagonal([1.0, -1.0, 2.0]), lambda: allrange(3) @ np.diag([1, -1, 2])),
    "sum": (
        lambda: Sum([Prefix(4), Weighted(Identity(4), -1.0), Diagonal(DIAG)]),
        lambda: np.tril(np.ones((4, 4))) - np.eye(4) + np.diag(DIAG),
    ),
    "sum_kron": (
        lambda: Sum([Kronecker([Identity(2), Prefix(3)]), Weighted(Kronecker([Ones(2, 2), Identity(3)]), -0.5)]),
        lambda: kron(np.eye(2), np.tril(np.ones((3, 3)))) - 0.5 * kron(np.ones((2, 2)), np.eye(3)),
    ),
    "vstack": (
        lambda: VStack([Identity(4), Total(4), Prefix(4), Dense(D34)]),
        lambda: np.vstack([np.eye(4), np.ones((1, 4)), np.tril(np.ones((4, 4))), D34]),
    ),
    "hstack": (
        lambda: VStack([Dense(D34), AllRange(4)]).transpose(),
        lambda: np.vstack([D34, allrange(4)]).T,
    ),
    "kron2": (lambda: Kronecker([Dense(D23), Dense(D34)]), lambda: np.kron(D23, D34)),
    "kron3_structured": (
        lambda: Kronecker([Prefix(3), Total(2), AllRange(3)]),
        lambda: kron(np.tril(np.ones((3, 3))), np.ones((1, 2)), allrange(3)),
    ),
    "kron3_mixed": (
        lambda: Kronecker([Diagonal([1.0, -2.0]), Dense(D23), AllRange(2).transpose()]),
        lambda: kron(np.diag([1.0, -2.0]), D23, allrange(2).T),
    ),
    "kron_single": (lambda: Kronecker([Prefix(3)]), lambda: np.tril(np.ones((3, 3)))),
    "kron_empty": (lambda: Kronecker([]), lambda: np.ones((1, 1))),
    "kron_nested": (
        lambda: Kronecker([Kronecker([Identity(2), Total(2)]), Weighted(Prefix(2), 2.0)]),
        lambda: kron(np.eye(2), np.ones((1, 2)), 2 * np.tril(np.ones((2, 2)))),
    ),
    "weighted_kron": (
        lambda: Weighted(Kronecker([Identity(3), Dense([[0.1, 2500.0, 0.25]])]), -1.5),
        lambda: -1.5 * np.kron(np.eye(3), [[0.1, 2500.0, 0.25]]),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_class_matches_dense(name):
    make, dense = CASES[name]
    assert_matches_dense(make(), dense())


def test_structured_factors_keep_their_fast_forms():
    # Gram and transpose of structured matrices stay implicit where the class promises it.
    assert isinstance(Identity(3).gram(), Identity)
    assert isinstance(Diagonal([1.0, 2.0]).gram(), Diagonal)
    assert isinstance(Kronecker([Prefix(3), Identity(2)]).gram(), Kronecker)
    assert isinstance(Kronecker([Prefix(3), Identity(2)]).transpose(), Kronecker)
    assert isinstance(VStack([Identity(2), Total(2)]).gram(), Sum)
    assert isinstance(Dense([[1.0, 2.0]]) @ Identity(2), Product)
    assert isinstance(2 * Identity(2), Weighted)
    assert isinstance(Prefix(3).transpose().transpose(), Prefix)
    assert isinstance(AllRange(3).transpose().transpose(), AllRange)


def test_kronecker_sensitivity_is_product_of_factor_sensitivities():
    k = Kronecker([AllRange(4), Prefix(3), Dense(D23)])
    d = k.dense()
    for p in (1, 2):
        exact = ((np.abs(d) ** p).sum(axis=0).max()) ** (1 / p)
        assert k.sensitivity(p) == pytest.approx(exact)
        assert k.sensitivity(p) == pytest.approx(
            np.prod([f.sensitivity(p) for f in k.factors])
        )


def test_kronecker_on_a_large_domain_never_materializes():
    # 200^3 = 8e6 columns: a dense form would be 6.4e13 entries.
    k = Kronecker([Identity(200), Total(200), Prefix(200)])
    x = np.zeros(k.shape[1])
    x[np.ravel_multi_index((3, 7, 11), (200, 200, 200))] = 2.0
    y = k.matvec(x)
    assert y.shape == (200 * 200,)
    expected = np.zeros((200, 200))
    expected[3, 11:] = 2.0  # Prefix row i sums cells 0..i
    np.testing.assert_array_equal(y.reshape(200, 200), expected)
    assert k.sensitivity(1) == 200.0
    assert k.column_norms(2).shape == (k.shape[1],)


def test_mismatched_shapes_are_refused():
    with pytest.raises(ValueError):
        Product(Dense(D23), Dense(D23))
    with pytest.raises(ValueError):
        Sum([Identity(2), Identity(3)])
    with pytest.raises(ValueError):
        VStack([Identity(2), Identity(3)])


# ---------------------------------------------------------------------------
# Sum.column_norms on large shapes: exact for p = 2 (Kronecker terms), a bound for p = 1


def test_sum_column_norms_large_shape_p2_exact_p1_upper_bound():
    n = 120  # each term is 14400 x 14400 = 2e8 entries: past the dense fallback
    s = Sum(
        [
            Kronecker([Identity(n), Prefix(n)]),
            Weighted(Kronecker([Identity(n), Identity(n)]), -1.0),
            Weighted(Kronecker([Identity(n), Ones(n, n)]), 0.5),
        ]
    )
    assert s.shape[0] * s.shape[1] > 10_000_000
    # Exact, computed on one diagonal block: I ⊗ (P - I + 0.5 J).
    block = np.tril(np.ones((n, n))) - np.eye(n) + 0.5 * np.ones((n, n))
    l1 = np.tile(np.abs(block).sum(axis=0), n)
    l2 = np.tile((block**2).sum(axis=0), n)
    np.testing.assert_allclose(s.column_norms(2), l2, rtol=1e-12)
    assert s.sensitivity(2) == pytest.approx(np.sqrt(l2.max()))
    bound = s.column_norms(1)
    assert np.all(bound >= l1 - 1e-9)
    assert s.sensitivity(1) >= l1.max() - 1e-9
    # The triangle inequality bound is what it says: sum of the terms' norms.
    np.testing.assert_allclose(bound, np.tile((n - np.arange(n)) + 1.0 + 0.5 * n, n))


def test_sum_column_norms_large_non_kronecker_term_is_upper_bound():
    n = 110
    s = Sum([Kronecker([Identity(n), Identity(n)]), Weighted(Identity(n * n), -1.0)])
    # Exactly the zero matrix; both p give a safe (non-negative, larger) bound.
    for p in (1, 2):
        assert np.all(s.column_norms(p) >= 0.0)
    x = np.arange(n * n, dtype=float)
    np.testing.assert_allclose(s.matvec(x), 0.0)


def test_sum_column_norms_p2_with_differently_factored_terms():
    # Both terms are 2 x 6 Kronecker products, but with factor shapes (1,3)x(2,2)
    # and (2,3)x(1,2). The exact p=2 path multiplies factors pairwise, which
    # either crashes or (as here) broadcasts silently to the wrong numbers.
    a = Kronecker([Dense([[0.0, -2.0, 2.0]]), Dense([[1.0, 2.0], [-2.0, 1.0]])])
    b = Kronecker([Dense([[-1.0, 0.0, 2.0], [-1.0, 1.0, -2.0]]), Dense([[-1.0, 2.0]])])
    s = Sum([a, b])
    d = a.dense() + b.dense()
    np.testing.assert_allclose(s.dense(), d)
    exact = (d**2).sum(axis=0)
    assert np.sqrt(exact.max()) == pytest.approx(np.sqrt(68.0))
    np.testing.assert_allclose(s.column_norms(2), exact)
    assert s.sensitivity(2) >= np.sqrt(exact.max()) - 1e-12


def test_sum_column_norms_p2_with_different_factor_counts():
    s = Sum([Kronecker([Identity(2), Identity(3)]), Kronecker([Dense(np.ones((6, 6)))])])
    d = s.dense()
    np.testing.assert_allclose(s.column_norms(2), (d**2).sum(axis=0))


# ---------------------------------------------------------------------------
# Random shapes and entries (hypothesis)

entries = st.integers(-3, 3).map(float) | st.floats(-4, 4, allow_nan=False, allow_infinity=False)


@st.composite
def dense_array(draw, m, n):
    return np.array([[draw(entries) for _ in range(n)] for _ in range(m)], dtype=float).reshape(m, n)


@st.composite
def leaf(draw, m=None, n=None):
    """(implicit, dense) for a structured or explicit matrix, optionally of a given shape."""
    n = draw(st.integers(1, 4)) if n is None else n
    kinds = ["dense", "ones"]
    if m is None or m == n:
        kinds += ["identity", "prefix", "suffix", "diagonal"]
    if m is None or m == n * (n + 1) // 2:
        kinds.append("allrange")
    if m is None or m == 1:
        kinds.append("total")
    if m is None and n in (1, 3, 6):
        kinds.append("allrange_t")
    kind = draw(st.sampled_from(kinds))
    if kind in ("dense", "ones"):
        rows = draw(st.integers(1, 3)) if m is None else m
        if kind == "ones":
            return Ones(rows, n), np.ones((rows, n))
        a = draw(dense_array(rows, n))
        return Dense(a), a
    if kind == "identity":
        return Identity(n), np.eye(n)
    if kind == "prefix":
        return Prefix(n), np.tril(np.ones((n, n)))
    if kind == "suffix":
        return Prefix(n).transpose(), suffix(n)
    if kind == "diagonal":
        v = np.array([draw(entries) for _ in range(n)])
        return Diagonal(v), np.diag(v)
    if kind == "allrange":
        return AllRange(n), allrange(n)
    if kind == "total":
        return Total(n), np.ones((1, n))
    base = {1: 1, 3: 2, 6: 3}[n]
    return AllRange(base).transpose(), allrange(base).T


@st.composite
def shaped(draw, m, n, depth=1):
    """(implicit, dense) of exactly shape (m, n)."""
    kind = draw(st.sampled_from(["leaf", "leaf", "weighted", "product", "transpose"] if depth else ["leaf"]))
    if kind == "leaf":
        return draw(leaf(m, n))
    if kind == "weighted":
        c = draw(entries)
        a, d = draw(shaped(m, n, depth - 1))
        return Weighted(a, c), c * d
    if kind == "product":
        k = draw(st.integers(1, 4))
        (a, da), (b, db) = draw(shaped(m, k, depth - 1)), draw(shaped(k, n, depth - 1))
        return Product(a, b), da @ db
    a, d = draw(shaped(n, m, depth - 1))
    return a.transpose(), d.T


@st.composite
def expression(draw, depth=2):
    """(implicit, dense) of a random expression tree of any small shape."""
    if depth == 0:
        return draw(leaf())
    kind = draw(
        st.sampled_from(["leaf", "weighted", "kron", "sum", "vstack", "product", "transpose"])
    )
    if kind == "leaf":
        return draw(leaf())
    if kind == "weighted":
        c = draw(entries)
        a, d = draw(expression(depth - 1))
        return Weighted(a, c), c * d
    if kind == "kron":
        parts = draw(st.lists(expression(depth - 1), min_size=0, max_size=3))
        if sum(d.size for _, d in parts) > 60:
            parts = parts[:1]
        return Kronecker([a for a, _ in parts]), kron(*(d for _, d in parts))
    if kind == "transpose":
        a, d = draw(expression(depth - 1))
        return a.transpose(), d.T
    first, d = draw(expression(depth - 1))
    m, n = d.shape
    if kind == "sum":
        rest = draw(st.lists(shaped(m, n), min_size=1, max_size=2))
        return Sum([first] + [a for a, _ in rest]), d + sum(r for _, r in rest)
    if kind == "vstack":
        rest = draw(st.lists(st.integers(1, 3).flatmap(lambda r: shaped(r, n)), min_size=1, max_size=2))
        return VStack([first] + [a for a, _ in rest]), np.vstack([d] + [r for _, r in rest])
    k = draw(st.integers(1, 4))
    b, db = draw(shaped(n, k))
    return Product(first, b), d @ db


@PROPERTY
@given(expression(), st.integers(0, 2**16))
def test_random_expressions_match_dense(pair, seed):
    m, d = pair
    assert_matches_dense(m, d, seed)


@st.composite
def kronecker_sum(draw):
    """A Sum of weighted Kronecker products with the same factor shapes (the workload form)."""
    shapes = draw(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4)), min_size=1, max_size=3))
    terms, dense = [], 0.0
    for _ in range(draw(st.integers(1, 3))):
        factors = [draw(leaf(m, n)) for m, n in shapes]
        c = draw(entries)
        terms.append(Weighted(Kronecker([f for f, _ in factors]), c))
        dense = dense + c * kron(*(d for _, d in factors))
    return Sum(terms), dense


@PROPERTY
@given(kronecker_sum())
def test_sum_of_kronecker_terms_matches_dense(pair):
    s, d = pair
    assert_matches_dense(s, d)
    # The p=2 path is the exact pairwise-inner-product formula, independent of size.
    np.testing.assert_allclose(s.column_norms(2), (d**2).sum(axis=0), atol=1e-8)


@PROPERTY
@given(st.lists(expression(depth=1), min_size=2, max_size=3))
def test_kronecker_of_random_factors(parts):
    if sum(d.size for _, d in parts) > 80:
        parts = parts[:2]
    k = Kronecker([a for a, _ in parts])
    assert_matches_dense(k, kron(*(d for _, d in parts)))


# ---------------------------------------------------------------------------
# Workload: the Predicate algebra

PDOMAIN = Domain(("a", "b", "c"), (3, 2, 4))


def evaluate(pred: Predicate, domain: Domain = PDOMAIN) -> np.ndarray:
    """The predicate's value at every cell of the domain, densely."""
    out = np.zeros(domain.shape())
    for c, fs in pred.terms:
        t = np.full(domain.shape(), c)
        for attr, vec in fs:
            axis = domain.attributes.index(attr)
            shape = [1] * len(domain)
            shape[axis] = domain.sizes[axis]
            t = t * np.asarray(vec).reshape(shape)
        out = out + t
    return out


@st.composite
def atom(draw, values=st.integers(0, 1)):
    attr = draw(st.sampled_from(PDOMAIN.attributes))
    vec = draw(st.lists(values, min_size=PDOMAIN.size_of(attr), max_size=PDOMAIN.size_of(attr)))
    return Predicate.on(attr, vec)


@st.composite
def indicator(draw, depth=2):
    """A random predicate built with AND / OR / NOT from indicator atoms."""
    if depth == 0:
        return draw(atom())
    kind = draw(st.sampled_from(["atom", "and", "or", "not"]))
    if kind == "atom":
        return draw(atom())
    p = draw(indicator(depth - 1))
    if kind == "not":
        return p.negate()
    q = draw(indicator(depth - 1))
    return p * q if kind == "and" else p.or_(q)


@PROPERTY
@given(indicator(), indicator())
def test_predicate_logic_matches_indicator_arithmetic(p, q):
    vp, vq = evaluate(p), evaluate(q)
    # Built from indicators, every predicate is an indicator.
    assert set(np.round(vp, 9).ravel()) <= {0.0, 1.0}
    np.testing.assert_allclose(evaluate(p * q), np.logical_and(vp, vq), atol=1e-9)
    np.testing.assert_allclose(evaluate(p.or_(q)), np.logical_or(vp, vq), atol=1e-9)
    np.testing.assert_allclose(evaluate(p.negate()), np.logical_not(vp), atol=1e-9)
    # De Morgan, evaluated cell by cell.
    np.testing.assert_allclose(evaluate(p.or_(q).negate()), evaluate(p.negate() * q.negate()), atol=1e-9)
    assert p.attributes() <= set(PDOMAIN.attributes)


@PROPERTY
@given(
    atom(st.integers(-3, 3).map(float)),
    atom(st.floats(-2, 2, allow_nan=False, allow_infinity=False)),
    st.integers(-3, 3).map(float),
)
def test_predicate_arithmetic_on_real_vectors(p, q, c):
    vp, vq = evaluate(p), evaluate(q)
    np.testing.assert_allclose(evaluate(p * q), vp * vq, atol=1e-9)
    np.testing.assert_allclose(evaluate(p + q), vp + vq, atol=1e-9)
    np.testing.assert_allclose(evaluate(p - q), vp - vq, atol=1e-9)
    np.testing.assert_allclose(evaluate(p.scale(c)), c * vp, atol=1e-9)
    np.testing.assert_allclose(evaluate(p.negate()), 1 - vp, atol=1e-9)
    np.testing.assert_allclose(evaluate(p.or_(q)), vp + vq - vp * vq, atol=1e-9)
    np.testing.assert_allclose(evaluate(p * Predicate.constant(1.0)), vp, atol=1e-9)
    np.testing.assert_allclose(evaluate(p * Predicate.constant(0.0)), 0.0)
    np.testing.assert_allclose(evaluate(Predicate.constant(c)), c)


def test_predicate_simplifies_and_bounds_its_size():
    x = Predicate.on("a", [1, 0, 1])
    assert (x - x).terms == ()
    assert (x * Predicate.on("a", [0, 1, 0])).terms == ()  # disjoint on one attribute
    assert len((x + x).terms) == 1 and (x + x).terms[0][0] == 2.0
    assert Predicate.constant(0).terms == ()
    assert x.negate().negate().terms == x.terms
    assert x.or_(Predicate.on("b", [0, 1])).attributes() == {"a", "b"}
    # A product of many ORs over distinct vectors expands past the limit and is refused.
    big = Predicate.constant(1.0)
    with pytest.raises(OverflowError):
        for i in range(8):
            v = [0.0] * 4
            v[i % 4] = 1.0 + i
            w = [0.0] * 3
            w[i % 3] = 1.0 + i
            big = big * Predicate.on("c", v).or_(Predicate.on("a", w).or_(Predicate.on("b", [1.0 + i, 0.0])))
    assert MAX_PREDICATE_TERMS == 256


# ---------------------------------------------------------------------------
# Workload: Block

BDOMAIN = Domain(("x", "y", "z", "w"), (3, 2, 4, 2))


def block_dense(block: Block, domain: Domain, clique) -> np.ndarray:
    """Σ coef · ⊗ factors over `clique`, defaults Identity (group-by) and Total (others)."""
    total = 0.0
    for t in block.terms:
        ds = []
        for a in clique:
            n = domain.size_of(a)
            if a in t.factors:
                ds.append(np.asarray(t.factors[a].dense()))
            else:
                ds.append(np.eye(n) if a in block.group_by else np.ones((1, n)))
        total = total + t.coef * kron(*ds)
    return total


def sample_block(name="q", coef=-2.5, order=1):
    terms = [
        Term(1.0, {"y": Dense([[1.0, 0.0]])}),
        Term(coef, {"z": Dense([[0.0, 1.0, 1.0, 0.0]]), "x": Diagonal([1.0, 2.0, 3.0])}),
    ]
    return Block(name, ("x",), terms[::order])


def test_block_matrix_is_the_sum_of_its_kronecker_terms():
    b = sample_block()
    clique = b.attributes(BDOMAIN)
    assert clique == ("x", "y", "z")
    assert b.num_rows(BDOMAIN) == 3
    expected = block_dense(b, BDOMAIN, clique)
    assert expected.shape == (3, 3 * 2 * 4)
    assert_matches_dense(b.matrix(BDOMAIN), expected)
    # Over a larger clique, the extra attribute is summed over (Total).
    wider = ("x", "y", "z", "w")
    assert_matches_dense(b.matrix(BDOMAIN, wider), block_dense(b, BDOMAIN, wider))
    for p in (1, 2):
        exact = ((np.abs(expected) ** p).sum(axis=0).max()) ** (1 / p)
        assert b.sensitivity(BDOMAIN, p) == pytest.approx(exact)


def test_block_edge_cases():
    scalar = Block("n", (), [Term(1.0, {"y": Dense([[0.0, 1.0]])})])  # COUNT(*) WHERE y = 1
    assert scalar.num_rows(BDOMAIN) == 1
    assert_matches_dense(scalar.matrix(BDOMAIN), [[0.0, 1.0]])
    empty = Block("e", ("x",), [])
    m = empty.matrix(BDOMAIN)
    assert m.shape == (3, 3)
    np.testing.assert_array_equal(m.dense(), 0.0)
    assert empty.sensitivity(BDOMAIN, 2) == 0.0


@st.composite
def random_block(draw):
    attrs = BDOMAIN.attributes
    group_by = tuple(a for a in attrs if draw(st.booleans()))
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        factors = {}
        for a in attrs:
            if not draw(st.booleans()):
                continue
            n = BDOMAIN.size_of(a)
            if a in group_by:
                if draw(st.booleans()):
                    factors[a] = Identity(n)
                else:
                    factors[a] = Diagonal([draw(entries) for _ in range(n)])
            else:
                factors[a] = Dense(draw(dense_array(1, n)))
        terms.append(Term(draw(st.integers(-3, 3).map(float)), factors))
    return Block("r", group_by, terms)


@PROPERTY
@given(random_block())
def test_random_block_matrix_matches_dense(b):
    clique = b.attributes(BDOMAIN)
    d = block_dense(b, BDOMAIN, clique)
    assert d.shape[0] == b.num_rows(BDOMAIN)
    np.testing.assert_allclose(b.matrix(BDOMAIN).dense(), d, atol=1e-9)
    np.testing.assert_allclose(b.matrix(BDOMAIN).column_norms(2), (d**2).sum(axis=0), atol=1e-8)
    assert b.sensitivity(BDOMAIN, 1) == pytest.approx(np.abs(d).sum(axis=0).max(), abs=1e-8)


def test_block_fingerprint_identifies_the_linear_queries():
    fp = sample_block().fingerprint(BDOMAIN)
    assert len(fp) == 64
    # Equal blocks, built separately, or differing only in name / weight.
    assert sample_block().fingerprint(BDOMAIN) == fp
    assert sample_block(name="other").fingerprint(BDOMAIN) == fp
    b = sample_block()
    b.weight = 7.0
    assert b.fingerprint(BDOMAIN) == fp
    # The group-by Identity given explicitly or left as the default.
    implicit = Block("m", ("x", "y"), [Term(1.0, {})])
    explicit = Block("m", ("x", "y"), [Term(1.0, {"x": Identity(3), "y": Identity(2)})])
    assert implicit.fingerprint(BDOMAIN) == explicit.fingerprint(BDOMAIN)
    # Anything that changes the matrix changes the fingerprint.
    different = [
        sample_block(coef=2.5),
        Block("q", ("x",), sample_block().terms[:1]),
        Block("q", ("x",), [Term(1.0, {"y": Dense([[0.0, 1.0]])}), sample_block().terms[1]]),
        Block("q", ("x",), [sample_block().terms[0], Term(-2.5, {"z": Dense([[0.0, 1.0, 1.0, 0.0]]), "x": Diagonal([1.0, 2.0, 4.0])})]),
        Block("q", ("x",), [sample_block().terms[0], Term(-2.5, {"z": Dense([[0.0, 1.0, 1.0, 0.0]])})]),
        Block("q", ("x", "y"), sample_block().terms),
        Block("q", ("x",), sample_block().terms + [Term(1.0, {"w": Dense([[1.0, 0.0]])})]),
        Block("m", ("x", "z"), [Term(1.0, {})]),
        Block("m", ("x", "y"), [Term(1.0, {"x": Diagonal([1.0, 1.0, 0.0])})]),
    ]
    digests = [fp, implicit.fingerprint(BDOMAIN)] + [d.fingerprint(BDOMAIN) for d in different]
    assert len(set(digests)) == len(digests)


def test_block_fingerprint_ignores_term_order():
    a = Block("q", ("x",), [Term(1.0, {"y": Dense([[1.0, 0.0]])}), Term(-1.0, {"y": Dense([[0.0, 1.0]])})])
    b = Block("q", ("x",), [Term(-1.0, {"y": Dense([[0.0, 1.0]])}), Term(1.0, {"y": Dense([[1.0, 0.0]])})])
    np.testing.assert_array_equal(a.matrix(BDOMAIN).dense(), b.matrix(BDOMAIN).dense())
    assert a.fingerprint(BDOMAIN) == b.fingerprint(BDOMAIN)


def test_block_fingerprint_ignores_term_order_across_attribute_sets():
    # Terms over different attribute sets are sorted, so their order does not matter.
    assert sample_block().fingerprint(BDOMAIN) == sample_block(order=-1).fingerprint(BDOMAIN)


def test_block_is_marginal():
    assert Block("m", ("x", "y"), [Term(1.0, {})]).is_marginal()
    assert Block("m", ("x",), [Term(1.0, {"x": Identity(3)})]).is_marginal()
    assert Block("m", (), [Term(1.0, {})]).is_marginal()  # the total count
    assert not Block("m", ("x",), [Term(2.0, {})]).is_marginal()
    assert not Block("m", ("x",), [Term(1.0, {"x": Diagonal([1.0, 0.0, 1.0])})]).is_marginal()
    assert not Block("m", ("x",), [Term(1.0, {"y": Dense([[1.0, 0.0]])})]).is_marginal()
    assert not Block("m", ("x",), [Term(1.0, {}), Term(1.0, {})]).is_marginal()
    assert not Block("m", ("x",), []).is_marginal()
    assert not sample_block().is_marginal()
