"""Released values carry no floating-point trace of the true value (no gaps, no parity patterns).

For both samplers, a SUM over decimal bin values (lattice step γ = 1/10) is released
DRAWS times on two neighbouring tables. Every output must be exactly γ × an integer,
the integers must fill the bulk of the distribution without gaps, their parity and
residues mod 10 must be uniform, and output/γ − (true answer)/γ must follow the
exact discrete Gaussian or Laplace distribution of the calibrated scale: the released
value is the true value plus exact lattice noise and nothing else. Seeds are fixed;
each chi-square test would fail a correct release with probability 1e-4.
"""

from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from mechanisms.matrices import Dense
from mechanisms.measurement import measure
from mechanisms.noise import RandomSource
from tests.test_noise import assert_fits, gaussian_pmf, laplace_pmf

DRAWS = 20_000
QUERY = [0.1, 0.7, 2.5]  # a SUM over decimal bin values: lattice step 1/10
STEP = Fraction(1, 10)
SHARES = {"gaussian": 0.05, "laplace": 0.5}  # ρ and ε of one release


def _released(true_counts, kind, seed):
    """DRAWS independent releases of one query (the row repeated, measured once at DRAWS times the share),
    as exact multiples of the lattice step, with the calibration used."""
    query = Dense(np.repeat(np.asarray([QUERY]), DRAWS, axis=0))
    out, cal = measure(true_counts, query, kind, SHARES[kind] * DRAWS, RandomSource(seed))
    units = [Fraction(repr(float(v))) / STEP for v in out]
    assert all(u.denominator == 1 for u in units)  # every output is exactly on the lattice
    return np.array([int(u) for u in units]), cal


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_outputs_fill_the_lattice_and_parity_is_balanced(kind):
    for counts in (np.array([3, 1, 2]), np.array([3, 1, 3])):  # neighbours: true sums 5.7 and 8.2
        ints, cal = _released(counts, kind, seed=int(counts.sum()))
        assert cal.granularity == STEP
        exact = int(Fraction(repr(float(np.dot(QUERY, counts)))) / STEP)
        noise = ints - exact
        xs, pmf = gaussian_pmf(float(cal.scale)) if kind == "gaussian" else laplace_pmf(float(cal.scale))
        assert_fits(noise, xs, pmf)  # exactly the calibrated lattice noise around the true value
        body = ints[np.abs(ints - np.median(ints)) < noise.std()]
        assert set(range(body.min(), body.max() + 1)) <= set(ints.tolist())  # no gaps in the bulk
        # parity and residues mod 10 carry no information (uniform within chi-square, false alarm 1e-4)
        assert chisquare(np.bincount(ints % 2, minlength=2)).pvalue > 1e-4
        assert chisquare(np.bincount(ints % 10, minlength=10)).pvalue > 1e-4
