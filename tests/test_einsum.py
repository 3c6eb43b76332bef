"""einsum and einsum_plan: NumPy's semantics, the seed's expressions, options, errors."""

import sys
import threading
import unittest.mock

import numpy as np
import opt_einsum
import pytest
from dense.strategies import DTYPES, strided, tolerance, values, wide
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta
from tenalg import blas
from tenalg.einsum import PLANS, einsum, einsum_plan, parse

SEED_EXPRESSIONS = [
    ("ik,kj->ij", [(2, 3), (3, 2)]),
    ("...ik,...kj->...ij", [(4, 2, 3), (4, 3, 5)]),
    ("...ik,...kj->...ij", [(4, 1, 2, 3), (5, 3, 2)]),
    ("abc,cde->abde", [(2, 3, 4), (4, 2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(3, 3)]),
    ("ii->", [(3, 3)]),
    ("ijk->ki", [(2, 3, 4)]),
    (",ij->ij", [(), (2, 3)]),
]


def _close(got, expected, dtype, scale):
    tol = tolerance(dtype)
    atol = 8 * tol * (np.max(scale, initial=0) + 1)
    np.testing.assert_allclose(wide(got), expected, rtol=8 * tol, atol=atol)


@pytest.mark.parametrize(("expr", "shapes"), SEED_EXPRESSIONS)
def test_seed_expressions(expr, shapes):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    got = einsum(expr, *arrays)
    expected = np.einsum(expr, *arrays)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_ellipsis_without_output_ellipsis_sums_it():
    """The seed's `...i->i`: the axes the ellipsis stands for are reduced."""
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_allclose(einsum("...i->i", a), a.sum(axis=(0, 1)))


@st.composite
def expressions(draw):
    """A NumPy-valid expression with operands: repeats, ellipses, broadcasting, implicit."""
    letters = draw(st.lists(st.sampled_from("abcdAB"), min_size=1, max_size=5, unique=True))
    extents = {m: draw(st.integers(0, 4) if draw(st.integers(0, 7)) == 0 else st.integers(1, 4))
               for m in letters}
    dots = draw(st.lists(st.integers(1, 3), max_size=2))
    n = draw(st.integers(1, 3))
    terms, shapes, any_dots = [], [], False
    for _ in range(n):
        term = draw(st.lists(st.sampled_from(letters), max_size=3))
        shape = [extents[m] for m in term]
        if dots and draw(st.booleans()):
            any_dots = True
            width = draw(st.integers(0, len(dots)))
            sub = [1 if draw(st.integers(0, 3)) == 0 else e for e in dots[len(dots) - width:]]
            at = draw(st.integers(0, len(term)))
            term, shape = term[:at] + ["..."] + term[at:], shape[:at] + sub + shape[at:]
        terms.append("".join(term))
        shapes.append(shape)
    expr = ",".join(terms)
    if draw(st.booleans()):
        used = sorted({m for t in terms for m in t if m != "."})
        out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
        out = list(out)
        if any_dots:
            out.insert(draw(st.integers(0, len(out))), "...")
        expr += "->" + "".join(out)
    spaced = draw(st.booleans())
    if spaced:
        expr = expr.replace(",", " , ")
    return expr, shapes


def own_steps():
    """Plans made in this context run their own steps however small: no one pass of
    NumPy's for their new arrays (see test_tiny_einsums_of_new_arrays_are_numpys_one_pass)."""
    return unittest.mock.patch.object(sys.modules["tenalg.einsum"], "ONE_PASS_POSITIONS", -1)


@settings(max_examples=60, deadline=None)
@given(case=expressions(), data=st.data())
def test_matches_numpy(case, data):
    expr, shapes = case
    dtype = data.draw(st.sampled_from(DTYPES))
    arrays = [data.draw(strided(s, dtype, allow_broadcast=True)) for s in shapes]
    expected = np.einsum(expr, *map(wide, arrays))
    scale = np.einsum(expr, *(np.abs(wide(x)) for x in arrays))
    optimize = data.draw(st.sampled_from(["auto", "greedy", "optimal", False]))
    how = data.draw(st.sampled_from(["K", "C", "out"]))
    if how == "out":
        out = data.draw(strided(expected.shape, dtype))
        got = einsum(expr, *arrays, optimize=optimize, out=out)
        assert got is out
    else:
        got = einsum(expr, *arrays, optimize=optimize, order=how)
        assert how == "K" or got.flags.c_contiguous or any(
            np.shares_memory(got, x) for x in arrays)
    assert got.shape == expected.shape
    assert got.dtype == np.dtype(dtype)
    _close(got, expected, dtype, scale)
    with own_steps():  # (which tiny einsums of new arrays pass over)
        planned = einsum_plan(expr, *arrays, optimize=optimize)(*arrays)
    _close(planned, expected, dtype, scale)


def test_single_operand_views():
    a = np.arange(27.0).reshape(3, 3, 3)
    for expr in ("ijk->kji", "iij->ij", "iii->i", "ijk", "...k->k..."):
        got = einsum(expr, a)
        assert np.shares_memory(got, a), expr
        np.testing.assert_array_equal(got, np.einsum(expr, a))
    assert not np.shares_memory(einsum("ijk->ij", a), a)
    # as NumPy's: a single-operand relabelling is a view whatever dtype= says
    view = einsum("ij->ji", a[0], dtype=np.float32)
    assert np.shares_memory(view, a) and view.dtype == np.float64
    assert not np.shares_memory(einsum("ij->ji", a[0], out=np.empty((3, 3))), a)
    assert "a view" in einsum_plan("ii->i", a[0]).explain()


@st.composite
def view_expressions(draw):
    """One operand's transpose and diagonals: each label kept once, in any order."""
    labels = draw(st.lists(st.sampled_from("ijk"), min_size=1, max_size=3, unique=True))
    extents = {m: draw(st.integers(1, 4)) for m in labels}
    repeats = draw(st.lists(st.sampled_from(labels), max_size=2))
    term = draw(st.permutations(labels + repeats))
    return "".join(term), "".join(draw(st.permutations(labels))), [extents[m] for m in term]


@settings(max_examples=40, deadline=None)
@given(case=view_expressions(), data=st.data())
def test_single_operand_views_are_numpys(case, data):
    """Transposes and diagonals of one operand come back as views with NumPy's einsum's
    strides, values and writeability: made by NumPy's own calls from a NumPy-made array,
    and by a bounds-checked strided view from an array that ``as_strided`` made."""
    term, out, shape = case
    x = data.draw(strided(shape, np.float64, allow_broadcast=True))
    expr = f"{term}->{out}"
    expected = np.einsum(expr, x)
    wrapped = np.lib.stride_tricks.as_strided(x, x.shape, x.strides, writeable=False)
    for source in (x, wrapped):
        got = einsum(expr, source)
        assert got.shape == expected.shape and got.strides == expected.strides, expr
        assert np.shares_memory(got, x)
        assert got.flags.writeable == source.flags.writeable
        np.testing.assert_array_equal(got, expected)


def test_interleaved_form():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    np.testing.assert_allclose(einsum(a, [0, 1], b, [1, 2], [0, 2]), a @ b)
    np.testing.assert_allclose(einsum(a, [0, 1], b, [1, 2]), a @ b)
    np.testing.assert_allclose(einsum(a, [Ellipsis, 1], b, [1, 27], [Ellipsis, 27]), a @ b)


def test_options_dtype_compute_out_order():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 4)).astype(np.float32)
    expected = wide(a) @ wide(b)
    assert einsum("ik,kj->ij", a, b, dtype=np.float64).dtype == np.float64
    got = einsum("ik,kj->ij", a, b, compute_dtype=np.float64)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    out = np.empty((4, 6), np.float64).T
    assert einsum("ik,kj->ij", a, b, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    c_order = einsum("ik,kj->ji", a, b, order="C")
    assert c_order.flags.c_contiguous
    np.testing.assert_allclose(c_order, expected.T, rtol=1e-5)
    out3 = np.empty((6, 4), np.float32)
    einsum("ij,jk,kl->il", a, b, np.eye(4, dtype=np.float32), out=out3)
    np.testing.assert_allclose(out3, expected, rtol=1e-5)
    with pytest.raises(ta.DTypeError):
        einsum("ij->", np.ones(2, np.float64).reshape(1, 2), compute_dtype=np.float32)
    # a narrower dtype= rounds the result to it, also on its way into out= (1 + 2^-30 is
    # 1 in float32: NumPy gives 3.0, the float64 sum 3.0000000028)
    v = np.full(3, 1 + 2.0**-30)
    for target in (np.zeros(()), np.zeros((), np.complex128)):
        einsum("i->", v, dtype=np.float32, casting="unsafe", out=target)
        assert target == np.einsum("i->", v, dtype=np.float32, casting="unsafe") == 3.0


@pytest.mark.parametrize("optimize", ["auto", "greedy", "optimal", "dp", True, False,
                                      [(0, 2), (0, 1)], ["einsum_path", (1, 2), (0, 1)],
                                      opt_einsum.paths.DynamicProgramming()])
def test_path_options(optimize):
    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(s) for s in ((10, 3), (3, 10), (10, 3)))
    plan = einsum_plan("ij,jk,kl->il", a, b, c, optimize=optimize)
    np.testing.assert_allclose(plan(a, b, c), a @ b @ c, rtol=1e-12)
    if isinstance(optimize, list):
        assert plan.path == [step for step in optimize if step != "einsum_path"]
    text = plan.explain()
    assert "path" in text and "FLOPs" in text and "bytes" in text
    assert "GEMM" in text or "sum of products" in text  # (a copied A times a vector: the sum)


