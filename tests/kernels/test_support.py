"""When the CPU kernels take a problem (:func:`tenalg.kernels.cpu.supports`)."""

from tenalg.kernels import cpu
from tenalg.kernels.cpu import support
from tenalg.layout import Loop

from .layouts import BF16, F16, F32, F64


def test_supports_small_problems_stay_on_reference():
    assert not cpu.supports("reduction", (F64, F64), 2, 64)
    assert cpu.supports("permutation", (F32, F32), 2, 1 << 22)
    assert not cpu.supports("contraction", (F32, F32, F32), 2, 1 << 22)


def test_supports_16_bit_data_that_numpy_would_convert_from_4096_elements():
    """NumPy converts float16 and bfloat16 5-20x slower than the kernels: sums and
    elementwise operations of 16-bit data, and permutations that convert it, take the
    kernels from 4096 elements; a permutation that moves 16-bit bits as they are does
    not (NumPy copies them as fast as any other)."""
    for d in (F16, BF16):
        assert cpu.supports("reduction", (d, d), 2, 1 << 12)
        assert not cpu.supports("reduction", (d, d), 2, (1 << 12) - 1)
        assert cpu.supports("elementwise_binary", (d, F32, F32), 2, 1 << 12)
        assert cpu.supports("permutation", (F32, d), 2, 1 << 12)
        assert not cpu.supports("permutation", (d, d), 2, 1 << 12)
    assert not cpu.supports("reduction", (F32, F32), 2, 1 << 12)


def test_supports_small_reductions_that_numpy_runs_in_many_inner_loops():
    """'iij->j' on (2048, 2048, 8): NumPy's inner loop (along the input's fastest loop)
    runs 2048 times; a sum of (32, 32, 32) over axis 1 1024 times, over axis 0 (j and k
    fused) 32 times, of (128, 128) over axis 1 128 times."""
    iij = [Loop(8, (1, 1), False, ("j",)), Loop(2048, (0, 16392), True, ("i",))]
    rows = [Loop(128, (1, 128), False, ("i",)), Loop(128, (0, 1), True, ("j",))]
    middle = [Loop(32, (32, 1024), False, ("i",)), Loop(32, (0, 32), True, ("j",)),
              Loop(32, (1, 1), False, ("k",))]
    first = [Loop(32, (0, 1024), True, ("i",)), Loop(1024, (1, 1), False, ("j", "k"))]
    assert cpu.supports("reduction", (F64, F64), 2, 1 << 14, loops=iij)
    assert cpu.supports("reduction", (F64, F64), 3, 1 << 15, loops=middle)
    assert not cpu.supports("reduction", (F64, F64), 2, 1 << 15, loops=first)
    assert not cpu.supports("reduction", (F64, F64), 2, 1 << 14, loops=rows)
    assert not cpu.supports("reduction", (F64, F64), 2, 64, loops=iij[:1])
    assert not cpu.supports("permutation", (F64, F64), 2, 1 << 14, loops=iij)


def test_supports_row_permutations_by_row_length():
    """Permutations that keep the innermost axis: NumPy copies rows whole, so the longer
    the rows the larger the problem must be (up to 2^18 elements)."""
    def rows(n, m=64):  # (m, m, n) -> axes (1, 0, 2)
        return [Loop(n, (1, 1), False, ("k",)), Loop(m, (n, m * n), False, ("j",)),
                Loop(m, (m * n, n), False, ("i",))]
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 15, loops=rows(4))
    assert not cpu.supports("permutation", (F64, F64), 3, 1 << 15, loops=rows(16))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 16, loops=rows(16))
    assert not cpu.supports("permutation", (F64, F64), 3, 1 << 17, loops=rows(512))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 18, loops=rows(512))
    transpose = [Loop(64, (1, 64), False, ("i",)), Loop(64, (64, 1), False, ("j",))]
    assert cpu.supports("permutation", (F64, F64), 2, 1 << 15, loops=transpose)


def test_supports_elementwise_rows_from_min_row():
    """The row kernel pays per row: elementwise work whose rows (out's fastest loop) are
    shorter than _MIN_ROW stays on NumPy at any size, longer rows take the kernels."""
    def rows(n, m=1 << 14):  # (m, n) + (m, 1)
        return [Loop(m, (n, n, 1), False, ("i",)), Loop(n, (1, 1, 0), False, ("j",))]
    f32 = (F32, F32, F32)
    assert not cpu.supports("elementwise_binary", f32, 2, 1 << 24,
                            loops=rows(support._MIN_ROW - 1))
    assert cpu.supports("elementwise_binary", f32, 2, 1 << 24, loops=rows(support._MIN_ROW))
    assert cpu.supports("elementwise_binary", f32, 1, 1 << 24, loops=rows(1 << 24, 1)[-1:])


def test_supports_permutations_with_small_tiles_from_two_threads_of_work():
    """Tiles smaller than 16 x 16 (out's fastest extent times a's), or narrower than a
    register block, cost more per element than NumPy's loop: those permutations need the
    work of two threads."""
    def tiles(n, outer=4096):  # (outer, n, n) -> axes (0, 2, 1)
        return [Loop(outer, (n * n, n * n), False, ("i",)), Loop(n, (1, n), False, ("k",)),
                Loop(n, (n, 1), False, ("j",))]
    assert not cpu.supports("permutation", (F64, F64), 3, (1 << 18) - 1, loops=tiles(15))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 18, loops=tiles(15))
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 15, loops=tiles(16))
    # (64, 512, 2) -> axes (0, 2, 1): tiles of 512 x 2, narrower than a register block
    narrow = [Loop(64, (1024, 1024), False, ("i",)), Loop(512, (1, 2), False, ("k",)),
              Loop(2, (512, 1), False, ("j",))]
    assert not cpu.supports("permutation", (F64, F64), 3, 1 << 16, loops=narrow)
    assert cpu.supports("permutation", (F64, F64), 3, 1 << 18, loops=narrow)
