"""Exact noise samplers on whole arrays: CKS Algorithms 1-3 as numpy integer kernels.

The algorithms of `mechanisms.noise.exact`, run on every draw of a vector at once.
Uniform integers below m come from the RandomSource's 64-bit words by rejection
(exact, not a modulo reduction), and each loop of the scalar code (the
Bernoulli(exp(-gamma)) series, the geometric count, the proposals' rejection) becomes
one loop over the draws still running. Which draws are kept never depends on their
values, so the output is i.i.d. from the exact distribution.

Integers stay below 2**62. Parameters that do not allow that (a rational with a huge
numerator or denominator) use the scalar samplers for the whole vector; a single draw
that outgrows int64 (a far tail) finishes in the scalar code with Python integers.
"""

from __future__ import annotations

import numpy as np

from mechanisms.noise import exact
from mechanisms.noise.exact import GaussianParams
from mechanisms.noise.random_source import RandomSource

__all__ = ["discrete_gaussian_batch", "discrete_laplace_batch", "gaussian_fits", "laplace_fits"]

_LIMIT = 2**62  # every integer the kernels form stays below this
# Acceptance rates used to size each round (proposals drawn per wanted draw = 1/rate; a
# shortfall only costs another round, so they affect speed, never the output): a proposal
# U of Algorithm 2 is kept with probability >= 1 - 1/e; one of Algorithm 3 was measured
# kept 52-54% of the time for t <= 2 and 66-76% for t >= 3.
_LAPLACE_ACCEPTANCE = 0.6
_GAUSSIAN_ACCEPTANCE_SMALL = 0.5
_GAUSSIAN_ACCEPTANCE = 0.64
_SQUARE_ROOT_LIMIT = 2**31  # |a y - b| below this keeps its square below _LIMIT
_PARAMETER_LIMIT = 2**40  # t (both samplers), a and the Laplace s below this
_DENOMINATOR_LIMIT = 2**56  # d below this: the series index k may reach 64 before a fallback


def laplace_fits(t: int, s: int) -> bool:
    """Whether scale t/s runs in the int64 kernels."""
    return t < _PARAMETER_LIMIT and s < _PARAMETER_LIMIT


def gaussian_fits(params: GaussianParams) -> bool:
    """Whether these discrete Gaussian parameters run in the int64 kernels."""
    return (
        params.t < _PARAMETER_LIMIT
        and params.a < _PARAMETER_LIMIT
        and params.b < _SQUARE_ROOT_LIMIT
        and params.d < _DENOMINATOR_LIMIT
    )


# Uniform integers below m are cut from the random words in the smallest of these
# chunk widths with at least 8 bits to spare, so a rejection is rarer than 1 in 256.
_CHUNKS = (np.uint8, np.uint16, np.uint32, np.uint64)


