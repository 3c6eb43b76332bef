"""Layout coverage: every NumPy-named front end and every plan kind, ranks 0 to 8, traces
and partial traces over any pairs (0 to 6 survivors), zero, negative and diagonal
strides, every dtype, against NumPy.

Ranges (strategies.py): shapes of rank up to 8 with extents 0 to 3 and at most 729
elements; layouts from :func:`strategies.layouts`; dtypes :data:`strategies.ALL_DTYPES`
for the front ends (float16, bfloat16, float32, float64, complex64, complex128, int8,
int64, uint16, bool, longdouble, object), the storage types for the plan kinds.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta

from .strategies import ALL_DTYPES, DTYPES, close, layouts, small_shapes, trace_pairs, wide

LETTERS = "abcdefgh"
EXAMPLES = settings(max_examples=40, deadline=None)


def reference_input(a):
    """``a`` as NumPy's reference computes with it: float64 / complex128 for the kernels'
    types (exact sums of few terms), bool as int64 (einsum would 'or' it), else itself."""
    if a.dtype.kind == "b":
        return a.astype(np.int64)
    if a.dtype in [np.dtype(d) for d in DTYPES]:
        return wide(a)
    return a


@EXAMPLES
@given(data=st.data(), shape=small_shapes(2, 8), dtype=st.sampled_from(ALL_DTYPES))
def test_trace_of_any_pair(data, shape, dtype):
    """A trace over any two axes (extents equal or not: the leading square) with any
    offset keeps 0 to 6 survivors in order: NumPy's values and result type."""
    a = data.draw(layouts(shape, dtype))
    (axis1, axis2), = data.draw(trace_pairs(a.ndim, max_pairs=1))
    offset = data.draw(st.sampled_from([0, 0, 1, -1, 2]))
    got = ta.trace(a, axis1, axis2, offset=offset)
    expected = np.trace(a, offset, axis1, axis2)
    close(got, expected, dtype, a)
    assert got.dtype == np.asarray(expected).dtype


@EXAMPLES
@given(data=st.data(), shape=small_shapes(2, 8), dtype=st.sampled_from(ALL_DTYPES))
def test_partial_trace_over_any_pairs(data, shape, dtype):
    """One to four pairs at once, leading squares where extents differ: einsum's values."""
    a = data.draw(layouts(shape, dtype))
    pairs = data.draw(trace_pairs(a.ndim))
    index, labels = [slice(None)] * a.ndim, list(LETTERS[:a.ndim])
    for i, j in pairs:
        n = min(a.shape[i], a.shape[j])
        index[i] = index[j] = slice(0, n)
        labels[j] = labels[i]
    traced = {ax for pair in pairs for ax in pair}
    out = "".join(m for k, m in enumerate(labels) if k not in traced)
    expected = np.einsum(f"{''.join(labels)}->{out}", reference_input(a[tuple(index)]))
    got = ta.partial_trace(a, pairs)
    close(got, expected, dtype, a)


@EXAMPLES
@given(data=st.data(), shape=small_shapes(0, 8), dtype=st.sampled_from(ALL_DTYPES))
def test_sum_over_any_axes(data, shape, dtype):
    a = data.draw(layouts(shape, dtype))
    axes = data.draw(st.lists(st.integers(-a.ndim, a.ndim - 1), unique_by=lambda x: x % a.ndim,
                              max_size=a.ndim)) if a.ndim else []
    axis = data.draw(st.sampled_from([None, tuple(axes)] + ([axes[0]] if axes else [])))
    keepdims = data.draw(st.booleans())
    got = ta.sum(a, axis=axis, keepdims=keepdims)
    expected = np.sum(a, axis=axis, keepdims=keepdims)
    close(got, expected, dtype, a)
    assert got.dtype == np.asarray(expected).dtype


@EXAMPLES
@given(data=st.data(), shape=small_shapes(2, 8), dtype=st.sampled_from(ALL_DTYPES))
def test_diagonal_of_any_pair(data, shape, dtype):
    a = data.draw(layouts(shape, dtype))
    (axis1, axis2), = data.draw(trace_pairs(a.ndim, max_pairs=1))
    offset = data.draw(st.sampled_from([0, 0, 1, -2]))
    got = ta.diagonal(a, axis1, axis2, offset=offset)
    expected = np.diagonal(a, offset, axis1, axis2)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    assert not got.flags.writeable


