"""Frequency oracles over a domain [D] (LDP thesis §2.4.2, §4.7): rr, grr, oue, sue, olh, hrr."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import ClassVar

from .base import HASH_PRIME, below, above, bernoulli, rr_truth, parity, _check_size, Protocol, _sign_probability, _flip


@dataclasses.dataclass(frozen=True)
class RandomizedResponse(Protocol):
    """`rr`: one bit, reported truthfully with probability e^ε/(1+e^ε) (§2.4.1)."""

    name: ClassVar[str] = "rr"

    @property
    def values(self) -> int:
        return 2

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(P[report 1 | bit 1], P[report 1 | bit 0])."""
        p = rr_truth(self.epsilon)
        return p, 1 - p

    def randomize(self, value, rng):
        return {"bit": value if bernoulli(rr_truth(self.epsilon), rng) else 1 - value}

    def probability(self, payload, value):
        p = rr_truth(self.epsilon)
        return p if payload["bit"] == value else 1 - p


@dataclasses.dataclass(frozen=True)
class DirectEncoding(Protocol):
    """`grr`: k-ary randomized response, the true value with p = e^ε/(e^ε+D−1), else another uniformly."""

    name: ClassVar[str] = "grr"
    domain: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("domain", self.domain, 2)

    @property
    def values(self) -> int:
        return self.domain

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(p, q): P[report j | value j] and P[report j | value ≠ j]."""
        p = below(1 / (1 + (self.domain - 1) * math.exp(-self.epsilon)))
        return p, (1 - p) / (self.domain - 1)

    def randomize(self, value, rng):
        if bernoulli(self.support_probabilities[0], rng):
            return {"value": value}
        other = rng.randrange(self.domain - 1)
        return {"value": other + (other >= value)}

    def probability(self, payload, value):
        p, q = self.support_probabilities
        return p if payload["value"] == value else q


@dataclasses.dataclass(frozen=True)
class UnaryEncoding(Protocol):
    """Unary encoding: bit j of the one-hot vector is reported 1 w.p. p if j is the value, q if not."""

    domain: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("domain", self.domain, 2)

    @property
    def values(self) -> int:
        return self.domain

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        raise NotImplementedError

    def randomize(self, value, rng):
        p, q = self.support_probabilities
        return {"ones": [j for j in range(self.domain) if bernoulli(p if j == value else q, rng)]}

    def probability(self, payload, value):
        p, q = self.support_probabilities
        ones = set(payload["ones"])
        k, d = len(ones), self.domain
        if value in ones:
            return p * q ** (k - 1) * (1 - q) ** (d - k)
        return (1 - p) * q ** k * (1 - q) ** (d - k - 1)


@dataclasses.dataclass(frozen=True)
class OptimizedUnaryEncoding(UnaryEncoding):
    """`oue`: p = 1/2, q = 1/(1+e^ε), the variance-optimal choice (eq. 2.7)."""

    name: ClassVar[str] = "oue"

    @property
    def support_probabilities(self):
        return Fraction(1, 2), above(1 / (1 + math.exp(self.epsilon)))


@dataclasses.dataclass(frozen=True)
class SymmetricUnaryEncoding(UnaryEncoding):
    """`sue`: p = e^(ε/2)/(1+e^(ε/2)) = 1 − q, ε/2-RR on every bit (eq. 2.6; INPRR's perturbation)."""

    name: ClassVar[str] = "sue"

    @property
    def support_probabilities(self):
        p = rr_truth(self.epsilon / 2)
        return p, 1 - p


@dataclasses.dataclass(frozen=True)
class LocalHashing(Protocol):
    """`olh`: hash the value into [g], g = round(e^ε + 1), with a random Carter–Wegman hash; GRR over [g].

    The hash is x ↦ ((a·x + b) mod P) mod g, P = 2³¹ − 1, a ∈ [1, P), b ∈ [0, P) uniform: for x ≠ y the
    pair of residues is uniform over distinct pairs, so the collision probability is the same exact
    constant `collision` for every pair and the aggregator's unbiasing is exact.
    """

    name: ClassVar[str] = "olh"
    domain: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("domain", self.domain, 2)
        if self.domain > HASH_PRIME:
            raise ValueError(f"olh: domain must be at most {HASH_PRIME}")

    @property
    def values(self) -> int:
        return self.domain

    @property
    def range(self) -> int:
        """g, the hash range."""
        return max(2, math.floor(math.exp(self.epsilon) + 1.5))

    @property
    def truth(self) -> Fraction:
        """GRR's truth probability over [g], e^ε/(e^ε + g − 1)."""
        return below(1 / (1 + (self.range - 1) * math.exp(-self.epsilon)))

    @property
    def collision(self) -> Fraction:
        """P[H(x) = H(y)] for x ≠ y over the hash family."""
        g, P = self.range, HASH_PRIME
        Q, r = divmod(P, g)
        return Fraction(r * (Q + 1) * Q + (g - r) * Q * (Q - 1), P * (P - 1))

    @property
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """(P[report supports j | value j], P[report supports j | value ≠ j])."""
        p, c, g = self.truth, self.collision, self.range
        return p, p * c + (1 - p) * (1 - c) / (g - 1)

    def hash(self, a: int, b: int, x: int) -> int:
        return (a * x + b) % HASH_PRIME % self.range

    def randomize(self, value, rng):
        a, b = 1 + rng.randrange(HASH_PRIME - 1), rng.randrange(HASH_PRIME)
        h = self.hash(a, b, value)
        if bernoulli(self.truth, rng):
            y = h
        else:
            other = rng.randrange(self.range - 1)
            y = other + (other >= h)
        return {"a": a, "b": b, "y": y}

    def probability(self, payload, value):
        seed = Fraction(1, (HASH_PRIME - 1) * HASH_PRIME)
        if payload["y"] == self.hash(payload["a"], payload["b"], value):
            return seed * self.truth
        return seed * (1 - self.truth) / (self.range - 1)


@dataclasses.dataclass(frozen=True)
class HadamardResponse(Protocol):
    """`hrr`: a uniformly sampled non-zero Hadamard coefficient χ_k(z) of [D'] (D' = 2^⌈log₂D⌉), by RR.

    Payload (index k ∈ [1, D'), bit ±1); §4.7's HRR₁, i.e. INPHT (Algorithm 1) with k = log₂D'.
    """

    name: ClassVar[str] = "hrr"
    domain: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("domain", self.domain, 2)

    @property
    def values(self) -> int:
        return self.domain

    @property
    def size(self) -> int:
        """D', the padded power-of-two domain."""
        return 1 << (self.domain - 1).bit_length()

    @property
    def truth(self) -> Fraction:
        return rr_truth(self.epsilon)

    def randomize(self, value, rng):
        k = 1 + rng.randrange(self.size - 1)
        return {"index": k, "bit": _flip(parity(k & value), self.truth, rng)}

    def probability(self, payload, value):
        sign = parity(payload["index"] & value)
        return Fraction(1, self.size - 1) * _sign_probability(self.truth, payload["bit"], sign)


