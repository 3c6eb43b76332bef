"""Timing: batches long enough for the clock, engines interleaved, medians.

Engines are timed in rounds, one batch of each per round, so that noise from other
processes on the machine falls on all of them alike.  Each round runs the engines in
a new random order (seeded), so no engine always follows the same one: a thread pool
keeps spinning for a while after its call returns (torch's OpenMP threads), and
whoever runs next pays for it.  In a fixed order the engine after torch ran 1.2-1.5x
slower than alone (a 1024^2 GEMM: 25 ms against 17 ms); the median of shuffled rounds
no longer sees it.

>>> times = measure({"noop": lambda: None}, budget=0.01)
>>> len(times["noop"]) >= 3 and min(times["noop"]) >= 0
True
"""

import random
import time

MIN_BATCH = 1e-3  # seconds: a batch shorter than this is too close to the clock's grain
MIN_ROUNDS = 3


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


def measure(fns, budget, min_rounds=MIN_ROUNDS, max_rounds=1000):
    """Per-call times of each function, in rounds, until ``budget`` seconds per function
    and at least ``min_rounds`` samples each (the batch-size calibration is the first).
    Where one call of some function outlasts the budget, that first sample is all.

    Each function must be warmed up already (compiled, caches filled) by the caller.
    """
    numbers, times = {}, {}
    for name, fn in fns.items():
        numbers[name], first = batch_size(fn)
        times[name] = [first]
    if any(numbers[name] == 1 and times[name][0] > budget for name in fns):
        return times
    deadline = time.perf_counter() + budget * len(fns)
    names, shuffle = list(fns), random.Random(0).shuffle
    for rounds in range(1, max_rounds):
        if rounds >= min_rounds and time.perf_counter() > deadline:
            break
        shuffle(names)
        for name in names:
            times[name].append(time_batch(fns[name], numbers[name]))
    return times