@EXAMPLES
@given(data=st.data(), shape=small_shapes(0, 8), dtype=st.sampled_from(ALL_DTYPES))
def test_permute_any_axes(data, shape, dtype):
    """``np.transpose(a, axes)`` copied: the same bits, C order, a's dtype, new memory."""
    a = data.draw(layouts(shape, dtype))
    axes = tuple(data.draw(st.permutations(range(a.ndim))))
    got = ta.permute(a, axes)
    expected = np.transpose(a, axes)
    assert got.dtype == a.dtype and got.shape == expected.shape
    assert got.flags.c_contiguous and (got.size == 0 or not np.shares_memory(got, a))
    np.testing.assert_array_equal(got, expected)


@EXAMPLES
@given(data=st.data(), shape=small_shapes(0, 8), dtype=st.sampled_from(ALL_DTYPES))
def test_norm_of_any_layout(data, shape, dtype):
    a = data.draw(layouts(shape, dtype))
    got = ta.norm(a)
    if a.dtype == object or a.dtype == np.longdouble:
        expected = np.linalg.norm(a.ravel())
    else:
        expected = np.linalg.norm(reference_input(a).ravel().astype(np.complex128))
    dtype = np.float64 if a.dtype.kind in "biu" else dtype
    close(np.abs(got.astype(np.float64) if dtype is not object else got),
          np.abs(np.float64(expected) if dtype is not object else expected), dtype, a)


# ---- the plan kinds (storage types), through their front ends and Plan ----

@st.composite
def modes_with_repeats(draw, labels):
    """A mode list over ``labels`` in any order, some of them repeated (diagonals)."""
    modes = list(draw(st.permutations(labels)))
    for _ in range(draw(st.integers(0, 2))):
        if modes:
            modes.insert(draw(st.integers(0, len(modes))), draw(st.sampled_from(modes)))
    return "".join(modes)


def extents_of(draw, labels):
    """An extent (0 to 3) per label, at most 729 elements per operand of 8 labels."""
    return {m: draw(st.integers(0, 3) if len(labels) < 6 else st.integers(1, 2))
            for m in labels}


@EXAMPLES
@given(data=st.data(), rank=st.integers(0, 8), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(["sum", "max", "min", "product"]))
def test_reduction_with_diagonals(data, rank, dtype, op):
    """ta.reduce over any repeated modes (diagonals) and any kept modes, any op."""
    labels = LETTERS[:rank]
    extents = extents_of(data.draw, labels)
    if op in ("max", "min") and dtype in (np.complex64, np.complex128):
        op = "sum"  # min and max are for real data
    modes = data.draw(modes_with_repeats(labels))
    a = data.draw(layouts([extents[m] for m in modes], dtype))
    kept = "".join(data.draw(st.permutations([m for m in labels if data.draw(st.booleans())])))
    unique = "".join(dict.fromkeys(modes))
    diag = np.einsum(f"{modes}->{unique}", wide(a)) if modes else wide(a)
    reduced = tuple(k for k, m in enumerate(unique) if m not in kept)
    ufunc = {"sum": np.add, "max": np.maximum, "min": np.minimum, "product": np.multiply}[op]
    identity = {"max": -np.inf, "min": np.inf}.get(op, ufunc.identity)
    expected = ufunc.reduce(diag, axis=reduced, initial=identity) if reduced else diag
    rest = [m for m in unique if m in kept]
    expected = np.transpose(expected, [rest.index(m) for m in kept])
    got = ta.reduce(a, modes, kept, op)
    close(got, expected, dtype, np.abs(wide(a)) ** (3 if op == "product" else 1) + 1)


def aligned(x, modes, out_modes):
    """``x`` (modes ``modes``, no repeats) transposed and padded to broadcast against an
    array of ``out_modes``."""
    order = sorted(range(len(modes)), key=lambda k: out_modes.index(modes[k]))
    x = np.transpose(x, order)
    present = [modes[k] for k in order]
    return x.reshape([x.shape[present.index(m)] if m in present else 1 for m in out_modes])


@EXAMPLES
@given(data=st.data(), rank=st.integers(0, 8), dtype=st.sampled_from(DTYPES),
       op=st.sampled_from(["add", "mul", "max"]))
