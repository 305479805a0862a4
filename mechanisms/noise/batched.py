"""Exact noise samplers on whole arrays: CKS Algorithms 1-3 as numpy integer kernels.

The algorithms of `mechanisms.noise.exact`, run on every draw of a vector at once, for any
rational parameter. Uniform integers below m come from the RandomSource's 64-bit words by
rejection (exact, not a modulo reduction), and each loop of the scalar code (the
Bernoulli(exp(-gamma)) series, the geometric count, the proposals' rejection) becomes one
loop over the draws still running. Which draws are kept never depends on their values,
so the output is i.i.d. from the exact distribution.

Integers stay in int64 where they fit and become exact Python integers (numpy object
arrays, still one operation per array) where they do not:

- Bernoulli(n/d) for d beyond int64 compares a uniform draw's top 61 bits with n's and
  settles the ties (probability about 2**-60 each) exactly in Python integers;
- series step k of Algorithm 1 draws Bernoulli(n/(d k)) as "j_k = 0 and V < n" with j_k
  uniform below k and V uniform below d, so d k is never formed; j_2 .. j_12 are the
  mixed-radix digits of one uniform draw below 12!;
- the acceptance exponent r**2/d of Algorithm 3 is split into its integer part and
  remainder exactly: a floating-point quotient is only a first guess, corrected in int64
  arithmetic modulo 2**64 (exact because the true remainder is known to lie in int64).

No floating-point number decides a draw. An exponent of 2**40 or more (a proposal some
2**20 standard deviations out) is settled by the scalar code for that one draw.
"""

from __future__ import annotations

import functools

import numpy as np

from mechanisms.noise.exact import GaussianParams
from mechanisms.noise.random_source import RandomSource

__all__ = ["discrete_gaussian_batch", "discrete_laplace_batch", "gaussian_fits"]

_LIMIT = 2**62  # int64 kernels: every integer they form stays below this
_SQUARE_LIMIT = 2**61  # d of an acceptance exponent r**2/d split in int64 (remainders below 2 d)
_EXPONENT_LIMIT = 2**40  # an exponent's integer part from here on: that draw finishes in the scalar code
_DIRECT_ROOT = 2**31  # |r| below this: r**2 in int64 directly
_HIGH_BITS = 61  # Bernoulli(n/d) for d beyond _LIMIT compares this many top bits first
# Acceptance rates used to size each round (proposals drawn per wanted draw = 1/rate; a
# shortfall only costs another round, so they affect speed, never the output): a proposal
# U of Algorithm 2 is kept with probability >= 1 - 1/e; one of Algorithm 3 was measured
# kept 52-54% of the time for t <= 2 and 66-76% for t >= 3.
_LAPLACE_ACCEPTANCE = 0.6
_GAUSSIAN_ACCEPTANCE_SMALL = 0.5
_GAUSSIAN_ACCEPTANCE = 0.64


def gaussian_fits(params: GaussianParams) -> bool:
    """Whether these discrete Gaussian parameters keep the ordinary draws in int64 (the fastest case): the
    acceptance test's a |y| - b for proposals up to 2**12 t, and its denominator d."""
    return params.a * params.t < 2**50 and params.b < 2**61 and params.d <= _SQUARE_LIMIT


# Uniform integers below m are cut from the random words in the smallest of these
# chunk widths with at least 8 bits to spare, so a rejection is rarer than 1 in 256.
_CHUNKS = (np.uint8, np.uint16, np.uint32, np.uint64)


@functools.lru_cache(maxsize=1024)
def _chunking(m: int) -> tuple[type, int, int | None]:
    """(chunk dtype, its bits, the bound a chunk is kept below, or None when every chunk is kept) for m."""
    dtype = next(d for d in _CHUNKS if m << 8 <= 1 << (8 * np.dtype(d).itemsize) or d is np.uint64)
    bits = 8 * np.dtype(dtype).itemsize
    span = 1 << bits
    return dtype, bits, None if span % m == 0 else dtype(span - span % m)


