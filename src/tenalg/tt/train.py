"""Tensor trains: a sequence of cores with matching bond ranks.

Python references play the seed's shared pointers: ``b = a`` aliases the train,
``a.copy()`` is the deep copy. In-place operations (their names end in ``_``) replace the
train's cores and bump ``train.version``; cores themselves are never modified.

>>> import numpy as np
>>> from tenalg import tt
>>> x = tt.random((2, 3, 4), 2, rng=0)
>>> x.dims, x.ranks, x.closed, x.to_dense().shape
((2, 3, 4), (1, 2, 2, 1), True, (2, 3, 4))
"""

import numpy as np

from ..errors import OperationError
from ..inputs import host_array
from .core import TensorCore, check_storage, kron, kron_arrays, place
from .linalg.dense import common_dtype, core_dtype, einsum, python_scalar


def full_ranks(dims, ranks, left_bond=1, right_bond=1):
    """Bond ranks (r_0, ..., r_d) from an int, d-1 interior ranks, or all d+1 ranks.

    >>> full_ranks((2, 2, 2), 3)
    (1, 3, 3, 1)
    """
    d = len(dims)
    if np.ndim(ranks) == 0:
        ranks = [int(ranks)] * (d - 1)
    ranks = [int(r) for r in ranks]
    if len(ranks) == d - 1:
        ranks = [left_bond, *ranks, right_bond]
    if len(ranks) != d + 1:
        raise OperationError(f"{d} cores need {d - 1} interior ranks or {d + 1} ranks, got {ranks}")
    if min(ranks, default=1) < 1:
        raise OperationError(f"ranks must be positive, got {ranks}")
    return tuple(ranks)


