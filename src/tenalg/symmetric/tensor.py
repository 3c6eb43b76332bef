"""BlockTensor: legs, a flux, and a dict of dense blocks keyed by charge tuples.

Only blocks whose charges conserve the flux may exist; a missing block is zero. Blocks
are C-contiguous arrays of one dtype (those of a contraction's result may be views of
one buffer: the row ranges of one block-matrix product). The dict is the user's to
change: operations read its blocks through :func:`read_block` and :func:`check_keys`.

>>> import numpy as np
>>> from tenalg.symmetric import U1, Leg
>>> leg = Leg(U1(), [(0, 2), (1, 1)])
>>> t = BlockTensor.random((leg, leg.conj()), rng=np.random.default_rng(0))
>>> sorted(t.blocks), t.to_dense().shape
([(0, 0), (1, 1)], (3, 3))
>>> np.allclose(BlockTensor.from_dense(t.to_dense(), t.legs).to_dense(), t.to_dense())
True
"""

import math
import numbers

import numpy as np

from ..api import norm_host
from ..dtypes import result_type, storage_type
from ..errors import DescriptorError, DTypeError, InputMismatchError, OperationError
from ..inputs import host_array
from ..views import normalize_axes
from . import dense
from .groups import U1
from .legs import Leg
from .sectors import allowed_keys, block_shape, block_shapes, total_charge


def read_block(block, shape, dtype):
    """``block``, a tensor's of ``shape`` and ``dtype``, as operations read it: itself
    where it is a C-ordered array of both, else a C-ordered copy of its values in
    ``dtype``.  A block of another shape (a copy would broadcast it) or a complex block
    in a real tensor (its imaginary part would be dropped) raises InputMismatchError.

    >>> read_block(np.ones((2, 1), np.float32, order="F"), (2, 1), np.dtype(np.float64)).dtype
    dtype('float64')
    """
    block = host_array(block, "block", "tenalg.symmetric")
    if block.shape != shape:
        raise InputMismatchError(
            f"a block of shape {block.shape} where its tensor has one of {shape}")
    if block.dtype == dtype:
        return block if block.flags.c_contiguous else np.ascontiguousarray(block)
    if block.dtype.kind == "c" and dtype.kind != "c":
        raise InputMismatchError(f"a {block.dtype} block in a tensor of dtype {dtype}")
    return np.ascontiguousarray(block, dtype)


def check_keys(group, legs, flux, keys):
    """Raise InputMismatchError unless every block key in ``keys`` names a sector of each
    leg and conserves ``flux`` (a key put in a tensor's dict by hand)."""
    shapes = block_shapes(group, legs, flux)
    for key in keys:
        if key not in shapes:
            raise InputMismatchError(
                f"block key {key!r} is not one that conserves the flux {flux} on these legs"
                " (a charge per leg, each a sector of its leg)")


def _check_legs(legs):
    legs = tuple(legs)
    if not all(isinstance(leg, Leg) for leg in legs):
        raise DescriptorError("legs must be Leg objects")
    if len({leg.group for leg in legs}) > 1:
        raise DescriptorError(f"legs mix groups: {sorted({str(leg.group) for leg in legs})}")
    return legs