def test_elementwise_any_layouts(data, rank, dtype, op):
    """Binary and trinary elementwise operations with broadcast (absent) modes, any
    orders, and the permutation plan: NumPy's broadcasting values."""
    labels = LETTERS[:rank]
    extents = extents_of(data.draw, labels)
    out = "".join(data.draw(st.permutations(labels)))
    modes = ["".join(data.draw(st.permutations([m for m in labels
                                                if k == 0 or data.draw(st.booleans())])))
             for k in range(3)]
    x, y, z = (data.draw(layouts([extents[m] for m in ms], dtype)) for ms in modes)
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum}[op]
    wx, wy, wz = (aligned(wide(v), ms, out) for v, ms in zip((x, y, z), modes, strict=True))
    if op == "max" and dtype in (np.complex64, np.complex128):
        op, ufunc = "add", np.add  # max is for real data
    got = ta.elementwise_binary(x, modes[0], y, modes[1], out, op=op, beta=2)
    expected = np.broadcast_to(ufunc(wx, 2 * wy), [extents[m] for m in out])
    close(got, expected, dtype, np.abs(wx) + np.abs(wy) + np.zeros(expected.shape))
    got = ta.elementwise_trinary(x, modes[0], y, modes[1], z, modes[2], out, op_ab=op,
                                 op_abc="add", gamma=-1)
    expected = np.broadcast_to(ufunc(wx, wy) - wz, [extents[m] for m in out])
    close(got, expected, dtype, np.abs(wx) + np.abs(wy) + np.abs(wz) + np.zeros(expected.shape))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(x, modes[0]), out_modes=out))
    close(plan.execute(x), aligned(wide(x), modes[0], out), dtype, 1)


@EXAMPLES
@given(data=st.data(), rank=st.integers(0, 8), dtype=st.sampled_from(DTYPES))
def test_contraction_and_sum_product_any_layouts(data, rank, dtype):
    """Contractions over any split of up to 8 modes into free, contracted and batch modes
    (repeats within an operand: diagonals), and a three-factor sum_product: einsum's."""
    labels = LETTERS[:rank]
    extents = extents_of(data.draw, labels)
    side = {m: data.draw(st.sampled_from(["a", "b", "both"])) for m in labels}
    pick = [[m for m in labels if side[m] in (s, "both")] for s in "ab"]
    ma, mb = (data.draw(modes_with_repeats(p)) for p in pick)
    out = "".join(data.draw(st.permutations(
        [m for m in labels if side[m] != "both" or data.draw(st.booleans())])))
    a, b = (data.draw(layouts([extents[m] for m in ms], dtype)) for ms in (ma, mb))
    expected = np.einsum(f"{ma},{mb}->{out}", wide(a), wide(b))
    got = ta.contract(a, ma, b, mb, out)
    scale = np.einsum(f"{ma},{mb}->{out}", np.abs(wide(a)), np.abs(wide(b)))
    close(got, expected, dtype, scale)
    mc = "".join(data.draw(st.permutations([m for m in labels if data.draw(st.booleans())])))
    c = data.draw(layouts([extents[m] for m in mc], dtype))
    operands = [ta.Operand(x, ms) for x, ms in ((a, ma), (b, mb), (c, mc))]
    plan = ta.Plan(ta.Operation.sum_product(operands, out_modes=out))
    expected = np.einsum(f"{ma},{mb},{mc}->{out}", wide(a), wide(b), wide(c))
    scale = np.einsum(f"{ma},{mb},{mc}->{out}", *(np.abs(wide(x)) for x in (a, b, c)))
    close(plan.execute(a, b, c), expected, dtype, scale)


@pytest.mark.parametrize("rank", range(3, 9))
def test_traces_that_keep_many_free_modes_in_order(rank):
    """The crash of issue 32: a diagonal sum that keeps three or more free modes in their
    input order (kernels/cpu.py strided_sums unpacked its lanes as two)."""
    a = np.arange(2.0 ** rank).reshape((2,) * rank)
    np.testing.assert_array_equal(ta.trace(a, 0, 1), np.trace(a, 0, 0, 1))
    np.testing.assert_array_equal(ta.partial_trace(a, [(0, 1)]), np.trace(a, 0, 0, 1))
    free = LETTERS[2:rank]
    np.testing.assert_array_equal(ta.reduce(a, "aa" + free, free, "sum"),
                                  np.einsum(f"aa{free}->{free}", a))
    np.testing.assert_array_equal(ta.einsum(f"aa{free}->{free}", a),
                                  np.einsum(f"aa{free}->{free}", a))


@EXAMPLES
@given(data=st.data(), rank=st.integers(0, 8),
       dtype=st.sampled_from(DTYPES + [np.int64, np.bool_]))
