"""Ranges over [D] (§5.4): hh (a sampled level of the B-ary tree) and haar (HaarHRR, §5.4.3)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import ClassVar

from .base import rr_truth, parity, _check_size, Protocol, _sign_probability, _flip
from .frequency import OptimizedUnaryEncoding, HadamardResponse


@dataclasses.dataclass(frozen=True)
class HierarchicalHistogram(Protocol):
    """`hh`: a level l of the B-ary tree over [B^h] uniformly (p_l = 1/h, Lemma 9), its node by `oracle` at ε.

    Level l has B^l nodes (the root, level 0, is not reported); the value's node is z // B^(h−l).
    `oracle` is "oue" (TreeOUE) or "hrr" (TreeHRR); the payload is {"level": l, ...oracle's payload}.
    """

    name: ClassVar[str] = "hh"
    domain: int
    branching: int = 4
    oracle: str = "oue"

    def __post_init__(self):
        super().__post_init__()
        _check_size("domain", self.domain, 2)
        _check_size("branching", self.branching, 2)
        if self.oracle not in ("oue", "hrr"):
            raise ValueError("hh: oracle must be 'oue' or 'hrr'")

    @property
    def values(self) -> int:
        return self.domain

    @property
    def height(self) -> int:
        """h, the least with B^h ≥ D."""
        h, size = 1, self.branching
        while size < self.domain:
            h, size = h + 1, size * self.branching
        return h

    def level_oracle(self, level: int) -> Protocol:
        cls = OptimizedUnaryEncoding if self.oracle == "oue" else HadamardResponse
        return cls(self.epsilon, self.branching ** level)

    def node(self, value: int, level: int) -> int:
        return value // self.branching ** (self.height - level)

    def randomize(self, value, rng):
        level = 1 + rng.randrange(self.height)
        return {"level": level, **self.level_oracle(level).randomize(self.node(value, level), rng)}

    def probability(self, payload, value):
        level = payload["level"]
        inner = {k: v for k, v in payload.items() if k != "level"}
        return Fraction(1, self.height) * self.level_oracle(level).probability(inner, self.node(value, level))


@dataclasses.dataclass(frozen=True)
class HaarHRR(Protocol):
    """`haar`: a Haar level l ∈ [1, h] uniformly, then HRR over its K = D'/2^l coefficients (§5.4.3).

    The user's coefficient at level l is s = +1 (value in the left half of node u = z >> l) or −1;
    the report is (level l, index k ∈ [0, K), RR(s·χ_k(u))). At the top level (K = 1) it is plain RR.
    """

    name: ClassVar[str] = "haar"
    domain: int

    def __post_init__(self):
        super().__post_init__()
        _check_size("domain", self.domain, 2)

    @property
    def values(self) -> int:
        return self.domain

    @property
    def height(self) -> int:
        return (self.domain - 1).bit_length()

    @property
    def truth(self) -> Fraction:
        return rr_truth(self.epsilon)

    def sign(self, value: int, level: int, index: int) -> int:
        side = -1 if value >> (level - 1) & 1 else 1
        return side * parity((value >> level) & index)

    def randomize(self, value, rng):
        level = 1 + rng.randrange(self.height)
        k = rng.randrange(1 << (self.height - level))
        return {"level": level, "index": k, "bit": _flip(self.sign(value, level, k), self.truth, rng)}

    def probability(self, payload, value):
        level, k = payload["level"], payload["index"]
        choice = Fraction(1, self.height << (self.height - level))
        return choice * _sign_probability(self.truth, payload["bit"], self.sign(value, level, k))


