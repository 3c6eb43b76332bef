"""ta.einsum as np.einsum's drop-in: dtypes, array-likes, keywords, casting, out=, result
types, views, labels beyond NumPy's 52 - each compared with np.einsum itself."""

import json

import numpy as np
import opt_einsum
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_einsum import expressions

import tenalg as ta
from tenalg import OutputTypeError
from tenalg.einsum import einsum, einsum_plan

FALLBACK_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                   np.uint64, np.bool_, np.longdouble, np.clongdouble, object]
EXPRESSIONS = ["ij,jk->ik", "ij,jk", "ii->", "ij->i", "i,i->", "ijk,jl->kil", "...ij,...j",
               "ij,jk,kl->il", "ii->i", "ij->ji", ",ij->ij"]
SHAPES = {"ij,jk->ik": [(3, 4), (4, 5)], "ij,jk": [(3, 4), (4, 5)], "ii->": [(4, 4)],
          "ij->i": [(3, 4)], "i,i->": [(5,), (5,)], "ijk,jl->kil": [(2, 3, 4), (3, 5)],
          "...ij,...j": [(2, 3, 4), (4,)], "ij,jk,kl->il": [(2, 3), (3, 4), (4, 2)],
          "ii->i": [(3, 3)], "ij->ji": [(2, 3)], ",ij->ij": [(), (2, 3)]}


def _operands(expr, dtype, rng):
    arrays = [rng.integers(-100, 100, size=s) for s in SHAPES[expr]]
    if np.dtype(dtype).kind == "u":
        arrays = [np.abs(a) for a in arrays]
    return [a.astype(dtype) for a in arrays]


def _same(got, expected):
    assert type(got) is type(expected)
    if isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", FALLBACK_DTYPES)
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_every_numpy_dtype_gives_numpys_exact_result(expr, dtype):
    """Integer arithmetic wraps around exactly as NumPy's (int8 products of +-100 do)."""
    operands = _operands(expr, dtype, np.random.default_rng(len(expr)))
    _same(einsum(expr, *operands), np.einsum(expr, *operands))


def test_zero_d_objects():
    a = np.array(2, dtype=object)
    assert einsum(",,", a, a, a) == 8 and einsum(",,->", a, a, a, optimize="greedy") == 8


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, object])
def test_fallback_is_chosen_at_planning_and_explained(dtype):
    a = np.ones((3, 3), dtype)
    plan = einsum_plan("ij,jk,kl->il", a, a, a)
    text = plan.explain()
    assert "numpy.einsum" in text and "no tenalg kernel" in text
    # three operands: NumPy runs tenalg's path pairwise (objects loop once: NumPy's
    # pairwise path fails on a 0-d object intermediate)
    assert ("einsum_path" in text) == (dtype is not object)
    _same(plan(a, a, a), np.einsum("ij,jk,kl->il", a, a, a))
    assert "GEMM" in einsum_plan("ij,jk->ik", np.ones((3, 3)), np.ones((3, 3))).explain()


SWAPPED = [np.dtype(d).newbyteorder() for d in (np.float32, np.float64, np.complex128)]


@pytest.mark.parametrize("dtype", SWAPPED, ids=str)
@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_swapped_byte_order_runs_the_native_einsum(expr, dtype):
    """Float operands of the other byte order ('>f8' here) are copied to the native one
    for tenalg's kernels (NumPy's path-less einsum loops over them: a 512^2 product took
    97 ms against 4.2 for ``@``); a mix of orders too; views stay views of the operand,
    and out= takes NumPy's einsum. Values and result types are np.einsum's."""
    rng = np.random.default_rng(len(expr))
    operands = [a.astype(dtype) for a in _operands(expr, np.float64, rng)]
    got, expected = einsum(expr, *operands), np.einsum(expr, *operands)
    assert type(got) is type(expected) and np.asarray(got).dtype == np.asarray(expected).dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    plan = einsum_plan(expr, *operands)
    if plan.view is None and len(operands) > 1:
        assert "native byte order" in plan.explain()
        mixed = [operands[0], *(x.astype(x.dtype.newbyteorder("=")) for x in operands[1:])]
        np.testing.assert_allclose(einsum(expr, *mixed), expected, rtol=1e-6)
    if isinstance(expected, np.ndarray):
        out = np.full(expected.shape, np.nan, dtype)
        assert einsum(expr, *operands, out=out) is out
        np.testing.assert_allclose(out, expected, rtol=1e-6)
    if plan.view is not None:
        assert np.shares_memory(got, operands[0])


