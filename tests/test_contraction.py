"""Contraction and sum_product plans against np.einsum in float64 / complex128."""

import numpy as np
import pytest
from dense.strategies import COMPLEX, DTYPES, strided, tolerance, values, wide
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta
from tenalg.contraction import find_path, gemm_layout
from tenalg.matrices import blasable, fold, fused

LABELS = "abcdef"


def _close(got, expected, dtypes, scale):
    tol = max(tolerance(d) for d in np.atleast_1d(np.asarray(dtypes, dtype=object)))
    atol = 8 * tol * (np.max(scale, initial=0) + 1)
    np.testing.assert_allclose(wide(got), expected, rtol=8 * tol, atol=atol)


def _subscripts(modes):
    return "".join(modes)


@st.composite
def pairs(draw):
    """Two operands over shared labels (repeats, broadcasts), an output, maybe C and unaries."""
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=5, unique=True))
    extents = {m: draw(st.integers(0, 4) if draw(st.integers(0, 9)) == 0 else st.integers(1, 4))
               for m in labels}
    modes_a = draw(st.lists(st.sampled_from(labels), max_size=4))
    modes_b = draw(st.lists(st.sampled_from(labels), max_size=4))
    used = sorted(set(modes_a) | set(modes_b))
    out = draw(st.permutations(used)) if used else []
    out = out[: draw(st.integers(0, len(out)))]
    dtype_a, dtype_b = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))

    def shape_of(modes):  # an operand may broadcast a mode with extent 1
        return [1 if extents[m] > 1 and draw(st.integers(0, 5)) == 0 and modes.count(m) == 1
                else extents[m] for m in modes]

    a = draw(strided(shape_of(modes_a), dtype_a, allow_broadcast=True))
    b = draw(strided(shape_of(modes_b), dtype_b, allow_broadcast=True))
    return labels, extents, modes_a, modes_b, out, a, b


def _expected(a, ua, ma, b, ub, mb, out):
    wa, wb = wide(a), wide(b)
    if ua == "conjugate":
        wa = np.conj(wa)
    if ub == "conjugate":
        wb = np.conj(wb)
    expr = f"{_subscripts(ma)},{_subscripts(mb)}->{_subscripts(out)}"
    scale = np.einsum(expr, np.abs(wa), np.abs(wb))
    value = np.einsum(expr, wa, wb)
    shape = tuple(max(x.shape[k] for x, ms in ((a, ma), (b, mb)) for k, m in enumerate(ms)
                      if m == mode) for mode in out)
    return np.broadcast_to(value, shape), np.broadcast_to(scale, shape)


@settings(max_examples=60, deadline=None)
@given(case=pairs(), data=st.data())
def test_contraction_matches_einsum(case, data):
    _, _, ma, mb, out, a, b = case
    ua = data.draw(st.sampled_from(["identity", "conjugate"]))
    ub = data.draw(st.sampled_from(["identity", "conjugate"]))
    alpha = data.draw(st.sampled_from([1, 2.0, -0.5]))
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        alpha = data.draw(st.sampled_from([alpha, 1j, 0.5 - 2j]))
    op = ta.Operation.contraction(ta.Operand(a, ma, ua), ta.Operand(b, mb, ub), out_modes=out)
    plan = ta.Plan(op)
    got = plan.execute(a, b, alpha=alpha)
    expected, scale = _expected(a, ua, ma, b, ub, mb, out)
    assert got.dtype == ta.dtypes.result_type([a.dtype, b.dtype])
    _close(got, alpha * expected, [a.dtype, b.dtype], np.abs(alpha) * np.asarray(scale))
    assert "FLOPs" in plan.explain()