class TensorTrain:
    """A tensor train over cores of shape (r_{k-1}, n_k, r_k).

    ``cores`` are TensorCores or (l, n, r) arrays (copied). ``storage`` converts every
    core to that storage model; by default arrays become contiguous cores.

    >>> import numpy as np
    >>> t = TensorTrain([np.ones((1, 2, 3)), np.ones((3, 2, 1))], storage="fiber")
    >>> float(t[1, 0])
    3.0
    """

    def __init__(self, cores, storage=None):
        cores = list(cores)
        if storage is None:
            storage = next((c.storage for c in cores if isinstance(c, TensorCore)), "contiguous")
        check_storage(storage)
        made = [
            (c if isinstance(c, TensorCore) else TensorCore(c)).to_storage(storage) for c in cores
        ]
        dtypes = {c.dtype for c in made}
        if len(dtypes) > 1:
            dt = np.result_type(*dtypes)
            made = [c.astype(dt) for c in made]
        self._init(made, storage, made[0].dtype if made else np.dtype(np.float64))

    def _init(self, cores, storage, dtype):
        shapes = [c._shape for c in cores]
        for k in range(len(shapes) - 1):
            if shapes[k][2] != shapes[k + 1][0]:
                raise OperationError(
                    f"cores {k} and {k + 1} disagree: core {k} has right rank {shapes[k][2]} "
                    f"but core {k + 1} has left rank {shapes[k + 1][0]}"
                )
        dims = tuple([s[1] for s in shapes])
        if 0 in dims:  # an empty tensor: nothing to decompose, and the sweeps assume n >= 1
            raise OperationError(f"a tensor train needs every dimension >= 1, got {dims}")
        if any(0 in (s[0], s[2]) for s in shapes):  # as full_ranks refuses for zeros
            ranks = tuple(s[0] for s in shapes) + (shapes[-1][2],)
            raise OperationError(f"a tensor train needs every rank >= 1, got {ranks}")
        self._cores, self._storage, self._dtype = tuple(cores), storage, np.dtype(dtype)
        self._dims = dims
        self._version = getattr(self, "_version", -1) + 1

    @classmethod
    def _from_arrays(cls, arrays, storage):
        """A train over freshly computed (l, n, r) arrays, taking ownership of them."""
        t = cls.__new__(cls)
        cores = [TensorCore._wrap(a, storage) for a in arrays]
        t._init(cores, storage, cores[0].dtype if cores else np.float64)
        return t

    @classmethod
    def zeros(cls, dims, ranks, left_bond=1, right_bond=1, storage="contiguous",
              dtype=np.float64):
        """The zero train of ``dims`` with bond ranks ``ranks`` (int or interior list).

        >>> TensorTrain.zeros((2, 2), 3).ranks
        (1, 3, 1)
        """
        r = full_ranks(dims, ranks, left_bond, right_bond)
        cores = [
            TensorCore.zeros(r[k], n, r[k + 1], dtype=dtype, storage=storage)
            for k, n in enumerate(dims)
        ]
        t = cls.__new__(cls)
        t._init(cores, check_storage(storage), core_dtype(dtype))
        return t

    def _replace(self, cores, storage=None):
        """Swap in new cores (the in-place step of every ``*_`` operation): bumps the version."""
        storage = check_storage(storage or self._storage)
        cores = [c if c.storage == storage else c.to_storage(storage) for c in cores]
        self._init(cores, storage, cores[0].dtype if cores else self._dtype)

    cores = property(lambda self: self._cores, doc="The cores, as a tuple of TensorCores.")
    ncores = property(lambda self: len(self._cores), doc="Number of cores d.")
    dims = property(lambda self: self._dims, doc="(n_1, ..., n_d).")
    dtype = property(lambda self: self._dtype, doc="Element type of every core.")
    storage = property(lambda self: self._storage, doc="Storage model of every core.")
    version = property(lambda self: self._version, doc="Bumped by every in-place operation.")
    empty = property(lambda self: not self._cores, doc="True when the train has no cores.")

    @property
    def ranks(self):
        """Bond ranks (r_0, ..., r_d); () for an empty train."""
        if not self._cores:
            return ()
        return (self._cores[0].lr, *(c.rr for c in self._cores))

    @property
    def closed(self):
        """True when both outer ranks are 1 (a scalar-valued tensor)."""
        return bool(self._cores) and self._cores[0].lr == 1 and self._cores[-1].rr == 1

    def __repr__(self):
        return (f"TensorTrain(dims={self.dims}, ranks={self.ranks}, dtype={self._dtype}, "
                f"storage={self._storage!r})")

    def _need_cores(self, what):
        if self.empty:
            raise OperationError(f"{what} needs a train with cores; this one is empty")

    def copy(self):
        """A deep copy: new buffers and fibers, version 0."""
        t = TensorTrain.__new__(TensorTrain)
        t._init([c.copy() for c in self._cores], self._storage, self._dtype)
        return t

    def __copy__(self):
        """``copy.copy``: a new train object sharing these (immutable) cores, so that an
        in-place operation on one leaves the other as it was; a sum not yet built stays
        unbuilt.

        >>> import copy
        >>> x = random((2, 2), 1, rng=0)
        >>> y = copy.copy(x); y.clear()
        >>> x.ranks, y.ranks
        ((1, 1, 1), ())
        """
        t = type(self).__new__(type(self))
        t.__dict__.update(self.__dict__)
        return t

    def clear(self):
        """Drop every core (the train becomes empty); bumps the version."""
        self._replace([])

    def build_fresh(self, ranks, dims=None):
        """Replace the cores by zero cores with bond ranks ``ranks``; bumps the version.

        >>> t = TensorTrain.zeros((2, 2, 2), 1)
        >>> t.build_fresh(4); t.ranks
        (1, 4, 4, 1)
        """
        dims = self.dims if dims is None else tuple(dims)
        if not dims:
            raise OperationError("build_fresh on an empty train needs dims")
        r = full_ranks(dims, ranks)
        self._replace([
            TensorCore.zeros(r[k], n, r[k + 1], dtype=self._dtype, storage=self._storage)
            for k, n in enumerate(dims)
        ])

    def to_storage(self, storage):
        """This train with every core in ``storage`` (a new train; data shared when equal)."""
        return TensorTrain([c.to_storage(storage) for c in self._cores], storage=storage)

    def astype(self, dtype):
        """This train with elements of ``dtype`` (a new train)."""
        t = TensorTrain.__new__(TensorTrain)
        t._init([c.astype(dtype) for c in self._cores], self._storage, core_dtype(dtype))
        return t

    def to_dense(self):
        """The full tensor: shape dims for closed trains, (r_0, *dims, r_d) for open ones."""
        self._need_cores("to_dense")
        r0 = self._cores[0].lr
        t = self._cores[0].array()
        if len(self._cores) == 1:  # a new array, as for longer trains (not the core's own)
            t = t.copy()
        for c in self._cores[1:]:
            t = einsum("aNb,bmc->aNmc", t, c.array()).reshape(r0, -1, c.rr)
        t = t.reshape(r0, *self.dims, self._cores[-1].rr)
        return t.reshape(self.dims) if self.closed else t

    def evaluate(self, indices):
        """Entries at ``indices`` (k, d): shape (k,) for closed trains, (k, r_0, r_d) if open.

        >>> import numpy as np
        >>> t = TensorTrain([np.ones((1, 2, 1)), 2 * np.ones((1, 3, 1))])
        >>> t.evaluate([[0, 0], [1, 2]]).tolist()
        [2.0, 2.0]
        """
        self._need_cores("evaluate")
        idx = host_array(indices, "indices", "tenalg.tt")
        if idx.ndim != 2 or idx.shape[1] != self.ncores or idx.dtype.kind not in "iu":
            raise OperationError(
                f"indices must be a (k, {self.ncores}) integer array, got shape {idx.shape}"
            )
        if idx.size and ((idx < 0).any() or (idx >= np.array(self.dims)).any()):
            raise OperationError(f"indices out of range for dims {self.dims}")
        v = self._cores[0].take(idx[:, 0])
        for k, c in enumerate(self._cores[1:], start=1):
            v = einsum("kab,kbc->kac", v, c.take(idx[:, k]))
        return v[:, 0, 0] if self.closed else v

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        return self.evaluate(np.array([index], dtype=np.int64))[0]

    # The operators run this module's train arithmetic (tenalg.tt.arithmetic adds the
    # pack dispatch on top and imports this module, so the dependency points one way).
    def __add__(self, other):
        return block_sum(self, other)

    def __sub__(self, other):
        return block_sum(self, -other if isinstance(other, TensorTrain) else other)

    def __mul__(self, other):
        return kron_product(self, other) if isinstance(other, TensorTrain) else scaled(self, other)

    __rmul__ = __mul__

    def __truediv__(self, alpha):
        if isinstance(alpha, TensorTrain):
            return NotImplemented
        return scaled(self, 1 / python_scalar(alpha))  # 1 / np.float32(3) is float32's

    def __neg__(self):
        return scaled(self, -1)


