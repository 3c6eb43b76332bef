"""Rounding (recompression) of tensor trains and of sums of trains.

``eps`` bounds the relative Frobenius error, ||X - round(X)||_F <= eps ||X||_F, by giving
each of the d-1 bonds the tolerance eps ||X||_F / sqrt(d-1); every bond keeps rank >= 1
and ``max_rank`` (alias ``rmax``) caps the ranks after that (then the bound no longer
holds). Methods:

- ``"svd"``: Oseledets: right-to-left LQ orthogonalisation, left-to-right truncated SVDs
  (each bond factorised through its Gram matrix where a rounding-error bound proves the
  result as good as LAPACK's, else by LAPACK: :mod:`tenalg.linalg.truncation`).
- ``"gram"``: two-sided Gram-SVD. Cheaper (GEMMs and small eigh only) but it cannot
  resolve components below about sqrt(u) ||X|| (1.5e-8 in float64, 3.5e-4 in float32, see
  :func:`gram_floor`): for a smaller eps it falls back to ``"svd"`` (``info.method`` says
  which ran). Above the floor each cut is certified by a bound on the Gram matrices'
  rounding error (:mod:`tenalg.tt.linalg.gramsweep`); a train whose cut cannot be (in
  float64 typically below eps ~ 1e-5, the noise of Gram eigenvalues being about n u) is
  rounded by ``"svd"`` instead, also reported in ``info.method``, as is one small real
  train (see :func:`run`), which the compiled SVD sweep rounds faster. Single precision is
  computed in double. One sweep is not always rank-minimal.
- ``"randomized"``: randomize-then-orthogonalize with a Gaussian TT sketch of rank
  min(max_rank, the full rank) + 10 (the full rank + 10 when max_rank is None), then
  an SVD truncation with eps.

>>> from tenalg import tt
>>> x = tt.random((4, 4, 4, 4), 3, rng=0)
>>> y = tt.round(x + x, 1e-10)
>>> y.ranks, bool(tt.norm(y - 2 * x) < 1e-10 * tt.norm(x))
((1, 3, 3, 3, 1), True)
"""

import math
from dataclasses import dataclass

import numpy as np

from ..blas import one_blas_thread
from ..errors import OperationError
from ..linalg.lapackcalls import unit_roundoff
from ..linalg.truncation import checked_options
from ..linalg.workspace import FRESH
from .core import TensorCore
from .linalg import gramsweep, smallsweep, sweeps
from .linalg.batched import unstack
from .linalg.dense import common_dtype
from .train import TensorTrain, require_closed, require_same_dims

METHODS = ("svd", "gram", "randomized")


@dataclass(frozen=True)
class TruncationInfo:
    """What a rounding did: ranks before and after, the input norm, the relative discarded
    weight (sqrt of the sum of discarded squared singular values over ||X||, an upper
    bound on the relative error for "svd" and "gram") and the method that ran."""

    ranks_before: tuple
    ranks_after: tuple
    norm: float
    discarded: float
    method: str


def gram_floor(dtype):
    """The smallest eps that Gram rounding resolves for ``dtype``: sqrt(machine epsilon).

    >>> import numpy as np
    >>> f"{gram_floor(np.float32):.2e}"
    '3.45e-04'
    """
    return math.sqrt(unit_roundoff(dtype))


def resolve_options(eps, max_rank, rmax, method, dtype):
    """Validated (eps, max_rank, method that will run) for a rounding of ``dtype``."""
    if rmax is not None:
        if max_rank is not None and max_rank != rmax:
            raise OperationError(f"max_rank={max_rank} and its alias rmax={rmax} disagree")
        max_rank = rmax
    eps, max_rank = checked_options(eps, max_rank)
    if method not in METHODS:
        raise OperationError(f"method must be one of {METHODS}, got {method!r}")
    if method == "gram" and eps < gram_floor(dtype):
        method = "svd"
    return eps, max_rank, method


def run(method, summands, coefficients, eps, max_rank, rng=None, work=FRESH):
    """The batched sweep of ``method`` (see :mod:`tenalg.tt.linalg.sweeps`); the SVD sweep keeps
    its temporaries in ``work``. One small real train (or sum of trains) takes the
    compiled SVD sweep (:mod:`tenalg.tt.linalg.smallsweep`) once it is compiled, for
    "gram" too (reported as "svd", as the Gram sweep's own fallbacks are).

    A core that holds NaN or inf makes it raise OperationError. The cores are checked only
    after LAPACK fails ("SVD did not converge") or where the result holds NaN or inf:
    LAPACK passes NaN through a 1 x 1 eigenproblem (a rank-1 bond) without failing."""
    try:
        # one BLAS thread throughout (for real data, see tenalg.blas): the large products
        # share the threads through blas.matmul, whose parts a thread that a busy core
        # delays does fewer of; OpenBLAS's threads waited for it (beside one busy
        # process, a (d 8, n 64, r 40) rounding took 3.0 s against 80 ms alone)
        with one_blas_thread(summands[0][0].dtype):
            res, finite = _sweep(method, summands, coefficients, eps, max_rank, rng, work)
    except np.linalg.LinAlgError as error:
        _refuse_non_finite(summands, error)
        raise
    if not finite and not all(np.isfinite(core).all() for core in res.cores):
        _refuse_non_finite(summands)  # else an overflow: the norm of a long train, say
    return res


