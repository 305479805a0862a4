"""The hybrid model's answers: a table's opted-in users measured centrally, blended with the others' reports.

BLENDER (seeds/000, §2.2): the opt-in group (n_T users, its size public) and the clients (n_L
reports) each estimate the population's fractions, on the assumption the seed makes that who
opts in does not depend on the data. For a linear query w (a row of a block), the opt-in group's
fraction p̂_T = ĉ/n_T (ĉ the central model's count, noise variance V_T) has variance
σ²_T = V_T/n_T² + Var_f(w_z)/n_T, the clients' p̂_L = x̂/n_L (x̂ the protocol's estimate, exact
variance V_L) σ²_L = V_L/n_L² + Var_f(w_z)/n_L (Alg 2.3 line 14 and Alg 2.5: noise plus the
group's sampling variance), and they are blended with the weight of Theorem 2.2.7,
w = σ²_L/(σ²_T + σ²_L) (`blender.blend`). The answer is the count over all N = n_T + n_L users,
N·(w p̂_T + (1 − w) p̂_L), with variance N²(w²σ²_T + (1 − w)²σ²_L), below either group's own.
The groups are independent, so two blocks' covariance is N²(w w' Cov_T + (1 − w)(1 − w') Cov_L),
and AVG (SUM over COUNT) follows by the delta method. Var_f is evaluated at the clients'
estimated marginal (`cells`).

AVG by the seed's hybrid mean estimators (§2.3, `hybrid_mean`, with ``rule`` "kvh" or "pwh"): per
group, each group's own mean μ̃_T = Ŝ_T/Ĉ_T and μ̃_L = Ŝ_L/Ĉ_L, combined as w μ̃_T + (1 − w) μ̃_L with
KVH's weight (Def. 2.3.18) or PWH's (Def. 2.3.22). Their inputs, per group: n = Ĉ_T + Ĉ_L, c = Ĉ_T/n,
s²_T the noise variance of μ̃_T and s²_L/((1 − c)n) that of μ̃_L (each by the delta method on its
group's noise covariances), σ² the values' variance within the group at the clients' estimated
distribution (KVH takes σ² as known; here it is this plug-in). The error bar is √E_H(w), Lemma
2.3.17's MSE against the mean of all the group's users (`blender.hybrid_mse`), at the same plug-ins.
"""

from __future__ import annotations

import numpy as np

from mechanisms.arrays import to_numpy
from mechanisms.domain import Domain
from mechanisms.ldp.blender import MeanSetting, blend, hybrid_mse, kvh_weight, pwh_weight
from mechanisms.workload import Block

__all__ = ["HybridAnswers"]


class HybridAnswers:
    """Blocks answered by blending a central model of the opt-in group with a local model of the clients."""

    kind = "opt-in central measurements blended with local DP reports (BLENDER)"

    def __init__(self, domain: Domain, central, local, opt_in_size: int, rule: str = "blend"):
        self.domain, self.central, self.local, self.rule = domain, central, local, rule
        self.n_t, self.n_l = int(opt_in_size), int(local.n)
        self.n = self.n_t + self.n_l

    def source_name(self, block: Block) -> str:
        return self.kind

    def covers(self, block: Block) -> bool:
        return self.central.covers(block)

    def _sampling(self, first: Block, second: Block) -> np.ndarray:
        """Cov_f(w_z, u_z) row-wise, f the clients' estimated marginal of both blocks' cliques."""
        clique = self.domain.canonical(set(first.attributes(self.domain)) | set(second.attributes(self.domain)))
        w, u = (np.asarray(to_numpy(b.matrix(self.domain, clique).dense()), dtype=float) for b in (first, second))
        f = self.local.cells(clique)
        return (w * u) @ f - (w @ f) * (u @ f)

    def _groups(self, first: Block, second: Block) -> tuple[np.ndarray, np.ndarray]:
        """(Cov of the opt-in group's fractions, Cov of the clients' fractions) of two blocks, row-wise."""
        sampling = self._sampling(first, second)
        return (self.central.covariance(first, second) / self.n_t ** 2 + sampling / self.n_t,
                self.local.covariance(first, second) / self.n_l ** 2 + sampling / self.n_l)

    def _blend(self, block: Block):
        central, local = self._groups(block, block)
        return blend(self.central.answer(block)[0] / self.n_t, np.maximum(central, 0.0),
                     self.local.estimate(block) / self.n_l, np.maximum(local, 0.0))

    def groups(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        """Each group's own variance of the count over all N users (N² σ²), row-wise: the blend is below both."""
        central, local = self._groups(block, block)
        return self.n ** 2 * central, self.n ** 2 * local

    def answer(self, block: Block) -> tuple[np.ndarray, np.ndarray]:
        b = self._blend(block)
        return self.n * b.value, self.n ** 2 * b.variance

    def estimate(self, block: Block) -> np.ndarray:
        return self.answer(block)[0]

    def variance(self, block: Block) -> np.ndarray:
        return self.answer(block)[1]

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        if first is second:
            return self.variance(first)
        w, u = self._blend(first).weight, self._blend(second).weight
        central, local = self._groups(first, second)
        return self.n ** 2 * (w * u * central + (1 - w) * (1 - u) * local)

    def hybrid_mean(self, total: Block, count: Block) -> tuple[np.ndarray, np.ndarray] | None:
        """AVG's centred mean per group and its standard error by KVH or PWH (see the module); None under "blend"."""
        if self.rule == "blend":
            return None
        means, noise, sizes = [], [], []
        for model in (self.central, self.local):
            (s, vs), (c, vc) = model.answer(total), model.answer(count)
            cov = model.covariance(total, count)
            with np.errstate(divide="ignore", invalid="ignore"):
                means.append(s / c)
                noise.append(np.maximum(vs / c ** 2 + s ** 2 * vc / c ** 4 - 2 * s * cov / c ** 3, 0.0))
            sizes.append(c)
        clique = self.domain.canonical(set(total.attributes(self.domain)) | set(count.attributes(self.domain)))
        w, u = (np.asarray(to_numpy(b.matrix(self.domain, clique).dense()), dtype=float) for b in (total, count))
        f = self.local.cells(clique)
        with np.errstate(divide="ignore", invalid="ignore"):
            sigma2 = np.maximum((w * w) @ f / (u @ f) - ((w @ f) / (u @ f)) ** 2, 0.0)
        value, error = np.full(len(sigma2), np.nan), np.full(len(sigma2), np.nan)
        for i in range(len(sigma2)):
            n_t, n_l = sizes[0][i], sizes[1][i]
            if not (n_t >= 1 and n_l >= 1 and np.isfinite(sigma2[i])):
                continue  # a group either side holds no one: no mean to combine
            n = n_t + n_l
            setting = MeanSetting(n, n_t / n, sigma2[i], sigma2[i], noise[0][i], noise[1][i] * n_l)
            weight = kvh_weight(setting) if self.rule == "kvh" else pwh_weight(setting)
            value[i] = weight * means[0][i] + (1 - weight) * means[1][i]
            error[i] = np.sqrt(hybrid_mse(setting, weight))
        return value, error