class LazySum(TensorTrain):
    """The sum of two or more closed trains of equal dims whose block-diagonal cores are
    built only when first read. Pack sums are these: pack rounding works on the summands'
    cores and never builds the sums (``summands`` is None once built or replaced). A sum
    with an unbuilt sum among its terms takes that sum's summands: (a + b) + c has three.

    >>> x = random((2, 2, 2), 1, rng=0)
    >>> s = LazySum(x, x)
    >>> s.ranks, s.summands is not None, s.cores[1].shape, s.summands
    ((1, 2, 2, 1), True, (2, 2, 2), None)
    >>> len(LazySum(LazySum(x, x), x).summands)
    3
    """

    def __init__(self, *trains):
        self._sum_of = tuple(part for t in trains for part in (
            t.summands if isinstance(t, LazySum) and t.summands is not None else (t.cores,)))
        self._built = None
        dtypes = {t.dtype for t in trains}
        dtype = dtypes.pop() if len(dtypes) == 1 else common_dtype(list(dtypes))
        first = trains[0]
        self._storage, self._dtype, self._dims, self._version = (first.storage, dtype,
                                                                 first.dims, 0)

    @property
    def _cores(self):
        if self._built is None:
            self._built = block_sum(*(TensorTrain(c) for c in self._sum_of))._cores
            self._sum_of = None
        return self._built

    @_cores.setter
    def _cores(self, cores):
        self._built, self._sum_of = cores, None

    summands = property(lambda self: self._sum_of,
                        doc="The summands' cores while the sum is not built, else None.")

    @property
    def ranks(self):
        if self._sum_of is None:
            return TensorTrain.ranks.fget(self)
        interior = list(zip(*self._sum_of, strict=True))[:-1]
        return (1, *(sum(c.rr for c in column) for column in interior), 1)

    ncores = property(lambda self: len(self._sum_of[0] if self._sum_of else self._cores))
    closed = property(lambda self: self._sum_of is not None or TensorTrain.closed.fget(self))
    empty = property(lambda self: self._sum_of is None and TensorTrain.empty.fget(self))


def random(dims, ranks, rng=None, dtype=np.float64, storage="contiguous", left_bond=1,
           right_bond=1):
    """A train with standard normal cores (complex: real and imaginary parts each N(0, 1/2)).

    >>> random((3, 3), 2, rng=1).ranks
    (1, 2, 1)
    """
    rng = np.random.default_rng(rng)
    dt = core_dtype(dtype)
    r = full_ranks(dims, ranks, left_bond, right_bond)
    arrays = []
    for k, n in enumerate(dims):
        shape = (r[k], n, r[k + 1])
        a = rng.standard_normal(shape)
        if dt.kind == "c":
            a = (a + 1j * rng.standard_normal(shape)) / np.sqrt(2)
        arrays.append(a.astype(dt))
    return TensorTrain._from_arrays(arrays, check_storage(storage))


def require_closed(what, *trains):
    """Raise OperationError unless every train is a closed (outer ranks 1) train."""
    for t in trains:
        if not isinstance(t, TensorTrain):
            raise OperationError(f"{what} takes TensorTrains, got {type(t).__name__}")
        if t.empty or not t.closed:
            raise OperationError(
                f"{what} needs closed trains (outer ranks 1); got a train with ranks {t.ranks}"
            )


