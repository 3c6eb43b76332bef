"""The CPU reduction kernels (lanes, few terms, row totals, diagonal sums) against the
reference and math.fsum."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenalg.descriptors import Reduce, Unary
from tenalg.kernels import cpu, reference
from tenalg.kernels.cpu import (
    calls,
    lowlevel,
    reduction,
    reduction_lanes,
    reduction_rows,
    row_sums,
    threads,
    vectors,
)

from .layouts import (
    BF16,
    C64,
    C128,
    EXACT_UNARIES,
    F16,
    F32,
    F64,
    MIXED,
    SAME,
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
# reduction


def split_shape(draw, shape):
    k = draw(st.integers(0, len(shape)))
    return shape[:k], shape[k:]


@SETTINGS
@given(st.data(), shapes, dtype_pairs, st.sampled_from(list(Reduce)),
       st.sampled_from(list(Unary)), st.sampled_from([(1, 0), (2, 0), (1, 1), (-1, 0.5)]),
       st.booleans())
def test_reduce_matches_reference(data, shape, dtypes, op, unary, scalars, nan_c):
    complex_ = dtypes[0].kind == "c" or dtypes[1].kind == "c"
    if complex_ and op in (Reduce.MIN, Reduce.MAX):
        op = Reduce.SUM
    if op is Reduce.PRODUCT and unary is Unary.EXP:
        unary = Unary.TANH  # partial products of exp overflow in one order, underflow in another
    free, _ = split_shape(data.draw, shape)
    a = data.draw(strided(shape, dtypes[0]))
    alpha, beta = scalars
    c = data.draw(strided(free, dtypes[1]))
    if beta == 0 and nan_c:
        c = np.full(free, np.nan, dtypes[1])  # never read when beta == 0
    out = empty_like_layout(data.draw, free, dtypes[1])
    want = np.empty(free, dtypes[1])
    compute = compute_for(dtypes[0], dtypes[1])
    kw = dict(op=op, alpha=alpha, beta=beta, c=c, unary_a=unary, unary_c=Unary.NEGATE,
              compute=compute)
    reference.reduce(want, a, **kw)
    cpu.reduce(out, a, **kw)
    exact = op in (Reduce.MIN, Reduce.MAX) and unary in EXACT_UNARIES
    assert_same(out, want, exact=exact)
    if beta == 0 and nan_c and op is Reduce.SUM and unary is Unary.IDENTITY:
        assert not np.isnan(out).any()


def fsum_bound(x, axes):
    """(exact sums by math.fsum, sums of |x|) over ``axes`` of a float64 array."""
    moved = np.moveaxis(x, axes, range(-len(axes), 0))
    flat = moved.reshape(moved.shape[: x.ndim - len(axes)] + (-1,))
    exact = np.array([math.fsum(r) for r in flat.reshape(-1, flat.shape[-1])])
    return exact.reshape(flat.shape[:-1]), np.abs(flat).sum(-1)


@pytest.mark.parametrize(
    "shape, axes, view",
    [
        ((1_000_003,), (0,), None),             # full reduction: split into partial sums
        ((7, 35_000), (0, 1), "cut"),           # one sum of 7 rows: pieces of rows
        ((20_000, 70), (0, 1), "short"),        # one sum of many rows shorter than a chunk
        ((3, 50_000), (1,), None),              # few outputs, long rows
        ((40, 300, 9), (1,), None),             # lanes along the contiguous free axis
        ((64, 40, 300), (0, 2), None),          # inner reduced rows, lanes of outputs
        ((300, 40, 64), (2,), None),            # short contiguous rows, all lanes a call
        ((20, 50, 300), (2,), None),            # rows longer than a chunk
        ((70, 300), (0,), "T"),                 # transposed input
        ((600, 600), (0,), "diag"),             # trace: one strided diagonal axis
    ],
)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_sum_accuracy_against_fsum(shape, axes, view, dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-3, 3, shape))).astype(dtype)
    if view == "T":
        x = np.ascontiguousarray(x.T).T
    if view == "diag":
        x = np.diagonal(x)
    if view == "cut":
        x = x[:, :30_001]  # the rows do not merge
    if view == "short":
        x = x[:, :64]
    free = [ax for ax in range(x.ndim) if ax not in axes]
    a = x.transpose(free + list(axes))
    out = np.empty([x.shape[ax] for ax in free], dtype)
    cpu.reduce(out, a, op=Reduce.SUM, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=dtype)
    exact, mag = fsum_bound(x.astype(F64), axes)
    eps = np.finfo(dtype).eps
    n = math.prod(x.shape[ax] for ax in axes)
    err = np.abs(out.astype(F64) - exact)
    assert (err <= (math.log2(n) + 4) * eps * mag + eps * np.abs(exact)).all()  # pairwise


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("shape, axes", [((700, 70), (0,)), ((40, 33, 130), (0, 1))])
def test_16bit_lanes_sum_like_their_float32_values(dtype, shape, axes):
    """Sums of unit-stride 16-bit lanes widen the terms in the vector registers of the
    lane runs (runs of 64, 4 and 2 lanes here): bit for bit the sums of the same values
    stored as float32, which take the same runs in the same order."""
    x = values(np.random.default_rng(6), shape, dtype)
    free = [ax for ax in range(x.ndim) if ax not in axes]
    got, want = (np.empty([x.shape[ax] for ax in free], F32) for _ in range(2))
    for out, a in ((got, x), (want, x.astype(F32))):
        cpu.reduce(out, a.transpose(free + list(axes)), op=Reduce.SUM, alpha=1, beta=0,
                   c=None, unary_a=Unary.IDENTITY, unary_c=Unary.IDENTITY, compute=F32)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype, compute", [(F32, F32), (F64, F64), (np.float16, F32)])
def test_long_row_sums_as_accurate_as_numpy(dtype, compute):
    """Sums of long contiguous rows (their own kernel, with longer chunks for 16-bit
    storage) err about as much as NumPy's pairwise sums in the same type, over 64 rows:
    the ratio varies from 0.8 to 1.1 with the seed, and a naive loop's is 10x or more."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 50_000)) * np.exp(rng.uniform(-3, 3, (64, 50_000))))
    x = x.astype(dtype)
    out = np.empty(64, compute)
    cpu.reduce(out, x, op=Reduce.SUM, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=np.dtype(compute))
    exact = np.array([math.fsum(row) for row in x.astype(F64)])
    ours = np.abs(out.astype(F64) - exact).sum()
    numpy = np.abs(x.sum(axis=1, dtype=compute).astype(F64) - exact).sum()
    assert 0 < ours <= 1.5 * numpy


