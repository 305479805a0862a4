"""The client side of local differential privacy: one randomizer per protocol, standard library only.

A collecting application runs `PROTOCOLS[name](...).report(value)` once per user and sends the
row it returns (a JSON-serialisable dict: `protocol`, the public parameters, `payload`); the
aggregators in `mechanisms.ldp.frequency`, `.marginals` and `.ranges` turn such rows into
estimates. This module imports nothing outside the standard library, so an application can
vendor the file alone; `python -m mechanisms.ldp.client --protocol oue --epsilon 1 --domain 16
--value 3` prints one report row (`main`).

Protocols (numbers are sections and equations of the LDP thesis, seeds/001):

- frequency oracles over a domain [D] (§2.4.2, §4.7): `rr` (binary randomized response,
  Lemmas 1–2), `grr` (k-ary RR / direct encoding, Lemma 4), `oue` and `sue` (unary encoding,
  eqs. 2.7 and 2.6), `olh` (optimal local hashing), `hrr` (Hadamard response, HRR₁ of §4.7);
- marginals of d binary attributes, a record being a d-bit integer (§4.3): `inpht`
  (Algorithm 1), `inprr` (ε/2-RR on all 2^d cells, Thm 3), `inpps` (GRR over 2^d, Thm 4),
  `margrr`, `margps`, `marght` (a sampled k-way marginal, §4.3.3) and `inpem` (ε/d-RR per
  bit, Fanti et al.'s baseline, §4.3.4);
- ranges over [D] (§5.4): `hh` (a uniformly sampled level of the B-ary tree, reported with OUE
  or HRR at the full ε, §5.4.1) and `haar` (HaarHRR, §5.4.3).

Randomness comes from `secrets.SystemRandom` unless a `random.Random` is passed (tests only).
Every Bernoulli draw has a dyadic probability t/2⁵³, rounded towards the uninformative report
(a truth probability down, a false-positive probability up, by a few units of float error), and
every other choice is a uniform integer, so `probability(payload, value)` returns each report's
exact probability as a Fraction and the likelihood ratio bound e^ε holds exactly; the
aggregators unbias with the same numbers (`support_probabilities`, `truth`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import secrets
import sys
from fractions import Fraction
from math import comb
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


PROTOCOLS: dict[str, type[Protocol]] = {cls.name: cls for cls in (
    RandomizedResponse, DirectEncoding, OptimizedUnaryEncoding, SymmetricUnaryEncoding, LocalHashing,
    HadamardResponse, InputHadamard, InputRR, InputPS, MarginalRR, MarginalPS, MarginalHadamard, InputEM,
    HierarchicalHistogram, HaarHRR)}


def main(argv: list[str] | None = None) -> int:
    """Print one user's report row as JSON: `--protocol NAME --epsilon E --value V` and the protocol's parameters."""
    parser = argparse.ArgumentParser(prog="python -m mechanisms.ldp.client",
                                     description="Randomize one user's value under ε-local differential privacy.")
    parser.add_argument("--protocol", required=True, choices=sorted(PROTOCOLS))
    parser.add_argument("--epsilon", required=True, type=float)
    parser.add_argument("--value", required=True, type=lambda s: int(s, 0),
                        help="the user's value in [0, D); for marginal protocols the record as a d-bit "
                             "integer (0b… allowed)")
    parser.add_argument("--domain", type=int, help="D, the public domain size (frequency and range protocols)")
    parser.add_argument("--attributes", type=int, help="d, the number of binary attributes (marginal protocols)")
    parser.add_argument("--order", type=int, help="k, the marginal order (marginal protocols)")
    parser.add_argument("--branching", type=int, help="B, the tree's fan-out (hh; default 4)")
    parser.add_argument("--oracle", choices=("oue", "hrr"), help="hh's per-level frequency oracle (default oue)")
    args = parser.parse_args(argv)
    cls = PROTOCOLS[args.protocol]
    fields = {f.name for f in dataclasses.fields(cls)}
    given = {name: getattr(args, name) for name in ("domain", "attributes", "order", "branching", "oracle")
             if getattr(args, name) is not None}
    extra = set(given) - fields
    if extra:
        parser.error(f"{args.protocol} takes no --{' --'.join(sorted(extra))}")
    missing = sorted(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING and f.name not in given and f.name != "epsilon")
    if missing:
        parser.error(f"{args.protocol} needs --{' --'.join(missing)}")
    try:
        row = cls(epsilon=args.epsilon, **given).report(args.value)
    except ValueError as exc:
        parser.error(str(exc))
    json.dump(row, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
