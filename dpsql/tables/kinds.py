"""The registry of declared table kinds: which class a ``[tables.<name>]`` declaration makes.

`KINDS` is tried in order; the first kind whose ``declares(settings)`` is true builds the table
with ``declared(name, columns, settings)`` (`settings`: the declaration's keys other than its columns,
as in the TOML). Graph tables come from ``[graphs]`` (`graph_tables.graph_tables`) and distinct-unit
tables from queries (`Table.distinct_units`), so they are not declared here.
"""

from __future__ import annotations

from dpsql.errors import CatalogError
from dpsql.tables.hybrid import HybridTable
from dpsql.tables.local_reports import OPTIONS, LocalReportTable
from dpsql.tables.row_level import RowTable
from dpsql.tables.streams import StreamTable
from dpsql.tables.table import Table
from dpsql.tables.unit_bounded import UnitBoundedTable

KINDS: tuple[type[Table], ...] = (HybridTable, LocalReportTable, StreamTable, UnitBoundedTable, RowTable)
CENTRAL, LOCAL = "central", "local"  # who randomizes a table's rows: dpsql (central DP) or each user's device
SETTINGS = ("privacy_unit", "max_rows_per_unit", "rows", "time", "append_only", "confident_mode", "model", "protocol", "epsilon",
            *OPTIONS, "opt_in")  # the keys a table declaration may have beside its columns


def declared_table(name: str, columns: dict, settings: dict) -> Table:
    """The table a declaration makes: its kind's class, checked (CatalogError says what is wrong)."""
    model = settings.get("model", CENTRAL)
    if model not in (CENTRAL, LOCAL):
        raise CatalogError(f"table {name!r}: model is \"central\" (default) or \"local\", not {model!r}")
    if model == CENTRAL and any(settings.get(k) is not None for k in ("protocol", "epsilon", "opt_in", *OPTIONS)):
        raise CatalogError(f"table {name!r}: protocol and epsilon declare a local table (model = \"local\")")
    if not isinstance(settings.get("append_only", False), bool):
        raise CatalogError(f"table {name!r}: append_only is true or false, and needs time = \"<column>\"")
    confident = settings.get("confident_mode", False)
    if not isinstance(confident, bool):
        raise CatalogError(f"table {name!r}: confident_mode is true or false")
    kind = next(k for k in KINDS if k.declares(settings))
    table = kind.declared(name, columns, settings)
    table.confident_mode = confident
    return table