class BlockTensor:
    """A symmetric tensor: ``legs``, ``flux`` and ``blocks`` (charges tuple -> array)."""

    def __init__(self, legs, flux=None, blocks=None, dtype=None, group=None):
        legs = _check_legs(legs)
        group = legs[0].group if legs else group or U1()
        flux = group.identity if flux is None else group.canonical(flux)
        blocks = {} if blocks is None else blocks
        dtypes = {host_array(b, f"block {k}", "tenalg.symmetric").dtype
                  for k, b in blocks.items()}
        if dtype is None:
            dtype = result_type(sorted(dtypes, key=str)) if dtypes else np.float64
        dtype = storage_type(dtype, "BlockTensor")
        lost = [d for d in dtypes if d.kind == "c" and dtype.kind != "c"]
        if lost:  # np.asarray would keep the real part with only a ComplexWarning
            raise DTypeError(f"BlockTensor of dtype {dtype}: a block is {lost[0]}, whose "
                             "imaginary part it cannot hold")
        self.legs, self.flux, self.dtype, self.group, self.blocks = legs, flux, dtype, group, {}
        for key, block in blocks.items():
            if not isinstance(key, tuple) or len(key) != len(legs):
                raise DescriptorError(f"block key {key!r} needs one charge per leg ({len(legs)})")
            key = tuple(leg.group.canonical(q) for leg, q in zip(legs, key, strict=True))
            self._check_block(key, block)
            self.blocks[key] = host_array(block, f"block {key}", "tenalg.symmetric", dtype,
                                          "C")

    def _check_block(self, key, block):
        legs = self.legs
        if any(q not in leg.dims for leg, q in zip(legs, key, strict=True)):
            raise DescriptorError(f"block key {key} does not name one sector of each leg")
        total = total_charge(self.group, legs, key)
        if total != self.flux:
            raise DescriptorError(f"block {key} has total charge {total}, not the flux {self.flux}")
        if np.shape(block) != block_shape(legs, key):
            raise DescriptorError(
                f"block {key} has shape {np.shape(block)}, its sectors give "
                f"{block_shape(legs, key)}"
            )

    @classmethod
    def _new(cls, legs, flux, blocks, dtype, group):
        """Trusted construction from checked parts (no validation, no copies)."""
        t = cls.__new__(cls)
        t.legs, t.flux, t.blocks, t.dtype, t.group = legs, flux, blocks, np.dtype(dtype), group
        return t

    # -- construction -------------------------------------------------------------------
    @classmethod
    def zeros(cls, legs, flux=None, dtype=np.float64, group=None):
        """Every conserving block, filled with zeros (``group`` only for rank 0)."""
        t = cls(legs, flux, dtype=dtype, group=group)
        for key in allowed_keys(t.group, t.legs, t.flux):
            t.blocks[key] = np.zeros(block_shape(t.legs, key), t.dtype)
        return t

    @classmethod
    def random(cls, legs, flux=None, dtype=np.float64, rng=None, group=None):
        """Every conserving block, standard normal entries (real and imaginary parts)."""
        rng = np.random.default_rng(rng)
        t = cls(legs, flux, dtype=dtype, group=group)
        for key in allowed_keys(t.group, t.legs, t.flux):
            shape = block_shape(t.legs, key)
            block = rng.standard_normal(shape)
            if np.issubdtype(t.dtype, np.complexfloating):
                block = block + 1j * rng.standard_normal(shape)
            t.blocks[key] = np.asarray(block, t.dtype)
        return t

    @classmethod
    def from_dense(cls, array, legs, flux=None, atol=1e-12):
        """The blocks of a dense ``array`` (integers and bools become float64, as in
        ``tt.from_dense``); raises if an entry off the blocks exceeds atol."""
        array = host_array(array, "from_dense", "tenalg.symmetric")
        if array.dtype.kind in "biu":
            array = array.astype(np.float64)
        t = cls(legs, flux, dtype=array.dtype)
        dims = tuple(leg.dim for leg in t.legs)
        if array.shape != dims:
            raise DescriptorError(f"dense shape {array.shape} does not match the legs {dims}")
        rest = array.copy()
        for key in allowed_keys(t.group, t.legs, t.flux):
            index = t._index(key)
            t.blocks[key] = np.array(array[index], order="C")
            rest[index] = 0
        off = np.abs(rest)
        if rest.size and not off.max() <= atol:  # NaN off the blocks is refused too
            entry = np.unravel_index(np.argmax(np.where(np.isnan(off), np.inf, off)),
                                     rest.shape)
            key = tuple(_sector_of(leg, i) for leg, i in zip(t.legs, entry, strict=True))
            raise DescriptorError(
                f"array is not symmetric: entry {tuple(int(i) for i in entry)} = "
                f"{array[entry].item()!r} lies in block {key} of total charge "
                f"{total_charge(t.group, t.legs, key)}, not the flux {t.flux} (atol {atol})"
            )
        return t

    def _index(self, key):
        return tuple(leg.slice(q) for leg, q in zip(self.legs, key, strict=True))

    def read_blocks(self):
        """The blocks as operations read them (:func:`check_keys`, :func:`read_block`)."""
        shapes = block_shapes(self.group, self.legs, self.flux)
        if not shapes.keys() >= self.blocks.keys():  # (one set comparison, in C)
            check_keys(self.group, self.legs, self.flux, self.blocks)  # names the stray key
        return {key: read_block(block, shapes[key], self.dtype)
                for key, block in self.blocks.items()}

    def to_dense(self):
        """The dense array: sectors in leg order, zeros off the blocks."""
        out = np.zeros(tuple(leg.dim for leg in self.legs), self.dtype)
        for key, block in self.read_blocks().items():
            out[self._index(key)] = block
        return out

    def copy(self):
        blocks = {k: b.copy() for k, b in self.blocks.items()}
        return self._new(self.legs, self.flux, blocks, self.dtype, self.group)

    # -- properties ---------------------------------------------------------------------
    @property
    def ndim(self):
        return len(self.legs)

    @property
    def shape(self):
        """The dense shape."""
        return tuple(leg.dim for leg in self.legs)

    def __repr__(self):
        return (f"BlockTensor(legs={list(self.legs)}, flux={self.flux}, "
                f"{len(self.blocks)} blocks, {self.dtype})")

    # -- arithmetic ---------------------------------------------------------------------
    def conj(self):
        """Complex conjugate: conjugated blocks, every leg flipped, the dual flux."""
        legs = tuple(leg.conj() for leg in self.legs)
        blocks = {k: np.conj(b) for k, b in self.read_blocks().items()}
        return self._new(legs, self.group.dual(self.flux), blocks, self.dtype, self.group)

    def norm(self):
        """The Frobenius norm (a Python float), from the dense layer's scaled block norms."""
        return math.hypot(*(norm_host(b) for b in self.read_blocks().values()))

    def __mul__(self, scalar):
        if not isinstance(scalar, numbers.Number) or isinstance(scalar, bool):
            return NotImplemented
        dtype = storage_type(np.result_type(self.dtype, scalar), "scalar * BlockTensor")
        blocks = {k: (scalar * b).astype(dtype, copy=False)
                  for k, b in self.read_blocks().items()}
        return self._new(self.legs, self.flux, blocks, dtype, self.group)

    __rmul__ = __mul__

    def __truediv__(self, scalar):
        return self * (1 / scalar)

    def __neg__(self):
        return self * -1

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def _combine(self, other, sign):
        if not isinstance(other, BlockTensor):
            return NotImplemented
        if other.legs != self.legs or other.flux != self.flux:
            raise OperationError(
                f"adding tensors with different legs or flux ({self!r} and {other!r})"
            )
        dtype = result_type([self.dtype, other.dtype])
        blocks = {k: b.astype(dtype) for k, b in self.read_blocks().items()}
        for key, block in other.read_blocks().items():
            if key in blocks:
                blocks[key] += sign * block
            else:
                blocks[key] = (sign * block).astype(dtype)
        return self._new(self.legs, self.flux, blocks, dtype, self.group)

    def permute(self, axes):
        """The tensor with its legs in the order ``axes`` (a new tensor)."""
        return permute(self, axes)


