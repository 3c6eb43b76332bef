"""Whether a prepared kernel call is compiled yet (cpu.is_compiled), in fresh interpreters
sharing an empty Numba cache: not before the first run, loaded from the cache in the next
process without compiling."""

import json
import os
import subprocess
import sys

SCRIPT = """
import json
import numpy as np
from tenalg.kernels import cpu

out, a, b = np.empty((5, 7)), np.ones((5, 7)), np.arange(35.0).reshape(7, 5).T
call = cpu.elementwise_call(out, (a, b), unaries=("identity",) * 2, op_ab="add",
                            op_abc=None, scalars=(1, 1), compute=out.dtype)
arrays = (out, a, b)
before = [cpu.is_compiled(call, arrays, load=False), cpu.is_compiled(call, arrays)]
misses = len(call.kernel.stats.cache_misses)
call.run(arrays, ())
assert (out == a + b).all()
print(json.dumps({"before": before, "after": cpu.is_compiled(call, arrays, load=False),
                  "compiled_by_run": len(call.kernel.stats.cache_misses) - misses}))
"""


def test_is_compiled_says_whether_run_would_compile(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True,
                                      capture_output=True, text=True).stdout)
            for _ in range(2)]
    # empty cache: not compiled, the run compiles; then loaded from the cache by the check
    assert runs[0] == {"before": [False, False], "after": True, "compiled_by_run": 1}
    assert runs[1] == {"before": [False, True], "after": True, "compiled_by_run": 0}