def test_array_likes_and_python_scalars():
    _same(einsum("ij,j", [[1, 2], [3, 4]], (1, 1)), np.einsum("ij,j", [[1, 2], [3, 4]], (1, 1)))
    x32 = np.ones((2, 2), np.float32)
    for scalar in (-1.0, 2, 1j, np.float32(3)):
        _same(einsum(",ij", scalar, x32), np.einsum(",ij", scalar, x32))
    _same(einsum("i,i", [True, False], [True, True]), np.einsum("i,i", [True, False], [True, True]))


def test_full_reductions_are_numpy_scalars():
    a = np.arange(9.0).reshape(3, 3)
    for expr, ops in (("ii", (a,)), ("ij,ij->", (a, a)), ("ii->", (a.astype(int),)),
                      ("", (np.array(2.0),))):
        got = einsum(expr, *ops)
        _same(got, np.einsum(expr, *ops))
        json.dumps(got.item())
    out = np.zeros(())
    assert einsum("ii", a, out=out) is out and out == 12.0  # with out=, out itself


def test_views_are_writeable_where_numpys_are():
    for dtype in (np.float64, np.int32, np.bool_, object):
        a = np.arange(27).reshape(3, 3, 3).astype(dtype)
        for expr in ("ijk->kji", "iij->ji", "...ii->...i", "ijk"):
            got, expected = einsum(expr, a), np.einsum(expr, a)
            assert got.base is expected.base and got.strides == expected.strides
            assert got.flags.writeable
        a.flags.writeable = False
        assert not einsum("iij->ji", a).flags.writeable
    view = einsum("ii->i", np.eye(3))
    view[:] = 5.0
    assert view.sum() == 15.0


def test_out_equal_to_an_input_gives_numpys_answer():
    for dtype in (np.float64, np.complex64, np.int64):
        a = np.arange(9).reshape(3, 3).astype(dtype)
        expected = np.einsum("ij,jk->ik", a, a)
        b = a.copy()
        assert einsum("ij,jk->ik", b, b, out=b) is b
        np.testing.assert_array_equal(b, expected)
        c = a.copy()
        einsum("ij->ji", c, out=c)  # a transpose onto itself
        np.testing.assert_array_equal(c, a.T)
    square = np.ones((3, 3))
    with pytest.raises(ta.AliasError):  # the plan layer keeps its strict rule
        einsum_plan("ij,jk->ik", square, square)(square, square, out=square)


def test_casting_rules_are_numpys():
    z = 1j * np.ones((2, 3))
    with pytest.raises(OutputTypeError) as info:
        einsum("ij->i", z, out=np.zeros(2))
    assert isinstance(info.value, TypeError) and isinstance(info.value, ta.OutputMismatchError)
    with pytest.raises(TypeError):
        np.einsum("ij->i", z, out=np.zeros(2))
    x = np.ones((2, 3))
    with pytest.raises(TypeError):
        einsum("ij->i", x, out=np.zeros(2, np.float32))
    with pytest.raises(ta.DTypeError):  # a TypeError, as NumPy's
        einsum("ij->i", x, dtype=np.float32)
    for kw in (dict(out=np.zeros(2, np.float32)), dict(dtype=np.float32),
               dict(out=np.zeros(2, np.int64)), dict(dtype=np.int16)):
        expected = np.einsum("ij->i", x, casting="unsafe", **kw)
        _same(einsum("ij->i", x, casting="unsafe", **kw), expected)
    with pytest.raises(TypeError):
        einsum("i,i", np.ones(2, np.float32), np.ones(2), casting="no")
    with pytest.raises(ta.OperationError, match="casting"):
        einsum("i", x[0], casting="blah")
    with pytest.raises(OutputTypeError):
        einsum("i", x[0], out="test")
    # wider dtype=: computed in it, as NumPy's
    y = np.full(4, 1 / 3, np.float32)
    got = einsum("i,i", y, y, dtype=np.float64)
    assert got.dtype == np.float64
    assert got == pytest.approx(np.einsum("i,i", y, y, dtype=np.float64), rel=1e-14)


