"""Tables: what the data owner protects, declared in the catalog.

`catalog` reads the declarations (TOML or Python) into protected tables; `columns`,
`column_declarations` and `temporal` are the public domains of their columns; `key_domains`
grows a key column's domain across releases; `edge_tables` declares graphs; `validation`
records the tables the owner checked row by row.
"""
