"""The discretized domain of a table: ordered attributes and their sizes."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Iterable


@dataclass(frozen=True)
class Domain:
    """Ordered attribute names with the number of bins of each.

    A cell of the domain is a tuple of bin indices, one per attribute. Every
    attribute set handled by the engine (a clique, a marginal) is kept in this
    domain order, so that Kronecker products line up with flattened arrays.
    """

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.attributes) != len(self.sizes):
            raise ValueError("attributes and sizes differ in length")
        if len(set(self.attributes)) != len(self.attributes):
            raise ValueError("attribute names must be unique")
        if any(int(n) < 1 for n in self.sizes):
            raise ValueError("every attribute needs at least one bin")

    @classmethod
    def from_dict(cls, sizes: dict[str, int]) -> "Domain":
        return cls(tuple(sizes), tuple(int(n) for n in sizes.values()))

    def __contains__(self, attribute: object) -> bool:
        return attribute in self.attributes

    def __len__(self) -> int:
        return len(self.attributes)

    def size_of(self, attribute: str) -> int:
        return self.sizes[self.attributes.index(attribute)]

    def canonical(self, attributes: Iterable[str]) -> tuple[str, ...]:
        """The given attributes, deduplicated, in domain order."""
        wanted = set(attributes)
        unknown = wanted - set(self.attributes)
        if unknown:
            raise KeyError(f"attributes not in domain: {sorted(unknown)}")
        return tuple(a for a in self.attributes if a in wanted)

    def project(self, attributes: Iterable[str]) -> "Domain":
        attrs = self.canonical(attributes)
        return Domain(attrs, tuple(self.size_of(a) for a in attrs))

    def shape(self, attributes: Iterable[str] | None = None) -> tuple[int, ...]:
        attrs = self.attributes if attributes is None else self.canonical(attributes)
        return tuple(self.size_of(a) for a in attrs)

    def size(self, attributes: Iterable[str] | None = None) -> int:
        """Number of cells of the marginal over `attributes` (all by default)."""
        return prod(self.shape(attributes))
