"""The NumPy-named front ends take what NumPy takes and give what NumPy gives (issue 32,
item 3): array-likes, every dtype, NumPy's keywords, its casting refusals."""

import numpy as np
import pytest

import tenalg as ta
from tenalg import OutputTypeError


class ArrayLike:
    """Not an ndarray, but ``np.asarray`` reads it (as it reads torch tensors)."""

    def __init__(self, data):
        self.data = np.asarray(data)

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ta.bfloat16,
                                   np.complex64, np.complex128, np.int64, np.bool_])
def test_norm_of_nothing_is_zero(dtype):
    empty = np.empty((0, 3), dtype)
    assert float(ta.norm(empty)) == 0.0 == np.linalg.norm(empty.ravel())
    assert ta.norm_host(empty) == 0.0 and isinstance(ta.norm_host(empty), float)


def test_norm_of_integers_lists_and_objects():
    assert ta.norm([3, 4]).dtype == np.float64 and float(ta.norm([3, 4])) == 5.0
    assert float(ta.norm(np.array([3, 4], object))) == 5.0
    assert float(ta.norm(np.array([True, True, True, True]))) == 2.0


def test_sum_of_a_0d_array_over_axis_0_or_minus_1_is_its_value():
    z = np.array(2.5)
    for axis in (0, -1, None, ()):
        assert ta.sum(z, axis=axis).shape == () and float(ta.sum(z, axis=axis)) == 2.5
    with pytest.raises(np.exceptions.AxisError):  # as NumPy: a tuple (0,) is out of range
        ta.sum(z, axis=(0,))
    with pytest.raises(ta.DescriptorError):
        ta.sum(z, axis=1)


def test_sum_keepdims_dtype_and_out():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axis in (None, 1, (0, 2)):
        got = ta.sum(a, axis=axis, keepdims=True)
        expected = np.sum(a, axis=axis, keepdims=True)
        assert got.shape == expected.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, expected)
        wide = ta.sum(a, axis=axis, dtype=np.float64)
        assert wide.dtype == np.float64
        np.testing.assert_array_equal(wide, np.sum(a, axis=axis, dtype=np.float64))
    assert ta.sum(a, dtype=np.complex128).dtype == np.complex128
    # complex data widened: added in complex128 (a float64 compute type was refused)
    z = (a + 1j * a[::-1]).astype(np.complex64)
    for axis in (None, 1, (0, 2)):
        wide = ta.sum(z, axis=axis, dtype=np.complex128)
        assert wide.dtype == np.complex128
        np.testing.assert_array_equal(wide, np.sum(z, axis=axis, dtype=np.complex128))
    assert ta.trace(z[0], dtype=np.complex128) == np.trace(z[0], dtype=np.complex128)
    with pytest.raises(ta.DTypeError, match="is real but an input is complex"):
        ta.sum(z, compute_dtype=np.float64)
    # a narrowing dtype adds in the narrow type, as NumPy does (NumPy's own sum)
    x = np.array([1e8, 1.0, -1e8])
    assert ta.sum(x, dtype=np.float32) == np.sum(x, dtype=np.float32)
    out = np.full((2, 1, 4), np.nan)
    assert ta.sum(a, axis=1, keepdims=True, out=out) is out
    np.testing.assert_array_equal(out, np.sum(a, axis=1, keepdims=True))
    assert ta.sum(a, axis=0, out=np.zeros((3, 4), np.float16)).dtype == np.float16
    for shape in ((2, 4), (2, 3, 4), (2, 1, 4, 1)):  # refused as NumPy refuses them
        wrong = np.zeros(shape, np.float32)
        with pytest.raises(ValueError):
            np.sum(a, axis=1, keepdims=True, out=wrong)
        with pytest.raises(ta.OutputMismatchError, match="keepdims"):
            ta.sum(a, axis=1, keepdims=True, out=wrong)
        assert not wrong.any()