@settings(max_examples=40, deadline=None)
@given(case=pairs(), data=st.data())
def test_addend_and_output_layouts(case, data):
    """C with beta, an explicit (strided, transposed) output, and D = AB + beta D in place."""
    _, extents, ma, mb, out, a, b = case
    dtype = data.draw(st.sampled_from(DTYPES))
    if np.iscomplexobj(a) or np.iscomplexobj(b):
        dtype = np.complex128
    shape = [extents[m] for m in out]
    d = data.draw(strided(shape, dtype))
    c = data.draw(strided(shape, dtype))
    beta = data.draw(st.sampled_from([0, 1, -2.0]))
    op = ta.Operation.contraction(ta.Operand(a, ma), ta.Operand(b, mb), ta.Operand(c, out),
                                  out=ta.TensorDescriptor.from_array(d), out_modes=out)
    expected, scale = _expected(a, "identity", ma, b, "identity", mb, out)
    expected = 1.5 * expected + beta * wide(c)
    ta.Plan(op).execute_into(d, a, b, c, alpha=1.5, beta=beta)
    worst = [a.dtype, b.dtype, d.dtype]
    _close(d, expected, worst, 1.5 * np.asarray(scale) + abs(beta) * np.abs(wide(c)))
    # in place: the addend is the output itself
    inplace = ta.Operation.contraction(ta.Operand(a, ma), ta.Operand(b, mb), ta.Operand(d, out),
                                       out=ta.TensorDescriptor.from_array(d), out_modes=out)
    before = wide(d)
    ta.Plan(inplace).execute_into(d, a, b, d, alpha=1, beta=beta)
    expected2, _ = _expected(a, "identity", ma, b, "identity", mb, out)
    _close(d, expected2 + beta * before, worst, np.asarray(scale) + abs(beta) * np.abs(before))


def test_beta_zero_never_reads_c():
    a, b = np.ones((3, 4)), np.ones((4, 5))
    c = np.full((3, 5), np.nan)
    got = ta.contract(a, "ik", b, "kj", "ij", c=c, beta=0)
    assert np.all(got == 4)


def test_broadcast_only_output_mode():
    a, b = np.arange(6.0).reshape(2, 3), np.ones(3)
    out = np.empty((2, 4))
    op = ta.Operation.contraction(ta.Operand(a, "ik"), ta.Operand(b, "k"),
                                  out=ta.TensorDescriptor.from_array(out), out_modes="ij")
    ta.Plan(op).execute_into(out, a, b)
    np.testing.assert_allclose(out, np.repeat(a.sum(1, keepdims=True), 4, axis=1))


@pytest.mark.parametrize(
    ("expr", "shapes", "copies"),
    [
        ("ik,kj->ij", [(8, 9), (9, 7)], "none"),
        ("ki,kj->ij", [(9, 8), (9, 7)], "none"),
        ("ik,jk->ji", [(8, 9), (7, 9)], "none"),
        ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 3, 2)], "none"),
        ("bij,bjk->bik", [(4, 5, 6), (4, 6, 3)], "none"),
        ("acbd,dfce->abef", [(2, 4, 3, 5), (5, 2, 4, 3)], "A"),
    ],
)
def test_gemm_lowering_copies_only_what_it_must(expr, shapes, copies):
    ins, out = expr.split("->")
    ma, mb = ins.split(",")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s) for s in shapes)
    plan = ta.Plan(ta.Operation.contraction(ta.Operand(a, ma), ta.Operand(b, mb), out_modes=out))
    text = plan.explain()
    assert "GEMM" in text
    assert f"copies: {copies}" in text or (copies != "none" and "copies: none" not in text)
    np.testing.assert_allclose(plan.execute(a, b), np.einsum(expr, a, b), rtol=1e-12)


LIFTS = [  # (expression, shapes, what the plan copies, its batch modes)
    ("lnr,n->lr", [(20, 8, 24), (8,)], "none", "l"),
    ("n,lnr->rl", [(8,), (20, 8, 24)], "none", "l"),
    ("lnr,nm->lmr", [(20, 8, 24), (8, 5)], "none", "l"),
    ("abcd,c->adb", [(3, 4, 6, 32), (6,)], "none", "a b"),
    ("blnr,bn->blr", [(3, 20, 8, 24), (3, 8)], "none", "b l"),
    ("lnr,mnk->lrmk", [(20, 8, 24), (3, 8, 4)], "B", "l"),  # one operand at most
    ("lnr,nm->lmr", [(20, 8, 24), (8, 32)], "A", "-"),  # wide products: one GEMM
    ("lnr,n->lr", [(500, 2, 2), (2,)], "none", "-"),  # small slices: a sum of products
]


