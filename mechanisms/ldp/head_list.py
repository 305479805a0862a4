"""BLENDER's estimates over a head list (seeds/000, Algorithms 2.3 and 2.5), for the grr2 reports.

A head list (`client.TwoLevelGRR.urls`: URLs per query, ⋆ last at both levels) indexes records
flat, query-major. The opt-in group's estimate (Algorithm 2.3, lines 11–14) is a noisy count per
record over |D_T| records, p̂_O = (N + Y)/|D_T|, with variance p̂(1 − p̂)/(|D_T| − 1) + 2b²/(|D_T|(|D_T| − 1))
for Laplace noise of scale b (`blender.optin_variance`); `optin_estimates` takes any noise by its
variance V (2b² for Laplace). The clients' estimate (Algorithm 2.5) unbiases the fractions r̂ of
the grr2 reports: per query (lines 13–15) and per record (lines 17–19), both with the
seed's variance estimates; `channel` is the report law P (P[report r | record v]), and Algorithm
2.5's estimate is P⁻¹ r̂ (checked by the tests), the form `head_list_answers` answers SQL with.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mechanisms.ldp.client import TwoLevelGRR

__all__ = ["ClientEstimates", "channel", "client_estimates", "optin_estimates", "query_of"]


class ClientEstimates(NamedTuple):
    """Algorithm 2.5's output: per query and per record, the probability and its variance estimate."""

    query: np.ndarray
    query_variance: np.ndarray
    record: np.ndarray
    record_variance: np.ndarray


def query_of(protocol: TwoLevelGRR) -> np.ndarray:
    """The query of each flat record index."""
    return np.repeat(np.arange(protocol.queries), protocol.urls)


def channel(protocol: TwoLevelGRR) -> np.ndarray:
    """P, records × records: P[r, v] = P[report r | record v] (Algorithm 2.4's law, exact rationals as floats)."""
    queries, urls = query_of(protocol), np.asarray(protocol.urls)
    t, k = float(protocol.truth), protocol.queries
    t_q = np.array([float(protocol.url_truth(q)) for q in range(k)])
    same_query = queries[:, None] == queries[None, :]
    other = (1 - t) / max(k - 1, 1) / urls[queries][:, None] * np.ones((1, len(queries)))
    width = urls[queries]
    wrong_url = np.where(width > 1, (1 - t_q[queries]) / np.maximum(width - 1, 1), 0.0)
    kept = np.where(np.eye(len(queries), dtype=bool), t * t_q[queries][None, :], t * wrong_url[None, :])
    return np.where(same_query, kept, other)


def client_estimates(protocol: TwoLevelGRR, counts) -> ClientEstimates:
    """Algorithm 2.5 from the reports' counts per flat record (|D_C| = their sum, m_C = 1)."""
    counts = np.asarray(counts, dtype=float)
    n, k, t = counts.sum(), protocol.queries, float(protocol.truth)
    queries, urls = query_of(protocol), np.asarray(protocol.urls, dtype=float)
    r_q = np.bincount(queries, weights=counts, minlength=k) / n
    false_q = (1 - t) / (k - 1) if k > 1 else 0.0
    p_q = (r_q - false_q) / (t - false_q)  # line 14
    v_q = r_q * (1 - r_q) / ((n - 1) * (t - false_q) ** 2)  # line 15
    t_q = np.array([float(protocol.url_truth(q)) for q in range(k)])
    false_u = np.where(urls > 1, (1 - t_q) / np.maximum(urls - 1, 1), 0.0)
    r = counts / n
    gain = t * (t_q - false_u)  # line 18's denominator, per query
    offset = t * false_u * p_q + false_q / urls * (1 - p_q)
    p = (r - offset[queries]) / gain[queries]
    c = (false_q / urls - t * false_u)[queries]  # line 19
    v = n / (gain[queries] ** 2 * (n - 1)) * (r * (1 - r) / n + c ** 2 * v_q[queries]
                                             + 2 * c * r * (1 - r_q[queries]) / (n * (t - false_q)))
    return ClientEstimates(p_q, v_q, p, v)


def optin_estimates(noisy_counts, records: int, noise_variance: float) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2.3, lines 13–14: p̂_O = noisy count/|D_T| and its variance estimate, for noise of variance V."""
    p = np.asarray(noisy_counts, dtype=float) / records
    return p, p * (1 - p) / (records - 1) + noise_variance / (records * (records - 1))