@pytest.mark.parametrize("dtype", [np.float32, np.complex128, np.int16])
def test_sum_with_initial_and_where_is_numpys(dtype):
    a = (np.arange(24) - 7).reshape(2, 3, 4).astype(dtype)
    where = np.arange(4) % 3 != 1  # broadcast against a, as NumPy's where= is
    for kwargs in ({"initial": 5}, {"where": where}, {"initial": -2, "where": where},
                   {"axis": 1, "where": where}, {"axis": (0, 2), "initial": 1,
                                                 "keepdims": True}):
        expected = np.sum(a, **kwargs)
        got = ta.sum(a, **kwargs)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
    out = np.full(4, 9, dtype)
    assert ta.sum(a, axis=(0, 1), where=where, out=out) is out
    np.testing.assert_array_equal(out, np.sum(a, axis=(0, 1), where=where))
    with pytest.raises(ta.OperationError, match="neither initial nor where"):
        ta.sum(a, initial=1, compute_dtype=np.float64)


def test_sum_of_integers_and_bool_is_numpys_exactly():
    big = np.full(4, 2**62, np.int64)
    assert ta.sum(big) == np.sum(big)  # wraps around as NumPy's does
    assert ta.sum(big).dtype == np.int64
    b = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(ta.sum(b, axis=0), np.sum(b, axis=0))
    assert ta.sum(b).dtype == np.sum(b).dtype
    small = np.arange(10, dtype=np.int8)
    assert ta.sum(small).dtype == np.sum(small).dtype and ta.sum_host(small) == 45
    assert ta.sum(small, dtype=np.int8) == np.sum(small, dtype=np.int8)


def test_trace_offset_dtype_out():
    a = np.arange(20.0).reshape(4, 5)
    for offset in (-5, -1, 0, 1, 3, 7):
        assert float(ta.trace(a, offset=offset)) == np.trace(a, offset)
        assert float(ta.trace(a.T, 1, 0, offset=offset)) == np.trace(a.T, offset, 1, 0)
    c = np.arange(60).reshape(3, 4, 5)
    for offset in (-1, 0, 2):
        np.testing.assert_array_equal(ta.trace(c, 0, 2, offset=offset),
                                      np.trace(c, offset, 0, 2))
    assert ta.trace(a, dtype=np.complex64).dtype == np.trace(a, dtype=np.complex64).dtype
    assert ta.trace(a.astype(np.float32), dtype=np.float64).dtype == np.float64
    for x in (c, c.astype(np.float32)):  # NumPy's trace, the kernels'
        out = np.zeros(5)
        assert ta.trace(x, 0, 1, out=out) is out
        np.testing.assert_array_equal(out, np.trace(c, 0, 0, 1))
    assert ta.trace(np.eye(3, dtype=np.int8)).dtype == np.trace(np.eye(3, dtype=np.int8)).dtype


def test_array_likes_are_read_as_numpy_reads_them():
    rows = [[1.0, 2.0], [3.0, 4.0]]
    for x in (rows, ArrayLike(rows), tuple(map(tuple, rows))):
        assert ta.sum(x).tolist() == 10.0
        assert float(ta.trace(x)) == 5.0
        assert ta.diagonal(x).tolist() == [1.0, 4.0]
        assert ta.permute(x, (1, 0)).tolist() == [[1.0, 3.0], [2.0, 4.0]]
        assert float(ta.norm(x)) == pytest.approx(np.sqrt(30.0))
        assert ta.partial_trace(x, [(0, 1)]).tolist() == 5.0
    assert ta.permute([[1, 2], [3, 4]]).tolist() == [[1, 3], [2, 4]]  # axes None: reversed
    assert ta.sum(3) == 3 and ta.sum(2.5).dtype == np.float64


def test_a_subclass_is_read_as_its_base_array():
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])  # np.sum would keep its sums 2-D
    for result, expected in ((ta.sum(m, axis=0), [4.0, 6.0]), (ta.sum(m), 10.0),
                             (ta.trace(m), 5.0), (ta.einsum("ij->j", m), [4.0, 6.0]),
                             (ta.einsum("ij,jk->ik", m, m), [[7.0, 10.0], [15.0, 22.0]]),
                             (ta.permute(m, (1, 0)), [[1.0, 3.0], [2.0, 4.0]])):
        assert type(result) is np.ndarray and result.tolist() == expected
    for offset in (0, 1, -1):  # NumPy's own view: np.matrix's diagonal is 1-D (was (1, n))
        got, want = ta.diagonal(m, offset=offset), np.diagonal(m, offset)
        assert type(got) is type(want) and got.shape == want.shape
        assert got.tolist() == want.tolist()


