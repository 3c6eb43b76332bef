"""einsum workloads: GEMM-shaped, permuted and batched contractions, chains, 16-bit, overhead.

Engines: ``tenalg`` (``ta.einsum`` with its plan cache), ``tenalg-plan`` (a prebuilt
``einsum_plan``), ``numpy`` (``np.einsum``, optimize=False; left out where its loop runs
for seconds), ``numpy-opt`` (optimize=True), ``opt_einsum`` (``contract``), ``torch``
(``torch.einsum`` on ``torch.from_numpy`` views, when torch imports) and, for GEMM shapes,
``numpy-matmul`` (the BLAS speed the issue measures against).  ``flops`` counts 2 per
multiply-add of the pairwise path.

>>> names = [w.name for w in workloads()]
>>> "einsum-ik,kj->ij-2048-f32" in names and "einsum-overhead-ij,jk->ik-8x8-f64" in names
True
"""

from functools import partial

import numpy as np
import opt_einsum

from tenalg.dtypes import bfloat16
from tenalg.einsum import einsum, einsum_plan

from .registry import Workload

try:
    import torch
except ImportError:
    torch = None

SLOW = 2e9  # naive flops above which np.einsum(optimize=False) is left out (seconds a call)


def _engines(expr, arrays, *, matmul=False, naive=True):
    """The engine functions of ``expr`` on ``arrays`` (built once, in setup)."""
    plan = einsum_plan(expr, *arrays)
    fns = {
        "tenalg": partial(einsum, expr, *arrays),
        "tenalg-plan": partial(plan, *arrays),
        "numpy-opt": partial(np.einsum, expr, *arrays, optimize=True),
        "opt_einsum": partial(opt_einsum.contract, expr, *arrays),
    }
    if naive:
        fns["numpy"] = partial(np.einsum, expr, *arrays, optimize=False)
    if matmul:
        fns["numpy-matmul"] = partial(np.matmul, *arrays)
    if torch is not None:
        tensors = [torch.from_numpy(x) for x in arrays]
        fns["torch"] = partial(torch.einsum, expr, *tensors)
    return fns


def _random(shape, dtype, seed):
    return np.random.default_rng(seed).random(shape, np.float32).astype(dtype)


def _flops(expr, shapes):
    """FLOPs of opt_einsum's optimal pairwise path (2 per multiply-add)."""
    _, info = opt_einsum.contract_path(expr, *shapes, shapes=True)
    return float(info.opt_cost)


def _naive_flops(expr, shapes):
    """What np.einsum(optimize=False) does: one loop over every label at once."""
    extents = {}
    for term, shape in zip(expr.split("->")[0].split(","), shapes, strict=True):
        extents.update(zip(term, shape, strict=True))
    return 2.0 * float(np.prod(list(extents.values())))


def _workload(name, expr, shapes, dtype, *, limit, quick=False, matmul=False, compare=True):
    flops = _flops(expr, shapes)
    naive = _naive_flops(expr, shapes) < SLOW

    def setup():
        arrays = [_random(s, dtype, k) for k, s in enumerate(shapes)]
        return _engines(expr, arrays, matmul=matmul, naive=naive)

    return Workload(name, "einsum", setup, limit=limit, flops=flops, quick=quick,
                    compare=compare)


def _half(name, dtype):
    """A 1024^3 GEMM in 16-bit storage against the float32 GEMM of the same shape."""
    shape = (1024, 1024)

    def setup():
        a, b = _random(shape, dtype, 0), _random(shape, dtype, 1)
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        plan = einsum_plan("ik,kj->ij", a, b)
        fns = {
            "tenalg": partial(einsum, "ik,kj->ij", a, b),
            "tenalg-plan": partial(plan, a, b),
            "numpy-matmul-f32": partial(np.matmul, a32, b32),
        }
        if dtype == np.float16:
            fns["opt_einsum"] = partial(opt_einsum.contract, "ik,kj->ij", a, b)
        if torch is not None:
            t_dtype = torch.float16 if dtype == np.float16 else torch.bfloat16
            ta_, tb_ = (torch.from_numpy(x).to(t_dtype) for x in (a32, b32))
            fns["torch"] = partial(torch.einsum, "ik,kj->ij", ta_, tb_)
        return fns

    return Workload(name, "einsum", setup, limit="gemm-f32", flops=2.0 * 1024**3,
                    compare=False)


