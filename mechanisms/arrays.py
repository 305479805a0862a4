"""The one array-module switch: NumPy by default, CuPy on request or when a GPU is present.

Heavy array code in `mechanisms` asks `xp()` for its array module instead of
importing NumPy directly, so the same code runs on either device. Results that
leave `mechanisms` are converted back with `to_numpy`.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy

_module: ModuleType = numpy


def _load_cupy() -> ModuleType | None:
    try:
        import cupy  # type: ignore[import-not-found]

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # no CuPy, no driver or no device: stay on NumPy
        return None
    return None


def set_array_module(name: str) -> ModuleType:
    """Select "numpy", "cupy" (error if unavailable) or "auto" (CuPy if a GPU is present)."""
    global _module
    if name == "numpy":
        _module = numpy
    elif name in ("cupy", "auto"):
        cupy = _load_cupy()
        if cupy is None and name == "cupy":
            raise RuntimeError("CuPy with a visible GPU was requested but is not available")
        _module = cupy or numpy
    else:
        raise ValueError(f"unknown array module {name!r}: use numpy, cupy or auto")
    return _module


def xp() -> ModuleType:
    """The array module in use (numpy or cupy)."""
    return _module


def pinv(a, hermitian: bool = False):
    """The Moore–Penrose pseudo-inverse, cutting singular values below max(shape)·eps·σ_max.

    That is the numerical-rank tolerance (as `matrix_rank` uses): the libraries' default
    (1e-15·σ_max) keeps rounding noise of a rank-deficient matrix, e.g. the Gram matrix
    of two strategies on one clique, and inverts it into errors of order 1e-3.
    """
    m = xp()
    a = m.asarray(a)
    rcond = max(a.shape) * float(m.finfo(a.dtype if a.dtype.kind == "f" else float).eps)
    if m is numpy:
        return m.linalg.pinv(a, rcond=rcond, hermitian=hermitian)
    return m.linalg.pinv(a, rcond=rcond)  # CuPy's pinv has no `hermitian`


def to_numpy(a):
    """A NumPy copy of an array from either module."""
    if _module is not numpy and hasattr(a, "get"):
        return a.get()
    return numpy.asarray(a)


if os.environ.get("DPSQL_ARRAY_MODULE"):
    set_array_module(os.environ["DPSQL_ARRAY_MODULE"])
