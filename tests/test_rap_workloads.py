"""Implicit threshold workloads and their streamed evaluation (mechanisms.rap)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mechanisms.domain import Domain
from mechanisms.rap import BooleanFunction, RecordCounts, Threshold, ThresholdWorkload, random_thresholds
from mechanisms.rap.encoding import OneHot, uniform_relaxed
from mechanisms.rap.evaluation import ThresholdEvaluator
from mechanisms.rap.queries import QuerySet

DOMAIN = Domain(("a", "b", "c", "d"), (3, 4, 2, 5))


@pytest.fixture(scope="module")
def records() -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.stack([rng.integers(0, s, 200) for s in DOMAIN.sizes], axis=1)


def brute_force(threshold: Threshold, records: np.ndarray, relaxed: np.ndarray, encoding: OneHot):
    """Exact counts and D' expectations of every consistent query, by enumeration."""
    shape = DOMAIN.shape(threshold.attributes)
    columns = [DOMAIN.attributes.index(a) for a in threshold.attributes]
    table = threshold.function.table
    exact, synthetic = np.zeros(shape, dtype=np.int64), np.zeros(shape)
    for y in itertools.product(*map(range, shape)):
        hits = records[:, columns] == np.asarray(y)
        masks = (hits * (1 << np.arange(threshold.k))).sum(axis=1)
        exact[y] = sum(table[m] for m in masks)
        z = np.stack([relaxed[:, encoding.block(a)][:, y[j]] for j, a in enumerate(threshold.attributes)], axis=1)
        for mask in range(1 << threshold.k):  # E f(B), B_j ~ Bernoulli(z_j) independent
            p = np.prod([z[:, j] if mask >> j & 1 else 1 - z[:, j] for j in range(threshold.k)], axis=0)
            synthetic[y] += table[mask] * p.mean()
    return exact.ravel(), synthetic.ravel()


THRESHOLDS = [
    Threshold.r_of_k(("a", "b", "d"), 1),
    Threshold.r_of_k(("a", "b", "d"), 2),
    Threshold.r_of_k(("a", "b", "d"), 3),
    *(Threshold.r_of_k(("a", "b", "c", "d"), r) for r in range(1, 5)),
    Threshold.r_of_k(("b",), 1),
    Threshold(("a", "c", "d"), BooleanFunction.of(3, lambda m: (m & 1 and not m & 2) or m & 4)),
]


@pytest.mark.parametrize("threshold", THRESHOLDS, ids=lambda t: f"{t.attributes}-{t.function.table}")
def test_tiles_match_brute_force(threshold, records):
    encoding = OneHot(DOMAIN)
    relaxed = uniform_relaxed(7, encoding, seed=1, dtype=np.float64)
    exact, synthetic = brute_force(threshold, records, relaxed, encoding)
    ev = ThresholdEvaluator(threshold, DOMAIN.shape(threshold.attributes), tile=5)
    ev.attach(RecordCounts(DOMAIN, records).marginals([threshold.attributes])[threshold.attributes])
    seen = np.zeros(exact.size, dtype=int)
    got_exact, got_synthetic = np.zeros(exact.size, dtype=np.int64), np.zeros(exact.size)
    for tile, values in ev.synthetic(relaxed, encoding):
        ids = tile.local_ids()
        assert ids.size <= 5
        seen[ids] += 1
        got_exact[ids] = ev.exact_tile(tile).ravel()
        got_synthetic[ids] = values.ravel()
    assert np.all(seen == 1)  # the tiles partition the consistent queries
    assert np.array_equal(got_exact, exact)
    np.testing.assert_allclose(got_synthetic, synthetic, atol=1e-12)
    picked = np.arange(0, exact.size, 3)
    assert np.array_equal(ev.exact(picked), exact[picked])
    # the explicit surrogates RP fits give the same answers
    queries = QuerySet(encoding)
    positions = queries.add_threshold(threshold, np.stack(np.unravel_index(picked, ev.shape), axis=1))
    np.testing.assert_allclose(queries.answers(relaxed)[positions], synthetic[picked], atol=1e-12)


