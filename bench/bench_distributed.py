"""Distributed workloads (group "distributed"), each on 1 and on 2 workers of a
LocalCluster the bench starts (processes, one thread each, BLAS on one thread).

- W1 ``dist-train-round``: one train, d = 8, n = 2^14, ranks 32 rounded to 16, float64
  (about 1 GB; n = 2^10 under --quick), TSQR rounding over the workers.
- W2 ``dist-pack``: 8192 trains (d 6, n 16, rank 8) on a (var, block) grid of 8 variables
  and a 32 x 32 mesh of blocks (512 trains, 2 variables on 16 x 16, under --quick): add +
  round, and a stencil step.
- W3 ``dist-einsum-10053``: the shapes of dask issue 10053, ``aijkl,amnop->ijklmnop`` with
  the contracted batch axis a in 4 chunks, tenalg against ``dask.array.einsum``.

Engines: ``tenalg`` runs on 2 workers, ``1-worker`` the same on 1 (so the runner's
speed-up is that of 2 workers over 1); W3 adds ``dask-einsum`` (2 workers) and
``dask-einsum-1w``. ``python -m tenalg.bench.bench_distributed [--quick] [--repeats N]``
prints the full table: time, speed-up, bytes moved between workers, tasks per operation
and peak memory per worker, then W3's largest task allocation in output blocks
(:func:`w3_task_peaks`); ``... alternating [--quick]`` times W1 and W2's add + round on
1 and 2 workers alternately (:func:`alternating`).

>>> [w.name for w in workloads()][:1]
['dist-train-round-d8-n16384-r32-16']
"""

import atexit
import functools
import statistics
import sys
import time

from tenalg import tt

from .registry import Skip, Workload

# NUMBA_NUM_THREADS is left alone: set through the nanny's environment, it reached Numba
# after its threads had started and a later compilation raised "Cannot set
# NUMBA_NUM_THREADS to a different value once the threads have been launched".
BLAS_ONE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_CLUSTERS = {}


def client(nworkers):
    """The bench's client of a LocalCluster of ``nworkers`` processes (started once)."""
    if nworkers not in _CLUSTERS:
        try:
            import distributed  # optional dependency (tenalg[distributed]), loaded lazily
        except ImportError as error:
            raise Skip("dask.distributed is not installed") from error
        cluster = distributed.LocalCluster(n_workers=nworkers, threads_per_worker=1,
                                           processes=True, dashboard_address=None,
                                           env=BLAS_ONE, silence_logs=40)
        c = distributed.Client(cluster, set_as_default=False)
        _CLUSTERS[nworkers] = (cluster, c)
        atexit.register(_close, nworkers)
    return _CLUSTERS[nworkers][1]


def _close(nworkers):
    cluster, c = _CLUSTERS.pop(nworkers, (None, None))
    if c is not None:
        c.close()
        cluster.close()


def _tad():
    try:
        import tenalg.distributed as tad  # optional dependency, loaded lazily
    except ImportError as error:
        raise Skip("tenalg[distributed] is not installed") from error
    return tad


# -- W1 --------------------------------------------------------------------------------
def _w1_sizes(quick):
    return (8, 2 ** 10 if quick else 2 ** 14, 32, 16)


def _w1_ops(nworkers, quick):
    """(operation, after-call accounting) of W1 on ``nworkers``."""
    tad = _tad()
    d, n, r, rr = _w1_sizes(quick)
    c = client(nworkers)
    x = tad.DistributedTrain.random(c, (n,) * d, r, seed=0)
    c.gather([c.submit(len, f) for row in x.parts for f in row])  # slices made before timing
    state = {"x": x}

    def op():
        y = x.round(1e-12, max_rank=rr)
        state["tasks"] = y.last_tasks
        return y.ranks

    return op, state, d * n * r * r * 8


def _w1(quick):
    d, n, r, rr = _w1_sizes(quick)

    def setup():
        return {"tenalg": _w1_ops(2, quick)[0], "1-worker": _w1_ops(1, quick)[0]}

    return Workload(f"dist-train-round-d{d}-n{n}-r{r}-{rr}", "distributed", setup,
                    compare=False, quick=quick)


# -- W2 --------------------------------------------------------------------------------
def _w2_sizes(quick):
    return (2, (16, 16)) if quick else (8, (32, 32))


def _random_train(seed, var, block):
    return tt.random((16,) * 6, 8, rng=seed * 1_000_003 + 7919 * var + block)


