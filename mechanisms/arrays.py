"""The one array-module switch: NumPy by default, CuPy on request or when a GPU is present.

Heavy array code in `mechanisms` asks `xp()` for its array module instead of
importing NumPy directly, so the same code runs on either device. Results that
leave `mechanisms` are converted back with `to_numpy`.

The environment variable DPSQL_ARRAY_MODULE (numpy, cupy or auto) is read at import but
applied when an array path first asks for its module: importing never fails, and a
request that cannot be met (cupy without a usable GPU, an unknown name) raises
`ArrayModuleUnavailable` there; "auto" falls back to NumPy.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy

_module: ModuleType = numpy
_pending: str | None = os.environ.get("DPSQL_ARRAY_MODULE") or None  # applied on the first `xp()`


class ArrayModuleUnavailable(RuntimeError):
    """The requested array module cannot be used here (e.g. CuPy without a visible GPU)."""


def _load_cupy() -> ModuleType | None:
    try:
        import cupy  # type: ignore[import-not-found]

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:  # no CuPy, no driver or no device: stay on NumPy
        return None
    return None


def set_array_module(name: str) -> ModuleType:
    """Select "numpy", "cupy" (ArrayModuleUnavailable if no GPU is usable) or "auto" (CuPy if a GPU is present)."""
    global _module, _pending
    if name == "numpy":
        _module = numpy
    elif name in ("cupy", "auto"):
        cupy = _load_cupy()
        if cupy is None and name == "cupy":
            _module = numpy
            raise ArrayModuleUnavailable(
                "the GPU array module (CuPy) was requested (DPSQL_ARRAY_MODULE=cupy) but no usable GPU was found: "
                "CuPy is not installed, or it sees no CUDA device; install CuPy for this machine's CUDA, or set "
                "DPSQL_ARRAY_MODULE=auto (GPU when present, else NumPy) or numpy")
        _module = cupy or numpy
    else:
        _module = numpy
        raise ArrayModuleUnavailable(f"unknown array module {name!r} (DPSQL_ARRAY_MODULE): use numpy, cupy or auto")
    _pending = None  # a request that failed stays pending: every later use says so again
    return _module


def xp() -> ModuleType:
    """The array module in use (numpy or cupy); the first call applies DPSQL_ARRAY_MODULE."""
    if _pending is not None:
        return set_array_module(_pending)
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


def kron(a, b):
    """a ⊗ b: for two vectors or two matrices the same products as `kron` of the array module, formed by
    one broadcast multiply (the library's general n-d kron costs tens of µs per call in overhead)."""
    if a.ndim == b.ndim == 1:
        return (a[:, None] * b[None, :]).reshape(-1)
    if a.ndim == b.ndim == 2:
        return (a[:, None, :, None] * b[None, :, None, :]).reshape(a.shape[0] * b.shape[0], a.shape[1] * b.shape[1])
    return xp().kron(a, b)


def to_numpy(a):
    """A NumPy copy of an array from either module."""
    if _module is not numpy and hasattr(a, "get"):
        return a.get()
    return numpy.asarray(a)