def test_einsum_traces_and_products_any_layouts(data, rank, dtype):
    """ta.einsum of one operand with repeated labels (traces keeping any free labels in
    any order) and of two: np.einsum's values and result type."""
    labels = LETTERS[:rank]
    extents = extents_of(data.draw, labels)
    ma = data.draw(modes_with_repeats(labels))
    a = data.draw(layouts([extents[m] for m in ma], dtype))
    out = "".join(data.draw(st.permutations([m for m in labels if data.draw(st.booleans())])))
    got = ta.einsum(f"{ma}->{out}", a)
    expected = numpy_einsum(f"{ma}->{out}", a)
    close(got, expected, dtype, np.einsum(f"{ma}->{out}", np.abs(reference_input(a))))
    assert got.dtype == expected.dtype
    mb = data.draw(modes_with_repeats([m for m in labels if data.draw(st.booleans())]))
    b = data.draw(layouts([extents[m] for m in mb], dtype))
    got = ta.einsum(f"{ma},{mb}->{out}", a, b)
    expected = numpy_einsum(f"{ma},{mb}->{out}", a, b)
    scale = np.einsum(f"{ma},{mb}->{out}", *(np.abs(reference_input(x)) for x in (a, b)))
    close(got, expected, dtype, scale)
    assert got.dtype == expected.dtype


def numpy_einsum(expression, *arrays):
    """np.einsum's result; for the kernels' types (bfloat16, which np.einsum does not
    take, included) computed wide and given the inputs' type."""
    if arrays[0].dtype in [np.dtype(d) for d in DTYPES]:
        wide_result = np.einsum(expression, *(wide(x) for x in arrays))
        return np.asarray(wide_result).astype(arrays[0].dtype)
    return np.asarray(np.einsum(expression, *arrays))


def test_cases_a_fuzzer_found():
    """Each against NumPy, on every backend that takes it (found by a fuzzer of the
    plan layer): the reference twin added C as stored, not by its modes; a permutation to
    a broadcast-only output mode crashed the cpu backend's planning; a sum_product of
    three factors with such a mode reached opt_einsum's parser; a real reduction into a
    complex output reached a Numba typing error; a float64 C with float32 inputs was
    rounded to float32."""
    a, b = np.arange(4.0).reshape(2, 2), np.eye(2)
    c = np.array([[0.0, 1.0], [10.0, 11.0]])
    for modes, addend, expected in (("ji", c, a @ b + c.T), ("i", c[:, 0], a @ b + c[:, :1])):
        op = ta.Operation.contraction(ta.Operand(a, "ik"), ta.Operand(b, "kj"),
                                      ta.Operand(addend, modes), out_modes="ij")
        for backend in ("auto", "reference"):
            np.testing.assert_array_equal(
                ta.Plan(op, backend=backend).execute(a, b, addend, beta=1), expected)
    for n, dtype in ((4096, np.float32), (64, np.float64)):
        v = np.arange(n, dtype=dtype)
        op = ta.Operation.permutation(ta.Operand(v, "j"), out_modes="ij",
                                      out=ta.TensorDescriptor.contiguous((3, n), dtype))
        for backend in ("auto", "cpu", "reference"):
            np.testing.assert_array_equal(ta.Plan(op, backend=backend).execute(v),
                                          np.broadcast_to(v, (3, n)))
    m, w, s = np.arange(6.0).reshape(2, 3), np.arange(3.0), np.array(2.0)
    op = ta.Operation.sum_product([ta.Operand(s, ""), ta.Operand(m, "ij"), ta.Operand(w, "j")],
                                  out=ta.TensorDescriptor.contiguous((2, 4), np.float64),
                                  out_modes="iz")
    for backend in ("auto", "reference"):
        np.testing.assert_array_equal(ta.Plan(op, backend=backend).execute(s, m, w),
                                      np.broadcast_to((2 * m @ w)[:, None], (2, 4)))
    x = np.ones((512, 512))
    np.testing.assert_array_equal(ta.sum(x, axis=1, out=np.zeros(512, complex)), 512)
    op = ta.Operation.reduction(ta.Operand(x, "ij"), out=np.dtype(np.complex128),
                                out_modes="i")
    np.testing.assert_array_equal(ta.Plan(op).execute(x), 512)
    with pytest.raises(ta.OperationError, match="does not run"):
        ta.Plan(op, backend="cpu")
    zeros, tiny = np.zeros((2, 3), np.float32), np.full(2, 1 + 1e-12)
    op = ta.Operation.reduction(ta.Operand(zeros, "ij"), ta.Operand(tiny, "i"), out_modes="i")
    assert op.compute == np.float64
    np.testing.assert_array_equal(ta.Plan(op).execute(zeros, tiny, beta=1), tiny)