def _w2_ops(nworkers, quick):
    """{name: operation} of W2 on ``nworkers`` and the state they share."""
    tad = _tad()
    nvars, mesh = _w2_sizes(quick)
    c = client(nworkers)
    nblocks = mesh[0] * mesh[1]
    a, b = (tad.DistributedPack.generate(c, functools.partial(_random_train, s), nvars,
                                         nblocks, mesh=mesh) for s in (1, 2))
    a.norm(), b.norm()  # trains built on their workers before timing
    state = {}

    def add_round():
        s = a.add(b)
        s.round_(1e-8, max_rank=8)
        state["tasks"] = 1 + s.last_tasks
        return s

    def stencil():
        a.stencil_(0.1, 1e-8, max_rank=8)
        state["tasks"] = a.last_tasks
        return a

    return {"add-round": add_round, "stencil": stencil}, state


def _w2(kind, quick):
    nvars, mesh = _w2_sizes(quick)

    def setup():
        return {"tenalg": _w2_ops(2, quick)[0][kind], "1-worker": _w2_ops(1, quick)[0][kind]}

    count = nvars * mesh[0] * mesh[1]
    return Workload(f"dist-pack-{count}-d6-n16-r8-{kind}", "distributed", setup,
                    compare=False, quick=quick)


# -- W3 --------------------------------------------------------------------------------
W3_EXPR = "aijkl,amnop->ijklmnop"


def _w3_sizes(quick):
    return (256, 6) if quick else (1024, 8)  # N, D; 4 chunks of N, 2 of each D


