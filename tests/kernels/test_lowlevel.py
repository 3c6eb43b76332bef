"""The CPU kernels' shared pieces against NumPy: 16-bit loads and stores, thread control,
and the flat memory views the kernels read."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenalg.descriptors import Unary
from tenalg.kernels import cpu
from tenalg.kernels.cpu import calls, threads

from .layouts import BF16, C128, F16, F32, F64, SETTINGS, assert_same, shapes, strided

# --------------------------------------------------------------------------------------
# conversions


def test_16bit_stores_round_like_numpy():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    x32 = np.concatenate([bits.view(np.float32), [np.inf, -np.inf, np.nan, 0.0, -0.0,
                                                  65504.0, 65520.0, 65519.99, 2.0**-25,
                                                  3 * 2.0**-26, 2.0**-24 * 1.5]]).astype(F32)
    x64 = np.concatenate([x32.astype(F64) * (1 + 2.0**-30), rng.standard_normal(5000) * 1e-5])
    for x in (x32, x64):
        x = x[np.isfinite(x) | np.isnan(x) | np.isinf(x)]
        for dt in (F16, BF16):
            out = np.empty(x.shape, dt)
            with np.errstate(all="ignore"):
                want = x.astype(dt)
            cpu.permute(out, x, alpha=1, unary=Unary.IDENTITY, compute=x.dtype)
            assert_same(out, want)


def test_16bit_loads_are_exact():
    every = np.arange(65536, dtype=np.uint16)
    for dt in (F16, BF16):
        x = every.view(dt)
        out = np.empty(x.shape, F32)
        cpu.permute(out, x, alpha=1, unary=Unary.IDENTITY, compute=F32)
        assert_same(out, x.astype(F32))




def _narrowing_cases(rng):
    """float64 values where a 16-bit rounding can go wrong: exact ties and values just off
    them (double rounding through float32 breaks those), subnormals, overflow, specials."""
    m = rng.integers(0, 1 << 10, 500)
    ties = np.concatenate([(1 + (2 * m + 1) * 2.0**-11) * 2.0 ** rng.integers(-24, 16, 500),
                           (1 + (2 * m + 1) * 2.0**-8) * 2.0 ** rng.integers(-130, 128, 500)])
    near = np.concatenate([ties * (1 + 2.0**-40), ties * (1 - 2.0**-40)])
    wide = rng.standard_normal(4000) * 10.0 ** rng.integers(-12, 8, 4000)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65519.99, 65520.0, 2.0**-24,
               2.0**-25, 3 * 2.0**-26, 2.0**-149, 2.0**-150, 3.4e38, 3.5e38, 1e300, -1e-300]
    x = np.concatenate([ties, near, wide, special])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("source", [F64, F32])
@pytest.mark.parametrize("target", [F16, BF16])
def test_narrowing_to_16_bits_rounds_once_to_nearest_even(source, target):
    """Stores into 16-bit storage round the value once (float64 through round-to-odd
    float32), as NumPy's and ml_dtypes' direct conversions do, bit for bit."""
    with np.errstate(over="ignore"):
        x = _narrowing_cases(np.random.default_rng(9)).astype(source)
        want = x.astype(target)
    out = np.empty(x.shape, target)
    cpu.permute(out, x, alpha=1, unary="identity", compute=np.dtype(source))
    nan = np.isnan(x)
    assert np.isnan(out[nan].astype(F32)).all()
    assert np.array_equal(out[~nan].view(np.uint16), want[~nan].view(np.uint16))


def test_one_thread_restores_the_thread_count():
    """Kernels beside a GEMM run on one thread; the count comes back, even on an error."""
    import numba

    before = numba.get_num_threads()
    with pytest.raises(ZeroDivisionError), cpu.one_thread():
        assert numba.get_num_threads() == 1
        assert threads._threads(1 << 30) == 1  # the serial twins run
        1 / 0  # noqa: B018
    assert numba.get_num_threads() == before




def test_thread_counter_follows_numba_settings():
    """The lock-free thread count reads the calling thread's numba setting, like
    numba.get_num_threads(), also inside one_thread()."""
    import numba

    count = threads._thread_counter()
    assert count() == numba.get_num_threads()
    with cpu.one_thread():
        assert count() == numba.get_num_threads() == 1
    assert count() == numba.get_num_threads()


@SETTINGS
@given(st.data(), shapes, st.sampled_from([F16, F32, C128]), st.booleans())
def test_memory_spans_every_element_of_a_view(data, shape, dtype, read_only):
    """The flat memory handed to the kernels holds each element of x at its geometry's
    offset plus its strides: plain, permuted, stepped, negative, broadcast and diagonal
    views, read-only ones and 16-bit storage (seen as bits)."""
    x = data.draw(strided(shape, dtype))
    if read_only:
        x = x.view()
        x.flags.writeable = False
    flat = calls._memory(x)
    offset, span, steps = calls._geometry(*calls._layout(x))
    assert flat.shape == (span,) and flat.flags.writeable
    bits = x.view(np.uint16) if dtype == F16 else x
    for index in np.ndindex(*shape):
        at = offset + sum(i * s for i, s in zip(index, steps, strict=True))
        assert flat[at] == bits[index]


def test_memory_of_a_permuted_array_is_a_view_of_it():
    """A transposed or permuted C array (a plan's output view) is flattened as a view of
    its own memory, which keeps the array alive."""
    a = np.arange(24.0).reshape(2, 3, 4)
    for axes in [(1, 0, 2), (2, 1, 0), (0, 2, 1)]:
        x = a.transpose(axes)
        flat = calls._memory(x)
        assert flat.base is not None and np.shares_memory(flat, a)
        assert flat.tolist() == list(range(24))
    assert calls._dense_order((2, 3), (8, 16), F64) == (1, 0)
    assert calls._dense_order((2, 3), (-8, 16), F64) is None
    assert calls._dense_order((2, 3), (8, 8), F64) is None  # overlapping
    assert calls._dense_order((2, 3), (48, 16), F64) is None  # gaps
    order = calls._dense_order((2, 1, 3), (24, 5, 8), F64)  # extent 1: its stride never moves
    assert sorted(order) == [0, 1, 2] and order.index(0) < order.index(2)