def test_a_masked_array_hiding_entries_is_refused_and_one_hiding_none_is_its_data():
    rows = [[1.0, 2.0], [3.0, 4.0]]
    hidden = np.ma.masked_array(rows, mask=[[False, True], [False, False]])
    calls = [lambda x: ta.sum(x), lambda x: ta.sum(x, axis=0), lambda x: ta.trace(x),
             lambda x: ta.partial_trace(x, [(0, 1)]), lambda x: ta.permute(x, (1, 0)),
             lambda x: ta.norm(x), lambda x: ta.einsum("ij->", x),
             lambda x: ta.einsum("ij,jk->ik", rows, x),
             lambda x: ta.contract(rows, "ij", x, "jk", "ik"),
             lambda x: ta.elementwise_binary(x, "ij", rows, "ij", "ij"),
             lambda x: ta.reduce(x, "ij", "i")]
    for call in calls:
        with pytest.raises(ta.DTypeError, match="masked entries") as error:
            call(hidden)
        assert isinstance(error.value, TypeError)
    visible = np.ma.masked_array(rows, mask=False)
    for call in calls:
        np.testing.assert_array_equal(call(visible), call(np.array(rows)))
    assert np.ma.getmaskarray(ta.diagonal(hidden)).tolist() == [False, False]  # a view


def test_torch_tensors_are_read_as_numpy_reads_them():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    np.testing.assert_array_equal(ta.sum(t, axis=0), np.sum(t.numpy(), axis=0))
    assert float(ta.trace(t)) == 15.0
    np.testing.assert_array_equal(ta.permute(t, (1, 0)), t.numpy().T)


@pytest.mark.parametrize("dtype", [np.int64, np.uint16, np.bool_, np.longdouble, object])
def test_data_movement_of_any_dtype_is_exact(dtype):
    a = (np.arange(24) % 7).astype(dtype).reshape(2, 3, 4)
    got = ta.permute(a, (2, 0, 1))
    assert got.dtype == a.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, np.transpose(a, (2, 0, 1)))
    np.testing.assert_array_equal(ta.diagonal(a, 1, 2), np.diagonal(a, 0, 1, 2))
    out = np.empty((4, 2, 3), a.dtype)
    assert ta.permute(a, (2, 0, 1), out=out) is out
    np.testing.assert_array_equal(out, np.transpose(a, (2, 0, 1)))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_an_out_that_is_part_of_the_input_gets_numpys_answer(dtype):
    """NumPy's sum, trace and transpose-copy write through out= views of their input as
    if from a temporary; so do tenalg's (its plans and cuTENSOR-style calls refuse)."""
    x = (np.arange(16) - 5.5).reshape(4, 4).astype(dtype)
    calls = [(lambda a: ta.sum(a, axis=0, out=a[0]), lambda a: np.sum(a, 0, out=a[0])),
             (lambda a: ta.sum(a, 1, out=a[:, 2]), lambda a: np.sum(a, 1, out=a[:, 2])),
             (lambda a: ta.sum(a, 0, keepdims=True, out=a[1:2]),
              lambda a: np.sum(a, 0, keepdims=True, out=a[1:2])),
             (lambda a: ta.trace(a.reshape(2, 2, 4), 0, 1, out=a[3]),
              lambda a: np.trace(a.reshape(2, 2, 4), 0, 0, 1, out=a[3])),
             (lambda a: ta.trace(a.reshape(2, 2, 4), 0, 1, offset=1, out=a[0]),
              lambda a: np.trace(a.reshape(2, 2, 4), 1, 0, 1, out=a[0])),
             (lambda a: ta.partial_trace(a.reshape(2, 2, 4), [(0, 1)], out=a[::-1, 1]),
              lambda a: np.trace(a.reshape(2, 2, 4), 0, 0, 1, out=a[::-1, 1])),
             (lambda a: ta.permute(a, (1, 0), out=a), lambda a: np.copyto(a, a.T.copy())),
             (lambda a: ta.permute(a, (1, 0), alpha=2, out=a),
              lambda a: np.copyto(a, 2 * a.T))]
    for _ in range(2):  # the first call plans, the second runs the cached plan
        for tenalg_call, numpy_call in calls:
            got, expected = x.copy(), x.copy()
            tenalg_call(got), numpy_call(expected)
            np.testing.assert_array_equal(got, expected)
    with pytest.raises(ta.AliasError, match="shares memory"):
        ta.contract(x, "ij", x, "jk", "ik", out=x)


