"""Bad input raises a clear tenalg error before anything is written."""

import numpy as np
import pytest

import tenalg as ta


def reduction_plan(a, modes="ij", out_modes="i", c=None):
    return ta.Plan(ta.Operation.reduction(
        ta.Operand(a, modes), None if c is None else ta.Operand(c, out_modes),
        out_modes=out_modes))


def test_integer_bool_object_dtypes_are_rejected_by_the_plan_layer():
    """The descriptor and plan layer (and its front ends such as reduce) take the storage
    types only; the NumPy-named front ends take NumPy's answer for the others."""
    for dtype in (np.int32, np.bool_, object, np.uint8):
        with pytest.raises(ta.DTypeError, match=np.dtype(dtype).name):
            ta.TensorDescriptor.from_array(np.zeros(2, dtype))
        with pytest.raises(ta.DTypeError):
            ta.reduce(np.zeros(2, dtype), "i", "", "sum")
        assert ta.sum(np.ones(2, dtype)) == np.sum(np.ones(2, dtype))


def test_unequal_extents_name_the_mode():
    a, b = np.zeros((2, 3)), np.zeros((4, 3))
    with pytest.raises(ta.ExtentError, match="'i'"):
        ta.elementwise_binary(a, "ij", b, "ij", "ij")


def test_repeated_mode_needs_equal_extents():
    with pytest.raises(ta.DescriptorError, match="repeated mode"):
        ta.Operand(np.zeros((2, 3)), "ii")


def test_output_modes_must_be_unique_and_cover_elementwise_inputs():
    a = np.zeros((2, 3))
    with pytest.raises(ta.OperationError, match="twice"):
        ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ii")
    with pytest.raises(ta.OperationError, match="cannot reduce"):
        ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="i")
    with pytest.raises(ta.OperationError, match="cannot reduce"):
        ta.Operation.elementwise_binary(ta.Operand(a, "ij"), ta.Operand(a, "ij"), out_modes="j")


def test_output_that_would_discard_values():
    a = np.zeros((2, 3))
    out = ta.TensorDescriptor.contiguous((1, 3), np.float64)
    with pytest.raises(ta.ExtentError):
        ta.Operation.permutation(ta.Operand(a, "ij"), out=out, out_modes="ij")


def test_broadcast_only_output_mode_needs_a_descriptor():
    a = np.ones(3)
    with pytest.raises(ta.OperationError, match="broadcast-only"):
        ta.Operation.permutation(ta.Operand(a, "j"), out_modes="ij")
    out = ta.TensorDescriptor.contiguous((2, 3), np.float64)
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "j"), out=out, out_modes="ij"))
    assert plan.execute(a).tolist() == [[1.0] * 3] * 2


def test_overlapping_output_descriptor():
    with pytest.raises(ta.AliasError, match="overlaps itself"):
        ta.Operation.permutation(ta.Operand(np.zeros((2, 3)), "ij"),
                                 out=ta.TensorDescriptor((2, 3), (1, 1), np.float64),
                                 out_modes="ij")


def test_compute_type_rules():
    a = np.zeros(2, np.float64)
    with pytest.raises(ta.DTypeError, match="narrower"):
        ta.Operation.reduction(ta.Operand(a, "i"), out_modes="", compute=np.float32)
    z = np.zeros(2, np.complex64)
    with pytest.raises(ta.DTypeError, match="complex"):
        ta.Operation.reduction(ta.Operand(z, "i"), out_modes="", op="max")
    op = ta.Operation.reduction(ta.Operand(np.zeros(2, np.float16), "i"), out_modes="")
    assert op.compute == np.float32


def test_input_count_and_mismatch():
    a = np.zeros((2, 3))
    plan = reduction_plan(a)
    with pytest.raises(ta.InputCountError, match="takes 1"):
        plan.execute(a, a)
    with pytest.raises(ta.InputMismatchError, match="input A: extents"):
        plan.execute(np.zeros((3, 2)))
    with pytest.raises(ta.InputMismatchError, match="input A: dtype"):
        plan.execute(np.zeros((2, 3), np.float32))
    with pytest.raises(ta.InputMismatchError, match="input A: byte strides"):
        plan.execute(np.zeros((3, 2)).T)


