"""A tenalg task on a Dask worker keeps its temporaries in the heap (no page faults for
each new one), and the worker's malloc settings come back after it."""

import os
import platform
import subprocess
import sys

import pytest

from tenalg.distributed import heap, threads

pytest.importorskip("distributed")

_FAULTS = """
import resource, sys
import numpy as np
from tenalg.distributed import heap

def faults(n=40):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        np.ones(1 << 17)  # 1 MiB, written: mapped afresh unless kept in the heap
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults()
outside = faults()
with heap.kept():
    faults()
    inside = faults()
print(outside, inside, faults(), heap._KEPT.holders)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_dask_workers_malloc_setting_faults_every_temporary_in_and_not_within_kept():
    env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536")  # as Dask's nanny starts workers
    out = subprocess.run([sys.executable, "-c", _FAULTS], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    outside, inside, after, active = map(int, out)
    assert outside >= 40 * 200  # 256 pages a MiB, each faulted in again
    assert inside < 40 * 10
    assert after >= 40 * 200 and active == 0  # the process's setting is back


def test_a_process_started_without_the_setting_is_left_alone():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    code = "from tenalg.distributed import heap; print(heap._MALLOPT is None)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "True"


def test_tasks_on_a_worker_run_within_kept(client):
    def seen():
        return heap._KEPT.holders, heap._MALLOPT is not None

    inside = client.submit(threads.run, seen, pure=False).result()
    after = client.submit(seen, pure=False).result()
    assert inside == (1, True)  # Dask's nanny set MALLOC_TRIM_THRESHOLD_
    assert after == (0, True)
