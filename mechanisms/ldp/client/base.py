"""Exact dyadic probabilities, bit helpers and the `Protocol` every client randomizer is."""

from __future__ import annotations

import dataclasses
import math
import secrets
from fractions import Fraction
from random import Random
from typing import ClassVar


_BITS = 53
_ONE = 1 << _BITS
_SLACK = 8  # grid steps (of 2⁻⁵³) kept between a rounded probability and its float value
_SYSTEM = secrets.SystemRandom()
HASH_PRIME = (1 << 31) - 1  # OLH's Carter–Wegman hashes ((a·x + b) mod P) mod g


def below(x: float) -> Fraction:
    """The dyadic t/2⁵³ just below x (never above it, whatever the float error in x)."""
    return Fraction(max(0, math.floor(x * _ONE) - _SLACK), _ONE)


def above(x: float) -> Fraction:
    """The dyadic t/2⁵³ just above x."""
    return Fraction(min(_ONE, math.ceil(x * _ONE) + _SLACK), _ONE)


def bernoulli(p: Fraction, rng) -> bool:
    """True with probability exactly p (a multiple of 2⁻⁵³)."""
    return rng.getrandbits(_BITS) < p * _ONE


def rr_truth(epsilon: float) -> Fraction:
    """Binary randomized response's probability of the true bit, e^ε/(1+e^ε) rounded down (Lemma 1)."""
    return below(1 / (1 + math.exp(-epsilon)))


def parity(x: int) -> int:
    """±1 = (−1)^popcount(x): a Hadamard character χ_α(z) is parity(α & z)."""
    return -1 if x.bit_count() & 1 else 1


def compact(record: int, mask: int) -> int:
    """The bits of `record` at the set positions of `mask`, packed low to high (a marginal's cell)."""
    cell, r = 0, 0
    while mask:
        low = mask & -mask
        cell |= (1 if record & low else 0) << r
        mask ^= low
        r += 1
    return cell


def expand(cell: int, mask: int) -> int:
    """The inverse of `compact`: the cell's bits placed at the set positions of `mask`."""
    out, r = 0, 0
    while mask:
        low = mask & -mask
        if cell >> r & 1:
            out |= low
        mask ^= low
        r += 1
    return out


def _random_subset(size: int, universe: int, rng) -> int:
    """A uniformly random `size`-subset of range(universe), as a bit mask."""
    return sum(1 << i for i in rng.sample(range(universe), size))


def _check_epsilon(epsilon: float) -> None:
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive finite number, not {epsilon!r}")


def _check_size(name: str, value: int, least: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, not {value!r}")


@dataclasses.dataclass(frozen=True)
class Protocol:
    """A randomizer: `report(value)` is one user's row; `probability` is its exact law."""

    name: ClassVar[str]
    epsilon: float

    def __post_init__(self):
        _check_epsilon(self.epsilon)

    @property
    def values(self) -> int:
        """The number of possible user values (they are 0 .. values − 1)."""
        raise NotImplementedError

    def report(self, value: int, rng: Random | None = None) -> dict:
        """One user's report row: protocol, public parameters and the randomized payload."""
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < self.values:
            raise ValueError(f"{self.name}: value must be an integer in [0, {self.values}), not {value!r}")
        return {"protocol": self.name, **dataclasses.asdict(self),
                "payload": self.randomize(value, rng or _SYSTEM)}

    def randomize(self, value: int, rng) -> dict:
        raise NotImplementedError

    def probability(self, payload: dict, value: int) -> Fraction:
        """The exact probability that `randomize(value)` returns `payload`."""
        raise NotImplementedError


def _sign_probability(truth: Fraction, bit: int, sign: int) -> Fraction:
    return truth if bit == sign else 1 - truth


def _flip(sign: int, truth: Fraction, rng) -> int:
    return sign if bernoulli(truth, rng) else -sign