def _refuse_non_finite(summands, error=None):
    if not all(np.isfinite(core).all() for summand in summands for core in summand):
        raise OperationError("round: a core holds NaN or inf"
                             + ("" if error is None else f" ({error})")) from error


def _sweep(method, summands, coefficients, eps, max_rank, rng, work):
    """(the rounding, whether it is known to be finite: the small sweep checks its own)"""
    if method == "randomized":
        return sweeps.randomized(summands, coefficients, eps, max_rank, rng), False
    rounded = smallsweep.svd(summands, coefficients, eps, max_rank)
    if rounded is not None:  # what "gram" saves is GEMM work, which a small train lacks:
        # its sweep makes some 80 NumPy calls a bond (d 10, n 2, r 2: 4.7 against 0.27 ms)
        return rounded._replace(fallback=None if method == "svd" else np.ones(1, bool)), True
    if method == "svd":
        return sweeps.svd(summands, coefficients, eps, max_rank, work), False
    return gramsweep.gram(summands, coefficients, eps, max_rank), False


def _stack1(t):
    return [c.array()[None] for c in t.cores]


def round_(a, eps=0.0, max_rank=None, method="svd", *, rmax=None, rng=None):
    """Round ``a`` in place (its version is bumped); returns a TruncationInfo.

    Packs are rounded trainwise, each train to its own ranks (a grid of infos).

    >>> from tenalg import tt
    >>> x = tt.random((3, 3, 3), 2, rng=0)
    >>> y = x + x
    >>> tt.round_(y, 1e-8, method="gram").ranks_after
    (1, 2, 2, 1)
    """
    if not isinstance(a, TensorTrain):
        return a.round_(eps, max_rank, method, rmax=rmax, rng=rng)
    require_closed("round_", a)
    eps, max_rank, used = resolve_options(eps, max_rank, rmax, method, a.dtype)
    before = a.ranks
    res = run(used, [_stack1(a)], [1], eps, max_rank, rng)
    a._replace([TensorCore._wrap(c, a.storage) for c in unstack(res.cores, res.ranks)[0]])
    return infos(res, [before], [a.ranks], used)[0]


def round(a, eps=0.0, max_rank=None, method="svd", *, rmax=None, rng=None):
    """A rounded copy of ``a`` (see :func:`round_`); ``a`` is left as it is."""
    b = a.copy() if not isinstance(a, TensorTrain) else TensorTrain(a.cores)
    round_(b, eps, max_rank, method, rmax=rmax, rng=rng)
    return b


def round_sum(trains, coefficients=None, eps=0.0, max_rank=None, method="svd", *, rmax=None,
              rng=None):
    """Round sum_j coefficients[j] * trains[j] as one new train.

    "gram" and "randomized" work from Gram matrices or sketches of the summands and never
    form the block-diagonal sum; "svd" forms it.

    >>> from tenalg import tt
    >>> x = tt.random((3, 3, 3), 2, rng=0)
    >>> tt.round_sum([x, x, x], [1, -1, 2], 1e-6, method="randomized", rng=0).ranks
    (1, 2, 2, 1)
    """
    trains = list(trains)
    if not trains:
        raise OperationError("round_sum needs at least one train")
    require_closed("round_sum", *trains)
    for t in trains[1:]:
        require_same_dims("round_sum", trains[0], t)
    coefficients = [1] * len(trains) if coefficients is None else list(coefficients)
    if len(coefficients) != len(trains):
        raise OperationError(
            f"round_sum: {len(trains)} trains but {len(coefficients)} coefficients"
        )
    if not all(np.isfinite(c) for c in coefficients):  # (LAPACK would fail on its sum)
        raise OperationError(f"round_sum: a coefficient is NaN or inf: {coefficients}")
    dtype = common_dtype([t.dtype for t in trains])
    if dtype.kind != "c" and any(np.iscomplexobj(c) for c in coefficients):
        dtype = np.result_type(dtype, np.complex64)  # real trains, complex coefficients
    eps, max_rank, used = resolve_options(eps, max_rank, rmax, method, dtype)
    summands = [_stack1(t.astype(dtype)) for t in trains]
    res = run(used, summands, coefficients, eps, max_rank, rng)
    return TensorTrain._from_arrays(unstack(res.cores, res.ranks)[0], trains[0].storage)


def infos(res, before, after, method):
    """TruncationInfos of a batched rounding, one per train ("svd" for the trains that a
    Gram sweep could not certify and left to the SVD sweep)."""
    fallback = [False] * len(before) if res.fallback is None else res.fallback.tolist()
    return [TruncationInfo(b, a, float(n), float(x), "svd" if f else method)
            for b, a, n, x, f in zip(before, after, res.norms, res.discarded, fallback,
                                     strict=True)]