def test_scalar_count():
    a = np.zeros((2, 3))
    with pytest.raises(ta.ScalarCountError, match="no gamma"):
        reduction_plan(a).execute(a, gamma=2)
    with pytest.raises(ta.ScalarCountError, match="no addend"):
        reduction_plan(a).execute(a, beta=1)
    perm = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"))
    with pytest.raises(ta.ScalarCountError, match="no beta"):
        perm.execute(a, beta=1)
    with pytest.raises(ta.DTypeError, match="complex"):
        perm.execute(a, alpha=1j)


def test_output_mismatch_and_alias_leave_out_untouched():
    a = np.ones((2, 3))
    plan = reduction_plan(a)
    with pytest.raises(ta.OutputMismatchError, match="extents"):
        plan.execute_into(np.zeros(3), a)
    with pytest.raises(ta.OutputMismatchError, match="dtype"):
        plan.execute_into(np.zeros(2, np.float32), a)
    frozen = np.zeros(2)
    frozen.flags.writeable = False
    with pytest.raises(ta.OutputMismatchError, match="read-only"):
        plan.execute_into(frozen, a)
    big = np.arange(8.0)
    perm = ta.Plan(ta.Operation.permutation(ta.Operand(big[:4], "i"), out_modes="i"))
    before = big.copy()
    with pytest.raises(ta.AliasError, match="input A"):
        perm.execute_into(big[2:6], big[:4])
    np.testing.assert_array_equal(big, before)
    # interleaved slices share a buffer but no element: allowed
    perm2 = ta.Plan(ta.Operation.permutation(
        ta.Operand(big[::2], "i"), out=ta.TensorDescriptor.from_array(big[1::2]), out_modes="i"))
    perm2.execute_into(big[1::2], big[::2])
    assert big[1::2].tolist() == before[::2].tolist()


def test_addend_identical_to_out_accumulates_in_place():
    a = np.ones((2, 3))
    c = np.array([10.0, 20.0])
    plan = reduction_plan(a, c=c)
    assert plan.execute_into(c, a, c, beta=2).tolist() == [23.0, 43.0]


def test_out_of_bounds_layouts_are_refused():
    a = np.arange(10.0)
    bad = np.lib.stride_tricks.as_strided(a, (20,), (8,))
    with pytest.raises(ta.BoundsError, match="input A: extents"):
        ta.sum(bad)
    out = np.zeros(10)
    bad_out = np.lib.stride_tricks.as_strided(out, (20,), (8,), writeable=True)
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(bad_out, "i"), out_modes="i"))
    with pytest.raises(ta.BoundsError, match="out: extents"):
        plan.execute_into(bad_out, np.ones(20))
    assert not out.any()
    with pytest.raises(ta.BoundsError, match=r"reach bytes \[8, 87\] of a 80-byte buffer"):
        ta.strided_view(a, (4,), (3,), offset=1)
    assert ta.strided_view(a, (3,), (3,), offset=1).tolist() == [1.0, 4.0, 7.0]
    assert ta.strided_view(a[::-1], (2, 2), (-1, -5)).tolist() == [[9.0, 4.0], [8.0, 3.0]]


def test_every_error_is_a_tenalg_error_and_a_builtin():
    for name in ("ExpressionError", "DescriptorError", "OperationError", "ExtentError",
                 "InputCountError", "ScalarCountError", "InputMismatchError",
                 "OutputMismatchError", "AliasError", "BoundsError"):
        cls = getattr(ta, name)
        assert issubclass(cls, ta.TenalgError) and issubclass(cls, ValueError)
    assert issubclass(ta.DTypeError, TypeError)
    assert issubclass(ta.IntegerTypeError, ta.DescriptorError)
    assert issubclass(ta.IntegerTypeError, TypeError)
    err = ta.ExtentError("k", 3, 4, "A and B")
    assert "k" in str(err) and "3" in str(err) and "4" in str(err)


