"""Distributed TSQR rounding of one train against single-process tt.round."""

import numpy as np
import pytest

pytest.importorskip("distributed")

from tenalg import tt  # noqa: E402
from tenalg.distributed import DistributedTrain  # noqa: E402
from tenalg.distributed.measure import bytes_moved  # noqa: E402


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
