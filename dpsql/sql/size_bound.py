"""The largest aggregate dpsql takes on: a bound on the cells and rows of one aggregate's block.

A block spans the marginal of its clique (its GROUP BY columns, and those its WHERE and aggregate
read): the scan materializes that marginal, the planner its sensitivity and strategy, and the
answer one row per group. Beyond `MAX_CELLS` (the planner's own limit on a measured clique),
the sizes alone would exhaust memory, so such a query is refused while it compiles, from the
declared domains only (public), before anything of that size is allocated or any data is read.
"""

from __future__ import annotations

from math import prod

from dpsql.errors import NotSupportedError
from mechanisms.domain import Domain
from mechanisms.workload import Block
from planner.families.hdmm import MAX_CELLS


def refuse_oversized(block: Block, domain: Domain) -> None:
    """NotSupportedError naming the sizes when `block` spans more than `MAX_CELLS` cells or rows."""
    clique = block.attributes(domain)
    cells = prod(domain.size_of(a) for a in clique)
    rows = block.num_rows(domain)
    if max(cells, rows) > MAX_CELLS:
        sizes = " × ".join(f"{a} ({domain.size_of(a):,})" for a in clique)
        raise NotSupportedError(
            f"{block.name}: the answer would have {rows:,} groups over {cells:,} cells ({sizes}), more than the "
            f"{MAX_CELLS:,} dpsql plans at once; group by fewer or coarser columns, or split the query; "
            "nothing was charged"
        )
