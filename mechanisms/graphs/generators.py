"""The seed's synthetic disease-transmission graphs, Synthetic I and II (S004 §6.6.2.2, L1447–1455).

Both are directed (an edge is a transmission, from the earlier node to the later one) and
deterministic given `seed`; `GraphSequence.undirected` is the seed's undirected version.
Time 0 (the initial nodes) is released with the first window, so the horizon is the
number of years (steps), 20 as in Table 6.4 (L1424–1431).

Readings where the text leaves a choice:
- Synthetic I: attachment weight (out-deg(v) + 1)·(year − v.time + 1)^(−c). The text's
  out-deg(v)·(…)^(−c) gives every initial node weight 0, so no edge could ever form; the +1
  is the usual smoothing. A new node is isolated with probability P_isolated, and otherwise
  links to k distinct nodes of earlier years (edges go from lower to higher time stamps).
- Synthetic II: the number of initially infectious nodes n_0 is not printed; Table 6.4's
  1088 nodes and 588 edges give n_0 = 500, since every other infected node has exactly one
  infector (max in-degree 1). Each step, infectious nodes first recover with probability
  P_r; then each still-infectious u infects each susceptible neighbour with probability
  P_i / deg(u), in a random order of the u (a node infected twice in a step keeps its
  first infector); the newly infected become infectious the next step.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from mechanisms.graphs.sequence import GraphSequence

__all__ = ["synthetic_one", "synthetic_two"]


def synthetic_one(seed: int = 0, initial: int = 500, per_year: int = 70, years: int = 20,
                  isolated: float = 0.5, links: int = 1, decay: float = 1.0) -> GraphSequence:
    """Modified Barabási–Albert (S004 L1447–1451): m_0 = 500, n = 70 a year, Y = 20,
    P_isolated = 0.5, k = 1, c = 1."""
    rng = np.random.default_rng(seed)
    times = np.concatenate([np.zeros(initial, np.int64), np.repeat(np.arange(1, years + 1), per_year)])
    out_degree = np.zeros(times.size, np.int64)
    src, dst = [], []
    for node in range(initial, times.size):
        if rng.random() < isolated:
            continue
        year = times[node]
        earlier = int(np.searchsorted(times, year))  # the nodes of earlier years
        weight = (out_degree[:earlier] + 1) * (year - times[:earlier] + 1.0) ** (-decay)
        for target in rng.choice(earlier, size=links, replace=False, p=weight / weight.sum()):
            src.append(target)
            dst.append(node)
            out_degree[target] += 1
    return GraphSequence(np.maximum(times, 1), src, dst, years, directed=True)


def synthetic_two(seed: int = 0, people: int = 10_000, links: int = 2, initial: int = 500,
                  recover: float = 0.1, infect: float = 0.18, steps: int = 20) -> GraphSequence:
    """SIR on a Barabási–Albert contact network (S004 L1453–1455): 10,000 people, k = 2,
    P_r = 0.1, P_i = 0.18; n_0 = 500 (inferred, see the module's docstring)."""
    rng = np.random.default_rng(seed)
    contacts = nx.barabasi_albert_graph(people, links, seed=seed)
    neighbours = [np.fromiter(contacts.neighbors(u), np.int64) for u in range(people)]
    infected_at = np.full(people, -1)
    infectious = rng.choice(people, size=initial, replace=False)
    infected_at[infectious] = 0
    src, dst = [], []
    for step in range(1, steps + 1):
        infectious = infectious[rng.random(infectious.size) >= recover]
        newly = []
        for u in rng.permutation(infectious):
            near = neighbours[u]
            hit = near[(infected_at[near] < 0) & (rng.random(near.size) < infect / near.size)]
            infected_at[hit] = step
            src += [u] * hit.size
            dst += hit.tolist()
            newly.append(hit)
        infectious = np.concatenate([infectious, *newly])
    order = np.flatnonzero(infected_at >= 0)
    order = order[np.argsort(infected_at[order], kind="stable")]
    label = np.full(people, -1)
    label[order] = np.arange(order.size)
    return GraphSequence(np.maximum(infected_at[order], 1), label[src], label[dst], steps, directed=True)
