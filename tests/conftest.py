"""The suite tests the compiled kernels themselves: their compilation happens on the calling
thread ("wait" mode), so that a plan's first call runs its kernel rather than the NumPy
twin that runs while a kernel compiles off the thread (the default, which
tests/test_first_calls.py tests in fresh interpreters).

Most of a first run is compilation, so the suite runs in a process per core, at most
MAX_WORKERS (pytest-xdist's ``-n auto``, set in pyproject.toml; ``-n 0`` runs it in
this process): processes compile different kernels side by side, each under its own lock
(:func:`tenalg.kernels.compiler.cache_locked`), and load what another compiled from the
shared cache.  On two cores of a Zen 3 VM, from an empty cache: 9 minutes, against 14
in one process."""

import os

os.environ.setdefault("TENALG_COMPILE", "wait")

MAX_WORKERS = 4  # each process holds about 1.3 GB, and starts Dask clusters of its own


def pytest_xdist_auto_num_workers(config):
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))
