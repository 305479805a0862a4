"""Marginals of d binary attributes, a record being a d-bit integer (§4.3): inpht, inprr, inpps,
margrr, margps, marght and inpem.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from math import comb
from typing import ClassVar

from .base import (
    Protocol,
    _check_size,
    _flip,
    _random_subset,
    _sign_probability,
    bernoulli,
    compact,
    expand,
    parity,
    rr_truth,
)
from .frequency import DirectEncoding, SymmetricUnaryEncoding


@dataclasses.dataclass(frozen=True)
class RecordProtocol(Protocol):
    """A protocol over records of `attributes` binary attributes, each record a d-bit integer."""

    attributes: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("attributes", self.attributes, 1)

    @property
    def values(self) -> int:
        return 1 << self.attributes


@dataclasses.dataclass(frozen=True)
class MarginalProtocol(RecordProtocol):
    """A record protocol that targets the `order`-way marginals (k ≤ d)."""

    order: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("order", self.order, 1)
        if self.order > self.attributes:
            raise ValueError("order must be at most attributes")

    @property
    def marginals(self) -> int:
        """The number of `order`-way marginals, C(d, k)."""
        return comb(self.attributes, self.order)


@dataclasses.dataclass(frozen=True)
class InputHadamard(MarginalProtocol):
    """`inpht`: one of the T = Σ_{1≤j≤k} C(d,j) coefficients α (1 ≤ |α| ≤ k) uniformly, χ_α(z) by RR
    (Algorithm 1)."""

    name: ClassVar[str] = "inpht"

    @property
    def coefficients(self) -> int:
        return sum(comb(self.attributes, j) for j in range(1, self.order + 1))

    @property
    def truth(self) -> Fraction:
        return rr_truth(self.epsilon)

    def randomize(self, value, rng):
        r = rng.randrange(self.coefficients)
        weight = 1
        while r >= comb(self.attributes, weight):  # |α| = j with probability C(d, j)/T
            r -= comb(self.attributes, weight)
            weight += 1
        alpha = _random_subset(weight, self.attributes, rng)
        return {"index": alpha, "bit": _flip(parity(alpha & value), self.truth, rng)}

    def probability(self, payload, value):
        sign = parity(payload["index"] & value)
        return Fraction(1, self.coefficients) * _sign_probability(self.truth, payload["bit"], sign)


@dataclasses.dataclass(frozen=True)
class _OracleRecord(RecordProtocol):
    """A whole record (one of 2^d cells) reported by a frequency oracle over the cells (`oracle_class`)."""

    oracle_class: ClassVar[type]

    @property
    def oracle(self) -> Protocol:
        return self.oracle_class(self.epsilon, 1 << self.attributes)

    def randomize(self, value, rng):
        return self.oracle.randomize(value, rng)

    def probability(self, payload, value):
        return self.oracle.probability(payload, value)


@dataclasses.dataclass(frozen=True)
class InputRR(_OracleRecord):
    """`inprr`: ε/2-RR on every one of the 2^d cells of the one-hot record (Thm 3): SUE over 2^d."""

    name: ClassVar[str] = "inprr"
    oracle_class: ClassVar[type] = SymmetricUnaryEncoding


@dataclasses.dataclass(frozen=True)
class InputPS(_OracleRecord):
    """`inpps`: preferential sampling (GRR) of the record's cell among all 2^d (Thm 4)."""

    name: ClassVar[str] = "inpps"
    oracle_class: ClassVar[type] = DirectEncoding


@dataclasses.dataclass(frozen=True)
class SampledMarginal(MarginalProtocol):
    """A uniformly sampled k-way marginal β (a d-bit mask with k bits set) and the record's cell in it.

    Cells of β are numbered by `compact` (§4.3.3's MARG* methods).
    """

    def randomize(self, value, rng):
        beta = _random_subset(self.order, self.attributes, rng)
        return {"marginal": beta, **self.cell_report(compact(value, beta), beta, rng)}

    def probability(self, payload, value):
        beta = payload["marginal"]
        return Fraction(1, self.marginals) * self.cell_probability(payload, compact(value, beta), beta)

    def cell_report(self, cell: int, beta: int, rng) -> dict:
        raise NotImplementedError

    def cell_probability(self, payload: dict, cell: int, beta: int) -> Fraction:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class _OracleMarginal(SampledMarginal):
    """A sampled marginal whose cell is reported by a frequency oracle over its 2^k cells (`oracle_class`)."""

    oracle_class: ClassVar[type]

    @property
    def oracle(self) -> Protocol:
        return self.oracle_class(self.epsilon, 1 << self.order)

    def cell_report(self, cell, beta, rng):
        return self.oracle.randomize(cell, rng)

    def cell_probability(self, payload, cell, beta):
        return self.oracle.probability(payload, cell)


@dataclasses.dataclass(frozen=True)
class MarginalRR(_OracleMarginal):
    """`margrr`: ε/2-RR on each of the sampled marginal's 2^k cells (SUE)."""

    name: ClassVar[str] = "margrr"
    oracle_class: ClassVar[type] = SymmetricUnaryEncoding


@dataclasses.dataclass(frozen=True)
class MarginalPS(_OracleMarginal):
    """`margps`: GRR of the record's cell among the sampled marginal's 2^k cells."""

    name: ClassVar[str] = "margps"
    oracle_class: ClassVar[type] = DirectEncoding


@dataclasses.dataclass(frozen=True)
class MarginalHadamard(SampledMarginal):
    """`marght`: one of the sampled marginal's 2^k − 1 non-zero coefficients α ≼ β (a d-bit mask), by RR."""

    name: ClassVar[str] = "marght"

    @property
    def truth(self) -> Fraction:
        return rr_truth(self.epsilon)

    def cell_report(self, cell, beta, rng):
        alpha = 1 + rng.randrange((1 << self.order) - 1)
        return {"index": expand(alpha, beta), "bit": _flip(parity(alpha & cell), self.truth, rng)}

    def cell_probability(self, payload, cell, beta):
        sign = parity(compact(payload["index"], beta) & cell)
        return Fraction(1, (1 << self.order) - 1) * _sign_probability(self.truth, payload["bit"], sign)


@dataclasses.dataclass(frozen=True)
class InputEM(RecordProtocol):
    """`inpem`: every one of the d bits by ε/d-RR (Fanti et al.'s baseline, decoded by EM, §4.3.4)."""

    name: ClassVar[str] = "inpem"

    @property
    def truth(self) -> Fraction:
        return rr_truth(self.epsilon / self.attributes)

    def randomize(self, value, rng):
        flips = sum(1 << i for i in range(self.attributes) if not bernoulli(self.truth, rng))
        return {"bits": value ^ flips}

    def probability(self, payload, value):
        wrong = (payload["bits"] ^ value).bit_count()
        return (1 - self.truth) ** wrong * self.truth ** (self.attributes - wrong)


