"""Tensor-train workloads: rounding methods, fused sums, TT-SVD, batched packs, storages.

Engines whose names start with "tenalg" run tenalg (``tenalg`` in contiguous storage,
``tenalg-fiber`` in fiber storage, ``tenalg-<method>`` per rounding method); the
baselines are teneva (where it installs) and, for packs, ``loop``: the same operations
on single trains in a Python loop. Results are compared only where every engine runs the
same algorithm (TT-SVD ranks, delta sums): rounding methods and sweep directions
legitimately differ at the truncation level.

>>> names = [w.name for w in workloads()]
>>> "tt-round-sum2-d20-n32-r30" in names and "tt-pack-4096-d6-n16-r8-add-round" in names
True

``python -m tenalg.bench.bench_tt`` prints the accuracy table of the rounding methods and
teneva (:func:`accuracy`): time, relative error and ranks on the same inputs;
``python -m tenalg.bench.bench_tt alternating`` times the 4096-train pack and its loop
alternately (:func:`alternating`); ``python -m tenalg.bench.bench_tt cross`` prints the
cross workload's errors (:func:`cross_errors`).
"""

import time
from functools import partial

import numpy as np

from tenalg import tt

from .registry import Workload

try:
    import teneva
except ImportError:
    teneva = None

try:  # torchtt (pure-Python build on torch's LAPACK) warns that its C++ part is missing
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        import torchtt
except ImportError:
    torch = torchtt = None


def _arrays(train):
    """A train's cores as a list of (l, n, r) arrays (teneva's format)."""
    return [np.array(c.array()) for c in train.cores]


def _teneva_round_sum(arrays, r):
    """teneva's rounding of the sum of trains given as lists of cores (rank cap r)."""
    total = arrays[0]
    for x in arrays[1:]:
        total = teneva.add(total, x)
    return teneva.truncate(total, 1e-8, 1e12 if r is None else r)


def _ranks(cores):
    return np.array([c.shape[0] for c in cores] + [1])


def _round_sum2(d, n, r):
    """Round the sum of two random trains of rank r back to rank r, each method."""

    def setup():
        a, b = tt.random((n,) * d, r, rng=1), tt.random((n,) * d, r, rng=2)
        fns = {f"tenalg-{m}": partial(tt.round_sum, [a, b], eps=1e-8, max_rank=r, method=m,
                                      rng=0)
               for m in tt.METHODS}
        fib = [a.to_storage("fiber"), b.to_storage("fiber")]
        fns["tenalg-fiber-svd"] = partial(tt.round_sum, fib, eps=1e-8, max_rank=r)
        if teneva is not None:
            fns["teneva"] = partial(_teneva_round_sum, [_arrays(a), _arrays(b)], r)
        return fns

    return Workload(f"tt-round-sum2-d{d}-n{n}-r{r}", "tt", setup, compare=False,
                    quick=d <= 10)


def _torchtt_round(trains, r):
    """torchtt's rounding of the sum of ``trains`` (torchtt.TT objects) to rank r, eps 1e-8."""
    total = trains[0]
    for x in trains[1:]:
        total = total + x
    return total.round(1e-8, r)


def _torchtt(train):
    return torchtt.TT([torch.from_numpy(a) for a in _arrays(train)])


def _round_grid(d, n, r):
    """Round a + b (random trains of rank r, the sum built beforehand) back to rank r at
    eps 1e-8, tenalg's "svd" against teneva's and torchtt's truncations (issue 31's grid)."""

    def setup():
        a, b = tt.random((n,) * d, r, rng=1), tt.random((n,) * d, r, rng=2)
        x = a + b
        fns = {"tenalg": partial(tt.round, x, 1e-8, r)}
        if teneva is not None:
            total = teneva.add(_arrays(a), _arrays(b))
            fns["teneva"] = partial(teneva.truncate, total, 1e-8, r)
        if torchtt is not None:
            total = _torchtt(a) + _torchtt(b)
            fns["torchtt"] = partial(total.round, 1e-8, r)
        return fns

    # not quick: torchtt's pure-Python rounding takes seconds on a loaded machine
    return Workload(f"tt-round-d{d}-n{n}-r{r}", "tt", setup, compare=False)


