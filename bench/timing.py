"""Timing: batches long enough for the clock, engines in shuffled rounds of blocks, medians.

Engines are timed in rounds, one block of batches of each per round, so that noise from
other processes on the machine falls on all of them alike.  Each round runs the engines
in a new random order (seeded), so no engine always follows the same one.  A block lasts
a fraction of the budget (0.1 s by default), not one batch: a thread pool keeps spinning
for a while after its call returns (torch's and Numba's OpenMP threads, OpenBLAS's), and
a parallel engine that runs next shares the cores with it.  With rounds of one 1 ms batch
each, every batch of a parallel engine started that way: tenalg's 32^4 permutation, 165
us alone, had medians of 260-880 us behind torch's, and a 4096^2 trace 18-46 us against
14.  In a block only its first batches pay, and the median does not see them.

>>> times = measure({"noop": lambda: None}, budget=0.01)
>>> len(times["noop"]) >= 3 and min(times["noop"]) >= 0
True
"""

import random
import time

MIN_BATCH = 1e-3  # seconds: a batch shorter than this is too close to the clock's grain
MIN_ROUNDS = 3
BLOCKS = 5  # rounds of blocks (a block per engine each) over the budget


def batch_size(fn, min_batch=MIN_BATCH):
    """Calls per batch so that one batch takes at least ``min_batch`` seconds, and the
    per-call time of that first long-enough batch (a sample like any other)."""
    number = 1
    while True:
        seconds = time_batch(fn, number)
        if seconds * number >= min_batch or number >= 1 << 20:
            return number, seconds
        number *= 4


def time_batch(fn, number):
    """Seconds per call of ``fn`` over ``number`` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def measure(fns, budget, min_rounds=MIN_ROUNDS, blocks=BLOCKS):
    """Per-call times of each function, every sample in one list (see
    :func:`measure_rounds`)."""
    return {name: [t for samples in rounds for t in samples]
            for name, rounds in measure_rounds(fns, budget, min_rounds, blocks).items()}


def measure_rounds(fns, budget, min_rounds=MIN_ROUNDS, blocks=BLOCKS, warm=None):
    """Per-call times of each function by round: the batch-size calibration (round 0),
    then ``blocks`` rounds (at least ``min_rounds`` - 1) in which each function runs
    batches for budget / rounds seconds (one batch at least).  A function one call of
    which outlasts the budget keeps its first sample only; the others go on (a 6 s loop
    must not leave its 0.6 s competitor with one sample, the noisiest measure).

    Each function must be warmed up already (compiled, caches filled) by the caller.
    ``warm`` (name -> function) runs untimed before each of that function's blocks: the
    first loop after another engine's block pays that engine's cache and allocator state
    (a 25 us contraction took 64-113 us right after torch's loop).

    >>> rounds = measure_rounds({"noop": lambda: None}, budget=0.01, min_rounds=3)
    >>> len(rounds["noop"]) == BLOCKS + 1 and all(len(r) >= 1 for r in rounds["noop"])
    True
    """
    numbers, times = {}, {}
    for name, fn in fns.items():
        numbers[name], first = batch_size(fn)
        times[name] = [[first]]
    rounds = max(min_rounds - 1, blocks if budget > 0 else 0)
    names = [name for name in fns if not (numbers[name] == 1 and times[name][0][0] > budget)]
    shuffle = random.Random(0).shuffle
    for _ in range(rounds):
        shuffle(names)
        for name in names:
            if warm and name in warm:
                warm[name]()
            end = time.perf_counter() + budget / rounds
            samples = [time_batch(fns[name], numbers[name])]
            while time.perf_counter() < end:
                samples.append(time_batch(fns[name], numbers[name]))
            times[name].append(samples)
    return times
