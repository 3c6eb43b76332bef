"""The machine's load: busy processes to start (``tenalg bench --load N``) and what other
processes used of the cores while a workload ran.

:class:`CpuMeter` reads ``/proc/stat`` (every process's busy time, and the time the
hypervisor stole) and the CPU time of this run's processes (this one and those it started:
a LocalCluster's workers, ``--load``'s busy ones) before and after; the difference is
the other processes' demand, in cores.  Where there is no ``/proc/stat`` it reports the
load average instead.

>>> meter = CpuMeter()
>>> sum(range(10000)) > 0
True
>>> sorted(meter.read())
['loadavg_1m', 'others_cores', 'steal_cores']
>>> with busy(1) as started:
...     len(started)
1
"""

import contextlib
import os
import subprocess
import sys
import time

# The Linux scheduler's clock ticks per second (the unit of /proc/stat).
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_and_steal():
    """(busy seconds of every process since boot, seconds stolen by the hypervisor), or
    None where /proc/stat is missing."""
    try:
        with open("/proc/stat") as file:
            fields = [int(x) for x in file.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / _TICK, steal / _TICK


def _own_cpu():
    """CPU seconds this run has used: this process (all its threads), its children that
    ended, and its living descendants (:func:`_descendants_cpu`)."""
    times = os.times()
    return (times.user + times.system + times.children_user + times.children_system
            + _descendants_cpu())


def _descendants_cpu():
    """CPU seconds the living descendants of this process have used (0 without /proc):
    the distributed group's workers are the engine's, not other processes' load."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0.0
    children, cpu = {}, {}
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as file:
                stat = file.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # past the command, which may hold ")"
        children.setdefault(int(fields[1]), []).append(int(name))
        cpu[int(name)] = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime
    total, todo = 0.0, list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        total += cpu[pid]
        todo.extend(children.get(pid, ()))
    return total


class CpuMeter:
    """Started when made; :meth:`read` gives what the rest of the machine used since."""

    def __init__(self):
        self.start = time.perf_counter(), _busy_and_steal(), _own_cpu()

    def read(self):
        """``{others_cores, steal_cores, loadavg_1m}``: the cores that other processes
        kept busy (averaged over the wall time since the start) and that the hypervisor
        stole (None for both without /proc/stat), and the 1-minute load average."""
        wall0, system0, own0 = self.start
        wall, system, own = time.perf_counter() - wall0, _busy_and_steal(), _own_cpu() - own0
        load = {"others_cores": None, "steal_cores": None, "loadavg_1m": os.getloadavg()[0]}
        if system is not None and system0 is not None and wall > 0:
            # ticks are coarse (10 ms): a short row reads a tick's worth more or less;
            # never below 0 or above the machine's cores
            cores = os.cpu_count() or 1
            load["others_cores"] = min(cores, max(0.0, (system[0] - system0[0] - own) / wall))
            load["steal_cores"] = min(cores, max(0.0, (system[1] - system0[1]) / wall))
        return load


@contextlib.contextmanager
def busy(n):
    """``n`` processes that spin (one core each) until the block ends; yields them."""
    started = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                stdin=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield started
    finally:
        for process in started:
            process.kill()
        for process in started:
            process.wait()