def test_plan_takes_descriptors_and_caches():
    d = ta.TensorDescriptor.contiguous((3, 3), np.float64)
    plan = einsum_plan("ij,jk->ik", d, d)
    x = np.arange(9.0).reshape(3, 3)
    np.testing.assert_allclose(plan(x, x), x @ x)
    PLANS.clear()
    einsum("ij,jk->ik", x, x)
    einsum("ij,jk->ik", x + 1, x)
    assert len(PLANS) == 1
    einsum("ij,jk->ik", x.T, x)
    assert len(PLANS) == 2


def test_plan_cache_evicts_the_least_recently_used():
    from tenalg.einsum import PlanCache

    cache = PlanCache(maxsize=2)
    assert cache.get("a") is None
    assert cache.put("a", 1) == 1 and cache.put("b", 2) == 2
    assert cache.get("a") == 1  # "a" is now the most recent: "b" goes first
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert len(cache) == 2


def test_thread_safe_cache():
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((8, 8)) for _ in range(4)]
    expected = np.einsum("ij,jk->ik", arrays[0], arrays[1])
    errors = []

    def work():
        for _ in range(50):
            if not np.allclose(einsum("ij,jk->ik", arrays[0], arrays[1]), expected):
                errors.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_half_and_complex():
    rng = np.random.default_rng(7)
    for dtype in (np.float16, ta.bfloat16, np.complex64):
        a, b = values(rng, (8, 8), dtype), values(rng, (8, 8), dtype)
        got = einsum("ij,jk->ik", a, b)
        assert got.dtype == np.dtype(dtype)
        _close(got, wide(a) @ wide(b), dtype, np.abs(wide(a)) @ np.abs(wide(b)))


