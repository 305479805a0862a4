"""RAP as an adaptive procedure: large batches of counting queries, answered from relaxed data.

Only Gaussian (zCDP) plans are eligible, and only blocks that are counting queries
(integer answers, sensitivity at most 1), with at least `RAP_MIN_QUERIES` rows in all:
below that, matrix strategies are cheap and exact.
"""

from __future__ import annotations

from mechanisms.domain import Domain
from mechanisms.measurement import GAUSSIAN, query_step
from mechanisms.rap import BlockQueries, MarginalCounts, RAPConfig, run_rap
from mechanisms.workload import Block
from planner.adaptive.base import AdaptiveRelease

RAP = "rap"
RAP_MIN_QUERIES = 256


def counting_blocks(domain: Domain, blocks: list[Block]) -> bool:
    """Every block a counting query: integer answers, L2 sensitivity at most 1 per row."""
    return all(
        b.terms and b.sensitivity(domain, 2) <= 1.0 + 1e-9 and query_step(b.matrix(domain)).denominator == 1
        for b in blocks
    )


class RAPProcedure:
    """RAP on large batches of counting queries (conjunctions, thresholds); answers from relaxed data."""

    name = RAP

    def __init__(self, config: RAPConfig = RAPConfig()):
        self.config = config

    def eligible(self, domain: Domain, blocks: list[Block], noise: str) -> str | None:
        if noise != GAUSSIAN:
            return "RAP needs a zCDP (Gaussian) budget"
        if sum(b.num_rows(domain) for b in blocks) < RAP_MIN_QUERIES:
            return f"fewer than {RAP_MIN_QUERIES} query rows"
        if not counting_blocks(domain, blocks):
            return "RAP answers counting queries only"
        return None

    def run(self, domain, blocks, rho, fetch, rng, rows=None, progress=None) -> AdaptiveRelease:
        result = run_rap(BlockQueries(domain, blocks), MarginalCounts(domain, fetch), rho, rng, self.config, rows=rows)
        if progress is not None:
            progress(1.0, "RAP done")
        return AdaptiveRelease(result.release.one_way_measurements(), result.model)


__all__ = ["RAP", "RAP_MIN_QUERIES", "RAPProcedure", "counting_blocks"]
