"""One large tensor train with every core's mode dimension split over workers, rounded
by TSQR (Al Daas, Ballard, Benner, arXiv 2011.06532): only r x r factors move.

Worker p holds the slice ``core[:, start_p:stop_p, :]`` of every core. Rounding is
Oseledets' SVD rounding: right to left, the LQ of each core's horizontal unfolding (the
QR of its transpose, whose rows are split over workers: each worker factors its rows, by
Cholesky QR twice where that is accurate, else by Householder's; the small R factors are
stacked and factored once more, and each worker applies its block of that small Q); the
L factor goes into the previous core's slices on every worker. Then left to right, the
QR of each vertical unfolding the same way, an SVD of the small R, truncation with the
per-bond tolerance ``eps ||X|| / sqrt(d - 1)`` (at least rank 1, at most ``max_rank``),
and ``S V^H`` into the next core's slices. Every task is submitted at once; the client
waits only for the end.

>>> from distributed import Client
>>> from tenalg import tt
>>> x = tt.random((6, 5, 7), 2, rng=0)
>>> with Client(processes=False, n_workers=2, threads_per_worker=1,
...             dashboard_address=None) as client:
...     y = DistributedTrain.from_train(client, x + x).round(1e-10).gather()
>>> y.ranks, bool(np.allclose(y.to_dense(), 2 * x.to_dense()))
((1, 2, 2, 1), True)
"""

import math

import numpy as np
import scipy.linalg as sla

from .. import tt
from ..errors import OperationError
from ..linalg.lapackcalls import unit_roundoff
from ..tt.linalg.sweeps import NOISE
from . import cluster, threads
from .futures import first_failure, task_key


def _split(n, parts):
    """(start, stop) of ``parts`` contiguous, nearly equal pieces of range(n)."""
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _random_slice(seed, k, p, shape, dtype):
    return np.random.default_rng([seed, k, p]).standard_normal(shape).astype(dtype)


def _horizontal_t(g):
    """The transpose of the horizontal unfolding of a core slice: (n r, l)."""
    return g.reshape(g.shape[0], -1).T


def _vertical(g):
    return g.reshape(-1, g.shape[2])


# Cholesky QR's second pass is taken where the first one's Q has a Gram matrix this close
# to the identity (||Q1^H Q1 - I||_F); its Q is then orthonormal to a few rounding errors
CHOLESKY_QR2_LIMIT = 1e-2
GRAM_RANGE = 900  # Gram entries between 2^-900 and 2^900 keep Cholesky QR in range