@pytest.mark.parametrize("op, ident", [(Reduce.SUM, 0.0), (Reduce.PRODUCT, 1.0),
                                       (Reduce.MIN, np.inf), (Reduce.MAX, -np.inf)])
def test_empty_reduction_gives_identity(op, ident):
    out = np.empty(3)
    cpu.reduce(out, np.empty((3, 0)), op=op, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=F64)
    assert_same(out, np.full(3, ident))


@pytest.mark.parametrize("op", [Reduce.MIN, Reduce.MAX])
def test_min_max_propagate_nan(op):
    x = np.arange(3000.0).reshape(3, 1000)
    x[1, 777] = np.nan
    out = np.empty(3)
    cpu.reduce(out, x, op=op, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=F64)
    assert np.isnan(out[1]) and not np.isnan(out[[0, 2]]).any()


@pytest.mark.parametrize("op", list(Reduce))
@pytest.mark.parametrize("dtype", [np.dtype(np.float16), F32])
def test_long_rows_match_reference(op, dtype):
    """Rows of many chunks (row_sums._CHUNK elements each) over 2^17 elements, ending in a
    partial chunk; a NaN late in one row."""
    n = (1 << 17) + 300
    x = np.random.default_rng(5).uniform(0.999, 1.001, (3, n)).astype(dtype)
    x[1, n - 200] = np.nan
    out, want = np.empty(3, dtype), np.empty(3, dtype)
    kw = dict(op=op, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY, unary_c=Unary.IDENTITY,
              compute=F32)
    cpu.reduce(out, x, **kw)
    reference.reduce(want, x, **kw)
    if op in (Reduce.MIN, Reduce.MAX):
        assert_same(out, want)
    else:  # another order: float32 products of 10^5 terms differ by ~sqrt(n) ulps
        np.testing.assert_allclose(out.astype(F64), want.astype(F64), rtol=1e-3)
    assert np.isnan(out[1]) and not np.isnan(out[[0, 2]]).any()




