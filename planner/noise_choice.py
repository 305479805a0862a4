"""Which noise a share buys the least error with: the discrete Gaussian or the discrete Laplace.

A share of a zCDP budget is ρ: the fraction ρ / ρ_total of the ledger, which is also the
fraction of the declared ε that a Laplace of ε = (ρ / ρ_total)·ε_total takes (pure ε-DP pieces
add up, δ = 0, while the history holds no Gaussian piece and no δ event: the pure filter of
`mechanisms.privacy_filter`; beside Gaussians each counts ε²/2 of ρ). So the same share buys a
discrete Gaussian of ρ or that discrete Laplace (`laplace_share`), and a session of k equal shares
fits k queries all Laplace or all Gaussian; the choice only takes a noise that fits. One COUNT spending a whole budget of ε = 1,
δ = 1e-6 has noise std 1.36 with Laplace against 4.53 with the Gaussian; ten equal shares are
about even; from about a dozen on, or for measurements of large L1 but small L2 sensitivity
(marginals read by many cells per row, range trees), the Gaussian wins. (A share read as an
(ε, δ) pair of its own, ε at δ as Laplace, would let a small per-query ε spend the budget up to
ten times faster under Laplace than the Gaussian that ε stands for.) `choose` plans both and keeps
the one of lower expected total squared error; its notes say which and why (EXPLAIN shows them). For
an accuracy target (`max_rmse`) the error is fixed and the share is what differs: `choose_for_target`
keeps the plan that meets it with the smaller share of the budget.
"""

from __future__ import annotations

from typing import Callable

from mechanisms.accounting import zcdp_to_epsilon
from mechanisms.domain import Domain
from mechanisms.workload import Block
from planner.plan import Plan

__all__ = ["laplace_share", "expected_squared_error", "choose", "choose_for_target"]


# A Laplace share is made this much (relatively) smaller than its fraction of ε: the pure filter adds the
# pieces' ε exactly, so a session of equal shares (each ε/k, rounded to a double) still fits its last one.
SHARE_MARGIN = 1e-12


def laplace_share(rho: float, total_rho: float, delta: float) -> float:
    """The ε of a Laplace taking the same fraction of a ledger of ρ `total_rho` at `delta` as a Gaussian share ρ
    (less `SHARE_MARGIN`)."""
    return rho / total_rho * zcdp_to_epsilon(total_rho, delta) * (1 - SHARE_MARGIN)


def expected_squared_error(plan: Plan, domain: Domain, blocks: list[Block]) -> float:
    """The plan's expected total squared error over the blocks' rows (unweighted)."""
    return sum(b.num_rows(domain) * plan.expected_rmse.get(b.name, 0.0) ** 2 for b in blocks)


def choose(gaussian: Plan, laplace: Plan, domain: Domain, blocks: list[Block],
           fits: Callable[[Plan], bool]) -> Plan:
    """The plan with the lower expected total squared error among those that `fits` the budget left
    (the Gaussian one when neither does: its refusal says what is missing), with a note saying why."""
    g, lap = expected_squared_error(gaussian, domain, blocks), expected_squared_error(laplace, domain, blocks)
    fit_g, fit_l = fits(gaussian), fits(laplace)
    pick_laplace = fit_l and (not fit_g or lap < g)
    chosen, other = (laplace, "discrete Gaussian") if pick_laplace else (gaussian, "discrete Laplace")
    mine, theirs = (lap, g) if pick_laplace else (g, lap)
    if pick_laplace and not fit_g:
        why = "the Gaussian at the same share no longer fits in the budget left"
    elif not pick_laplace and not fit_l and fit_g:
        why = f"the {other} at the same share does not fit in the budget left"
    else:
        why = f"expected total squared error {mine:.4g} against {theirs:.4g} with {other} noise"
    chosen.notes.append(f"noise: discrete {chosen.noise.capitalize()} ({chosen.cost_text()}), chosen for this share: "
                        f"{why} ({gaussian.cost_text()} or ε={laplace.cost:.4g} of pure DP, the same share of the "
                        "budget)")
    return chosen


def choose_for_target(gaussian: Plan, laplace: Plan, total_rho: float, delta: float,
                      fits: Callable[[Plan], bool]) -> Plan:
    """Of two plans meeting the same accuracy target, the one taking the smaller share of a budget of ρ
    `total_rho` at `delta` (a Gaussian's ρ / ρ_total, a Laplace's ε / ε_total) among those that `fits` the
    budget left (the Gaussian one when neither does), with a note saying why."""
    g_share, l_share = gaussian.cost / total_rho, laplace.cost / zcdp_to_epsilon(total_rho, delta)
    fit_g, fit_l = fits(gaussian), fits(laplace)
    pick_laplace = fit_l and (not fit_g or l_share < g_share)
    chosen = laplace if pick_laplace else gaussian
    if pick_laplace and not fit_g:
        why = "the Gaussian meeting it no longer fits in the budget left"
    elif not pick_laplace and not fit_l and fit_g:
        why = "the discrete Laplace meeting it does not fit in the budget left"
    else:
        why = f"{min(g_share, l_share):.4g} of the budget against {max(g_share, l_share):.4g}"
    chosen.notes.append(f"noise: discrete {chosen.noise.capitalize()} ({chosen.cost_text()}), chosen for this "
                        f"accuracy target: {why} ({gaussian.cost_text()} or ε={laplace.cost:.4g} of pure DP)")
    return chosen