def _below(m: int, size: int, source: RandomSource) -> np.ndarray:
    """`size` uniform integers in [0, m) for 1 <= m < 2**62, by rejection.

    A chunk c of b bits is kept iff c < 2**b - (2**b mod m), and then c mod m is uniform.
    """
    if m == 2:  # one bit each
        return np.unpackbits(source.words(-(-size // 64)).view(np.uint8))[:size].astype(np.int64)
    dtype = next(d for d in _CHUNKS if m << 8 <= 1 << (8 * np.dtype(d).itemsize) or d is np.uint64)
    bits = 8 * np.dtype(dtype).itemsize
    span = 1 << bits
    keep_below = span - span % m
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        want = size - filled
        chunks = source.words(-(-want * bits // 64)).view(dtype)[:want]
        if keep_below < span:
            chunks = chunks[chunks < dtype(keep_below)]
        out[filled : filled + chunks.size] = chunks % dtype(m)
        filled += chunks.size
    return out


def _bern_exp_frac(n: np.ndarray, d: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(-n/d)) for each 0 <= n <= d (CKS Algorithm 1): the series run for all at once."""
    result = np.zeros(n.size, dtype=bool)  # a first failure at odd k is True
    go = _below(d, n.size, source) < n
    result[~go] = True
    live = np.flatnonzero(go)
    k = 2
    while live.size:
        if d * k >= _LIMIT:
            for i in live:
                result[i] = exact._bern_exp_frac(int(n[i]), d, source.randbelow, k)
            break
        go = _below(d * k, live.size, source) < n[live]
        result[live[~go]] = k & 1 == 1
        live = live[go]
        k += 1
    return result


def _bern_exp_one(size: int, source: RandomSource) -> np.ndarray:
    """`size` Bernoulli(exp(-1)) draws: Algorithm 1 with gamma = 1 (A_1 always succeeds)."""
    result = np.zeros(size, dtype=bool)  # a first failure at k = 2 is False
    live = np.flatnonzero(_below(2, size, source) == 0)
    k = 3
    while live.size:
        go = _below(k, live.size, source) == 0
        result[live[~go]] = k & 1 == 1
        live = live[go]
        k += 1
    return result


def _bern_exp(n: np.ndarray, d: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(-n/d)) for each n >= 0: floor(n/d) Bernoulli(exp(-1)) draws, then the rest."""
    whole, rest = np.divmod(n, d)
    alive = np.ones(n.size, dtype=bool)
    live = np.flatnonzero(whole > 0)
    done = 0
    while live.size:
        ok = _bern_exp_one(live.size, source)
        alive[live[~ok]] = False
        done += 1
        live = live[ok]
        live = live[whole[live] > done]
    live = np.flatnonzero(alive)
    alive[live] = _bern_exp_frac(rest[live], d, source)
    return alive


def _geometric(size: int, source: RandomSource) -> np.ndarray:
    """Number of Bernoulli(exp(-1)) successes before the first failure, `size` times."""
    counts = np.zeros(size, dtype=np.int64)
    live = np.flatnonzero(_bern_exp_one(size, source))
    while live.size:
        counts[live] += 1
        live = live[_bern_exp_one(live.size, source)]
    return counts


def _laplace_proposals(t: int, s: int, size: int, source: RandomSource) -> tuple[np.ndarray, dict[int, int]]:
    """Exactly `size` discrete Laplace(t/s) draws (CKS Algorithm 2).

    Returns int64 values and, for a draw too large for int64, its Python integer by
    position (the int64 slot then holds 0).
    """
    out = np.empty(size, dtype=np.int64)
    big: dict[int, int] = {}
    filled = 0
    while filled < size:
        want = size - filled
        u = _below(t, int(want / _LAPLACE_ACCEPTANCE) + 32, source)
        u = u[_bern_exp_frac(u, t, source)]
        v = _geometric(u.size, source)
        negative = _below(2, u.size, source) == 1
        overflow = v >= _LIMIT // t - 1  # u + t v would reach 2**62: finished in Python integers below
        if overflow.any():
            exact_x = {int(i): (int(u[i]) + t * int(v[i])) // s for i in np.flatnonzero(overflow)}
            v[overflow] = 0
        else:
            exact_x = {}
        x = u + t * v
        if s != 1:
            x //= s
        keep = ~(negative & (x == 0))
        for i, value in exact_x.items():  # never zero: v is huge
            keep[i] = True
        np.negative(x, out=x, where=negative)
        positions = np.flatnonzero(keep)[:want]
        out[filled : filled + positions.size] = x[positions]
        for i, value in exact_x.items():
            j = int(np.searchsorted(positions, i))
            if j < positions.size and positions[j] == i:
                big[filled + j] = -value if negative[i] else value
        filled += positions.size
    return out, big


def _as_output(values: np.ndarray, big: dict[int, int]) -> np.ndarray:
    """int64 values, or exact Python integers (dtype object) where some draw outgrew int64."""
    if not big:
        return values
    out = values.astype(object)
    for i, value in big.items():
        out[i] = value
    return out


def discrete_laplace_batch(t: int, s: int, size: int, source: RandomSource) -> np.ndarray:
    """`size` discrete Laplace(t/s) draws; needs `laplace_fits(t, s)`."""
    return _as_output(*_laplace_proposals(t, s, size, source))


def discrete_gaussian_batch(params: GaussianParams, size: int, source: RandomSource) -> np.ndarray:
    """`size` discrete Gaussian draws (CKS Algorithm 3); needs `gaussian_fits(params)`."""
    out = np.empty(size, dtype=np.int64)
    big: dict[int, int] = {}
    fits_below = (_SQUARE_ROOT_LIMIT - params.b) // params.a  # |y| below this: |a y - b| < 2**31
    acceptance = _GAUSSIAN_ACCEPTANCE_SMALL if params.t <= 2 else _GAUSSIAN_ACCEPTANCE
    filled = 0
    while filled < size:
        want = size - filled
        y, proposed_big = _laplace_proposals(params.t, 1, int(want / acceptance) + 32, source)
        magnitude = np.abs(y)
        fits = magnitude < fits_below
        fits[list(proposed_big)] = False
        if fits.all():
            root = params.a * magnitude - params.b
            accepted = _bern_exp(root * root, params.d, source)
        else:  # a far tail: its acceptance test in Python integers
            accepted = np.empty(y.size, dtype=bool)
            root = params.a * magnitude[fits] - params.b
            accepted[fits] = _bern_exp(root * root, params.d, source)
            for i in np.flatnonzero(~fits):
                accepted[i] = params.accept(proposed_big.get(int(i), int(y[i])), source.randbelow)
        positions = np.flatnonzero(accepted)[:want]
        out[filled : filled + positions.size] = y[positions]
        for i, value in proposed_big.items():
            j = int(np.searchsorted(positions, i))
            if j < positions.size and positions[j] == i:
                big[filled + j] = value
        filled += positions.size
    return _as_output(out, big)