def test_an_out_of_the_wrong_kind_raises_before_writing():
    """A complex result into a real out= (NumPy: a TypeError under its casting rule) is a
    OutputTypeError, an OutputMismatchError and a TypeError; nothing is written."""
    z = (1 + 2j) * np.ones((2, 3))
    calls = [lambda out: ta.permute(z, (1, 0), out=out),
             lambda out: ta.sum(z.T, axis=1, out=out[:, 0]),
             lambda out: ta.trace(np.stack([z.T] * 3), 0, 2, out=out[:, 0]),
             lambda out: ta.partial_trace(np.stack([z.T] * 3), [(0, 2)], out=out[:, 0])]
    for call in calls:
        out = np.full((3, 2), 7.0)
        with pytest.raises(OutputTypeError) as info:
            call(out)
        assert isinstance(info.value, ta.OutputMismatchError)
        assert isinstance(info.value, TypeError)
        assert (out == 7.0).all()
    ints = np.zeros(3, np.int64)
    with pytest.raises(OutputTypeError, match="NumPy's sum and trace would cast it unsafely"):
        ta.sum(np.ones((2, 3)), axis=0, out=ints)  # (NumPy's sum casts its out= so)
    with pytest.raises(OutputTypeError):  # integers into bool: NumPy's sum, refused alike
        ta.sum(np.ones((2, 3), np.int64), axis=0, out=np.zeros(3, bool))
    with pytest.raises(OutputTypeError):
        ta.permute(np.ones((2, 3), np.int64), (1, 0), out=np.zeros((3, 2), bool))


def test_axis_errors_are_numpys_too():
    with pytest.raises(np.exceptions.AxisError) as info:
        ta.sum(np.ones((2, 3)), axis=2)
    assert isinstance(info.value, ta.DescriptorError)
    with pytest.raises(np.exceptions.AxisError):
        ta.trace(np.ones((2, 3)), 0, 2)
    with pytest.raises(np.exceptions.AxisError):
        ta.diagonal(np.ones((2, 3)), 0, 5)


def test_an_axis_or_offset_that_is_not_an_integer_is_numpys_type_error():
    a = np.ones((3, 3))
    calls = [lambda: ta.sum(a, axis=True), lambda: ta.sum(a, axis=(0, 1.0)),
             lambda: ta.permute(a, (True, False)), lambda: ta.trace(a, 0, 1.0),
             lambda: ta.trace(a, offset=1.5), lambda: ta.partial_trace(a, [(0, True)])]
    for call in calls:
        with pytest.raises(ta.IntegerTypeError) as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, ta.DescriptorError)


def test_the_plan_front_ends_refuse_an_out_of_the_wrong_kind_too():
    """contract, reduce and the elementwise front ends check out= as the NumPy-named ones
    do (the plan layer would cast a complex result to real with a ComplexWarning)."""
    z, x = (1 + 2j) * np.ones((2, 3)), np.ones((3, 2))
    calls = [(lambda out: ta.contract(z, "ij", x, "jk", "ik", out=out), (2, 2)),
             (lambda out: ta.reduce(z, "ij", "i", out=out), (2,)),
             (lambda out: ta.elementwise_binary(z, "ij", x.T, "ij", "ij", out=out), (2, 3))]
    for call, shape in calls:
        out = np.full(shape, 7.0)
        with pytest.raises(OutputTypeError):
            call(out)
        assert (out == 7.0).all()
        assert call(np.zeros(shape, np.complex64)).dtype == np.complex64  # same kind: fine


