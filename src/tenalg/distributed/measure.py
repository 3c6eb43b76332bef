"""What a distributed operation costs: bytes moved between workers, peak memory (of a
worker, and of one task), sizes.

Dask estimates the bytes of a transfer with ``dask.sizeof``; trains and packs register
their cores' bytes here (imported on every worker that unpickles a pack task), so the
workers' transfer logs count what really moved.

>>> from tenalg import tt
>>> from dask.sizeof import sizeof
>>> sizeof(tt.TrainPack([tt.random((4, 4), 2, rng=0)]))
128
"""

import threading
import time
import tracemalloc

import dask  # optional dependency: imported only in tenalg.distributed
import psutil
from dask.callbacks import Callback
from dask.sizeof import sizeof
from dask.utils import key_split

from .. import tt


@sizeof.register(tt.TensorTrain)
def _sizeof_train(train):
    parts = getattr(train, "summands", None) or [train.cores]  # an unbuilt sum: its summands
    return int(sum(c.array().nbytes for part in parts for c in part))


@sizeof.register(tt.TrainPack)
def _sizeof_pack(pack):
    return int(sum(_sizeof_train(t) for row in pack.grid for t in row))


def _incoming(dask_worker):
    return sum(e["total"] for e in dask_worker.transfer_incoming_log)


def received(client):
    """{worker: bytes it has received from other workers so far} (counters)."""
    return {w: int(n) for w, n in client.run(_incoming).items()}


def bytes_moved(client):
    """Bytes every worker has received from other workers so far, summed (a counter:
    take the difference around an operation)."""
    return sum(received(client).values())


def _start_sampler(dask_worker, interval=0.002):
    process = psutil.Process()
    state = {"base": process.memory_info().rss, "peak": 0, "run": True}

    def sample():
        while state["run"]:
            state["peak"] = max(state["peak"], process.memory_info().rss)
            time.sleep(interval)

    state["thread"] = threading.Thread(target=sample, daemon=True)
    state["thread"].start()
    dask_worker._tenalg_memory = state


def _stop_sampler(dask_worker):
    state = dask_worker._tenalg_memory
    state["run"] = False
    state["thread"].join()
    return state["peak"] - state["base"], state["peak"]


class PeakMemory:
    """Samples every worker's resident memory every 2 ms while active; ``growth`` is
    {worker: peak minus the memory at the start} and ``peak`` {worker: peak} in bytes."""

    def __init__(self, client):
        self.client, self.growth, self.peak = client, {}, {}

    def __enter__(self):
        self.client.run(_start_sampler)
        return self

    def __exit__(self, *exc):
        result = self.client.run(_stop_sampler)
        self.growth = {w: g for w, (g, _) in result.items()}
        self.peak = {w: p for w, (_, p) in result.items()}
        return False


def task_peaks(collection, inputs=()):
    """{task name: the most memory one task of that name allocated while it ran, its
    result included}, the collection computed here on Dask's synchronous scheduler, one
    task at a time, with tracemalloc tracing (NumPy's buffers included).  A one-thread
    worker holds its data plus, at any moment, one task's allocations: these.  The
    tasks of the collections ``inputs`` are left out.

    >>> import dask.array as da
    >>> x = da.ones((1000,), chunks=500)
    >>> peaks = task_peaks((x * 2).sum(), inputs=[x])
    >>> max(peaks.values()) >= 500 * 8
    True
    """
    skip = set().union(*[x.__dask_graph__().keys() for x in inputs])
    peaks, start = {}, [0]

    def pretask(key, dsk, state):
        tracemalloc.reset_peak()
        start[0] = tracemalloc.get_traced_memory()[0]

    def posttask(key, result, dsk, state, worker_id):
        if key not in skip:
            name = key_split(key)
            peaks[name] = max(peaks.get(name, 0), tracemalloc.get_traced_memory()[1] - start[0])

    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        with Callback(pretask=pretask, posttask=posttask):
            dask.compute(collection, scheduler="sync")
    finally:
        if not tracing:
            tracemalloc.stop()
    return peaks