def _w3_chunks(n, d, nchunks=4):
    """W3's chunks: N in ``nchunks``, each D in 2."""
    return (n // nchunks, d // 2, d // 2, d // 2, d // 2)


def _w3_ops(nworkers, quick):
    """{engine: operation} of W3 (tenalg and dask.array.einsum) on ``nworkers``."""
    tad = _tad()
    import dask.array as da  # optional dependency, loaded lazily

    n, d = _w3_sizes(quick)
    c = client(nworkers)
    chunks = _w3_chunks(n, d)
    a = c.persist(da.random.default_rng(0).random((n, d, d, d, d), chunks=chunks))
    b = c.persist(da.random.default_rng(1).random((n, d, d, d, d), chunks=chunks))
    state = {}
    limit = tad.memory_limit_of(min(w["memory_limit"] for w in
                                    tad.cluster.workers(c).values()))

    def run(make):
        y = make()
        state["tasks"] = len(y.__dask_graph__()) - len(a.__dask_graph__()) - \
            len(b.__dask_graph__())
        y = c.persist(y)
        c.gather(c.compute(y.map_blocks(lambda b: b[:0, :0], dtype=y.dtype).sum()))
        del y
        return None

    return {"tenalg": functools.partial(run, lambda: tad.einsum(W3_EXPR, a, b,
                                                                memory_limit=limit)),
            "dask-einsum": functools.partial(run, lambda: da.einsum(W3_EXPR, a, b))}, state


def w3_task_peaks(n, d, nchunks=4):
    """{engine: the most memory one of its tasks allocated, in output blocks} for W3's
    shapes (``nchunks`` chunks of the batch axis), each engine's graph run twice on
    Dask's synchronous scheduler in this process (the second run is reported: plans
    made) with :func:`tenalg.distributed.measure.task_peaks`. Nothing else may allocate
    meanwhile: :func:`w3_task_peaks_apart` runs it in a fresh process."""
    import dask.array as da  # optional dependency, loaded lazily

    from tenalg.distributed.measure import task_peaks

    tad = _tad()
    chunks = _w3_chunks(n, d, nchunks)
    a, b = (da.random.default_rng(s).random((n, d, d, d, d), chunks=chunks)
            .persist(scheduler="sync") for s in (0, 1))
    block = (d // 2) ** 8 * 8
    out = {}
    for engine, y in (("tenalg", tad.einsum(W3_EXPR, a, b, memory_limit=8 << 30)),
                      ("dask-einsum", da.einsum(W3_EXPR, a, b))):
        task_peaks(y, inputs=[a, b])
        peaks = task_peaks(y, inputs=[a, b])
        out[engine] = max(v for k, v in peaks.items() if not k.startswith("finalize")) / block
    return out


def w3_task_peaks_apart(n, d, nchunks=4):
    """:func:`w3_task_peaks` in a fresh Python process (a Client's threads allocate)."""
    import json
    import subprocess

    code = ("import json, warnings; warnings.simplefilter('ignore'); "
            "from tenalg.bench.bench_distributed import w3_task_peaks; "
            f"print(json.dumps(w3_task_peaks({n}, {d}, {nchunks})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _w3(quick):
    n, d = _w3_sizes(quick)

    def setup():
        two, one = _w3_ops(2, quick)[0], _w3_ops(1, quick)[0]
        return {"tenalg": two["tenalg"], "1-worker": one["tenalg"],
                "dask-einsum": two["dask-einsum"], "dask-einsum-1w": one["dask-einsum"]}

    return Workload(f"dist-einsum-10053-N{n}-D{d}", "distributed", setup, compare=False,
                    quick=quick)


def workloads():
    """The distributed workloads of issue 30 (the --quick sizes are separate workloads)."""
    return [_w1(False), _w2("add-round", False), _w2("stencil", False), _w3(False),
            _w1(True), _w2("add-round", True), _w2("stencil", True), _w3(True)]


# -- the full table ----------------------------------------------------------------------
def _measure(c, fn, state, repeats):
    """(median seconds, bytes moved, tasks, largest peak memory growth of a worker, largest
    peak resident memory of a worker) of ``fn`` after one untimed call. The memory comes
    from one more call, untimed: the workers' 2 ms samplers take CPU from the tasks, on
    2 cores most from 2 workers (W2's add + round timed under them: 1.61x, without:
    about 1.8x)."""
    from tenalg.distributed.measure import PeakMemory, bytes_moved

    fn()
    times, moved = [], []
    for _ in range(repeats):
        before = bytes_moved(c)
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        moved.append(bytes_moved(c) - before)
    with PeakMemory(c) as memory:
        fn()
    return (statistics.median(times), int(statistics.median(moved)), state.get("tasks"),
            max(memory.growth.values()), max(memory.peak.values()))


def table(quick=False, repeats=3):
    """Rows, as they are measured: (workload, engine, workers, seconds, speed-up over 1
    worker, bytes moved, tasks, largest peak memory growth of a worker over its memory
    after a warm-up call, largest peak resident memory of a worker), in bytes."""

    def add(name, engine, ops):
        one = None
        for nworkers in (1, 2):
            fn, state = ops(nworkers)
            seconds, moved, tasks, growth, peak = _measure(client(nworkers), fn, state,
                                                           repeats)
            one = seconds if nworkers == 1 else one
            yield (name, engine, nworkers, seconds, one / seconds, moved, tasks, growth, peak)

    d, n, r, rr = _w1_sizes(quick)
    yield from add(f"W1 round d{d} n{n} r{r}->{rr}", "tenalg",
                   lambda k: _w1_ops(k, quick)[:2])
    n3, d3 = _w3_sizes(quick)
    for engine in ("tenalg", "dask-einsum"):
        yield from add(f"W3 10053 N{n3} D{d3}", engine,
                       lambda k, e=engine: (lambda ops: (ops[0][e], ops[1]))(_w3_ops(k, quick)))
    nvars, mesh = _w2_sizes(quick)
    for kind in ("add-round", "stencil"):
        yield from add(f"W2 {nvars * mesh[0] * mesh[1]} trains {kind}", "tenalg",
                       lambda k, kind=kind: (lambda ops: (ops[0][kind], ops[1]))(
                           _w2_ops(k, quick)))


def alternating(quick=True, rounds=3):
    """{workload: [(1-worker seconds, 2-worker seconds), ...]}: W1 and W2's add + round
    timed alternately on the two clusters, after one warm-up call each, so that a busy
    machine slows both alike."""
    ops = {"W1": {k: _w1_ops(k, quick)[0] for k in (1, 2)},
           "W2 add-round": {k: _w2_ops(k, quick)[0]["add-round"] for k in (1, 2)}}
    out = {}
    for name, fns in ops.items():
        fns[1](), fns[2]()
        pairs = []
        for _ in range(rounds):
            times = []
            for k in (1, 2):
                start = time.perf_counter()
                fns[k]()
                times.append(time.perf_counter() - start)
            pairs.append(tuple(times))
        out[name] = pairs
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    if "alternating" in argv:
        for name, pairs in alternating(quick).items():
            for one, two in pairs:
                print(f"{name:14} 1 worker {one:7.3f} s  2 workers {two:7.3f} s  "
                      f"{one / two:5.2f}x", flush=True)
        return
    repeats = int(argv[argv.index("--repeats") + 1]) if "--repeats" in argv else 3
    print(f"{'workload':30} {'engine':12} {'workers':>7} {'time':>10} {'vs 1w':>6} "
          f"{'moved':>11} {'tasks':>6} {'mem growth':>11} {'peak RSS':>10}  (per worker)",
          flush=True)
    for name, engine, k, seconds, speedup, moved, tasks, growth, peak in table(quick,
                                                                              repeats):
        print(f"{name:30} {engine:12} {k:7d} {seconds * 1e3:8.1f}ms {speedup:5.2f}x "
              f"{moved / 1e6:9.3f}MB {tasks if tasks is not None else '-':>6} "
              f"{growth / 2**20:8.1f}MiB {peak / 2**20:7.1f}MiB", flush=True)
    n3, d3 = _w3_sizes(quick)
    for nchunks in (4, 8):
        peaks = w3_task_peaks_apart(n3, d3, nchunks)
        print(f"W3 N{n3} D{d3}, batch axis in {nchunks} chunks: the largest task allocates "
              + ", ".join(f"{e} {v:.2f}" for e, v in peaks.items()) + " output blocks",
              flush=True)
    for k in list(_CLUSTERS):
        _close(k)


if __name__ == "__main__":
    main()
