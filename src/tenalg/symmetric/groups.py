"""Abelian symmetry groups: U(1), Z_n and their products.

A group knows its identity charge, how two charges fuse, the dual of a charge and
how to bring a user's charge into canonical form (an int, or a tuple of ints for a
product group).

>>> g = ProductGroup(U1(), Zn(2))
>>> g.fuse((1, 1), (2, 1)), g.dual((3, 1)), g.identity
((3, 0), (-3, 1), (0, 0))
"""

from dataclasses import dataclass
from functools import reduce

from ..errors import DescriptorError


class Group:
    """Interface of an abelian group of charges (subclasses define the arithmetic)."""

    identity = 0

    def canonical(self, charge):
        """``charge`` in canonical form; raises DescriptorError if it is not one."""
        raise NotImplementedError

    def fuse(self, a, b):
        raise NotImplementedError

    def dual(self, a):
        raise NotImplementedError

    def fuse_many(self, charges):
        """The fusion of all ``charges`` (the identity for none)."""
        return reduce(self.fuse, charges, self.identity)


def _integer(charge, group):
    if isinstance(charge, bool) or not hasattr(charge, "__index__"):
        raise DescriptorError(f"charge {charge!r} of {group} is not an integer")
    return int(charge)


@dataclass(frozen=True)
class U1(Group):
    """Charges are integers; fusion adds them."""

    def canonical(self, charge):
        return _integer(charge, self)

    def fuse(self, a, b):
        return a + b

    def dual(self, a):
        return -a

    def __str__(self):
        return "U1"


@dataclass(frozen=True)
class Zn(Group):
    """Charges are integers modulo ``n``; canonical charges lie in 0..n-1."""

    n: int

    def __post_init__(self):
        if not isinstance(self.n, int) or self.n < 1:
            raise DescriptorError(f"Zn needs an integer n >= 1, got {self.n!r}")

    def canonical(self, charge):
        return _integer(charge, self) % self.n

    def fuse(self, a, b):
        return (a + b) % self.n

    def dual(self, a):
        return -a % self.n

    def __str__(self):
        return f"Z{self.n}"


@dataclass(frozen=True, init=False)
class ProductGroup(Group):
    """The direct product of groups; charges are tuples with one entry per factor."""

    factors: tuple

    def __init__(self, *factors):
        if not factors or not all(isinstance(f, Group) for f in factors):
            raise DescriptorError(f"ProductGroup needs one or more groups, got {factors!r}")
        object.__setattr__(self, "factors", tuple(factors))

    @property
    def identity(self):
        return tuple(f.identity for f in self.factors)

    def canonical(self, charge):
        if not isinstance(charge, tuple | list) or len(charge) != len(self.factors):
            raise DescriptorError(
                f"charge {charge!r} of {self} needs {len(self.factors)} entries"
            )
        return tuple(f.canonical(q) for f, q in zip(self.factors, charge, strict=True))

    def fuse(self, a, b):
        return tuple(f.fuse(x, y) for f, x, y in zip(self.factors, a, b, strict=True))

    def dual(self, a):
        return tuple(f.dual(x) for f, x in zip(self.factors, a, strict=True))

    def __str__(self):
        return "x".join(str(f) for f in self.factors)
