"""Reductions, traces and partial traces against NumPy, on random strided layouts."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tenalg as ta

from .strategies import COMPLEX, DTYPES, KERNELS, REAL, shapes, strided, tolerance, wide

NP_REDUCE = {"sum": np.sum, "product": np.prod, "min": np.min, "max": np.max}


def run(kernels, a, modes_in, modes_out, op="sum", c=None, alpha=None, beta=None):
    operation = ta.Operation.reduction(
        ta.Operand(a, modes_in), None if c is None else ta.Operand(c, modes_out),
        out_modes=modes_out, op=op,
    )
    arrays = [a] if c is None else [a, c]
    return ta.Plan(operation, backend=kernels).execute(*arrays, alpha=alpha, beta=beta)


@st.composite
def reduction_case(draw, dtypes=DTYPES):
    shape = draw(shapes(max_dims=4))
    dtype = draw(st.sampled_from(dtypes))
    a = draw(strided(shape, dtype, allow_broadcast=True))
    kept = [ax for ax in range(a.ndim) if draw(st.booleans())]
    return a, kept


@pytest.mark.parametrize("kernels", KERNELS)
@settings(max_examples=40, deadline=None)
@given(case=reduction_case(), alpha=st.sampled_from([1, -2.5]), use_c=st.booleans())
def test_sum_matches_numpy(kernels, case, alpha, use_c):
    a, kept = case
    modes = tuple(range(a.ndim))
    reduced = tuple(ax for ax in modes if ax not in kept)
    expected = alpha * np.sum(wide(a), axis=reduced)
    c = None
    if use_c:
        c = np.asarray(np.ones(expected.shape), a.dtype)
        expected = expected + 0.5 * wide(c)
    got = run(kernels, a, modes, tuple(kept), c=c, alpha=alpha, beta=0.5 if use_c else None)
    assert got.shape == expected.shape and got.dtype == a.dtype
    scale = np.sum(np.abs(wide(a)), axis=reduced) + 1
    assert np.all(np.abs(wide(got) - expected) <= 4 * tolerance(a.dtype) * scale)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("op", ["product", "min", "max"])
@settings(max_examples=25, deadline=None)
@given(case=reduction_case(REAL))
def test_other_reductions_match_numpy(kernels, op, case):
    a, kept = case
    modes = tuple(range(a.ndim))
    reduced = tuple(ax for ax in modes if ax not in kept)
    init = {"product": {}, "min": {"initial": np.inf}, "max": {"initial": -np.inf}}[op]
    expected = NP_REDUCE[op](wide(a), axis=reduced, **init)
    got = run(kernels, a, modes, tuple(kept), op=op)
    tiny = float(ml_dtypes.finfo(a.dtype).smallest_subnormal)
    # a product that passes through subnormals loses up to half a subnormal step a
    # factor there, which the factors after it can grow (any order is a correct one)
    steps = math.prod(a.shape[ax] for ax in reduced)
    growth = np.prod(np.maximum(1.0, np.abs(wide(a))), axis=reduced)
    atol = tiny * steps * growth if op == "product" else tiny
    with np.errstate(invalid="ignore"):  # inf - inf: empty products, min and max
        close = np.abs(wide(got) - expected) <= 8 * tolerance(a.dtype) * np.abs(expected) + atol
    assert np.all(close | (wide(got) == expected)), (wide(got), expected)


@pytest.mark.parametrize("kernels", KERNELS)
def test_product_of_complex(kernels):
    a = np.array([[1 + 1j, 2 - 1j], [0.5j, 3]], np.complex128)
    np.testing.assert_allclose(run(kernels, a, "ij", "i", "product"), np.prod(a, axis=1))


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("op", ["min", "max"])
def test_min_max_propagate_nan(kernels, op):
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    got = run(kernels, a, "ij", "i", op)
    assert np.isnan(got[0]) and got[1] == (-1.0 if op == "min" else 5.0)


@pytest.mark.parametrize("kernels", KERNELS)
def test_min_max_signed_zeros(kernels):
    a = np.array([0.0, -0.0, 0.0])
    assert np.signbit(run(kernels, a, "i", "", "min")[()])
    assert not np.signbit(run(kernels, a[::-1].copy() * -1 + 0.0, "i", "", "max")[()])


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("op,identity", [("sum", 0.0), ("product", 1.0), ("min", np.inf),
                                         ("max", -np.inf)])
def test_empty_reduction_gives_identity(kernels, op, identity):
    a = np.zeros((3, 0), np.float64)
    assert run(kernels, a, "ij", "i", op).tolist() == [identity] * 3


@pytest.mark.parametrize("kernels", KERNELS)
def test_empty_output_does_nothing(kernels):
    got = run(kernels, np.zeros((0, 4)), "ij", "i")
    assert got.shape == (0,)


@pytest.mark.parametrize("kernels", KERNELS)
def test_beta_zero_never_reads_c(kernels):
    a = np.ones((2, 3))
    c = np.full(2, np.nan)
    assert run(kernels, a, "ij", "i", c=c, beta=0).tolist() == [3.0, 3.0]


@pytest.mark.parametrize("kernels", KERNELS)
def test_unary_on_reduction_and_addend(kernels):
    a = np.array([[-1.0, 2.0], [3.0, -4.0]])
    c = np.array([1.0, -1.0])
    operation = ta.Operation.reduction(
        ta.Operand(a, "ij", "abs"), ta.Operand(c, "i", "negate"), out_modes="i"
    )
    got = ta.Plan(operation, backend=kernels).execute(a, c, alpha=2, beta=3)
    assert got.tolist() == [2 * 3 - 3, 2 * 7 + 3]


@pytest.mark.parametrize("kernels", KERNELS)
@settings(max_examples=30, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_diagonal_reductions_match_einsum(kernels, data, dtype):
    n = data.draw(st.integers(0, 5))
    m = data.draw(st.integers(1, 4))
    a = data.draw(strided((n, m, n, m), dtype))
    got = run(kernels, a, "ijik", "jk")
    expected = np.einsum("ijik->jk", wide(a))
    np.testing.assert_allclose(wide(got), expected, rtol=4 * tolerance(dtype),
                               atol=4 * tolerance(dtype) * (np.abs(wide(a)).sum() + 1))


@pytest.mark.parametrize("kernels", [*KERNELS, "auto"])
def test_sums_along_repeating_axes_multiply_once(kernels):
    """Reduced axes along which the input does not move (stride 0, a broadcast) are read
    once: a sum is its extent times the term, the correctly rounded n x, where NumPy
    adds x over and over (1000 x had come 3e-14 off); min and max are the term; with
    alpha, and beside a reduced axis that moves; products, and complex sums (whose
    infinities a complex product makes NaN), are left as they are."""
    rng = np.random.default_rng(8)
    row = np.concatenate([rng.standard_normal(509), [np.inf, np.nan, -0.0]])
    a = np.broadcast_to(row, (1000, 512))
    got = run(kernels, a, "ij", "j")
    np.testing.assert_array_equal(got, row * 1000.0)
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(a, "ij"), out_modes="j"),
                   backend=kernels)
    assert "the sum times 1000" in plan.explain() or plan.backend == "direct"
    np.testing.assert_array_equal(run(kernels, a, "ij", "j", alpha=-0.5), row * -500.0)
    for op in ("min", "max"):
        np.testing.assert_array_equal(run(kernels, a, "ij", "j", op=op), row)
    four = np.broadcast_to(row[:8], (4, 8))  # alpha 1/4 makes the kernel's alpha 1: a
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(four, "ij"), out_modes="j"),
                   backend=kernels)  # call of its own, not the one for alpha 3
    for alpha in (0.25, 3.0, 0.25):
        np.testing.assert_array_equal(plan.execute(four, alpha=alpha), 4 * alpha * row[:8])
    cube = np.broadcast_to(rng.standard_normal((6, 1, 7)), (6, 50, 7))
    got = run(kernels, cube, "abc", "c")  # per output, 50 times the sum over a
    exact = [math.fsum(50.0 * x for x in cube[:, 0, k]) for k in range(7)]
    np.testing.assert_allclose(got, exact, rtol=4 * tolerance(np.float64))
    infinite = np.broadcast_to(np.array([np.inf + 1j, 1j * np.inf]), (17, 2))
    np.testing.assert_array_equal(run(kernels, infinite, "ij", "j"),  # not inf + nan j
                                  np.sum(np.ascontiguousarray(infinite), axis=0))
    powers = np.broadcast_to(np.array([1.5, -1.0]), (7, 2))
    np.testing.assert_array_equal(run(kernels, powers, "ij", "j", op="product"),
                                  [1.5**7, -1.0])


def test_pairwise_accuracy_against_fsum():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, 2**20).astype(np.float32)
    exact = math.fsum(x.astype(np.float64))
    assert abs(float(ta.sum(x)) - exact) <= 1e-6 * exact
    y = rng.standard_normal((512, 2048)).astype(np.float32)
    exact_rows = [math.fsum(row) for row in y.astype(np.float64)]
    np.testing.assert_allclose(ta.sum(y, axis=1), exact_rows, rtol=0, atol=2e-4)


@pytest.mark.parametrize("dtype", [np.float16, ta.bfloat16])
def test_16_bit_sums_accumulate_in_float32(dtype):
    x = np.ones(10_000, dtype)
    assert float(ta.sum(x)) == 10_000.0 if dtype == np.float16 else float(ta.sum(x)) == 9984.0
    assert ta.sum(x).dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_complex_sums(dtype):
    a = (np.arange(6) + 1j * np.arange(6)).astype(dtype).reshape(2, 3)
    np.testing.assert_allclose(ta.sum(a, axis=0), a.sum(axis=0))


@pytest.mark.parametrize("unary", ["abs", "negate", "conjugate", "sqrt"])
def test_reduce_reads_its_operand_through_a_unary(unary):
    """ta.reduce takes unary_a, as docs/dense.md says every cuTENSOR-style call does (it
    had no such keyword)."""
    rng = np.random.default_rng(4)
    z = rng.standard_normal((5, 6)) + 1j * rng.standard_normal((5, 6))
    x = z if unary == "conjugate" else np.abs(z) if unary == "sqrt" else z.real
    transform = {"abs": np.abs, "negate": np.negative, "conjugate": np.conj,
                 "sqrt": np.sqrt}[unary]
    for op, numpy_op in (("sum", np.sum), ("max", np.max)):
        if op == "max" and x.dtype.kind == "c":
            continue
        got = ta.reduce(x, "ij", "j", op, unary_a=unary)
        np.testing.assert_allclose(got, numpy_op(transform(x), axis=0), rtol=1e-13)
