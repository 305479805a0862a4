"""AIM as an adaptive procedure: wide GROUP BY count workloads, answered from its graphical model."""

from __future__ import annotations

from mechanisms.aim import aim, workload_candidates
from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.measurement import GAUSSIAN
from mechanisms.workload import Block
from planner.adaptive.base import AdaptiveRelease

AIM = "aim"
AIM_MIN_CLIQUES = 4  # fewer marginals: identity marginals and least squares are hard to beat


class AIMProcedure:
    """AIM on the workload's GROUP BY marginals; later blocks are answered from its graphical model."""

    name = AIM

    def eligible(self, domain: Domain, blocks: list[Block], noise: str) -> str | None:
        if noise != GAUSSIAN:
            return "AIM needs a zCDP (Gaussian) budget"
        if not all(b.is_marginal() for b in blocks):
            return "AIM answers GROUP BY count workloads (marginals) only"
        if len({b.attributes(domain) for b in blocks}) < AIM_MIN_CLIQUES:
            return f"fewer than {AIM_MIN_CLIQUES} marginals"
        return None

    def run(self, domain, blocks, rho, fetch, rng, rows=None, progress=None) -> AdaptiveRelease:
        workload: dict[Clique, float] = {}
        for b in blocks:
            clique = b.attributes(domain)
            workload[clique] = workload.get(clique, 0.0) + b.weight
        # One scan for every candidate marginal AIM may read (the workload's downward closure).
        counts = fetch(list(workload_candidates(domain, workload.items())))
        shown = None if progress is None else (lambda p: progress(p.fraction, p.message))
        result = aim(domain, counts.__getitem__, rho, list(workload.items()), rng, progress=shown)
        return AdaptiveRelease(result.measurements, result.model)


__all__ = ["AIM", "AIM_MIN_CLIQUES", "AIMProcedure"]
