"""Distributed TSQR rounding of one train against single-process tt.round."""

import numpy as np
import pytest

pytest.importorskip("distributed")

from tenalg import tt  # noqa: E402
from tenalg.distributed import DistributedTrain  # noqa: E402
from tenalg.distributed import train as train_module  # noqa: E402
from tenalg.distributed.measure import bytes_moved  # noqa: E402
from tenalg.errors import OperationError  # noqa: E402


def _rel(x, y):
    return np.linalg.norm(x.to_dense() - y.to_dense()) / np.linalg.norm(y.to_dense())


@pytest.mark.parametrize("case", ["x+x", "cap", "eps", "one-wide"])
def test_round_matches_single_process(client, case):
    dims = (40, 33, 1, 16, 25) if case != "one-wide" else (3, 1, 2)
    a = tt.random(dims, 5, rng=1)
    b = tt.random(dims, 5, rng=2)
    x, eps, cap = {
        "x+x": (a + a, 1e-8, None),
        "cap": (a + 1e-3 * b, 1e-12, 5),
        "eps": (a + 1e-9 * b, 1e-6, None),
        "one-wide": (a + b, 1e-12, None),
    }[case]
    want = tt.round(x, eps, max_rank=cap)
    got = DistributedTrain.from_train(client, x).round(eps, cap)
    assert got.ranks == want.ranks
    assert _rel(got.gather(), want) <= 1e-12


def test_one_train_split_again_and_again(client):
    """from_train scattered with hashed keys: the same cores, split again while the
    last split's futures were being released, lost their data (FutureCancelledError on
    the second round of a loop, found by a probe)."""
    x = tt.random((10, 10, 10), 3, rng=8)
    want = tt.round(x, 1e-10)
    for _ in range(4):  # each round's input released as the next split is made
        split = DistributedTrain.from_train(client, x)
        got = split.round(1e-10)
        del split
    assert got.ranks == want.ranks and _rel(got.gather(), want) <= 1e-12


@pytest.mark.parametrize("scale", [1e-170, 1e160, 1.0])
def test_extreme_norms_and_eps_zero_round_as_tt_round(client, scale):
    """Found by a probe: below about 1e-162 the squared singular values underflowed and
    every bond kept rank 1 (an 80% error), at 1e160 the slices' Gram matrices overflowed
    into SciPy's ValueError, and at eps 0 a sum kept its roundoff ranks ((1, 6, 6, 1) for
    x + x) where tt.round's noise floor drops them."""
    base = tt.random((10, 10, 10), 3, rng=8)
    x = (base + base) * scale
    for eps in (1e-10, 0.0):
        want = tt.round(x, eps)
        got = DistributedTrain.from_train(client, x).round(eps).gather()
        assert got.ranks == want.ranks == base.ranks
        assert _rel(got * (1 / scale), want * (1 / scale)) <= 1e-12


def test_bad_options_and_dimensions_raise_before_any_task(client):
    x = DistributedTrain.random(client, (8, 8, 8), 2, seed=0)
    for kwargs in ({"eps": -1.0}, {"eps": float("nan")}, {"max_rank": 0}):
        with pytest.raises(OperationError):  # eps=-1 rounded to rank 1 before
            x.round(**kwargs)
    with pytest.raises(OperationError, match="dimensions >= 1"):
        DistributedTrain.random(client, (8, 0, 8), 2)
    with pytest.raises(OperationError, match="positive"):
        DistributedTrain.random(client, (8, 8, 8), 0)


def test_only_small_factors_move(client):
    dims, r = (4096, 4096, 4096, 4096), 8
    dx = DistributedTrain.random(client, dims, [r, 2 * r, r], seed=3)
    dx.gather()  # slices in place
    size = sum(np.prod(s) * 8 for s in dx.shapes)
    before = bytes_moved(client)
    y = dx.round(1e-10, max_rank=r)
    moved = bytes_moved(client) - before
    assert y.ranks == (1, r, r, r, 1)
    assert moved <= 32 * (2 * r) ** 2 * 8 * len(dims)
    assert moved <= 1e-2 * size
    want = tt.round(dx.gather(), 1e-10, max_rank=r)
    points = np.random.default_rng(0).integers(0, 4096, size=(2000, len(dims)))
    values = want.evaluate(points)
    err = np.abs(y.gather().evaluate(points) - values).max() / np.abs(values).max()
    assert err <= 1e-12


def _slice(kind, dtype):
    """A (200, 3, 8) core slice whose vertical unfolding is well conditioned, or has
    condition number 1e10, or rank 4."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((600, 8))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((600, 8))
    if kind != "random":
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        s = np.logspace(0, -10, 8) if kind == "cond 1e10" else [1.0] * 4 + [0.0] * 4
        a = (u * s) @ vh
    return a.astype(dtype).reshape(200, 3, 8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize("kind", ["random", "cond 1e10", "rank 4"])
def test_slice_factors_take_cholesky_only_where_it_is_accurate(kind, dtype):
    g = _slice(kind, dtype)
    a = train_module._vertical(g)
    factors = train_module._factors(g, horizontal=False)
    r, r_inv = factors
    assert (r_inv is not None) == (kind == "random")  # else Householder's
    q = np.linalg.qr(a)[0] if r_inv is None else a @ r_inv
    u = np.finfo(dtype).eps
    np.testing.assert_allclose(q.conj().T @ q, np.eye(8), atol=50 * u)
    np.testing.assert_allclose(q @ r, a, atol=50 * u * np.abs(a).max())
    assert np.array_equal(r, np.triu(r))
    block = np.random.default_rng(1).standard_normal((8, 5))
    svd = ([None, block],)  # the SVD's Q block of worker 1
    np.testing.assert_allclose(train_module._apply_vertical(g, factors, svd, 1),
                               (q @ block).reshape(200, 3, 5), atol=50 * u * 8)
    h = np.ascontiguousarray(a.T).reshape(8, 3, 200)  # its horizontal unfolding: a^T
    hf = train_module._factors(h, horizontal=True)
    assert (hf[1] is None) == (r_inv is None)
    qh = np.linalg.qr(a)[0] if hf[1] is None else a @ hf[1]
    stacked = (None, [block])  # the stacked QR's Q block of worker 0
    np.testing.assert_allclose(train_module._apply_horizontal(h, hf, stacked, 0),
                               (qh @ block).T.reshape(5, 3, 200), atol=50 * u * 8)
