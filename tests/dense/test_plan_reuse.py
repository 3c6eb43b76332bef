"""A plan made once and run many times.

A plan on the Numba kernels makes its kernel call on its first run (per pattern of unit
and zero scalars, and per thread count) and then runs it on the arrays themselves. These
tests run one plan on several arrays of its layout (other buffers, views into larger
ones with reversed axes, read-only inputs, other strides on extent-1 axes) with changing
scalars and thread counts, and compare every result with NumPy.
"""

import re

import numpy as np
import pytest

import tenalg as ta
from tenalg.backends import cpu as cpu_backend
from tenalg.kernels import cpu


def reversed_view(rng, shape, dtype=np.float64, read_only=False):
    """A view of ``shape`` into a larger buffer: axis 0 reversed, axis 1 stepped by 2."""
    base = rng.standard_normal((shape[0] + 3, 2 * shape[1] + 1, *shape[2:])).astype(dtype)
    view = base[shape[0] + 1:1:-1, 1::2][:, : shape[1]]
    view.flags.writeable = not read_only
    return view


def test_permutation_plan_runs_on_other_arrays_and_scalars():
    rng = np.random.default_rng(0)
    first = reversed_view(rng, (70, 40, 3))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(first, "ijk"), out=np.float64,
                                            out_modes="kji", order="C"), backend="cpu")
    for k, alpha in enumerate([None, 2.0, None, -0.5, 1]):
        a = reversed_view(rng, (70, 40, 3), read_only=k % 2 == 1)
        out = np.full((3, 40, 70), np.nan)
        plan.execute_into(out, a, alpha=alpha)
        np.testing.assert_array_equal(out, (1 if alpha is None else alpha) * a.transpose(2, 1, 0))
    # two codes, alpha 1 (a plain copy) and alpha != 1 (scaled), on however many threads the
    # calls found free (a kernel compiling off the thread can take one core)
    assert len({pattern for pattern, _threads in plan.runner._calls}) == 2


def test_reduction_plan_runs_with_other_addends_and_betas():
    rng = np.random.default_rng(1)
    a0 = reversed_view(rng, (30, 20))
    c0 = rng.standard_normal(20)
    plan = ta.Plan(ta.Operation.reduction(ta.Operand(a0, "ij"), ta.Operand(c0, "j"),
                                          out=np.float64, out_modes="j"), backend="cpu")
    for alpha, beta in [(1, 0), (2, 1), (1, 0.5), (3, 0), (1, 1)]:
        a, c = reversed_view(rng, (30, 20)), rng.standard_normal(20)
        out = np.full(20, np.nan)
        plan.execute_into(out, a, c, alpha=alpha, beta=beta)
        want = alpha * a.sum(axis=0) + (beta * c if beta else 0)
        np.testing.assert_allclose(out, want, rtol=1e-13)
    d = rng.standard_normal(20)
    want = a.sum(axis=0) + 2 * d
    plan.execute_into(d, a, d, beta=2)  # in place: D = sum A + 2 D
    np.testing.assert_allclose(d, want, rtol=1e-13)


def test_elementwise_plan_runs_on_other_broadcast_arrays():
    rng = np.random.default_rng(2)
    shapes = [(50, 60), (60,), (50,)]
    first = [rng.standard_normal(s) for s in shapes]
    operands = [ta.Operand(x, m) for x, m in zip(first, ["ij", "j", "i"], strict=True)]
    plan = ta.Plan(ta.Operation.elementwise_trinary(*operands, out=np.float64, out_modes="ij"),
                   backend="cpu")
    for alpha, beta, gamma in [(1, 1, 1), (2, 3, 0.5), (1, 1, 1), (1, -1, 2)]:
        a, b, c = (rng.standard_normal(s) for s in shapes)
        out = np.full((50, 60), np.nan)
        plan.execute_into(out, a, b, c, alpha=alpha, beta=beta, gamma=gamma)
        np.testing.assert_allclose(out, alpha * a + beta * b + gamma * c[:, None], rtol=1e-14)


def test_plan_calls_follow_the_thread_count(monkeypatch):
    """A parallel-size permutation run on all threads and inside one_thread(): each
    thread count gets its own call, both right."""
    # every core free, whatever else runs on the machine: the count is numba's setting
    monkeypatch.setattr("tenalg.kernels.cpu.threads.free_cores", lambda ours=0, now=None: 1 << 10)
    # and no call after a pause (the checks between them) on one thread for that alone
    monkeypatch.setattr("tenalg.kernels.cpu.threads._IDLE_SERIAL_WORK", 0)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1024, 640))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ij"), out=np.float64,
                                            out_modes="ji", order="C"), backend="cpu")
    np.testing.assert_array_equal(plan.execute(a), a.T)
    with cpu.one_thread():
        np.testing.assert_array_equal(plan.execute(a, alpha=2), 2 * a.T)
        np.testing.assert_array_equal(plan.execute(a), a.T)
    np.testing.assert_array_equal(plan.execute(a), a.T)
    assert len(plan.runner._calls) == (3 if cpu.thread_count() > 1 else 2)


