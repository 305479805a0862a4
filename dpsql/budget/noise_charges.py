"""What a statement's plans charge a zCDP ledger, and which noise they buy it with.

On a ledger composed exactly (`dpsql.budget.ledger_accounting`), a statement's share may be spent as
discrete Laplace noise where that errs less (`planner.noise_choice`): `cheaper_noise` plans it
both ways (`cheaper_target` for an accuracy target: the noise that meets it with the smaller share); `charge_of` is what a plan charges (its cost in ρ and the mechanisms it is, the
`Entry.pieces` the ledger composes); `charge_words` says it in a result's footer.
"""

from __future__ import annotations

import math
from typing import Callable

from dpsql.errors import BudgetExceededError
from mechanisms.accounting import pure_dp_to_zcdp
from mechanisms.measurement import GAUSSIAN, LAPLACE
from mechanisms.privacy_filter import LAPLACE_PIECE, Piece
from planner.noise_choice import choose, choose_for_target, laplace_share
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
    return laplace_share(rho, ledger.capacity, ledger.unit.delta)


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


def cheaper_target(plan: Plan, ledger, budget, plan_laplace: Callable[[], Plan]) -> Plan:
    """`plan` (Gaussian, the least ρ meeting an accuracy target), or the Laplace plan meeting the same target
    (`plan_laplace()`) where that takes the smaller share of the budget."""
    if not laplace_eligible(budget, ledger) or plan.adaptive is not None or plan.cost <= 0:
        return plan
    try:
        laplace = plan_laplace()
    except ArithmeticError:  # the target is out of reach with Laplace noise: the Gaussian plan stands
        return plan
    if laplace.noise != LAPLACE or laplace.adaptive is not None or laplace.cost <= 0:
        return plan
    return choose_for_target(plan, laplace, ledger.capacity, ledger.unit.delta,
                             lambda p: fits(ledger, *charge_of(p, budget.noise)))


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
