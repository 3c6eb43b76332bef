"""Layouts and checks shared by the CPU kernels' tests: hypothesis strategies for strided
views (random extents, axis orders, steps, broadcasts, synthetic diagonals), exact and
near comparisons, and a switch that makes permutations stream their stores."""

import contextlib

import ml_dtypes
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from tenalg.descriptors import Unary
from tenalg.dtypes import compute_type
from tenalg.kernels.cpu import (
    permutation,
)

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
SAME = [F16, BF16, F32, F64, C64, C128]
MIXED = [(F16, F32), (BF16, F64), (F32, C64)]  # (input, output) pairs
EXACT_UNARIES = [Unary.IDENTITY, Unary.NEGATE, Unary.ABS, Unary.SQRT, Unary.RELU,
                 Unary.RECIPROCAL, Unary.CONJUGATE]
SETTINGS = settings(max_examples=40, deadline=None)


def values(rng, shape, dtype):
    x = rng.standard_normal(shape) * 4
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@st.composite
def strided(draw, shape, dtype, output=False):
    """An array of ``shape``: random axis order and steps; inputs may also be broadcast
    along an axis or be a synthetic diagonal of a larger array."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ndim = len(shape)
    kind = "plain" if output or not ndim else draw(st.sampled_from(["plain"] * 3 + ["bcast",
                                                                                  "diag"]))
    if kind == "bcast":
        ax = draw(st.integers(0, ndim - 1))
        small = draw(strided(tuple(1 if k == ax else e for k, e in enumerate(shape)), dtype))
        return np.broadcast_to(small, shape)
    if kind == "diag":
        ax = draw(st.integers(0, ndim - 1))
        base = draw(strided(shape + (shape[ax],), dtype))
        return np.moveaxis(np.diagonal(base, axis1=ax, axis2=ndim), -1, ax)
    if not ndim:
        return np.array(values(rng, (), dtype))
    steps = [draw(st.sampled_from([1, 1, 2, -1, -2])) for _ in range(ndim)]
    order = draw(st.permutations(range(ndim)))
    base = values(rng, [shape[ax] * abs(steps[ax]) + 1 for ax in order], dtype)
    view = base[tuple(slice(None, None, steps[ax]) for ax in order)]
    view = view[tuple(slice(0, shape[ax]) for ax in order)]
    return view.transpose(np.argsort(order))


shapes = st.lists(st.sampled_from([0, 1, 1, 2, 3, 5, 7]), min_size=0, max_size=4).map(tuple)
dtype_pairs = st.sampled_from([(d, d) for d in SAME] + MIXED)


def compute_for(*dtypes):
    return compute_type(dtypes)


def assert_same(got, want, exact=True, scale=1.0):
    """Equal values (NaN equal to NaN); ``exact=False`` allows a few units in the last place
    of the result, or of ``scale`` (the size of the terms a sum cancelled)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        g = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        w = want.astype(g.dtype)
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        assert same.all(), f"{g[~same][:5]} != {w[~same][:5]}"
    else:
        rtol = 2e-2 if got.dtype.itemsize == 2 else 1e-5 if got.dtype in (F32, C64) else 1e-13
        np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                                   rtol=rtol, atol=rtol * max(1e-3, scale), equal_nan=True)


@contextlib.contextmanager
def streaming(stream=True):
    """Within: permutations of any size stream their stores past the caches
    (``permutation._STREAM_BYTES`` 0), as those of many megabytes do; ``stream`` False changes
    nothing."""
    saved = permutation._STREAM_BYTES
    permutation._STREAM_BYTES = 0 if stream else saved
    permutation._permute_call.cache_clear()
    try:
        yield
    finally:
        permutation._STREAM_BYTES = saved
        permutation._permute_call.cache_clear()


def empty_like_layout(draw, shape, dtype):
    """An output of ``shape`` in a random (non-overlapping) layout, filled with garbage."""
    out = draw(strided(shape, dtype, output=True))
    out[...] = np.asarray(np.nan).astype(dtype)
    return out
