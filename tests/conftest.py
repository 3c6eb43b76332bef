"""The suite tests the compiled kernels themselves: their compilation happens on the calling
thread ("wait" mode), so that a plan's first call runs its kernel rather than the NumPy
twin that runs while a kernel compiles off the thread (the default, which
tests/test_first_calls.py tests in fresh interpreters)."""

import os

os.environ.setdefault("TENALG_COMPILE", "wait")
