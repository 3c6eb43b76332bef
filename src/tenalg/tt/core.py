"""Tensor-train cores and their two storage models.

A core is a three-index array of shape (lr, dd, rr): left rank, physical dimension, right
rank. Cores are immutable: operations build new cores, so sharing a core (or a fiber)
between trains is always safe.

- ``"contiguous"``: one C-ordered [lr][dd][rr] buffer (right rank fastest).
- ``"fiber"``: an (lr, rr) grid of length-dd fibers (dd fastest). All zero fibers of a
  grid are one shared read-only array, skipped by the arithmetic; block-diagonal sums
  and Kronecker products reuse or build fibers without touching the zero ones.

>>> import numpy as np
>>> c = TensorCore(np.arange(6.0).reshape(1, 3, 2), storage="fiber")
>>> c.lr, c.dd, c.rr, float(c[0, 2, 1])
(1, 3, 2, 5.0)
"""

from functools import lru_cache

import numpy as np

from ..errors import DescriptorError, OperationError
from ..inputs import host_array
from .linalg.dense import core_dtype, einsum

STORAGES = ("contiguous", "fiber")


def check_storage(storage):
    """Return ``storage`` if it names a storage model, else raise OperationError."""
    if storage not in STORAGES:
        raise OperationError(f"storage must be 'contiguous' or 'fiber', not {storage!r}")
    return storage


@lru_cache(maxsize=256)
def zero_fiber(dd, dtype):
    """The shared read-only zero fiber of length ``dd``."""
    z = np.zeros(dd, dtype=dtype)
    z.flags.writeable = False
    return z


def _readonly(a):
    if a.flags.writeable:
        a.flags.writeable = False
    return a