@pytest.mark.parametrize(("expr", "shapes", "copies", "batch"), LIFTS)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_operands_with_contracted_modes_inside_become_stacks(expr, shapes, copies, batch,
                                                             dtype):
    """An operand whose contracted mode lies between its free ones is read in place as a
    stack of matrices along its outer free modes, the other operand broadcast along them
    (it had been copied): with narrow products and slices of 128 elements or more.  The
    values against np.einsum: stacks reversed with a step of 2, both operands conjugated
    (the product's conjugate), alpha and beta into a strided output."""
    ins, out = expr.split("->")
    ma, mb = ins.split(",")
    rng = np.random.default_rng(4)
    a, b = (values(rng, (2 * s[0], *s[1:]), dtype)[::-2] if len(s) > 2
            else values(rng, s, dtype) for s in shapes)
    unary = "conjugate" if np.iscomplexobj(a) else "identity"
    shape = np.einsum(expr, a, b).shape
    d = values(rng, (*shape[:-1], 2 * shape[-1]), dtype)[..., ::2]
    c = values(rng, shape, dtype)
    plan = ta.Plan(ta.Operation.contraction(
        ta.Operand(a, ma, unary), ta.Operand(b, mb, unary), ta.Operand(c, out),
        out=ta.TensorDescriptor.from_array(d), out_modes=out))
    text = plan.explain()
    assert f"modes: batch {batch};" in text if batch != "-" else "modes: batch" not in text
    assert f"copies: {copies}" in text if copies == "none" else f"copies: {copies} (" in text
    plan.execute_into(d, a, b, c, alpha=1.5, beta=-2)
    want = 1.5 * np.einsum(expr, *(np.conj(x) if unary == "conjugate" else x
                                   for x in (a, b))) - 2 * c
    np.testing.assert_allclose(d, want, rtol=1e-5 if dtype == np.complex64 else 1e-12,
                               atol=1e-4 if dtype == np.complex64 else 1e-12)
    np.testing.assert_allclose(ta.einsum(expr, a, b), np.einsum(expr, a, b),
                               rtol=1e-5 if dtype == np.complex64 else 1e-12, atol=1e-4)


def test_gemm_layout_puts_the_lifted_operands_free_modes_innermost():
    """The output layout that einsum allocates follows the lift: the lifted modes after
    the batch modes, the lifted operand's other free modes innermost (C order here; it
    had been (l, r, m) with m innermost, a slower product)."""
    a, b = np.ones((100, 32, 100)), np.ones((32, 8))
    layout = gemm_layout(ta.Operand(a, "lnr"), ta.Operand(b, "nm"), "lmr", np.float64)
    assert layout.strides == (800, 100, 1)
    assert ta.einsum("lnr,nm->lmr", a, b).flags.c_contiguous
    layout = gemm_layout(ta.Operand(b, "nm"), ta.Operand(a, "lnr"), "mlr", np.float64)
    assert layout.strides == (100, 800, 1)


