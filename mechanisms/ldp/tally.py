"""What the aggregator reads of a local table's reports: the payload columns each protocol stores and
their tally.

A report row keeps its client payload (`client.PROTOCOLS[...].report(value)["payload"]`) in
columns named by its keys. A `Payload` says which of them the tally reads: the drawn `stratum`
(a level, a marginal), the supported `item` (one value or index) or `items` (a list of cells), a
±1 `sign` summed per item, or local hashing's `(a, b, y)` (`hashed`: the items are the cells j
with ((a·j + b) mod P) mod g = y, and `pairs` asks for the co-support counts of item pairs). A
`ReportTally` holds, per (stratum, item), how many reports support the item and the sum of
their signs, and per stratum how many reports drew it (`tally_payloads` builds it from payload
dicts; a database backend computes the same with one GROUP BY).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Payload", "ReportTally", "tally_payloads"]


@dataclass(frozen=True)
class Payload:
    """Which payload keys (= report columns) a protocol's tally reads."""

    item: str | None = None
    items: str | None = None
    stratum: str | None = None
    sign: str | None = None
    hashed: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        named = (self.stratum, self.item, self.items, self.sign)
        return tuple(dict.fromkeys(c for c in named if c is not None)) + (("a", "b", "y") if self.hashed else ())


@dataclass(frozen=True)
class ReportTally:
    """Per (stratum, item): supporting reports and the sum of their signs; per stratum: reports that drew it."""

    reports: int
    stratum: np.ndarray
    item: np.ndarray
    count: np.ndarray
    signs: np.ndarray
    drawn: dict[int, int] = field(default_factory=dict)
    pairs: np.ndarray | None = None  # rows (j, k, count): reports supporting both j and k (local hashing)

    def dense(self, stratum: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(counts, sums of signs) over items 0 .. size − 1 of one stratum; other items are ignored."""
        keep = (self.stratum == stratum) & (self.item >= 0) & (self.item < size)
        counts, sums = np.zeros(size), np.zeros(size)
        np.add.at(counts, self.item[keep], self.count[keep])
        np.add.at(sums, self.item[keep], self.signs[keep])
        return counts, sums

    def lookup(self, stratum: int, items) -> tuple[np.ndarray, np.ndarray]:
        """(counts, sums of signs) of the given item keys of one stratum (0 where none)."""
        mine = self.stratum == stratum
        found = {int(j): (c, t) for j, c, t in zip(self.item[mine], self.count[mine], self.signs[mine])}
        rows = np.array([found.get(int(j), (0.0, 0.0)) for j in items], dtype=float).reshape(-1, 2)
        return rows[:, 0], rows[:, 1]

    def drew(self, stratum: int) -> int:
        return int(self.drawn.get(int(stratum), 0))

    def co_support(self, size: int) -> np.ndarray:
        """The size × size matrix of co-support counts."""
        out = np.zeros((size, size))
        if self.pairs is not None and len(self.pairs):
            j, k, c = (np.asarray(self.pairs)[:, i] for i in range(3))
            keep = (j >= 0) & (j < size) & (k >= 0) & (k < size)
            np.add.at(out, (j[keep].astype(np.int64), k[keep].astype(np.int64)), c[keep])
        return out


def _supported(payload: Payload, row: dict, hashing) -> list[int]:
    if payload.hashed:
        return [j for j in range(hashing.values) if hashing.hash(row["a"], row["b"], j) == row["y"]]
    return list(row[payload.items]) if payload.items else [row[payload.item]]


def tally_payloads(payloads: list[dict], payload: Payload, hashing=None) -> ReportTally:
    """The tally of payload dicts (`hashing`: the `olh` client, whose hash gives the supported cells)."""
    cells: dict[tuple[int, int], list[float]] = {}
    drawn: dict[int, int] = {}
    pairs: dict[tuple[int, int], int] = {}
    for row in payloads:
        s = int(row[payload.stratum]) if payload.stratum else 0
        drawn[s] = drawn.get(s, 0) + 1
        supported = _supported(payload, row, hashing)
        for j in supported:
            entry = cells.setdefault((s, int(j)), [0.0, 0.0])
            entry[0] += 1
            entry[1] += row[payload.sign] if payload.sign else 0
        if payload.hashed:
            for j in supported:
                for k in supported:
                    pairs[(j, k)] = pairs.get((j, k), 0) + 1
    keys = np.array(list(cells), dtype=np.int64).reshape(-1, 2)
    values = np.array(list(cells.values()), dtype=float).reshape(-1, 2)
    pair_rows = np.array([(j, k, c) for (j, k), c in pairs.items()], dtype=float).reshape(-1, 3) \
        if payload.hashed else None
    return ReportTally(len(payloads), keys[:, 0], keys[:, 1], values[:, 0], values[:, 1], drawn, pair_rows)
