"""Uniform randomness for the exact samplers: one object, cryptographic by default."""

from __future__ import annotations

import random
import secrets

import numpy as np

__all__ = ["RandomSource"]


class RandomSource:
    """Uniform integers from `secrets.SystemRandom` (default) or a seeded `random.Random`.

    The seeded form is for tests and reproducible experiments only: it is not
    cryptographically secure and must not protect released values. `seeded` says which.
    `requests` counts the requests served: whoever must know whether any noise has been drawn
    since a point (dpsql charges a statement from its first draw) compares it before and after.
    """

    def __init__(self, seed: int | None = None) -> None:
        rng = secrets.SystemRandom() if seed is None else random.Random(seed)
        self._getrandbits = rng.getrandbits
        self._randbytes = rng.randbytes
        self.seeded = seed is not None
        self.requests = 0

    def randbelow(self, n: int) -> int:
        """Uniform integer in [0, n), by rejection from (n-1).bit_length() random bits."""
        if n <= 0:
            raise ValueError(f"randbelow needs n >= 1, got {n}")
        self.requests += 1
        k = (n - 1).bit_length()
        getrandbits = self._getrandbits
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r

    def words(self, n: int) -> np.ndarray:
        """`n` independent uniform 64-bit words (uint64), from the same source as `randbelow`."""
        self.requests += 1
        return np.frombuffer(self._randbytes(8 * n), dtype=np.uint64)