def require_same_dims(what, a, b):
    """Raise OperationError unless trains ``a`` and ``b`` have the same dims."""
    if a.dims != b.dims:
        raise OperationError(f"{what}: dims {a.dims} and {b.dims} differ")


def require_dot_pair(a, b):
    """Raise OperationError unless ``<a, b>`` is defined: both trains have cores, equal
    dims and equal outer ranks."""
    for t in (a, b):
        t._need_cores("dot")
    require_same_dims("dot", a, b)
    if (a.cores[0].lr, a.cores[-1].rr) != (b.cores[0].lr, b.cores[-1].rr):
        raise OperationError(f"dot: outer ranks of {a.ranks} and {b.ranks} differ")


def block_sum(*trains):
    """The sum of two or more closed trains of equal dims: first core [A B ...], interior
    diag(A, B, ...), last [A; B; ...] (ranks add). ``tt.add`` and ``a + b`` run this.

    >>> x = random((2, 2), 1, rng=0)
    >>> block_sum(x, x).ranks, block_sum(x, x, x).ranks
    ((1, 2, 1), (1, 3, 1))
    """
    require_closed("add", *trains)
    for t in trains[1:]:
        require_same_dims("add", trains[0], t)
    dtype = common_dtype([t.dtype for t in trains])
    first, d = trains[0], trains[0].ncores
    if d == 1:
        core = np.asarray(first.cores[0].array(), dtype)
        for t in trains[1:]:
            core = core + t.cores[0].array()
        return TensorTrain._from_arrays([core], first.storage)
    if all(t.storage == "contiguous" for t in trains):
        return TensorTrain._from_arrays(_block_arrays(
            [[c.array() for c in t.cores] for t in trains], dtype), "contiguous")
    cores = []
    for k, column in enumerate(zip(*(t.cores for t in trains), strict=True)):
        lefts = [0] * len(column) if k == 0 else _offsets([c.lr for c in column])
        rights = [0] * len(column) if k == d - 1 else _offsets([c.rr for c in column])
        shape = (lefts[-1] + column[-1].lr if k else 1, column[0].dd,
                 rights[-1] + column[-1].rr if k < d - 1 else 1)
        cores.append(place(list(zip(column, lefts, rights, strict=True)), shape,
                           first.storage, dtype))
    return TensorTrain(cores)


def _block_arrays(trains, dtype):
    """The cores of the sum of ``trains`` (lists of (l, n, r) arrays) as arrays of
    ``dtype``: the first and last concatenated, the interior ones block-diagonal (a
    d 10, n 2, r 1 sum by :func:`place`, core by core, took 100 us, teneva's 61)."""
    d = len(trains[0])
    cores = [np.concatenate([t[0] for t in trains], axis=2, dtype=dtype)]
    for k in range(1, d - 1):
        column = [t[k] for t in trains]
        core = np.zeros((sum(x.shape[0] for x in column), column[0].shape[1],
                         sum(x.shape[2] for x in column)), dtype=dtype)
        left = right = 0
        for x in column:
            core[left : left + x.shape[0], :, right : right + x.shape[2]] = x
            left, right = left + x.shape[0], right + x.shape[2]
        cores.append(core)
    return [*cores, np.concatenate([t[-1] for t in trains], axis=0, dtype=dtype)]


def _offsets(sizes):
    """Where each block starts when blocks of ``sizes`` are placed one after the other."""
    return [sum(sizes[:i]) for i in range(len(sizes))]


def scaled(a, alpha):
    """alpha * a as a new train (the first core is scaled; the others are shared).

    >>> x = random((2, 2), 1, rng=0)
    >>> bool(np.allclose(scaled(x, 2).to_dense(), 2 * x.to_dense()))
    True
    """
    a._need_cores("scale")
    return TensorTrain([a.cores[0].scaled(python_scalar(alpha)), *a.cores[1:]])


def kron_product(a, b):
    """The elementwise (Hadamard) product as a new train (ranks multiply; Kronecker cores).

    >>> x = random((2, 3), 2, rng=0)
    >>> kron_product(x, x).ranks
    (1, 4, 1)
    """
    require_closed("hadamard", a, b)
    require_same_dims("hadamard", a, b)
    dtype = common_dtype([a.dtype, b.dtype])
    if a.storage == b.storage == "contiguous":  # (TensorTrain's checks of its cores: 40 us
        return TensorTrain._from_arrays(       # of a d 10, n 2, r 1 product's 67)
            [kron_arrays(x.array(), y.array()) for x, y in zip(a.cores, b.cores, strict=True)],
            "contiguous")
    return TensorTrain([kron(x.astype(dtype), y.astype(dtype).to_storage(a.storage))
                        for x, y in zip(a.cores, b.cores, strict=True)])
