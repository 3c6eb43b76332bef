"""Tasks run on their worker's threads, not on every core of the machine."""

import numba
import pytest

from tenalg import tt
from tenalg.distributed import DistributedPack, threads

distributed = pytest.importorskip("distributed")


def _seen():
    """What a task sees: Numba's threads."""
    return numba.get_num_threads()


def test_a_task_uses_its_workers_one_thread():
    """An in-process worker of one thread: inside run, one Numba thread, the task
    thread's setting restored after; outside a worker, run changes nothing."""
    before = numba.get_num_threads()
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None) as client:
        inside = client.submit(threads.run, _seen, pure=False).result()
        after = client.submit(_seen, pure=False).result()
        inside_again = client.submit(threads.run, _seen, pure=False).result()
    assert inside == inside_again == 1
    assert after >= 1  # the worker thread's own setting, as it was
    assert threads.run(_seen) == before and threads.worker_threads() is None


def test_pack_rounding_on_one_thread_per_worker_matches_the_process(client):
    trains = [tt.random((6, 6, 6, 6), 3, rng=b) for b in range(8)]
    local = tt.TrainPack(trains)
    dp = DistributedPack.from_pack(client, local)
    s = dp.add(dp)
    s.round_(1e-10)
    ref = tt.add(local, local)
    ref.round_(1e-10)
    got = s.gather()
    for b in range(8):
        assert got[0, b].ranks == ref[0, b].ranks
        assert tt.norm(got[0, b] - ref[0, b]) <= 1e-13 * tt.norm(ref[0, b])
