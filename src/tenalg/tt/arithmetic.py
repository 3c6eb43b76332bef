"""Arithmetic on tensor trains: sums, scaling, Hadamard products, inner products, norms.

Sums and Hadamard products need closed trains (outer ranks 1) of equal dims. Inner
products, norms and contractions also accept open trains (the outer bonds are indices of
the tensor). Every operation also takes TrainPacks, trainwise.

>>> from tenalg import tt
>>> x = tt.random((3, 4, 5), 2, rng=0)
>>> y = tt.add(x, x)
>>> y.ranks, bool(abs(tt.norm(y) - 2 * tt.norm(x)) < 1e-12 * tt.norm(x))
((1, 4, 4, 1), True)
"""

import math

import numpy as np

from ..errors import OperationError
from ..inputs import host_array
from .linalg import batched, smallchain
from .linalg.dense import scaled_by_log
from .pack import TrainPack
from .train import block_sum, kron_product, require_dot_pair, scaled


def add(a, b):
    """a + b as a new train (ranks add; block-diagonal cores), or trainwise for packs.

    >>> from tenalg import tt
    >>> x = tt.random((2, 2), 1, rng=0)
    >>> tt.add(x, x).ranks
    (1, 2, 1)
    """
    if isinstance(a, TrainPack):
        return a.add(b)
    return block_sum(a, b)


def add_(a, b):
    """a += b in place (a's version is bumped); b is emptied. With fiber storage the
    fibers of a and b move into a's new cores: no data is copied.

    >>> from tenalg import tt
    >>> x, y = tt.random((2, 2), 1, rng=0), tt.random((2, 2), 1, rng=1)
    >>> tt.add_(x, y); x.ranks, y.empty
    ((1, 2, 1), True)
    """
    if isinstance(a, TrainPack):
        return a.add_(b)
    total = add(a, b)
    b.clear()
    a._replace(list(total.cores))


def scale(a, alpha):
    """alpha * a as a new train (the first core is scaled; the others are shared)."""
    if isinstance(a, TrainPack):
        return a.scaled(alpha)
    return scaled(a, alpha)


def neg(a):
    """-a as a new train."""
    return scale(a, -1)


def sub(a, b):
    """a - b as a new train (ranks add)."""
    return add(a, neg(b))


def hadamard(a, b):
    """The elementwise product as a new train (ranks multiply; Kronecker cores).

    >>> from tenalg import tt
    >>> x = tt.random((2, 3), 2, rng=0)
    >>> tt.hadamard(x, x).ranks
    (1, 4, 1)
    """
    if isinstance(a, TrainPack):
        return a.hadamard(b)
    return kron_product(a, b)


def _stack1(t):
    return [c.array()[None] for c in t.cores]


def _contiguous(*trains):
    """The trains' cores as arrays, where every train stores them contiguously (for the
    compiled chains of :mod:`~tenalg.tt.linalg.smallchain`), else None."""
    if any(t.storage != "contiguous" for t in trains):
        return None
    return [[c.array() for c in t.cores] for t in trains]


def dot(a, b):
    """<a, b> = sum conj(a) * b (a is conjugated, like numpy.vdot); trainwise for packs.

    >>> from tenalg import tt
    >>> x = tt.random((2, 3), 2, rng=0)
    >>> bool(abs(tt.dot(x, x) - tt.norm(x) ** 2) < 1e-12 * tt.norm(x) ** 2)
    True
    """
    if isinstance(a, TrainPack):
        return a.dot(b)
    require_dot_pair(a, b)
    cores = _contiguous(a, b)
    value = None if cores is None else smallchain.dot(*cores)
    return batched.dot(_stack1(a), _stack1(b))[0] if value is None else value


def norm(a):
    """Frobenius norm, by orthogonalisation with a carried scale (no overflow for long
    trains); an array over the grid for packs."""
    if isinstance(a, TrainPack):
        return a.norm()
    a._need_cores("norm")
    cores = _contiguous(a)
    value = None if cores is None else smallchain.norm(*cores)
    return batched.norm(_stack1(a))[0] if value is None else value


def contract_vectors(a, vectors):
    """Contract mode k of ``a`` with ``vectors[k]`` for every k: a scalar for closed trains,
    an (r_0, r_d) matrix for open ones. Zero fibers are skipped.

    >>> import numpy as np
    >>> from tenalg import tt
    >>> x = tt.random((2, 3), 1, rng=0)
    >>> v = [np.ones(2), np.ones(3)]
    >>> bool(np.isclose(tt.contract_vectors(x, v), x.to_dense().sum()))
    True
    """
    if isinstance(a, TrainPack):
        return a.map(lambda t: contract_vectors(t, vectors))
    a._need_cores("contract_vectors")
    if len(vectors) != a.ncores:
        raise OperationError(f"contract_vectors needs {a.ncores} vectors, got {len(vectors)}")
    vectors = [host_array(v, f"vector {k}", "tenalg.tt") for k, v in enumerate(vectors)]
    for k, (core, v) in enumerate(zip(a.cores, vectors, strict=True)):
        if v.shape != (core.dd,):
            raise OperationError(f"vector {k} has shape {v.shape}, mode {k} has extent {core.dd}")
    result = _compiled_contraction(a, vectors)
    if result is not None:
        return result
    m, log = None, 0.0
    for core, v in zip(a.cores, vectors, strict=True):
        step = core.matvec(v)
        m = step if m is None else m @ step
        s = float(np.abs(m).max())
        if s > 0 and np.isfinite(s):  # by a power of two, exactly (in two factors, as
            e = math.frexp(s)[1]       # batched.times_power_of_two: scalars are cheaper)
            m = m * math.ldexp(1.0, -e // 2) * math.ldexp(1.0, -e - (-e // 2))
            log += e * batched.LN2
    m = scaled_by_log(m, log)
    return m[0, 0] if a.closed else m


def sum(a):
    """The sum of all entries of ``a`` (see contract_vectors); trainwise for packs."""
    if isinstance(a, TrainPack):
        return a.map(sum)
    a._need_cores("sum")
    # one array of ones for every mode (np.ones costs 2 us a call)
    result = _compiled_contraction(a, np.ones(int(math.fsum(a.dims)), a.dtype))
    if result is not None:
        return result
    return contract_vectors(a, [np.ones(c.dd, dtype=a.dtype) for c in a.cores])


def _compiled_contraction(a, vectors):
    """contract_vectors of a contiguous train by the compiled chain
    (:func:`~tenalg.tt.linalg.smallchain.contract_vectors`), or None."""
    cores = _contiguous(a)
    m = None if cores is None else smallchain.contract_vectors(cores[0], vectors)
    return None if m is None else m[0, 0] if a.closed else m
