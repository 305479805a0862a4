"""The data owner's page: the ledger as `dpsql ledger show` reads it, laid out for a privacy officer.

Read only: the ledger is opened as `Ledger.existing` opens it (nothing created or changed), and the
page shows the hash chain's verification first. A tampered ledger's charges are not shown, as the
command line does not list them: they cannot be trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from markupsafe import Markup

from dpsql.budget.units import Budget
from dpsql.interfaces.console import charts
from dpsql.budget.ledger import Ledger
from dpsql.budget.ledger_entries import CONTINUAL, EMIT, KEYS, released_keys
from dpsql.deployment.profile import Profile
from mechanisms.accounting import Amount


@dataclass
class AnalystBudget:
    name: str
    allowance: Amount | None  # None: up to the total
    spent: Amount
    remaining: Amount
    charges: int


@dataclass
class LedgerView:
    """What the owner's page shows (`path` missing: nothing has been charged yet)."""

    path: str
    exists: bool = False
    problems: list[str] = field(default_factory=list)
    head: str = ""
    total: Amount | None = None
    spent: Amount | None = None
    remaining: Amount | None = None
    key_delta: float = 0.0  # δ key releases spent
    key_reserve: float = 0.0  # δ the ledger set apart for them
    analysts: list[AnalystBudget] = field(default_factory=list)
    charts: list[Markup] = field(default_factory=list)  # spent and remaining over time
    charges: list[tuple] = field(default_factory=list)
    key_releases: list[tuple] = field(default_factory=list)
    continual: list[tuple] = field(default_factory=list)


def ledger_path(profile: Profile) -> str:
    """The profile's ledger: `[data] ledger`, or the one beside the database."""
    return profile.ledger or profile.database + ".dpsql-state"


def owner_view(profile: Profile) -> LedgerView:
    """Read the profile's ledger for the owner's page."""
    view = LedgerView(ledger_path(profile))
    if not Path(view.path).is_file():
        return view
    ledger = Ledger.existing(view.path)
    try:
        with ledger.holding():  # one reading under the ledger's lock: what is shown is what was verified
            view.exists = True
            view.problems = ledger.verify()
            view.head = ledger.head()
            if not view.problems:
                _fill(view, ledger, profile)
    finally:
        ledger.close()
    return view


def _fill(view: LedgerView, ledger: Ledger, profile: Profile) -> None:
    unit = ledger.unit  # ε at the δ not set apart for key releases, as the analysts' surfaces show it
    charges, releases = ledger.charges(), ledger.releases()
    view.key_delta, view.key_reserve = sum(delta for *_, delta, _ in releases), ledger.events
    capacity, spent = ledger.capacity, ledger.spent()
    view.total, view.spent = unit.amount(capacity), unit.amount(spent)
    view.remaining = unit.amount(max(capacity - spent, 0.0))
    by_seq = {c.seq: c for c in charges}
    limits = {a.name: None if a.epsilon is None and a.rho is None else unit.share(a.epsilon, a.rho)
              for a in profile.analysts.values()}
    for analyst in profile.analysts.values():
        limit = limits[analyst.name]
        mine = ledger.spent_by(analyst.name)
        left = capacity - spent if limit is None else min(limit - mine, capacity - spent)
        view.analysts.append(AnalystBudget(analyst.name, None if limit is None else unit.amount(limit),
                                           unit.amount(mine), unit.amount(max(left, 0.0)),
                                           sum(c.who == analyst.name for c in charges)))
    view.charts = _timeline_charts(ledger, unit, charges, view.analysts, limits)
    view.charges = [(c.seq, _time(c.at), c.who, c.table or "", _rounded(c.epsilon(unit.amount)),
                     _rounded(unit.amount(c.cost).rho), " ".join(c.statement.split())) for c in charges]
    emits: dict[tuple[str, str], int] = {}
    for seq, kind, table, name, delta, payload in releases:
        charge = by_seq.get(seq)
        if kind == KEYS:
            keys = released_keys(payload)
            view.key_releases.append((seq, _time(charge.at) if charge else "", charge.who if charge else "", table,
                                      name, len(keys), _keys_text(keys), f"{delta:g}"))
        elif kind == EMIT:
            query = name.rsplit("#", 1)[0]
            emits[(table, query)] = emits.get((table, query), 0) + 1
    for seq, kind, table, name, _, payload in releases:
        if kind == CONTINUAL:
            charge = by_seq.get(seq)
            view.continual.append((name, table, charge.who if charge else "", _time(charge.at) if charge else "",
                                   _payload(payload, "interval"), emits.get((table, name), 0),
                                   _payload(payload, "releases"), _payload(payload, "label"),
                                   " ".join(str(_payload(payload, "select")).split())))


def _timeline_charts(ledger: Ledger, unit: Budget, charges, analysts: list[AnalystBudget],
                     limits: dict[str, float | None]) -> list[Markup]:
    """ε spent over time, everyone's and each analyst's, each allowance a dashed line; and what each could still
    spend after every charge (within their allowance and what the ledger has left)."""
    if not charges:
        return []
    mine = {a.name: 0.0 for a in analysts}
    everyone = 0.0
    spent: dict[str, list] = {"all analysts": []}
    left: dict[str, list] = {"all analysts": [], **{a.name: [] for a in analysts}}
    for c in charges:
        everyone += c.cost
        mine[c.who] = mine.get(c.who, 0.0) + c.cost
        at = c.at.replace(tzinfo=timezone.utc).timestamp()
        spent["all analysts"].append((at, unit.amount(everyone).epsilon))
        spent.setdefault(c.who, []).append((at, unit.amount(mine[c.who]).epsilon))
        free = max(ledger.capacity - everyone, 0.0)
        left["all analysts"].append((at, unit.amount(free).epsilon))
        for name in left.keys() - {"all analysts"}:
            limit = limits.get(name)
            left[name].append((at, unit.amount(free if limit is None else max(min(limit - mine[name], free), 0.0))
                               .epsilon))
    levels = {"all analysts": unit.amount(ledger.capacity).epsilon}
    levels.update({a.name: a.allowance.epsilon for a in analysts if a.allowance is not None and a.name in spent})
    return [charts.lines(spent, "ε spent over time", "charged at (UTC)", "ε spent", x_kind="time", steps=True,
                         levels=levels),
            charts.lines(left, "ε remaining over time", "charged at (UTC)", "ε remaining", x_kind="time", steps=True)]


def _time(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def _rounded(x: float) -> float:
    return float(f"{x:.6g}")


def _keys_text(keys: list[str], shown: int = 8) -> str:
    text = ", ".join(str(k) for k in keys[:shown])
    return text + (f", … ({len(keys) - shown} more)" if len(keys) > shown else "")


def _payload(payload: Any, key: str) -> Any:
    return payload.get(key, "") if isinstance(payload, dict) else ""
