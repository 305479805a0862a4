"""Hybrid tables (BLENDER): local-DP reports of most users, raw rows of those who opted in.

A local table with ``opt_in = "<table>"`` names the central protected table holding the raw rows
of the users who opted in to central DP. It must declare the same columns and its size public
(``rows``: the opt-in group's size, which the blend divides by, as the seed does). A query over
the hybrid table is measured and charged over the opt-in table like any central query
(`measured_as`), and its counts are blended with the reports' with the variance-optimal weights
(`mechanisms.ldp.hybrid_answers`), assuming, as the seed does, that who opts in does not depend
on the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dpsql.errors import CatalogError
from dpsql.tables.local_reports import LocalReportTable
from dpsql.tables.table import Table


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
    def declared(cls, name: str, columns: dict, settings: dict) -> "HybridTable":
        local = LocalReportTable.declared(name, columns, settings)
        return cls(name, columns, local.public_rows, local.time_column, local.protocol, local.local_epsilon,
                   local.protocol_options, settings.get("opt_in"))

    def check_declaration(self) -> None:
        super().check_declaration()
        if not isinstance(self.opt_in, str) or not self.opt_in:
            raise CatalogError(f"table {self.name!r}: opt_in names the central table of the users who opted in")

    def signature_note(self) -> str:
        return f"{super().signature_note()}; opt-in users in {self.opt_in}"

    def measured_as(self, lookup: Callable[[str], Table | None]) -> Table:
        """The opt-in users' central table."""
        return lookup(self.opt_in)

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