@pytest.mark.parametrize(
    ("expr", "position", "match"),
    [
        ("ij,jk->i%", 8, "invalid character"),
        ("i.j->ij", 1, "three dots"),
        ("...i...->i", 4, "at most one ellipsis"),
        ("ij->i->j", 5, "more than one"),
        ("ij->ii", 5, "appears twice"),
        ("ij->k", 4, "in no input"),
        ("ij>k", 2, "arrow"),
        ("ij->i,j", 5, "single term"),
    ],
)
def test_parse_errors_carry_position(expr, position, match):
    with pytest.raises(ta.ExpressionError, match=match) as info:
        parse(expr)
    assert info.value.position == position
    assert info.value.expression == expr


def test_binding_errors():
    a = np.ones((2, 3))
    with pytest.raises(ta.ExpressionError, match="rank 2") as info:
        einsum("ij,ijk->", a, a)
    assert info.value.position == 3
    with pytest.raises(ta.ExpressionError, match="label 'i' repeats") as info:
        einsum("ii->i", a)
    assert info.value.position == 1
    with pytest.raises(ta.InputCountError):
        einsum("ij,jk->ik", a)
    with pytest.raises(ta.ExtentError, match="'j'"):
        einsum("ij,jk->ik", a, a)
    with pytest.raises(ta.ExpressionError, match="label"):
        einsum(a, [0, 60])
    with pytest.raises(ta.ExpressionError):
        einsum(a, 5)
    with pytest.raises(ValueError, match="rank 0"):  # np.asarray("text") has rank 0
        einsum("ij->", "text")
    with pytest.raises(ta.OperationError, match="optimize"):
        einsum("ij->", a, optimize="fastest")
    with pytest.raises(ta.OperationError, match="optimize"):
        einsum("ij->", a, optimize=3)
    for bad in ([(0, 1)] * 3, [(0, 0)], [(0, 1, 2, 3)], [(0, 5)], [()], []):
        with pytest.raises(ta.OperationError, match="path"):
            einsum("ij,jk,kl->il", a, a.T, a, optimize=bad)
    with pytest.raises(ta.OperationError, match="order"):
        einsum("ij->", a, order="W")
    with pytest.raises(ta.OperationError, match="casting"):
        einsum("ij->", a, casting="same_value")
    with pytest.raises(ta.ExpressionError, match="must be a string"):
        parse(3)