def _sector_of(leg, index):
    for q, _ in leg.sectors:
        s = leg.slice(q)
        if s.start <= index < s.stop:
            return q
    raise AssertionError("index beyond the leg")  # pragma: no cover


def permute(t, axes):
    """``t`` with legs (and block axes) in the order ``axes``; blocks go through plans.

    >>> from tenalg.symmetric import U1, Leg
    >>> leg = Leg(U1(), [(0, 1), (1, 2)])
    >>> t = BlockTensor.random((leg, leg, leg.conj()), rng=0)
    >>> import numpy as np
    >>> np.allclose(permute(t, (2, 0, 1)).to_dense(), t.to_dense().transpose(2, 0, 1))
    True
    """
    axes = normalize_axes(axes, t.ndim)
    if sorted(axes) != list(range(t.ndim)):
        raise OperationError(f"axes {axes} are not a permutation of range({t.ndim})")
    legs = tuple(t.legs[ax] for ax in axes)
    blocks = {}
    for key, block in t.read_blocks().items():
        out = np.empty(tuple(block.shape[ax] for ax in axes), t.dtype)
        blocks[tuple(key[ax] for ax in axes)] = dense.permute_into(out, block, axes)
    return BlockTensor._new(legs, t.flux, blocks, t.dtype, t.group)
