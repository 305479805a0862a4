"""The SQL front end: from an analyst's text to linear queries over a table's domain.

- `statements`: splitting scripts, and dpsql's own statements (BEGIN/END WORKLOAD, EXPLAIN,
  SET dpsql.*, WEIGHT hints);
- `public`: which statements are DP queries, and the allowlist of public SQL;
- `compiler`: a DP query (sqlglot AST) to blocks of Kronecker linear queries and a result
  template; `aggregates` compiles each aggregate to blocks, `grouping_sets` GROUPING SETS/ROLLUP/CUBE,
  `expressions` compiles conditions and values, `evaluation` has DuckDB evaluate any
  other scalar expression on the declared domain, `grouping` groups by expressions, `lookups`
  joins with public tables; `size_bound` refuses an aggregate too large to plan, from its
  declared sizes.

To add a SQL construct: teach `expressions` (a condition or a value: an indicator or a
weight over a declared column's bins) or `compiler` (the query's shape: aggregates, GROUP
BY, outer expressions in the template), keep everything data-independent (the blocks
may depend on the catalog and public tables only), refuse what is not supported with a
`NotSupportedError` that names it, and add the construct to tests/test_compiler.py, which
compares compiled blocks with DuckDB's exact answers.
"""
