"""Tensor descriptors, operands, mode labels and the operator enums.

A :class:`TensorDescriptor` is what a plan knows about an array: extents,
strides in elements, and dtype.  An :class:`Operand` adds mode labels and a
unary transform.

>>> import numpy as np, tenalg as ta
>>> d = ta.TensorDescriptor.from_array(np.zeros((2, 3), np.float32).T)
>>> d.extents, d.strides
((3, 2), (1, 3))
>>> ta.Operand(d, "ij", unary="conjugate").unary
<Unary.CONJUGATE: 'conjugate'>
"""

import enum
import math
from dataclasses import dataclass

import numpy as np

from .dtypes import storage_type
from .errors import DescriptorError, IntegerTypeError, OperationError, type_name

INDEX_MAX = np.iinfo(np.intp).max


class _Named(enum.StrEnum):
    """A string enum that accepts its member names and values case-insensitively."""

    @classmethod
    def coerce(cls, value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip().lower()
            for member in cls:
                if member.value == key:
                    return member
        choices = ", ".join(m.value for m in cls)
        raise OperationError(f"unknown {cls.__name__} {value!r}; choose one of {choices}")


class Unary(_Named):
    """Unary transforms applied to an operand as it is read."""

    IDENTITY = "identity"
    NEGATE = "negate"
    ABS = "abs"
    SQRT = "sqrt"
    EXP = "exp"
    LOG = "log"
    SIN = "sin"
    COS = "cos"
    TANH = "tanh"
    RELU = "relu"
    RECIPROCAL = "reciprocal"
    CONJUGATE = "conjugate"


class Binary(_Named):
    """Binary operators of the elementwise operations."""

    ADD = "add"
    MUL = "mul"
    MIN = "min"
    MAX = "max"


class Reduce(_Named):
    """Reduction operators; empty reductions give the identity (0, 1, +inf, -inf)."""

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


def normalize_modes(modes, what="modes"):
    """Mode labels as a tuple: a string gives its characters, a sequence its items.

    >>> normalize_modes("ij"), normalize_modes([0, 2])
    (('i', 'j'), (0, 2))
    """
    if isinstance(modes, str):
        return tuple(modes)
    try:
        labels = tuple(modes)
    except TypeError as exc:
        raise DescriptorError(f"{what}: expected a string or a sequence of labels") from exc
    for label in labels:
        try:
            hash(label)
        except TypeError as exc:
            raise DescriptorError(f"{what}: label {label!r} is not hashable") from exc
    return labels


def modes_text(modes, empty="(none)"):
    """Mode labels as ``explain()`` writes them: run together where each is one character,
    else apart; an einsum ellipsis axis ``('...', k)`` as ``...k``.

    >>> modes_text("ijk"), modes_text(["row", "col"]), modes_text([("...", 0), "i"])
    ('ijk', 'row col', '...0 i')
    """
    names = [f"...{m[1]}" if isinstance(m, tuple) and m[:1] == ("...",) else str(m)
             for m in modes]
    if not names:
        return empty
    return "".join(names) if all(len(n) == 1 for n in names) else " ".join(names)


def overlapping(extents, strides):
    """True if two index tuples of the layout address the same element.

    >>> overlapping((3, 3), (1, 1)), overlapping((3, 3), (3, 1))
    (True, False)
    """
    if 0 in extents:
        return False
    reach = 1
    for stride, extent in sorted((abs(s), e) for e, s in zip(extents, strides, strict=True)
                                 if e > 1):
        if stride < reach:
            return True
        reach += stride * (extent - 1)
    return False


def _as_index(value, what):
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise IntegerTypeError(f"{what} must be an integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class TensorDescriptor:
    """Extents, element strides and storage dtype of a tensor (hashable, immutable)."""

    extents: tuple
    strides: tuple
    dtype: np.dtype

    def __init__(self, extents, strides, dtype):
        extents = tuple(_as_index(e, "extent") for e in extents)
        strides = tuple(_as_index(s, "stride") for s in strides)
        if len(extents) != len(strides):
            raise DescriptorError(
                f"{len(extents)} extents but {len(strides)} strides: {extents} vs {strides}"
            )
        for axis, e in enumerate(extents):
            if e < 0:
                raise DescriptorError(f"extent of axis {axis} is negative ({e})")
        object.__setattr__(self, "extents", extents)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "dtype", storage_type(dtype, "descriptor"))
        self.bounds()  # overflow check

    @classmethod
    def contiguous(cls, extents, dtype):
        """Row-major (C order) descriptor."""
        extents = tuple(_as_index(e, "extent") for e in extents)
        strides, step = [], 1
        for e in reversed(extents):
            strides.append(step)
            step *= max(e, 1)
        return cls(extents, tuple(reversed(strides)), dtype)

    @classmethod
    def from_array(cls, array, what="array"):
        """Read a descriptor off an array with NumPy's ``shape``, byte ``strides`` and
        ``dtype`` (NumPy's, CuPy's); byte strides must be whole elements."""
        if not _strided(array):
            raise DescriptorError(f"{what}: expected an array with a shape, byte strides and "
                                  f"a NumPy dtype (NumPy's, CuPy's), got {type_name(array)}")
        return cls.from_byte_strides(array.shape, array.strides, array.dtype, what)

    @classmethod
    def from_byte_strides(cls, extents, byte_strides, dtype, what="array"):
        """A descriptor from NumPy-style byte strides, which must be whole elements."""
        dtype = storage_type(dtype, what)
        item = dtype.itemsize
        for axis, s in enumerate(byte_strides):
            if s % item:
                raise DescriptorError(
                    f"{what}: byte stride {s} of axis {axis} is not a multiple of "
                    f"the item size {item}"
                )
        return cls(extents, tuple(s // item for s in byte_strides), dtype)

    @property
    def ndim(self):
        return len(self.extents)

    @property
    def elements(self):
        """Number of elements (0 when any extent is 0)."""
        return math.prod(self.extents)

    def bounds(self):
        """(lowest, highest) element offset reached, relative to element 0.

        Raises DescriptorError when an offset does not fit the index type.
        An empty tensor reaches nothing and returns (0, -1).
        """
        if self.elements == 0:
            return 0, -1
        lo = sum(s * (e - 1) for e, s in zip(self.extents, self.strides, strict=True) if s < 0)
        hi = sum(s * (e - 1) for e, s in zip(self.extents, self.strides, strict=True) if s > 0)
        if max(-lo, hi) * self.dtype.itemsize > INDEX_MAX:
            raise DescriptorError(
                f"layout {self.extents} with strides {self.strides} overflows the index type"
            )
        return lo, hi

    @property
    def span(self):
        """Number of elements between the lowest and highest offset, inclusive."""
        lo, hi = self.bounds()
        return hi - lo + 1

    def is_nonoverlapping(self):
        """True if no two index tuples address the same element."""
        return not overlapping(self.extents, self.strides)

    def __repr__(self):
        return f"TensorDescriptor({self.extents}, {self.strides}, {self.dtype})"


def _strided(x):
    """Whether ``x`` is an array as NumPy describes one: a ``shape``, byte ``strides`` and
    a NumPy ``dtype`` (a NumPy or CuPy array; not a torch tensor, whose strides count
    elements, nor a Dask array, which has none)."""
    return (isinstance(x, np.ndarray)
            or (isinstance(getattr(x, "strides", None), tuple) and hasattr(x, "shape")
                and isinstance(getattr(x, "dtype", None), np.dtype)))


class Operand:
    """A descriptor with mode labels and a unary transform.

    ``Operand(array_or_descriptor, modes, unary="identity")``; the number of modes
    must equal the rank.  Repeated labels mark a diagonal and need equal extents.
    """

    __slots__ = ("descriptor", "modes", "unary")

    def __init__(self, descriptor, modes, unary=Unary.IDENTITY, what="operand"):
        if _strided(descriptor):
            descriptor = TensorDescriptor.from_array(descriptor, what)
        if not isinstance(descriptor, TensorDescriptor):
            raise DescriptorError(
                f"{what}: expected an array or a TensorDescriptor, got {type_name(descriptor)}"
            )
        modes = normalize_modes(modes, f"{what} modes")
        if len(modes) != descriptor.ndim:
            raise DescriptorError(
                f"{what}: {len(modes)} modes {modes} for a tensor of rank {descriptor.ndim}"
            )
        seen = {}
        for mode, extent in zip(modes, descriptor.extents, strict=True):
            if mode in seen and seen[mode] != extent:
                raise DescriptorError(
                    f"{what}: repeated mode {mode!r} has unequal extents {seen[mode]} and {extent}"
                )
            seen[mode] = extent
        self.descriptor = descriptor
        self.modes = modes
        self.unary = Unary.coerce(unary)

    @property
    def dtype(self):
        return self.descriptor.dtype

    def extent_of(self):
        """Mapping mode -> extent."""
        return dict(zip(self.modes, self.descriptor.extents, strict=True))

    def __eq__(self, other):
        return isinstance(other, Operand) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _key(self):
        return (self.descriptor, self.modes, self.unary)

    def __repr__(self):
        return f"Operand({self.descriptor!r}, {self.modes}, {self.unary.value})"