def _gram_f32(d, n, r):
    """Float32 a + (a + 1e-2 c) rounded at eps 1e-3 by each method (the Gram sweep computes
    in double and certifies its cuts, issue 31)."""

    def setup():
        a = tt.random((n,) * d, r, rng=1, dtype=np.float32)
        c = tt.random((n,) * d, 2, rng=2, dtype=np.float32)
        x = a + (a + (1e-2 * tt.norm(a) / tt.norm(c)) * c)
        fns = {f"tenalg-{m}": partial(tt.round, x, 1e-3, method=m, rng=0) for m in tt.METHODS}
        if teneva is not None:
            fns["teneva"] = partial(teneva.truncate, _arrays(x), 1e-3)
        return fns

    return Workload(f"tt-round-f32-eps1e-3-d{d}-n{n}-r{r}", "tt", setup, compare=False,
                    quick=True)


def _round_sum_many(m, d, n, r):
    """Round a sum of m random trains of rank r to rank r: fused sketches vs the block sum."""

    def setup():
        trains = [tt.random((n,) * d, r, rng=s) for s in range(m)]
        fns = {"tenalg-svd": partial(tt.round_sum, trains, eps=1e-8, max_rank=r)}
        for method in ("gram", "randomized"):
            fns[f"tenalg-{method}"] = partial(tt.round_sum, trains, eps=1e-6, max_rank=r,
                                              method=method, rng=0)
        if teneva is not None:
            fns["teneva"] = partial(_teneva_round_sum, [_arrays(t) for t in trains], r)
        return fns

    return Workload(f"tt-round-sum{m}-d{d}-n{n}-r{r}", "tt", setup, compare=False,
                    quick=n * r <= 160)


def _tt_svd(n, d, r):
    """TT-SVD of the n**d dense tensor of a random rank-r train (ranks compared)."""

    def setup():
        dense = tt.random((n,) * d, r, rng=3).to_dense()
        fns = {engine: (lambda s=storage: _ranks(
            [c.array() for c in tt.from_dense(dense, 1e-10, storage=s).cores]))
            for engine, storage in (("tenalg", "contiguous"), ("tenalg-fiber", "fiber"))}
        if teneva is not None:
            fns["teneva"] = lambda: _ranks(teneva.svd(dense, 1e-10))
        return fns

    return Workload(f"tt-svd-{n}^{d}-r{r}-f64", "tt", setup, quick=True)


def _pack(count, d, n, r):
    """A pack of ``count`` trains: add another pack, round back to rank r.

    Against ``loop`` (the same operations on single trains: the same algorithm, so the
    results agree; tested in tests/tt) and teneva's add + truncate per train.
    """

    def setup():
        def trains(seed, storage="contiguous"):
            return [tt.random((n,) * d, r, rng=seed * count + i, storage=storage)
                    for i in range(count)]

        a, b = trains(0), trains(1)

        def pack(x, y):
            s = tt.add(tt.TrainPack(x), tt.TrainPack(y))
            s.round_(1e-8, max_rank=r)
            return s

        def loop():
            out = []
            for x, y in zip(a, b, strict=True):
                s = tt.add(x, y)
                tt.round_(s, 1e-8, max_rank=r)
                out.append(s)
            return out

        fns = {"tenalg": partial(pack, a, b), "loop": loop}
        if count <= 1024:
            fns["tenalg-fiber"] = partial(pack, trains(0, "fiber"), trains(1, "fiber"))
        if teneva is not None:
            arrays = [[_arrays(x), _arrays(y)] for x, y in zip(a, b, strict=True)]
            fns["teneva"] = lambda: [_teneva_round_sum(xy, r) for xy in arrays]
        return fns

    # 2 s per engine for thousands of trains: the pack (0.6 s for 4096) gets several
    # samples, the loop and teneva (3-6 s) one each; for 128 trains (25-180 ms a call)
    # the run's budget does, and 2 s each made it a sixth of `tenalg bench --quick`
    return Workload(f"tt-pack-{count}-d{d}-n{n}-r{r}-add-round", "tt", setup, compare=False,
                    quick=count <= 128, budget=2.0 if count > 128 else 0.0)


