"""Packs of trains: batched add, add_, round_, dot, norm against single trains and dense."""

import contextlib
import threading

import numpy as np
import pytest
from tt_helpers import DTYPES, STORAGES, rand, rel, tol

from tenalg import tt
from tenalg.errors import OperationError
from tenalg.linalg import smalleigh
from tenalg.linalg.workspace import Workspace
from tenalg.tt import pack as pack_module
from tenalg.tt.linalg import batched

DIMS = (3, 4, 3, 4)


def _grid(dtype, storage, seed, ranks=(2, 2, 2, 3, 3, 2)):
    """A 2 x 3 pack whose trains fall in two groups of core shapes."""
    trains = [rand(DIMS, r, dtype, storage, seed=seed + i) for i, r in enumerate(ranks)]
    return tt.TrainPack([trains[:3], trains[3:]])


def _dense(p):
    return {pos: p[pos].to_dense() for pos in p.positions()}


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pack_arithmetic_matches_dense(storage, dtype):
    p, q = _grid(dtype, storage, 0), _grid(dtype, storage, 10)
    dp, dq = _dense(p), _dense(q)
    s = tt.add(p, q)
    assert s.shape == (2, 3) and (s.nvars, s.nblocks) == (2, 3)
    for pos in p.positions():
        assert s[pos].dtype == np.dtype(dtype) and s[pos].storage == storage
        assert s[pos].ranks == tt.add(p[pos], q[pos]).ranks
        np.testing.assert_allclose(s[pos].to_dense(), dp[pos] + dq[pos], rtol=tol(dtype),
                                   atol=tol(dtype) * 10)
    dots, norms = tt.dot(p, q), tt.norm(p)
    assert dots.shape == norms.shape == (2, 3)
    for pos in p.positions():
        np.testing.assert_allclose(dots[pos], np.vdot(dp[pos], dq[pos]), rtol=tol(dtype) * 10)
        np.testing.assert_allclose(norms[pos], np.linalg.norm(dp[pos]), rtol=tol(dtype) * 10)
    scaled = tt.scale(p, 2)
    np.testing.assert_allclose(scaled[1, 2].to_dense(), 2 * dp[1, 2], rtol=tol(dtype))
    # the rest of "every operation takes packs, trainwise": Hadamard, sums, contractions
    products, sums = tt.hadamard(p, q), tt.sum(p)
    vectors = [np.arange(1.0, n + 1) for n in p[0, 0].dims]
    contracted = tt.contract_vectors(p, vectors)
    assert products.shape == sums.shape == contracted.shape == (2, 3)
    for pos in p.positions():
        assert products[pos].ranks == tt.hadamard(p[pos], q[pos]).ranks
        np.testing.assert_allclose(products[pos].to_dense(), dp[pos] * dq[pos],
                                   rtol=tol(dtype), atol=tol(dtype) * 10)
        np.testing.assert_allclose(sums[pos], dp[pos].sum(), rtol=tol(dtype) * 10)
        expected = dp[pos]
        for v in vectors:  # each mode in turn, the first left
            expected = np.tensordot(v, expected, axes=(0, 0))
        np.testing.assert_allclose(contracted[pos], expected, rtol=tol(dtype) * 10)


@pytest.mark.parametrize("storage", STORAGES)
def test_pack_destructive_sum(storage):
    p, q = _grid(np.float64, storage, 0), _grid(np.float64, storage, 10)
    want = {pos: p[pos].to_dense() + q[pos].to_dense() for pos in p.positions()}
    versions = {pos: p[pos].version for pos in p.positions()}
    train = p[0, 1]
    tt.add_(p, q)
    for pos in p.positions():
        assert q[pos].empty and p[pos].version == versions[pos] + 1
        np.testing.assert_allclose(p[pos].to_dense(), want[pos])
    assert p[0, 1] is train
    twice = 2 * p[1, 1].to_dense()
    tt.add_(p, p)
    np.testing.assert_allclose(p[1, 1].to_dense(), twice)