def test_plan_execution_errors():
    a = np.ones((2, 3))
    plan = einsum_plan("ij,jk->ik", a, a.T)
    with pytest.raises(ta.InputCountError):
        plan(a)
    with pytest.raises(ta.InputMismatchError, match="operand 1"):
        plan(a, a.T.copy())
    with pytest.raises(ta.InputMismatchError, match="operand 1"):  # read as np.asarray
        plan(a, [[1.0]])
    with pytest.raises(ta.OutputMismatchError, match="extents"):
        plan(a, a.T, out=np.empty((3, 3)))
    with pytest.raises(ta.OutputMismatchError, match="read-only"):
        out = np.empty((2, 2))
        out.flags.writeable = False
        plan(a, a.T, out=out)
    square = np.ones((3, 3))
    square_plan = einsum_plan("ij,jk->ik", square, square)
    with pytest.raises(ta.AliasError):  # the plan layer never aliases (einsum copies)
        square_plan(square, square, out=square)
    # outs of a layout run before are checked again: aliasing every call, extents by layout
    fresh = square_plan(square, square, out=np.empty((3, 3)))
    np.testing.assert_array_equal(fresh, np.full((3, 3), 3.0))
    with pytest.raises(ta.AliasError):
        square_plan(square, square, out=square)
    out = np.zeros((2, 2))
    plan(a, a.T, out=out)
    with pytest.raises(ta.OutputMismatchError, match="extents"):
        plan(a, a.T, out=np.empty((2, 3)))
    np.testing.assert_array_equal(out, np.full((2, 2), 3.0))


def test_plans_keep_the_strict_out_rule_and_layouts_stay_in_their_buffers():
    """Found by a probe: a plan wrote a complex result into a real out (ComplexWarning),
    integer plans (NumPy's einsum) took an out aliasing an operand and raised NumPy's
    errors, and as_strided layouts past their buffer were read and written."""
    z = np.array([[1 + 2j, 0], [0, 3 - 1j]])
    for expr, operands in (("ij,jk->ik", (z, z)), ("ij->j", (z,))):
        plan = einsum_plan(expr, *operands)
        out = np.zeros(plan(*operands).shape)
        with pytest.raises(ta.OutputTypeError):
            plan(*operands, out=out)
        assert not out.any()
    a, b = np.arange(9).reshape(3, 3), 2 * np.eye(3, dtype=np.int64)
    plan = einsum_plan("ij,jk->ik", a, b)  # NumPy's einsum runs it, under the plan's rule
    with pytest.raises(ta.AliasError):
        plan(a, b, out=a)
    held = np.zeros((3, 3), np.int64)
    held.flags.writeable = False
    with pytest.raises(ta.OutputMismatchError, match="read-only"):
        plan(a, b, out=held)
    with pytest.raises(ta.OutputMismatchError, match="extents"):
        plan(a, b, out=np.zeros((3, 2), np.int64))
    with pytest.raises(ta.OutputTypeError):
        plan(a, b, out=np.zeros((3, 3), np.int8))
    np.testing.assert_array_equal(plan(a, b, out=np.zeros((3, 3), np.int64)), a @ b)
    host = np.zeros(64)
    outside = np.lib.stride_tricks.as_strided(  # 4 elements' buffer, reaching 28
        np.frombuffer(memoryview(host)[:4], np.float64), (4, 4), (64, 8))
    ones = np.ones((4, 4))
    for run in (lambda: einsum_plan("ij,jk->ik", ones, ones)(ones, ones, out=outside),
                lambda: einsum("ij,jk->ik", ones, ones, out=outside),
                lambda: einsum("ij,jk->ik", outside, ones),
                lambda: einsum("ij->", outside),
                lambda: einsum_plan("ij,jk->ik", outside, ones)(outside, ones)):
        with pytest.raises(ta.BoundsError):
            run()
    assert not host.any()


def test_descriptor_errors():
    raw = np.zeros(17, np.uint8)[1:].view(np.float64)  # misaligned is fine, odd strides are not
    odd = np.lib.stride_tricks.as_strided(np.zeros(8), (2,), (12,))
    with pytest.raises(ta.DescriptorError, match="multiple of the item size"):
        einsum_plan("i->", ta.TensorDescriptor.from_array(odd))
    assert einsum("i->", odd) == np.einsum("i->", odd)  # NumPy's fallback takes it
    assert einsum("i->", raw).item() == 0.0
    with pytest.raises(ta.ExpressionError, match="rank 0"):  # object() is a 0-d array
        einsum_plan("ij,ij->", ta.TensorDescriptor((2, 2), (2, 1), np.float64), object())


