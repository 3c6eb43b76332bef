"""Legs: the charge sectors of one tensor axis, a dual flag, and fusion of legs.

A leg lists its sectors ``(charge, dim)`` in a fixed order; in the dense picture each
sector covers ``dim`` consecutive indices. A dual leg counts its charges with the
opposite sign in the conservation law. A leg contracts only with its dual carrying the
same sectors.

>>> from tenalg.symmetric import U1
>>> leg = Leg(U1(), [(0, 2), (1, 3)])
>>> leg.dim, leg.conj().dual, leg.slice(1)
(5, True, slice(2, 5, None))
>>> fused = LegFusion([leg, leg.conj()])
>>> fused.leg.sectors
((0, 13), (-1, 6), (1, 6))
"""

import itertools
from functools import cached_property

from ..errors import DescriptorError, OperationError
from .groups import Group


class Leg:
    """Sectors ``(charge, dim)`` of one axis of a symmetric tensor, and a dual flag."""

    def __init__(self, group, sectors, dual=False):
        if not isinstance(group, Group):
            raise DescriptorError(f"Leg needs a symmetry group, got {group!r}")
        canonical = []
        for sector in sectors:
            if len(sector) != 2:
                raise DescriptorError(f"a sector is (charge, dim), got {sector!r}")
            charge, dim = group.canonical(sector[0]), sector[1]
            if isinstance(dim, bool) or not hasattr(dim, "__index__") or dim < 0:
                raise DescriptorError(f"sector {charge!r} has dimension {dim!r}, not an int >= 0")
            canonical.append((charge, int(dim)))
        charges = [q for q, _ in canonical]
        if len(set(charges)) != len(charges):
            raise DescriptorError(f"leg repeats a charge: {charges}")
        self.group = group
        self.sectors = tuple(canonical)
        self.dual = bool(dual)
        self._hash = hash((group, self.sectors, self.dual))

    @cached_property
    def charges(self):
        return tuple(q for q, _ in self.sectors)

    @cached_property
    def dims(self):
        """Sector dimension by charge."""
        return dict(self.sectors)

    @cached_property
    def dim(self):
        """The dense extent: the sum of the sector dimensions."""
        return sum(d for _, d in self.sectors)

    @cached_property
    def _slices(self):
        out, start = {}, 0
        for q, d in self.sectors:
            out[q] = slice(start, start + d)
            start += d
        return out

    def slice(self, charge):
        """The dense index range of sector ``charge``."""
        return self._slices[charge]

    def signed(self, charge):
        """``charge`` as it counts in the conservation law (its dual on a dual leg)."""
        return self.group.dual(charge) if self.dual else charge

    def conj(self):
        """The same sectors with the dual flag flipped."""
        return Leg(self.group, self.sectors, not self.dual)

    def check_contracts_with(self, other, where):
        """Raise OperationError unless ``other`` is this leg's dual (same sectors)."""
        if self.group != other.group:
            raise OperationError(f"{where}: groups differ ({self.group} and {other.group})")
        if self.sectors != other.sectors:
            raise OperationError(
                f"{where}: sectors differ ({list(self.sectors)} and {list(other.sectors)})"
            )
        if self.dual == other.dual:
            raise OperationError(
                f"{where}: both legs are {'dual' if self.dual else 'non-dual'}; "
                "a leg contracts only with its dual"
            )

    def __eq__(self, other):
        return isinstance(other, Leg) and self._hash == other._hash and (
            (self.group, self.sectors, self.dual) == (other.group, other.sectors, other.dual)
        )

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Leg({self.group}, {list(self.sectors)}, dual={self.dual})"


class LegFusion:
    """Several legs fused into one, with the map to split it back.

    The fused leg's sector ``f`` gathers every combination of the legs' sectors whose
    signed charges fuse to ``f`` (to its dual when ``dual`` is True), combinations in
    lexicographic order, each a row-major block of ``prod(dims)`` indices.
    ``parts[f]`` lists ``(charges, start, shape)`` for those combinations and
    ``locate[charges]`` gives ``(f, start, shape)``.
    """

    def __init__(self, legs, dual=False):
        legs = tuple(legs)
        if not legs:
            raise DescriptorError("LegFusion needs at least one leg")
        group = legs[0].group
        if any(leg.group != group for leg in legs):
            raise DescriptorError("fused legs must share one group")
        self.legs = legs
        self.parts = {}
        self.locate = {}
        sizes = {}
        for combo in itertools.product(*(leg.sectors for leg in legs)):
            charges = tuple(q for q, _ in combo)
            shape = tuple(d for _, d in combo)
            total = group.fuse_many(leg.signed(q) for leg, q in zip(legs, charges, strict=True))
            fused = group.dual(total) if dual else total
            start = sizes.get(fused, 0)
            size = 1
            for d in shape:
                size *= d
            sizes[fused] = start + size
            self.parts.setdefault(fused, []).append((charges, start, shape))
            self.locate[charges] = (fused, start, shape)
        self.leg = Leg(group, list(sizes.items()), dual)

    def split(self):
        """The legs that were fused."""
        return self.legs
