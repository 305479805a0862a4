"""Relaxed projection (RP): fit D' to noisy answers by Adam, projecting onto the simplex.

Minimizes the mean squared error (1/m) sum_i w_i (q̂_i(D') - ã_i)^2 over the
relaxed data (w_i: relative precision of answer i, 1 when all are equally noisy), with Adam (Kingma & Ba 2015; state reset at every call, D' warm-started
across rounds) and Sparsemax on every attribute block the queries touch after
each step. Everything here is post-processing of released answers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mechanisms.arrays import xp
from mechanisms.rap.encoding import sparsemax
from mechanisms.rap.queries import QuerySet
from mechanisms.interruption import checkpoint


@dataclass(frozen=True)
class ProjectionConfig:
    """Adam settings and the stopping rules.

    Stops at `max_iterations`, once the loss is at most `target_loss`, or when the
    best loss fell by less than a fraction `tolerance` over `patience` steps.
    """

    learning_rate: float = 0.03
    target_loss: float = 0.0
    max_iterations: int = 1000
    tolerance: float = 1e-2
    patience: int = 25
    beta1: float = 0.9
    beta2: float = 0.999
    epsilon: float = 1e-8


def relaxed_projection(relaxed, queries: QuerySet, targets, weights, config: ProjectionConfig = ProjectionConfig()):
    """Fit `relaxed` (n' x d', rows on the simplex, updated in place) to `targets` with `weights`.

    Returns the final loss and the number of Adam steps taken.
    """
    x = xp()
    targets = x.asarray(targets, dtype=relaxed.dtype)
    # Only relative weights matter (Adam's steps do not depend on the loss's scale): weights (and the target
    # loss) are divided by the largest, so a nearly noiseless measurement cannot overflow the array's dtype.
    weights = np.asarray(weights, dtype=np.float64)
    largest = float(weights.max()) if weights.size else 1.0
    scale = largest if largest > 1.0 else 1.0
    weights = x.asarray(weights / scale, dtype=relaxed.dtype)
    target_loss = config.target_loss / scale
    touched = queries.attributes
    m = x.zeros_like(relaxed)
    v = x.zeros_like(relaxed)
    best = float("inf")
    reference = float("inf")
    loss = float("inf")
    step = 0
    for step in range(1, config.max_iterations + 1):
        checkpoint(20.0 * queries.size * relaxed.shape[0] + 25.0 * relaxed.size)  # answers, gradient, Adam
        loss, grad = queries.loss_and_gradient(relaxed, targets, weights)
        if loss <= target_loss:
            break
        m *= config.beta1
        m += (1 - config.beta1) * grad
        v *= config.beta2
        v += (1 - config.beta2) * grad * grad
        rate = config.learning_rate * (1 - config.beta2**step) ** 0.5 / (1 - config.beta1**step)
        relaxed -= rate * m / (x.sqrt(v) + config.epsilon)
        sparsemax(relaxed, queries.encoding, touched)
        best = min(best, loss)
        if step % config.patience == 0:
            if best > (1 - config.tolerance) * reference or best == 0.0:
                break
            reference = best
    return loss, step