def test_unknown_enum_values():
    with pytest.raises(ta.OperationError, match="choose one of"):
        ta.Operation.reduction(ta.Operand(np.zeros(2), "i"), out_modes="", op="mean")
    with pytest.raises(ta.OperationError):
        ta.Operand(np.zeros(2), "i", unary="square")


def test_descriptor_checks():
    with pytest.raises(ta.DescriptorError, match="2 extents but 1 strides"):
        ta.TensorDescriptor((2, 3), (1,), np.float64)
    with pytest.raises(ta.DescriptorError, match="overflows"):
        ta.TensorDescriptor((2**40, 2**40), (2**40, 1), np.float64)
    with pytest.raises(ta.DescriptorError, match="not a multiple"):
        ta.TensorDescriptor.from_array(np.ndarray((2,), np.float32, np.zeros(16, np.uint8),
                                                  0, (6,)))
    d = ta.TensorDescriptor.from_array(np.zeros((2, 3), np.float32).T)
    assert d.extents == (3, 2) and d.strides == (1, 3) and hash(d) == hash(
        ta.TensorDescriptor((3, 2), (1, 3), np.float32))
    assert ta.TensorDescriptor((3, 3), (1, 1), np.float32).is_nonoverlapping() is False


def test_a_complex_compute_type_keeps_the_imaginary_part_of_real_data():
    """Real data computed in complex gave a real output: alpha = 1j's result was cast to
    its real part, zero, with a ComplexWarning (np.einsum(..., dtype=complex) is complex)."""
    a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
    got = ta.contract(a, "ij", b, "jk", "ik", compute_dtype=np.complex128, alpha=1j)
    np.testing.assert_array_equal(got, 1j * (a @ b))
    np.testing.assert_array_equal(
        ta.reduce(a, "ij", "i", compute_dtype="complex128", alpha=2j), 2j * a.sum(1))
    np.testing.assert_array_equal(
        ta.elementwise_binary(a, "ij", a, "ij", "ij", compute_dtype=np.complex128, alpha=1j),
        (1 + 1j) * a)
    single = ta.contract(a.astype(np.float32), "ij", b.astype(np.float32), "jk", "ik",
                         compute_dtype=np.complex64)
    assert single.dtype == np.complex64
    out = np.full((2, 2), 7.0)
    with pytest.raises(ta.OutputTypeError):
        ta.contract(a, "ij", b, "jk", "ik", compute_dtype=np.complex128, alpha=1j, out=out)
    assert (out == 7.0).all()
    for bad in ("foo", 1):
        with pytest.raises(ta.DTypeError, match="compute type"):
            ta.reduce(a, "ij", "i", compute_dtype=bad)


def test_contract_refuses_an_output_mode_in_no_input():
    """A typo ('iz' for 'ik') made a (4, 1) output of row sums."""
    a, b = np.random.rand(4, 5), np.random.rand(5, 3)
    with pytest.raises(ta.OperationError, match="'z' is in no input"):
        ta.contract(a, "ij", b, "jk", "iz")
    c = np.arange(24.0).reshape(4, 3, 2)  # z's extent from C
    operation = ta.Operation.contraction(ta.Operand(a, "ij"), ta.Operand(b, "jk"),
                                         ta.Operand(c, "ikz"), out_modes="ikz")
    for got in (ta.contract(a, "ij", b, "jk", "ikz", c=c, beta=1.0),
                ta.Plan(operation, backend="reference").execute(a, b, c, beta=1.0)):
        np.testing.assert_allclose(got, (a @ b)[:, :, None] + c)  # (the reference raised)


def test_a_plan_of_descriptors_allocates_nothing_of_their_size():
    """The allocator made an array of the output's size to read its strides: a plan of an
    8 TB permutation raised MemoryError, and so did `tenalg explain` of large shapes."""
    huge = ta.TensorDescriptor.contiguous((10**6, 10**6), np.float64)
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(huge, "ij"), out_modes="ji"))
    assert plan.operation.output.extents == (10**6, 10**6)
    assert "cpu" in plan.explain()


