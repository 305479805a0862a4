"""Deployment: where the data, catalog and ledger are, and what an analyst's surface may touch.

`profile` is the data owner's TOML naming every file and each analyst's allowance; `workspace` is
the database where an analyst's public SQL runs, apart from the protected data; `output_files`
says which files a surface may write or read; `demo` and `demo_data` are the embedded demo.
"""