@pytest.mark.parametrize("shape, rows", [((6, 5, 7, 16), True), ((6, 5, 7, 2), False)])
def test_row_permutations_on_one_thread_are_numpys_copy(monkeypatch, shape, rows):
    """On one thread, a permutation moving whole rows of 128 bytes or more (the innermost
    axis shared) is NumPy's copy of the transpose, as fast there; shorter rows, scaled
    copies and two threads take the kernel. Values are the transpose's either way."""
    monkeypatch.setattr("tenalg.kernels.cpu.threads.free_cores", lambda ours=0, now=None: 1 << 10)
    a = reversed_view(np.random.default_rng(5), shape)
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ijkl"), out=np.float64,
                                            out_modes="kijl", order="C"), backend="cpu")
    want = a.transpose(2, 0, 1, 3)
    with cpu.one_thread():
        np.testing.assert_array_equal(plan.execute(a), want)
        np.testing.assert_array_equal(plan.execute(a, alpha=-1.0), -want)
    np.testing.assert_array_equal(plan.execute(a), want)
    copies = [key for key, call in plan.runner._calls.items() if call is cpu_backend._ROWS]
    assert copies == ([(((True, False),), 1)] if rows else [])
    assert ("NumPy's copy of whole rows" in plan.explain()) == rows


def test_two_pass_reduction_plan_runs_again():
    """A product over axes (0, 2) of a C array runs in two passes (no single call)."""
    rng = np.random.default_rng(4)
    plan = None
    for _ in range(3):
        a = 1 + rng.random((40, 30, 8)) / 8
        plan = plan or ta.Plan(ta.Operation.reduction(ta.Operand(a, "ijk"), out=np.float64,
                                                      out_modes="j", op="product"),
                               backend="cpu")
        np.testing.assert_allclose(plan.execute(a), a.prod(axis=(0, 2)), rtol=1e-13)
    assert set(plan.runner._calls.values()) == {None}  # one per thread count seen


@pytest.mark.parametrize("stride", [8, 4096, -24])
def test_plan_runs_arrays_with_other_strides_on_extent_one_axes(stride):
    rng = np.random.default_rng(5)
    a0 = rng.standard_normal((5, 1, 7))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a0, "ijk"), out=np.float64,
                                            out_modes="kji", order="C"), backend="cpu")
    plan.execute(a0)
    base = rng.standard_normal(5 * 7)
    a = np.lib.stride_tricks.as_strided(base, (5, 1, 7), (56, stride, 8), writeable=False)
    np.testing.assert_array_equal(plan.execute(a), a.transpose(2, 1, 0))


def test_diagonal_plan_runs_on_other_reversed_arrays():
    """A diagonal sum over a reversed axis: the diagonal's lowest address is not its
    array's, so the call must place element 0 by the array's own layout."""
    rng = np.random.default_rng(6)
    plan = None
    for _ in range(3):
        a = rng.standard_normal((9, 9, 5))[::-1]
        plan = plan or ta.Plan(ta.Operation.reduction(ta.Operand(a, "iij"), out=np.float64,
                                                      out_modes="j"), backend="cpu")
        np.testing.assert_allclose(plan.execute(a), np.einsum("iij->j", a), rtol=1e-13)


@pytest.mark.parametrize("make, says", [
    (lambda f: ta.Operation.permutation(ta.Operand(f, "ij"), out=np.float16, out_modes="ji",
                                        order="C"),
     r"converted in (8 x 8|16 x 16) register blocks"),
    (lambda f: ta.Operation.permutation(ta.Operand(f, "ij", unary="negate"), out=np.float32,
                                        out_modes="ji", order="C"), "compute-type buffer"),
    (lambda f: ta.Operation.permutation(ta.Operand(f.reshape(64, 64, 4096), "ijk"),
                                        out=np.float32, out_modes="jik", order="C"),
     "rows of up to 4096 elements"),
    (lambda f: ta.Operation.reduction(ta.Operand(f, "ij"), out=np.float32, out_modes="i"),
     "row of 4096 summed whole"),
    (lambda f: ta.Operation.reduction(ta.Operand(f.reshape(-1)[:1 << 18].reshape(512, 64, 8),
                                                 "ijk"),
                                      out=np.float32, out_modes="j", op="product"),
     "two passes"),
    (lambda f: ta.Operation.elementwise_binary(ta.Operand(f, "ij"), ta.Operand(f[0], "j"),
                                               out=np.float32, out_modes="ij"), "one pass"),
])
def test_explain_names_the_kernel_call(make, says):
    """explain() says which Numba kernel a plan runs and how (without running it); register
    blocks hold a vector's lanes: 8 float32 with AVX2, 16 with AVX-512."""
    f = np.zeros((4096, 4096), np.float32)
    text = ta.Plan(make(f), backend="cpu").explain()
    last = text.splitlines()[-1]
    assert re.search(says, last) and ("thread" in last or says == "two passes"), text


