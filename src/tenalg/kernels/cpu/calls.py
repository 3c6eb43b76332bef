"""The Python side shared by the kernels' argument preparation: 1-D views of the memory an
array spans (:func:`_memory`), layouts and their geometry, scalars in the compute type,
and :class:`_Call`, one prepared kernel call that a plan keeps and reruns (and for whose
:meth:`_Call.arguments` :mod:`tenalg.kernels.compiler` compiles it).

>>> import numpy as np
>>> _geometry((2, 3), (-24, 8), np.dtype(np.float64))
(3, 6, (-3, 1))
"""

import functools
import math
from typing import NamedTuple

import numpy as np
import numpy.ma  # noqa: F401 - Numba's typeof of an array loads it on first use: 33 ms of a first call
from numba import njit

from ...descriptors import Unary
from ...dtypes import is_complex
from .. import compiler
from ..jit import KERNEL as _KERNEL
from .lowlevel import _CONJ, _FORMATS, _IDENTITY, _MARKS, _NO_MARK, _UNARY


class _Memory:
    """A bare ``__array_interface__`` so that NumPy wraps raw memory without copying."""

    __slots__ = ("__array_interface__",)

    def __init__(self, address, span, typestr):
        self.__array_interface__ = {"data": (address, False), "shape": (span,),
                                    "typestr": typestr, "version": 3}


def _layout(x):
    """The hashable layout of x: shape, byte strides, dtype (the key of cached preparations)."""
    return x.shape, x.strides, x.dtype


@functools.lru_cache(maxsize=1024)
def _geometry(shape, strides, dtype):
    """(offset of element 0 in the spanned memory, span, element strides) of a layout."""
    item = dtype.itemsize
    steps = tuple(st // item for st in strides)
    lo = sum(st * (e - 1) for e, st in zip(shape, steps, strict=True) if st < 0)
    hi = sum(st * (e - 1) for e, st in zip(shape, steps, strict=True) if st > 0)
    return -lo, (hi - lo + 1 if math.prod(shape) else 0), steps


@functools.lru_cache(maxsize=1024)
def _dense_order(shape, strides, dtype):
    """The axis order in which a layout is C-contiguous (no gaps, no negative or repeated
    strides), or None: its memory is then that of the axes so permuted.

    >>> _dense_order((2, 3), (8, 16), np.dtype(np.float64))
    (1, 0)
    """
    order = sorted(range(len(shape)), key=lambda ax: -strides[ax])
    step = dtype.itemsize
    for ax in reversed(order):
        if shape[ax] != 1 and strides[ax] != step:
            return None
        step *= shape[ax]
    return tuple(order)


@njit(**_KERNEL)
def _bits_address(x):
    return x.ctypes.data


def _address(x):
    """The address of x's element 0 (16-bit storage is viewed as bits for Numba): by the
    compiled :func:`_bits_address` (0.3 us; NumPy's array interface 1.4) once the
    compiler has it, which compiles it under its cache lock like every cached kernel
    (called directly, each process compiled it unlocked: processes sharing a cache could
    write its index at once)."""
    bits = x.view(np.uint16) if x.dtype in _FORMATS else x
    if compiler.ready_for(_bits_address, (bits,), (bits.dtype, bits.ndim, bits.flags.num)):
        return _bits_address(bits)
    return bits.__array_interface__["data"][0]


def _memory(x):
    """A 1-D view of the memory x spans (16-bit storage as uint16 bits).  Every view is
    typed writeable, so that one specialisation serves read-only inputs too (kernels
    never write their inputs).  A view of a plain writeable array is a slice of that
    array, of its axes permuted where that makes it contiguous (a transposed output);
    otherwise the view does not keep x alive: use it only while x is."""
    flags = x.flags
    if flags.writeable and flags.c_contiguous:
        flat = x.reshape(-1)
    elif flags.writeable and (order := _dense_order(*_layout(x))) is not None:
        flat = x.transpose(order).reshape(-1)
    else:
        offset, span, _ = _geometry(*_layout(x))
        root = x
        while isinstance(root.base, np.ndarray):
            root = root.base
        start, rest = divmod(_address(x) - _address(root), x.itemsize) if (
            root is not x and root.dtype == x.dtype and root.flags.c_contiguous
            and root.flags.writeable) else (0, 1)
        start -= offset
        if rest == 0 and start >= 0 and start + span <= root.size:
            flat = root.reshape(-1)[start:start + span]
        else:
            typestr = "<u2" if x.dtype in _FORMATS else x.dtype.str
            address = x.__array_interface__["data"][0] - offset * x.itemsize
            return np.asarray(_Memory(address, span, typestr))
    return flat.view(np.uint16) if x.dtype in _FORMATS else flat



@functools.lru_cache(maxsize=1024)
def _codes(*codes):
    """The integer codes of a kernel call as an array (cached, so never written)."""
    return np.array(codes, np.int64)



class _Call(NamedTuple):
    """One kernel call, fixed but for its arrays and scalars: ``kernel(shape, offs,
    *static, scal, *flats)``.  The flats are the memory of ``arrays[k]`` for k in
    ``sources`` (arrays: out, then the inputs), ``offs`` the offsets of their element 0
    in it; scal holds the call's scalars (``scalars`` of them, missing ones 1) in the
    compute type.  :meth:`rebased` makes the call take the arrays that the views it was
    made for were cut from, so that a plan calls it without making views."""

    kernel: object  # the parallel twin, or the serial one for one thread
    shape: np.ndarray
    offs: np.ndarray
    static: tuple
    sources: tuple
    scalars: int
    compute: np.dtype
    about: str  # the kernel and its layout, for explain()

    def run(self, arrays, values):
        self.kernel(*self.arguments(arrays, values))

    def arguments(self, arrays, values):
        """The kernel's arguments for ``arrays`` and scalar ``values``."""
        flats = [_memory(x) for x in arrays]
        if len(values) < self.scalars:
            values = tuple(values) + (1,) * (self.scalars - len(values))
        return (self.shape, self.offs, *self.static, _scalars(values, self.compute),
                *[flats[k] for k in self.sources])

    def rebased(self, arrays):
        """This call on ``arrays`` themselves rather than on the views made from them
        (every view of a plan starts at its array's element 0)."""
        offs = [_geometry(*_layout(arrays[k]))[0] for k in self.sources]
        return self._replace(offs=np.array(offs, np.int64))


def _ceil_div(n, d):
    return -(-n // d)


def _mark(dtype):
    """The format marker of a storage dtype (for 16-bit storage; a dummy for others)."""
    return _MARKS.get(dtype, _NO_MARK)


def _fmt(x):
    return _FORMATS.get(x.dtype, 0)


@functools.lru_cache(maxsize=256)
def _unary_code(unary, compute):
    code = _UNARY[Unary.coerce(unary)]
    return _IDENTITY if code == _CONJ and not is_complex(compute) else code


def _scalars(values, compute):
    """Host scalars (a tuple) as an array of the compute type (a real type keeps the real
    part).  Python ints and non-zero floats, whose equality means identity (unlike -0.0
    and 0.0), come from a cache, so the array is never written."""
    if all(type(v) is int or (type(v) is float and v != 0) for v in values):
        return _cached_scalars(values, compute)
    return _cached_scalars.__wrapped__(values, compute)


@functools.lru_cache(maxsize=256)
def _cached_scalars(values, compute):
    if is_complex(compute):
        return np.array([complex(v) for v in values], compute)
    return np.array([float(np.real(v)) for v in values], compute)