def test_scalars_given_as_zero_d_arrays_and_a_bool_after_its_equal_int():
    """A 0-d alpha raised 'unhashable type' from the plan's scalar cache, and a cached
    alpha=1.0 let alpha=True through, which a fresh plan refuses."""
    a = np.ones((4, 5))
    np.testing.assert_array_equal(ta.reduce(a, "ij", "i", alpha=np.array(2.0)), np.full(4, 10.0))
    np.testing.assert_array_equal(ta.permute(a, (1, 0), alpha=np.array(3.0)), np.full((5, 4), 3.0))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out_modes="ji"))
    np.testing.assert_array_equal(plan.execute(a, alpha=np.array(2.0)), np.full((5, 4), 2.0))
    plan.execute(a, alpha=1.0)
    with pytest.raises(ta.DescriptorError, match="must be a number"):
        plan.execute(a, alpha=True)


def test_an_integer_scalar_past_every_float_is_refused_before_anything_is_written():
    """alpha = 10**400 raised OverflowError from a kernel's multiply, after batched dots
    had written their unscaled sums into out (found by the probe of the direct path)."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 40, 50, 3))
    out = np.full((40, 50), 7.0)
    plan = ta.Plan(ta.Operation.contraction(ta.Operand(x, "ijk"), ta.Operand(y, "ijk"),
                                            out=ta.TensorDescriptor.from_array(out),
                                            out_modes="ij"))
    for alpha in (10**400, -(10**309)):
        with pytest.raises(ta.DescriptorError, match="past every float type's range"):
            plan.execute_into(out, x, y, alpha=alpha)
        assert (out == 7.0).all()
    plan.execute_into(out, x, y, alpha=10**300)  # (within float64's range)
    np.testing.assert_allclose(out, 1e300 * np.einsum("ijk,ijk->ij", x, y), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.int64, np.bool_])
def test_front_ends_refuse_views_past_their_buffer_for_every_dtype(dtype):
    """An as_strided view past its buffer: norm read it through NumPy's flat views and
    casts (complex data, float32 once compiled, integers), and integer and bool sums,
    traces and permutations through NumPy's own calls, returning what lay beyond (found
    by the probe of the front ends). Views inside their buffer still compute."""
    buf = np.ones(4, dtype)
    past = np.lib.stride_tricks.as_strided(buf, (50, 50), (buf.itemsize,) * 2)
    for call in (ta.norm, lambda x: ta.sum(x, 0), ta.sum, ta.trace,
                 lambda x: ta.permute(x, (1, 0))):
        for _ in range(2):  # (a second call: the planned, compiled path)
            with pytest.raises(ta.BoundsError):
                call(past)
    inside = np.lib.stride_tricks.as_strided(buf, (3, 2), (buf.itemsize, buf.itemsize))
    assert float(ta.norm(inside)) == pytest.approx(6**0.5)
    np.testing.assert_array_equal(ta.sum(inside, 0), np.sum(inside, 0))
    np.testing.assert_array_equal(ta.permute(inside, (1, 0)), inside.T)


class Strided:
    """An array of another library laid out as NumPy describes one (CuPy's arrays: a
    shape, byte strides and a NumPy dtype)."""

    def __init__(self, data):
        self.shape, self.strides, self.dtype = data.shape, data.strides, data.dtype


def test_descriptors_read_any_array_laid_out_as_numpys():
    """Operand(x) and TensorDescriptor.from_array(x) took NumPy arrays only: a CuPy
    backend's users could not describe their arrays (found by a backend probe)."""
    a = np.zeros((4, 6), np.complex64)[::2, ::-3]
    d = ta.TensorDescriptor.from_array(Strided(a))
    assert (d.extents, d.strides, d.dtype) == ((2, 2), (12, -3), np.complex64)
    assert ta.Operand(Strided(a), "ij").descriptor.strides == (12, -3)

    class Elements:  # torch's strides count elements, and are a method
        shape, dtype = (2,), np.dtype(np.float64)

        def strides(self):
            return (1,)

    for x in (Elements(), [1.0, 2.0], type("NoDtype", (), {"shape": (2,), "strides": (8,)})()):
        with pytest.raises(ta.DescriptorError, match="byte strides and a NumPy dtype"):
            ta.TensorDescriptor.from_array(x)
        with pytest.raises(ta.DescriptorError):
            ta.Operand(x, "i")


