"""tensordot, transpose and einsum_path as NumPy's, and tenalg as a backend of the
tensor-network tools: opt_einsum.contract(..., backend="tenalg"), autoray (quimb's
dispatch), a random 40-tensor network."""

import numpy as np
import opt_einsum
import opt_einsum.testing
import pytest

import tenalg as ta


@pytest.mark.parametrize(("shapes", "axes"), [
    (((3, 4), (4, 5)), 1), (((2, 3, 4), (3, 4, 5)), 2), (((2, 3), (4, 5)), 0),
    (((2, 3, 4), (4, 3, 2)), ([1, 0], [1, 2])), (((2, 3, 4), (4, 5)), (-1, 0)),
    (((2, 3), (3, 2)), ([0, 1], [1, 0])), (((3,), (3,)), 1),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.int64, np.bool_])
def test_tensordot_is_numpys(shapes, axes, dtype):
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-5, 5, size=s).astype(dtype) for s in shapes)
    got, expected = ta.tensordot(a, b, axes), np.tensordot(a, b, axes)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_tensordot_errors_as_numpys():
    a = np.ones((2, 3))
    for axes in (([0], [1]), ([1], [0, 1]), ([1, 1], [0, 0])):
        with pytest.raises(ValueError):
            ta.tensordot(a, a, axes)
        with pytest.raises(ValueError):
            np.tensordot(a, a, axes)
    for error in (IndexError, ValueError):  # NumPy: IndexError
        for axes in (([5], [0]), 3):
            with pytest.raises(error):
                ta.tensordot(a, a, axes)
    with pytest.raises(ValueError):  # NumPy broadcasts no extent 1 here
        ta.tensordot(np.ones((2, 1)), np.ones((3, 2)), ([1], [0]))


def test_transpose_is_numpys_view():
    a = np.arange(24.0).reshape(2, 3, 4)
    for axes in (None, (1, 0, 2), (2, 0, 1)):
        got = ta.transpose(a, axes)
        assert got.base is a.base and got.strides == np.transpose(a, axes).strides
    assert ta.transpose([[1, 2]]).shape == (2, 1)


def test_opt_einsum_contract_runs_on_tenalg(monkeypatch):
    calls = []
    tensordot = ta.tensordot
    monkeypatch.setattr(ta, "tensordot", lambda *a, **k: calls.append(1) or tensordot(*a, **k))
    opt_einsum.backends.dispatch._cached_funcs.pop(("tensordot", "tenalg"), None)
    rng = np.random.default_rng(2)
    eq, shapes = opt_einsum.testing.rand_equation(12, 3, seed=3, d_max=4)
    operands = [rng.standard_normal(s) for s in shapes]
    got = opt_einsum.contract(eq, *operands, backend="tenalg")
    opt_einsum.backends.dispatch._cached_funcs.pop(("tensordot", "tenalg"), None)
    np.testing.assert_allclose(got, opt_einsum.contract(eq, *operands, backend="numpy"),
                               rtol=1e-10)
    assert calls, "opt_einsum did not dispatch to tenalg.tensordot"
    a, b, c = (rng.standard_normal((4, 4)) for _ in range(3))
    np.testing.assert_allclose(opt_einsum.contract("ij,jk,kl->li", a, b, c, backend="tenalg"),
                               np.einsum("ij,jk,kl->li", a, b, c), rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_random_network_of_40_tensors(seed):
    """opt_einsum's random 3-regular network: unicode labels past 52, one call."""
    eq, shapes = opt_einsum.testing.rand_equation(40, 3, seed=seed, d_min=2, d_max=3,
                                                  n_out=2)
    rng = np.random.default_rng(seed)
    operands = [rng.uniform(0.5, 1.0, size=s) for s in shapes]
    expected = opt_einsum.contract(eq, *operands)
    np.testing.assert_allclose(ta.einsum(eq, *operands), expected, rtol=1e-10)
    np.testing.assert_allclose(ta.einsum(eq, *operands, optimize="greedy"), expected,
                               rtol=1e-10)


def test_einsum_path_is_numpys():
    rng = np.random.default_rng(4)
    a, b, c = rng.standard_normal((8, 2)), rng.standard_normal((2, 8)), rng.standard_normal(8)
    for optimize in ("greedy", "optimal", True, False, ["einsum_path", (0, 2), (0, 1)]):
        assert ta.einsum_path("ij,jk,k->i", a, b, c, optimize=optimize) == np.einsum_path(
            "ij,jk,k->i", a, b, c, optimize=optimize)
    assert ta.einsum_path(a, [0, 1], b, [1, 2]) == np.einsum_path(a, [0, 1], b, [1, 2])
    path, report = ta.einsum_path("ij,jk,k->i", a, b, c, optimize="dp")
    assert path[0] == "einsum_path" and "Complete contraction" in report
    np.testing.assert_allclose(ta.einsum("ij,jk,k->i", a, b, c, optimize=path),
                               np.einsum("ij,jk,k->i", a, b, c), rtol=1e-12)
    eq, shapes = opt_einsum.testing.rand_equation(30, 3, seed=5, d_max=3)
    operands = [np.ones(s) for s in shapes]
    path, report = ta.einsum_path(eq, *operands)
    assert len(path) == 30 and "Complete contraction" in report  # 29 pairs after the tag


def test_autoray_recipe():
    """docs/einsum.md's recipe: autoray (quimb, cotengra) dispatches to tenalg."""
    autoray = pytest.importorskip("autoray")
    a, b = np.random.default_rng(6).standard_normal((2, 3, 3))
    assert np.allclose(autoray.do("tensordot", a, b, 1, like="tenalg"), a @ b)
    assert np.allclose(autoray.do("einsum", "ij,jk->ik", a, b, like="tenalg"), a @ b)
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return ta.tensordot(*args, **kwargs)

    autoray.register_function("numpy", "tensordot", counted)
    try:  # every numpy array now contracts on tenalg (quimb's contractions included)
        assert np.allclose(autoray.do("tensordot", a, b, 1), a @ b) and calls
    finally:
        autoray.register_function("numpy", "tensordot", np.tensordot)


def test_tensordot_of_times_is_numpys():
    """np.tensordot takes timedelta64 (through dot); ta.tensordot raised einsum's
    'invalid data type' (found by a probe of NumPy's inputs)."""
    t = np.arange(4).reshape(2, 2).astype("m8[s]")
    for b in (t, np.arange(4).reshape(2, 2)):
        got = ta.tensordot(t, b, axes=([1], [1]))
        want = np.tensordot(t, b, axes=([1], [1]))
        assert got.dtype == want.dtype and np.array_equal(got, want)
