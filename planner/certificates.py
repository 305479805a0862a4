"""Certificates that measuring a workload as asked (per query) is optimal, so no other family need be costed.

Two are known: a single product query whose rows do not overlap (`direct_is_optimal`), and,
under Gaussian noise, blocks that are uncorrelated and isotropic on the cells where each is
largest (`separable_blocks`, with the lower bound's proof). `direct_reason` says which holds.
"""

from __future__ import annotations

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.matrices import Dense, Diagonal
from mechanisms.measurement import GAUSSIAN
from mechanisms.workload import Block, Workload

ONE_PRODUCT = ("a single product query whose rows do not overlap: measured as asked, which no strategy beats "
                "(other families not costed)")
SEPARABLE = ("queries whose rows are uncorrelated on the cells where each is largest: measured as asked, which no "
              "linear strategy beats (other families not costed)")
# The separability certificate densifies each block's per-attribute factors: beyond these sizes it is not tried.
_CERTIFICATE_MAX_BLOCKS = 8
_CERTIFICATE_MAX_ENTRIES = 1 << 20  # per factor (rows × values of one attribute)


def direct_reason(workload: Workload, noise: str) -> str | None:
    """Why measuring the workload as asked (per query) is optimal, so no other family need be costed; None if
    that is not known."""
    if direct_is_optimal(workload.blocks):
        return ONE_PRODUCT
    if noise == GAUSSIAN and separable_blocks(workload.blocks, workload.domain):
        return SEPARABLE
    return None


def direct_is_optimal(blocks: list[Block]) -> bool:
    """Whether measuring the workload as asked is optimal among all strategies, so no family need be costed.

    True for one block (no lookup rows) of one Kronecker term whose every factor is a
    single row (any values), or has exactly one nonzero per column and per row, all of one
    magnitude: a filter or value row, a GROUP BY's identity. Such a factor's rows have
    disjoint supports, equal weight and no row known to be zero, so measuring it directly
    attains its factorization bound, and the bound of a Kronecker product is the product
    of its factors' (gamma-2 is multiplicative under tensor products).
    """
    live = [b for b in blocks if b.terms]
    if len(live) != 1 or len(live[0].terms) != 1 or live[0].mapped_rows:
        return False
    for factor in live[0].terms[0].factors.values():
        if isinstance(factor, Diagonal):
            entries = np.abs(to_numpy(factor.values))
        elif isinstance(factor, Dense):
            array = np.abs(to_numpy(factor.array))
            if array.shape[0] == 1:
                continue
            if (np.count_nonzero(array, axis=0) != 1).any() or (np.count_nonzero(array, axis=1) != 1).any():
                return False
            entries = array.max(axis=0)
        else:
            return False
        if not entries.size or not np.allclose(entries, entries[0], rtol=1e-12, atol=0) or entries[0] == 0:
            return False
    return True


