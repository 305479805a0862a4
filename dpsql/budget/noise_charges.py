"""What a statement's plans charge a zCDP ledger, and which noise they buy it with.

On a ledger composed exactly (`dpsql.budget.ledger_accounting`), a statement's share may be spent as
discrete Laplace noise where that errs less (`planner.noise_choice`): `cheaper_noise` plans it
both ways; `charge_of` is what a plan charges (its cost in ρ and the mechanisms it is, the
`Entry.pieces` the ledger composes); `charge_words` says it in a result's footer. `key_selection`
makes the same choice for a release of keys by partition selection.
"""

from __future__ import annotations

import math
from typing import Callable

from dpsql.errors import BudgetExceededError
from mechanisms.accounting import pure_dp_to_zcdp
from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.partition_selection import PartitionSelection, gaussian_selection, laplace_selection
from mechanisms.pld_accounting import LAPLACE_PIECE, Piece
from planner.noise_choice import choose, laplace_share
from planner.plan import Plan

# Statements of at most this many blocks to measure are planned with both noises, and measured with the one of
# lower expected error; larger ones keep the ledger's (planning twice costs time).
NOISE_CHOICE_BLOCKS = 64


def fits(ledger, cost: float, pieces: tuple[Piece, ...] | None = None) -> bool:
    """Whether `ledger.check` lets a charge of `cost` (made of `pieces`) pass."""
    try:
        ledger.check(cost, pieces)
    except BudgetExceededError:
        return False
    return True


def laplace_eligible(budget, ledger) -> bool:
    """Whether a share may be spent as discrete Laplace noise: on a zCDP ledger composed exactly."""
    return budget.noise == GAUSSIAN and ledger.exact


def laplace_epsilon(ledger, rho: float) -> float:
    """The ε of a Laplace share taking what a Gaussian of ρ takes of the ledger (`planner.noise_choice`)."""
    return laplace_share(rho, ledger.total, ledger.delta)


def charge_of(plan: Plan, unit: str) -> tuple[float, tuple[Piece, ...] | None]:
    """What a plan charges a ledger of noise `unit`: (its cost in the ledger's unit, the mechanisms it is).
    On a zCDP ledger each measurement is a piece: a discrete Gaussian (σ and L2 sensitivity), or a discrete
    Laplace (scale and L1 sensitivity) costing ε²/2; an adaptive plan is its cost (pieces None)."""
    if unit != GAUSSIAN or plan.adaptive is not None or any(m.share <= 0 for m in plan.measurements):
        return plan.cost, None
    if plan.noise == GAUSSIAN:
        pieces = tuple(Piece.gaussian(m.share, m.sensitivity / math.sqrt(2 * m.share), m.sensitivity)
                       for m in plan.measurements)
    else:
        pieces = tuple(Piece.laplace(m.share, m.sensitivity / m.share, m.sensitivity) for m in plan.measurements)
    return math.fsum(p.rho for p in pieces), pieces


def cheaper_noise(plan: Plan, ledger, budget, share: float, blocks: list, domain,
                  plan_laplace: Callable[[float], Plan]) -> Plan:
    """`plan` (Gaussian, of ρ `share`), or the Laplace plan of the same share of the budget where that has the
    lower expected error (or alone fits the budget left); `plan_laplace(ε)` plans the workload with Laplace."""
    if not laplace_eligible(budget, ledger) or plan.adaptive is not None or len(blocks) > NOISE_CHOICE_BLOCKS:
        return plan
    laplace = plan_laplace(laplace_epsilon(ledger, share))
    if laplace.noise != LAPLACE or laplace.adaptive is not None:
        return plan
    return choose(plan, laplace, domain, blocks, lambda p: fits(ledger, *charge_of(p, budget.noise)))


def key_selection(ledger, budget, share: float, delta: float,
                  contribution: int) -> tuple[PartitionSelection, float, tuple[Piece, ...] | None]:
    """The partition selection a share ρ buys for a key column whose units add at most `contribution` rows
    over any keys, with δ_τ = `delta`, and what it charges: (selection, cost in ρ, pieces; None: the Gaussian).

    The discrete Gaussian of ρ `share`; on a ledger composed exactly also the discrete Laplace of the same share
    of the budget (`laplace_epsilon`), a pure ε-DP count vector released only above its threshold: (ε, δ_τ)-DP
    by `mechanisms.partition_selection`'s argument, charged as the pure piece ε and the δ event δ_τ, which the
    exact accountant composes as it composes the Gaussian's ρ and δ_τ. Of those that fit the budget left once
    δ_τ is spent, the lower threshold wins (a key whose noisy count stays under τ is not released at all),
    then the lower variance; when neither fits, the Gaussian (its refusal says what is missing)."""
    k = contribution
    gaussian = gaussian_selection(share, delta, max_keys=k, max_per_key=k, max_rows=k)
    options = [(gaussian, share, None)]
    if laplace_eligible(budget, ledger):
        laplace = laplace_selection(laplace_epsilon(ledger, share), delta, max_keys=k, max_per_key=k, max_rows=k)
        piece = Piece.laplace(laplace.cost, float(laplace.noise.scale), k)
        options.append((laplace, piece.rho, (piece,)))

    def fits_after(cost: float, pieces) -> bool:
        try:
            ledger.check_delta(cost, delta, pieces)
        except BudgetExceededError:
            return False
        return True

    fitting = [o for o in options if fits_after(o[1], o[2])] or options[:1]
    return min(fitting, key=lambda o: (o[0].threshold, o[0].noise.variance))


def check_share(ledger, budget, share: float, check: Callable) -> None:
    """Refuse (through `check(cost, pieces=...)`) a share that fits neither as a Gaussian of ρ `share` nor,
    composed exactly, as a Laplace of the same share of the budget."""
    if not laplace_eligible(budget, ledger) or fits(ledger, share):
        check(share)
        return
    piece = Piece.laplace(laplace_epsilon(ledger, share))
    check(piece.rho, pieces=(piece,))


def charge_words(charged: float, pieces: tuple[Piece, ...] | None, amount: Callable) -> str:
    """A charge as a footer says it: its pure ε (discrete Laplace) and the rest as `amount` gives it."""
    pure = [p.value for p in pieces or () if p.kind == LAPLACE_PIECE]
    if not pure:
        return f"charged {amount(charged)}"
    gaussian = charged - sum(pure_dp_to_zcdp(e) for e in pure)
    return f"charged ε={math.fsum(pure):.4g} of pure DP (discrete Laplace)" + \
        (f" and {amount(gaussian)}" if gaussian > 1e-15 * max(charged, 1e-300) else "")
