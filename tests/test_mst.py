"""MST: exact accounting, a spanning tree of compressed 2-way measurements."""

import math

import networkx as nx
import numpy as np

from mechanisms.mst import compression, mst
from mechanisms.noise import RandomSource
from tests.test_aim import DOMAIN, counts


def test_compression_merges_values_below_three_sigma():
    assert compression(np.array([50.0, 40.0]), 10.0) is None
    k = compression(np.array([50.0, 2.0, 40.0, -3.0]), 10.0)
    np.testing.assert_array_equal(k, [[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1]])


def test_mst_measures_a_spanning_tree_and_charges_its_budget_exactly():
    rho = 0.1 / 3
    result = mst(DOMAIN, counts, rho, RandomSource(4), max_iters=300, tol=1e-4)
    assert sum(m.cost for m in result.measurements) == rho == result.rho
    assert math.fsum([result.selection_rho, result.measurement_rho]) == rho
    tree = nx.Graph(result.edges)
    assert tree.number_of_edges() == len(DOMAIN) - 1 and nx.is_tree(tree)
    assert set(tree.nodes) == set(DOMAIN.attributes)
    pairs = [m for m in result.measurements if len(m.clique) == 2]
    assert [m.clique for m in pairs] == result.edges
    assert all(m.strategy is not None for m in pairs)
    # the model reproduces its measured 1-way marginals closely
    for a in DOMAIN.attributes:
        assert np.abs(result.model.project((a,)) - counts((a,))).sum() < 0.2 * counts((a,)).sum()