def test_views_are_writeable_as_numpys_and_in_bounds():
    a = np.arange(9.0).reshape(3, 3)
    view = einsum("ii->i", a)
    assert view.flags.writeable and view.base is a.base
    a.flags.writeable = False
    assert not einsum("ii->i", a).flags.writeable
    a.flags.writeable = True
    np.testing.assert_array_equal(view, [0.0, 4.0, 8.0])
    np.testing.assert_array_equal(einsum("ii->i", a[::-1, ::-1]), [8.0, 4.0, 0.0])


def test_python_scalars_promote_as_numpys():
    a = np.ones((2, 2), np.float32)
    for scalar in (2.0, 2j, np.float64(2), np.float32(2), -1.0):
        expected = np.einsum(",ij->ij", scalar, a)
        got = einsum(",ij->ij", scalar, a)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    assert einsum(",ij", -1.0, a).dtype == np.float64
    assert einsum(",->", 2.0, 3.0) == 6.0


def test_single_operand_into_out():
    x = np.arange(6.0).reshape(3, 2)
    out = np.empty((2, 3))
    assert einsum("ij->ji", x, out=out) is out
    np.testing.assert_array_equal(out, x.T)
    diag = np.empty(3)
    einsum("ii->i", np.arange(9.0).reshape(3, 3), out=diag)
    np.testing.assert_array_equal(diag, [0.0, 4.0, 8.0])


@settings(max_examples=40, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64, np.complex128]),
       expr=st.sampled_from(["ij,jk->ik", "ij,jk", "bij,bjk->bik", "ij,kj->ik", "ji,jk->ik",
                             "ij,jk->ki", "i,i->i", "ij,j->i"]))
def test_gemm_of_the_operands_alone_is_numpys_matmul(data, dtype, expr):
    """Where a product is np.matmul on the operands as they are, into what NumPy would
    allocate, einsum calls np.matmul bare: the same bits and layout as the general path."""
    terms = expr.split("->")[0].split(",")
    extents = {m: data.draw(st.integers(1, 6), label=m) for m in "bijk"}
    arrays = [data.draw(strided(tuple(extents[m] for m in t), dtype)) for t in terms]
    plan = einsum_plan(expr, *arrays)
    bare = (all(x.flags.c_contiguous for x in arrays) and min(extents.values()) > 1
            and expr in ("ij,jk->ik", "ij,jk", "bij,bjk->bik"))  # extent 1: folded away
    if bare:
        assert plan._new is np.matmul
    if plan._new is not np.matmul:
        return
    got = einsum(expr, *arrays)
    general = plan._run(arrays, np.empty_like(got))
    assert got.flags.c_contiguous and got.flags.owndata and got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, general)
    np.testing.assert_array_equal(got, np.matmul(*arrays))


