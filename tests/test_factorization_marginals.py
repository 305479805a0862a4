"""The optimal factorization in marginal coordinates: the same certified optimum as on explicit rows, far cheaper."""

from itertools import product

import numpy as np
import pytest

from dpsql.deployment.demo_data import PEOPLE_CATALOG_TOML
from dpsql.sql.compiler import compile_query
from dpsql.tables.catalog import Catalog
from mechanisms.factorization import optimal_factorization
from mechanisms.factorization_marginals import MarginalStack, marginal_coordinates, marginal_factorization
from mechanisms.interruption import recording
from planner.families.factorization import FactorizationFamily

CATALOG = Catalog.from_toml(PEOPLE_CATALOG_TOML)
DOMAIN = CATALOG.get("people").domain
QUERIES = [
    "SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race",
    "SELECT race, COUNT(*) FROM people GROUP BY race",  # inside (sex, race): folded into it
    "SELECT race, COUNT(*) FROM people WHERE marital = 'Married' GROUP BY race",
    "SELECT education, COUNT(*) FROM people GROUP BY education",
    "SELECT COUNT(*) FROM people WHERE region = 'South'",
    "SELECT COUNT(*) FROM people WHERE region = 'South' OR region = 'West'",
    "SELECT COUNT(*) FROM people",
]


def blocks():
    found = [b for i, q in enumerate(QUERIES) for b in compile_query(q, CATALOG, label=f"q{i}").blocks]
    return [b for b in found if b.terms]


def explicit(stack: MarginalStack) -> np.ndarray:
    """P written out: row (clique b, marginal cell) has ones on the cells that project onto it."""
    cells = list(product(*[range(s) for s in stack.shape]))
    p = np.zeros((stack.rows, len(cells)))
    for b, clique in enumerate(stack.cliques):
        sizes = [stack.shape[a] for a in clique]
        for j, cell in enumerate(cells):
            index = np.ravel_multi_index([cell[a] for a in clique], sizes) if clique else 0
            p[stack.block(b).start + index, j] = 1
    return p


def test_the_stacked_marginals_algebra_matches_the_explicit_operator():
    stack = MarginalStack((2, 3, 4), [(0, 1), (1, 2), (), (2,), (0, 2)])
    p = explicit(stack)
    rng = np.random.default_rng(1)
    d = rng.uniform(size=stack.cells)
    k = rng.normal(size=(stack.rows, stack.rows))
    k = k + k.T
    x = rng.integers(-3, 4, size=(5, stack.rows))
    assert np.allclose(stack.weighted_gram(), p @ p.T)
    assert np.allclose(stack.weighted_gram(d), (p * d) @ p.T)
    assert np.allclose(stack.diagonal(k), np.einsum("ij,ij->j", p, k @ p))
    assert np.array_equal(stack.expand(x), x @ p.astype(int))  # integers stay exact


def test_marginal_coordinates_give_the_explicit_optimum_and_a_valid_certificate():
    bs = blocks()
    union, stack, x = marginal_coordinates(DOMAIN, bs)
    assert stack.cells == 2 * 5 * 8 * 4 * 4 and stack.rows == 10 + 20 + 8 + 4  # (race) folded into (sex, race)
    rows = np.vstack([b.matrix(DOMAIN, union).dense() for b in bs])
    assert np.array_equal(x @ explicit(stack), rows)
    weights = np.concatenate([np.full(b.num_rows(DOMAIN), b.weight) for b in bs])
    dense = optimal_factorization(rows, weights)
    clique, fast = marginal_factorization(DOMAIN, bs)
    assert clique == union and fast.rank == dense.rank == np.linalg.matrix_rank(rows)
    # Each certificate bounds the other's strategy, and both meet within the gap.
    assert fast.lower_bound <= dense.error and dense.lower_bound <= fast.error
    assert fast.lower_bound <= fast.error <= fast.lower_bound * 1.003
    assert fast.lower_bound == pytest.approx(dense.lower_bound, rel=3e-3)
    # The error is the exact error of the strategy written out on the cells, which answers every row.
    a = fast.strategy.dense()
    assert np.allclose(rows @ np.linalg.pinv(a) @ a, rows, atol=1e-9)
    weighted = rows * np.sqrt(weights)[:, None]
    exact = (a**2).sum(axis=0).max() * np.sum((weighted @ np.linalg.pinv(a)) ** 2)
    assert fast.error == pytest.approx(exact, rel=1e-8)
    assert np.array_equal(fast.strategy.units, np.rint(a * 10.0**fast.strategy.exponent))  # exact decimals


def test_a_marginal_step_announces_far_less_work_than_an_explicit_one():
    # Taxi's shape: 1-D ranges on two columns beside two small marginals, 160,000 cells in the union.
    wide = [f"SELECT COUNT(*) FROM people WHERE age BETWEEN {lo} AND {lo + 9}" for lo in range(0, 90, 2)]
    wide += [f"SELECT COUNT(*) FROM people WHERE income BETWEEN {lo} AND {lo + 30000}" for lo in range(0, 150000, 7000)]
    wide += ["SELECT sex, race, COUNT(*) FROM people GROUP BY sex, race", QUERIES[4]]
    bs = [b for i, q in enumerate(wide) for b in compile_query(q, CATALOG, label=f"q{i}").blocks if b.terms]
    announced = []
    with recording(announced):
        clique, found = marginal_factorization(DOMAIN, bs, max_iter=3, gap_tol=0.0)
    cells = DOMAIN.size(clique)
    assert cells == 100 * 40 * 2 * 5 * 4 and found.iterations == 3 and found.strategy.shape == (found.rank, cells)
    explicit_step = 0.8 * cells * found.rank**2  # what `optimal_factorization` announces per step on these cells
    assert max(announced[1:]) * 10 < explicit_step


def test_the_family_answers_disconnected_blocks_with_one_strategy_on_their_union():
    bs = blocks()
    family = FactorizationFamily(DOMAIN, "gaussian")
    [allocation] = family.allocate(bs)
    assert allocation.clique == ("sex", "race", "education", "marital", "region")
    assert family.unit_error(bs) < np.inf
