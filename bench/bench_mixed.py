"""Mixed workloads: whole inner loops of tensor codes, end to end, each written three times
(tenalg, NumPy only, torch only), with every step of the loop timed as it runs.

Each loop mixes BLAS with tenalg's own kernels, so that the pools of threads take turns
on the cores as they do in a real program (issue 29: a permutation right after a GEMM
waited for OpenBLAS's spinning threads):

- ``mixed-tn-step``: a tensor-network step: two (D, d, D) tensors contracted, the result
  permuted (the two physical legs swapped), split by a truncated SVD (tenalg's loop
  calls :func:`tenalg.linalg.svd`, the others their library's full SVD and keep D
  values), the left factor contracted with an environment matrix;
- ``mixed-tt-round``: a TT rounding sweep of the sum of a train and itself
  (``tenalg.tt.round`` against the textbook QR / SVD sweep in NumPy and in torch);
- ``mixed-gemm-reduce``: a product of two matrices, then a sum over an axis of it.

The per-step times (``Workload.steps``, a :class:`Steps`) reach the table and the JSON as
median and 95th percentile per engine and step.  torch's loops are left out where torch
does not import.

>>> names = [w.name for w in workloads()]
>>> names[0], all(w.group == "mixed" for w in workloads())
('mixed-tn-step-D32-d4-f64', True)
"""

import time

import numpy as np

import tenalg as ta
from tenalg import tt
from tenalg.linalg import svd

from .registry import Workload

try:  # torch is optional: its loops are left out without it
    import torch
except ImportError:  # pragma: no cover - depends on the installation
    torch = None


class Steps:
    """Per-step seconds of each engine's loop: ``times[engine][step]``; a loop marks the
    end of each step with ``lap(engine, step)``. Laps of a call made through
    :meth:`untimed` are not kept.

    >>> steps = Steps()
    >>> steps.start("numpy"); steps.lap("numpy", "a")
    >>> steps.untimed(lambda: (steps.start("numpy"), steps.lap("numpy", "a")))
    >>> {step: len(t) for step, t in steps.times["numpy"].items()}
    {'a': 1}
    """

    def __init__(self):
        self.times, self._last, self._muted = {}, {}, False

    def clear(self):
        self.times = {}

    def start(self, engine):
        self._last[engine] = time.perf_counter()

    def lap(self, engine, step):
        now = time.perf_counter()
        if not self._muted:
            self.times.setdefault(engine, {}).setdefault(step, []).append(
                now - self._last[engine])
        self._last[engine] = now

    def untimed(self, fn):
        """Call ``fn`` (a loop) without keeping its laps."""
        self._muted = True
        try:
            fn()
        finally:
            self._muted = False


# -- a tensor-network step ---------------------------------------------------------------


def _tn_setup(steps, D, d):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((D, d, D)), rng.standard_normal((D, d, D))
    env = rng.standard_normal((D, D))

    def tenalg_loop():
        steps.start("tenalg")
        theta = ta.einsum("aib,bjc->aijc", a, b)
        steps.lap("tenalg", "contract")
        swapped = ta.permute(theta, (0, 2, 1, 3))
        steps.lap("tenalg", "permute")
        u, s, _, _ = svd(swapped, (0, 1), (2, 3), max_rank=D)
        left = u * s
        steps.lap("tenalg", "svd")
        out = ta.einsum("xa,aib->xib", env, left)
        steps.lap("tenalg", "contract again")
        return np.abs(out)  # the SVD's signs are arbitrary

    def numpy_loop():
        steps.start("numpy")
        theta = np.einsum("aib,bjc->aijc", a, b, optimize=True)
        steps.lap("numpy", "contract")
        swapped = np.ascontiguousarray(theta.transpose(0, 2, 1, 3))
        steps.lap("numpy", "permute")
        u, s, _ = np.linalg.svd(swapped.reshape(D * d, d * D), full_matrices=False)
        left = (u[:, :D] * s[:D]).reshape(D, d, D)
        steps.lap("numpy", "svd")
        out = np.einsum("xa,aib->xib", env, left, optimize=True)
        steps.lap("numpy", "contract again")
        return np.abs(out)

    engines = {"tenalg": tenalg_loop, "numpy": numpy_loop}
    if torch is not None:
        ta_, tb, tenv = (torch.from_numpy(x) for x in (a, b, env))

        def torch_loop():
            steps.start("torch")
            theta = torch.einsum("aib,bjc->aijc", ta_, tb)
            steps.lap("torch", "contract")
            swapped = theta.permute(0, 2, 1, 3).contiguous()
            steps.lap("torch", "permute")
            u, s, _ = torch.linalg.svd(swapped.reshape(D * d, d * D), full_matrices=False)
            left = (u[:, :D] * s[:D]).reshape(D, d, D)
            steps.lap("torch", "svd")
            out = torch.einsum("xa,aib->xib", tenv, left)
            steps.lap("torch", "contract again")
            return out.abs().numpy()

        engines["torch"] = torch_loop
    return engines


