"""Tables: what the data owner protects, declared in the catalog, one class per kind of table.

`catalog` reads the declarations (TOML or Python); `columns`, `column_declarations` and `temporal`
are the public domains of their columns; `key_domains` grows a key column's domain across
releases; `edge_tables` declares graphs; `validation` records the tables the owner checked row by
row; `privacy_units` follows a unit along foreign keys.

Every protected table is a `table.Table` of one kind, and the rest of dpsql asks the kind rather
than branching on it: which rows a scan counts (`source_sql`), how its counts are computed on a
backend (`count_marginals`, `count_windows`), how much one privacy unit changes them
(`contribution`, `stream_contribution`), what it refuses (`check_declaration`, `check_stream`,
`distinct_units`), and what EXPLAIN and the signature say of it. The kinds:

- `row_level.RowTable`: one row is the unit;
- `unit_bounded.UnitBoundedTable`: a privacy unit (a column, or foreign keys to one), k rows each;
- `streams.StreamTable`: append-only by time, each unit's first k rows kept;
- `graph_tables.GraphEdgeTable`, `graph_tables.GraphNodeTable`: a graph's edges and degrees (node DP);
- `local_reports.LocalReportTable`: local-DP reports, answered by the protocol's estimate;
- `hybrid.HybridTable`: local reports blended with the opt-in users' central table;
- `distinct_units.DistinctUnitsTable`: the (unit, cell) pairs COUNT(DISTINCT unit) counts (derived);
- `joined.JoinedTable`: protected tables of one unit joined along declared keys (derived from a query).

**To add a kind**: write a module here with a `Table` subclass that overrides what differs (its
fields come after the base's and have defaults), with the classmethods ``declares(settings)`` and
``declared(name, columns, settings)``, and add it to `kinds.KINDS` (the first kind that declares a
``[tables.<name>]`` section builds it; put it before the kinds it refines). New declaration keys go
in `kinds.SETTINGS`. Test it with the catalog tests and, if it changes sensitivities, a privacy audit.
"""
