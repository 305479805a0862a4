"""Inference on a junction tree: log-space belief propagation and elimination on its subtrees.

`calibrate` runs Shafer–Shenoy message passing in log space: from log-potentials
θ_C on the tree's cliques it returns every clique's marginal of
p_θ(x) ∝ exp Σ_C θ_C(x_C) and log Z, with messages
m_{i→j} = log Σ over C_i \\ S_ij of exp(θ_i + Σ_{k≠j} m_{k→i}).

`Beliefs` holds the calibrated (normalized) clique marginals. On a connected
subtree T the model factorizes as p(x_T) = μ_root Π_{C≠root} μ_C / μ_{S(C)}, so
any marginal, and any Kronecker-product query Σ_x Π_a Q_a[z_a, x_a] p(x), is a
contraction over the smallest subtree covering the attributes involved, done
from the leaves up with each query factor applied once, at the clique nearest
the subtree's root that holds its attribute (Algorithm 4 of McKenna's thesis on
the calibrated tree). Intermediate tables never exceed a separator times the
query's outputs.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from mechanisms.arrays import xp
from mechanisms.pgm.junction_tree import Clique, JunctionTree


# Exponents within this range of a table's maximum cannot underflow (e^-708 is the smallest
# normal double), so within it a single shift per table is as exact as one per slice.
_SAFE_RANGE = 700.0
_SMALL = 4096  # below this many cells ndarray.sum beats tensordot's fixed cost


def _broadcast(tree: JunctionTree, sub: Sequence[str], clique: Sequence[str]) -> tuple[int, ...]:
    """Shape that places a table over `sub` inside a table over `clique` (both in domain order)."""
    return tuple(tree.domain.size_of(a) if a in sub else 1 for a in clique)


def sum_to(table, clique: Sequence[str], sub: Sequence[str]):
    """Marginalize a table over `clique` onto `sub` (domain order kept).

    Reductions over scattered axes go through tensordot (a transpose and one
    BLAS product), which is many times faster than ndarray.sum on them.
    """
    axes = tuple(i for i, a in enumerate(clique) if a not in sub)
    if not axes:
        return table
    m = xp()
    if axes == tuple(range(len(axes))):
        return table.reshape(-1, *table.shape[len(axes):]).sum(axis=0)
    if table.size <= _SMALL:
        return table.sum(axis=axes)
    ones = m.ones([table.shape[i] for i in axes])
    return m.tensordot(table, ones, axes=(axes, tuple(range(len(axes)))))


def _log_sum_to(log_table, clique: Sequence[str], sub: Sequence[str]):
    """log Σ exp over the axes not in `sub`, each slice shifted by its own maximum."""
    m = xp()
    axes = tuple(i for i, a in enumerate(clique) if a not in sub)
    if not axes:
        return log_table
    top = log_table.max(axis=axes, keepdims=True)
    kept = [n for i, n in enumerate(log_table.shape) if i not in axes]
    return m.log(sum_to(m.exp(log_table - top), clique, sub)) + top.reshape(kept)


def _span(table) -> tuple[float, float]:
    return float(table.max()), float(table.max() - table.min())


def calibrate(tree: JunctionTree, potentials: Sequence) -> tuple[list, float]:
    """(normalized marginal of every clique, log Z) of p_θ, by log-space belief propagation.

    Messages are log tables. A clique whose log-belief spans at most 700 nats is
    exponentiated once with a single shift (no entry can underflow, so this is
    exact) and its outgoing messages are sums of that table, reweighted by the
    exponentiated incoming message for the downward pass; wider tables take the
    per-slice log-sum-exp path.
    """
    m = xp()
    cliques, parent, seps = tree.cliques, tree.parent, tree.separators
    root = tree.order[0]
    upward = list(potentials)  # θ_i + Σ messages from children
    up_msg: list = [None] * len(cliques)
    scaled: list = [None] * len(cliques)  # exp(upward_i − top_i) when its span is safe
    top, span = [0.0] * len(cliques), [0.0] * len(cliques)
    for i in reversed(tree.order):
        top[i], span[i] = _span(upward[i])
        if span[i] <= _SAFE_RANGE:
            scaled[i] = m.exp(upward[i] - top[i])
        if i == root:
            break
        if scaled[i] is not None:
            up_msg[i] = m.log(sum_to(scaled[i], cliques[i], seps[i])) + top[i]
        else:
            up_msg[i] = _log_sum_to(upward[i], cliques[i], seps[i])
        p = parent[i]
        upward[p] = upward[p] + up_msg[i].reshape(_broadcast(tree, seps[i], cliques[p]))
    # belief_i = upward_i + down_i, held as exp(belief_i − shift_i) (within `width` nats) or as a log table
    full: list = [None] * len(cliques)
    shift, width = [0.0] * len(cliques), [0.0] * len(cliques)
    log_belief: list = [None] * len(cliques)
    full[root], shift[root], width[root] = scaled[root], top[root], span[root]
    if full[root] is None:
        log_belief[root] = upward[root]
    for i in tree.order[1:]:
        p, sep, msg = parent[i], seps[i], up_msg[i]
        msg_top, msg_span = _span(msg)
        if full[p] is not None and width[p] + msg_span <= _SAFE_RANGE:
            low = msg_top - msg_span
            weight = m.exp(low - msg).reshape(_broadcast(tree, sep, cliques[p]))
            down = m.log(sum_to(full[p] * weight, cliques[p], sep)) + shift[p] - low
        else:
            belief = log_belief[p] if log_belief[p] is not None else m.log(full[p]) + shift[p]
            down = _log_sum_to(belief - msg.reshape(_broadcast(tree, sep, cliques[p])), cliques[p], sep)
        down_top, down_span = _span(down)
        if scaled[i] is not None and span[i] + down_span <= _SAFE_RANGE:
            full[i] = scaled[i] * m.exp(down - down_top).reshape(_broadcast(tree, sep, cliques[i]))
            shift[i], width[i] = top[i] + down_top, span[i] + down_span
        else:
            log_belief[i] = upward[i] + down.reshape(_broadcast(tree, sep, cliques[i]))
    if full[root] is not None:
        log_z = float(m.log(full[root].sum())) + shift[root]
    else:
        peak = float(log_belief[root].max())
        log_z = float(m.log(m.exp(log_belief[root] - peak).sum())) + peak
    marginals = []
    for i in range(len(cliques)):
        if full[i] is not None:
            marginals.append(full[i] / full[i].sum())
        else:
            marginals.append(m.exp(log_belief[i] - log_z))
    return marginals, log_z


class Beliefs:
    """Calibrated clique marginals (probabilities) of a junction-tree model."""

    def __init__(self, tree: JunctionTree, marginals: Sequence):
        self.tree = tree
        self.marginals = list(marginals)

    def marginal(self, attributes: Sequence[str], cache: dict | None = None):
        """The model's probability table over `attributes` (in domain order)."""
        attrs = self.tree.domain.canonical(attributes)
        inside = self.tree.containing(attrs)
        if inside is not None:
            return sum_to(self.marginals[inside], self.tree.cliques[inside], attrs)
        return self.contract(attrs, {}, cache)

    def project_many(self, cliques: Sequence[Clique]) -> list:
        """Probability tables of many cliques, sharing one cache of reduced tables and messages.

        The cache lives for this call only, so memory stays bounded by one batch.
        """
        cache: dict = {}
        return [self.marginal(c, cache) for c in cliques]

    def _table(self, i: int, separator: Clique, needed: Clique, cache: dict):
        """p(needed \\ S | S) from clique i (p(needed) at a root, S = ())."""
        key = ("table", i, separator, needed)
        if key not in cache:
            m = xp()
            clique = self.tree.cliques[i]
            table = sum_to(self.marginals[i], clique, needed)
            if separator:
                below = sum_to(table, needed, separator).reshape(_broadcast(self.tree, separator, needed))
                table = table / m.where(below > 0, below, 1.0)  # μ_S = 0 only where μ_C is 0
            cache[key] = table
        return cache[key]

    def contract(self, keep: Sequence[str], factors: Mapping[str, object], cache: dict | None = None):
        """Σ_x p(x) Π_a Q_a[z_a, x_a], keeping the attributes in `keep` as axes.

        `factors` maps attributes to 2-D arrays (rows × bins); attributes in
        neither argument are summed out. The result has one axis per attribute
        of keep ∪ factors, in domain order: z_a (the factor's rows) for a
        factor's attribute, the attribute's bins for a kept one. A `cache` shared
        between marginal queries (no factors) lets them reuse reduced tables and
        messages.
        """
        domain, cliques = self.tree.domain, self.tree.cliques
        cache = {} if cache is None or factors else cache
        targets = set(keep) | set(factors)
        if not targets:
            return xp().asarray(1.0)
        root, up = self.tree.steiner(targets)
        kids: dict[int, list[int]] = {root: []}
        for child, par in sorted(up.items()):
            kids.setdefault(par, []).append(child)
            kids.setdefault(child, [])
        order = [root]
        for n in order:
            order.extend(kids[n])
        top: dict[str, int] = {}
        for n in order:
            for a in cliques[n]:
                top.setdefault(a, n)
        below: dict[int, list] = {}  # output labels of targets introduced in each subtree
        for n in reversed(order):
            own = [("z", a) if a in factors else a for a in cliques[n] if a in targets and top[a] == n]
            below[n] = own + [lab for c in kids[n] for lab in below[c]]

        def message(n: int) -> tuple[object, list]:
            sep = tuple(a for a in cliques[n] if n != root and a in cliques[up[n]])
            out = list(sep) + below[n] if n != root else [("z", a) if a in factors else a for a in domain.canonical(targets)]
            key = ("message", n, sep, tuple(out))
            if key in cache:
                return cache[key], out
            operands = [message(c) for c in kids[n]]
            operands += [(factors[a], [("z", a), a]) for a in cliques[n] if a in factors and top[a] == n]
            used = set(out) | {lab for _, labs in operands for lab in labs}
            needed = tuple(a for a in cliques[n] if a in used)
            result = _einsum([(self._table(n, sep, needed, cache), list(needed))] + operands, out)
            cache[key] = result
            return result, out

        return message(root)[0]


def _einsum(operands: list[tuple[object, list]], out: list):
    """einsum over arbitrary hashable labels (relabelled to the integers einsum accepts)."""
    ids: dict[object, int] = {}
    args: list = []
    for array, labels in operands:
        args += [array, [ids.setdefault(lab, len(ids)) for lab in labels]]
    args.append([ids[lab] for lab in out])
    return xp().einsum(*args, optimize=len(operands) > 2)
