"""The process's thread pools and the machine's cores: how long idle pool threads spin, and
how many cores are free for a parallel kernel now.

Two pools share the cores in a tenalg program: OpenBLAS's (NumPy's and SciPy's GEMMs and
LAPACK) and Numba's OpenMP workers (tenalg's kernels); torch brings a third.  Each pool's
threads spin after a call, waiting for the next one, on the cores that the other pool
needs next.  Measured on the 2-core test VM (``python -m tenalg.bench.pools``; CPU time
the process used in the 300 ms after one call, medians of 5): after a 1024^2
``np.matmul``, OpenBLAS's worker 9.5-14 ms of spinning (its default timeout, 2^28 cycles);
after a (32,)^4 permutation, Numba's worker 1.0-1.5 ms (libgomp's default, 300000 spins).
With ``OPENBLAS_THREAD_TIMEOUT=20`` (2^20 cycles) 0.05-0.07 ms, with
``GOMP_SPINCOUNT=10000`` 0.05-0.19 ms: a loop of back-to-back calls still finds the
threads awake, and a call of the other pool finds its cores free.

The libraries read these settings once, when they load, so :func:`quiet_spins` (run when
this module is imported, which ``import tenalg`` does before any kernel has loaded
libgomp) sets them for the libraries loaded from then on: Numba's libgomp always, SciPy's
OpenBLAS when ``scipy.linalg`` is imported later, NumPy's only where tenalg is imported
before NumPy.  A value the user set is kept.  Child processes inherit them.

:func:`free_cores` says how many cores other processes leave free now (from the count of
runnable threads in ``/proc/loadavg``, read at most every :data:`SAMPLE_S` seconds): a
kernel split evenly over two cores of which another process holds one waits for whichever
thread the OS deschedules (a (64,)^4 float32 partial trace: 5.3 ms on two threads beside
one busy process, 2.5 ms on one, NumPy's ``np.trace`` 2.5 ms), so a parallel kernel takes
no more threads than there are free cores.

>>> quiet_spins({"GOMP_SPINCOUNT": "5"})["GOMP_SPINCOUNT"]  # the user's value is kept
'5'
>>> 1 <= free_cores() <= _CORES <= (os.cpu_count() or 1)
True
"""

import os
from time import monotonic as _clock

# what idle pool threads do before they sleep: libgomp spins this many times, OpenBLAS for
# 2^this many cycles (its range is 4 to 30)
SPINS = {"GOMP_SPINCOUNT": "10000", "OPENBLAS_THREAD_TIMEOUT": "20"}
# /proc/loadavg is read at most this often: a read of the descriptor kept open costs about
# 1 us (opening the file each time 20 us), and OpenBLAS's threads spin for milliseconds
SAMPLE_S = 0.002
# the cores this process may run on (taskset, cgroups' cpusets), else the machine's
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def quiet_spins(environ=None):
    """Set :data:`SPINS` in ``environ`` (``os.environ``) where they are not set; returns it."""
    environ = os.environ if environ is None else environ
    for name, value in SPINS.items():
        environ.setdefault(name, value)
    return environ


def _runnable(text):
    """Threads runnable now by a ``/proc/loadavg`` line ('0.5 0.4 0.3 3/135 5410': 3),
    less the one reading it; None where the line is not one."""
    try:
        return max(0, int(text.split()[3].split("/")[0]) - 1)
    except (IndexError, ValueError):
        return None


_sample = [-1.0, None]  # when /proc/loadavg was read last, the free cores it gave
_files = {}  # path -> a descriptor kept open (a pread at 0 gives the line afresh)


def _read(path):
    """The text of ``path`` through a descriptor kept open; None where it can't be read."""
    try:
        if path not in _files:
            _files[path] = os.open(path, os.O_RDONLY)
        return os.pread(_files[path], 256, 0).decode("ascii", "replace")
    except OSError:
        return None


def free_cores(cores=None, path="/proc/loadavg", now=None, ours=0):
    """Cores that other threads leave free now (at least 1; all of them where
    ``/proc/loadavg`` cannot be read), read afresh at most every :data:`SAMPLE_S` s.

    Spinning pool threads of this process count as others (they hold a core too), but for
    ``ours`` of them: the caller's own pool's workers, which may still spin after its last
    parallel call.  The count is the machine's: a process confined to some cores errs
    toward fewer threads.
    """
    cores = cores or _CORES
    now = _clock() if now is None else now
    if now - _sample[0] >= SAMPLE_S:
        text = _read(path)
        _sample[:] = now, None if text is None else _runnable(text)
    others = _sample[1]
    return cores if others is None else max(1, cores - max(0, others - ours))


quiet_spins()  # before Numba's first parallel kernel loads libgomp
