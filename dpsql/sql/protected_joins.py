"""Joins of protected tables in a query's FROM: compiled into one `dpsql.tables.joined.JoinedTable`.

``FROM orders o JOIN customers c ON o.customer_id = c.customer_id`` (or ``USING (customer_id)``),
INNER or LEFT, chains of several tables and self-joins on the unit: each join's equalities must be
declared keys (`dpsql.tables.joined.declared_pairs`); anything else is refused with the declaration
that would allow it. The joins of public tables that remain are lookups (`dpsql.sql.lookups`).
"""

from __future__ import annotations

from sqlglot import exp

from dpsql.errors import NotSupportedError, ProgrammingError
from dpsql.tables.catalog import Catalog
from dpsql.tables.joined import INNER, LEFT, JoinedTable, JoinPart, check_joinable, declared_pairs, how_to_declare
from dpsql.tables.table import Table


def protected_join(tree: exp.Select, catalog: Catalog, first: Table, alias: str | None
                   ) -> tuple[JoinedTable | None, list[exp.Join]]:
    """The join of `first` (FROM's protected table) with the protected tables `tree`'s joins name (None when
    it joins none), and the joins left: public lookups, joined to the protected part (`dpsql.sql.lookups`)."""
    joins = tree.args.get("joins") or []
    protected = [j for j in joins if isinstance(j.this, exp.Table) and catalog.get(j.this.name) is not None]
    public = [j for j in joins if all(j is not p for p in protected)]
    if not protected:
        return None, public
    if any(isinstance(j.this, exp.Table) and catalog.get(j.this.name) is not None for j in joins[len(protected):]):
        raise NotSupportedError("join the protected tables first, then the public lookup tables")
    sources = [(first, alias)] + [(catalog.get(j.this.name), j.this.alias or None) for j in protected]
    check_joinable([t for t, _ in sources])
    names = [t.name.lower() for t, _ in sources]
    labels = []
    for table, given in sources:
        if names.count(table.name.lower()) > 1 and not given:
            raise ProgrammingError(f"table {table.name!r} is joined to itself: give each occurrence an alias")
        labels.append(given if names.count(table.name.lower()) > 1 else table.name)
    aliases = {}  # what the query may qualify a part's columns with -> its label
    for (table, given), label in zip(sources, labels):
        aliases[label.lower()] = label
        if given:
            aliases[given.lower()] = label
    parts = [JoinPart(labels[0], first)]
    for join, (table, _), label in zip(protected, sources[1:], labels[1:]):
        parts.append(JoinPart(label, table, _how(join), _equalities(join, parts, label, table, aliases)))
    joined = JoinedTable.of(parts, catalog.join_bound([t.name for t, _ in sources]))
    for name, label in aliases.items():
        joined.with_alias(name, label)
    return joined, public


def _how(join: exp.Join) -> str:
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if kind in ("CROSS", "NATURAL") or join.args.get("method"):
        raise NotSupportedError(f"{kind or join.args.get('method')} JOIN of protected tables is not supported: join "
                                "them ON their declared keys")
    if side in ("RIGHT", "FULL"):
        raise NotSupportedError(f"{side} JOIN of protected tables is not supported: use INNER or LEFT JOIN (put the "
                                "table whose rows must all stay first)")
    return LEFT if side == "LEFT" else INNER


def _equalities(join: exp.Join, parts: list[JoinPart], label: str, table: Table, aliases: dict[str, str]
                ) -> tuple[tuple[str, str, str], ...]:
    """(earlier part's label, its column, this part's column) for each equality of the join, each a declared key."""
    earlier = {p.label: p.table for p in parts}
    using = join.args.get("using")
    if using:
        out = []
        for ident in using:
            column = ident.name.lower()
            match = next((p for p in reversed(parts) if (column, column) in declared_pairs(p.table, table)), None)
            if match is None:
                raise NotSupportedError(f"USING ({ident.name}) joining {table.name!r}: {how_to_declare(parts[-1].table, table)}")
            out.append((match.label, column, column))
        return tuple(out)
    on = join.args.get("on")
    if on is None:
        raise NotSupportedError(f"joining protected table {table.name!r} needs ON (or USING) with its declared keys")
    conjuncts = list(on.flatten()) if isinstance(on, exp.And) else [on]
    out = []
    for eq in conjuncts:
        while isinstance(eq, exp.Paren):
            eq = eq.this
        if not (isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column) and isinstance(eq.expression, exp.Column)):
            raise NotSupportedError(f"a join of protected tables compares declared keys with =, not {eq.sql()!r}: "
                                    f"{how_to_declare(parts[-1].table, table)}")
        sides = [(aliases.get(c.table.lower()), c.name.lower(), c) for c in (eq.this, eq.expression)]
        if any(s[0] is None for s in sides):
            raise ProgrammingError(f"qualify both columns of {eq.sql()!r} with their tables' names or aliases")
        mine = [s for s in sides if s[0] == label]
        theirs = [s for s in sides if s[0] in earlier and s[0] != label]
        if len(mine) != 1 or len(theirs) != 1:
            raise NotSupportedError(f"{eq.sql()!r} must compare a column of {label!r} with one of a table joined "
                                    "before it")
        other, mine = theirs[0], mine[0]
        if (other[1], mine[1]) not in declared_pairs(earlier[other[0]], table):
            raise NotSupportedError(f"join on {eq.sql()}: {how_to_declare(earlier[other[0]], table)}")
        out.append((other[0], other[1], mine[1]))
    return tuple(out)