def _below(m: int, size: int, source: RandomSource) -> np.ndarray:
    """`size` uniform integers in [0, m) for 1 <= m <= 2**62 (int64), by rejection.

    A chunk c of b bits is kept iff c < 2**b - (2**b mod m), and then c mod m is uniform.
    """
    if m == 2:  # one bit each
        return np.unpackbits(source.words(-(-size // 64)).view(np.uint8))[:size].astype(np.int64)
    dtype, bits, keep_below = _chunking(m)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        want = size - filled
        chunks = source.words(-(-want * bits // 64)).view(dtype)[:want]
        if keep_below is not None:
            chunks = chunks[chunks < keep_below]
        out[filled : filled + chunks.size] = chunks % dtype(m)
        filled += chunks.size
    return out


def _below_any(m: int, size: int, source: RandomSource) -> np.ndarray:
    """`size` uniform integers in [0, m) for any m >= 1: int64 up to 2**62, exact Python integers beyond."""
    if m <= _LIMIT:
        return _below(m, size, source)
    bits = (m - 1).bit_length()
    words = -(-bits // 64)
    out = np.empty(size, dtype=object)
    filled = 0
    while filled < size:
        want = size - filled
        raw = source.words(want * words).reshape(want, words).astype(object)
        value = raw[:, 0]
        for w in range(1, words):
            value = value * (1 << 64) + raw[:, w]
        value = value >> (64 * words - bits)  # uniform below 2**bits; kept below m (at least half are)
        value = value[value < m]
        out[filled : filled + value.size] = value
        filled += value.size
    return out


def _bernoulli_ratio(n: np.ndarray, d: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(n/d) for each 0 <= n <= d: a uniform V below d, and V < n.

    For d beyond 2**62 only V's top bits are drawn, uniform below d_hi + 1 where
    d_hi = d >> s; a V whose top bits equal n's or d_hi's is finished in Python integers.
    """
    if d <= _LIMIT:
        return _below(d, n.size, source) < n
    s = d.bit_length() - _HIGH_BITS
    d_hi = d >> s
    n_hi = (n >> s).astype(np.int64)
    v_hi = _below(d_hi + 1, n.size, source)
    result = v_hi < n_hi
    for i in np.flatnonzero((v_hi == n_hi) | (v_hi == d_hi)):
        result[i] = _settle_tie(int(v_hi[i]), int(n[i]), d, s, source)
    return result


def _settle_tie(v_hi: int, n: int, d: int, s: int, source: RandomSource) -> bool:
    """V < n given V's top bits v_hi: draw its low s bits; a V at or above d is rejected and drawn afresh."""
    v = (v_hi << s) | source.randbelow(1 << s)
    return v < n if v < d else source.randbelow(d) < n


_FACTORIAL_RUN = 12  # 12! < 2**32: one draw of 4 bytes holds j_2 .. j_12
_FACTORIALS = [1, 1]
for _k in range(2, _FACTORIAL_RUN + 1):
    _FACTORIALS.append(_FACTORIALS[-1] * _k)
# Fewer than this many draws still running: the loops below take several steps per round
# (drawing ahead for steps a draw may never reach), trading random words for fewer numpy calls.
_SMALL = 2048
_STEPS_AHEAD = 6


def _steps(live: int) -> int:
    return _STEPS_AHEAD if live < _SMALL else 1


def _first_nonzero_digit(size: int, source: RandomSource) -> np.ndarray:
    """For `size` runs of j_2, j_3, ... (j_k uniform below k, independent): the first k with j_k != 0.

    For a short vector one U uniform below 12! holds j_2 .. j_12 as its mixed-radix digits,
    so j_2 = .. = j_k = 0 iff k! divides U (a run with all of them 0, chance 1/12!, goes on
    one k at a time); a long one draws j_k round by round.
    """
    first = np.full(size, 2, dtype=np.int64)
    if size < _SMALL:  # all digits from one draw: fewer numpy calls
        u = _below(_FACTORIALS[_FACTORIAL_RUN], size, source).astype(np.uint32)
        divides = u[:, None] % np.array(_FACTORIALS[2 : _FACTORIAL_RUN + 1], dtype=np.uint32) == 0
        first = 2 + np.argmin(divides, axis=1)
        live = np.flatnonzero(divides[:, -1])
        first[live] = _FACTORIAL_RUN + 1
        k = _FACTORIAL_RUN + 1
    else:  # one digit per round: fewer random bytes (j_2 is one bit, and half the runs stop there)
        live = np.flatnonzero(_below(2, size, source) == 0)
        k = 3
    while live.size:
        stop = _below(k, live.size, source) != 0
        first[live] = k
        live = live[~stop]
        k += 1
    return first


def _leading_true(draws: np.ndarray) -> np.ndarray:
    """Per row, how many entries come before its first False (the row's length when none)."""
    return np.where(draws.all(axis=1), draws.shape[1], np.argmin(draws, axis=1))


def _bern_exp_frac(n: np.ndarray, d: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(-n/d)) for each 0 <= n <= d (CKS Algorithm 1): the series run for all at once.

    Step k draws A_k ~ Bernoulli(n/(d k)) as j_k = 0 (j_k uniform below k) and Bernoulli(n/d);
    the result is whether the first failing step is odd.
    """
    result = np.zeros(n.size, dtype=bool)
    go = _bernoulli_ratio(n, d, source)
    result[~go] = True
    live = np.flatnonzero(go)
    j_first = _first_nonzero_digit(live.size, source)  # steps k below it have j_k = 0
    k = 2
    while live.size:
        steps = min(_steps(live.size), _FACTORIAL_RUN + 1 - k) if k <= _FACTORIAL_RUN else 1
        ratio = _bernoulli_ratio(np.repeat(n[live], steps), d, source).reshape(live.size, steps)
        if k <= _FACTORIAL_RUN:
            ok = ratio & (j_first[:, None] > np.arange(k, k + steps))
        else:
            ok = ratio & (_below(k, live.size, source) == 0)[:, None]
        passed = _leading_true(ok)
        ended = passed < steps
        result[live[ended]] = (k + passed[ended]) & 1 == 1  # the first failing step is odd
        live, j_first = live[~ended], j_first[~ended]
        k += steps
    return result


def _bern_exp_one(size: int, source: RandomSource) -> np.ndarray:
    """`size` Bernoulli(exp(-1)) draws: Algorithm 1 with gamma = 1 (A_1 always succeeds, A_k = [j_k = 0] for
    j_k uniform below k), true when the first failing step is odd."""
    return _first_nonzero_digit(size, source) & 1 == 1


def _bern_exp(whole: np.ndarray, rest: np.ndarray, d: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(-(whole + rest/d))) for int64 whole >= 0 and 0 <= rest < d: whole Bernoulli(exp(-1))
    draws, then the rest."""
    alive = np.ones(whole.size, dtype=bool)
    live = np.flatnonzero(whole > 0)
    done = 0
    while live.size:
        steps = _steps(live.size)
        passed = _leading_true(_bern_exp_one(live.size * steps, source).reshape(live.size, steps))
        failed = passed < np.minimum(whole[live] - done, steps)
        alive[live[failed]] = False
        done += steps
        live = live[~failed]
        live = live[whole[live] > done]
    live = np.flatnonzero(alive)
    alive[live] = _bern_exp_frac(rest[live], d, source)
    return alive


def _square_parts(root: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whole, rest, far): root**2 = whole d + rest with 0 <= rest < d, exactly; `far` marks an
    integer part of _EXPONENT_LIMIT or more (whole and rest are then 0 there)."""
    if root.dtype == object or d > _SQUARE_LIMIT:
        square = root.astype(object) ** 2
        whole, rest = square // d, square % d
        far = whole >= _EXPONENT_LIMIT
        whole[far] = 0
        rest[far] = 0
        return whole.astype(np.int64), rest if d > _LIMIT else rest.astype(np.int64), far.astype(bool)
    if not root.size or np.abs(root).max() < _DIRECT_ROOT:
        whole, rest = np.divmod(root * root, d)
        return whole, rest, np.zeros(root.size, dtype=bool)
    guess = np.floor(root.astype(float) ** 2 / float(d))  # off by at most one; corrected exactly below
    far = guess >= _EXPONENT_LIMIT
    whole = np.where(far, 0, guess).astype(np.int64)
    rest = np.where(far, 0, root * root - whole * d)  # exact modulo 2**64, and truly within (-2 d, 2 d)
    while (low := rest < 0).any():
        whole[low] -= 1
        rest[low] += d
    while (high := rest >= d).any():
        whole[high] += 1
        rest[high] -= d
    return whole, rest, far


def _geometric(size: int, source: RandomSource) -> np.ndarray:
    """Number of Bernoulli(exp(-1)) successes before the first failure, `size` times."""
    counts = np.zeros(size, dtype=np.int64)
    live = np.arange(size)
    while live.size:
        steps = _steps(live.size)
        passed = _leading_true(_bern_exp_one(live.size * steps, source).reshape(live.size, steps))
        counts[live] += passed
        live = live[passed == steps]
    return counts


def _laplace_proposals(t: int, s: int, size: int, source: RandomSource) -> np.ndarray:
    """Exactly `size` discrete Laplace(t/s) draws (CKS Algorithm 2): int64, or exact Python integers
    (dtype object) when some draw of a round could leave int64."""
    parts = []
    filled = 0
    while filled < size:
        want = size - filled
        u = _below_any(t, int(want / _LAPLACE_ACCEPTANCE) + 32, source)
        u = u[_bern_exp_frac(u, t, source)]
        v = _geometric(u.size, source)
        negative = _below(2, u.size, source) == 1
        if u.dtype == object or (v.size and int(v.max()) >= _LIMIT // t - 1):
            x = u.astype(object) + t * v.astype(object)  # u + t v could reach 2**62
        else:
            x = u + t * v
        if s != 1:
            x //= s
        keep = ~(negative & (x == 0))
        x[negative] = -x[negative]
        kept = x[keep][:want]
        parts.append(kept)
        filled += kept.size
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _as_output(values: np.ndarray) -> np.ndarray:
    """int64 values, or exact Python integers (dtype object) where some draw is beyond int64."""
    if values.dtype != object:
        return values
    if not values.size or (min(values) >= _INT64_MIN and max(values) <= _INT64_MAX):
        return values.astype(np.int64)
    return values


def discrete_laplace_batch(t: int, s: int, size: int, source: RandomSource) -> np.ndarray:
    """`size` discrete Laplace(t/s) draws for integers t, s >= 1."""
    return _as_output(_laplace_proposals(t, s, size, source))


def discrete_gaussian_batch(params: GaussianParams, size: int, source: RandomSource) -> np.ndarray:
    """`size` discrete Gaussian draws (CKS Algorithm 3)."""
    parts = []
    acceptance = _GAUSSIAN_ACCEPTANCE_SMALL if params.t <= 2 else _GAUSSIAN_ACCEPTANCE
    filled = 0
    while filled < size:
        want = size - filled
        y = _laplace_proposals(params.t, 1, int(want / acceptance) + 32, source)
        magnitude = np.abs(y)
        if y.dtype != object and params.a * int(magnitude.max()) + params.b < _LIMIT:
            root = params.a * magnitude - params.b
        else:
            root = params.a * magnitude.astype(object) - params.b
        whole, rest, far = _square_parts(root, params.d)
        accepted = _bern_exp(whole, rest, params.d, source)
        for i in np.flatnonzero(far):  # an exponent of 2**40 or more: settled in Python integers
            accepted[i] = params.accept(int(y[i]), source.randbelow)
        kept = y[accepted][:want]
        parts.append(kept)
        filled += kept.size
    return _as_output(parts[0] if len(parts) == 1 else np.concatenate(parts))