def test_new_permutations_of_a_megabyte_or_more_start_on_a_cache_line():
    """The permutation kernel's new outputs start on a 64-byte line from 1 MB on, hold the
    right values and can be written; smaller ones, and every other plan's output (C order
    and the inputs' order alike), are NumPy's own arrays."""
    rng = np.random.default_rng(0)
    for shape, dtype, lined in (((64, 64, 64), np.float64, True), ((128, 1024), np.float32,
                                                                     False)):
        a = rng.standard_normal(shape).astype(dtype)
        got = ta.permute(a, (2, 1, 0) if a.ndim == 3 else (1, 0))
        assert np.array_equal(got, a.T) and got.flags.c_contiguous and got.flags.writeable
        assert got.flags.owndata == (not lined)  # small: NumPy's own, aligned as it falls
        assert got.ctypes.data % 64 == 0 or not lined
        got[...] = 1.0  # its own memory
        assert (a != 1.0).all()
    a = rng.standard_normal((512, 512, 2)).transpose(1, 0, 2)  # K order: a transposed buffer
    op = ta.Operation.elementwise_binary(
        ta.Operand(ta.TensorDescriptor.from_array(a), "ijk"),
        ta.Operand(ta.TensorDescriptor.from_array(a), "ijk"), out_modes="ijk", op="add")
    got = ta.Plan(op).execute(a, a)
    assert np.array_equal(got, a + a) and got.strides == a.strides
    assert got.base.flags.owndata  # NumPy's own buffer, transposed to the inputs' order
    product = ta.Plan(ta.Operation.contraction(
        ta.Operand(a[:, :, 0], "ij"), ta.Operand(a[:, :, 0], "jk"), out_modes="ik"))
    got = product.execute(a[:, :, 0], a[:, :, 0])
    assert np.allclose(got, a[:, :, 0] @ a[:, :, 0])
    assert (got if got.base is None else got.base).flags.owndata  # a GEMM's: NumPy's own


def test_cpu_plans_check_the_common_call_in_one_pass():
    """A plan on the Numba kernels offers its runner's default-scalar call to the plan's
    one-pass checks, as the direct backend's plans do (``plan.single``, and ``execute``
    and ``execute_into`` shadowed): results as NumPy's, new or into ``out``; an ``out``
    that overlaps the input, is read-only or of another layout still gets the general
    checks' error, with nothing written."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((48, 40, 8))
    plan = ta.Plan(ta.Operation.permutation(ta.Operand(a, "ijk"), out_modes="kji", order="C"),
                   backend="cpu")
    assert plan.single is not None and "execute_into" in vars(plan)
    want = np.ascontiguousarray(a.transpose(2, 1, 0))
    np.testing.assert_array_equal(plan.single(a), want)
    np.testing.assert_array_equal(plan.execute(a), want)
    out = np.full(want.shape, np.nan)
    assert plan.execute_into(out, a) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(plan.execute_into(out, a, alpha=2.0), 2 * want)
    buffer = np.concatenate([a.ravel(), np.zeros(a.size)])
    inside = buffer[:a.size].reshape(a.shape)
    overlapping = buffer[a.size // 2:a.size // 2 + a.size].reshape(want.shape)
    before = buffer.copy()
    with pytest.raises(ta.AliasError):
        plan.execute_into(overlapping, inside)
    np.testing.assert_array_equal(buffer, before)
    frozen = np.zeros(want.shape)
    frozen.flags.writeable = False
    with pytest.raises(ta.OutputMismatchError, match="read-only"):
        plan.execute_into(frozen, a)
    with pytest.raises(ta.OutputMismatchError, match="strides"):
        plan.execute_into(np.zeros(want.shape, order="F"), a)
    # one input only: a plan of two has no one-array shortcut (a probe found one that
    # raised NumPy's ValueError), and runs its pair through the one-pass checks
    b = rng.standard_normal(a.shape)
    pair = ta.Plan(ta.Operation.elementwise_binary(ta.Operand(a, "ijk"), ta.Operand(b, "ijk"),
                                                   out_modes="ijk"), backend="cpu")
    assert pair.single is None
    np.testing.assert_array_equal(pair.execute(a, b), a + b)
