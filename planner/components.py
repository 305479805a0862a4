"""Blocks split into connected components: blocks linked by the attributes they read."""

from __future__ import annotations

import networkx as nx

from mechanisms.domain import Domain
from mechanisms.workload import Block


def connected_components(blocks: list[Block], domain: Domain) -> list[list[Block]]:
    """Blocks with terms, grouped so that no attribute is read by two groups (block order kept)."""
    graph = nx.Graph()
    live = [b for b in blocks if b.terms]
    for i, b in enumerate(live):
        graph.add_node(i)
        graph.add_edges_from((i, ("attribute", a)) for a in b.attributes(domain))
    out = []
    for nodes in nx.connected_components(graph):
        out.append([live[i] for i in sorted(n for n in nodes if isinstance(n, int))])
    return out