def _pack_redundant(count, d, n, r):
    """A pack of ``count`` sums X + X (rank r -> 2r), rounded back to rank r at eps 1e-8
    without a cap: every bond is rank-deficient, so the certified Gram paths decline
    (issue 31); against the same rounding of single trains in a loop."""

    def setup():
        xs = [tt.random((n,) * d, r, rng=i) for i in range(count)]

        def pack():
            s = tt.add(tt.TrainPack(xs), tt.TrainPack(xs))
            s.round_(1e-8)
            return s

        def loop():
            return [tt.round(x + x, 1e-8) for x in xs]

        return {"tenalg": pack, "loop": loop}

    return Workload(f"tt-pack-{count}-d{d}-n{n}-r{r}-x+x-round", "tt", setup, compare=False,
                    quick=count <= 128)


def _delta_products(count, d, n):
    """Sum of ``count`` delta trains, its Hadamard square and its entry sum: fiber storage
    skips the zero fibers, contiguous storage multiplies them."""

    def setup():
        rng = np.random.default_rng(4)
        points = rng.integers(0, n, size=(count, d))

        def run(storage):
            total = None
            for p in points:
                cores = [np.zeros((1, n, 1)) for _ in range(d)]
                for c, i in zip(cores, p, strict=True):
                    c[0, i, 0] = 1
                x = tt.TensorTrain(cores, storage=storage)
                total = x if total is None else tt.add(total, x)
            return tt.sum(tt.hadamard(total, total))

        return {"tenalg": partial(run, "contiguous"), "tenalg-fiber": partial(run, "fiber")}

    return Workload(f"tt-delta{count}-d{d}-n{n}-sum-hadamard", "tt", setup)


def _smooth(grid):
    """A smooth function of d grid indices, 1 / (1 + |x|^2), for the cross workloads."""

    def f(idx):
        x = grid[idx]
        return 1.0 / (1.0 + (x * x).sum(axis=1))

    return f


def _teneva_cross(f, d, n, r, sweeps, budget):
    """teneva's cross of ``f`` at fixed rank r (dr_max=0) from its seeded random start."""
    return teneva.cross(f, teneva.rand([n] * d, r, seed=0), m=budget, nswp=sweeps, dr_max=0,
                        log=False)


def _cross(d, n, r, sweeps):
    """TT-cross of a smooth function on an n^d grid at fixed rank r, ``sweeps`` sweeps:
    tenalg's one-site alternating cross against teneva's with the same ranks (dr_max=0),
    sweeps and evaluation budget. Both reach relative errors of 4-7e-9 on random points
    (``python -m tenalg.bench.bench_tt cross``); the trains differ, so results are not
    compared."""

    def setup():
        f = _smooth(np.linspace(-1, 1, n))
        budget = tt.cross(f, (n,) * d, ranks=r, nsweeps=sweeps, rng=0)[1].nevals
        fns = {"tenalg": lambda: tt.cross(f, (n,) * d, ranks=r, nsweeps=sweeps, rng=0)[0]}
        if teneva is not None:
            fns["teneva"] = partial(_teneva_cross, f, d, n, r, sweeps, budget)
        return fns

    return Workload(f"tt-cross-d{d}-n{n}-r{r}-{sweeps}sweeps", "tt", setup, compare=False)


def cross_errors(d=10, n=16, r=8, sweeps=4, points=5000):
    """{engine: relative error on random grid points} of the cross workload's trains."""
    f = _smooth(np.linspace(-1, 1, n))
    idx = np.random.default_rng(0).integers(0, n, size=(points, d))
    exact = f(idx)
    train, info = tt.cross(f, (n,) * d, ranks=r, nsweeps=sweeps, rng=0)
    got = {"tenalg": train.evaluate(idx)}
    if teneva is not None:
        got["teneva"] = teneva.get_many(_teneva_cross(f, d, n, r, sweeps, info.nevals), idx)
    return {k: float(np.linalg.norm(v - exact) / np.linalg.norm(exact)) for k, v in got.items()}


