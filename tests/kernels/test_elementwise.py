"""The CPU fused elementwise kernels against the reference."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenalg.descriptors import Binary, Unary
from tenalg.kernels import cpu, reference
from tenalg.kernels.cpu import lowlevel

from .layouts import (
    BF16,
    C64,
    C128,
    EXACT_UNARIES,
    F16,
    F32,
    F64,
    SETTINGS,
    assert_same,
    compute_for,
    dtype_pairs,
    empty_like_layout,
    shapes,
    strided,
    values,
)

# --------------------------------------------------------------------------------------
# elementwise


@SETTINGS
@given(st.data(), shapes, dtype_pairs, st.integers(2, 3), st.sampled_from(list(Binary)),
       st.sampled_from(list(Binary)), st.lists(st.sampled_from(list(Unary)), min_size=3,
                                               max_size=3),
       st.sampled_from([(1, 1, 1), (2, -3, 0.5), (0.5, 1, 0)]))
def test_elementwise_matches_reference(data, shape, dtypes, n, op_ab, op_abc, unaries, scalars):
    complex_ = dtypes[1].kind == "c" or dtypes[0].kind == "c"
    if complex_ and (Binary.MIN in (op_ab, op_abc) or Binary.MAX in (op_ab, op_abc)):
        op_ab = op_abc = Binary.ADD  # the plan rejects min/max of complex data
    kinds = [dtypes[0]] * n  # inputs share a dtype: the specialisation of the permutation rows
    inputs = tuple(data.draw(strided(shape, dt)) for dt in kinds)
    out = empty_like_layout(data.draw, shape, dtypes[1])
    want = np.empty(shape, dtypes[1])
    compute = compute_for(*kinds, dtypes[1])
    kw = dict(unaries=tuple(unaries[:n]), op_ab=op_ab, op_abc=op_abc, scalars=scalars[:n],
              compute=compute)
    reference.elementwise(want, inputs, **kw)
    cpu.elementwise(out, inputs, **kw)
    exact = not complex_ and all(u in EXACT_UNARIES for u in unaries[:n])
    terms = [abs(s) * np.abs(reference.load(x, u, compute)) for x, u, s in
             zip(inputs, unaries, scalars, strict=False)]
    scale = sum(float(t[np.isfinite(t)].max(initial=0)) for t in terms)
    assert_same(out, want, exact=exact, scale=scale)


@SETTINGS
@given(st.data(), shapes, st.sampled_from([F32, F64, C128]), st.integers(2, 3),
       st.sampled_from([Binary.ADD, Binary.MUL]), st.sampled_from([Binary.ADD, Binary.MUL]),
       st.lists(st.sampled_from([Unary.IDENTITY, Unary.NEGATE, Unary.ABS]), min_size=3,
                max_size=3),
       st.sampled_from([(1, 1, 1), (2, -3, 0.5), (1, 0.5, 1), (-1, 1, 2)]),
       st.sampled_from([None, 0, 1, 2]))
def test_reference_elementwise_into_out_equals_its_formula(data, shape, dtype, n, op_ab,
                                                             op_abc, unaries, scalars, alias):
    """The reference sums or multiplies term by term into out where out overlaps no input;
    that gives the formula's values exactly, and an out that is an input gives them too."""
    inputs = [data.draw(strided(shape, dtype, output=True)) for _ in range(n)]
    inputs[-1][...] = np.where(np.arange(inputs[-1].size).reshape(shape) % 3 == 0, np.inf,
                               inputs[-1]) if inputs[-1].size else inputs[-1]
    kw = dict(unaries=tuple(unaries[:n]), op_ab=op_ab, op_abc=op_abc, scalars=scalars[:n],
              compute=dtype)
    with np.errstate(all="ignore"):  # inf * 0 and inf - inf: NaN wanted
        terms = [reference.scale(reference.load(x, u, dtype), s, dtype)
                 for x, u, s in zip(inputs, unaries, scalars, strict=False)]
        want = reference.BINARY[op_ab](terms[0], terms[1])
        if n == 3:
            want = reference.BINARY[op_abc](want, terms[2])
    out = np.full(shape, np.nan, dtype) if alias is None or alias >= n else inputs[alias]
    reference.elementwise(out, tuple(inputs), **kw)
    assert_same(out, np.asarray(want, dtype))


