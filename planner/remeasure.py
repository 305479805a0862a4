"""When a block that earlier measurements determine is measured again: a free answer far weaker than a fresh one.

Least squares answers every block in the span of a table's measurements, free — however poorly those
measurements determine it: a MEDIAN under a narrow filter read off an earlier (age × hours) strategy can
carry an expected error a hundred times what its own share would buy, and a session of k queries at equal
shares would then leave most of its budget unspent while answering badly. The rule: a determined block is
**measured again** (charged, and combined with the earlier measurements by the least-squares model that
answers it; planned as fresh measurements, since least squares over all of them can only be better) when a
fresh measurement of the block alone, at the statement's share per query, would have an
expected variance below `FRESH_FRACTION` of the variance the model gives it now (RMSE more than 2× better);
the fresh variance is bounded by measuring the block's rows as asked (closed form), so deciding costs no
planning and errs on the side of answering free.

A query asked again with nothing new stays free: its block was measured at that share already, so the model's
variance is at most about the fresh one. Blocks a generative model answers (no error bound) are left to
`Sizing.measure_unmeasured`. The caller applies the rule only where the share fits in the remaining budget
(else the weak answer stays free rather than being refused).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.domain import Domain
from mechanisms.reconstruction import LeastSquaresModel
from mechanisms.workload import Block
from planner.fairness import even_split

FRESH_FRACTION = 0.25  # measured again when fresh variance < this × the current variance


@dataclass(frozen=True)
class Weak:
    """Why a determined block is measured again: its current expected RMSE and a fresh measurement's."""

    current: float
    fresh: float

    def describe(self) -> str:
        return (f"measured again: earlier measurements give expected RMSE {self.current:.4g}, a fresh measurement at "
                f"the statement's share at most {self.fresh:.4g} (variance below {FRESH_FRACTION:g}x); planned fresh, "
                "the answer combines both, so its error is at most the fresh one's")


class Remeasure:
    """The rule for one ledger's noise: `weak` says why a block is measured again. A fresh block's expected RMSE
    at a share is planned once and kept (planning reads no data: it depends on the declaration only)."""

    def __init__(self, noise: str):
        self.noise = noise
        self.kept: dict[tuple, float] = {}

    def fresh(self, block: Block, domain: Domain, share: float, contribution: int) -> float:
        """At most the expected RMSE of the block measured alone at `share`, on nothing earlier: its rows measured
        as asked (`planner.fairness.even_split`, exact calibration, no planning), which the planner's own plan
        for it only improves on. Closed form, so a free answer costs no planning; kept per block and share."""
        key = (block.fingerprint(domain), share, contribution)
        if key not in self.kept:
            self.kept[key] = even_split([block], domain, share, self.noise, contribution).rmse.get(block.name, 0.0)
        return self.kept[key]

    def weak(self, model: LeastSquaresModel, block: Block, share: float, contribution: int) -> Weak | None:
        """The reason to measure a block the model determines again at `share`, or None when its free answer
        stands (or the model does not determine it)."""
        if not model.covers(block) or share <= 0:
            return None
        current = float(np.sqrt(np.mean(model.variance(block))))
        if not np.isfinite(current) or current == 0.0:
            return None
        fresh = self.fresh(block, model.domain, share, contribution)
        return Weak(current, fresh) if fresh ** 2 < FRESH_FRACTION * current ** 2 else None

    def reasons(self, model: LeastSquaresModel, blocks: list[Block], budget: float | None, queries: int,
                contribution: int) -> dict[str, str]:
        """Why each block measured again is (EXPLAIN), at the statement's `budget` over its `queries`."""
        return {b.name: w.describe() for b in blocks
                if budget and (w := self.weak(model, b, budget / queries, contribution))}


__all__ = ["FRESH_FRACTION", "Remeasure", "Weak"]