def test_fields_of_structured_arrays_in_and_out():
    """A field of a structured array has byte strides that are no multiple of its item
    size (12 for a float64 after an int32): NumPy takes it as an input and as out=, and
    so do the front ends (through copies: descriptors count strides in elements)."""
    record = np.dtype([("n", "i4"), ("x", "f8")])
    fields = np.zeros(12, record)
    fields["x"] = np.arange(12.0)
    f = fields["x"].reshape(3, 4)[:, ::-1]
    assert f.strides[1] % 8
    for got, expected in ((ta.sum(f), np.sum(f)), (ta.sum(f, axis=0), f.sum(axis=0)),
                          (ta.trace(f), np.trace(f)), (ta.permute(f, (1, 0)), f.T),
                          (ta.partial_trace(f[:, :3], [(0, 1)]), np.trace(f[:, :3])),
                          (ta.diagonal(f), np.diagonal(f))):
        np.testing.assert_array_equal(got, expected)
    outs = np.zeros(4, record)
    assert ta.sum(f, axis=0, out=outs["x"]) is not None
    np.testing.assert_array_equal(outs["x"], f.sum(axis=0))
    assert (outs["n"] == 0).all()  # the other field untouched
    squares = np.zeros((4, 3), record)
    ta.permute(f, (1, 0), out=squares["x"])
    np.testing.assert_array_equal(squares["x"], f.T)
    held = outs["x"]
    held.flags.writeable = False
    with pytest.raises(ta.OutputMismatchError, match="read-only"):
        ta.sum(f, axis=0, out=held)


class Index:
    """An integer to NumPy (``operator.index``), as axis arguments may be."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_axes_are_what_numpy_reads_as_integers():
    a = np.arange(24.0).reshape(2, 3, 4)
    for axis in (np.array(1), Index(1), np.int8(1), (Index(0), np.array(2))):
        np.testing.assert_array_equal(ta.sum(a, axis=axis), np.sum(a, axis=axis))
    np.testing.assert_array_equal(ta.sum(np.array(2.0), axis=np.array(0)), 2.0)
    np.testing.assert_array_equal(ta.trace(a[0], 0, np.array(1)), np.trace(a[0], 0, 0, 1))
    np.testing.assert_array_equal(ta.partial_trace(a[:, :2, :2], [(Index(1), np.array(2))]),
                                  np.trace(a[:, :2, :2], 0, 1, 2))
    for axes in ((np.array(2), 0, Index(1)), (Index(2), 0, 1)):
        np.testing.assert_array_equal(ta.permute(a, axes), np.transpose(a, axes))
    for bad in (1.0, True, "1", (0, 1.5)):
        with pytest.raises(ta.IntegerTypeError):
            ta.sum(a, axis=bad)
    with pytest.raises(ta.IntegerTypeError):
        ta.permute(a, (0.0, 1, 2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int64])
def test_permute_of_real_data_times_a_complex_alpha_is_complex(dtype):
    """As ``np.transpose(a) * 1j``, for every real dtype (a float one raised DTypeError:
    the kernels' compute type was real)."""
    a = np.arange(6).reshape(2, 3).astype(dtype)
    got = ta.permute(a, (1, 0), alpha=1j)
    expected = np.transpose(a) * 1j
    assert got.dtype == expected.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(OutputTypeError):
        ta.permute(a, (1, 0), alpha=1j, out=np.zeros((3, 2)))


def test_a_sum_reads_reversed_summed_axes_forwards():
    """Summed axes with negative strides are planned on the flipped view (in memory
    order: the strided path had taken 5x NumPy's time); kept axes stay as they are."""
    from tenalg.api import _sum_plan

    rng = np.random.default_rng(2)
    a = rng.standard_normal((40, 30, 20))
    for view in (a[::-1], a[::-1, ::-2, ::-1], a[:, ::-1].transpose(2, 0, 1)):
        for axis in (None, 0, 1, (0, 2), -1):
            got = ta.sum(view, axis=axis)
            np.testing.assert_allclose(got, np.sum(view, axis=axis), rtol=1e-12, atol=1e-12)
            plan, select = _sum_plan((view,), None, axis, None, view.dtype)
            summed = range(view.ndim) if axis is None else np.atleast_1d(axis) % view.ndim
            strides = plan.operation.inputs[0].descriptor.strides
            assert all(strides[k] > 0 for k in summed)
            assert select is None or all(view.strides[k] < 0 for k, s in enumerate(select)
                                         if s.step)
