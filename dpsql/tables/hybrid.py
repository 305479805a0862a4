"""Hybrid tables (BLENDER): local-DP reports of most users, raw rows of those who opted in.

A local table with ``opt_in = "<table>"`` names the central protected table holding the raw rows
of the users who opted in to central DP. It must declare the same columns and its size public
(``rows``: the opt-in group's size, which the blend divides by, as the seed does). A query over
the hybrid table is measured and charged over the opt-in table like any central query
(`measured_as`), and its counts are blended with the reports' with the variance-optimal weights
(`mechanisms.ldp.hybrid_answers`), assuming, as the seed does, that who opts in does not depend
on the data.

BLENDER as published (seeds/000, Alg 2.1–2.5): with ``protocol = "grr2"`` the hybrid table's columns
may be key columns, one (the query) or two (query, URL). Their domain is the head list the opt-in
group discovers: the keys released by partition selection over the opt-in table
(``SELECT q, COUNT(*) FROM <opt-in> GROUP BY q``, charged to the central ledger like any key
release), ⋆ (every other key) last, shared by the hybrid table (`Catalog.with_keys`). The clients
report their record over it with the two-level GRR (`mechanisms.ldp.client.head_list`), and the
hybrid table is answered by blending as above. The head list is fixed once discovered: a release
that would grow it is refused (the clients' reports index the list they were made over).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dpsql.errors import CatalogError
from dpsql.tables.columns import KEY
from dpsql.tables.local_reports import LocalReportTable
from dpsql.tables.table import Table
from mechanisms.domain import Domain
from mechanisms.ldp.answering import client_protocol
from mechanisms.ldp.client import Protocol


@dataclass
class HybridTable(LocalReportTable):
    """Local reports blended with the opt-in users' central table, `opt_in`."""

    kind = "hybrid"
    answered_by_reports = False

    opt_in: str | None = None

    @classmethod
    def declares(cls, settings: dict) -> bool:
        return settings.get("model") == "local" and settings.get("opt_in") is not None

    @classmethod
    def more(cls, settings: dict) -> dict:
        return {"opt_in": settings.get("opt_in")}

    def check_declaration(self) -> None:
        super().check_declaration()
        if not isinstance(self.opt_in, str) or not self.opt_in:
            raise CatalogError(f"table {self.name!r}: opt_in names the central table of the users who opted in")

    def head_list(self) -> bool:
        return self.protocol == "grr2"

    def discovered(self) -> tuple[str, ...]:
        """Its key columns: the head list its opt-in group discovers."""
        return tuple(n for n, c in self.columns.items() if c.kind == KEY) if self.head_list() else ()

    @property
    def client(self) -> Protocol:
        """The client protocol over the columns as known now (a head list's released keys and ⋆)."""
        if not self.discovered():
            return super().client
        return client_protocol(self.protocol, float(self.local_epsilon), Domain(
            tuple(self.columns), tuple(c.size for c in self.columns.values())), self.protocol_options)

    def signature_note(self) -> str:
        return f"{super().signature_note()}; opt-in users in {self.opt_in}"

    def measured_as(self, lookup: Callable[[str], Table | None]) -> Table:
        """The opt-in users' central table (with the head list's keys as this table knows them)."""
        companion = lookup(self.opt_in)
        keys = {n: c.values for n, c in self.columns.items() if c.kind == KEY and c.released}
        return companion.with_keys(keys) if companion is not None else None

    def check_companion(self, companion: Table | None) -> None:
        """The opt-in table must be a central table of the same columns, of public size."""
        if companion is None or isinstance(companion, LocalReportTable):
            raise CatalogError(f"table {self.name!r}: opt_in names {self.opt_in!r}, which must be a central "
                               "protected table of the catalog (the opted-in users' own rows)")
        ours = [(c.name, c.declaration()) for c in self.columns.values()]
        if [(c.name, c.declaration()) for c in companion.columns.values()] != ours:
            raise CatalogError(f"table {self.name!r}: its opt-in table {companion.name!r} must declare the same "
                               "columns, in the same order")
        if companion.public_rows is None:
            raise CatalogError(f"table {self.name!r}: its opt-in table {companion.name!r} must declare its size "
                               "public (rows = ...): the blend divides by the opt-in group's size, as BLENDER does")