@pytest.mark.parametrize("order", ["K", "C", "F", "A", "k", "c", "f", "a"])
def test_order_as_numpys(order):
    a, b = np.ones((2, 3, 5), order="F"), np.ones((4, 3), order="F")
    for ops in ((a, b), (np.ascontiguousarray(a), b)):
        got = einsum("...ft,mf->...mt", *ops, order=order)
        expected = np.einsum("...ft,mf->...mt", *ops, order=order)
        np.testing.assert_array_equal(got, expected)
        if order.upper() != "K":
            assert got.flags.c_contiguous == expected.flags.c_contiguous
            assert got.flags.f_contiguous == expected.flags.f_contiguous
    with pytest.raises(ValueError, match="order"):
        einsum("ij", a[0], order="W")


def test_more_than_52_labels():
    """Beyond NumPy, as opt_einsum: unicode labels in strings, any hashable in sublists."""
    n = 60
    symbols = [opt_einsum.get_symbol(k) for k in range(n)]
    vectors = [np.full(2, 0.5 + k / n) for k in range(n)]
    expr = ",".join(symbols) + "->" + "".join(symbols[::-1][:3])
    expected = opt_einsum.contract(expr, *vectors)
    np.testing.assert_allclose(einsum(expr, *vectors), expected, rtol=1e-12)
    args = [x for k, v in enumerate(vectors) for x in (v, [f"bond{k}"])]
    got = einsum(*args, ["bond59", "bond58", "bond57"])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    pair = einsum(np.eye(2), [("a", 1), "b"], np.eye(2), ["b", ("a", 1)], [])
    assert pair == 2.0
    with pytest.raises(ValueError, match="52"):  # ints keep NumPy's range and error
        einsum(np.eye(2), [0, 52])


def test_implicit_output_of_hashable_labels_is_sorted_as_opt_einsum_sorts_it():
    """An implicit output lists NumPy's letters (ints) in order, then the other labels
    sorted where they compare (opt_einsum's order; tenalg had kept first appearance),
    else in order of first appearance."""
    x, y = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    for labels in (["b", "a"], [("s", 2), ("s", 1)]):
        np.testing.assert_array_equal(einsum(x, labels), x.T)
        np.testing.assert_array_equal(einsum(x, labels), opt_einsum.contract(x, labels))
    got = einsum(x, ["site", "bond"], y, ["bond", "left"])
    np.testing.assert_array_equal(got, opt_einsum.contract(x, ["site", "bond"], y,
                                                            ["bond", "left"]))
    assert got.shape == (4, 2)
    np.testing.assert_array_equal(einsum(x, ["z", 0]), x.T)  # letters first
    np.testing.assert_array_equal(einsum(x, ["z", ("a",)]), x)  # no order: as they come
    with pytest.raises(ta.SublistError, match="not hashable"):
        einsum(x, [["a"], "b"])


def test_more_hashable_labels_than_a_private_use_area():
    """Past the 65534 characters of Supplementary Private Use Area-B, labels take
    opt_einsum's symbols (chr() had raised a raw ValueError at 65535)."""
    from tenalg.einsum_numpy import _private, sublist_labels
    terms = sublist_labels([[f"l{i}", f"l{i + 1}"] for i in range(70000)])
    chars = {c for term in terms for c in term}
    assert len(chars) == 70001 and not chars & set("abcdefghijklmnopqrstuvwxyz.")
    assert all(len(term) == 2 for term in terms)
    with pytest.raises(ta.ExpressionError, match="distinct labels"):
        _private(2_000_000)


