"""The CPU permutation kernels (tiles, row tiles, streamed stores) against the reference."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenalg.descriptors import Unary
from tenalg.kernels import cpu, reference
from tenalg.kernels.cpu import (
    calls,
    lowlevel,
    permutation,
    permutation_rows,
    permutation_tiles,
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
    SAME,
    SETTINGS,
    assert_same,
    compute_for,
    dtype_pairs,
    empty_like_layout,
    shapes,
    streaming,
    strided,
    values,
)

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
    out = np.empty((3, 45, permutation_tiles._ALIASED // dtypes[1].itemsize), dtypes[1])[:, :, :70]
    with streaming(stream):
        about = permuted_like_reference(out, a.transpose(0, 2, 1), alpha, unary)
    staged = avx512 if vectors._VECTOR_BITS == 512 else avx2
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
    rows = permutation_tiles._ALIASED // (64 * dtypes[1].itemsize)  # out's rows along q 64 KB apart
    out = np.empty((70, 2, rows, 64), dtypes[1])[:, :, :37]
    about = permuted_like_reference(out, a.transpose(3, 1, 0, 2), alpha, unary)
    runs = permutation_tiles._STAGED_BYTES // (64 * 64 * dtypes[1].itemsize)
    staged = avx512 if vectors._VECTOR_BITS == 512 else avx2
    assert (f"{runs} tiles along the next axis at once" in about) == staged, about


@pytest.mark.parametrize("dtypes", [(F64, F64), (F32, F16), (BF16, F32), (C128, C128)])
@pytest.mark.parametrize("unary, alpha", [(Unary.IDENTITY, 1), (Unary.NEGATE, 3)])
@pytest.mark.parametrize("tile, axes", [((2, 2), (0, 2, 1)), ((3, 5), (0, 2, 1)),
                                        ((8, 8), (0, 2, 1)), ((2, 3), (2, 1, 0))])
def test_permute_small_tiles_taken_many_along_the_next_axis(dtypes, unary, alpha, tile,
                                                           axes):
    """Tiles smaller than _SMALL_TILE elements at 1001 positions of the axis before them
    (not a multiple of the run, an odd step, a negative one) are taken in runs along it,
    element by element below whole 8 x 8 blocks, scaled and converted on the way."""
    shape = (1001, *tile) if axes == (0, 2, 1) else (tile[0], 1001, tile[1])
    a = values(np.random.default_rng(13), (shape[0] * 2, *shape[1:]), dtypes[0])[::-2]
    view = a.transpose(axes)
    about = permuted_like_reference(np.empty(view.shape, dtypes[1]), view, alpha, unary)
    runs = permutation._SMALL_TILE // (tile[0] * tile[1])
    assert f"{runs} tiles along the next axis at once" in about, about


@pytest.mark.parametrize("dtypes", [(F64, F64), (F32, F16), (C128, C128)])
@pytest.mark.parametrize("unary, alpha", [(Unary.IDENTITY, 1), (Unary.NEGATE, 3)])
@pytest.mark.parametrize("stream", [False, True])
def test_permute_small_row_tiles_taken_at_many_outer_positions(dtypes, unary, alpha,
                                                               stream):
    """Row tiles (rows of 5 in 2 x 3 tiles) smaller than _SMALL_TILE elements are taken at
    runs of outer positions (2 x 1001 of them, merged into one odd count; reversed), the
    last run shorter; plain, scaled and converting, streamed or not.  (Scaled into
    float16 the kernel rounds the exact product once, the reference through float32:
    three of these 60060 elements differ by an ulp, so conversions compare to one.)"""
    a = values(np.random.default_rng(17), (2, 2002, 3, 2, 5), dtypes[0])[:, ::-2]
    view = a.transpose(0, 1, 3, 2, 4)
    out, want = np.empty(view.shape, dtypes[1]), np.empty(view.shape, dtypes[1])
    compute = compute_for(*dtypes)
    with streaming(stream):
        call = cpu.permute_call(out, view, alpha=alpha, unary=unary, compute=compute)
        call.run((out, view), (alpha,))
    reference.permute(want, view, alpha=alpha, unary=unary, compute=compute)
    assert_same(out, want, exact=dtypes[0] == dtypes[1])
    assert "tiles along the outer axes at once" in call.about, call.about


def test_permute_tile_groups():
    """A tile grid wider than one group of tiles, with partial groups at the edges."""
    a = values(np.random.default_rng(5), (1100, 9, 600), F32)
    out = np.empty((600, 9, 1100), F32)
    cpu.permute(out, a.transpose(2, 1, 0), alpha=1, unary=Unary.IDENTITY, compute=F32)
    assert_same(out, a.transpose(2, 1, 0))


def test_line_shift_starts_tiles_on_cache_lines():
    for item in (2, 4, 8, 16):
        for first in range(0, 256, item):
            shift = permutation_tiles._line_shift(first, item, 64)
            assert 0 <= shift < 64
            assert (first + (64 - shift) * item) % 64 == 0  # the second tile starts a line
    assert permutation_tiles._line_shift(3, 8, 64) == 0  # no element starts a line


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
    streamed = (stream and lowlevel._STREAMS and vectors._VECTOR_BITS == 512
                and out_type.itemsize >= 4)
    assert ("streamed past the caches" in call.about) == streamed, call.about
    tiles = permutation_tiles._STREAM_TILES if streamed else permutation_tiles._TILES
    assert call.about.startswith(f"tiles of {tiles[0]} x {tiles[1]}"), call.about
    want = (a.T.astype(np.complex128 if dtype.kind == "c" else np.float64) * alpha
            ).astype(out_type)
    assert_same(out, want)
    written = np.zeros(buf.size, bool)
    written[at + (np.arange(1037)[:, None] * width + np.arange(600)).ravel()] = True
    assert np.isnan(buf[~written].astype(np.complex128)).all()


@pytest.mark.skipif(not lowlevel._STREAMS, reason="streamed stores are x86's")
def test_permutations_of_many_megabytes_stream_past_the_caches():
    """From _STREAM_BYTES of out on, a transpose (tiles) and a permutation that keeps the
    rows (row tiles) stream out; one element fewer does not. Out's rows are _ALIASED
    bytes apart: with 256-bit vectors a transpose's blocks write half a cache line and
    stream only from rows staged in a buffer, which such rows are (with 512-bit
    vectors, whole lines)."""
    m = permutation_tiles._ALIASED // 8
    n = permutation._STREAM_BYTES // 8 // m
    a = values(np.random.default_rng(3), (m, n), F64)
    for view in (a.T, a.reshape(m // 2, 2, n).transpose(1, 0, 2)):
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

    copy_run = permutation_rows._copy_run
    copy = numba.njit(lambda out, o, a, s, n, stream: copy_run(out, o, a, s, n, stream))
    storage = np.uint16 if dtype in (F16, BF16) else dtype  # Numba sees 16-bit data as bits
    k = vectors._VECTOR_BITS // (8 * min(dtype.itemsize, 8))  # units a vector holds
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

    copy_run = permutation_rows._copy_run
    copy = numba.njit(lambda out, o, a, s, n, stream: copy_run(out, o, a, s, n, stream))
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
    shape, offs, strides, tiles = permutation._row_tiles_prep(calls._layout(out),
                                                              calls._layout(view))
    assert shape.tolist() == [6, 20, 7] and offs.tolist() == [0, 0]
    assert strides.tolist() == [[140, 7, 1], [7, 42, 1]]
    assert tiles.tolist() == [8, 6, 7]
    _, _, _, tiles = permutation._row_tiles_prep(
        *(calls._layout(x) for x in (out, view.astype(F32))))
    assert tiles.tolist() == [8, 6, 7]  # sized by out's rows


@pytest.mark.parametrize("dtypes", [(F64, F64), (F16, F32), (F32, F16), (F64, BF16)])
def test_permute_long_rows_split_into_pieces(dtypes):
    """Rows longer than _ROW_PIECE are cut into pieces (so that threads share a single
    long row); every piece, the short last one included, lands where it belongs."""
    n = 2 * lowlevel._ROW_PIECE + 3
    a = np.random.default_rng(5).standard_normal((3, 2, n)).astype(dtypes[0])
    view = a.transpose(1, 0, 2)
    out, want = np.empty(view.shape, dtypes[1]), np.empty(view.shape, dtypes[1])
    *_, tiles = permutation._row_tiles_prep(calls._layout(out), calls._layout(view))
    assert tiles[2] == lowlevel._ROW_PIECE
    compute = np.dtype(F64 if F64 in dtypes else F32)
    cpu.permute(out, view, alpha=-2, unary="identity", compute=compute)
    reference.permute(want, view, alpha=-2, unary="identity", compute=compute)
    assert np.array_equal(out.view(np.uint8), want.view(np.uint8))


def _at_8_past_16(shape, dtype=np.complex128):
    """A complex128 array whose data start 8 bytes past a multiple of 16: aligned, for
    NumPy (complex128's alignment is 8)."""
    size = int(np.prod(shape))
    raw = np.zeros(2 * size + 4)
    start = (-raw.ctypes.data % 16) // 8 + 1
    x = raw[start:start + 2 * size].view(dtype).reshape(shape)
    assert x.flags.aligned and x.ctypes.data % 16 == 8
    return x


def test_complex128_tiles_at_8_bytes_past_16():
    """The tile kernel declared complex128's 16-byte loads and stores aligned to 16: the
    process died (SIGSEGV) permuting such an array, into a new array, into one such as
    out, and inside einsum (found by a probe of NumPy's inputs)."""
    import tenalg as ta

    a = _at_8_past_16((256, 384))
    a[...] = np.arange(a.size).reshape(a.shape) * (1 - 2j)
    np.testing.assert_array_equal(ta.permute(a), a.T)
    out = _at_8_past_16((384, 256))
    ta.permute(a, (1, 0), out=out)
    np.testing.assert_array_equal(out, a.T)
    v = np.arange(384.0)
    np.testing.assert_allclose(ta.einsum("ij,j->ji", a, v), (a * v).T)