@pytest.mark.parametrize("threshold", THRESHOLDS[:3], ids=["1-of-3", "2-of-3", "3-of-3"])
def test_surrogates_are_exact_on_one_hot_data(threshold, records):
    """The EEDQ property: on the one-hot encoding of D (n' = n rows), surrogates give exact answers."""
    encoding = OneHot(DOMAIN)
    ev = ThresholdEvaluator(threshold, DOMAIN.shape(threshold.attributes), tile=16)
    ev.attach(RecordCounts(DOMAIN, records).marginals([threshold.attributes])[threshold.attributes])
    for tile, values in ev.synthetic(encoding.encode(records), encoding):
        np.testing.assert_allclose(values * len(records), ev.exact_tile(tile), atol=1e-9)


def test_sparse_top_marginal_is_used_for_large_cliques(records, monkeypatch):
    monkeypatch.setattr("mechanisms.rap.evaluation.DENSE_LIMIT", 10)
    threshold = Threshold.r_of_k(("a", "b", "d"), 2)
    encoding = OneHot(DOMAIN)
    exact, _ = brute_force(threshold, records, uniform_relaxed(3, encoding, 0, np.float64), encoding)
    ev = ThresholdEvaluator(threshold, DOMAIN.shape(threshold.attributes), tile=7)
    ev.attach(RecordCounts(DOMAIN, records).marginals([threshold.attributes])[threshold.attributes])
    assert (1 << 3) - 1 not in ev._dense
    got = np.zeros(exact.size, dtype=np.int64)
    for tile in ev.tiles(3):
        got[tile.local_ids()] = ev.exact_tile(tile).ravel()
    assert np.array_equal(got, exact)
    assert np.array_equal(ev.exact(np.arange(exact.size)), exact)


def test_workload_is_implicit():
    """3 x 10^8 queries are counted and addressed without enumerating them."""
    domain = Domain(tuple(f"x{i}" for i in range(6)), (100,) * 6)
    workload = ThresholdWorkload(domain, random_thresholds(domain, 3, 4, 2, seed=0))
    assert workload.n_queries == 3 * 10**8
    ids = np.asarray([0, 10**8 - 1, 10**8, 2 * 10**8 + 12345, 3 * 10**8 - 1])
    which, local = workload.locate(ids)
    assert which.tolist() == [0, 0, 1, 2, 2]
    targets = workload.targets(2, local[3:4])
    assert np.ravel_multi_index(tuple(targets.T), workload.shapes[2])[0] == 12345
    with pytest.raises(IndexError):
        workload.locate(np.asarray([3 * 10**8]))


def test_streamed_scan_of_ten_million_queries():
    """A 2 x 10^7-query marginal is evaluated tile by tile; its answers sum to 1 and to n."""
    domain = Domain(("a", "b", "c", "d"), (80, 50, 50, 100))
    rng = np.random.default_rng(3)
    records = np.stack([rng.integers(0, s, 1000) for s in domain.sizes], axis=1)
    threshold = Threshold.r_of_k(domain.attributes, 4)
    ev = ThresholdEvaluator(threshold, domain.shape(domain.attributes), tile=1 << 20)
    ev.attach(RecordCounts(domain, records).marginals([domain.attributes])[domain.attributes])
    encoding = OneHot(domain)
    relaxed = uniform_relaxed(4, encoding, seed=0, dtype=np.float64)
    total_synthetic, total_exact, count = 0.0, 0, 0
    for tile, values in ev.synthetic(relaxed, encoding):
        assert values.size <= 1 << 20
        total_synthetic += float(values.sum())
        total_exact += int(ev.exact_tile(tile).sum())
        count += values.size
    assert count == 2 * 10**7
    assert total_exact == 1000
    assert total_synthetic == pytest.approx(1.0, rel=1e-9)


def test_random_thresholds_are_distinct_and_in_domain_order():
    ts = random_thresholds(DOMAIN, 4, 2, 1, seed=5)
    assert len({t.attributes for t in ts}) == 4
    assert all(DOMAIN.canonical(t.attributes) == t.attributes for t in ts)
    with pytest.raises(ValueError):
        random_thresholds(DOMAIN, 7, 2, 1, seed=0)