def test_zero_d_out_with_optimize_follows_numpy():
    """NumPy's optimized path writes a 0-d result into out without its casting check."""
    a = np.ones(7)
    out = np.array(0)
    einsum("i,i->", a, a, out=out, optimize="optimal")
    assert out == 7
    with pytest.raises(TypeError):
        einsum("i,i->", a, a, out=np.array(0), optimize=False)
    for optimize in (True, "greedy", ["einsum_path", (0,)]):  # one operand: NumPy checks
        out = np.array(0)
        with pytest.raises(TypeError):
            np.einsum("i->", a / 3, out=out, optimize=optimize)
        with pytest.raises(TypeError):
            einsum("i->", a / 3, out=out, optimize=optimize)
        assert out == 0


def test_object_arrays_run_python_arithmetic():
    a = np.array([1, 2**70, 3], dtype=object)
    assert einsum("i,i", a, a) == np.einsum("i,i", a, a) == 1 + 2**140 + 9


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64, np.uint64])
@pytest.mark.parametrize("scale", [3, 1000, 2**40])
def test_integer_products_through_float64_are_exact(dtype, scale):
    """Above the bound the float64 path steps aside; NumPy's wraparound either way."""
    rng = np.random.default_rng(scale)
    info = np.iinfo(dtype)
    low, high = max(info.min, -scale), min(info.max, scale)
    a, b, c = (rng.integers(low, high, size=s, endpoint=True).astype(dtype)
               for s in ((64, 48), (48, 64), (64, 8)))
    for expr, ops in (("ij,jk->ik", (a, b)), ("ij,jk,kl->il", (a, b, c)),
                      ("ij,jk", (a, b)), ("ij,ij->", (a, a))):
        plan = einsum_plan(expr, *ops)
        _same(einsum(expr, *ops), np.einsum(expr, *ops))
        if expr == "ij,jk->ik":
            assert "float64 GEMMs when exact" in plan.explain()
            bound = min(2**53, info.max)
            expected = max(1, high, -low) ** 2 * 48 <= bound
            assert plan.numpy.exact(ops) == expected
    out = np.zeros((64, 64), dtype)
    einsum("ij,jk->ik", a, b, out=out)  # out= runs NumPy's own routine
    np.testing.assert_array_equal(out, np.einsum("ij,jk->ik", a, b))


def _numpy_einsum(expr, arrays, optimize):
    """np.einsum's result, its single pass's where its path fails (see the next test)."""
    try:
        return np.einsum(expr, *arrays, optimize=optimize)
    except AttributeError:
        return np.einsum(expr, *arrays, optimize=False)


@pytest.mark.parametrize("optimize", ["greedy", "optimal", True])
def test_object_operands_where_numpys_path_fails(optimize):
    """NumPy's path passes a 0-d object intermediate on as a Python int and fails on it;
    tenalg answers with NumPy's single pass, into a new array or out=."""
    ops = [np.array(2, dtype=object), np.array(3, dtype=object),
           np.array([[1, 2], [3, 4]], dtype=object)]
    with pytest.raises(AttributeError):
        np.einsum(",,aa", *ops, optimize=optimize)
    want = np.einsum(",,aa", *ops, optimize=False)
    _same(einsum(",,aa", *ops, optimize=optimize), want)
    assert want == 30
    with pytest.raises(AttributeError):  # with an output, only "optimal"'s path fails
        np.einsum(",,ab->b", *ops, optimize="optimal")
    out = np.zeros((2,), dtype=object)
    assert einsum(",,ab->b", *ops, out=out, optimize="optimal") is out
    np.testing.assert_array_equal(out, np.einsum(",,ab->b", *ops, optimize=False))