def test_elementwise_min_max_nan_and_signed_zero():
    a = np.array([np.nan, 1.0, 0.0, -0.0, 2.0, -np.inf])
    b = np.array([1.0, np.nan, -0.0, 0.0, np.inf, 3.0])
    for op in (Binary.MIN, Binary.MAX):
        out, want = np.empty(6), np.empty(6)
        kw = dict(unaries=(Unary.IDENTITY,) * 2, op_ab=op, op_abc=None, scalars=(1, 1),
                  compute=F64)
        cpu.elementwise(out, (a, b), **kw)
        reference.elementwise(want, (a, b), **kw)
        assert_same(out, want)
        assert np.array_equal(np.signbit(out), np.signbit(want))


def test_elementwise_mixed_input_dtypes():
    rng = np.random.default_rng(4)
    inputs = (values(rng, (30, 40), F16), values(rng, (40, 30), BF16).T,
              values(rng, (30, 40), F32)[::-1])
    out, want = np.empty((30, 40), F32), np.empty((30, 40), F32)
    kw = dict(unaries=(Unary.NEGATE, Unary.ABS, Unary.IDENTITY), op_ab=Binary.MUL,
              op_abc=Binary.MAX, scalars=(2, 0.5, -1), compute=F32)
    cpu.elementwise(out, inputs, **kw)
    reference.elementwise(want, inputs, **kw)
    assert_same(out, want)


@pytest.mark.parametrize("storage, compute", [
    ((F32,) * 4, F32), ((F64,) * 4, F64), ((C64,) * 4, C64), ((C128,) * 4, C128),
    ((F16,) * 4, F32), ((BF16,) * 4, F32), ((F16, BF16, F32, F16), F32),
    ((BF16, F32, F16, F64), F64)], ids=str)
@pytest.mark.parametrize("n", [2, 3])
def test_elementwise_one_pass_rows_match_reference(storage, compute, n):
    """Unit-stride rows of real floats with add/mul run in one pass (no row buffers),
    16-bit ones widened as they load and rounded as they store, in the compute type:
    bit-identical to the reference for every op pair, with NaN, inf and -0, on rows
    longer than a unit and offset, reversed-row views (complex types take the buffered
    path, checked to roundoff: complex products round differently)."""
    rng = np.random.default_rng(n)
    exact = compute.kind == "f"
    inputs = []
    for k in range(n):
        dtype, shape = storage[k + 1], (5, lowlevel._ROW_PIECE + 1100)
        x = (values(rng, (shape[0], shape[1] + 3), dtype)[::-1, 3:] if k == 1
             else values(rng, shape, dtype))
        if exact:
            special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e4], dtype)
            x[k, : special.size] = special[::1 - 2 * (k % 2)]
        inputs.append(x)
    for op_ab in (Binary.ADD, Binary.MUL):
        for op_abc in (Binary.ADD, Binary.MUL) if n > 2 else (None,):
            for scalars in [(1, 1, 1), (2, -3, 0.5), (0.0, 1, -0.0)]:
                shape = inputs[0].shape
                out, want = np.empty(shape, storage[0]), np.empty(shape, storage[0])
                kw = dict(unaries=(Unary.IDENTITY,) * n, op_ab=op_ab, op_abc=op_abc,
                          scalars=scalars[:n], compute=compute)
                call = cpu.elementwise_call(out, tuple(inputs), **kw)
                assert ("one pass" in call.about) == exact
                cpu.elementwise(out, tuple(inputs), **kw)
                reference.elementwise(want, tuple(inputs), **kw)
                assert_same(out, want, exact=exact, scale=10)
                if exact:
                    assert np.array_equal(np.signbit(out), np.signbit(want))


