"""Synthetic rows from a junction-tree model, by randomized rounding of its conditionals.

Attributes are generated in reverse elimination order. When attribute a is
generated, the attributes already generated that share a clique with it are
exactly its later neighbours in the elimination, so they and a lie in one
clique and p(a | everything generated) = p(a | those neighbours), a ratio of one
clique's marginals. Rows are grouped by the neighbours' values; a group of m
rows receives m·p(v | group) rows of each value v, rounded: the integer parts,
plus one more for each v picked by systematic sampling on the fractional parts
(so each v gets its extra row with probability exactly its fractional part, and
the group's size is kept). This has far smaller variance than drawing rows
independently (McKenna's thesis §4.4.3).
"""

from __future__ import annotations

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.pgm.inference import Beliefs
from mechanisms.pgm.junction_tree import JunctionTree


def round_counts(sizes: np.ndarray, probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Integer counts per (group, value) with row sums `sizes` and means sizes·probabilities."""
    target = sizes[:, None] * probabilities
    whole = np.floor(target)
    rest = (sizes - whole.sum(axis=1).astype(np.int64)).astype(float)
    cumulative = np.cumsum(target - whole, axis=1)
    last = cumulative[:, -1:]
    cumulative = np.divide(cumulative * rest[:, None], last, out=np.zeros_like(cumulative), where=last > 0)
    cumulative[:, -1] = rest
    start = rng.random(len(sizes))[:, None]
    picked = np.maximum(np.ceil(cumulative - start), 0.0)
    extra = np.diff(picked, axis=1, prepend=0.0)
    return (whole + extra).astype(np.int64)


def sample_rows(tree: JunctionTree, beliefs: Beliefs, n_rows: int, rng: np.random.Generator) -> np.ndarray:
    """n_rows × d array of bin indices (columns in domain order)."""
    domain = tree.domain
    out = np.zeros((n_rows, len(domain)), dtype=np.int64)
    if n_rows == 0:
        return out
    neighbours: dict[str, set[str]] = {a: set() for a in domain.attributes}
    for clique in tree.cliques:
        for a in clique:
            neighbours[a].update(clique)
    done: set[str] = set()
    for a in reversed(tree.elimination):
        cond = [b for b in domain.attributes if b in done and b in neighbours[a]]
        attrs = domain.canonical(cond + [a])
        joint = np.moveaxis(to_numpy(beliefs.marginal(attrs)), attrs.index(a), -1)
        table = joint.reshape(-1, domain.size_of(a))
        if cond:
            columns = [domain.attributes.index(b) for b in cond]
            index = np.ravel_multi_index(tuple(out[:, c] for c in columns), domain.shape(cond))
        else:
            index = np.zeros(n_rows, dtype=np.int64)
        groups, inverse = np.unique(index, return_inverse=True)
        table = table[groups]
        sums = table.sum(axis=1, keepdims=True)
        probabilities = np.divide(table, sums, out=np.full_like(table, 1.0 / table.shape[1]), where=sums > 0)
        counts = round_counts(np.bincount(inverse, minlength=len(groups)), probabilities, rng)
        order = np.lexsort((rng.random(n_rows), inverse))
        values = np.repeat(np.tile(np.arange(table.shape[1]), len(groups)), counts.ravel())
        out[order, domain.attributes.index(a)] = values
        done.add(a)
    return out
