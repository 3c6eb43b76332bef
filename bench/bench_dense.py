"""Dense workloads: traces, partial traces, sums, permutations, the fused trinary, overhead.

Each workload runs tenalg's front end against NumPy (and torch when it imports, on
``torch.from_numpy`` views of the same arrays).  ``bytes`` is the memory traffic the
operation cannot avoid: every output byte written, and every input element read, counted
as the cache-line bytes its access pattern pulls in (an element whose smallest stride is
a cache line or more costs a whole 64-byte line).

>>> names = [w.name for w in workloads()]
>>> "trace-4096x4096-f64" in names and "permute-3102-64x64x64x64-f64-into" in names
True
"""

from functools import partial

import numpy as np

import tenalg as ta

from .registry import Workload

try:
    import torch
except ImportError:
    torch = None

LINE = 64  # bytes in a cache line


def read_bytes(view):
    """Bytes that reading every element of ``view`` pulls from memory (whole lines).

    >>> a = np.zeros((1024, 1024))
    >>> read_bytes(a), read_bytes(np.diagonal(a))
    (8388608, 65536)
    """
    strides = [abs(s) for s, n in zip(view.strides, view.shape, strict=True) if n > 1]
    step = min(strides, default=view.itemsize)
    return view.size * min(max(step, view.itemsize), LINE)


def reduction_bytes(view, axes):
    """Bytes a reduction of ``view`` over ``axes`` moves: its reads and its output.

    >>> reduction_bytes(np.zeros((512, 512, 64), np.float32), (1,))
    67239936
    """
    kept = [n for k, n in enumerate(view.shape) if k not in axes]
    return read_bytes(view) + view.itemsize * int(np.prod(kept))


def _dense(name, inputs, engines, *, limit, traffic, quick=False, into=None):
    """A dense workload on random arrays of the layouts ``inputs`` ([(shape, dtype)]).

    ``engines`` maps each engine to a function of the arrays (torch's gets tensors, and is
    left out where torch does not import); ``traffic(*arrays)`` gives ``bytes``, counted on
    ``np.empty`` arrays of the same layouts (no memory is touched).  With ``into`` (the
    output's (shape, dtype)) every engine's function gets its own preallocated output,
    its pages already touched, before the arrays, and returns it.
    """

    def setup():
        rng = np.random.default_rng(0)
        arrays = [rng.random(shape, np.float32).astype(dtype, copy=False)
                  for shape, dtype in inputs]
        fns = {}
        for engine, fn in engines.items():
            if engine == "torch" and torch is None:
                continue
            args = list(arrays)
            if into is not None:
                args.insert(0, np.full(into[0], 1, into[1]))  # pages touched: no faults timed
            if engine == "torch":
                args = [torch.from_numpy(x) for x in args]
            fns[engine] = partial(fn, *args)
        return fns

    empty = [np.empty(shape, dtype) for shape, dtype in inputs]
    return Workload(name, "dense", setup, limit=limit, bytes=float(traffic(*empty)),
                    quick=quick)


def _small(name, frontend, operation, numpy_fn, torch_fn):
    """An 8x8 float64 overhead workload: the front end, a prebuilt plan, NumPy, torch."""

    def setup():
        a = np.random.default_rng(0).random((8, 8))
        plan = ta.Plan(operation(ta.Operand(a, "ij")))
        fns = {"tenalg": partial(frontend, a), "tenalg-plan": partial(plan.execute, a),
               "numpy": partial(numpy_fn, a)}
        if torch is not None:
            fns["torch"] = partial(torch_fn, torch.from_numpy(a))
        return fns

    return Workload(name, "dense", setup, quick=True)


def _permute(axes):
    return {
        "tenalg": lambda a: ta.permute(a, axes),
        "numpy": lambda a: np.ascontiguousarray(a.transpose(axes)),
        "torch": lambda a: a.permute(axes).contiguous(),
    }