def separable_blocks(blocks: list[Block], domain: Domain) -> bool:
    """Whether measuring every block as asked, with the optimal budget split, is optimal among all linear
    strategies under Gaussian noise (L2 sensitivity): a certificate for workloads of several blocks.

    **The bound.** Let W stack the blocks' rows, each block's scaled by √weight. Any linear strategy A
    (any family's measurements together, budget split included, being rows of one A) answering W as
    W = B·A has total squared error ‖B‖²_F·Δ₂(A)²/(2ρ). For any distribution p over the cells,
    ‖W·D_p^½‖_* = ‖B·A·D_p^½‖_* ≤ ‖B‖_F·‖A·D_p^½‖_F (Hölder) and ‖A·D_p^½‖²_F = Σ_j p_j‖A e_j‖² ≤ Δ₂(A)²,
    so no linear strategy has an error below ‖W·D_p^½‖²_*/(2ρ). (Attributes outside the blocks' cliques
    take a uniform p and drop out: the bound is over the whole table's cells.)

    **Per query meets it** when p can be chosen so that (a) the blocks' rows are uncorrelated under p,
    W_i·D_p·W_jᵀ = 0 for i ≠ j, so W·D_p^½ is a direct sum and ‖W·D_p^½‖_* = Σ_i √w_i·‖W_i·D_p^½‖_*; and
    (b) each block is isotropic on the cells where its column norm is largest, W_i·D_p·W_iᵀ = (Δ_i²/m_i)·I
    with p on those cells, so ‖W_i·D_p^½‖_* = √m_i·Δ_i (m_i rows, Δ_i its L2 sensitivity). Then the bound
    is (Σ_i √(w_i·m_i)·Δ_i)²/(2ρ), exactly the per-query family's error under its optimal split: no family
    (marginals, range trees, HDMM, residuals, factorization) can be lower, for any weights — so the
    min-max objective's reweighting keeps it too. The certificate is one choice of p: the product over
    attributes of the uniform distribution on the values where every block's factor has its largest column
    norm (Kronecker products factor the conditions attribute by attribute: (a) needs one attribute whose
    factors are uncorrelated, (b) every attribute's factor isotropic). It holds, e.g., for AVG's sum
    (values centred on the declared range) and count over the same groups: on the two extreme values the
    centred sum is ±c and the count 1, uncorrelated. It fails (and every family is costed) for overlapping
    or nested queries, or ones that leave cells out where another block reads them.

    It is tried only when one block's clique holds every other's (AVG's count reads a subset of its sum's
    clique when the column is not nullable): the argument holds for any cliques, with Total factors, but
    workloads spread over many attributes rarely pass and densifying them costs planning time. Laplace
    noise (L1 sensitivity) has no such bound here, and adaptive procedures (AIM, RAP) are not linear: the
    caller still costs those.
    """
    live = [b for b in blocks if b.terms]
    if not 2 <= len(live) <= _CERTIFICATE_MAX_BLOCKS or any(b.mapped_rows for b in live):
        return False
    cliques = {b.attributes(domain) for b in live}
    attributes = domain.canonical(a for c in cliques for a in c)
    if not attributes or attributes not in cliques:  # one clique holding the others (AVG's sum and count)
        return False
    factors = [_product_factors(b, domain, attributes) for b in live]
    if any(f is None for f in factors):
        return False
    uncorrelated = np.zeros((len(live), len(live)), dtype=bool)
    for a in attributes:
        mats = [f[a] for f in factors]
        norms = [np.sqrt((m * m).sum(axis=0)) for m in mats]
        largest = [float(n.max()) for n in norms]
        if min(largest) <= 0:
            return False
        cells = np.logical_and.reduce([n >= top * (1 - 1e-9) for n, top in zip(norms, largest)])
        if not cells.any():
            return False
        parts = [m[:, cells] for m in mats]
        count = int(cells.sum())
        for i, (part, top) in enumerate(zip(parts, largest)):
            gram = np.einsum("ij,kj->ik", part, part) / count  # no BLAS: its threads cost more than tiny products
            if not np.allclose(gram, np.eye(part.shape[0]) * (top**2 / part.shape[0]), rtol=0, atol=1e-9 * top**2):
                return False  # not isotropic on those cells: not every row is as large as the largest
            for j in range(i + 1, len(parts)):
                cross = np.einsum("ij,kj->ik", part, parts[j]) / count
                if np.allclose(cross, 0.0, rtol=0, atol=1e-9 * top * largest[j]):
                    uncorrelated[i, j] = uncorrelated[j, i] = True
    np.fill_diagonal(uncorrelated, True)
    return bool(uncorrelated.all())


def _product_factors(block: Block, domain: Domain, attributes: tuple[str, ...]) -> dict[str, np.ndarray] | None:
    """The block as one Kronecker product over `attributes`: a dense matrix per attribute (Total for those
    it does not read), or None when its terms do not collapse into one product (they may differ in one
    attribute's factor only, e.g. AVG's centred sum: values − centre·ones) or a factor is too large."""
    clique = block.attributes(domain)
    terms = []
    for term in block.terms:
        own = dict(zip(clique, block.term_factors(term, domain, clique)))
        dense = {}
        for a in attributes:
            n = domain.size_of(a)
            if a not in own:
                dense[a] = np.ones((1, n))
                continue
            if own[a].shape[0] * n > _CERTIFICATE_MAX_ENTRIES:
                return None
            dense[a] = np.asarray(to_numpy(own[a].dense()), dtype=float)
        terms.append((term.coef, dense))
    first = terms[0][1]
    differing = {a for _, fs in terms[1:] for a in attributes
                 if fs[a].shape != first[a].shape or not np.array_equal(fs[a], first[a])}
    if len(differing) > 1:
        return None
    out = dict(first)
    axis = differing.pop() if differing else attributes[0]
    out[axis] = sum(coef * fs[axis] for coef, fs in terms)
    return out


__all__ = ["ONE_PRODUCT", "SEPARABLE", "direct_is_optimal", "direct_reason", "separable_blocks"]