def workloads():
    """The tensor-train workloads of issues 5 and 31."""
    return [
        _round_sum2(20, 32, 30),
        _round_sum2(10, 16, 10),
        _round_sum_many(10, 10, 16, 10),
        _round_sum_many(10, 8, 32, 20),
        _tt_svd(4, 10, 8),
        _pack(4096, 6, 16, 8),
        _pack(128, 6, 16, 8),
        _pack_redundant(512, 6, 16, 8),
        _round_grid(10, 16, 10),
        _round_grid(8, 32, 20),
        _round_grid(8, 64, 40),
        _round_grid(6, 128, 60),
        _gram_f32(10, 16, 10),
        _delta_products(32, 6, 8),
        _cross(10, 16, 8, 4),
    ]


def _rounders(r):
    """name -> function(summand trains) -> rounded TensorTrain; eps 1e-8, rank <= r if given."""
    out = {m: partial(lambda trains, m: tt.round_sum(trains, eps=1e-8, max_rank=r, method=m,
                                                     rng=0), m=m)
           for m in tt.METHODS}
    if teneva is not None:
        out["teneva"] = lambda trains: tt.TensorTrain(
            _teneva_round_sum([_arrays(t) for t in trains], r))
    return out


def accuracy(d=20, n=32, r=30):
    """Rows (case, engine, seconds of the second call, relative error, max rank).

    - "random": a + b for independent random trains (rank 2r), truncated to rank r;
    - "near": a + (a + 1e-3 c) (rank 3r stored, close to rank r), truncated to rank r;
    - "x+x": a + a, exactly rank r, with no rank cap (teneva's one-sided Gram keeps
      extra ranks);
    - "complex x+x": the same in complex128 (teneva does not conjugate).
    """
    a, b, c = (tt.random((n,) * d, r, rng=s) for s in (1, 2, 3))
    small = 1e-3 * tt.norm(a) / tt.norm(c)
    ac = tt.random((n,) * d, r, rng=4, dtype=np.complex128)
    cases = {"random": ([a, b], r), "near": ([a, a + small * c], r), "x+x": ([a, a], None),
             "complex x+x": ([ac, ac], None)}
    rows = []
    for case, (trains, cap) in cases.items():
        exact = trains[0] + trains[1]
        for engine, rounder in _rounders(cap).items():
            rounder(trains)  # warm-up: kernels compile on first use
            start = time.perf_counter()
            y = rounder(trains)
            seconds = time.perf_counter() - start
            rows.append((case, engine, seconds, float(tt.norm(y - exact) / tt.norm(exact)),
                         max(y.ranks)))
    return rows


def alternating(count=4096, rounds=3):
    """(pack seconds, loop seconds) of the pack workload, timed alternately ``rounds``
    times in this process after one warm-up call of each."""
    fns = _pack(count, 6, 16, 8).setup()
    fns["tenalg"](), fns["loop"]()
    out = []
    for _ in range(rounds):
        times = []
        for name in ("tenalg", "loop"):
            start = time.perf_counter()
            fns[name]()
            times.append(time.perf_counter() - start)
        out.append(tuple(times))
    return out


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["cross"]:
        for engine, error in cross_errors().items():
            print(f"{engine:8} relative error {error:.2e}")
    elif sys.argv[1:] == ["alternating"]:
        rows = alternating()
        for pack_s, loop_s in rows:
            print(f"pack {pack_s:.2f} s  loop {loop_s:.2f} s  {loop_s / pack_s:.2f}x")
        print(f"median {np.median([loop_s / pack_s for pack_s, loop_s in rows]):.2f}x")
    else:
        print(f"{'case':12} {'engine':11} {'time':>9} {'rel. error':>10} {'max rank':>8}")
        for case, engine, seconds, error, rank in accuracy():
            print(f"{case:12} {engine:11} {seconds * 1e3:7.1f}ms {error:10.2e} {rank:8d}")
