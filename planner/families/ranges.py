"""The range-tree family: hierarchical trees, Haar wavelets and their Kronecker products.

For the blocks of each clique, `mechanisms.ranges.optimize.choose_kronecker`
picks per attribute the identity, an H_b tree or the Haar wavelet, with the
branching factor and the per-level budget split chosen on the exact
least-squares error of these very blocks for the noise kind. A clique with
several attributes (2-D and k-D boxes) gets the Kronecker product of its
per-attribute choices. Cliques share the family's budget in closed form.

The error is exact: Σ_blocks weight·Σ_rows Var at unit noise per unit of the
strategy's sensitivity Δ (L2 for Gaussian, L1 for Laplace), times the unit
noise variance (Δ²/2 at ρ = 1, 2Δ² at ε = 1). Reconstruction is least squares
on the clique (`CliqueLeastSquares`, through the strategies' implicit `pinv`,
so no clique is densified). Blocks whose clique lies inside a larger one are planned
either on their own clique or on the larger one, whichever costs less; when a
block is covered by several measured cliques the model pools their answers, so
the realized error can only be lower than planned.
"""

from __future__ import annotations

from mechanisms.domain import Domain
from mechanisms.marginals import Clique
from mechanisms.matrices import Dense, Identity, Kronecker, Matrix
from mechanisms.measurement import GAUSSIAN
from mechanisms.ranges.optimize import RangeChoice, choose_kronecker
from mechanisms.workload import Block
from planner.families.base import Allocation, combined_unit_error, noise_unit_variance, split


RANGE_TREES = "range trees"
MAX_ATTRIBUTES = 2  # 1-D ranges and 2-D boxes


def describe(choice: RangeChoice) -> str:
    """'H_4 tree (level weights 0:0.49:1)': root first; the budget split across levels is
    ρ_d ∝ w_d² under Gaussian noise and ε_d ∝ w_d under Laplace noise (0: not measured)."""
    if choice.is_identity:
        return choice.label
    weights = ":".join(f"{w:g}" for w in choice.strategy.weights)
    return f"{choice.label} (level weights {weights})"


class RangeTrees:
    """Range strategies per clique (planner family protocol; see `planner.families.Family`)."""

    name = RANGE_TREES

    def __init__(self, domain: Domain, noise: str):
        self.domain, self.noise = domain, noise
        self.norm = 2 if noise == GAUSSIAN else 1
        self._cache: dict[tuple, tuple[list[RangeChoice], float] | None] = {}
        self._memo: dict = {}  # 1-D choices by exact kernel, shared by this planning call

    def _layouts(self, blocks: list[Block]) -> list[dict[Clique, list[Block]]]:
        """Blocks by their own clique, and (when different) with every clique that fits inside
        a larger one measured on the first such maximal clique."""
        own: dict[Clique, list[Block]] = {}
        for b in blocks:
            if b.terms:
                own.setdefault(b.attributes(self.domain), []).append(b)
        maximal = [c for c in own if not any(set(c) < set(d) for d in own)]
        merged: dict[Clique, list[Block]] = {c: [] for c in maximal}
        for c, group in own.items():
            merged[next(d for d in maximal if set(c) <= set(d))].extend(group)
        return [own] if len(merged) == len(own) else [own, merged]

    def _applies(self, clique: Clique, blocks: list[Block]) -> bool:
        """Trees pay off for ranges: some block restricts an attribute by a (dense) indicator row.
        Cliques of more than MAX_ATTRIBUTES attributes are left to other families (planning cost)."""
        if not clique or len(clique) > MAX_ATTRIBUTES:
            return False
        return any(isinstance(f, Dense) for b in blocks for t in b.terms for f in t.factors.values())

    def _choose(self, clique: Clique, blocks: list[Block]) -> tuple[list[RangeChoice], float] | None:
        """Per-attribute choices and the error at unit noise per unit sensitivity (None: not applicable)."""
        key = (clique, tuple((b.fingerprint(self.domain), b.weight) for b in blocks))
        if key not in self._cache:
            self._cache[key] = (
                choose_kronecker(blocks, self.domain, clique, self.norm, memo=self._memo)
                if self._applies(clique, blocks)
                else None
            )
        return self._cache[key]

    def _errors(self, blocks: list[Block]) -> list[tuple[Clique, list[RangeChoice], float]] | None:
        """(clique, choices, unit error) per measured clique, for the better of `_layouts`."""
        best, best_error = None, float("inf")
        for layout in self._layouts(blocks):
            out = []
            for clique, group in layout.items():
                chosen = self._choose(clique, group)
                if chosen is None:
                    break
                choices, error = chosen
                out.append((clique, choices, noise_unit_variance(self.noise, 1.0) * error))
            else:
                total = combined_unit_error([e for _, _, e in out], self.noise)
                if total < best_error:
                    best, best_error = out, total
        return best

    def unit_error(self, blocks: list[Block]) -> float:
        if not any(b.terms for b in blocks):
            return 0.0
        errors = self._errors(blocks)
        if errors is None:
            return float("inf")
        return combined_unit_error([e for _, _, e in errors], self.noise) if errors else 0.0

    def allocate(self, blocks: list[Block]) -> list[Allocation]:
        errors = self._errors(blocks) or []
        fractions = split([e for _, _, e in errors], self.noise) if errors else []
        out = []
        for (clique, choices, _), fraction in zip(errors, fractions):
            if all(c.is_identity for c in choices):  # the plain marginal
                out.append(Allocation(clique, fraction, None, 1.0))
                continue
            factors: list[Matrix] = [
                Identity(self.domain.size_of(a)) if c.is_identity else c.strategy for a, c in zip(clique, choices)
            ]
            strategy = factors[0] if len(factors) == 1 else Kronecker(factors)
            label = " ⊗ ".join(describe(c) for c in choices)  # in clique order
            out.append(Allocation(clique, fraction, None, strategy.sensitivity(self.norm), strategy, label))
        return out


__all__ = ["RANGE_TREES", "RangeTrees", "describe"]