def _cholesky_qr2(a):
    """(R, R^-1) of a = Q R by Cholesky QR twice (Q = a R^-1), or None where the Gram matrix is
    not positive definite, over- or underflows (entries beyond 2^+-GRAM_RANGE: its squares
    leave the range where they are exact to rounding), or the first pass's Q is too far
    from orthonormal (cond(a) near 1/sqrt(u)): Householder's turn, whose norms are
    scaled.  Three passes over a, each a GEMM: for a 262144 x 32 slice of W1, 55 ms
    against LAPACK's QR's 730 ms (one thread), whose panel of 32 columns is level-2
    work, a pass over the slice per column."""
    eye = np.eye(a.shape[1], dtype=a.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # refused below
        gram = a.conj().T @ a
    top = float(np.abs(np.diagonal(gram)).max()) if gram.size else 1.0
    if not 2.0 ** -GRAM_RANGE < top < 2.0 ** GRAM_RANGE:  # NaN too
        return None
    try:
        r1 = sla.cholesky(gram)
        r1_inv = sla.solve_triangular(r1, eye)
        q1 = a @ r1_inv
        g2 = q1.conj().T @ q1
        if not np.linalg.norm(g2 - eye) <= CHOLESKY_QR2_LIMIT:
            return None
        r2 = sla.cholesky(g2)
        return r2 @ r1, r1_inv @ sla.solve_triangular(r2, eye)
    except np.linalg.LinAlgError:
        return None


def _factors(g, horizontal):
    """(R, R^-1) of the QR of one slice's unfolding (the transposed horizontal one, or the
    vertical), Q = a R^-1, by :func:`_cholesky_qr2`; else (Householder's R, None), its Q
    formed again where it is applied (:func:`_q_times`).  Only these small factors
    leave the worker."""
    a = _horizontal_t(g) if horizontal else _vertical(g)
    factors = _cholesky_qr2(a) if a.shape[0] >= a.shape[1] else None
    return factors if factors is not None else (np.linalg.qr(a, mode="r"), None)


def _q_times(a, r_inv, block):
    """(left, c) with Q block = left @ c, Q the local factor of unfolding ``a``."""
    if r_inv is None:
        return np.linalg.qr(a)[0], block
    return a, r_inv @ block


def _stacked_qr(*factors):
    """QR of the stacked R factors of the workers' slices: (R, [the row block of Q for
    each worker])."""
    rs = [f[0] for f in factors]
    q, r = np.linalg.qr(np.concatenate(rs, axis=0))
    bounds = np.cumsum([0] + [x.shape[0] for x in rs])
    return r, [q[bounds[i]:bounds[i + 1]] for i in range(len(rs))]


def _keep(s, delta, max_rank):
    """The smallest k >= 1 whose discarded tail sum_{i>=k} s_i^2 is at most delta^2,
    capped by max_rank; squares taken relative to s_0 (1e-170 squared is 0, 1e160 inf).

    >>> _keep(np.array([3e-170, 1e-170, 1e-190]), 1e-180, None)
    2
    """
    top = s[0] if s.size and 0 < s[0] < np.inf else 1.0
    tail = np.concatenate([np.cumsum(((s / top) ** 2)[::-1])[::-1], [0.0]])
    k = int(np.argmax(tail[1:] <= (delta / top) ** 2)) + 1
    return min(k, max_rank) if max_rank is not None else k


def _small_svd(tol, max_rank, previous, *factors):
    """Truncated SVD of the stacked R of the workers' ``factors``: (U_k-rotated Q blocks,
    S_k V_k^H, delta); delta is ``previous``'s, or set here on the first core (None), the
    tolerance raised to the noise floor of tt.round's sweep (NOISE u relative: at eps 0 a
    sum's roundoff ranks go as they go there)."""
    r, blocks = _stacked_qr(*factors)
    u, s, vh = np.linalg.svd(r, full_matrices=False)
    # ||X|| is the norm of the first core once the others are orthonormal
    floor = NOISE * unit_roundoff(r.dtype)
    delta = max(tol, floor) * math.hypot(*s) if previous is None else previous[2]
    k = _keep(s, delta, max_rank)
    return [b @ u[:, :k] for b in blocks], s[:k, None] * vh[:k], delta


def _apply_horizontal(g, factors, stacked, p):
    """The new slice of an orthonormalised core: (Q_p Q'_p)^T, shaped (l', n_p, r),
    formed transposed (c^T a^T, a^T the contiguous slice) rather than copied so."""
    left, c = _q_times(_horizontal_t(g), factors[1], stacked[1][p])
    return (c.T @ left.T).reshape(c.shape[1], g.shape[1], g.shape[2])


def _apply_vertical(g, factors, svd, p):
    left, c = _q_times(_vertical(g), factors[1], svd[0][p])
    return (left @ c).reshape(g.shape[0], g.shape[1], c.shape[1])


def _times_right(g, stacked):
    """core ×_3 R^T: the previous core absorbs L = R^T of the LQ (one GEMM)."""
    r = stacked[0]
    return (g.reshape(-1, g.shape[2]) @ r.T).reshape(g.shape[0], g.shape[1], r.shape[0])


def _times_left(svd, g):
    """S V^H ×_1 core: the next core absorbs it (one GEMM)."""
    m = svd[1]
    return (m @ g.reshape(g.shape[0], -1)).reshape(m.shape[0], g.shape[1], g.shape[2])


class DistributedTrain:
    """A train whose cores are split along their mode dimension over ``workers``:
    ``parts[k][p]`` is the future of ``core_k[:, splits[k][p], :]`` on worker p."""

    def __init__(self, client, parts, splits, workers, shapes):
        self._client, self.parts, self.splits = client, parts, splits
        self.workers, self.shapes = list(workers), [tuple(s) for s in shapes]
        self.last_tasks = 0

    client = property(lambda self: cluster.running(self._client),
                      doc="The client, checked to be running (else OperationError).")

    dims = property(lambda self: tuple(s[1] for s in self.shapes), doc="Mode sizes.")
    ranks = property(lambda self: tuple([s[0] for s in self.shapes] + [self.shapes[-1][2]]),
                     doc="Bond ranks r_0..r_d.")

    @classmethod
    def _workers(cls, client, workers):
        return cluster.placed(client, workers)

    @classmethod
    def from_train(cls, client, train, workers=None):
        """Split a single-process train over ``workers`` (default: all)."""
        workers = cls._workers(client, workers)
        splits = [_split(n, len(workers)) for n in train.dims]
        # unhashed: equal slices of another train (or this one, split again) get keys of
        # their own, which the release of the first one's does not cancel
        parts = [[client.scatter(np.ascontiguousarray(c.array()[:, a:b, :]), workers=[w],
                                 hash=False)
                  for (a, b), w in zip(split, workers, strict=True)]
                 for c, split in zip(train.cores, splits, strict=True)]
        return cls(client, parts, splits, workers, [c.shape for c in train.cores])

    @classmethod
    def random(cls, client, dims, ranks, seed=0, dtype=np.float64, workers=None):
        """A train of standard normal cores, each slice drawn on its own worker from
        ``(seed, core, worker)`` (nothing but the seeds is sent)."""
        workers = cls._workers(client, workers)
        dims = tuple(int(n) for n in dims)
        if not dims or min(dims) < 1:
            raise OperationError(f"a tensor train needs dimensions >= 1, got {dims}")
        ranks = tt.train.full_ranks(dims, ranks)
        shapes = [(ranks[k], n, ranks[k + 1]) for k, n in enumerate(dims)]
        splits = [_split(n, len(workers)) for n in dims]
        parts = [[client.submit(_random_slice, seed, k, p, (s[0], b - a, s[2]), dtype,
                                workers=[w], allow_other_workers=True)
                  for p, ((a, b), w) in enumerate(zip(split, workers, strict=True))]
                 for k, (s, split) in enumerate(zip(shapes, splits, strict=True))]
        return cls(client, parts, splits, workers, shapes)

    def gather(self):
        """The whole train on the client (every slice comes back)."""
        cores = [np.concatenate(self.client.gather(p), axis=1) for p in self.parts]
        return tt.TensorTrain(cores)

    def _on(self, p, fn, *args):
        self.last_tasks += 1
        return self.client.submit(threads.run, fn, *args, workers=[self.workers[p]],
                                  allow_other_workers=True, key=task_key(fn))

    def round(self, eps=0.0, max_rank=None):
        """A rounded copy (see the module's docstring); the ranks are read at the end.
        A bond takes three tasks one after the other, in either sweep: the slices'
        factors, their stacked QR (or SVD) on worker 0, the next core's slices updated;
        only the small factors move."""
        eps, max_rank, _ = tt.rounding.resolve_options(eps, max_rank, None, "svd", np.float64)
        d = len(self.parts)
        self.last_tasks = 0
        if d == 1:
            return self
        cores = [list(p) for p in self.parts]
        # right to left: LQ of each core (TSQR of its transposed horizontal unfolding)
        for k in range(d - 1, 0, -1):
            factors = [self._on(p, _factors, g, True) for p, g in enumerate(cores[k])]
            stacked = self._on(0, _stacked_qr, *factors)
            cores[k] = [self._on(p, _apply_horizontal, g, factors[p], stacked, p)
                        for p, g in enumerate(cores[k])]
            cores[k - 1] = [self._on(p, _times_right, g, stacked)
                            for p, g in enumerate(cores[k - 1])]
        # left to right: TSQR of each vertical unfolding, SVD of its R, truncation
        tol, svd = eps / math.sqrt(d - 1), None
        for k in range(d - 1):
            factors = [self._on(p, _factors, g, False) for p, g in enumerate(cores[k])]
            svd = self._on(0, _small_svd, tol, max_rank, svd, *factors)
            cores[k] = [self._on(p, _apply_vertical, g, factors[p], svd, p)
                        for p, g in enumerate(cores[k])]
            cores[k + 1] = [self._on(p, _times_left, svd, g) for p, g in enumerate(cores[k + 1])]
        flat = [f for row in cores for f in row]
        failure = first_failure(flat)
        if failure is not None:
            raise OperationError(f"distributed rounding failed: {failure[1]!r}") from failure[1]
        shapes = self.client.gather([self._on(0, np.shape, row[0]) for row in cores])
        dims = [sum(b - a for a, b in split) for split in self.splits]
        out = DistributedTrain(self.client, cores, self.splits, self.workers,
                               [(s[0], n, s[2]) for s, n in zip(shapes, dims, strict=True)])
        out.last_tasks = self.last_tasks
        return out
