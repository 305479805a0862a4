"""RAP's relaxed synthetic data as an estimator of workload blocks, and its synthetic rows.

D' (n' x d', each attribute block of each row on the simplex) is a uniform mixture
of n' product distributions. The expectation of any block under it is exact
multilinear algebra: for a Kronecker term, the per-attribute factors act on each
row's block (a scalar for filtered attributes, a vector for GROUP BY ones), and
the mean over rows of their tensor product is one matrix product (Khatri-Rao).
Answers are scaled by the (public or estimated) row count n̂.

Error estimate (`variance`): RAP has no closed-form error. A query's error is,
to first order, that of a measured query, so each row is given the exact noise
variance of one released RAP answer (σ² = T·K / ρ counts², for a block row of
sensitivity s: s²σ²), plus the contribution (answer / n̂)² Var(n̂) of an
estimated row count. It is an estimate, not a bound: benchmarks report how it
compares with realized errors. Covariances between different blocks are
reported as 0. `sample` draws categorical synthetic rows by randomized rounding.

Persistence (`spec` / `RelaxedData.from_spec`): a JSON-able dict holding the domain
(attributes and sizes, in order), the covered attributes, n̂, Var n̂, the per-answer
error variance, and D' itself: n' x d' floats, row-major, in IEEE 754 little-endian
binary32 ("float32", exact: the model answers identically after a round trip) or
binary16 ("float16", half the size, relative rounding 2^-11), zlib-compressed
(level 9, deterministic) and base64-encoded. Sparsemax leaves many exact zeros in D',
which the compression takes out.
"""

from __future__ import annotations

import base64
import math
import zlib

import numpy as np

from mechanisms.arrays import to_numpy, xp
from mechanisms.domain import Domain
from mechanisms.matrices import Diagonal, Identity, Ones
from mechanisms.rap.encoding import OneHot
from mechanisms.workload import Block


def khatri_rao(mats: list):
    """Row-wise tensor product: (n x a), (n x b), ... -> (n x a*b*...), C order."""
    out = mats[0]
    for m in mats[1:]:
        out = (out[:, :, None] * m[:, None, :]).reshape(out.shape[0], -1)
    return out