@pytest.mark.parametrize("storage, compute", [
    ((F32,) * 3, F32), ((F64,) * 3, F64), ((F16,) * 3, F32), ((BF16, F32, F16), F32),
    ((F64, F16, F32), F64)], ids=str)
@pytest.mark.parametrize("one_value", [0, 1])
def test_elementwise_one_pass_rows_of_one_value_match_reference(storage, compute, one_value):
    """Of two inputs, one may repeat a value along the rows (an outer product's column):
    the one pass loads it once a row, and gives the reference's values bit for bit, with
    NaN, inf and -0 (signed zeros kept), every op and scalar, on rows longer than a
    unit."""
    rng = np.random.default_rng(one_value)
    shape = (7, lowlevel._ROW_PIECE + 900)
    column = values(rng, (shape[0], 1), storage[1 + one_value])
    column[:4, 0] = np.array([np.nan, np.inf, -0.0, 0.0], storage[1 + one_value])
    rows = values(rng, shape, storage[2 - one_value])[::-1]
    rows[0, :3] = np.array([np.inf, -0.0, np.nan], storage[2 - one_value])
    inputs = [np.broadcast_to(column, shape), rows]
    if one_value:
        inputs.reverse()
    for op in (Binary.ADD, Binary.MUL):
        for scalars in [(1, 1), (2, -3), (0.0, -0.0)]:
            out, want = np.empty(shape, storage[0]), np.empty(shape, storage[0])
            kw = dict(unaries=(Unary.IDENTITY,) * 2, op_ab=op, op_abc=None, scalars=scalars,
                      compute=compute)
            call = cpu.elementwise_call(out, tuple(inputs), **kw)
            assert f"{'ab'[one_value]}'s row one value" in call.about
            with np.errstate(all="ignore"):
                cpu.elementwise(out, tuple(inputs), **kw)
                reference.elementwise(want, tuple(inputs), **kw)
            assert_same(out, want, exact=True)
            numbers = ~np.isnan(want)  # (a NaN's sign is the hardware's choice of operand)
            assert np.array_equal(np.signbit(out[numbers]), np.signbit(want[numbers]))


def test_elementwise_rows_span_the_axes_that_merge():
    """Axes that every array steps over as over one merge into one row: arrays contiguous
    in one order are a single row, a slice keeps the rows its stride breaks, an axis of
    extent 1 (whatever its stride) takes no place."""
    rng = np.random.default_rng(5)
    a, b = values(rng, (6, 5, 40), F64), values(rng, (6, 5, 40), F64)
    kw = dict(unaries=(Unary.IDENTITY,) * 2, op_ab=Binary.ADD, op_abc=None, scalars=(1, 1),
              compute=F64)
    for x, y, out, rows in [(a, b, np.empty_like(a), [1200]),
                            (a.T, b.T, np.empty((40, 5, 6), order="F"), [1200]),
                            (a[:, :, :30], b[:, :, :30], np.empty((6, 5, 30)), [30, 30]),
                            # an axis of extent 1 and any stride: no row of its own
                            (a[:1, 0], b[:1, 0], np.empty((3, 40))[1:2], [40])]:
        call = cpu.elementwise_call(out, (x, y), **kw)
        assert call.shape.tolist() == rows
        cpu.elementwise(out, (x, y), **kw)
        assert_same(out, x + y, exact=True)


def test_trinary_broadcast_row():
    rng = np.random.default_rng(2)
    a, c = values(rng, (300, 700), F32), values(rng, (300, 700), F32)
    b = np.broadcast_to(values(rng, (1, 700), F32), a.shape)
    out = np.empty_like(a)
    cpu.elementwise(out, (a, b, c), unaries=(Unary.IDENTITY,) * 3, op_ab=Binary.ADD,
                    op_abc=Binary.ADD, scalars=(2, 3, 0.5), compute=F32)
    assert_same(out, (np.float32(2) * a + np.float32(3) * b) + np.float32(0.5) * c)
