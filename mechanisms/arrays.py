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


def to_numpy(a):
    """A NumPy copy of an array from either module."""
    if _module is not numpy and hasattr(a, "get"):
        return a.get()
    return numpy.asarray(a)


if os.environ.get("DPSQL_ARRAY_MODULE"):
    set_array_module(os.environ["DPSQL_ARRAY_MODULE"])