def test_a_dot_of_strided_or_broadcast_vectors_reads_them_in_place():
    """One dot that GEMM could not read in place runs NumPy's strided loop: the GEMM path
    had copied both sides (4-6 s and 1 GB for a 512 MB view, NumPy's vdot 0.1 s)."""
    tracemalloc = pytest.importorskip("tracemalloc")
    base = np.arange(2.0**18)
    for x, y in ((base[::2], base[1::2]), (np.broadcast_to(2.0, (2**17,)), base[::-2]),
                 (base.reshape(512, 512)[:, ::2], base.reshape(512, 512)[:, 1::2])):
        labels = "ij"[:x.ndim]
        plan = ta.Plan(ta.Operation.contraction(ta.Operand(x, labels), ta.Operand(y, labels),
                                                out_modes=""))
        text = plan.explain()
        assert "direct strided sum of products (batch=1)" in text and "copies: none" in text
        tracemalloc.start()
        got = plan.execute(x, y)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < x.nbytes / 8
        assert float(got) == pytest.approx(float(np.vdot(x, y)), rel=1e-13)
        assert ta.inner_product_host(x, y) == pytest.approx(float(np.vdot(x, y)), rel=1e-13)
    x = base[:1024]  # contiguous vectors stay with BLAS
    text = ta.Plan(ta.Operation.contraction(ta.Operand(x, "i"), ta.Operand(x, "i"),
                                            out_modes="")).explain()
    assert "GEMM m=1 n=1" in text and "copies: none" in text


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_a_direct_sum_of_products_writes_straight_into_its_output(dtype):
    """Batched dots in the output's type go straight into it: they had gone through a
    buffer of the output's size and a copy (a 256^2 'ij,ij->ij' 344 us, np.einsum 56);
    with alpha, a conjugate, a strided out and C order or not."""
    tracemalloc = pytest.importorskip("tracemalloc")
    rng = np.random.default_rng(11)
    a = rng.standard_normal((64, 48, 3, 2)) + 1j * rng.standard_normal((64, 48, 3, 2))
    if np.dtype(dtype).kind == "f":
        a = a.real
    a, b = a[..., 0].astype(dtype), a[::-1, :, :, 1].astype(dtype)
    cases = (("ij", (64, 48), "identity"), ("ji", (48, 64), "identity"),
             ("ij", (64, 48), "conjugate"), ("i", (64,), "identity"))
    for out_modes, shape, unary in cases:
        target = np.full((shape[0], 2 * shape[-1]) if len(shape) == 2 else (2 * shape[0],),
                         7, dtype)
        out = target[..., ::2]
        op = ta.Operation.contraction(ta.Operand(a, "ijk", unary), ta.Operand(b, "ijk"),
                                      out=ta.TensorDescriptor.from_array(out),
                                      out_modes=out_modes)
        plan = ta.Plan(op)
        assert "direct strided sum of products" in plan.explain()
        assert "written directly by the sum of products" in plan.explain()
        ca = a.conj() if unary == "conjugate" else a
        expected = 2.5 * np.einsum(f"ijk,ijk->{out_modes}", ca, b)
        plan.execute_into(out, a, b, alpha=2.5)
        tracemalloc.start()
        plan.execute_into(out, a, b, alpha=2.5)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if unary == "identity" and len(shape) == 2:  # (a conjugate is a copy of A)
            assert peak < out.nbytes / 4
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
        assert (target[..., 1::2] == 7).all()
        got = ta.einsum(f"ijk,ijk->{out_modes}", ca, b)
        np.testing.assert_allclose(2.5 * got, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_narrow_products_of_operands_that_need_copies_are_sums_of_products(dtype):
    """'lnr,lmr->nm' with n, m small: the copies and GEMM read the operands three times
    (0.86 ms at (256, 4, 256) float64, np.einsum 0.34), the sum of products once. Wider
    products, and copies that convert 16-bit data, keep GEMM; values with alpha, beta, C,
    conjugates and a strided output."""
    rng = np.random.default_rng(12)
    for shape, kernel in (((40, 4, 30), "direct strided sum"), ((40, 2, 30), "direct strided"),
                          ((20, 16, 24), "GEMM m=16 n=16")):
        a = values(rng, (2 * shape[0], *shape[1:]), dtype)[::-2]
        b = values(rng, shape, dtype)
        c = values(rng, (shape[1], shape[1]), dtype)
        d = values(rng, (shape[1], 2 * shape[1]), dtype)[:, ::2]
        unary = "conjugate" if np.iscomplexobj(a) else "identity"
        plan = ta.Plan(ta.Operation.contraction(
            ta.Operand(a, "lnr", unary), ta.Operand(b, "lmr"), ta.Operand(c, "nm"),
            out=ta.TensorDescriptor.from_array(d), out_modes="nm"))
        assert kernel in plan.explain()
        plan.execute_into(d, a, b, c, alpha=1.5, beta=-2)
        ca = np.conj(a) if unary == "conjugate" else a
        want = 1.5 * np.einsum("lnr,lmr->nm", ca, b) - 2 * c
        tol = 1e-4 if dtype == np.complex64 else 1e-12
        np.testing.assert_allclose(d, want, rtol=tol, atol=tol)
        np.testing.assert_allclose(ta.einsum("lnr,lmr->nm", ca, b),
                                   np.einsum("lnr,lmr->nm", ca, b), rtol=tol, atol=tol)
    half = values(rng, (40, 4, 30), np.float16)
    plan = ta.Plan(ta.Operation.contraction(ta.Operand(half, "lnr"), ta.Operand(half, "lmr"),
                                            out_modes="nm"))
    assert "GEMM" in plan.explain() and "converts float16" in plan.explain()


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_products_that_sum_nothing_are_elementwise_products(dtype):
    """No contracted or summed mode (outer and Hadamard products): the elementwise
    product plan that the seam picks (NumPy's call when small, the cpu kernel on all
    threads when large; as a GEMM with k = 1 a third of NumPy's speed, as NumPy's
    broadcast product 2.6x the kernel's time); exactly NumPy's values, conjugates,
    batches too, and alpha; with C the outer-product path."""
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal(s).astype(dtype) for s in ((5, 3, 4), (5, 6)))
    for ma, mb, out in (("bij", "bk", "bijk"), ("bij", "bk", "kbji"), ("bij", "bk", "ibkj")):
        op = ta.Operation.contraction(ta.Operand(a, ma, "conjugate"), ta.Operand(b, mb),
                                      out_modes=out)
        plan = ta.Plan(op)
        assert "kernel: elementwise product" in plan.explain()
        expected = np.einsum(f"{ma},{mb}->{out}", a.conj(), b)
        np.testing.assert_array_equal(plan.execute(a, b), expected)
        np.testing.assert_allclose(plan.execute(a, b, alpha=2), 2 * expected, rtol=1e-6)
        with_c = ta.Plan(ta.Operation.contraction(
            ta.Operand(a, ma, "conjugate"), ta.Operand(b, mb), ta.Operand(expected, out),
            out_modes=out))
        assert "outer product" in with_c.explain()
        np.testing.assert_allclose(with_c.execute(a, b, expected, alpha=2, beta=-1), expected,
                                   rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ta.einsum("i,j->ij", a[0, 0], b[0]), np.outer(a[0, 0], b[0]))
    x, y = rng.standard_normal((2, 768, 512)).astype(dtype)
    for expr, ops in (("i,j->ij", (x[0], y[:, 0])), ("ij,ij->ij", (x, y[::-1])),
                      ("ij,ji->ij", (x[:512], y[:512].T))):
        plan = ta.einsum_plan(expr, *ops)
        assert "elementwise product (cpu plan)" in plan.explain()
        np.testing.assert_array_equal(ta.einsum(expr, *ops), np.einsum(expr, *ops))