class TensorCore:
    """One core of a tensor train, of shape (lr, dd, rr), in either storage model.

    >>> import numpy as np
    >>> TensorCore.zeros(2, 3, 4, storage="fiber").vertical_unfolding().shape
    (6, 4)
    """

    __slots__ = ("_data", "_dtype", "_grid", "_nz", "_shape", "_storage")

    def __init__(self, data, storage="contiguous"):
        arr = host_array(data, "core", "tenalg.tt")
        if arr.ndim != 3:
            raise DescriptorError(f"a core has three indices (lr, dd, rr), got shape {arr.shape}")
        arr = np.array(arr, dtype=core_dtype(arr.dtype), order="C", copy=True)
        self._set(arr, check_storage(storage))

    @classmethod
    def _wrap(cls, arr, storage):
        """A core over ``arr`` (l, n, r), taking ownership of it (no copy when contiguous)."""
        core = cls.__new__(cls)
        core._set(np.ascontiguousarray(arr), storage)
        return core

    @classmethod
    def zeros(cls, lr, dd, rr, dtype=np.float64, storage="contiguous"):
        """A zero core; with fiber storage every fiber is the shared zero fiber."""
        dt = core_dtype(dtype)
        if check_storage(storage) == "fiber":
            return cls._from_grid(_zero_grid(lr, rr, dd, dt), np.zeros((lr, rr), bool), dd, dt)
        return cls._wrap(np.zeros((lr, dd, rr), dtype=dt), storage)

    @classmethod
    def _from_grid(cls, grid, nz, dd, dtype):
        core = cls.__new__(cls)
        core._storage, core._dtype, core._data = "fiber", np.dtype(dtype), None
        core._grid, core._nz = grid, _readonly(nz)
        core._shape = (grid.shape[0], dd, grid.shape[1])
        return core

    def _set(self, arr, storage):
        self._shape, self._dtype, self._storage = arr.shape, arr.dtype, storage
        if storage == "contiguous":
            self._data, self._grid, self._nz = _readonly(arr), None, None
            return
        lr, dd, rr = arr.shape
        block = _readonly(np.ascontiguousarray(arr.transpose(0, 2, 1)))
        nz = block.any(axis=2)
        grid = _zero_grid(lr, rr, dd, arr.dtype)
        flat, rows = grid.reshape(-1), block.reshape(lr * rr, dd)
        for k in np.flatnonzero(nz):
            flat[k] = rows[k]
        self._data, self._grid, self._nz = None, grid, _readonly(nz)

    lr = property(lambda self: self._shape[0], doc="Left rank.")
    dd = property(lambda self: self._shape[1], doc="Physical dimension.")
    rr = property(lambda self: self._shape[2], doc="Right rank.")
    shape = property(lambda self: self._shape, doc="(lr, dd, rr).")
    dtype = property(lambda self: self._dtype, doc="Element type.")
    storage = property(lambda self: self._storage, doc="'contiguous' or 'fiber'.")

    def __repr__(self):
        return f"TensorCore(shape={self._shape}, dtype={self._dtype}, storage={self._storage!r})"

    def __reduce__(self):
        """Pickled and deep-copied as its array and storage, and built again so: read-only,
        as every core is (NumPy brings its arrays back writeable, and a write into one
        core would change every train that shares it)."""
        return TensorCore._wrap, (self.array(), self._storage)

    def array(self):
        """The core as an (lr, dd, rr) array (read-only: the buffer itself when contiguous)."""
        if self._data is not None:
            return self._data
        lr, dd, rr = self._shape
        out = np.zeros((lr, rr, dd), dtype=self._dtype)
        idx, fibers = self._nonzero()
        if idx.size:
            out.reshape(lr * rr, dd)[idx] = fibers
        return out.transpose(0, 2, 1)

    def _nonzero(self):
        """Flat (l, r) positions of the nonzero fibers and those fibers stacked (k, dd)."""
        idx = np.flatnonzero(self._nz)
        flat = self._grid.reshape(-1)
        if not idx.size:
            return idx, np.zeros((0, self.dd), dtype=self._dtype)
        return idx, np.stack([flat[k] for k in idx])

    def fiber(self, l, r):
        """The length-dd fiber at (l, r) (the shared zero fiber where it is zero)."""
        if self._data is not None:
            return self._data[l, :, r]
        return self._grid[l, r]

    def nonzero_fibers(self):
        """Number of fibers that are not the shared zero fiber (all of them when contiguous)."""
        return int(self._nz.sum()) if self._nz is not None else self.lr * self.rr

    def __getitem__(self, index):
        l, d, r = index
        return self.fiber(l, r)[d] if self._data is None else self._data[l, d, r]

    def vertical_unfolding(self):
        """The core as an (lr*dd, rr) matrix."""
        return self.array().reshape(self.lr * self.dd, self.rr)

    def horizontal_unfolding(self):
        """The core as an (lr, dd*rr) matrix."""
        return self.array().reshape(self.lr, self.dd * self.rr)

    def copy(self):
        """A deep copy (fresh buffers and fibers; the zero fibers stay shared)."""
        if self._data is not None:
            return TensorCore._wrap(self._data.copy(), "contiguous")
        grid = self._grid.copy()
        flat = grid.reshape(-1)
        for k in np.flatnonzero(self._nz):
            flat[k] = _readonly(flat[k].copy())
        return TensorCore._from_grid(grid, self._nz.copy(), self.dd, self._dtype)

    def to_storage(self, storage):
        """This core in ``storage`` (itself when it is stored that way already)."""
        if check_storage(storage) == self._storage:
            return self
        return TensorCore._wrap(np.array(self.array(), order="C"), storage)

    def astype(self, dtype):
        """This core with elements of ``dtype`` (itself when they already are)."""
        dt = core_dtype(dtype)
        if dt == self._dtype:
            return self
        return TensorCore._wrap(self.array().astype(dt), self._storage)

    def take(self, indices):
        """The slices core[:, i, :] for each i of ``indices``, as a (k, lr, rr) array.

        With fiber storage only the nonzero fibers are read.
        """
        if self._data is not None:
            return self._data[:, indices, :].transpose(1, 0, 2)
        idx, fibers = self._nonzero()
        out = np.zeros((len(indices), self.lr * self.rr), dtype=self._dtype)
        out[:, idx] = fibers[:, indices].T
        return out.reshape(len(indices), self.lr, self.rr)

    def matvec(self, vector):
        """The (lr, rr) matrix sum_i core[:, i, :] vector[i] (zero fibers skipped)."""
        if self._data is not None:
            return einsum("lnr,n->lr", self._data, vector)
        idx, fibers = self._nonzero()
        values = fibers @ vector
        out = np.zeros(self.lr * self.rr, dtype=values.dtype)
        out[idx] = values
        return out.reshape(self.lr, self.rr)

    def scaled(self, alpha):
        """alpha * core as a new core (with fiber storage only nonzero fibers are scaled)."""
        if self._data is not None:
            return TensorCore._wrap(self._data * alpha, "contiguous")
        idx, fibers = self._nonzero()
        fibers = fibers * alpha
        grid = _zero_grid(self.lr, self.rr, self.dd, fibers.dtype)
        _fill(grid, idx, fibers)
        return TensorCore._from_grid(grid, self._nz.copy(), self.dd, fibers.dtype)