@settings(max_examples=80, deadline=None)
@given(case=expressions(), data=st.data())
def test_random_expressions_every_dtype(case, data):
    """tests/test_einsum.py's NumPy-valid expressions (ellipses, repeats, broadcasting,
    implicit outputs) on integer, bool and object operands, reversed strides included:
    exactly np.einsum's result, type and dtype, into a new array or out=."""
    expr, shapes = case
    dtype = data.draw(st.sampled_from([np.int8, np.uint8, np.int64, np.bool_, object]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    arrays = []
    for shape in shapes:
        x = rng.integers(-3, 4, size=shape).astype(dtype)
        if x.ndim and data.draw(st.booleans()):
            x = x[::-1]
        arrays.append(x)
    optimize = data.draw(st.sampled_from(["auto", "greedy", False]))
    # NumPy's own call with the same path choice ("auto" is tenalg's; NumPy's pairwise
    # path returns a NumPy scalar where its single pass returns an object's Python int)
    expected = _numpy_einsum(expr, arrays, optimize if optimize != "auto" else False)
    if data.draw(st.booleans()) and isinstance(expected, np.ndarray) and expected.ndim:
        out = np.zeros_like(expected)
        assert einsum(expr, *arrays, out=out, optimize=optimize) is out
        np.testing.assert_array_equal(out, expected)
    else:
        _same(einsum(expr, *arrays, optimize=optimize), expected)


@pytest.mark.parametrize("optimize", [False, True, "greedy", "optimal"])
@pytest.mark.parametrize("dtype", [np.int8, np.float64, np.complex64, object])
def test_full_reductions_are_scalars_or_arrays_as_numpy_returns_them(optimize, dtype):
    """np.einsum returns a full reduction as a NumPy scalar, except after a path whose last
    pairwise step is a matrix product (NumPy 2's bmm_einsum): then a 0-d array."""
    x, y, z = (np.arange(1, n + 1).astype(dtype) for n in (3, 4, 0))
    s, m = np.array(2).astype(dtype), np.ones((3, 3), dtype)
    for expr, ops in [("a,a", (x, x)), ("a,b", (x, y)), (",", (s, s)), ("", (s,)),
                      ("ii", (m,)), ("ij,jk,ki", (m, m, m)), ("ij,j", (m, x)),
                      ("a,a,", (x, x, s)), ("a,a", (z, z))]:
        _same(einsum(expr, *ops, optimize=optimize), np.einsum(expr, *ops, optimize=optimize))


@pytest.mark.parametrize("pair", [(np.int64, np.uint64), (np.int8, np.uint64)])
def test_mixed_integers_whose_result_type_is_float(pair):
    """int64 with uint64 is float64 in NumPy: its own einsum answers (the exact-integer
    path had asked np.iinfo of a float, a raw ValueError, for loops of 2^16 or more)."""
    a, b = np.arange(64 * 64).reshape(64, 64).astype(pair[0]), np.ones((64, 64), pair[1])
    for expr in ("ij,jk->ik", "ij,jk"):
        _same(einsum(expr, a, b), np.einsum(expr, a, b))
    _same(ta.tensordot(a, b, 1), np.tensordot(a, b, 1))


def test_optimize_none_is_numpys_unoptimized_path():
    """optimize=None, which np.einsum and opt_einsum take (NumPy: its path branch, one
    step), was refused; now it runs left to right, with NumPy's result types."""
    a, m = np.arange(3.0), np.arange(4.0).reshape(2, 2)
    for expr, ops in (("i,i->", (a, a)), ("i->", (a,)), ("ij,ij->", (m, m)),
                      ("i,i,i->", (a, a, a)), ("ij,jk,kl->il", (m, m, m)), ("ij->i", (m,))):
        _same(einsum(expr, *ops, optimize=None), np.einsum(expr, *ops, optimize=None))
        np.testing.assert_array_equal(einsum_plan(expr, *ops, optimize=None)(*ops),
                                      np.einsum(expr, *ops))
    path = ta.einsum_path("ij,jk,kl->il", m, m, m, optimize=None)[0]
    assert path == np.einsum_path("ij,jk,kl->il", m, m, m, optimize=None)[0]