@pytest.mark.parametrize("dtype", [np.float16, ta.bfloat16])
def test_half_precision_runs_through_float32(dtype):
    rng = np.random.default_rng(1)
    a, b = values(rng, (16, 12), dtype), values(rng, (12, 10), dtype)
    plan = ta.Plan(ta.Operation.contraction(ta.Operand(a, "ik"), ta.Operand(b, "kj"),
                                            out_modes="ij"))
    got = plan.execute(a, b)
    assert got.dtype == np.dtype(dtype)
    assert "float32" in plan.explain() and "converts" in plan.explain()
    _close(got, wide(a) @ wide(b), dtype, np.abs(wide(a)) @ np.abs(wide(b)))


@pytest.mark.parametrize("dtype", [np.float16, ta.bfloat16])
def test_half_precision_conversions_by_the_kernels(dtype):
    """Operands and output large enough for the Numba conversions (a permuted operand, a
    scaled product written into a Fortran-ordered output): the product of the widened
    operands, rounded once."""
    rng = np.random.default_rng(3)
    a, b = values(rng, (96, 64), dtype), values(rng, (80, 64), dtype).T
    plan = ta.Plan(ta.Operation.contraction(ta.Operand(a, "ik"), ta.Operand(b, "kj"),
                                            out=ta.TensorDescriptor.from_array(np.empty(
                                                (96, 80), dtype, order="F")),
                                            out_modes="ij"))
    assert "tenalg plan" in plan.explain()
    got = plan.execute(a, b, alpha=0.5)
    want = 0.5 * (wide(a) @ wide(b))
    _close(got, want, dtype, np.abs(wide(a)) @ np.abs(wide(b)))
    assert got.flags.f_contiguous and got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_conjugate_folds_into_the_gemm(dtype):
    rng = np.random.default_rng(2)
    a, b = values(rng, (5, 6), dtype), values(rng, (6, 4), dtype)
    both = ta.Plan(ta.Operation.contraction(ta.Operand(a, "ik", "conjugate"),
                                            ta.Operand(b, "kj", "conjugate"), out_modes="ij"))
    assert "conjugated result" in both.explain() and "copies: none" in both.explain()
    np.testing.assert_allclose(both.execute(a, b, alpha=1j), 1j * (a.conj() @ b.conj()),
                               rtol=1e-5)
    one = ta.Plan(ta.Operation.contraction(ta.Operand(a, "ik", "conjugate"), ta.Operand(b, "kj"),
                                           out_modes="ij"))
    np.testing.assert_allclose(one.execute(a, b), a.conj() @ b, rtol=1e-5)


