"""Shared helpers of the tensor-train tests."""

from unittest import mock

import numpy as np

from tenalg import tt
from tenalg.tt.linalg import smallsweep

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
STORAGES = ["contiguous", "fiber"]


def tol(dtype):
    """Relative tolerance for results computed in ``dtype``."""
    return 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12


def rel(a, b):
    """Relative Frobenius distance of arrays a and b (to b)."""
    return float(np.linalg.norm(np.asarray(a) - b) / np.linalg.norm(b))


def rand(dims, ranks, dtype=np.float64, storage="contiguous", seed=0, **kw):
    return tt.random(dims, ranks, rng=seed, dtype=dtype, storage=storage, **kw)


def delta(dims, index, dtype=np.float64, storage="contiguous"):
    """The rank-1 train equal to one at ``index`` and zero elsewhere."""
    cores = []
    for n, i in zip(dims, index, strict=True):
        c = np.zeros((1, n, 1), dtype=dtype)
        c[0, i, 0] = 1
        cores.append(c)
    return tt.TensorTrain(cores, storage=storage)


def long_train(d, n, r, factor, seed=0):
    """A non-canonical closed train of known norm factor**(d-1) * nu, and nu.

    Left-orthonormal cores scaled by ``factor``, then a random gauge on every bond.
    """
    rng = np.random.default_rng(seed)
    ranks = [1] + [r] * (d - 1) + [1]
    cores = []
    for k in range(d - 1):
        q = np.linalg.qr(rng.standard_normal((ranks[k] * n, ranks[k + 1])))[0]
        cores.append(factor * q.reshape(ranks[k], n, ranks[k + 1]))
    last = rng.standard_normal((r, n, 1))
    cores.append(last)
    nu = float(np.linalg.norm(last))
    for k in range(d - 1):
        g = np.eye(r) + 0.3 * rng.standard_normal((r, r))
        cores[k] = np.einsum("anb,bc->anc", cores[k], g)
        cores[k + 1] = np.einsum("ab,bnc->anc", np.linalg.inv(g), cores[k + 1])
    return tt.TensorTrain(cores), nu


def batched_sweep():
    """Within: single trains take the batched SVD sweep (tenalg.tt.linalg.sweeps), not the
    compiled sweep of small real trains (tenalg.tt.linalg.smallsweep)."""
    return mock.patch.object(smallsweep, "LIMITS", {})
