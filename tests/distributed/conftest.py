"""One LocalCluster for the whole directory: 2 worker processes, 1 thread each.

Work stealing is off: the tests count the bytes that move between workers (a stencil
step moves only its tiles' edge trains), and the scheduler's balancing of busy workers
moves more (110336 bytes where the edges are 25088, in two full-suite runs from an
empty cache, where the test alone passed).  Placement is then the pack's alone."""

import pytest

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="session")
def client():
    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=None, memory_limit="2GiB",
                                           env={"OMP_NUM_THREADS": "1",
                                                "OPENBLAS_NUM_THREADS": "1",
                                                "MKL_NUM_THREADS": "1"})
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()
