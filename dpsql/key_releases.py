"""Key releases: a key column's domain, found by partition selection and grown across releases.

A key column (`type = "key"`) declares no values. A COUNT grouped by it alone releases the
keys whose noisy count clears τ (DP partition selection: the query's share of ρ and
`key_delta` of δ); those keys, and one bin for every other key, are the column's domain from
then on, for every connection of the ledger.

**How the domain grows.** A release counts the rows its WHERE keeps, so a filtered release
finds only the keys frequent among those rows. It must not freeze the column for everyone:
each release records which rows it counted (`rows_counted`: "all", or a digest of its WHERE
as a set of cells of the declared columns, so WHEREs written differently that keep the same
cells are one). A later COUNT grouped by the column whose rows no release has counted yet
(neither all rows nor the same rows) releases again: it counts every key, selects among the
keys not released yet those that clear τ and appends them (sorted) to the domain; the keys
released before are counted in the same release (their noisy counts need no threshold: they
are public already), so its answer covers every key. A release over rows already counted is
not repeated: those keys are the answer, free. A release that found no key while the column
had none counts nothing (the column stays unreleased).

**Why older measurements stay valid.** A measurement taken when the column had n keys saw
the keys released later inside its last bin ("every other key"): over the grown domain it is
the same measurement composed with a coarsening of the key axis (`mechanisms.coarsening`),
which is how the model reads it (`over_current`). The ledger knows how many keys each
measurement saw (the releases charged before it), and refuses a charge computed over a key
domain another connection has grown meanwhile, so that count is exact. A measurement of one
block stored by its fingerprint only cannot be re-expressed: after a growth it answers
nothing more (its charge stands; the block is measured again when asked).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsql.catalog import Table
from dpsql.columns import KEY
from dpsql.errors import Error, NotSupportedError
from dpsql.ledger import KEYS, released_keys
from dpsql.result import Result, assemble
from dpsql.sql.compiler import CompiledQuery, KeySelection
from mechanisms.coarsening import key_growth
from mechanisms.matrices import Identity, Kronecker, Matrix, Product, Weighted
from mechanisms.measurement import Measurement
from mechanisms.partition_selection import count_released_with

if TYPE_CHECKING:
    from dpsql.session import Session

ALL_ROWS = "all"


def rows_counted(selection: KeySelection) -> str:
    """Which rows a release of keys counts, as a public name: "all", or a digest of its WHERE as the set of
    cells it keeps over the declared columns it depends on."""
    mask = np.asarray(selection.where).reshape(-1) != 0
    if mask.all():
        return ALL_ROWS
    clique = selection.clique
    if clique:
        mask = mask.reshape(selection.table.domain.shape(clique))
        varies = []
        for axis, name in enumerate(clique):
            first = np.take(mask, [0], axis=axis)
            if np.array_equal(np.broadcast_to(first, mask.shape), mask):
                mask = first
            else:
                varies.append(name)
        mask = mask.reshape([n for n, name in zip(mask.shape, clique) if name in varies])
        clique = tuple(varies)
    text = json.dumps([list(clique), list(mask.shape)]) + np.packbits(mask.reshape(-1)).tobytes().hex()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def covered(payloads: list[Any], rows: str) -> bool:
    """Whether a column's releases (their record payloads, in release order) have counted these rows: one that
    counted all rows, or the same rows, at a time the column had keys."""
    keys = 0
    for p in payloads:
        keys += len(released_keys(p))
        counted = p["rows"] if isinstance(p, dict) else ALL_ROWS  # releases before domains grew counted all
        if keys and counted in (ALL_ROWS, rows):
            return True
    return False


def over_current(m: Measurement, table: Table, then: dict[str, int]) -> Measurement | None:
    """A stored measurement over the table's key domains now, taken when its key columns had `then` keys
    released (`Ledger.stored_measurements`). None where it answers nothing here: `table` predates keys the
    measurement saw (a session that has not read them yet), or it measured one block by fingerprint over a
    domain that has grown since."""
    grown: dict[str, Matrix] = {}
    for name in m.clique:
        column = table.columns.get(name)
        if name not in table.domain.attributes:
            return None
        if column is None or column.kind != KEY:
            continue
        before, now = then.get(name, 0), len(column.values)
        if not 0 < before <= now:
            return None
        if before < now:
            grown[name] = key_growth(before, now)
    if not grown:
        return m
    if m.key is not None:
        return None
    factors = [grown.get(a) or Identity(table.domain.size_of(a)) for a in m.clique]
    return replace(m, strategy=Kronecker(factors) if m.is_marginal else _composed(m.strategy, factors))


def _composed(strategy: Matrix, factors: list[Matrix]) -> Matrix:
    """strategy · (⊗ factors), kept a Kronecker product (one factor per attribute) where the strategy is one."""
    weight, base = (strategy.weight, strategy.base) if isinstance(strategy, Weighted) else (1.0, strategy)
    if isinstance(base, Kronecker) and len(base.factors) == len(factors):
        product = Kronecker([f if isinstance(g, Identity) else Product(f, g) for f, g in zip(base.factors, factors)])
        return product if weight == 1.0 else Weighted(product, weight)
    return Product(strategy, Kronecker(factors))


class KeyReleases:
    """A session's key releases: which query must release keys, the release, and its EXPLAIN."""

    def __init__(self, session: "Session"):
        self.session = session

    def needed(self, compiled: Any, sql: str, params, weight: float) -> KeySelection | None:
        """What partition selection a compiled query needs first: its unreleased key column's, or, grouped by
        a released key column alone over rows no release of it has counted, the selection that grows it."""
        if not isinstance(compiled, CompiledQuery):
            return None
        if compiled.selection is not None:
            return compiled.selection
        table = compiled.table
        columns = [g for g in compiled.group_by if g in table.columns and table.column(g).kind == KEY]
        if len(compiled.groups) != 1 or not columns:
            return None
        s = self.session
        reopened = {k: v for k, v in s.ledger.key_sets().items()
                    if (k[0].lower(), k[1]) != (table.name.lower(), columns[0])}
        try:
            selection = s.compile(sql, params, weight=weight, catalog=s.declared.with_keys(reopened)).selection
        except Error:
            return None  # not a query that may release keys: it is answered over the keys released
        if selection is None or covered(self._payloads(table, columns[0]), rows_counted(selection)):
            return None
        return selection

    def _payloads(self, table: Table, column: str) -> list[Any]:
        return [p for _, name, p in self.session.ledger.records(KEYS, table.name) if name == column]

    def release(self, selection: KeySelection, sql: str, params, weight: float) -> Result:
        """Release keys by partition selection (the query share, and `key_delta` of δ), charged, then answer
        the query over the column's keys (free). Finding no key while the column has none answers no rows
        (charged all the same)."""
        s = self.session
        if s.max_rmse is not None:
            raise NotSupportedError("releasing keys is sized by a budget, not by max_rmse: SET dpsql.max_rmse = 0 "
                                    "first (the counts' error is then shown)")
        name, column = selection.table.name, selection.column
        table = s.catalog.get(name)
        had = len(table.column(column).values) if table.column(column).released else 0

        def over(keys: tuple[str, ...]) -> CompiledQuery:
            return s.compile(sql, params, weight=weight, catalog=s.catalog.with_keys({(name, column): keys}))

        keys = s.executor.release_keys(selection, table, s.query_share, s.key_delta, sql, over,
                                       rows_counted(selection))
        if keys or had:
            result = s.executor.execute([s.compile(sql, params, weight=weight)], sql, s.sizing())[0]
        else:  # nothing to measure: the query's shape over no keys (no rows)
            shape = over(())
            result = assemble(shape, shape.zero_answers())
        result.charged = s.query_share
        result.charge_text = s.executor.charge_text(s.query_share)
        tau = s.executor.selection(selection, s.query_share, s.key_delta).threshold
        if had:
            released = (f"{len(keys)} more keys of {column} released (it had {had}; this WHERE's rows had not been "
                        "counted by a release)")
        elif keys:
            released = f"{len(keys)} keys of {column} released"
        else:
            released = f"no key of {column} cleared the threshold, so none was released (the column stays unreleased)"
        result.notes = [*result.notes, (
            f"{released} by partition selection (noisy count above τ = {tau}; δ = {s.key_delta:g} spent)"
            + (": later queries see these keys as the column's domain; counts near τ are biased upward (only "
               "those that cleared it are shown)" if keys else ""))]
        return result

    def explain(self, selection: KeySelection) -> Result:
        """EXPLAIN of a query that must release keys first: the partition selection, its threshold and cost."""
        s = self.session
        chosen = s.executor.selection(selection, s.query_share, s.key_delta)
        sigma = float(chosen.noise.variance) ** 0.5
        at = [count_released_with(p, chosen.threshold, chosen.noise) for p in (0.05, 0.5, 0.95)]
        k = selection.table.contribution
        table = s.catalog.get(selection.table.name)
        had = len(table.column(selection.column).values) if table.column(selection.column).released else 0
        why = (f"{had} keys released; this WHERE's rows were not counted by a release, so it grows the domain"
               if had else "its keys are not declared")
        lines = [
            f"[{selection.table.name}] Key release: partition selection of {selection.column} ({why})",
            f"  each key's count (at most {k} row(s) per privacy unit, over any keys) gets discrete Gaussian noise of "
            f"std {sigma:.4g}; keys whose noisy count exceeds τ = {chosen.threshold} are released",
            f"  a key with true count {at[0]} / {at[1]} / {at[2]} is released with probability 5% / 50% / 95%; a key "
            f"only one unit holds, with probability at most δ = {s.key_delta:g}",
            "  the released keys join the column's domain, and the noisy counts of all its keys answer this query "
            "(free when asked again)",
        ]
        remaining = s.ledger.remaining()
        verdict = "fits in" if s.query_share <= remaining * (1 + 1e-9) else "EXCEEDS"
        lines.append(f"Total cost {s.amount(s.query_share)} and δ = {s.key_delta:g} for the key release; "
                     f"{verdict} the remaining budget {s.amount(remaining)}")
        return Result(["plan"], [(line,) for line in lines], kind="explain", plan="\n".join(lines))