def test_bare_matmul_only_where_it_is_the_whole_plan():
    a = np.ones((512, 512))
    # a product with the work to share among threads is tenalg.blas.matmul's (a new
    # C-ordered array too)
    assert einsum_plan("ij,jk->ik", a, a)._new is blas.matmul
    assert einsum("ij,jk->ik", a, a).flags.owndata  # a new array of its own, any size
    assert einsum_plan("ij,jk->ik", a[:32, :32], a[:32, :32], order="F")._new is None
    small = np.ones((8, 8))
    assert einsum_plan("ij,jk->ik", small, small)._new is np.matmul
    assert einsum_plan("ij,jk->ik", small, small.T)._new is np.matmul  # any strides
    wider = np.ones((32, 32))  # (above the tiny einsums that NumPy's one pass answers)
    assert einsum_plan("ij,jk->ki", wider, wider)._new is None  # not matmul's own layout
    assert einsum_plan("ij,jk->ik", wider, wider.astype(np.float32))._new is None  # a cast


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_tiny_einsums_of_new_arrays_are_numpys_one_pass(dtype):
    """Up to ONE_PASS_POSITIONS index positions, einsum() of a new array is np.einsum's
    own pass (its C loop answers in 1.5-3 us, the plan's steps took 2-6 us more): NumPy's
    values, type and scalar-ness; the plan itself, ``out=``, views, larger einsums, a
    bare GEMM call, dtype= and a backend registered before tenalg's keep their ways."""
    from tenalg import seam
    from tenalg.einsum import ONE_PASS_POSITIONS
    rng = np.random.default_rng(8)

    def arrays(*shapes):
        return [(rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(dtype)
                if np.dtype(dtype).kind == "c" else rng.standard_normal(s).astype(dtype)
                for s in shapes]

    for expr, shapes in (("lnr,n->lr", [(16, 4, 16), (4,)]), ("ij,ij->i", [(16, 16)] * 2),
                         ("ij,jk->ki", [(8, 8)] * 2), ("abc,bd,cd->a", [(8, 8, 8), (8, 8)] * 1
                                                       + [(8, 8)]), ("ijk->k", [(8, 8, 8)]),
                         ("ij,ij->", [(16, 16)] * 2)):
        ops = arrays(*shapes)
        plan = einsum_plan(expr, *ops)
        assert plan.one_pass is not None and "numpy.einsum's one pass" in plan.explain()
        got, expected = einsum(expr, *ops), np.einsum(expr, *ops)
        assert type(got) is type(expected) and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(plan(*ops), expected)
        tol = 50 * np.finfo(dtype).eps * (np.einsum(expr, *map(np.abs, ops)).max() + 1)
        with own_steps():
            own = einsum_plan(expr, *ops)
        assert own.one_pass is None
        np.testing.assert_allclose(own(*ops), expected, rtol=0, atol=tol)
        if expected.ndim:
            out = np.empty_like(expected)
            assert einsum(expr, *ops, out=out) is out
            np.testing.assert_allclose(out, expected, rtol=0, atol=tol)
    square = arrays((64, 64))[0]
    big = arrays(*[(64, ONE_PASS_POSITIONS // 64 + 1)] * 2)  # 64 positions too many
    declined = [einsum_plan("ij,ij->j", *big), einsum_plan("ij,jk->ik", *arrays((8, 8), (8, 8))),
                einsum_plan("ii->i", square[:8, :8]),
                einsum_plan("ij,jk->ki", *arrays((8, 8), (8, 8)), dtype=np.complex128)]
    assert all(plan.one_pass is None for plan in declined)

    class Ahead:  # a backend of someone else's asked first: it runs every step
        name = "ahead-of-tenalg"

        def supports(self, operation, kind):
            return False

        def prepare(self, operation, chosen=False):
            return None

    seam.register(Ahead(), first=True)
    try:
        assert einsum_plan("ij,ij->i", *arrays((16, 16), (16, 16))).one_pass is None
    finally:
        seam.unregister("ahead-of-tenalg")


def test_column_major_results_of_every_kind_of_last_step():
    """order='F' (and 'A' on column-major operands): the steps are planned for a
    column-major output; they had been planned for 'K' and run into one, which the
    elementwise product plan and 16-bit epilogues refused (OutputMismatchError; found by
    the probe of the product path)."""
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((2, 80, 60))
    x, y, s = np.arange(100.0), np.arange(70.0), rng.standard_normal((3, 4))
    cases = [("ij,ij->ij", (a, b), {}), ("i,j->ij", (x, y), {}), ("ij,jk->ik", (a, b.T), {}),
             ("ij,ij,ij->ij", (a, b, a), {}), ("ijk->kji", (rng.standard_normal((8, 9, 10)),), {}),
             ("ij,ij->ij", (s.astype(np.float16),) * 2, {}),
             ("ij,ij->ij", (s.astype(ta.bfloat16),) * 2, {}),
             ("ij,ij->ij", (s, s), {"dtype": np.float64})]
    for expr, ops, options in cases:
        wide = [o.astype(np.float64) for o in ops]
        expected = np.einsum(expr, *wide)
        for order in ("F", "A"):
            if order == "A" and not all(o.flags.f_contiguous for o in ops):
                continue
            for got in (einsum(expr, *ops, order=order, **options),
                        einsum_plan(expr, *ops, order=order, **options)(*ops)):
                assert got.flags.f_contiguous and got.dtype == ops[0].dtype
                scale = np.einsum(expr, *map(np.abs, wide)).max()
                np.testing.assert_allclose(got.astype(np.float64), expected, rtol=0,
                                           atol=scale * (1e-2 if ops[0].itemsize == 2 else 1e-13))


@pytest.mark.parametrize("expr", ["ij->", "ij->j", "ij,jk->ik", "ii->i", "ij->ji"])
def test_numpys_one_pass_is_called_bare_for_a_new_result(expr):
    """Integer operands NumPy sums in one pass: einsum() calls that pass itself, with
    np.einsum's result, type and scalar-ness."""
    rng = np.random.default_rng(5)
    arrays = [rng.integers(-9, 9, (4, 4)) for _ in expr.split("->")[0].split(",")]
    plan = einsum_plan(expr, *arrays)
    view = expr in ("ii->i", "ij->ji")  # NumPy returns views there: tenalg too, not this call
    assert (plan._new is None) == view and (view or plan._new is plan.numpy.call)
    got, expected = einsum(expr, *arrays), np.einsum(expr, *arrays)
    assert type(got) is type(expected) and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_explain_writes_ellipsis_axes_and_long_labels_readably():
    """explain() printed einsum's internal ('...', 0) labels, and ran labels of several
    characters together ('rowcol:12')."""
    text = einsum_plan("...i,...i->...", np.ones((2, 3, 4)), np.ones((3, 4))).explain()
    assert "'...'" not in text and "...0 i * ...0 i" in text
    x = np.ones((3, 4))
    op = ta.Operation.permutation(ta.Operand(x, ["row", "col"]), out_modes=["col", "row"])
    text = ta.Plan(op).explain()
    assert "modes row col extents" in text and "rowcol" not in text
    assert repr(op).startswith("Operation.permutation(row col -> col row")


class _ArrayLike:
    """Not an ndarray, but np.asarray reads it (as it reads a torch tensor)."""

    def __init__(self, data):
        self.data = np.asarray(data)

    def __array__(self, dtype=None, copy=None):
        return self.data


def test_a_plan_made_from_array_likes_takes_them():
    """einsum_plan read torch tensors when made and refused them when called (found by
    a probe); they are read as np.asarray reads them, as ta.einsum reads them."""
    a, b = np.arange(12.0).reshape(3, 4), np.ones((4, 2))
    plan = einsum_plan("ij,jk->ik", _ArrayLike(a), _ArrayLike(b))
    np.testing.assert_array_equal(plan(_ArrayLike(a), _ArrayLike(b)), a @ b)
    np.testing.assert_array_equal(plan(a.tolist(), b), a @ b)
    with pytest.raises(ta.InputMismatchError, match="operand 0"):
        plan(_ArrayLike(a[:, :3]), b)


@pytest.mark.parametrize("ones", [50, 61])
def test_batched_dots_of_more_than_52_labels(ones):
    """The direct path of batched dots numbered its np.einsum labels over every mode of
    the operation, so 53 modes (most of extent 1) failed inside NumPy ('subscript is not
    within the valid range'; found by a probe of NumPy's inputs)."""
    shape = (2,) + (1,) * ones + (3, 4)
    labels = "".join(opt_einsum.get_symbol(k) for k in range(len(shape)))
    a = np.random.default_rng(0).random(shape)
    np.testing.assert_allclose(ta.einsum(f"{labels},{labels}->{labels[0]}", a, a),
                               (a.reshape(2, -1) ** 2).sum(1))


def test_a_broadcast_operand_is_not_copied():
    """A zero-stride axis whose mode only that operand has and the output keeps was
    copied whole for the GEMM: ij,j->i of np.broadcast_to(v, (2^16, 2^16)) asked for 32
    GiB, where NumPy's einsum reads the zero stride (found by a probe of NumPy's inputs).
    The product is computed once and broadcast along the mode."""
    import tracemalloc

    rng = np.random.default_rng(0)
    v, w = rng.standard_normal(2048), rng.standard_normal(2048)
    a = np.broadcast_to(v, (2048, 2048))
    tracemalloc.start()
    try:
        got = ta.einsum("ij,j->i", a, w)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, np.full(2048, v @ w))
    assert peak < 1 << 20  # the copy: 32 MiB
    b = rng.standard_normal((5, 7)) + 1j * rng.standard_normal((5, 7))
    x = np.broadcast_to(rng.standard_normal((1, 7)) + 1j, (6, 7))
    for expr, operands in (("ij,kj->ik", (x, b)), ("ij,kj->ki", (x, b)),
                           ("kj,ij->ik", (b, x)), ("ij,kj->ikj", (x, b)),
                           ("ij,k->ijk", (x, v[:3]))):
        np.testing.assert_allclose(ta.einsum(expr, *operands), np.einsum(expr, *operands))
    c = rng.standard_normal((6, 5))
    np.testing.assert_allclose(
        ta.contract(x, "ij", b, "kj", "ik", alpha=2, c=c, beta=3, unary_a="conjugate"),
        2 * np.einsum("ij,kj->ik", x.conj(), b) + 3 * c)


def test_full_reductions_take_every_optimizer_tenalg_takes():
    """optimize='dp', 'branch-all', an opt_einsum PathOptimizer or a plain path reached
    np.einsum_path (which takes none of them) for a full reduction of three operands,
    and raised (found by a probe of the docs). Such options give tenalg's default type,
    a NumPy scalar; NumPy's own options give what NumPy gives."""
    rng = np.random.default_rng(0)
    a, b, c = rng.random((3, 4)), rng.random((4, 5)), rng.random((5, 3))
    want = np.einsum("ij,jk,ki->", a, b, c)
    for optimize in ("dp", "branch-all", opt_einsum.DynamicProgramming(), [(0, 1), (0, 1)]):
        got = ta.einsum("ij,jk,ki->", a, b, c, optimize=optimize)
        assert type(got) is np.float64 and np.isclose(got, want)
    for optimize in ("greedy", ["einsum_path", (0, 1), (0, 1)]):
        got, numpy = (f("ij,jk,ki->", a, b, c, optimize=optimize) for f in (ta.einsum, np.einsum))
        assert type(got) is type(numpy) and np.isclose(got, want)


def test_paths_with_steps_of_three_or_more_operands():
    """NumPy's and opt_einsum's paths may contract several operands in one step; tenalg
    runs such a step as pairwise steps in the order given (it had refused them)."""
    rng = np.random.default_rng(3)
    a, b, c, d = (rng.standard_normal(s) for s in ((3,), (4,), (3, 4), (4, 5)))
    path, _ = np.einsum_path("a,b,ab->ab", a, b, c, optimize="greedy")
    assert path == ["einsum_path", (0, 1, 2)]
    np.testing.assert_allclose(einsum("a,b,ab->ab", a, b, c, optimize=path),
                               a[:, None] * b * c)
    expected = np.einsum("a,b,ab,bc->c", a, b, c, d)
    for path in ([(3, 0, 1), (0, 1)], [(2, 1, 0, 3)], [(1, 3), (2, 1, 0)],
                 ["einsum_path", (0, 2, 3), (0, 1)]):
        np.testing.assert_allclose(einsum("a,b,ab,bc->c", a, b, c, d, optimize=path), expected)
        plan = ta.einsum_plan("a,b,ab,bc->c", a, b, c, d, optimize=path)
        np.testing.assert_allclose(plan(a, b, c, d), expected)


def test_spaces_and_unicode_whitespace_labels():
    """NumPy skips ' ' and refuses other ASCII whitespace; a non-ASCII character is a
    label even where str.isspace() says it is a space (opt_einsum.get_symbol(8052) is
    U+2000: tenalg had skipped it, an error or a silently different sum)."""
    x, y, v = np.ones((2, 3)), np.ones((3, 4)), np.arange(3.0)
    for k in (5620, 8052, 12148):
        s = opt_einsum.get_symbol(k)
        assert s.isspace()
        np.testing.assert_array_equal(einsum(f"a{s},{s}b->ab", x, y), x @ y)
        assert einsum(f"...{s}->...", v) == opt_einsum.contract(f"...{s}->...", v) == 3.0
    np.testing.assert_array_equal(einsum(" i j , jk -> ik ", x, y), x @ y)
    for bad in ("i\tj->ij", "i\nj->ij"):
        with pytest.raises(ta.ExpressionError, match="invalid character"):
            einsum(bad, x)
        with pytest.raises(ValueError):
            np.einsum(bad, x)


def test_the_plan_caches_hold_a_sweep_over_hundreds_of_layouts(monkeypatch):
    """A loop over 600 layouts (a sweep over many bond shapes) plans each once: the
    einsum cache held 256 plans and the front ends' 512 layouts, so such a loop planned
    on every call (40-150x NumPy's time)."""
    import sys

    module, calls = sys.modules["tenalg.einsum"], sys.modules["tenalg.calls"]
    pairs = [(np.ones((2 + k % 30, 2 + k // 30)), np.ones((2 + k // 30, 3))) for k in range(600)]
    plans, front = [], []
    module.PLANS.clear()  # (the front ends' cache is emptied when full: others' entries
    calls.CALLS.clear()   # could empty it midway)
    for x, y in pairs:
        einsum("ij,jk->ik", x, y)
        ta.sum(x, axis=0)
    made = module.EinsumPlan
    monkeypatch.setattr(module, "EinsumPlan", lambda *a, **k: plans.append(1) or made(*a, **k))
    planned = calls._plan_for_layouts
    monkeypatch.setattr(calls, "_plan_for_layouts",
                        lambda *a, **k: front.append(1) or planned(*a, **k))
    for x, y in pairs:
        np.testing.assert_array_equal(einsum("ij,jk->ik", x, y), x @ y)
        np.testing.assert_array_equal(ta.sum(x, axis=0), x.sum(axis=0))
    assert plans == [] and front == []
