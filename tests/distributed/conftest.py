"""One LocalCluster for the whole directory: 2 worker processes, 1 thread each."""

import pytest

pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="session")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit="2GiB",
                                       env={"OMP_NUM_THREADS": "1",
                                            "OPENBLAS_NUM_THREADS": "1",
                                            "MKL_NUM_THREADS": "1"})
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()
