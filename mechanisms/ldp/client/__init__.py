"""The client side of local differential privacy: one randomizer per protocol, standard library only.

A collecting application runs `PROTOCOLS[name](...).report(value)` once per user and sends the
row it returns (a JSON-serialisable dict: `protocol`, the public parameters, `payload`); the
aggregators in `mechanisms.ldp.frequency`, `.marginals` and `.ranges` turn such rows into
estimates. This package imports nothing outside the standard library (its modules import each
other relatively), so an application can vendor the folder alone; `python -m mechanisms.ldp.client
--protocol oue --epsilon 1 --domain 16 --value 3` prints one report row (`__main__`). Its modules:
`base` (exact dyadic probabilities, the `Protocol` base), `frequency`, `marginals`, `ranges`,
`head_list` (BLENDER's two-level GRR over a discovered head list).

Protocols (numbers are sections and equations of the LDP thesis, seeds/001):

- frequency oracles over a domain [D] (§2.4.2, §4.7): `rr` (binary randomized response,
  Lemmas 1–2), `grr` (k-ary RR / direct encoding, Lemma 4), `oue` and `sue` (unary encoding,
  eqs. 2.7 and 2.6), `olh` (optimal local hashing), `hrr` (Hadamard response, HRR₁ of §4.7);
- marginals of d binary attributes, a record being a d-bit integer (§4.3): `inpht`
  (Algorithm 1), `inprr` (ε/2-RR on all 2^d cells, Thm 3), `inpps` (GRR over 2^d, Thm 4),
  `margrr`, `margps`, `marght` (a sampled k-way marginal, §4.3.3) and `inpem` (ε/d-RR per
  bit, Fanti et al.'s baseline, §4.3.4);
- ranges over [D] (§5.4): `hh` (a uniformly sampled level of the B-ary tree, reported with OUE
  or HRR at the full ε, §5.4.1) and `haar` (HaarHRR, §5.4.3);
- a head list discovered by an opt-in group (seeds/000, Algorithm 2.4): `grr2`, GRR over its
  queries, then over the kept query's URLs (`urls`: URLs per query, ⋆ last at both levels).

Randomness comes from `secrets.SystemRandom` unless a `random.Random` is passed (tests only).
Every Bernoulli draw has a dyadic probability t/2⁵³, rounded towards the uninformative report
(a truth probability down, a false-positive probability up, by a few units of float error), and
every other choice is a uniform integer, so `probability(payload, value)` returns each report's
exact probability as a Fraction and the likelihood ratio bound e^ε holds exactly; the
aggregators unbias with the same numbers (`support_probabilities`, `truth`).
"""

from __future__ import annotations

from .base import HASH_PRIME, Protocol, above, below, bernoulli, compact, expand, parity, rr_truth
from .frequency import (
    DirectEncoding,
    HadamardResponse,
    LocalHashing,
    OptimizedUnaryEncoding,
    RandomizedResponse,
    SymmetricUnaryEncoding,
    UnaryEncoding,
)
from .marginals import (
    InputEM,
    InputHadamard,
    InputPS,
    InputRR,
    MarginalHadamard,
    MarginalProtocol,
    MarginalPS,
    MarginalRR,
    RecordProtocol,
    SampledMarginal,
)
from .ranges import HierarchicalHistogram, HaarHRR
from .head_list import TwoLevelGRR

PROTOCOLS: dict[str, type[Protocol]] = {cls.name: cls for cls in (
    RandomizedResponse, DirectEncoding, OptimizedUnaryEncoding, SymmetricUnaryEncoding, LocalHashing,
    HadamardResponse, InputHadamard, InputRR, InputPS, MarginalRR, MarginalPS, MarginalHadamard, InputEM,
    HierarchicalHistogram, HaarHRR, TwoLevelGRR)}


def main(argv: list[str] | None = None) -> int:
    """The command line (`__main__`): one user's report row, printed as JSON."""
    from .__main__ import main as run

    return run(argv)


__all__ = [
    'DirectEncoding',
    'HASH_PRIME',
    'HaarHRR',
    'HadamardResponse',
    'HierarchicalHistogram',
    'InputEM',
    'InputHadamard',
    'InputPS',
    'InputRR',
    'LocalHashing',
    'MarginalHadamard',
    'MarginalPS',
    'MarginalProtocol',
    'MarginalRR',
    'OptimizedUnaryEncoding',
    'PROTOCOLS',
    'Protocol',
    'RandomizedResponse',
    'RecordProtocol',
    'SampledMarginal',
    'SymmetricUnaryEncoding',
    'TwoLevelGRR',
    'UnaryEncoding',
    'above',
    'below',
    'bernoulli',
    'compact',
    'expand',
    'main',
    'parity',
    'rr_truth',
]
