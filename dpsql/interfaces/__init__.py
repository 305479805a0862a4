"""Interfaces: the ways people reach dpsql, each a thin layer over `dpsql.session.Session`.

`dbapi` (PEP 249, `dpsql.connect`), `extension` (DP answers on an existing DuckDB connection),
`sqlalchemy_dialect`, `shell` (the interactive SQL shell), `server` (the PostgreSQL wire
protocol, `dpsql serve`), `console` (the web console `dpsql serve` also serves) and `cli` (the
`dpsql` command); `formatting` renders results as text. None of them chooses the data, catalog
or ledger for an analyst: `dpsql.deployment.profile` does.
"""