def mixture_mean(weights, mats: list):
    """(1/n) sum_rows weights[row] * (tensor product of mats[i][row]), flattened in C order."""
    x = xp()
    if not mats:
        return weights.mean(keepdims=True)
    split = max(1, len(mats) // 2)
    left = khatri_rao(mats[:split]) * weights[:, None]
    right = khatri_rao(mats[split:]) if mats[split:] else x.ones((weights.shape[0], 1), dtype=weights.dtype)
    return (left.T @ right).ravel() / weights.shape[0]


def block_answers(relaxed, encoding: OneHot, block: Block):
    """Normalized answers of every row of a block (GROUP BY values in domain order) on D'."""
    x = xp()
    domain = encoding.domain
    n_rows = relaxed.shape[0]
    out = x.zeros(block.num_rows(domain), dtype=x.float64)
    for term in block.terms:
        weights = x.ones(n_rows, dtype=relaxed.dtype)
        vectors = []
        for a in domain.canonical(set(term.factors) | set(block.group_by)):
            f = term.factors.get(a, Identity(domain.size_of(a)))
            cols = relaxed[:, encoding.block(a)]
            if a in block.group_by:
                vectors.append(cols * x.asarray(f.values, dtype=cols.dtype) if isinstance(f, Diagonal) else cols)
            elif not isinstance(f, Ones):
                weights = weights * (cols @ x.asarray(f.dense(), dtype=cols.dtype).ravel())
        out += term.coef * mixture_mean(weights, vectors).astype(x.float64)
    return out


SPEC_KIND = "rap-relaxed"
SPEC_VERSION = 1
PRECISIONS = {"float32": "<f4", "float16": "<f2"}


class RelaxedData:
    """An `Estimator` over blocks on `attributes`, from RAP's relaxed synthetic data."""

    kind = "relaxed synthetic data (RAP)"

    def __init__(
        self,
        domain: Domain,
        relaxed,
        rows: float,
        error_variance: float,
        attributes: tuple[str, ...],
        rows_variance: float = 0.0,
    ):
        self.domain, self.relaxed, self.rows = domain, relaxed, float(rows)
        self.encoding = OneHot(domain)
        self.error_variance, self.rows_variance = float(error_variance), float(rows_variance)
        self.attributes = domain.canonical(attributes)

    def covers(self, block: Block) -> bool:
        return set(block.attributes(self.domain)) <= set(self.attributes)

    def estimate(self, block: Block) -> np.ndarray:
        return self.rows * to_numpy(block_answers(self.relaxed, self.encoding, block))

    def variance(self, block: Block) -> np.ndarray:
        s = block.sensitivity(self.domain, 2)
        base = np.full(block.num_rows(self.domain), s * s * self.error_variance)
        if self.rows_variance == 0.0:
            return base
        return base + (self.estimate(block) / self.rows) ** 2 * self.rows_variance

    def covariance(self, first: Block, second: Block) -> np.ndarray:
        if first.fingerprint(self.domain) == second.fingerprint(self.domain):
            return self.variance(first)
        return np.zeros(first.num_rows(self.domain))

    def spec(self, precision: str = "float32") -> dict:
        """A JSON-able description from which `from_spec` rebuilds this model (see the module doc)."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
        values = np.ascontiguousarray(to_numpy(self.relaxed), dtype=PRECISIONS[precision])
        return {
            "kind": SPEC_KIND,
            "version": SPEC_VERSION,
            "domain": {"attributes": list(self.domain.attributes), "sizes": [int(n) for n in self.domain.sizes]},
            "attributes": list(self.attributes),
            "rows": self.rows,
            "rows_variance": self.rows_variance,
            "error_variance": self.error_variance,
            "shape": [int(n) for n in values.shape],
            "precision": precision,
            "relaxed": base64.b64encode(zlib.compress(values.tobytes(), 9)).decode("ascii"),
        }

    @classmethod
    def from_spec(cls, spec: dict) -> "RelaxedData":
        """The model a `spec()` describes (checked: kind, version, shape against the domain, finite values)."""
        if spec.get("kind") != SPEC_KIND or spec.get("version") != SPEC_VERSION:
            raise ValueError(f"not a version-{SPEC_VERSION} {SPEC_KIND!r} spec")
        domain = Domain(tuple(spec["domain"]["attributes"]), tuple(int(n) for n in spec["domain"]["sizes"]))
        precision = spec["precision"]
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}")
        n_rows, width = (int(n) for n in spec["shape"])
        if width != sum(domain.sizes) or n_rows < 1:
            raise ValueError(f"relaxed data of shape {spec['shape']} does not fit a domain of width {sum(domain.sizes)}")
        dtype = np.dtype(PRECISIONS[precision])
        raw = zlib.decompress(base64.b64decode(spec["relaxed"], validate=True))
        if len(raw) != n_rows * width * dtype.itemsize:
            raise ValueError("the relaxed data's length does not match its shape")
        values = np.frombuffer(raw, dtype=dtype).reshape(n_rows, width).astype(np.float32)
        numbers = (spec["rows"], spec["rows_variance"], spec["error_variance"])
        if not np.isfinite(values).all() or not all(math.isfinite(float(v)) for v in numbers):
            raise ValueError("the spec holds non-finite numbers")
        return cls(
            domain, xp().asarray(values), float(spec["rows"]), float(spec["error_variance"]),
            tuple(spec["attributes"]), float(spec["rows_variance"]),
        )

    def sample_rows(self, rows: int | None, seed: int) -> np.ndarray:
        """About `rows` records (default: the estimated table size n̂): `sample` with per_row = round(n̂ / n')."""
        target = self.rows if rows is None else rows
        per_row = max(int(round(target / len(self.relaxed))), 1) if target else 0
        if per_row == 0:
            return np.zeros((0, len(self.domain)), dtype=np.int64)
        return self.sample(per_row, seed)

    def sample(self, per_row: int, seed: int) -> np.ndarray:
        """Randomized rounding: `per_row` categorical records drawn from each relaxed row.

        Use per_row = round(n̂ / n') for a table of about n̂ rows. Public
        randomness: post-processing of the released relaxed data.
        """
        rng = np.random.default_rng(seed)
        probabilities = to_numpy(self.relaxed).astype(np.float64)
        n_rows = probabilities.shape[0]
        out = np.empty((n_rows, per_row, len(self.domain)), dtype=np.int64)
        for i, a in enumerate(self.domain.attributes):
            cumulative = np.cumsum(probabilities[:, self.encoding.block(a)], axis=1)
            u = rng.random((n_rows, per_row)) * cumulative[:, -1:]
            out[:, :, i] = np.minimum((u[:, :, None] >= cumulative[:, None, :]).sum(axis=2), cumulative.shape[1] - 1)
        return out.reshape(n_rows * per_row, len(self.domain))