def test_plans_take_subclasses_as_ndarrays_and_refuse_masked_arrays():
    """Plan.execute(np.matrix) of a kernel-sized reduction raised Numba's TypingError;
    a masked array was summed with its masked entries, silently (found by a probe of
    NumPy's inputs). The front ends already did this."""
    a = np.random.default_rng(0).random((600, 500))
    plan = reduction_plan(a, out_modes="j")
    np.testing.assert_allclose(plan.execute(np.matrix(a)), a.sum(0))
    np.testing.assert_allclose(plan.execute(np.matrix(a), alpha=2), 2 * a.sum(0))
    with pytest.raises(ta.InputMismatchError, match="masked array"):
        plan.execute(np.ma.MaskedArray(a, mask=a > 0.5))
    sub = type("Sub", (np.ndarray,), {})
    out = np.zeros(500).view(sub)
    assert plan.execute_into(out, a) is out
    np.testing.assert_allclose(out, a.sum(0))
    masked = np.ma.MaskedArray(np.zeros(500))
    with pytest.raises(ta.OutputMismatchError, match="masked array"):
        plan.execute_into(masked, a)
    assert not masked.data.any()


def test_front_ends_refuse_a_masked_out_as_plans_do():
    """Found by a probe: ta.permute and ta.partial_trace wrote a masked ``out``'s data
    through NumPy's path (float data into an ``out`` the kernels do not store, or any
    data into a masked array), where ta.sum and the plans refuse one."""
    rows = np.arange(16.0).reshape(4, 4)
    calls = [lambda out: ta.permute(rows, (1, 0), out=out),
             lambda out: ta.permute(rows.astype(np.int64), (1, 0), out=out),
             lambda out: ta.partial_trace(np.ones((4, 3, 4)), [(0, 2)], out=out),
             lambda out: ta.sum(rows.astype(np.int64), axis=0, out=out)]
    shapes = [(4, 4), (4, 4), (3,), (4,)]
    for call, shape in zip(calls, shapes, strict=True):
        out = np.ma.masked_array(np.full(shape, -1.0))
        with pytest.raises(ta.OutputMismatchError, match="masked array"):
            call(out)
        assert (out.data == -1).all()  # nothing written
    matrix_out = np.asmatrix(np.zeros((4, 4)))  # other subclasses stay outputs
    ta.permute(rows, (1, 0), out=matrix_out)
    np.testing.assert_array_equal(matrix_out, rows.T)


def test_byte_swapped_storage_types_are_named_as_such():
    """'dtype >f8 is not supported; tenalg stores ... float64 ...' read as a
    contradiction (found by a probe of NumPy's inputs)."""
    for dtype in (">f8", ">c16", "<f4" if np.little_endian is False else ">f4"):
        x = np.ones(3, dtype)
        with pytest.raises(ta.DTypeError, match=r"in the other byte order.*newbyteorder"):
            ta.reduce(x, "i", "")
        np.testing.assert_allclose(ta.reduce(x.astype(x.dtype.newbyteorder("=")), "i", ""), 3)


def test_diagonal_checks_its_offset_as_trace_does():
    """ta.diagonal took offset=True as 1 and let a float raise a bare TypeError (its fast
    path skipped the check), where docs/dense.md promises IntegerTypeError."""
    m = np.arange(9.0).reshape(3, 3)
    for offset in (True, 1.0, "1"):
        with pytest.raises(ta.IntegerTypeError):
            ta.diagonal(m, offset=offset)
    assert ta.diagonal(m, offset=np.int64(1)).tolist() == [1.0, 5.0]
