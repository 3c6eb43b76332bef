"""A process-wide setting that threads hold for a while: the first thread in applies it,
the last one out restores what was there before (the GIL's switch interval while kernels
compile, glibc's heap thresholds while tasks run on a Dask worker).  Each thread saving
and restoring on its own would leave the setting applied for good when two overlap.

>>> import sys
>>> def often():
...     before = sys.getswitchinterval()
...     sys.setswitchinterval(0.001)
...     return before
>>> interval = SharedSetting(often, sys.setswitchinterval)
>>> before = sys.getswitchinterval()
>>> with interval.held(), interval.held():
...     inside = sys.getswitchinterval()
>>> inside, sys.getswitchinterval() == before, interval.holders
(0.001, True, 0)
"""

import contextlib
import threading


class SharedSetting:
    """``apply()`` sets the setting and returns what ``restore(previous)`` needs to put
    the previous one back; both run under a lock, when the holders go from 0 to 1 and
    from 1 to 0."""

    def __init__(self, apply, restore):
        self._apply, self._restore = apply, restore
        self._lock = threading.Lock()
        self._previous = None
        self.holders = 0  # threads inside held() now

    @contextlib.contextmanager
    def held(self):
        with self._lock:
            if self.holders == 0:
                self._previous = self._apply()
            self.holders += 1
        try:
            yield
        finally:
            with self._lock:
                self.holders -= 1
                if self.holders == 0:
                    self._restore(self._previous)

    def forget_holders(self):
        """Restore the previous setting and count no holder: in a forked child, whose
        holders were threads of the parent."""
        self._lock = threading.Lock()
        if self.holders:
            self.holders = 0
            self._restore(self._previous)
