"""The budget: what analysts may spend, and the durable record of what they spent.

`units` converts what people say (ε, δ, ρ) into the ledger's unit; `ledger` is the append-only,
tamper-evident record of every charge (`ledger_entries`: what one charge carries; `ledger_file`:
its state file under a cross-process lock; `ledger_errors`: what a failing file means).
"""
