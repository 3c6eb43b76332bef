"""glibc's heap kept while a tenalg task runs on a Dask worker.

Dask starts its workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (its config
``distributed.nanny.pre-spawn-environ``), so that freed memory goes back to the system.
Setting it also fixes glibc's mmap threshold at 128 KiB: every NumPy temporary above that
is a fresh mapping, page-faulted in and unmapped again when freed. A pack rounding of
4096 trains took 4.2x the page faults and 1.2x the time there (0.95 -> 1.2 s).

While tenalg tasks run, :func:`kept` raises both thresholds, so that temporaries up to
32 MiB come from the heap and stay there for the next one; when the last of them
finishes, the worker's own settings come back and glibc trims the heap at its next
large free, as Dask wants. A process started without these variables is left alone:
glibc then adapts its thresholds by itself. Elsewhere than on glibc, nothing changes.

>>> with kept():
...     total = sum(range(10))
>>> total, _KEPT.holders
(45, 0)
"""

import contextlib
import ctypes
import ctypes.util
import os
import sys

from ..shared_setting import SharedSetting

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (glibc's malloc.h)
KEEP_TRIM = 1 << 30
KEEP_MMAP = 32 << 20  # glibc's largest mmap threshold on 64-bit systems
_DEFAULT = 128 << 10  # glibc's fixed threshold of either kind once one is set

def _mallopt():
    """glibc's ``mallopt``, where this process runs on glibc with fixed thresholds."""
    fixed = {k: os.environ.get(f"MALLOC_{k}_THRESHOLD_") for k in ("TRIM", "MMAP")}
    if not sys.platform.startswith("linux") or not any(fixed.values()):
        return None, None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 - present on glibc only
    except (OSError, AttributeError):
        return None, None
    try:
        restore = {M_TRIM_THRESHOLD: int(fixed["TRIM"] or _DEFAULT),
                   M_MMAP_THRESHOLD: int(fixed["MMAP"] or _DEFAULT)}
    except ValueError:
        return None, None
    return libc.mallopt, restore


_MALLOPT, _RESTORE = _mallopt()


def _keep():
    _MALLOPT(M_MMAP_THRESHOLD, KEEP_MMAP)
    _MALLOPT(M_TRIM_THRESHOLD, KEEP_TRIM)


def _give_back(_):
    for parameter, value in _RESTORE.items():
        _MALLOPT(parameter, value)


_KEPT = SharedSetting(_keep, _give_back)


def kept():
    """Within: freed memory up to 32 MiB a block stays in the heap (tasks on several
    threads share one setting: the last one out restores the process's)."""
    return contextlib.nullcontext() if _MALLOPT is None else _KEPT.held()