def _overhead():
    """8x8 float64 'ij,jk->ik': what a call costs beyond its arithmetic."""

    def setup():
        a, b = _random((8, 8), np.float64, 0), _random((8, 8), np.float64, 1)
        return _engines("ij,jk->ik", [a, b])

    return Workload("einsum-overhead-ij,jk->ik-8x8-f64", "einsum", setup, quick=True)


def _fallback(name, expr, shapes, dtype, *, quick=False):
    """A dtype without tenalg kernels (int64, bool): the plan runs NumPy's own einsum
    (exact wraparound), so it races np.einsum itself; numbers 0-2 as a network's counts."""

    def setup():
        rng = np.random.default_rng(0)
        arrays = [rng.integers(0, 3, size=s).astype(dtype) for s in shapes]
        plan = einsum_plan(expr, *arrays)
        return {
            "tenalg": partial(einsum, expr, *arrays),
            "tenalg-plan": partial(plan, *arrays),
            "numpy": partial(np.einsum, expr, *arrays),
            "numpy-opt": partial(np.einsum, expr, *arrays, optimize=True),
        }

    return Workload(name, "einsum", setup, quick=quick)


def workloads():
    """The workloads of issues 4 and 32 (the fallback dtypes)."""
    f32, f64 = np.float32, np.float64
    n = 32
    return [
        _workload("einsum-ik,kj->ij-2048-f32", "ik,kj->ij", [(2048, 2048)] * 2, f32,
                  limit="gemm-f32", matmul=True),
        _workload("einsum-ik,kj->ij-1024-f32", "ik,kj->ij", [(1024, 1024)] * 2, f32,
                  limit="gemm-f32", matmul=True, quick=True),
        _workload("einsum-abcd,cdef->abef-32-f64", "abcd,cdef->abef", [(n,) * 4] * 2, f64,
                  limit="gemm-f64", quick=True),
        _workload("einsum-acbd,dfce->abef-32-f64", "acbd,dfce->abef", [(n,) * 4] * 2, f64,
                  limit="gemm-f64", quick=True),
        _workload("einsum-bij,bjk->bik-256x64-f32", "bij,bjk->bik", [(256, 64, 64)] * 2, f32,
                  limit="gemm-f32", matmul=True, quick=True),
        _workload("einsum-ij,jk,kl->il-1000x10-f64", "ij,jk,kl->il",
                  [(1000, 10), (10, 1000), (1000, 10)], f64, limit="gemm-f64", quick=True),
        _workload("einsum-ab,bc,cd,de->ae-1000x2-f64", "ab,bc,cd,de->ae",
                  [(1000, 2), (2, 1000), (1000, 2), (2, 1000)], f64, limit="gemm-f64"),
        # shapes that had cost 2-9x np.einsum: a tiny step of a network, an outer product,
        # a narrow product of operands GEMM reads only as copies (bytes, not FLOPs, count)
        _workload("einsum-overhead-lnr,n->lr-16x4x16-f64", "lnr,n->lr", [(16, 4, 16), (4,)],
                  f64, limit=None, quick=True),
        _workload("einsum-i,j->ij-1024-f64", "i,j->ij", [(1024,), (1024,)], f64, limit=None),
        _workload("einsum-lnr,lmr->nm-512x4-f64", "lnr,lmr->nm", [(512, 4, 512)] * 2, f64,
                  limit=None),
        _half("einsum-ik,kj->ij-1024-f16", np.float16),
        _half("einsum-ik,kj->ij-1024-bf16", bfloat16),
        _overhead(),
        _fallback("einsum-ij,jk->ik-256-i64", "ij,jk->ik", [(256, 256)] * 2, np.int64,
                  quick=True),
        _fallback("einsum-ij,jk,kl->il-200x20-i64", "ij,jk,kl->il",
                  [(200, 20), (20, 200), (200, 20)], np.int64),
        _fallback("einsum-ij,jk->ik-256-bool", "ij,jk->ik", [(256, 256)] * 2, np.bool_,
                  quick=True),
        _fallback("einsum-overhead-ij->-8x8-i64", "ij->", [(8, 8)], np.int64, quick=True),
    ]
