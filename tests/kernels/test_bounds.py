"""The kernels read and write nothing outside their arrays' memory.

Each array is placed against a page that may not be touched (mprotect PROT_NONE): once
ending right before one, once starting right after one. A load or a store past either
end, even of a vector lane whose value is then discarded, kills the process; the cases
run in a child process, so that such a fault fails the test instead of the test run.
"""

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent('''
    import ctypes, mmap, sys
    import ml_dtypes
    import numpy as np
    import tenalg as ta

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    PAGE = mmap.PAGESIZE
    keep = []

    def guarded(shape, dtype, at_end):
        """A C array of random values, flush against a forbidden page at its end (or
        its start)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        pages = -(-nbytes // PAGE)
        m = mmap.mmap(-1, (pages + 2) * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        for at in (base, base + (pages + 1) * PAGE):
            assert libc.mprotect(at, PAGE, 0) == 0, ctypes.get_errno()
        offset = PAGE + (pages * PAGE - nbytes if at_end else 0)
        x = np.frombuffer(m, dtype, int(np.prod(shape)), offset).reshape(shape)
        x[...] = np.random.default_rng(0).standard_normal(shape).astype(dtype)
        keep.append(m)
        return x

    at_end = sys.argv[1] == "end"
    g = lambda shape, dtype=np.float64: guarded(shape, dtype, at_end)
    f32, f16, bf16 = np.float32, np.float16, ml_dtypes.bfloat16

    a = g((301, 203))
    np.testing.assert_array_equal(ta.permute(a, (1, 0), out=g((203, 301))), a.T)
    np.testing.assert_array_equal(ta.permute(a[::-1], (1, 0), out=g((203, 301))), a[::-1].T)
    b = g((203, 301), f32)
    for target in (f16, bf16, f32):
        got = ta.permute(b, (1, 0), alpha=2, out=g((301, 203), target))
        np.testing.assert_array_equal(got, (2 * b.T).astype(target))
    c = g((29, 31, 37, 5))
    np.testing.assert_array_equal(ta.permute(c, (0, 2, 1, 3), out=g((29, 37, 31, 5))),
                                  c.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(ta.permute(c, (3, 1, 0, 2), out=g((5, 31, 29, 37))),
                                  c.transpose(3, 1, 0, 2))
    d = g((1031, 1031))
    np.testing.assert_allclose(ta.trace(d), np.trace(d), rtol=1e-12)
    np.testing.assert_allclose(ta.trace(d[::-1]), np.trace(d[::-1]), rtol=1e-12)
    e = g((1030, 1030, 7))
    np.testing.assert_allclose(ta.einsum("iij->j", e), np.einsum("iij->j", e), rtol=1e-12)
    h = g((65, 33, 65, 31))
    np.testing.assert_allclose(ta.partial_trace(h, [(0, 2)]), np.einsum("ijik->jk", h),
                               rtol=1e-12)
    s = g((257, 259, 19), f32)
    for axis in (0, 1, 2, (0, 2)):
        np.testing.assert_allclose(ta.sum(s, axis=axis), s.sum(axis=axis, dtype=np.float64),
                                   rtol=1e-4, atol=1e-3)
    r = g((600, 2049), f16)
    np.testing.assert_allclose(ta.sum(r, axis=1), r.astype(np.float64).sum(axis=1), rtol=1e-2,
                               atol=0.1)
    x, y, z = g((515, 1023), f32), g((1, 1023), f32), g((515, 1), f32)
    out = g((515, 1023), f32)
    got = ta.elementwise_trinary(x, "ij", y[0], "j", z[:, 0], "i", "ij", alpha=2, beta=3,
                                 gamma=0.5, out=out)
    np.testing.assert_allclose(got, 2 * x + 3 * y + 0.5 * z, rtol=1e-5, atol=1e-5)
    print("ok")
''')


@pytest.mark.skipif(sys.platform != "linux", reason="mprotect through the C library")
@pytest.mark.parametrize("placement", ["end", "start"])
def test_no_access_outside_the_arrays(placement):
    child = subprocess.run([sys.executable, "-c", CHILD, placement], capture_output=True,
                           text=True, timeout=600)
    assert child.returncode == 0 and child.stdout.strip() == "ok", (
        f"exit {child.returncode}\n{child.stdout}\n{child.stderr[-3000:]}")