def test_other_unaries_apply_before_the_product():
    a, b = np.linspace(0.1, 1, 6).reshape(2, 3), np.ones((3, 2))
    got = ta.contract(a, "ik", b, "kj", "ij", unary_a="exp")
    np.testing.assert_allclose(got, np.exp(a) @ b)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), n=st.integers(1, 4), dtype=st.sampled_from(DTYPES))
def test_sum_product_matches_fused_formula(data, n, dtype):
    extents = dict(zip("abcde", data.draw(st.lists(st.integers(1, 4), min_size=5, max_size=5)),
                       strict=True))
    terms = [data.draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=3))
             for _ in range(n)]
    used = sorted(set().union(*terms))
    out = data.draw(st.permutations(used))[: data.draw(st.integers(0, len(used)))]
    arrays = [data.draw(strided([extents[m] for m in t], dtype)) for t in terms]
    op = ta.Operation.sum_product([ta.Operand(x, t) for x, t in zip(arrays, terms, strict=True)],
                                  out_modes=out)
    plan = ta.Plan(op)
    got = plan.execute(*arrays, alpha=2)
    expr = ",".join("".join(t) for t in terms) + "->" + "".join(out)
    expected = 2 * np.einsum(expr, *map(wide, arrays))
    scale = 2 * np.einsum(expr, *(np.abs(wide(x)) for x in arrays))
    _close(got, expected, dtype, scale)
    assert "path" in plan.explain()


def test_helpers():
    assert fold(ta.Operand(np.zeros((3, 1, 3)), "iji")) == {"i": 4}
    assert fused({"i": 3, "j": 1}, {"i": 4, "j": 3}, ("i", "j")) == (12, 1)
    assert blasable((1, 5), (5, 1)) and not blasable((3, 2), (3, 2))
    assert find_path(["ij"], "i", {"i": 2, "j": 2}, "auto") == [(0,)]
    assert find_path(["ij", "jk", "kl"], "il", {m: 2 for m in "ijkl"}, False) == [(0, 1)] * 2


def test_sum_product_with_addend_and_conjugate():
    rng = np.random.default_rng(8)
    x, y, z = (values(rng, s, np.complex128) for s in ((3, 4), (4, 5), (5, 2)))
    c = values(rng, (3, 2), np.complex128)
    op = ta.Operation.sum_product(
        [ta.Operand(x, "ij", "conjugate"), ta.Operand(y, "jk"), ta.Operand(z, "kl")],
        ta.Operand(c, "il"), out_modes="il")
    got = ta.Plan(op).execute(x, y, z, c, alpha=2j, beta=-1)
    np.testing.assert_allclose(got, 2j * x.conj() @ y @ z - c, rtol=1e-12)