# -- a TT rounding sweep -----------------------------------------------------------------


def doubled(cores):
    """The cores of the train x + x (ranks doubled): block-diagonal middle cores."""
    out, last = [], len(cores) - 1
    for k, c in enumerate(cores):
        if k == 0:
            out.append(np.concatenate([c, c], axis=2))
        elif k == last:
            out.append(np.concatenate([c, c], axis=0))
        else:
            block = np.zeros((2 * c.shape[0], c.shape[1], 2 * c.shape[2]), c.dtype)
            block[: c.shape[0], :, : c.shape[2]] = c
            block[c.shape[0]:, :, c.shape[2]:] = c
            out.append(block)
    return out


def round_sweep(cores, rank, lib):
    """TT rounding to ``rank``: a right-to-left QR sweep, then a left-to-right truncated
    SVD sweep; ``lib`` is ``np`` or ``torch`` (their linalg spell these alike).  Yields
    after each sweep, then returns the cores.

    >>> cores = doubled([np.ones((1, 2, 2)), np.ones((2, 2, 1))])
    >>> sweep = round_sweep(cores, 1, np)
    >>> next(sweep), next(sweep)
    ('orthogonalise', 'truncate')
    """
    cores = list(cores)
    for k in range(len(cores) - 1, 0, -1):
        l, n, r = cores[k].shape
        q, rr = lib.linalg.qr(cores[k].reshape(l, n * r).T)
        cores[k] = q.T.reshape(-1, n, r)
        cores[k - 1] = (cores[k - 1].reshape(-1, l) @ rr.T).reshape(cores[k - 1].shape[0],
                                                                   cores[k - 1].shape[1], -1)
    yield "orthogonalise"
    for k in range(len(cores) - 1):
        l, n, r = cores[k].shape
        u, s, vt = lib.linalg.svd(cores[k].reshape(l * n, r), full_matrices=False)
        keep = min(rank, s.shape[0])
        cores[k] = u[:, :keep].reshape(l, n, keep)
        cores[k + 1] = ((s[:keep, None] * vt[:keep]) @ cores[k + 1].reshape(r, -1)).reshape(
            keep, cores[k + 1].shape[1], -1)
    yield "truncate"
    return cores


def _run_sweep(steps, engine, cores, rank, lib):
    steps.start(engine)
    sweep = round_sweep(cores, rank, lib)
    try:
        while True:
            steps.lap(engine, next(sweep))
    except StopIteration as stop:
        return len(stop.value)


def _tt_setup(steps, d, n, r):
    x = tt.random((n,) * d, r, rng=0)
    cores = [c.array() for c in x.cores]
    double = tt.TensorTrain(doubled(cores))
    arrays = [c.array() for c in double.cores]

    def tenalg_loop():
        steps.start("tenalg")
        rounded = tt.round(double, eps=1e-8, max_rank=r)
        steps.lap("tenalg", "round")
        return rounded

    engines = {"tenalg": tenalg_loop,
               "numpy": lambda: _run_sweep(steps, "numpy", arrays, r, np)}
    if torch is not None:
        tensors = [torch.from_numpy(np.array(c)) for c in arrays]  # writable copies
        engines["torch"] = lambda: _run_sweep(steps, "torch", tensors, r, torch)
    return engines


# -- a reduction after a GEMM ------------------------------------------------------------


def _gemm_reduce_setup(steps, n):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)), rng.standard_normal((n, n))

    def tenalg_loop():
        steps.start("tenalg")
        c = ta.einsum("ij,jk->ik", a, b)
        steps.lap("tenalg", "gemm")
        total = ta.sum(c, axis=0)
        steps.lap("tenalg", "sum")
        return total

    def numpy_loop():
        steps.start("numpy")
        c = a @ b
        steps.lap("numpy", "gemm")
        total = c.sum(axis=0)
        steps.lap("numpy", "sum")
        return total

    engines = {"tenalg": tenalg_loop, "numpy": numpy_loop}
    if torch is not None:
        ta_, tb = torch.from_numpy(a), torch.from_numpy(b)

        def torch_loop():
            steps.start("torch")
            c = ta_ @ tb
            steps.lap("torch", "gemm")
            total = c.sum(0)
            steps.lap("torch", "sum")
            return total.numpy()

        engines["torch"] = torch_loop
    return engines


def _workload(name, setup, *args, **options):
    steps = Steps()
    return Workload(name, "mixed", lambda: setup(steps, *args), steps=steps, **options)


def workloads():
    return [
        _workload("mixed-tn-step-D32-d4-f64", _tn_setup, 32, 4, quick=True),
        _workload("mixed-tn-step-D64-d4-f64", _tn_setup, 64, 4),
        _workload("mixed-tt-round-d10-n8-r12-f64", _tt_setup, 10, 8, 12, quick=True,
                  compare=False),
        _workload("mixed-tt-round-d20-n16-r20-f64", _tt_setup, 20, 16, 20, compare=False),
        _workload("mixed-gemm-reduce-512-f64", _gemm_reduce_setup, 512, quick=True),
    ]
