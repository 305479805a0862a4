"""Key domains: a key column's keys, found by partition selection and grown across releases.

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
from typing import Any

import numpy as np

from dpsql.tables.table import Table
from dpsql.tables.columns import KEY
from dpsql.budget.ledger_entries import released_keys
from dpsql.sql.compiler import KeySelection
from mechanisms.coarsening import key_growth
from mechanisms.matrices import Identity, Kronecker, Matrix, Product, Weighted
from mechanisms.measurement import Measurement

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