@pytest.mark.parametrize("dtypes", [(d, d) for d in SAME] + MIXED)
@pytest.mark.parametrize("n", [reduction_rows._LONG_ROW // 2, 3 * reduction_rows._LONG_ROW + 77])
def test_reduce_long_contiguous_rows(dtypes, n):
    """Sums of contiguous rows of 128 bytes or more (their own kernel: each row read whole,
    in the order of :func:`row_total_order`) into a strided output, with alpha, beta and
    C: as the reference, and within a few units of the compute type's rounding of the sum
    of magnitudes."""
    rng = np.random.default_rng(n)
    a = values(rng, (4, 6, n), dtypes[0])
    out = np.full((6, 4), np.nan, dtypes[1]).T  # a transposed output
    c = values(rng, (4, 6), dtypes[1])
    want = np.empty((4, 6), dtypes[1])
    layout = reduction._reduce_prep(calls._layout(out), calls._layout(c), calls._layout(a), 2)
    assert layout[6] == 1 and layout[7].size == 0 and layout[5] == n  # the row-sum case
    compute = compute_for(*dtypes)
    kw = dict(op=Reduce.SUM, alpha=-2, beta=0.5, c=c, unary_a=Unary.IDENTITY,
              unary_c=Unary.IDENTITY, compute=compute)
    reference.reduce(want, a, **kw)
    assert cpu.reduce_call(out, a, **kw).kernel in reduction_rows._ROW_TOTALS
    cpu.reduce(out, a, **kw)
    assert_same(out, want, exact=False)
    wide = a.astype(np.complex128)
    exact = -2 * wide.sum(axis=2) + 0.5 * c.astype(np.complex128)
    bound = 2 * np.abs(wide).sum(axis=2) + 0.5 * np.abs(c.astype(np.complex128))
    rounding = np.finfo(compute).eps * 16 + (np.finfo(dtypes[1]).eps
                                             if dtypes[1].itemsize == 2 else 0)
    assert (np.abs(out.astype(np.complex128) - exact) <= rounding * bound).all()


@pytest.mark.parametrize("dtypes", [(d, d) for d in SAME] + MIXED)
@pytest.mark.parametrize("op", list(Reduce))
def test_reduce_plane_in_two_passes(dtypes, op):
    """A short contiguous reduced row that continues the lane axis (sum over axes (0, 2) of
    a C array) runs as two passes: the outer axes into the (lane, row) plane, then the
    rows; as the reference, alpha, beta, C and NaN included."""
    if "c" in (dtypes[0].kind, dtypes[1].kind) and op in (Reduce.MIN, Reduce.MAX):
        op = Reduce.SUM
    rng = np.random.default_rng(11)
    a = values(rng, (9, 5, 7, 6), dtypes[0])
    a[2, 1, 3, 4] = np.nan
    view = a.transpose(1, 2, 0, 3)  # free (5, 7), reduced (9, 6): rows of 6 continue axis 7
    assert reduction._plane_split(calls._layout(view), 2) is not None
    assert reduction._plane_split(calls._layout(a.transpose(1, 3, 0, 2)), 2) is None  # lane inner
    c = values(rng, (5, 7), dtypes[1])
    out, want = np.empty((7, 5), dtypes[1]).T, np.empty((5, 7), dtypes[1])
    kw = dict(op=op, alpha=0.5, beta=-1, c=c, unary_a=Unary.ABS, unary_c=Unary.NEGATE,
              compute=compute_for(*dtypes))
    reference.reduce(want, view, **kw)
    cpu.reduce(out, view, **kw)
    assert_same(out, want, exact=op in (Reduce.MIN, Reduce.MAX))


def test_reduce_lane_tiles():
    """More free outputs than one lane tile (_LANES), the last tile partial: a sum over
    axis 0 of a wide C matrix, as the reference."""
    a = values(np.random.default_rng(12), (37, 2 * reduction_lanes._LANES + 5), F32)
    out, want = np.empty(a.shape[1], F32), np.empty(a.shape[1], F32)
    kw = dict(op=Reduce.SUM, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
              unary_c=Unary.IDENTITY, compute=F32)
    reference.reduce(want, a.T, **kw)
    cpu.reduce(out, a.T, **kw)
    assert_same(out, want, exact=False)


def run_on_threads(threads, run, *args):
    """``run(*args)`` with Numba's thread count set to ``threads`` (at most the pool's)."""
    import numba

    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        run(*args)
    finally:
        numba.set_num_threads(previous)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("n, w", [(1024, 2), (1500, 8), (3001, 3), (2048, 16), (5000, 1),
                                  (4500, 4), (4200, 40)])
@pytest.mark.parametrize("threads", [1, 2])
def test_strided_sums_match_exact_sums(dtype, n, w, threads):
    """Sums of far-apart terms (w lanes of a[i, 0, :]), split between threads and merged
    pairwise: in vector registers below 4096 cache lines, else prefetched, one sum after
    the other (w <= 16) or side by side: within NumPy's pairwise error bound of the
    exact sums."""
    rng = np.random.default_rng(n + w)
    a = values(rng, (n, 17, w), dtype)
    run = cpu.strided_sums(dtype, n, 17 * w, [(w, 1)])
    out = np.full(w, np.nan, dtype)
    run_on_threads(threads, run, a, out)
    diag = a[:, 0].astype(np.float64)
    exact = np.array([math.fsum(diag[:, j]) for j in range(w)])
    bound = (16 + math.log2(n)) * np.finfo(dtype).eps * np.abs(diag).sum(axis=0)
    assert np.all(np.abs(out - exact) <= bound)


def test_strided_sums_over_two_lane_axes():
    """A partial trace of (64, 32, 64, 32) over axes 0, 2: 1024 sums of 64 terms."""
    a = values(np.random.default_rng(1), (64, 32, 64, 32), F64)
    run = cpu.strided_sums(F64, 64, 32 * 64 * 32 + 32, [(32, 64 * 32), (32, 1)])
    out = np.full((32, 32), np.nan)
    run(a, out)
    np.testing.assert_allclose(out, np.einsum("ijik->jk", a), rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("n, h, w", [(1500, 3, 5), (4500, 2, 1), (700, 5, 40)])
@pytest.mark.parametrize("threads", [1, 2])
def test_strided_sums_split_rows_between_threads(n, h, w, threads):
    """Rows r of sums a[i*step + r*row_stride + t] (2 threads take whole rows, unevenly
    for odd h; one sum after the other or side by side): within the pairwise bound."""
    step, row_stride = h * 48 + 17, 48
    a = values(np.random.default_rng(n + h), (n, step), F64)
    run = cpu.strided_sums(F64, n, step, [(h, row_stride), (w, 1)])
    out = np.full((h, w), np.nan)
    run_on_threads(threads, run, a, out)
    terms = np.stack([a[:, r * row_stride:r * row_stride + w] for r in range(h)], axis=1)
    exact = np.array([[math.fsum(terms[:, r, t]) for t in range(w)] for r in range(h)])
    bound = (16 + math.log2(n)) * np.finfo(F64).eps * np.abs(terms).sum(axis=0)
    assert np.all(np.abs(out - exact) <= bound)


def cascade_sum(terms, block=16, op=np.add, identity=0):
    """The sum (or ``op``-reduction) over axis 0 of ``terms`` in the order of the
    strided-sums kernel: runs of ``block`` combined in order from ``identity``, the runs
    merged on a pairwise cascade (older op newer)."""
    stack = []
    for count, i0 in enumerate(range(0, len(terms), block), start=1):
        run = np.full_like(terms[0], identity)
        for term in terms[i0:i0 + block]:
            run = op(run, term)
        stack.append(run)
        k = count
        while k % 2 == 0:
            newer = stack.pop()
            stack[-1] = op(stack[-1], newer)
            k //= 2
    total = stack[-1]
    for older in reversed(stack[:-1]):
        total = op(older, total)
    return total


def extreme(op):
    """min (Reduce.MIN) or max of two arrays as the kernels define them: NaN where either
    is NaN, -0 below +0."""
    def pick(u, v):
        first = (u < v) | ((u == v) & np.signbit(u)) if op is Reduce.MIN else \
            (u > v) | ((u == v) & ~np.signbit(u))
        return np.where(np.isnan(u) | np.isnan(v), np.nan, np.where(first, u, v)).astype(u.dtype)
    return pick


ROW_OPS = {Reduce.SUM: (np.add, 0), Reduce.PRODUCT: (np.multiply, 1),
           Reduce.MIN: (extreme(Reduce.MIN), np.inf), Reduce.MAX: (extreme(Reduce.MAX), -np.inf)}


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("n, h, w", [(1000, 1, 13), (300, 1, 31), (130, 1, 9), (2047, 2, 1),
                                     (200, 3, 11), (64, 32, 32), (1500, 1, 8)])
def test_strided_sums_in_registers_keep_the_cascade_order(dtype, n, h, w):
    """Unit-stride lanes (any count: registers of k, k/2, ..., 1 lanes) and single sums
    add chunks of runs side by side in vector registers, whole chunks and a last partial
    one: bit for bit the order of runs of 16 on the pairwise cascade."""
    step, row_stride = h * (w + 5) + 19, w + 5
    a = values(np.random.default_rng(n + w), (n, step), dtype)
    run = cpu.strided_sums(dtype, n, step, [(h, row_stride), (w, 1)])
    out = np.full((h, w), np.nan, dtype)
    run(a, out)
    terms = np.stack([a[:, r * row_stride:r * row_stride + w] for r in range(h)], axis=1)
    np.testing.assert_array_equal(out, cascade_sum(terms))


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("shape, cut", [((4, 333, 13), None),     # lanes of 8 + 4 + 1
                                        ((4, 40, 9, 70), 7),      # two walk axes, runs of 7
                                        ((2, 300, 150), None),    # wide: several registers
                                        ((4, 5, 70, 24), 64)])    # runs of one block
def test_reduce_lanes_in_registers_keep_the_cascade_order(dtype, shape, cut):
    """Sums over axes that leave the contiguous axis free add each block of _RUN_BLOCK
    walk steps to the lanes in vector registers (registers of k, k/2, ..., 1 lanes; a
    block may span runs along the innermost walk axis): bit for bit the order of such
    blocks on the pairwise cascade."""
    a = values(np.random.default_rng(len(shape) + shape[-1]), shape, dtype)
    if cut is not None:
        a = a[:, :, :cut]  # the walk axes do not merge
    view = a.transpose(0, a.ndim - 1, *range(1, a.ndim - 1))  # free (outer, lanes) first
    out = np.full(view.shape[:2], np.nan, dtype)
    layout = reduction._reduce_prep(calls._layout(out), calls._layout(out), calls._layout(view), 2)
    assert layout[5] == 1 and layout[9] == 1  # no reduced row, every output in one part
    cpu.reduce(out, view, op=Reduce.SUM, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=dtype)
    terms = view.reshape(view.shape[:2] + (-1,)).transpose(2, 0, 1)
    np.testing.assert_array_equal(out, cascade_sum(terms, reduction_lanes._RUN_BLOCK))


@pytest.mark.parametrize("dtype, compute", [(F32, F32), (F64, F64), (F16, F32), (BF16, F32)])
@pytest.mark.parametrize("op", list(Reduce))
def test_reduce_strided_lanes_keep_the_cascade_order(dtype, compute, op):
    """Lanes that are not contiguous (a partial trace's, 3 elements apart here) combine
    each walk step's terms in order, _BLOCK steps a run on the pairwise cascade: bit for
    bit, whether the terms add as they load (sums, products) or through the buffer."""
    a = values(np.random.default_rng(5), (3, 70, 57, 4), dtype)
    view = a[:, :, ::3, 1].transpose(0, 2, 1)  # (outer, lanes 3 apart, walk of 70 steps)
    out = np.full(view.shape[:2], np.nan, compute)
    layout = reduction._reduce_prep(calls._layout(out), calls._layout(out), calls._layout(view), 2)
    assert layout[5] == 1 and abs(layout[2][2, -1]) == 12  # no reduced row; lanes 3 apart
    cpu.reduce(out, view, op=op, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=compute)
    combine, identity = ROW_OPS[op]
    terms = view.astype(compute).transpose(2, 0, 1)
    np.testing.assert_array_equal(out, cascade_sum(terms, row_sums._BLOCK, combine, identity))


@pytest.mark.parametrize("dtype, compute, op", [  # complex products round as NumPy's do not
    *((d, c, op) for d, c in [(F32, F32), (F64, F64), (F16, F32), (BF16, F32), (F32, F64)]
      for op in Reduce), (C64, C64, Reduce.SUM)])
@pytest.mark.parametrize("shape, axes, lanes", [
    ((300, 8, 8), (1,), slice(None)),        # one walk axis, 8 contiguous lanes
    ((50, 4, 3, 16), (1, 2), slice(None)),   # two walk axes
    ((40, 16, 5), (1,), slice(None)),        # lanes narrower than a vector
    ((30, 9, 12), (1,), slice(None, None, 3)),  # strided lanes
    ((6, 3, 5, 64), (1, 2), slice(None)),    # wide lanes, two walk axes
    ((3, 5, 5000), (1,), slice(None)),       # lanes in two tiles (of _LANES)
    ((40, 300, 1), (2,), slice(None)),       # no walk: one term, over an axis of one
    ((37, 29, 8, 8), (2,), slice(None)),     # two outer axes: tasks end inside their runs
    ((29, 8, 37, 8), (1,), slice(None, 5)),  # ... the outer axes' strides not nested
])
def test_few_terms_combine_in_order(dtype, compute, op, shape, axes, lanes):
    """Outputs of at most one block of terms and no reduced row (a sum over axis 1 of
    (16384, 8, 8)) take the few-terms kernel, which combines each output's terms one
    after the other from op's identity, the walk in its order: bit for bit that order,
    which is the lane kernel's for one block; offsets step along the last outer axis,
    through tasks that start and end inside its runs."""
    a = values(np.random.default_rng(sum(shape)), shape, dtype)[..., lanes]
    free = [ax for ax in range(a.ndim) if ax not in axes]
    view = a.transpose(*free, *axes)
    out = np.full(view.shape[:len(free)], np.nan, compute)
    kw = dict(op=op, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
              unary_c=Unary.IDENTITY, compute=compute)
    call = cpu.reduce_call(out, view, **kw)
    assert call.kernel in reduction_lanes._FEW_TERMS and "combined in order" in call.about
    cpu.reduce(out, view, **kw)
    combine, identity = ROW_OPS[op]
    terms = view.astype(compute).reshape(out.shape + (-1,))
    want = np.full(out.shape, identity, compute)
    for k in range(terms.shape[-1]):
        want = combine(want, terms[..., k])
    np.testing.assert_array_equal(out, want)


def test_few_terms_up_to_one_block():
    """Sums of up to a block of walk steps (_RUN_BLOCK where they add in vector
    registers, else _BLOCK) take the few-terms kernel, in order; one step more leaves
    them to the lane kernel and its cascade."""
    kw = dict(op=Reduce.SUM, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
              unary_c=Unary.IDENTITY)
    run_block, few_terms, lanes = (reduction_lanes._RUN_BLOCK, reduction_lanes._FEW_TERMS,
                                   reduction_lanes._REDUCE)
    for dtype, compute, block in ((F64, F64, run_block), (F16, F32, run_block),
                                  (F32, F64, row_sums._BLOCK)):
        for steps, kernels in ((block, few_terms), (block + 1, lanes)):
            a = values(np.random.default_rng(steps), (10, steps, 24), dtype)
            out = np.empty((10, 24), compute)
            assert cpu.reduce_call(out, a.transpose(0, 2, 1), compute=compute,
                                   **kw).kernel in kernels, (dtype, steps)
            cpu.reduce(out, a.transpose(0, 2, 1), compute=compute, **kw)
            np.testing.assert_array_equal(
                out, cascade_sum(a.astype(compute).transpose(1, 0, 2), block))


def row_total_order(row, compute, op=Reduce.SUM):
    """The op-reduction of ``row`` in the order of row_sums._row_total: terms of _ROW_VECTORS
    vectors of lanes (real parts) on a cascade of blocks, the vectors pairwise, then with
    the leftover whole vectors, each vector's halves until one lane (two: real,
    imaginary) is left, the leftover elements combined last."""
    combine, identity = ROW_OPS[op]
    compute = np.dtype(compute)
    part = np.finfo(compute).dtype
    complex_row = row.dtype.kind == "c"
    flat = row.astype(compute if complex_row else part).view(part)
    parts = 2 if complex_row else 1
    width = row_sums._ROW_VECTORS * vectors._VECTOR_BITS // (8 * part.itemsize)
    terms = len(flat) // width
    lanes = (cascade_sum(flat[:terms * width].reshape(terms, width), row_sums._BLOCK, combine,
                         identity) if terms else np.full(width, identity, part))
    vs = np.split(lanes, row_sums._ROW_VECTORS)
    while len(vs) > 1:
        vs = [combine(vs[i], vs[i + 1]) for i in range(0, len(vs), 2)]
    size = width // row_sums._ROW_VECTORS
    done = terms * width + (len(flat) - terms * width) // size * size
    rest = np.full(size, identity, part)
    for at in range(terms * width, done, size):
        rest = combine(rest, flat[at:at + size])
    v = combine(vs[0], rest)
    while len(v) > parts:
        v = combine(v[:len(v) // 2], v[len(v) // 2:])
    tail = np.full(parts, identity, part)
    for at in range(done, len(flat), parts):
        tail = combine(tail, flat[at:at + parts])
    v = combine(v, tail)
    return compute.type(complex(*v) if compute.kind == "c" else v[0])


REAL_ROWS = [(F32, F32), (F64, F64), (F16, F32), (BF16, F32), (F32, F64)]


@pytest.mark.parametrize("dtype, compute, op", [
    *((d, c, Reduce.SUM) for d, c in REAL_ROWS + [(C64, C64), (C128, C128), (F32, C64)]),
    *((d, c, op) for d, c in REAL_ROWS for op in (Reduce.PRODUCT, Reduce.MIN, Reduce.MAX))])
def test_row_totals_keep_their_order(dtype, compute, op):
    """Contiguous rows reduced whole, two a call (lanes in vector registers, blocks on a
    cascade, one reduction of the lanes): bit for bit the order of
    :func:`row_total_order`, for rows shorter than a term, of whole and partial blocks
    and of cascades several levels deep (sums of terms of many magnitudes, products of
    terms near 1), at an offset; min and max see signed zeros and infinities everywhere
    and a NaN in some rows."""
    import numba

    totals = numba.njit(lambda res, w, x, off, step, n, mark, op: row_sums._row_totals(
        res, w, x, off, step, n, mark, op))
    part = np.finfo(np.dtype(compute)).dtype
    width = row_sums._ROW_VECTORS * vectors._VECTOR_BITS // (8 * part.itemsize)
    width //= 2 if dtype.kind == "c" else 1  # elements a term holds
    block = width * row_sums._BLOCK
    rng = np.random.default_rng(width)
    for n in (0, 1, width - 1, width, width + 3, block, block + width, 3 * block + 5,
              13 * block + 2 * width + 7):
        size = 2 * n + 5  # two rows of n, from 3 and n + 5
        if op is Reduce.SUM:
            row = values(rng, size, dtype) * np.exp(rng.uniform(-8, 8, size))
        elif op is Reduce.PRODUCT:
            row = 1 + rng.uniform(-0.01, 0.01, size)
        else:
            row = values(rng, size, F64)
            row[rng.integers(0, size, 8)] = [0.0, -0.0, np.inf, -np.inf] * 2
            if n % 2:
                row[rng.integers(3, size)] = np.nan
        row = row.astype(dtype)
        bits = row.view(np.uint16) if dtype.itemsize == 2 else row
        got = np.empty(2, compute)
        totals(got, 2, bits, 3, n + 2, n, lowlevel._FORMATS.get(dtype, 0), lowlevel._OPS[op])
        for t, start in enumerate((3, n + 5)):
            want = row_total_order(row[start:start + n], compute, op)
            both_nan = np.isnan(got[t]) and np.isnan(want)  # NaN payloads may differ
            assert both_nan or got[t].tobytes() == want.tobytes(), (n, t)


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
def test_sum_of_squares_in_the_row_order(dtype):
    """Contiguous real arrays (either order): one thread adds the exact float64 squares in
    the order of :func:`row_total_order`; threads add pieces of it, exactly rounded
    together; anything else is declined."""
    rng = np.random.default_rng(7)
    x = (values(rng, (37, 301), F64) * np.exp(rng.uniform(-5, 5, (37, 301)))).astype(dtype)
    squares = x.astype(F64).ravel() ** 2
    with cpu.one_thread():
        assert cpu.sum_of_squares(x) == row_total_order(squares, F64)
        assert cpu.sum_of_squares(np.asfortranarray(x)) == row_total_order(
            x.astype(F64).ravel(order="F") ** 2, F64)
    big = np.tile(x, (60, 1))  # past the threshold of threads
    assert threads._threads(big.size) > 1 or cpu.thread_count() == 1
    assert cpu.sum_of_squares(big) == pytest.approx(math.fsum(np.tile(squares, 60)), rel=1e-14)
    assert cpu.sum_of_squares(x[:, ::2]) is None
    assert cpu.sum_of_squares(x.astype(C64)) is None


def test_strided_sums_decline_what_they_do_not_serve():
    assert cpu.strided_sums(F64, 100, 4097, []) is None  # too few terms
    assert cpu.strided_sums(F64, 3000, 3001, []) is None  # one sum below 4096 lines
    assert cpu.strided_sums(F64, 4096, 4097, []) is not None  # ... on two
    assert cpu.strided_sums(F64, 4096, 4, []) is None  # terms share cache lines
    assert cpu.strided_sums(F64, 64, 4097, [(128, 64), (64, 1)]) is None  # too many sums
    assert cpu.strided_sums(C128, 4096, 4097, []) is None  # not a real float type


def test_serial_twins_compile_serial_for_every_signature_and_quietly(tmp_path):
    """The serial twin runs Numba's parfor passes with every transformation off (they
    propagate the copies that inlined helpers make of their arrays): no signature of it
    may become parallel (Numba empties an options dict when it reads it, so a second
    signature compiled with all of them on) or start the thread pool, compiled or loaded
    from the cache (the parfor pass leaves a hook that starts it on loading), and Numba's
    warning that parallel=True did nothing stays out of the user's sight."""
    import os
    import subprocess
    import sys

    script = (
        "import numpy as np, numba.np.ufunc.parallel as pool\n"
        "from tenalg.kernels.cpu import diagonal_sums\n"
        "twin = diagonal_sums._STRIDED_SUMS[1]\n"
        "for dtype in (np.float64, np.float32):\n"
        "    out = np.empty(1, dtype)\n"
        "    twin(np.ones(64, dtype), np.array([0, 8, 8, 1, 0, 1, 0, 0, 3]), 2, out)\n"
        "    assert out[0] == 8\n"
        "print(len(twin.overloads), len(twin.stats.cache_hits), pool._is_initialized)\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    for hits in ("0", "2"):  # compiled, then loaded
        run = subprocess.run([sys.executable, "-W", "error", "-c", script], env=env,
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.stdout.split() == ["2", hits, "False"]


def test_parallel_twin_never_loads_the_serial_one_from_the_cache(tmp_path):
    """Numba's disk cache keys a kernel by name and signature, not by ``parallel``: the
    serial twin is a copy under another name, so a cache filled by it (small problems
    come first in a test run) gives the parallel twin nothing to load."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, numpy as np\n"
        "from tenalg.kernels.cpu import diagonal_sums\n"
        "twin = diagonal_sums._STRIDED_SUMS[int(sys.argv[1])]\n"
        "out = np.empty(1)\n"
        "twin(np.ones(64), np.array([0, 8, 8, 1, 0, 1, 0, 0, 3]), 2, out)\n"
        "assert out[0] == 8\n"
        "print(len(twin.stats.cache_hits))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script, k], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for k in ("1", "0", "0")]
    assert runs == [["0"], ["0"], ["1"]]  # serial compiled; parallel compiled, then loaded
