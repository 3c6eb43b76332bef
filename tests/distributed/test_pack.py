"""Distributed packs against the single-process TrainPack, on a real LocalCluster."""

import os
import signal
import threading
import time

import numpy as np
import pytest

pytest.importorskip("distributed")

from tenalg import tt  # noqa: E402
from tenalg.distributed import DistributedPack, PackOperationError, stencil  # noqa: E402
from tenalg.distributed.measure import _sizeof_train, bytes_moved  # noqa: E402
from tenalg.errors import OperationError  # noqa: E402

DIMS = (4, 5, 3, 4)


def _make(seed):
    def make(v, b):
        t = tt.random(DIMS, 2 + (b + v) % 3, rng=seed * 1000 + 17 * v + b)
        return t + t if b % 4 == 0 else t  # exact X + X: rounds back to X's ranks
    return make


def _pack(nvars, nblocks, seed):
    make = _make(seed)
    return tt.TrainPack([[make(v, b) for b in range(nblocks)] for v in range(nvars)])


def _same(x, y, rtol=1e-12):
    assert x.shape == y.shape
    for v in range(x.nvars):
        for b in range(x.nblocks):
            assert x[v, b].ranks == y[v, b].ranks, (v, b)
            want = y[v, b].to_dense()
            np.testing.assert_allclose(x[v, b].to_dense(), want, rtol=0,
                                       atol=rtol * np.abs(want).max())


def test_add_round_dot_norm(client):
    p, q = _pack(2, 12, 1), _pack(2, 12, 2)
    dp = DistributedPack.from_pack(client, p, mesh=(4, 3))
    dq = DistributedPack.generate(client, _make(2), 2, 12, mesh=(4, 3))
    assert dp.tiles == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    np.testing.assert_allclose(dp.norm(), tt.norm(p), rtol=1e-14)
    np.testing.assert_allclose(dp.dot(dq), tt.dot(p, q), rtol=1e-13)
    ds = dp.add(dq)
    infos = ds.round_(1e-8)
    s = tt.add(p, q)
    want = s.round_(1e-8)
    assert [[i.ranks_after for i in row] for row in infos] == \
        [[i.ranks_after for i in row] for row in want]
    assert len({i.ranks_after for row in infos for i in row}) > 1  # ragged
    _same(ds.gather(), s)
    _same(dp.gather(), p)  # the summands are untouched


def test_add_in_place_empties_other(client):
    p, q = _pack(1, 6, 3), _pack(1, 6, 4)
    dp, dq = (DistributedPack.from_pack(client, x) for x in (p, q))
    dp.add_(dq)
    want = p.copy()
    tt.add_(want, q.copy())
    _same(dp.gather(), want)
    assert all(t.empty for row in dq.gather().grid for t in row)


def test_stencil_moves_only_edge_trains(client):
    mesh, nvars = (8, 3), 2
    p = _pack(nvars, 24, 5)
    dp = DistributedPack.from_pack(client, p, mesh=mesh)
    dp.norm()  # every tile in place before counting
    before = bytes_moved(client)
    infos = dp.stencil_(0.25, 1e-9)
    moved = bytes_moved(client) - before
    want, want_infos = stencil.step(p, mesh, 0.25, 1e-9)
    _same(dp.gather(), want, rtol=1e-11)
    assert [[i.ranks_after for i in r] for r in infos] == \
        [[i.ranks_after for i in r] for r in want_infos]
    edges = [b for tile in dp.tiles for b in stencil.ghosts(tile, mesh)]
    assert sorted(edges) == [0, 1, 2, 9, 10, 11, 12, 13, 14, 21, 22, 23]
    assert moved == sum(_sizeof_train(p[v, b]) for v in range(nvars) for b in edges)


def test_failed_operation_leaves_pack_as_it_was(client):
    """One tile fails (a core holding NaN), the other succeeds: neither is swapped in."""
    p = _pack(1, 6, 6)
    cores = [c.array().copy() for c in p[0, 5].cores]
    cores[1][0, 0, 0] = np.nan
    p = tt.TrainPack([[p[0, b] for b in range(5)] + [tt.TensorTrain(cores)]])
    dp = DistributedPack.from_pack(client, p)
    with pytest.raises(PackOperationError, match="round_ failed on tile 1.*NaN or inf"):
        dp.round_(1e-8)
    _same(dp.gather(), p)


def test_bad_rounding_options_raise_before_any_task(client):
    dp = DistributedPack.from_pack(client, _pack(1, 4, 7))
    tasks = dp.last_tasks
    for kwargs in ({"eps": -1.0}, {"eps": 1e-8, "method": "no-such-method"},
                   {"eps": 1e-8, "max_rank": 0}):
        for operation in (dp.round_, lambda **k: dp.stencil_(0.1, **k)):
            with pytest.raises(OperationError) as info:
                operation(**kwargs)
            assert not isinstance(info.value, PackOperationError)
    assert dp.last_tasks == tasks


def test_a_closed_or_missing_client_is_named_before_anything_is_sent():
    """Found by a probe: AttributeErrors from inside Dask ('NoneType' object has no
    attribute 'identity' / 'sync'), or a FutureCancelledError from gather()."""
    from distributed import Client

    from tenalg.distributed import DistributedTrain

    pack = tt.TrainPack([tt.random((3, 3), 2, rng=b) for b in range(4)])
    with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None,
                set_as_default=False) as closing:
        split = DistributedPack.from_pack(closing, pack)
    for run in (lambda: DistributedPack.from_pack(closing, pack), split.norm, split.gather,
                lambda: DistributedTrain.from_train(closing, pack[0, 0]),
                lambda: DistributedPack.from_pack(None, pack, workers=["tcp://x"])):
        with pytest.raises(OperationError, match="running dask.distributed Client"):
            run()


def test_worker_killed_mid_round(client):
    p = _pack(2, 256, 7)
    dp = DistributedPack.from_pack(client, tt.add(p, p).copy())
    dp.norm()
    victim = dp.workers[0]
    pid = client.run(os.getpid, workers=[victim])[victim]
    outcome = {}

    def run():
        try:
            outcome["infos"] = dp.round_(1e-8)
        except PackOperationError as error:
            outcome["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)  # the nanny starts a new worker
    thread.join(120)
    client.wait_for_workers(2, timeout=60)
    want = tt.add(p, p)
    if "error" in outcome:  # a clear error: every train as it was
        _same(dp.gather(), want)
    else:  # recomputed from the inputs Dask still has
        want.round_(1e-8)
        _same(dp.gather(), want)
        assert all(max(i.ranks_after) <= 4 for row in outcome["infos"] for i in row)
