"""The per-query family: noise added to each block directly, the budget split in closed form.

What per-query DP SQL systems do; the baseline every other family must beat, and the plan
that always exists (whatever the planning budget).
"""

from __future__ import annotations

from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN
from mechanisms.workload import Block
from planner.families.base import Allocation, combined_unit_error, noise_unit_variance, split

PER_QUERY = "per-query"


class PerQuery:
    name = PER_QUERY

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise

    def sensitivity(self, block: Block) -> float:
        return block.sensitivity(self.domain, 2 if self.noise == GAUSSIAN else 1)

    def costs(self, blocks: list[Block]) -> list[float]:
        return [
            b.weight * b.num_rows(self.domain) * noise_unit_variance(self.noise, self.sensitivity(b))
            for b in blocks
        ]

    def unit_error(self, blocks: list[Block]) -> float:
        return combined_unit_error(self.costs(blocks), self.noise)

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        fractions = split(self.costs(blocks), self.noise)
        return [
            Allocation(b.attributes(self.domain), f, None if b.is_marginal() else b, self.sensitivity(b))
            for b, f in zip(blocks, fractions)
            if b.terms
        ]


__all__ = ["PER_QUERY", "PerQuery"]
