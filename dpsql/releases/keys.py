"""Key releases: DP partition selection of a key column nobody declared, charged through `Executor.charged`.

The step before a query grouped by such a column (`dpsql.handlers.key_release` decides when): the keys'
bounded counts are scanned, the keys whose noisy count clears the threshold τ are kept
(`mechanisms.partition_selection`), and the key set is charged together with the released counts (a
measurement of the query's COUNT over the new domain, so asking it again is free) and δ_τ, a δ event
taken from the δ the ledger set apart for key releases (`dpsql.budget.ledger`). A release where no key
clears τ is charged too and answers with no rows; it does not fix the column's domain, so a later release
may still find keys.

`selection` chooses the noise: the discrete Gaussian of the share's ρ, or on a ledger composed exactly the
discrete Laplace of the same share of the budget (its threshold is lower: τ 16 against 25 for one release at
ε = 1), whichever of those that fit has the lower threshold, then the lower variance.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from dpsql.budget.ledger_entries import KEYS, Record, released_keys
from dpsql.budget.noise_charges import laplace_eligible, laplace_epsilon
from dpsql.errors import BudgetExceededError, NotSupportedError
from dpsql.executor import Executor, Pending, Release
from dpsql.sql.compiler import CompiledQuery, KeySelection
from dpsql.tables.table import Table
from mechanisms.measurement import GAUSSIAN, Measurement
from mechanisms.partition_selection import (PartitionSelection, gaussian_selection, laplace_selection,
                                            select_partitions)
from mechanisms.privacy_filter import Piece

__all__ = ["KeyRelease", "selection", "release"]

# A calibrated selection, what it charges in ρ, and its pieces (None: the Gaussian of that ρ).
KeyRelease = tuple[PartitionSelection, float, "tuple[Piece, ...] | None"]


def selection(executor: Executor, chosen: KeySelection, share: float, delta: float) -> KeyRelease:
    """The partition selection a share ρ buys for a table's key column (each privacy unit adds at most k rows,
    over any keys) with δ_τ = `delta`, and what it charges (the module docstring: which noise)."""
    if executor.budget.noise != GAUSSIAN:
        raise NotSupportedError(
            "this ledger accounts pure ε-DP, and releasing keys nobody declared spends a δ (the chance a "
            "rare key shows): use a ledger with a δ (zCDP), or declare the column's values")
    ledger, k = executor.ledger, chosen.table.contribution
    options: list[KeyRelease] = [(gaussian_selection(share, delta, max_keys=k, max_per_key=k, max_rows=k), share,
                                  None)]
    if laplace_eligible(executor.budget, ledger):
        laplace = laplace_selection(laplace_epsilon(ledger, share), delta, max_keys=k, max_per_key=k, max_rows=k)
        piece = Piece.laplace(laplace.cost, float(laplace.noise.scale), k)
        options.append((laplace, piece.rho, (piece,)))

    def fits(option: KeyRelease) -> bool:
        try:
            ledger.check_delta(option[1], delta, option[2])
        except BudgetExceededError:
            return False
        return True

    fitting = [o for o in options if fits(o)] or options[:1]  # none fits: the Gaussian's refusal says why
    return min(fitting, key=lambda o: (o[0].threshold, o[0].noise.variance))


def release(executor: Executor, chosen: KeySelection, table: Table, share: float, delta: float, statement: str,
            over_keys: Callable[[tuple[str, ...]], CompiledQuery], rows: str) -> tuple[tuple[str, ...], KeyRelease]:
    """Release keys of a key column by partition selection and charge them (the share ρ = `share` bought as
    `selection` chooses, δ_τ = `delta`) with their noisy counts, as a measurement of the query's COUNT block
    compiled over the column's keys (`over_keys`). `table` is the table as known now: keys it has released are
    not selected again but counted in the same release, and the keys found are appended to them. `rows` names
    the rows the release counts (`dpsql.tables.key_domains.rows_counted`). Returns the new keys (sorted: a public
    order; finding none is a charged release all the same) and the selection with its charge."""
    bought = selection(executor, chosen, share, delta)
    calibrated, cost, pieces = bought
    executor.ledger.check_delta(cost, delta, pieces)
    value = share if pieces is None else pieces[0].value  # the measurement's cost: ρ, or ε for Laplace
    column = chosen.column
    known = np.asarray(table.column(column).values if table.column(column).released else (), dtype=str)
    detail = f"partition selection of {column} (τ = {calibrated.threshold})"

    def draw() -> Release:
        keys, cells, counts = executor.backend.key_counts(chosen.table, column, chosen.clique,
                                                          executor.bounding_key(table))
        kept = chosen.passes(cells) & (counts > 0)
        distinct, which = np.unique(keys[kept].astype(str), return_inverse=True)
        per_key = np.bincount(which, weights=counts[kept], minlength=len(distinct)).astype(np.int64)
        new = ~np.isin(distinct, known)
        picked, noisy = select_partitions(per_key[new], calibrated.threshold, calibrated.noise, executor.rng)
        released = tuple(str(k) for k in distinct[new][picked])
        measured = []
        if known.size or released:  # the known keys' counts, noisy as the selection's: public keys, no τ
            position = {k: i for i, k in enumerate(known.tolist())}
            old = np.zeros(known.size, dtype=np.int64)
            old[[position[k] for k in distinct[~new].tolist()]] = per_key[~new]
            query = over_keys((*known.tolist(), *released))
            count = query.aggregates[0].blocks[0]
            clique = count.attributes(query.table.domain)
            values = np.concatenate([old + calibrated.noise.sample(known.size, executor.rng), noisy])
            measured = [Measurement(clique, calibrated.noise.kind, value, calibrated.noise.variance,
                                    np.asarray(values, dtype=float), None, count.matrix(query.table.domain, clique))]
        return Release(table, cost, statement, measured, None, detail,
                       Record(KEYS, column, {"keys": list(released), "rows": rows}, calibrated.delta), pieces)

    [done] = executor.charged([Pending(table, cost, statement, detail, draw, pieces)])
    return tuple(released_keys(done.record.payload)), bought
