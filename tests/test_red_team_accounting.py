"""Red team of exact accounting (`mechanisms.privacy_filter`, `dpsql.budget.ledger`): a history the ledger
accepts must be within the declared (ε, δ) by its *exact* privacy profile, computed here independently.

Pure pieces (discrete Laplace counts of sensitivity 1) have privacy losses ±ε exactly, so a history of them
is a composition of randomized-response pairs whose δ(ε) is computed in closed form below. Exceeding the
declared ε by any amount s gives δ(ε) ≈ P(all losses maximal) · s: a slack in ρ that the Rényi
certificate multiplies by its order α (up to 10⁶) let a history over the budget through."""

import math

import pytest

from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import Entry
from dpsql.errors import BudgetExceededError
from mechanisms.accounting import epsilon_delta_to_zcdp
from mechanisms.privacy_filter import Accountant, History, Piece

EPSILON, DELTA = 3.0, 1e-6


def exact_delta(epsilons: list[float], at: float) -> float:
    """δ(at) = E_P[(1 − e^{at − L})₊] for L a sum of independent randomized-response losses ±ε_i."""
    losses = {0.0: 1.0}
    for e in epsilons:
        p = 1 / (1 + math.exp(-e))
        grown: dict[float, float] = {}
        for loss, w in losses.items():
            for step, q in ((e, p), (-e, 1 - p)):
                key = round(loss + step, 12)
                grown[key] = grown.get(key, 0.0) + w * q
        losses = grown
    return sum(w * -math.expm1(at - loss) for loss, w in losses.items() if loss > at)


def test_two_pure_pieces_over_the_declared_epsilon_do_not_fit():
    acc = Accountant(EPSILON, DELTA, epsilon_delta_to_zcdp(EPSILON, DELTA))
    over = [0.4, EPSILON * (1 + 5e-5) - 0.4]  # ε exceeded by 1.5e-4: δ(3) is about 80 times the declared δ
    assert exact_delta(over, EPSILON) > 50 * DELTA
    assert not acc.fits(History().plus([Piece.laplace(e) for e in over]), slack=1e-9)
    within = [0.4, (EPSILON - 0.4) * (1 - 1e-12)]  # the sum of the doubles 0.4 and 3 - 0.4 exceeds 3
    assert exact_delta(within, EPSILON) == 0.0 and acc.fits(History().plus([Piece.laplace(e) for e in within]))


def test_the_ledger_refuses_a_laplace_charge_past_the_declared_epsilon(tmp_path):
    ledger = Ledger(str(tmp_path / "l.duckdb"), "gaussian", epsilon_delta_to_zcdp(EPSILON, DELTA), DELTA)

    def entry(e: float) -> Entry:
        piece = Piece.laplace(e, 1 / e, 1.0)
        return Entry(piece.rho, "SELECT COUNT(*) FROM t", "t", None, [], pieces=(piece,))

    ledger.charge_all([entry(0.4)])
    with pytest.raises(BudgetExceededError):
        ledger.charge_all([entry(EPSILON * (1 + 5e-5) - 0.4)])
    ledger.charge_all([entry(EPSILON - 0.4 - 1e-6)])  # what does fit still fits
    assert exact_delta([0.4, EPSILON - 0.4 - 1e-6], EPSILON) <= DELTA


@pytest.mark.parametrize("piece", [0.5, 1.0, 2.9])
def test_pure_histories_accepted_are_within_the_declared_delta(piece):
    """The largest ε of a last piece the accountant accepts after n pieces keeps the exact δ within δ."""
    acc = Accountant(EPSILON, DELTA, epsilon_delta_to_zcdp(EPSILON, DELTA))
    for n in (1, 2, 5):
        prefix = [piece / n] * n
        lo, hi = 0.0, 2 * EPSILON
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if acc.fits(History().plus([Piece.laplace(e) for e in prefix + [mid]]),
                                           slack=1e-9) else (lo, mid)
        assert exact_delta(prefix + [lo], EPSILON) <= DELTA * (1 + 1e-6), (piece, n, lo)


def test_an_analyst_choosing_shares_from_answers_stays_within_the_declared_delta():
    """Fully adaptive composition. A first Laplace count of ε₁ = 0.05; the analyst, seeing whether its answer is
    high or low (for the worst neighbours, whether its privacy loss was +ε₁ or −ε₁), then asks either one count
    of the largest ε that fits, or 20 equal counts of the largest ε that fits. The ledger accepts both
    histories, and each alone is within (ε, δ); the analyst's whole transcript is not: δ(ε) is the mixture
    p·δ_big(ε − ε₁) + (1 − p)·δ_small(ε + ε₁)."""
    acc = Accountant(EPSILON, DELTA, epsilon_delta_to_zcdp(EPSILON, DELTA))
    first, n = 0.05, 20

    def largest(count: int) -> float:
        lo, hi = 0.0, EPSILON
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if acc.fits(History().plus([Piece.laplace(e) for e in [first] + [mid] * count])) \
                else (lo, mid)
        return lo

    big, small = largest(1), largest(n)
    assert exact_delta([first, big], EPSILON) <= DELTA and exact_delta([first] + [small] * n, EPSILON) <= DELTA
    p = 1 / (1 + math.exp(-first))
    transcript = p * exact_delta([big], EPSILON - first) + (1 - p) * exact_delta([small] * n, EPSILON + first)
    assert transcript <= DELTA, transcript / DELTA  # about 1.37 × δ
