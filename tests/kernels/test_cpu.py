"""The Numba CPU kernels against NumPy (the reference twins and math.fsum).

Layouts are drawn by hypothesis: random extents (0 and 1 included), axis orders, steps
(negative included), stride-0 broadcasts and synthetic diagonal views.  Arithmetic in the
same order as NumPy's must agree exactly; sums agree with math.fsum to a bound.
"""

import contextlib
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenalg.descriptors import Binary, Reduce, Unary
from tenalg.dtypes import compute_type
from tenalg.kernels import cpu, reference
from tenalg.layout import Loop

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
    (``cpu._STREAM_BYTES`` 0), as those of many megabytes do; ``stream`` False changes
    nothing."""
    saved = cpu._STREAM_BYTES
    cpu._STREAM_BYTES = 0 if stream else saved
    cpu._permute_call.cache_clear()
    try:
        yield
    finally:
        cpu._STREAM_BYTES = saved
        cpu._permute_call.cache_clear()


def empty_like_layout(draw, shape, dtype):
    """An output of ``shape`` in a random (non-overlapping) layout, filled with garbage."""
    out = draw(strided(shape, dtype, output=True))
    out[...] = np.asarray(np.nan).astype(dtype)
    return out


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


# --------------------------------------------------------------------------------------
# permutation


@SETTINGS
@given(st.data(), shapes, dtype_pairs, st.sampled_from(list(Unary)),
       st.sampled_from([1, 2, -0.5]), st.booleans())
def test_permute_matches_reference(data, shape, dtypes, unary, alpha, stream):
    a = data.draw(strided(shape, dtypes[0]))
    out = empty_like_layout(data.draw, shape, dtypes[1])
    want = np.empty(shape, dtypes[1])
    compute = compute_for(*dtypes)
    reference.permute(want, a, alpha=alpha, unary=unary, compute=compute)
    with streaming(stream):
        cpu.permute(out, a, alpha=alpha, unary=unary, compute=compute)
    assert_same(out, want, exact=unary in EXACT_UNARIES and dtypes[0].kind != "c")


@pytest.mark.parametrize("dtypes", [(F32, F32), (F64, F64), (C128, C128), (F16, F16),
                                    (F32, BF16), (F32, F16), (BF16, F64), (C64, C64)])
@pytest.mark.parametrize("axes", [(1, 0), (3, 1, 0, 2), (2, 0, 1)])
@pytest.mark.parametrize("unary", [Unary.NEGATE, Unary.IDENTITY])
@pytest.mark.parametrize("stream", [False, True])
def test_permute_tiles(dtypes, axes, unary, stream):
    """Scaled and converting permutations (tiles through a buffer, transposed by vector
    blocks): extents that are not multiples of the tile or the block, on both tiled axes."""
    shape = (70, 45, 3, 33)[: len(axes)]
    a = values(np.random.default_rng(0), shape, dtypes[0])
    view = a.transpose(axes)
    out = np.empty(view.shape, dtypes[1])
    compute = compute_for(*dtypes)
    with streaming(stream):
        cpu.permute(out, view, alpha=3, unary=unary, compute=compute)
    sign = -1 if unary is Unary.NEGATE else 1
    assert_same(out, (sign * 3 * view.astype(compute)).astype(dtypes[1]))


@pytest.mark.parametrize("dtypes", [(F32, F16), (F32, BF16), (F32, F32), (F64, F64),
                                    (F16, F32), (BF16, F32), (F16, F16), (BF16, BF16),
                                    (F16, BF16)])
@pytest.mark.parametrize("alpha", [1, -3, 1e-30])
def test_permute_scaled_in_registers_rounds_like_numpy(dtypes, alpha):
    """Tiles widened, scaled, transposed and converted in registers round as NumPy does:
    NaN, signed zeros, infinities, overflow to infinity, subnormal results, halfway cases;
    blocks and the partial blocks at the edges."""
    rng = np.random.default_rng(7)
    special = [np.nan, -0.0, 0.0, np.inf, -np.inf, 1e5, -7e4, 1e-6, -3e-8, 1 + 2**-11,
               1 + 3 * 2**-11, 1 + 2**-8, -1 - 3 * 2**-8, 2**-24, 1e38, 1e-40]  # ties: 16 bits
    with np.errstate(over="ignore"):  # 1e38 and 1e5 overflow 16 bits: infinities
        a = (values(rng, (37, 50), F64) * rng.choice([1e-5, 1.0, 1e4], (37, 50))).astype(
            dtypes[0])
        a.reshape(-1)[::7][: len(special)] = special
        out = np.empty((50, 37), dtypes[1])
        want = np.empty((50, 37), dtypes[1])
        compute = compute_for(*dtypes)
        reference.permute(want, a.T, alpha=alpha, unary=Unary.IDENTITY, compute=compute)
    cpu.permute(out, a.T, alpha=alpha, unary=Unary.IDENTITY, compute=compute)
    assert_same(out, want)
    assert np.array_equal(np.signbit(out.astype(F32)), np.signbit(want.astype(F32)))


@pytest.mark.parametrize("dtype", SAME)
@pytest.mark.parametrize("steps", [(1, 1), (1, -1), (2, 1), (-1, 3)])
@pytest.mark.parametrize("stream", [False, True])
def test_permute_plain_copy_blocks(dtype, steps, stream):
    """Plain copies move elements in k x k vector blocks where both fastest strides are 1: extents
    with partial blocks, reversed and strided axes, NaN and signed zeros kept."""
    a = values(np.random.default_rng(6), (45 * abs(steps[0]), 3, 70 * abs(steps[1])), dtype)
    a.reshape(-1)[:4] = np.asarray([np.nan, -0.0, np.inf, -np.inf]).astype(dtype)
    view = a[:: steps[0], :, :: steps[1]].transpose(2, 1, 0)
    out = np.empty(view.shape, dtype)
    with streaming(stream):
        cpu.permute(out, view, alpha=1, unary=Unary.IDENTITY, compute=compute_for(dtype))
    assert_same(out, view.copy())
    assert np.array_equal(np.signbit(out.real), np.signbit(view.real))


# (dtypes, unary, alpha, staged with AVX2, staged with AVX-512)
ALIASED_CASES = [
    ((F32, F32), Unary.IDENTITY, 1, True, False),  # 8 (16) float32 a block row: 32 (64) B
    ((F64, F64), Unary.IDENTITY, -3, True, False),
    ((F16, F16), Unary.IDENTITY, 1, True, True),  # 16 float16: 32 B
    ((C64, C64), Unary.IDENTITY, 1, True, False),
    ((F32, F16), Unary.IDENTITY, 2, True, True),  # in registers: 8 (16) float16
    ((F32, F32), Unary.NEGATE, 1, True, False),  # a buffer, then blocks
    ((C64, C64), Unary.CONJUGATE, 2, True, False),
    ((F32, BF16), Unary.NEGATE, 1, False, False),  # a buffer, converted row by row anyway
]


@pytest.mark.parametrize("dtypes, unary, alpha, avx2, avx512", ALIASED_CASES)
@pytest.mark.parametrize("stream", [False, True])
def test_permute_stages_rows_that_alias(dtypes, unary, alpha, avx2, avx512, stream):
    """Out's rows 32 KB apart: tiles whose blocks write less than a cache line of a row
    go through a buffer of out's rows (and say so); partial tiles and blocks included;
    the rows streamed from the buffer too."""
    a = values(np.random.default_rng(8), (3, 70, 45), dtypes[0])
    out = np.empty((3, 45, cpu._ALIASED // dtypes[1].itemsize), dtypes[1])[:, :, :70]
    with streaming(stream):
        about = permuted_like_reference(out, a.transpose(0, 2, 1), alpha, unary)
    staged = avx512 if cpu._VECTOR_BITS == 512 else avx2
    assert ("row by row (out's rows 32768 bytes apart)" in about) == staged, about


def permuted_like_reference(out, view, alpha, unary):
    """Permute ``view`` into ``out`` by the kernel, check it against the reference;
    what the kernel call says of itself."""
    compute = compute_for(view.dtype, out.dtype)
    call = cpu.permute_call(out, view, alpha=alpha, unary=unary, compute=compute)
    call.run((out, view), (alpha,))
    want = np.empty(view.shape, out.dtype)
    reference.permute(want, view, alpha=alpha, unary=unary, compute=compute)
    assert_same(out, want)
    return call.about


@pytest.mark.parametrize("dtypes, unary, alpha, avx2, avx512", ALIASED_CASES)
def test_permute_stages_tiles_along_the_axis_out_rows_go_on_along(dtypes, unary, alpha,
                                                                   avx2, avx512):
    """Staged tiles that span out's rows (of 64) where those rows go on along the next
    axis (37 positions) are staged that many at once, up to _STAGED_BYTES: runs of 4, 8
    or 16 tiles and a shorter last one; two tiles along q, the second partial."""
    a = values(np.random.default_rng(9), (37, 2, 64, 70), dtypes[0])
    rows = cpu._ALIASED // (64 * dtypes[1].itemsize)  # out's rows along q 64 KB apart
    out = np.empty((70, 2, rows, 64), dtypes[1])[:, :, :37]
    about = permuted_like_reference(out, a.transpose(3, 1, 0, 2), alpha, unary)
    runs = cpu._STAGED_BYTES // (64 * 64 * dtypes[1].itemsize)
    staged = avx512 if cpu._VECTOR_BITS == 512 else avx2
    assert (f"{runs} tiles along the next axis at once" in about) == staged, about


def test_permute_tile_groups():
    """A tile grid wider than one group of tiles, with partial groups at the edges."""
    a = values(np.random.default_rng(5), (1100, 9, 600), F32)
    out = np.empty((600, 9, 1100), F32)
    cpu.permute(out, a.transpose(2, 1, 0), alpha=1, unary=Unary.IDENTITY, compute=F32)
    assert_same(out, a.transpose(2, 1, 0))


def test_line_shift_starts_tiles_on_cache_lines():
    for item in (2, 4, 8, 16):
        for first in range(0, 256, item):
            shift = cpu._line_shift(first, item, 64)
            assert 0 <= shift < 64
            assert (first + (64 - shift) * item) % 64 == 0  # the second tile starts a line
    assert cpu._line_shift(3, 8, 64) == 0  # no element starts a line


@pytest.mark.parametrize("dtype, out_type, compute, alpha", [
    (F64, F64, F64, 1), (F32, F32, F32, 1), (F16, F16, F32, 1), (F32, F32, F32, 2),
    (F32, F16, F32, 2), (C128, C128, C128, 1)])
@pytest.mark.parametrize("start", [0, 1, 3, 5])
@pytest.mark.parametrize("stream", [False, True])
def test_permute_tiles_shift_onto_cache_lines(dtype, out_type, compute, alpha, start, stream):
    """Out's rows (long, their starts whole lines apart) that begin anywhere in a cache
    line: the tiles along them shift so that block rows start on lines, the first tile
    narrower; every element lands where it belongs and nothing around out is written,
    streamed (blocks of whole lines past the caches, the others through them, in the
    streaming tiles) or not."""
    a = values(np.random.default_rng(start), (600, 1037), dtype)
    item = np.dtype(out_type).itemsize
    width = 1280  # out's row stride: whole lines for every element size
    buf = np.full(start + 1037 * width + 64, np.nan, out_type)
    skew = (-buf.ctypes.data) % 64 // item  # buf[skew] starts a line
    at = skew + start
    out = np.lib.stride_tricks.as_strided(buf[at:], (1037, 600), (width * item, item))
    with streaming(stream):
        call = cpu.permute_call(out, a.T, alpha=alpha, unary=Unary.IDENTITY, compute=compute)
        call.run((out, a.T), (alpha,))
    assert call.static[2][5] == 1 and "onto cache lines" in call.about
    # each case moves blocks (plain, or in registers), whose rows are whole lines where
    # they hold 4 bytes an element or more in a vector of 512 bits
    streamed = stream and cpu._STREAMS and cpu._VECTOR_BITS == 512 and out_type.itemsize >= 4
    assert ("streamed past the caches" in call.about) == streamed, call.about
    tiles = cpu._STREAM_TILES if streamed else cpu._TILES
    assert call.about.startswith(f"tiles of {tiles[0]} x {tiles[1]}"), call.about
    want = (a.T.astype(np.complex128 if dtype.kind == "c" else np.float64) * alpha
            ).astype(out_type)
    assert_same(out, want)
    written = np.zeros(buf.size, bool)
    written[at + (np.arange(1037)[:, None] * width + np.arange(600)).ravel()] = True
    assert np.isnan(buf[~written].astype(np.complex128)).all()


@pytest.mark.skipif(not cpu._STREAMS, reason="streamed stores are x86's")
def test_permutations_of_many_megabytes_stream_past_the_caches():
    """From _STREAM_BYTES of out on, a transpose (tiles) and a permutation that keeps the
    rows (row tiles) stream out; one element fewer does not."""
    n = cpu._STREAM_BYTES // 8 // 1024
    a = values(np.random.default_rng(3), (n, 1024), F64)
    for view in (a.T, a.reshape(n // 2, 2, 1024).transpose(1, 0, 2)):
        for size, streamed in ((view.shape[0], True), (view.shape[0] - 1, False)):
            part = view[:size]
            out = np.empty(part.shape)
            call = cpu.permute_call(out, part, alpha=1, unary=Unary.IDENTITY, compute=F64)
            assert ("streamed past the caches" in call.about) == streamed, call.about
            call.run((out, part), (1,))
            assert_same(out, part)


@SETTINGS
@given(st.data(), st.lists(st.sampled_from([1, 2, 9, 23]), min_size=0, max_size=3),
       st.sampled_from([1, 2, 4, 16, 33, 130]), dtype_pairs,
       st.sampled_from([Unary.IDENTITY, Unary.NEGATE, Unary.SQRT, Unary.CONJUGATE]),
       st.sampled_from([1, -2]), st.sampled_from([1, 1, -1, 2]))
def test_permute_rows_match_reference(data, lead, n, dtypes, unary, alpha, step):
    """Permutations that keep the innermost axis (rows of n elements, the row-tile
    kernel): tile edges, merged axes, reversed and strided rows, conversions, streamed
    or not."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    base = values(rng, tuple(lead) + (n * abs(step),), dtypes[0])[..., ::step]
    order = data.draw(st.permutations(range(len(lead))))
    a = base.transpose(list(order) + [len(lead)])
    out = np.full(a.shape, np.nan, dtypes[1])
    want = np.empty(a.shape, dtypes[1])
    compute = compute_for(*dtypes)
    reference.permute(want, a, alpha=alpha, unary=unary, compute=compute)
    with streaming(data.draw(st.booleans())):
        cpu.permute(out, a, alpha=alpha, unary=unary, compute=compute)
    assert_same(out, want, exact=unary in EXACT_UNARIES and dtypes[0].kind != "c")