def _permute_into(axes):
    def numpy_into(out, a):
        np.copyto(out, a.transpose(axes))
        return out

    return {
        "tenalg": lambda out, a: ta.permute(a, axes, out=out),
        "numpy": numpy_into,
        "torch": lambda out, a: out.copy_(a.permute(axes)),
    }


def _scaled_narrowing_transpose_into(out, a):
    """out = 2 a^T stored in float16, the NumPy way (one ufunc call casting on output)."""
    return np.multiply(a.T, np.float32(2), out=out)


def _permuted(shape, axes):
    return tuple(shape[ax] for ax in axes)


_P4, _A4 = (64,) * 4, (3, 1, 0, 2)  # the 4-d permutation: shape, axes
_TRINARY = "trinary-2A+3B+0.5C-4096x4096-f32-B1x4096"
_TRINARY_INPUTS = [((4096, 4096), np.float32), ((1, 4096), np.float32),
                   ((4096, 4096), np.float32)]


def _trinary(a, b, c):
    return 2 * a + 3 * b + 0.5 * c  # NumPy's and torch's expression


def _trinary_bytes(a, b, c):
    return 2 * a.nbytes + b.nbytes + c.nbytes


def _tenalg_trinary(a, b, c, out=None):
    return ta.elementwise_trinary(a, "ij", b, "ij", c, "ij", "ij", alpha=2, beta=3, gamma=0.5,
                                  out=out)


def _trinary_into(out, a, b, c):
    """2a + 3b + 0.5c into ``out`` the NumPy way: in place but for one temporary."""
    np.multiply(a, 2, out=out)
    out += 3 * b
    out += 0.5 * c
    return out


def _torch_trinary_into(out, a, b, c):
    torch.mul(a, 2, out=out)
    out.add_(b, alpha=3)
    return out.add_(c, alpha=0.5)


def _sum(axis):
    return {
        "tenalg": lambda a: ta.sum(a, axis),
        "numpy": lambda a: np.sum(a, axis=axis),
        "torch": lambda a: a.sum(dim=axis),
    }


def _partial_trace(axis1, axis2):
    return {
        "tenalg": lambda a: ta.partial_trace(a, [(axis1, axis2)]),
        "numpy": lambda a: np.trace(a, axis1=axis1, axis2=axis2),
        "torch": lambda a: a.diagonal(0, axis1, axis2).sum(-1),  # as fast as torch.einsum or faster
    }


