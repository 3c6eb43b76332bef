"""Hypothesis strategies for strided arrays of every storage dtype.

Arrays come as views of a larger buffer: random steps (negative included), random axis
order, and optionally a stride-0 broadcast axis, so kernels see the layouts users give.
:func:`layouts` goes further for the layout tests (test_layouts.py): ranks 0 to 8,
several zero strides, diagonal strides (an axis that is the diagonal of two), and every
dtype NumPy's front ends take (:data:`ALL_DTYPES`); :func:`trace_pairs` draws trace
pairs over any axes that leave 0 to 6 survivors.
"""

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

try:
    from tenalg.kernels import cpu  # noqa: F401 - the Numba kernels, where numba is installed

    KERNELS = ["reference", "cpu"]
except ImportError:  # pragma: no cover
    KERNELS = ["reference"]

REAL = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
COMPLEX = [np.complex64, np.complex128]
DTYPES = REAL + COMPLEX
# what the NumPy-named front ends take beyond the kernels' types: NumPy's routines
# (or, for data movement, a dtype-blind copy) give these
OTHER = [np.int8, np.int64, np.uint16, np.bool_, np.longdouble, object]
ALL_DTYPES = DTYPES + OTHER


def tolerance(dtype):
    """A relative tolerance that a correct kernel meets for inputs of ``dtype``."""
    dt = np.dtype(dtype)
    if dt.itemsize == 2:
        return 2e-2
    if dt in (np.float32, np.complex64):
        return 2e-5
    return 1e-12


def values(rng, shape, dtype):
    """Random values of ``dtype`` (complex with both parts random)."""
    kind = np.dtype(dtype).kind
    if kind in "iub":  # small integers (sums of them do not overflow), or bits
        return rng.integers(0 if kind != "i" else -9, 10, shape).astype(dtype)
    x = rng.standard_normal(shape)
    if kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@st.composite
def strided(draw, shape, dtype, allow_broadcast=False):
    """An array of ``shape`` and ``dtype`` with a random strided layout."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    ndim = len(shape)
    steps = [draw(st.sampled_from([1, 1, 2, -1, -2])) for _ in range(ndim)]
    order = draw(st.permutations(range(ndim))) if ndim else []
    big = [shape[ax] * abs(steps[ax]) + 1 for ax in order]
    base = values(rng, big, dtype)
    index = tuple(
        slice(None, None, steps[ax]) if steps[ax] > 0 else slice(None, None, steps[ax])
        for ax in order
    )
    view = base[index] if ndim else base.reshape(())
    view = view[tuple(slice(0, shape[ax]) for ax in order)]
    view = view.transpose(np.argsort(order)) if ndim else view
    if allow_broadcast and ndim and draw(st.booleans()):
        ax = draw(st.integers(0, ndim - 1))
        view = np.broadcast_to(view[tuple(slice(0, 1) if k == ax else slice(None)
                                          for k in range(ndim))], shape)
    view = np.asarray(view)
    assert view.shape == tuple(shape)
    return view


def shapes(min_dims=0, max_dims=4, max_side=5):
    return st.lists(st.integers(0, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def wide(x):
    """``x`` in float64 or complex128, for reference results."""
    return np.asarray(x).astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def small_shapes(min_dims=0, max_dims=8, max_size=729):
    """Shapes of rank ``min_dims`` to ``max_dims`` (8: the layout tests' top rank) with
    extents 0 to 3 and at most ``max_size`` elements, so rank-8 cases stay quick."""
    return st.lists(st.integers(0, 3), min_size=min_dims, max_size=max_dims).map(
        tuple).filter(lambda s: int(np.prod(s)) <= max_size)


@st.composite
def layouts(draw, shape, dtype):
    """An array of ``shape`` and ``dtype`` in any layout a user can give: :func:`strided`
    (negative steps, any axis order), then zero strides on any axes (broadcast), and
    maybe one axis made the diagonal of two (its stride the sum of theirs, NumPy's own
    read-only view)."""
    shape = tuple(shape)
    ndim = len(shape)
    if draw(st.integers(0, 3)) == 0:  # plain C order: the kernels' fast paths
        return np.asarray(values(np.random.default_rng(draw(st.integers(0, 2**32 - 1))),
                                 shape, dtype))
    diagonal = ndim and draw(st.booleans())
    if diagonal:  # the diagonal of (ax, a new last axis of the same extent)
        ax = draw(st.integers(0, ndim - 1))
        view = draw(strided(shape + (shape[ax],), dtype))
        view = np.moveaxis(np.diagonal(view, axis1=ax, axis2=ndim), -1, ax)
    else:
        view = draw(strided(shape, dtype))
    for ax in draw(st.lists(st.integers(0, max(ndim - 1, 0)), max_size=2)) if ndim else ():
        view = np.broadcast_to(view[tuple(slice(0, 1) if k == ax else slice(None)
                                          for k in range(ndim))], shape)
    assert view.shape == shape
    return view


@st.composite
def trace_pairs(draw, ndim, max_pairs=None):
    """Disjoint axis pairs of a rank-``ndim`` tensor (at least one), in any order and
    either orientation: 0 to ndim - 2 survivors."""
    axes = draw(st.permutations(range(ndim)))
    most = ndim // 2 if max_pairs is None else min(max_pairs, ndim // 2)
    count = draw(st.integers(1, most))
    return [tuple(axes[2 * k:2 * k + 2]) for k in range(count)]


def close(got, expected, dtype, terms):
    """Assert ``got`` equals NumPy's ``expected``: exactly for integers, bool and object,
    within :func:`tolerance` scaled by the sum of |terms| for floats and complex."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    if np.dtype(dtype).kind in "iubO" or np.dtype(dtype) == np.longdouble:
        np.testing.assert_array_equal(got, expected)
        return
    tol = 4 * tolerance(dtype)
    np.testing.assert_allclose(wide(got), wide(expected), rtol=tol,
                               atol=tol * (float(np.abs(wide(terms)).sum()) + 1))