@pytest.mark.parametrize("method", tt.METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pack_rounding_is_eps_adaptive_per_train(method, dtype):
    """One group (equal core shapes) whose trains round to different ranks: x + x halves."""
    a = [rand(DIMS, 2, dtype, seed=s) for s in range(4)]
    b = [rand(DIMS, 2, dtype, seed=s + 20) for s in range(4)]
    b[1], b[3] = a[1], a[3]
    p = tt.add(tt.TrainPack([a[:2], a[2:]]), tt.TrainPack([b[:2], b[2:]]))
    want = _dense(p)
    eps = 10 * tt.gram_floor(dtype)
    infos = p.round_(eps, method=method, rng=0)
    for (v, k), i in zip(p.positions(), range(4), strict=True):
        t, info = p[v, k], infos[v][k]
        single = tt.round(a[i] + b[i], eps, method=method, rng=0)
        assert t.ranks == single.ranks and (i in (0, 2) or t.ranks == a[i].ranks)
        assert info.ranks_before == (1, 4, 4, 4, 1) and info.ranks_after == t.ranks
        assert t.dtype == np.dtype(dtype) and rel(t.to_dense(), want[v, k]) <= eps
        np.testing.assert_allclose(t.to_dense(), single.to_dense(), rtol=10 * tol(dtype),
                                   atol=10 * tol(dtype) * np.abs(want[v, k]).max())


@pytest.mark.parametrize("eps, max_rank", [(1e-8, None), (1e-8, 3), (1e-3, None)])
def test_batched_eigensolver_rounds_like_single_trains(monkeypatch, eps, max_rank):
    """A group large enough for the batched Jacobi eigensolver rounds every train as a
    single train's rounding (LAPACK's SVDs) does: same ranks, results within roundoff."""
    calls = []
    jacobi = smalleigh._jacobi
    monkeypatch.setattr(smalleigh, "_jacobi", lambda *a: calls.append(1) or jacobi(*a))
    count = smalleigh.MIN_STACK + 4
    a = [rand(DIMS, 3, seed=s) for s in range(count)]
    b = [a[s] if s % 3 == 0 else rand(DIMS, 3, seed=100 + s) for s in range(count)]
    p = tt.add(tt.TrainPack(a), tt.TrainPack(b))
    want = _dense(p)
    p.round_(eps, max_rank=max_rank)
    assert calls
    for i, pos in enumerate(p.positions()):
        single = tt.round(a[i] + b[i], eps, max_rank=max_rank)
        assert p[pos].ranks == single.ranks
        if max_rank is None:
            assert rel(p[pos].to_dense(), want[pos]) <= eps
        np.testing.assert_allclose(p[pos].to_dense(), single.to_dense(),
                                   atol=1e-10 * np.abs(want[pos]).max())


def test_pack_max_rank_and_mixed_groups():
    p = _grid(np.float64, "fiber", 0)
    want = _dense(p)
    p.round_(0.0)
    for pos in p.positions():
        assert rel(p[pos].to_dense(), want[pos]) < 1e-12 and p[pos].storage == "fiber"
    p.round_(0.0, rmax=1)
    assert all(p[pos].ranks == (1,) * 5 for pos in p.positions())


def test_one_batched_kernel_per_group(monkeypatch):
    calls = []
    run = pack_module.run

    def counting(method, summands, *args):
        calls.append(summands[0][0].shape[0])
        return run(method, summands, *args)

    monkeypatch.setattr(pack_module, "run", counting)
    p = tt.add(_grid(np.float64, "contiguous", 0), _grid(np.float64, "contiguous", 10))
    p.round_(1e-8)
    assert sorted(calls) == [2, 4]


def test_device_pack_versions_and_staleness():
    p = _grid(np.float32, "contiguous", 0)
    dev = p.device_pack()
    shapes = sorted(tuple(c.shape for c in cores) for cores in dev.cores)
    assert shapes == [((2, 1, 3, 3), (2, 3, 4, 3), (2, 3, 3, 3), (2, 3, 4, 1)),
                      ((4, 1, 3, 2), (4, 2, 4, 2), (4, 2, 3, 2), (4, 2, 4, 1))]
    assert all(c.dtype == np.float32 for cores in dev.cores for c in cores)
    assert dev.versions == {pos: p[pos].version for pos in p.positions()}
    for positions, cores in dev.groups:
        for i, pos in enumerate(positions):
            np.testing.assert_array_equal(cores[0][i], p[pos].cores[0].array())
    tt.round_(p[1, 2], 0.5)
    with pytest.raises(tt.StalePackError, match=r"\(1, 2\)"):
        _ = dev.cores
    fresh = p.device_pack()
    p2 = p.copy()
    tt.add_(p[0, 0], p2[0, 0])
    with pytest.raises(tt.StalePackError):
        _ = fresh.groups
    assert p.device_pack().versions[0, 0] == p[0, 0].version


def test_pack_rejects_bad_input():
    p = _grid(np.float64, "contiguous", 0)
    opened = tt.TrainPack([[rand(DIMS, 2, left_bond=2)] * 3] * 2)
    with pytest.raises(OperationError, match="closed"):
        tt.add(p, opened)
    with pytest.raises(OperationError, match="closed"):
        opened.round_(0.1)
    with pytest.raises(OperationError, match="same shape"):
        tt.add(p, tt.TrainPack([p.grid[0]]))
    with pytest.raises(OperationError, match="rectangular"):
        tt.TrainPack([[rand(DIMS, 1)], []])
    with pytest.raises(OperationError, match="TensorTrains"):
        tt.TrainPack([[rand(DIMS, 1), 3]])
    with pytest.raises(OperationError, match="TensorTrains, got int"):  # a row of no trains
        tt.TrainPack([1, 2])
    with pytest.raises(OperationError, match="dims"):
        tt.dot(p, tt.TrainPack([[rand((2, 2), 1)] * 3] * 2))


def test_pack_sums_are_built_only_when_read():
    """tt.add of packs builds no cores; round_ works on the summands of the sums nobody
    read and on the built cores of the others, with the single-train results."""
    a = [rand(DIMS, 2, seed=s) for s in range(4)]
    b = [rand(DIMS, 3, seed=10 + s) for s in range(4)]
    p = tt.add(tt.TrainPack(a), tt.TrainPack(b))
    assert all(p[pos].summands is not None for pos in p.positions())
    assert p[0, 1].ranks == (1, 5, 5, 5, 1) and p[0, 1].dims == DIMS
    np.testing.assert_allclose(p[0, 1].to_dense(), a[1].to_dense() + b[1].to_dense())
    assert p[0, 1].summands is None and p[0, 0].summands is not None
    dense = [x.to_dense() + y.to_dense() for x, y in zip(a, b, strict=True)]
    np.testing.assert_allclose(tt.norm(p)[0], [np.linalg.norm(x) for x in dense], rtol=1e-12)
    for positions, cores in p.device_pack(groups=[[(0, 0), (0, 2)], [(0, 1), (0, 3)]]).groups:
        for i, (_, k) in enumerate(positions):  # a mixed group builds its sums
            np.testing.assert_array_equal(cores[1][i], tt.add(a[k], b[k]).cores[1].array())
    assert p[0, 0].summands is not None and p[0, 3].summands is None
    p.round_(1e-10)
    for i, pos in enumerate(p.positions()):
        single = tt.round(a[i] + b[i], 1e-10)
        assert p[pos].ranks == single.ranks and p[pos].version == 1
        np.testing.assert_allclose(p[pos].to_dense(), single.to_dense(), atol=1e-12)


@pytest.mark.parametrize("storage", STORAGES)
def test_sums_of_several_packs_stay_one_lazy_sum(storage):
    """(a + b) + 0.5 c of packs is one unbuilt sum of three summands, not a sum of a built
    sum: its cores, ranks, norm and rounding are those of the single trains' sums."""
    a, b, c = ([rand(DIMS, r, storage=storage, seed=10 * s + i) for i in range(3)]
               for s, r in enumerate((2, 3, 1)))
    p = tt.add(tt.add(tt.TrainPack(a), tt.TrainPack(b)), tt.TrainPack([0.5 * x for x in c]))
    singles = [x + y + 0.5 * z for x, y, z in zip(a, b, c, strict=True)]
    assert all(len(p[pos].summands) == 3 for pos in p.positions())
    assert p[0, 0].ranks == singles[0].ranks == (1, 6, 6, 6, 1)
    np.testing.assert_allclose(tt.norm(p)[0], [tt.norm(x) for x in singles], rtol=1e-12)
    for k, core in enumerate(p[0, 2].cores):  # reading builds it, as block_sum would
        np.testing.assert_array_equal(core.array(), singles[2].cores[k].array())
    assert p[0, 2].summands is None and p[0, 1].summands is not None
    p.round_(1e-10)
    for i, pos in enumerate(p.positions()):
        single = tt.round(singles[i], 1e-10)
        assert p[pos].ranks == single.ranks
        np.testing.assert_allclose(p[pos].to_dense(), single.to_dense(), atol=1e-12)


def test_device_pack_groups_must_share_core_shapes():
    """A group given by the caller is stacked only when its trains' cores agree; sums
    of equal ranks split differently between the summands are built and stacked."""
    x, y, z = (rand(DIMS, r, seed=s) for s, r in enumerate((2, 3, 4)))
    p = tt.add(tt.TrainPack([x, y, x]), tt.TrainPack([z, y, y]))  # ranks 6, 6, 5
    with pytest.raises(OperationError, match=r"device_pack: .* at \(0, 0\) .* at \(0, 2\)"):
        p.device_pack(groups=[[(0, 0), (0, 2)]])
    q = tt.add(tt.TrainPack([x, z]), tt.TrainPack([z, x]))  # 2 + 4 and 4 + 2
    ((positions, cores),) = q.device_pack(groups=[[(0, 0), (0, 1)]]).groups
    for i, pos in enumerate(positions):
        for k, c in enumerate(cores):
            np.testing.assert_array_equal(c[i], q[pos].cores[k].array())


@pytest.mark.parametrize("k, lower", [(5, True), (3, True), (5, False)])
def test_times_lower_skips_only_zeros(k, lower):
    """Block-diagonal core times a lower trapezoidal factor, blockwise, against dense;
    a full factor (a rank-revealing LQ's) multiplies the dense core."""
    rng = np.random.default_rng(k)
    blocks = [rng.standard_normal((3, 2, 4, 3)), rng.standard_normal((3, 4, 4, 2))]
    dense = np.zeros((3, 6, 4, 5))
    dense[:, :2, :, :3], dense[:, 2:, :, 3:] = blocks
    lf = rng.standard_normal((3, 5, k))
    lf = np.tril(lf) if lower else lf
    want = np.einsum("ganb,gbk->gank", dense, lf)
    got = batched.times_lower(blocks, lf, Workspace(), "x")
    np.testing.assert_allclose(got, want, atol=1e-13)


def test_chunks_on_worker_threads_match_single_trains(monkeypatch):
    """Groups cut into many chunks run on several threads: every operation gives the
    single-train results, whichever thread ran a chunk, and BLAS gets its threads back."""
    import numba
    from threadpoolctl import threadpool_info

    monkeypatch.setattr(pack_module, "CHUNK", 2)
    blas = [x["num_threads"] for x in threadpool_info() if x["user_api"] == "blas"]
    a = [rand(DIMS, 2, seed=s) for s in range(9)]
    b = [rand(DIMS, 2, seed=30 + s) for s in range(9)]
    b[4] = a[4]
    ran_on = set()
    run = pack_module.run
    # a thread's first chunk waits for a second thread's (10 s at most): on a loaded
    # machine one worker could otherwise take every chunk before the other starts
    meet = threading.Barrier(2, timeout=10)

    def recording(*args):
        if threading.get_ident() not in ran_on:
            ran_on.add(threading.get_ident())
            with contextlib.suppress(threading.BrokenBarrierError):
                meet.wait()
        return run(*args)

    monkeypatch.setattr(pack_module, "run", recording)
    p = tt.add(tt.TrainPack([a[:3], a[3:6], a[6:]]), tt.TrainPack([b[:3], b[3:6], b[6:]]))
    dots = tt.dot(tt.TrainPack([a[:3], a[3:6], a[6:]]), tt.TrainPack([b[:3], b[3:6], b[6:]]))
    p.round_(1e-10)
    norms = tt.norm(p)
    if numba.get_num_threads() > 1:
        assert len(ran_on) > 1
    for i, pos in enumerate(p.positions()):
        single = tt.round(a[i] + b[i], 1e-10)
        assert p[pos].ranks == single.ranks and (i != 4 or single.ranks == a[4].ranks)
        np.testing.assert_allclose(p[pos].to_dense(), single.to_dense(), atol=1e-12)
        np.testing.assert_allclose(dots[pos], tt.dot(a[i], b[i]), rtol=1e-12)
        np.testing.assert_allclose(norms[pos], tt.norm(single), rtol=1e-12)
    assert [x["num_threads"] for x in threadpool_info() if x["user_api"] == "blas"] == blas


def test_failed_pack_rounding_changes_no_train(monkeypatch):
    """A chunk that fails (here the third of five) leaves every train as it was."""
    monkeypatch.setattr(pack_module, "CHUNK", 2)
    run, calls = pack_module.run, []

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise np.linalg.LinAlgError("injected")
        return run(*args)

    monkeypatch.setattr(pack_module, "run", failing)
    p = tt.add(tt.TrainPack([rand(DIMS, 2, seed=s) for s in range(10)]),
               tt.TrainPack([rand(DIMS, 2, seed=s) for s in range(10)]))
    with pytest.raises(np.linalg.LinAlgError, match="injected"):
        p.round_(1e-8)
    assert all(p[pos].version == 0 and p[pos].summands is not None for pos in p.positions())


@pytest.mark.parametrize("enabled", [True, False])
def test_pack_operations_pause_the_garbage_collector_and_restore_it(monkeypatch, enabled):
    """add, add_ and round_ run with the cyclic collector off, and leave it as they found
    it, also when they raise."""
    import gc

    seen = []

    def spy(original):
        def record(*args, **kwargs):
            seen.append(gc.isenabled())
            return original(*args, **kwargs)
        return record

    monkeypatch.setattr(pack_module.TrainPack, "_check_pair",  # add, add_
                        spy(pack_module.TrainPack._check_pair))
    monkeypatch.setattr(pack_module, "map_chunks", spy(pack_module.map_chunks))  # add_, round_
    p = tt.TrainPack([rand((3, 3, 3), 2, seed=s) for s in range(3)])
    (gc.enable if enabled else gc.disable)()
    try:
        q = tt.add(p, p)
        q.round_(1e-10)
        p.copy().add_(p.copy())
        assert len(seen) == 4 and not any(seen) and gc.isenabled() == enabled
        opened = tt.TrainPack([rand((3, 3), 2, left_bond=2)])
        with pytest.raises(OperationError, match="closed"):
            opened.round_(1e-10)
        assert gc.isenabled() == enabled
    finally:
        gc.enable()


def test_dot_of_packs_checks_each_pair_as_tt_dot_does():
    """An outer rank of 1 against one of 3 broadcast silently in the batched dot."""
    a = tt.random((3, 4), 2, rng=1)
    b = tt.random((3, 4), 2, rng=2, left_bond=3)
    with pytest.raises(OperationError, match="outer ranks"):
        tt.dot(a, b)
    with pytest.raises(OperationError, match="outer ranks"):
        tt.dot(tt.TrainPack([a]), tt.TrainPack([b]))
    p, q = tt.TrainPack([a.copy()]), tt.TrainPack([a.copy()])
    p.add_(q)  # empties q's train
    with pytest.raises(OperationError, match="empty"):
        tt.dot(p, q)
    assert tt.dot(p, p)[0, 0] == pytest.approx(4 * tt.dot(a, a))


def test_pack_operators_are_the_trainwise_functions():
    """docs/tt.md: a + b, a - b, 2.0 * a, -a, a / 3, a * b each take TrainPacks
    (they raised TypeError: unsupported operand)."""
    p = tt.TrainPack([rand(DIMS, 2, seed=s) for s in range(3)])
    q = tt.TrainPack([rand(DIMS, 2, seed=10 + s) for s in range(3)])
    for got, want in ((p + q, tt.add(p, q)), (p - q, tt.sub(p, q)), (2.0 * p, tt.scale(p, 2.0)),
                      (p * 2.0, tt.scale(p, 2.0)), (-p, tt.neg(p)), (p / 4, tt.scale(p, 0.25)),
                      (p * q, tt.hadamard(p, q))):
        assert isinstance(got, tt.TrainPack) and got.shape == p.shape
        for pos in p.positions():
            np.testing.assert_allclose(got[pos].to_dense(), want[pos].to_dense(), rtol=1e-14)


def test_add_into_a_pack_that_shares_trains_is_refused_before_any_change():
    """Found by a probe: with a train at two positions, or one pack's train at another
    position of the other, add_ wrote sums twice or emptied a train it had just written,
    silently (a += b position by position gives other values)."""
    x, y, u, v = (rand(DIMS, 2, seed=s) for s in range(4))
    before = [t.to_dense() for t in (x, y, u, v)]
    for mine, theirs, words in (([x, x], [u, v], "also at"), ([x, y], [y, x], "is the one"),
                                ([x, y], [y, u], "is the one")):
        with pytest.raises(OperationError, match=words):
            tt.add_(tt.TrainPack(mine), tt.TrainPack(theirs))
    for t, dense in zip((x, y, u, v), before, strict=True):
        np.testing.assert_array_equal(t.to_dense(), dense)
    p = tt.TrainPack([x, y])
    tt.add_(p, p)  # the same train at the same position: doubled, as documented
    np.testing.assert_allclose(p[0, 0].to_dense(), 2 * before[0], rtol=1e-14)
