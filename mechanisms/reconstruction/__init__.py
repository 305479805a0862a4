"""Reconstruction: one model answers every block from the measurements, with exact variances.

- `least_squares`: `LeastSquaresModel` over all of a table's measurements (residual-basis
  GLS for marginals, per-clique least squares for strategies, direct answers);
- `clique`: `CliqueLeastSquares`, exact least squares on one clique without densifying;
- `answering`: `AnsweringModel`, least squares first, then generative models (AIM, RAP).
"""

from mechanisms.reconstruction.answering import LEAST_SQUARES, AnsweringModel
from mechanisms.reconstruction.clique import CliqueLeastSquares
from mechanisms.reconstruction.least_squares import Estimator, LeastSquaresModel, NotInSpan

__all__ = ["LEAST_SQUARES", "AnsweringModel", "CliqueLeastSquares", "Estimator", "LeastSquaresModel", "NotInSpan"]