def workloads():
    """The dense workloads of issue 3 (quick ones stay under ~300 MB of arrays)."""
    f16, f32, f64 = np.float16, np.float32, np.float64
    return [
        _dense("trace-4096x4096-f64", [((4096, 4096), f64)],
               {"tenalg": ta.trace, "numpy": np.trace, "torch": lambda a: torch.trace(a)},
               limit="read", traffic=lambda a: reduction_bytes(np.diagonal(a), (0,)),
               quick=True),
        _dense("partial-trace-64x32x64x32-f64-02", [((64, 32, 64, 32), f64)],
               _partial_trace(0, 2), limit="read",
               traffic=lambda a: reduction_bytes(np.diagonal(a, 0, 0, 2), (2,)), quick=True),
        _dense("partial-trace-128x128x128x128-f32-13", [((128, 128, 128, 128), f32)],
               _partial_trace(1, 3), limit="read",
               traffic=lambda a: reduction_bytes(np.diagonal(a, 0, 1, 3), (2,))),
        _dense("einsum-iij->j-2048x2048x8-f64", [((2048, 2048, 8), f64)],
               {"tenalg": partial(ta.einsum, "iij->j"), "numpy": partial(np.einsum, "iij->j"),
                "torch": lambda a: torch.einsum("iij->j", a)},
               limit="read", traffic=lambda a: reduction_bytes(np.diagonal(a), (1,)),
               quick=True),
        _dense("sum-512x512x64-f32-axis1", [((512, 512, 64), f32)], _sum(1), limit="read",
               traffic=lambda a: reduction_bytes(a, (1,)), quick=True),
        _dense("sum-512x512x64-f32-axes02", [((512, 512, 64), f32)], _sum((0, 2)),
               limit="read", traffic=lambda a: reduction_bytes(a, (0, 2)), quick=True),
        _dense("sum-512x512x64-f32-axis2", [((512, 512, 64), f32)], _sum(2), limit="read",
               traffic=lambda a: reduction_bytes(a, (2,))),
        _dense("sum-65536x8x8-f64-axis1", [((65536, 8, 8), f64)], _sum(1), limit="read",
               traffic=lambda a: reduction_bytes(a, (1,)), quick=True),
        _dense("sum-4096x4096-f16-axis1", [((4096, 4096), f16)], _sum(1), limit="read",
               traffic=lambda a: reduction_bytes(a, (1,)), quick=True),
        _dense("norm-4096x4096-f64", [((4096, 4096), f64)],
               {"tenalg": ta.norm, "numpy": np.linalg.norm,
                "torch": lambda a: torch.linalg.norm(a)},
               limit="read", traffic=read_bytes, quick=True),
        _dense("permute-3102-64x64x64x64-f64", [(_P4, f64)], _permute(_A4), limit="copy-new",
               traffic=lambda a: 2 * a.nbytes, quick=True),
        _dense("permute-3102-64x64x64x64-f64-into", [(_P4, f64)], _permute_into(_A4),
               limit="copy", traffic=lambda a: 2 * a.nbytes,  # not quick: 3.7 s of 60
               into=(_permuted(_P4, _A4), f64)),
        _dense("permute-0213-32x32x32x32-f64", [((32,) * 4, f64)],
               _permute((0, 2, 1, 3)), limit="copy-new", traffic=lambda a: 2 * a.nbytes,
               quick=True),
        _dense("permute-0213-32x32x32x32-f64-into", [((32,) * 4, f64)],
               _permute_into((0, 2, 1, 3)), limit="copy", traffic=lambda a: 2 * a.nbytes,
               quick=True, into=((32,) * 4, f64)),
        _dense("transpose-8192x8192-f32", [((8192, 8192), f32)], _permute((1, 0)),
               limit="copy-new", traffic=lambda a: 2 * a.nbytes),
        _dense("transpose-8192x8192-f32-into", [((8192, 8192), f32)], _permute_into((1, 0)),
               limit="copy", traffic=lambda a: 2 * a.nbytes, into=((8192, 8192), f32)),
        _dense("transpose-4096x4096-f32-x2-to-f16-into", [((4096, 4096), f32)],
               {"tenalg": lambda out, a: ta.permute(a, (1, 0), alpha=2, out=out),
                "numpy": _scaled_narrowing_transpose_into,
                "torch": lambda out, a: torch.mul(a.t(), 2, out=out)},
               limit="copy", traffic=lambda a: a.nbytes * 3 // 2,
               into=((4096, 4096), f16)),  # not quick: NumPy's 166 ms a call made it 4.7 s
        _dense(_TRINARY, _TRINARY_INPUTS,
               {"tenalg": _tenalg_trinary, "numpy": _trinary, "torch": _trinary},
               limit="copy-new", traffic=_trinary_bytes, quick=True),
        _dense(_TRINARY + "-into", _TRINARY_INPUTS,
               {"tenalg": lambda out, a, b, c: _tenalg_trinary(a, b, c, out=out),
                "numpy": _trinary_into, "torch": _torch_trinary_into},
               limit="copy", traffic=_trinary_bytes,  # not quick: 2.8 s of 60
               into=((4096, 4096), f32)),
        _small("small-sum-8x8-f64-axis1", partial(ta.sum, axis=1),
               lambda a: ta.Operation.reduction(a, out=f64, out_modes="i"),
               partial(np.sum, axis=1), lambda a: a.sum(dim=1)),
        _small("small-transpose-8x8-f64", partial(ta.permute, axes=(1, 0)),
               lambda a: ta.Operation.permutation(a, out=f64, out_modes="ji", order="C"),
               lambda a: np.ascontiguousarray(a.T), lambda a: a.t().contiguous()),
    ]
