"""Hypothesis strategies for strided arrays of every storage dtype.

Arrays come as views of a larger buffer: random steps (negative included), random axis
order, and optionally a stride-0 broadcast axis, so kernels see the layouts users give.
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
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
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
