"""Released values carry no floating-point trace of the true value (no gaps, no parity patterns)."""

from fractions import Fraction

import numpy as np
from scipy.stats import chisquare

from mechanisms.matrices import Dense
from mechanisms.measurement import measure
from mechanisms.noise import RandomSource

DRAWS = 20_000


def _released(true_counts, row, share, seed):
    """DRAWS independent releases of one query: the same row repeated, measured once."""
    query = Dense(np.repeat(np.asarray([row]), DRAWS, axis=0))
    return measure(true_counts, query, "gaussian", share * DRAWS, RandomSource(seed))[0]


def test_outputs_fill_the_lattice_and_parity_is_balanced():
    query = [0.1, 0.7, 2.5]  # a SUM over decimal bin values: lattice step 1/10
    for counts in (np.array([3, 1, 2]), np.array([3, 1, 3])):  # neighbours: true sums 5.7 and 8.2
        out = _released(counts, query, 0.05, seed=int(counts.sum()))
        units = np.array([Fraction(repr(float(v))) / Fraction(1, 10) for v in out])
        assert all(u.denominator == 1 for u in units)  # every output is exactly on the lattice
        ints = np.array([int(u) for u in units])
        body = ints[np.abs(ints - np.median(ints)) < 2 * ints.std()]
        assert set(range(body.min(), body.max() + 1)) <= set(ints.tolist())  # no gaps in the bulk
        # parity and residues mod 10 carry no information (uniform within chi-square, false alarm 1e-4)
        assert chisquare(np.bincount(ints % 2, minlength=2)).pvalue > 1e-4
        assert chisquare(np.bincount(ints % 10, minlength=10)).pvalue > 1e-4
