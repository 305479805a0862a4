"""All k-way marginals planned by size class: the same plans as row by row, in memory independent of d."""

from __future__ import annotations

import tracemalloc
from itertools import combinations, product

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.interruption import recording
from mechanisms.marginal_classes import all_k_way
from mechanisms.residual import ResidualTable, marginal_bundle_plan, max_variance_plan, sum_variance_plan, svd_bound

# sizes repeat (classes of 1 to 3 attributes), one attribute of a single value (no residual)
MIXED = Domain.from_dict({"a": 3, "b": 5, "c": 3, "d": 1, "e": 2, "f": 5, "g": 3, "h": 2, "i": 4})


def _members(table, attributes) -> list[tuple[str, ...]]:
    domain = table.domain
    by_size: dict[int, list[str]] = {}
    for a in attributes:
        by_size.setdefault(domain.size_of(a), []).append(a)
    return [tuple(by_size[n]) for n in table.class_sizes.tolist()]


def _expand(table, types, attributes) -> dict[tuple[str, ...], int]:
    """Every clique of each class' type -> its class row."""
    members = _members(table, attributes)
    out = {}
    for row, t in enumerate(types.tolist()):
        for pick in product(*(combinations(m, x) for m, x in zip(members, t))):
            out[table.domain.canonical(a for part in pick for a in part)] = row
    return out


CASES = [
    ((1, 2, 3), None, None),
    ((1, 2, 3), (1.0, 2.5, 0.7), None),
    ((0, 2), (3.0, 0.5), None),
    ((2, 3), (1.0, 4.0), ("a", "b", "c", "d", "f", "i")),
    ((4,), None, None),
]


@pytest.mark.parametrize("ways,weights,attributes", CASES)
def test_classes_plan_exactly_what_rows_plan(ways, weights, attributes):
    attrs = MIXED.attributes if attributes is None else attributes
    c = [1.0] * len(ways) if weights is None else weights
    rows = ResidualTable.from_marginals(MIXED, [(q, w) for k, w in zip(ways, c) for q in combinations(attrs, k)])
    classes = all_k_way(MIXED, ways, weights, attributes)
    assert len(classes.weight) < len(rows.weight)

    # the same residuals, each with its class' A_S, p_S, m_S; the same marginals, counted
    residual_class = _expand(classes, classes.types, attrs)
    assert sorted(residual_class) == sorted(rows.residuals)
    at = np.asarray([residual_class[s] for s in rows.residuals])
    assert classes.count.sum() == len(rows.weight)
    np.testing.assert_array_equal(np.bincount(at, minlength=len(classes.count)), classes.count)
    for column in ("weight", "cost", "dims"):
        np.testing.assert_allclose(getattr(classes, column)[at], getattr(rows, column), rtol=1e-13, atol=0)
    marginal_class = _expand(classes, classes.marginal_types, attrs)
    assert sorted(marginal_class) == sorted(rows.marginals)
    q = np.asarray([marginal_class[m] for m in rows.marginals])
    np.testing.assert_array_equal(classes.cells[q], rows.cells)
    np.testing.assert_array_equal(classes.marginal_weights[q], rows.marginal_weights)
    assert classes.queries() == rows.queries()

    # the sum-of-variance plan and its errors
    by_rows, by_classes = sum_variance_plan(rows, 0.5), sum_variance_plan(classes, 0.5)
    np.testing.assert_allclose(by_classes.variance[at], by_rows.variance, rtol=1e-13, atol=0)
    np.testing.assert_allclose(by_classes.share[at], by_rows.share, rtol=1e-13, atol=0)
    assert by_classes.share @ classes.count == pytest.approx(0.5, rel=1e-14)
    assert by_classes.total_squared_error == pytest.approx(by_rows.total_squared_error, rel=1e-13)
    assert by_classes.rmse() == pytest.approx(by_rows.rmse(), rel=1e-13)
    assert svd_bound(classes) == pytest.approx(svd_bound(rows), rel=1e-13)
    np.testing.assert_allclose(by_classes.cell_variances()[q], by_rows.cell_variances(), rtol=1e-13, atol=0)

    # the max-variance plan: the same iterations (equal within classes), the same certificate
    (worst_rows, gap_rows), (worst_classes, gap_classes) = max_variance_plan(rows, 0.5), max_variance_plan(classes, 0.5)
    np.testing.assert_allclose(worst_classes.variance[at], worst_rows.variance, rtol=1e-9, atol=0)
    np.testing.assert_allclose(worst_classes.cell_variances()[q], worst_rows.cell_variances(), rtol=1e-9, atol=0)
    assert gap_classes == pytest.approx(gap_rows, rel=1e-6, abs=1e-12)


def test_reference_value_at_a_hundred_attributes():
    """ResidualPlanner's 100 attributes of size 10, all ≤3-way: RMSE 303.2 (as row by row)."""
    domain = Domain.from_dict({f"x{i}": 10 for i in range(100)})
    assert round(sum_variance_plan(all_k_way(domain, (1, 2, 3)), 0.5).rmse(), 1) == 303.2


@pytest.mark.parametrize("d", [300, 1000])
def test_planning_memory_and_work_do_not_grow_with_the_attributes(d):
    """All ≤3-way marginals of d attributes (4.5M at d = 300, 167M at d = 1000): a handful of classes, under
    a megabyte of allocations (row by row: 950 MB at d = 300), the same work announced at every d (the
    max-variance rounds aside: their number depends on the sizes, each announces the same)."""
    announced: list[float] = []
    tracemalloc.start()
    try:
        with recording(announced):
            table = _planned(d)
        worst, _ = max_variance_plan(table, 0.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert table.marginal_count.sum() == d + d * (d - 1) // 2 + d * (d - 1) * (d - 2) // 6
    assert len(table.weight) == 4 and table.count.sum() == table.marginal_count.sum() + 1
    assert table.per_cell.nnz == table.per_cell_dual.nnz == 2 + 3 + 4  # (marginal, subset) classes
    small: list[float] = []
    with recording(small):
        _planned(50)
    assert announced == small
    assert worst.cell_variances().max() <= sum_variance_plan(table, 0.5).cell_variances().max()


def _planned(d: int):
    """The class table of all ≤3-way marginals of d attributes of 10 values, its per-cell matrices built."""
    table = all_k_way(Domain.from_dict({f"x{i}": 10 for i in range(d)}), (1, 2, 3))
    sum_variance_plan(table, 0.5).cell_variances()
    table.per_cell_dual
    return table


def test_bad_workloads_are_refused():
    for ways, weights in [((1, 1), None), ((-1,), None), ((1, 2), (1.0,)), ((2,), (0.0,))]:
        with pytest.raises(ValueError):
            all_k_way(MIXED, ways, weights)
    with pytest.raises(KeyError):
        all_k_way(MIXED, (1,), attributes=("a", "zz"))
    with pytest.raises(ValueError, match="a row per residual"):  # it would read a class as one residual
        marginal_bundle_plan(all_k_way(MIXED, (1, 2)), [("a", "b")])