def _zero_grid(lr, rr, dd, dtype):
    grid = np.empty((lr, rr), dtype=object)
    grid.fill(zero_fiber(dd, np.dtype(dtype)))
    return grid


def _fill(grid, idx, fibers):
    flat = grid.reshape(-1)
    _readonly(fibers)
    for k, f in zip(idx, fibers, strict=True):
        flat[k] = f


def place(blocks, shape, storage, dtype):
    """A core of ``shape`` that holds each (core, l0, r0) of ``blocks`` at offset (l0, :, r0).

    Everything else is zero. With fiber storage the blocks' fibers are placed by
    reference (no data is copied) and the rest are the shared zero fiber.
    """
    lr, dd, rr = shape
    if storage == "contiguous":
        out = np.zeros(shape, dtype=dtype)
        for core, l0, r0 in blocks:
            out[l0 : l0 + core.lr, :, r0 : r0 + core.rr] = core.array()
        return TensorCore._wrap(out, storage)
    grid, nz = _zero_grid(lr, rr, dd, dtype), np.zeros((lr, rr), bool)
    for core, l0, r0 in blocks:
        core = core.to_storage("fiber").astype(dtype)
        grid[l0 : l0 + core.lr, r0 : r0 + core.rr] = core._grid
        nz[l0 : l0 + core.lr, r0 : r0 + core.rr] = core._nz
    return TensorCore._from_grid(grid, nz, dd, dtype)


def kron_arrays(a, b):
    """The (la lb, n, ra rb) Kronecker core of the (l, n, r) arrays ``a`` and ``b``.

    NumPy's broadcast product, C-ordered as (la, lb, i, ra, rb): the reshape is a view
    (einsum's output followed its GEMM's order, and the reshape copied it: a d 8, n 1024,
    rank 8 product took 183-223 ms, teneva's 71-100, this 82).

    >>> kron_arrays(np.ones((1, 2, 2)), np.ones((3, 2, 1))).shape
    (3, 2, 2)
    """
    (la, n, ra), (lb, _, rb) = a.shape, b.shape
    return (a[:, None, :, :, None] * b[None, :, :, None, :]).reshape(la * lb, n, ra * rb)


def kron(a, b):
    """The core of a Hadamard product: C[(la, lb), i, (ra, rb)] = A[la, i, ra] B[lb, i, rb].

    With fiber storage only pairs of nonzero fibers are multiplied.
    """
    lr, dd, rr = a.lr * b.lr, a.dd, a.rr * b.rr
    if a.storage == "contiguous":
        return TensorCore._wrap(kron_arrays(a.array(), b.array()), "contiguous")
    b = b.to_storage("fiber")
    ia, fa = a._nonzero()
    ib, fb = b._nonzero()
    la, ra = np.divmod(ia, a.rr)
    lb, rb = np.divmod(ib, b.rr)
    rows = (la[:, None] * b.lr + lb[None, :]).ravel()
    cols = (ra[:, None] * b.rr + rb[None, :]).ravel()
    fibers = (fa[:, None, :] * fb[None, :, :]).reshape(-1, dd)
    grid, nz = _zero_grid(lr, rr, dd, fibers.dtype), np.zeros((lr, rr), bool)
    flat_idx = rows * rr + cols
    _fill(grid, flat_idx, fibers)
    nz.reshape(-1)[flat_idx] = True
    return TensorCore._from_grid(grid, nz, dd, fibers.dtype)