@pytest.mark.parametrize("dtype", SAME)
@pytest.mark.parametrize("stream", [0, 1])
def test_copy_run_moves_exactly_its_elements(dtype, stream):
    """A run of n elements moved as vectors, then units: the bits land at the offset, for
    runs shorter than a vector, of whole vectors and with a tail, starting anywhere in a
    cache line (streamed: units up to the line first); nothing else is written."""
    import numba

    copy = numba.njit(lambda out, o, a, s, n, stream: cpu._copy_run(out, o, a, s, n, stream))
    storage = np.uint16 if dtype in (F16, BF16) else dtype  # Numba sees 16-bit data as bits
    k = cpu._VECTOR_BITS // (8 * min(dtype.itemsize, 8))  # units a vector holds
    for n in (0, 1, k - 1, k, k + 1, 3 * k + 5):
        for o in range(0, 64 // dtype.itemsize + 1, max(1, 16 // dtype.itemsize)):
            a = values(np.random.default_rng(n), n + 9, dtype).view(storage)
            out = np.full(n + o + 4, 7, dtype).view(storage)
            copy(out, o, a, 5, n, stream)
            want = np.full(n + o + 4, 7, dtype).view(storage)
            want[o:o + n] = a[5:5 + n]
            assert want.tobytes() == out.tobytes(), (n, o)


def test_copy_run_streams_and_moves_misaligned_elements_exactly():
    """The compiled run holds stores past the caches (LLVM's nontemporal stores, taken
    where ``stream`` is set at run time); a streamed run whose elements do not start on
    their own size (float64 4 bytes past one) moves them through the caches, exactly."""
    import numba

    copy = numba.njit(lambda out, o, a, s, n, stream: cpu._copy_run(out, o, a, s, n, stream))
    a = np.arange(40.0)
    raw = np.zeros(8 * 42, np.uint8)
    at = (4 - raw.ctypes.data) % 8
    skewed = raw[at:at + 8 * 41].view(F64)
    assert skewed.ctypes.data % 8 == 4
    copy(skewed, 1, a, 0, 40, 1)
    assert np.array_equal(skewed[1:], a) and skewed[0] == 0
    llvm_ir = next(iter(copy.inspect_llvm().values()))
    assert "!nontemporal" in llvm_ir


def test_permute_rows_merge_axes():
    """Axes adjacent in both arrays merge; a's next axis q and out's next axis p go last
    before the row, tiles 8 rows along p (at least 256 bytes), 32 KB in all."""
    a = np.zeros((4, 5, 6, 7))
    view = a.transpose(2, 0, 1, 3)  # axes 0, 1 of a stay adjacent
    out = np.empty(view.shape)
    shape, offs, strides, tiles = cpu._row_tiles_prep(cpu._layout(out), cpu._layout(view))
    assert shape.tolist() == [6, 20, 7] and offs.tolist() == [0, 0]
    assert strides.tolist() == [[140, 7, 1], [7, 42, 1]]
    assert tiles.tolist() == [8, 6, 7]
    _, _, _, tiles = cpu._row_tiles_prep(*(cpu._layout(x) for x in (out, view.astype(F32))))
    assert tiles.tolist() == [8, 6, 7]  # sized by out's rows


@pytest.mark.parametrize("dtypes", [(F64, F64), (F16, F32), (F32, F16), (F64, BF16)])
def test_permute_long_rows_split_into_pieces(dtypes):
    """Rows longer than _ROW_PIECE are cut into pieces (so that threads share a single
    long row); every piece, the short last one included, lands where it belongs."""
    n = 2 * cpu._ROW_PIECE + 3
    a = np.random.default_rng(5).standard_normal((3, 2, n)).astype(dtypes[0])
    view = a.transpose(1, 0, 2)
    out, want = np.empty(view.shape, dtypes[1]), np.empty(view.shape, dtypes[1])
    *_, tiles = cpu._row_tiles_prep(cpu._layout(out), cpu._layout(view))
    assert tiles[2] == cpu._ROW_PIECE
    compute = np.dtype(F64 if F64 in dtypes else F32)
    cpu.permute(out, view, alpha=-2, unary="identity", compute=compute)
    reference.permute(want, view, alpha=-2, unary="identity", compute=compute)
    assert np.array_equal(out.view(np.uint8), want.view(np.uint8))


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
        dtype, shape = storage[k + 1], (5, cpu._ROW_PIECE + 1100)
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


def test_trinary_broadcast_row():
    rng = np.random.default_rng(2)
    a, c = values(rng, (300, 700), F32), values(rng, (300, 700), F32)
    b = np.broadcast_to(values(rng, (1, 700), F32), a.shape)
    out = np.empty_like(a)
    cpu.elementwise(out, (a, b, c), unaries=(Unary.IDENTITY,) * 3, op_ab=Binary.ADD,
                    op_abc=Binary.ADD, scalars=(2, 3, 0.5), compute=F32)
    assert_same(out, (np.float32(2) * a + np.float32(3) * b) + np.float32(0.5) * c)


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
    """Rows of many chunks (cpu._CHUNK elements each) over 2^17 elements, ending in a
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


def test_supports_small_problems_stay_on_reference():
    assert not cpu.supports("reduction", (F64, F64), 2, 64)
    assert cpu.supports("permutation", (F32, F32), 2, 1 << 22)
    assert not cpu.supports("contraction", (F32, F32, F32), 2, 1 << 22)


def test_supports_16_bit_data_that_numpy_would_convert_from_4096_elements():
    """NumPy converts float16 and bfloat16 5-20x slower than the kernels: sums and
    elementwise operations of 16-bit data, and permutations that convert it, take the
    kernels from 4096 elements; a permutation that moves 16-bit bits as they are does
    not (NumPy copies them as fast as any other)."""
    for d in (F16, BF16):
        assert cpu.supports("reduction", (d, d), 2, 1 << 12)
        assert not cpu.supports("reduction", (d, d), 2, (1 << 12) - 1)
        assert cpu.supports("elementwise_binary", (d, F32, F32), 2, 1 << 12)
        assert cpu.supports("permutation", (F32, d), 2, 1 << 12)
        assert not cpu.supports("permutation", (d, d), 2, 1 << 12)
    assert not cpu.supports("reduction", (F32, F32), 2, 1 << 12)


def test_supports_small_reductions_that_numpy_runs_in_many_inner_loops():
    """'iij->j' on (2048, 2048, 8): NumPy's inner loop (along the input's fastest loop)
    runs 2048 times; a sum of (32, 32, 32) over axis 1 1024 times, over axis 0 (j and k
    fused) 32 times, of (128, 128) over axis 1 128 times."""
    iij = [Loop(8, (1, 1), False, ("j",)), Loop(2048, (0, 16392), True, ("i",))]
    rows = [Loop(128, (1, 128), False, ("i",)), Loop(128, (0, 1), True, ("j",))]
    middle = [Loop(32, (32, 1024), False, ("i",)), Loop(32, (0, 32), True, ("j",)),
              Loop(32, (1, 1), False, ("k",))]
    first = [Loop(32, (0, 1024), True, ("i",)), Loop(1024, (1, 1), False, ("j", "k"))]
    assert cpu.supports("reduction", (F64, F64), 2, 1 << 14, loops=iij)
    assert cpu.supports("reduction", (F64, F64), 3, 1 << 15, loops=middle)
    assert not cpu.supports("reduction", (F64, F64), 2, 1 << 15, loops=first)
    assert not cpu.supports("reduction", (F64, F64), 2, 1 << 14, loops=rows)
    assert not cpu.supports("reduction", (F64, F64), 2, 64, loops=iij[:1])
    assert not cpu.supports("permutation", (F64, F64), 2, 1 << 14, loops=iij)


def test_supports_row_permutations_by_row_length():
    """Permutations that keep the innermost axis: NumPy copies rows whole, so the longer
    the rows the larger the problem must be (up to 2^18 elements)."""
    def rows(n, m=64):  # (m, m, n) -> axes (1, 0, 2)
        return [Loop(n, (1, 1), False, ("k",)), Loop(m, (n, m * n), False, ("j",)),
                Loop(m, (m * n, n), False, ("i",))]
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 15, loops=rows(4))
    assert not cpu.supports("permutation", (F64, F64), 3, 1 << 15, loops=rows(16))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 16, loops=rows(16))
    assert not cpu.supports("permutation", (F64, F64), 3, 1 << 17, loops=rows(512))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 18, loops=rows(512))
    transpose = [Loop(64, (1, 64), False, ("i",)), Loop(64, (64, 1), False, ("j",))]
    assert cpu.supports("permutation", (F64, F64), 2, 1 << 15, loops=transpose)


def test_supports_elementwise_rows_from_min_row():
    """The row kernel pays per row: elementwise work whose rows (out's fastest loop) are
    shorter than _MIN_ROW stays on NumPy at any size, longer rows take the kernels."""
    def rows(n, m=1 << 14):  # (m, n) + (m, 1)
        return [Loop(m, (n, n, 1), False, ("i",)), Loop(n, (1, 1, 0), False, ("j",))]
    f32 = (F32, F32, F32)
    assert not cpu.supports("elementwise_binary", f32, 2, 1 << 24,
                            loops=rows(cpu._MIN_ROW - 1))
    assert cpu.supports("elementwise_binary", f32, 2, 1 << 24, loops=rows(cpu._MIN_ROW))
    assert cpu.supports("elementwise_binary", f32, 1, 1 << 24, loops=rows(1 << 24, 1)[-1:])


def test_supports_permutations_with_small_tiles_from_two_threads_of_work():
    """Tiles smaller than 16 x 16 (out's fastest extent times a's), or narrower than a
    register block, cost more per element than NumPy's loop: those permutations need the
    work of two threads."""
    def tiles(n, outer=4096):  # (outer, n, n) -> axes (0, 2, 1)
        return [Loop(outer, (n * n, n * n), False, ("i",)), Loop(n, (1, n), False, ("k",)),
                Loop(n, (n, 1), False, ("j",))]
    assert not cpu.supports("permutation", (F64, F64), 3, (1 << 18) - 1, loops=tiles(15))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 18, loops=tiles(15))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 15, loops=tiles(16))
    # (64, 512, 2) -> axes (0, 2, 1): tiles of 512 x 2, narrower than a register block
    narrow = [Loop(64, (1024, 1024), False, ("i",)), Loop(512, (1, 2), False, ("k",)),
              Loop(2, (512, 1), False, ("j",))]
    assert not cpu.supports("permutation", (F64, F64), 3, 1 << 16, loops=narrow)
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 18, loops=narrow)


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
        assert cpu._threads(1 << 30) == 1  # the serial twins run
        1 / 0  # noqa: B018
    assert numba.get_num_threads() == before


@pytest.mark.parametrize("dtypes", [(d, d) for d in SAME] + MIXED)
@pytest.mark.parametrize("n", [cpu._LONG_ROW // 2, 3 * cpu._LONG_ROW + 77])
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
    layout = cpu._reduce_prep(cpu._layout(out), cpu._layout(c), cpu._layout(a), 2)
    assert layout[6] == 1 and layout[7].size == 0 and layout[5] == n  # the row-sum case
    compute = compute_for(*dtypes)
    kw = dict(op=Reduce.SUM, alpha=-2, beta=0.5, c=c, unary_a=Unary.IDENTITY,
              unary_c=Unary.IDENTITY, compute=compute)
    reference.reduce(want, a, **kw)
    assert cpu.reduce_call(out, a, **kw).kernel in cpu._ROW_TOTALS
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
    assert cpu._plane_split(cpu._layout(view), 2) is not None
    assert cpu._plane_split(cpu._layout(a.transpose(1, 3, 0, 2)), 2) is None  # lane inner
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
    a = values(np.random.default_rng(12), (37, 2 * cpu._LANES + 5), F32)
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
    layout = cpu._reduce_prep(cpu._layout(out), cpu._layout(out), cpu._layout(view), 2)
    assert layout[5] == 1 and layout[9] == 1  # no reduced row, every output in one part
    cpu.reduce(out, view, op=Reduce.SUM, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=dtype)
    terms = view.reshape(view.shape[:2] + (-1,)).transpose(2, 0, 1)
    np.testing.assert_array_equal(out, cascade_sum(terms, cpu._RUN_BLOCK))


@pytest.mark.parametrize("dtype, compute", [(F32, F32), (F64, F64), (F16, F32), (BF16, F32)])
@pytest.mark.parametrize("op", list(Reduce))
def test_reduce_strided_lanes_keep_the_cascade_order(dtype, compute, op):
    """Lanes that are not contiguous (a partial trace's, 3 elements apart here) combine
    each walk step's terms in order, _BLOCK steps a run on the pairwise cascade: bit for
    bit, whether the terms add as they load (sums, products) or through the buffer."""
    a = values(np.random.default_rng(5), (3, 70, 57, 4), dtype)
    view = a[:, :, ::3, 1].transpose(0, 2, 1)  # (outer, lanes 3 apart, walk of 70 steps)
    out = np.full(view.shape[:2], np.nan, compute)
    layout = cpu._reduce_prep(cpu._layout(out), cpu._layout(out), cpu._layout(view), 2)
    assert layout[5] == 1 and abs(layout[2][2, -1]) == 12  # no reduced row; lanes 3 apart
    cpu.reduce(out, view, op=op, alpha=1, beta=0, c=None, unary_a=Unary.IDENTITY,
               unary_c=Unary.IDENTITY, compute=compute)
    combine, identity = ROW_OPS[op]
    terms = view.astype(compute).transpose(2, 0, 1)
    np.testing.assert_array_equal(out, cascade_sum(terms, cpu._BLOCK, combine, identity))


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
    assert call.kernel in cpu._FEW_TERMS and "combined in order" in call.about
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
    for dtype, compute, block in ((F64, F64, cpu._RUN_BLOCK), (F16, F32, cpu._RUN_BLOCK),
                                  (F32, F64, cpu._BLOCK)):
        for steps, kernels in ((block, cpu._FEW_TERMS), (block + 1, cpu._REDUCE)):
            a = values(np.random.default_rng(steps), (10, steps, 24), dtype)
            out = np.empty((10, 24), compute)
            assert cpu.reduce_call(out, a.transpose(0, 2, 1), compute=compute,
                                   **kw).kernel in kernels, (dtype, steps)
            cpu.reduce(out, a.transpose(0, 2, 1), compute=compute, **kw)
            np.testing.assert_array_equal(
                out, cascade_sum(a.astype(compute).transpose(1, 0, 2), block))


def row_total_order(row, compute, op=Reduce.SUM):
    """The op-reduction of ``row`` in the order of cpu._row_total: terms of _ROW_VECTORS
    vectors of lanes (real parts) on a cascade of blocks, the vectors pairwise, then with
    the leftover whole vectors, each vector's halves until one lane (two: real,
    imaginary) is left, the leftover elements combined last."""
    combine, identity = ROW_OPS[op]
    compute = np.dtype(compute)
    part = np.finfo(compute).dtype
    complex_row = row.dtype.kind == "c"
    flat = row.astype(compute if complex_row else part).view(part)
    parts = 2 if complex_row else 1
    width = cpu._ROW_VECTORS * cpu._VECTOR_BITS // (8 * part.itemsize)
    terms = len(flat) // width
    lanes = (cascade_sum(flat[:terms * width].reshape(terms, width), cpu._BLOCK, combine,
                         identity) if terms else np.full(width, identity, part))
    vs = np.split(lanes, cpu._ROW_VECTORS)
    while len(vs) > 1:
        vs = [combine(vs[i], vs[i + 1]) for i in range(0, len(vs), 2)]
    size = width // cpu._ROW_VECTORS
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

    totals = numba.njit(lambda res, w, x, off, step, n, mark, op: cpu._row_totals(
        res, w, x, off, step, n, mark, op))
    part = np.finfo(np.dtype(compute)).dtype
    width = cpu._ROW_VECTORS * cpu._VECTOR_BITS // (8 * part.itemsize)
    width //= 2 if dtype.kind == "c" else 1  # elements a term holds
    block = width * cpu._BLOCK
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
        totals(got, 2, bits, 3, n + 2, n, cpu._FORMATS.get(dtype, 0), cpu._OPS[op])
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
    assert cpu._threads(big.size) > 1 or cpu.thread_count() == 1
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


def test_parallel_twin_never_loads_the_serial_one_from_the_cache(tmp_path):
    """Numba's disk cache keys a kernel by name and signature, not by ``parallel``: the
    serial twin is a copy under another name, so a cache filled by it (small problems
    come first in a test run) gives the parallel twin nothing to load."""
    import os
    import subprocess
    import sys

    script = (
        "import sys, numpy as np\n"
        "from tenalg.kernels import cpu\n"
        "twin = cpu._STRIDED_SUMS[int(sys.argv[1])]\n"
        "out = np.empty(1)\n"
        "twin(np.ones(64), np.array([0, 8, 8, 1, 0, 1, 0, 0, 3]), 2, out)\n"
        "assert out[0] == 8\n"
        "print(len(twin.stats.cache_hits))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script, k], env=env, capture_output=True,
                           text=True, check=True).stdout.split() for k in ("1", "0", "0")]
    assert runs == [["0"], ["0"], ["1"]]  # serial compiled; parallel compiled, then loaded


def test_thread_counter_follows_numba_settings():
    """The lock-free thread count reads the calling thread's numba setting, like
    numba.get_num_threads(), also inside one_thread()."""
    import numba

    count = cpu._thread_counter()
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
    flat = cpu._memory(x)
    offset, span, steps = cpu._geometry(*cpu._layout(x))
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
        flat = cpu._memory(x)
        assert flat.base is not None and np.shares_memory(flat, a)
        assert flat.tolist() == list(range(24))
    assert cpu._dense_order((2, 3), (8, 16), F64) == (1, 0)
    assert cpu._dense_order((2, 3), (-8, 16), F64) is None
    assert cpu._dense_order((2, 3), (8, 8), F64) is None  # overlapping
    assert cpu._dense_order((2, 3), (48, 16), F64) is None  # gaps
    order = cpu._dense_order((2, 1, 3), (24, 5, 8), F64)  # extent 1: its stride never moves
    assert sorted(order) == [0, 1, 2] and order.index(0) < order.index(2)
