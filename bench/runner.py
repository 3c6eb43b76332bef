"""The runner: set up each workload, warm up, time its engines side by side, check, print.

Each engine is called once untimed (compilation, page faults; its result is kept for the
check), then the engines are timed in interleaved rounds until the time budget is spent;
the median per-call time is what counts.  tenalg's engines (names starting "tenalg") are
compared with every other engine (the baselines): speed-up = baseline time / tenalg time.

>>> import numpy as np
>>> from tenalg.bench.registry import Workload
>>> w = Workload("add-f64", "dense", lambda: {"tenalg": lambda: np.ones(8) + 1,
...              "numpy": lambda: np.full(8, 2.0)}, limit="copy", bytes=128)
>>> result = run_workload(w, budget=0.01)
>>> result.check, sorted(result.times)
('ok', ['numpy', 'tenalg'])
"""

import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from tenalg.kernels import compiler

from .load import CpuMeter
from .registry import Skip, Workload
from .timing import MIN_ROUNDS, measure_rounds

# Relative tolerance of the cross-engine check, by the reference result's dtype.
RTOL = {2: 1e-2, 4: 1e-4, 8: 1e-8, 16: 1e-8}
# A row is suspect when an engine's slowest round (its median) took this many times its
# fastest round: something else ran in one of them.
SPREAD_LIMIT = 1.5
# ... or when other processes (beyond the busy ones the run started) and the hypervisor
# kept this many cores busy while it was timed: parallel engines lose most.
LOAD_LIMIT = 0.5
# Warm-up calls at most, each after waiting for what the one before queued to compile.
WARM_UPS = 3


@dataclass
class Result:
    """What one workload measured: per-engine times, errors, the cross-engine check."""

    workload: Workload
    times: dict[str, list[float]] = field(default_factory=dict)  # engine -> per-call seconds
    errors: dict[str, str] = field(default_factory=dict)  # engine -> what it raised
    check: str = "not compared"  # "ok", "not compared", "mismatch: ...", "skipped: ...",
    #                              "setup failed: ..."
    seconds: float = 0.0  # wall time of the whole workload: setup, warm-up, check, timing
    # the measurements of the workload's limit timed in its rounds (measurement -> per-call
    # seconds), and the limit they give (bytes/s); empty and None where none were
    limit_times: dict[str, list[float]] = field(default_factory=dict)
    limit_in_rounds: float | None = None
    # engine -> its per-call seconds by round (round 0: the batch-size calibration)
    rounds: dict[str, list[list[float]]] = field(default_factory=dict)
    # what the rest of the machine used while the engines were timed (load.CpuMeter), and
    # the busy processes the run itself started (--load), which the load includes
    load: dict = field(default_factory=dict)
    background: int = 0
    # engine -> step -> per-call seconds of that step, for workloads that time their steps
    steps: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    def median(self, engine):
        return statistics.median(self.times[engine])

    def p95(self, engine):
        """The 95th percentile of ``engine``'s per-call samples."""
        return float(np.percentile(self.times[engine], 95))

    def spread(self, engine):
        """(min, median, max) over the rounds of each round's median time (the
        calibration round left out where there are others); without rounds, of the
        samples."""
        rounds = [r for r in self.rounds.get(engine, ()) if r]
        rounds = rounds[1:] if len(rounds) > 1 else rounds
        values = [statistics.median(r) for r in rounds] or self.times[engine]
        return min(values), statistics.median(values), max(values)

    def suspect(self):
        """Why this row's times cannot be trusted: a list of reasons, empty when none."""
        reasons = []
        for engine in self.times:
            low, _, high = self.spread(engine)
            if low > 0 and high / low > SPREAD_LIMIT:
                reasons.append(f"{engine}'s rounds spread {high / low:.1f}x")
        # (the processes the run started, --load's and a cluster's, are the run's own)
        others = (self.load.get("others_cores") or 0) + (self.load.get("steal_cores") or 0)
        if others > LOAD_LIMIT:
            reasons.append(f"other processes kept {others:.1f} cores busy")
        return reasons

    def rate(self, engine):
        """Bytes/s or flop/s of ``engine`` (None when the workload counts neither)."""
        work = self.workload.bytes or self.workload.flops
        return work / self.median(engine) if work else None

    def limit(self, limits, in_rounds=True):
        """The workload's limit: as measured in its own rounds (where it was and
        ``in_rounds``), else the run's ``limits`` (None when it has none)."""
        if self.workload.limit is None:
            return None
        return (in_rounds and self.limit_in_rounds) or limits[self.workload.limit]

    def fraction(self, engine, limits, in_rounds=True):
        """Fraction of the workload's :meth:`limit` that ``engine`` reached (None without
        a limit)."""
        rate, limit = self.rate(engine), self.limit(limits, in_rounds)
        return None if rate is None or limit is None else rate / limit

    def speedups(self):
        """``{tenalg engine: {baseline: baseline time / tenalg time}}``."""
        engines = list(self.times)
        baselines = [e for e in engines if not e.startswith("tenalg")] or engines[:1]
        return {
            e: {b: self.median(b) / self.median(e) for b in baselines}
            for e in engines
            if e not in baselines
        }


class Progress:
    """Progress on a stream (stderr): a bar redrawn in place on a terminal, else one plain
    line per step; each step says the seconds since the start.  ``total`` may be None
    until it is known (set the attribute).

    >>> import io
    >>> stream = io.StringIO()
    >>> bar = Progress(2, stream)
    >>> bar.step("a"); bar.done()
    >>> stream.getvalue().split(" s ")[0][:5], stream.getvalue().split(" s ")[1]
    ('[1/2]', 'a\\n')
    """

    def __init__(self, total, stream=None, width=30):
        self.total, self.count, self.width = total, 0, width
        self.stream = sys.stderr if stream is None else stream
        self.start = time.perf_counter()
        self.tty = self.stream.isatty()

    def step(self, label):
        self.count += 1
        elapsed = f"{time.perf_counter() - self.start:.1f} s"
        total = "?" if self.total is None else self.total
        if self.tty:
            filled = self.width * self.count // max(self.total or self.count, 1)
            bar = "#" * filled + "-" * (self.width - filled)
            # erase the rest of the old line
            self.stream.write(f"\r[{bar}] {self.count}/{total} {elapsed} {label}\x1b[K")
        else:
            self.stream.write(f"[{self.count}/{total}] {elapsed} {label}\n")
        self.stream.flush()

    def done(self):
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def run_workload(workload, budget, min_rounds=MIN_ROUNDS, probes=None):
    """Set up, warm up, check and time one workload; ``budget`` seconds per engine and at
    least ``min_rounds`` timed batches each.  With ``probes`` (:class:`limits.Probes`),
    the measurements of the workload's bandwidth limit are timed in the same rounds, as
    if they were engines."""
    start = time.perf_counter()
    result = _run_workload(workload, budget, min_rounds, probes)
    result.seconds = time.perf_counter() - start
    return result


def _run_workload(workload, budget, min_rounds, probes):
    result = Result(workload)
    try:
        fns = workload.setup()
    except Skip as reason:
        result.check = f"skipped: {reason}"
        return result
    except Exception as error:  # noqa: BLE001 - one broken workload must not stop the suite
        result.check = f"setup failed: {type(error).__name__}: {error}"
        return result
    outputs = {}
    for name, fn in list(fns.items()):
        try:
            outputs[name] = fn()
        except Exception as error:  # noqa: BLE001 - report the engine, go on with the others
            result.errors[name] = f"{type(error).__name__}: {error}"
            del fns[name]
    if workload.compare and len(outputs) > 1:
        result.check = compare(outputs)
    del outputs
    if not fns:
        return result
    # the warm-up ran NumPy while kernels compiled: wait, and call again, until a call
    # queues nothing (a first sum's plan is built off the thread, and its next call
    # queues the kernel: timed rounds then ran beside a compilation, a sum step's p95 at
    # 3.6x its median)
    for _ in range(WARM_UPS):
        if not compiler.pending():
            break
        compiler.wait()
        for fn in fns.values():
            fn()
    probed = {f"limit {key}": probes.fns[key]
              for key in (probes.in_rounds(workload.limit) if probes else ())}
    meter = CpuMeter()
    if workload.steps is not None:
        workload.steps.clear()  # the warm-up's steps are not timed
    # a loop's steps are timed in the engine's own rhythm: each block starts with an
    # untimed loop, so that the first after another engine's loop is not a step's p95
    warm = ({name: partial(workload.steps.untimed, fn) for name, fn in fns.items()}
            if workload.steps is not None else None)
    rounds = measure_rounds({**fns, **probed}, max(budget, workload.budget), min_rounds,
                            warm=warm)
    result.load = meter.read()
    if workload.steps is not None:
        result.steps = workload.steps.times
    times = {name: [t for samples in r for t in samples] for name, r in rounds.items()}
    result.limit_times = {name.split(" ", 1)[1]: times.pop(name) for name in probed}
    if result.limit_times:
        result.limit_in_rounds = max(probes.rates(result.limit_times).values())
    result.times = times
    result.rounds = {name: rounds[name] for name in times}
    return result


def compare(outputs):
    """'ok' when every engine's result is close to the reference (numpy's, else the first).

    The tolerance follows the reference's precision (:data:`RTOL`, relative to its largest
    magnitude too); results that are not arrays of numbers are 'not compared: ...'.
    """
    reference_name = "numpy" if "numpy" in outputs else next(iter(outputs))
    try:
        values = {name: _widened(value) for name, value in outputs.items()}
    except (TypeError, ValueError) as error:
        return f"not compared: {error}"
    reference = values[reference_name]
    rtol = RTOL.get(_precision(outputs[reference_name]), 1e-8)
    atol = rtol * float(np.max(np.abs(reference), initial=0.0))
    bad = []
    for name, value in values.items():
        if value.shape != reference.shape:
            bad.append(f"{name} shape {value.shape} != {reference_name} {reference.shape}")
        elif not np.allclose(value, reference, rtol=rtol, atol=atol, equal_nan=True):
            error = float(np.max(np.abs(value - reference)))
            bad.append(f"{name} differs from {reference_name} by up to {error:.3g}")
    return "mismatch: " + "; ".join(bad) if bad else "ok"


def _precision(value):
    """Bytes per real component of ``value``'s dtype (2 for float16 and bfloat16)."""
    dtype = np.asarray(value).dtype
    return dtype.itemsize // (2 if dtype.kind == "c" else 1)


def _widened(value):
    """``value`` as a complex128 or float64 array (bfloat16 and torch tensors included)."""
    array = np.asarray(value)
    if array.dtype.kind not in "fciub" and array.dtype.name != "bfloat16":
        raise TypeError(f"a result of dtype {array.dtype} is not an array of numbers")
    return array.astype(np.complex128 if array.dtype.kind == "c" else np.float64)


def run(workloads, budget, min_rounds=MIN_ROUNDS, progress=True, stream=None, probes=None,
        background=0):
    """Run every workload in turn; a list of :class:`Result`.  ``progress``: True for a
    progress bar on ``stream`` (stderr), False for none, or a :class:`Progress` to step
    (left open).  ``background``: the busy processes the run started (``--load``)."""
    bar = Progress(len(workloads), stream) if progress is True else progress or None
    results = []
    for workload in workloads:
        if bar:
            bar.step(workload.name)
        results.append(run_workload(workload, budget, min_rounds, probes))
        results[-1].background = background
    if bar and progress is True:
        bar.done()
    return results


def format_time(seconds):
    """'12.3 us' and the like."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_limits(limits):
    """One line naming each measured limit."""
    g = 1e9
    return (
        f"limits: copy {limits['copy'] / g:.1f} GB/s (1 thread {limits['copy-1t'] / g:.1f}, "
        f"all cores {limits['copy-mt'] / g:.1f}), into a new array (copy-new) "
        f"{limits['copy-new'] / g:.1f} GB/s, read {limits['read'] / g:.1f} GB/s, "
        f"gemm f32 {limits['gemm-f32'] / g:.1f} GFLOP/s, f64 {limits['gemm-f64'] / g:.1f} GFLOP/s"
        " (bytes count read + written)"
    )


def format_table(results, limits):
    """The results table: one row per workload and engine; errors, mismatches and why a
    row is suspect (marked ``?`` before its name) below it."""
    header = ("workload", "engine", "median", "rounds", "rate", "of limit", "limit", "load",
              "tenalg speed-up")
    blocks = [([header], [])]
    for result in results:
        notes = [f"! {e} failed: {m}" for e, m in result.errors.items()]
        if result.check not in ("ok", "not compared"):
            notes.append(f"! {result.check}")
        if result.times and result.suspect():
            notes.append("? suspect: " + "; ".join(result.suspect()))
        notes.extend(format_steps(result))
        blocks.append((_rows(result, limits), notes))
    widths = [max(len(row[i]) for rows, _ in blocks for row in rows) for i in range(len(header))]
    lines = []
    for rows, notes in blocks:
        lines.extend("  ".join(c.ljust(n) for c, n in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
        lines.extend(f"  {note}" for note in notes)
    lines.insert(1, "  ".join("-" * n for n in widths))
    return "\n".join(lines)


def step_stats(times):
    """(median, 95th percentile) of a step's seconds."""
    return statistics.median(times), float(np.percentile(times, 95))


def format_steps(result):
    """A line per step of a loop that times its steps: each engine's median and 95th
    percentile."""
    steps = {}
    for engine, by_step in result.steps.items():
        for step, times in by_step.items():
            median, p95 = step_stats(times)
            steps.setdefault(step, []).append(
                f"{engine} {format_time(median)} (p95 {format_time(p95)})")
    return [f"step {step}: " + ", ".join(parts) for step, parts in steps.items()]


def format_spread(result, engine):
    """The slowest and fastest round of ``engine`` as multiples of its median, '0.97-1.40'
    ('-' for one round)."""
    low, _, high = result.spread(engine)
    median = result.median(engine)
    return "-" if low == high or median <= 0 else f"{low / median:.2f}-{high / median:.2f}"


def _rows(result, limits):
    w = result.workload
    if not result.times:
        return [(w.name, "-", "-", "-", "-", "-", "-", "-", "")]
    speedups = result.speedups()
    unit = "GB/s" if w.bytes else "GFLOP/s"
    limit = result.limit(limits)
    if limit is not None:  # the run's limit, where it was not measured in the rounds
        limit = f"{limit / 1e9:.1f} {unit}{'' if result.limit_in_rounds else ', run'}"
    others = result.load.get("others_cores")
    load = "-" if others is None else f"{others + (result.load.get('steal_cores') or 0):.2f}"
    name = ("? " if result.suspect() else "") + w.name
    rows = []
    for k, engine in enumerate(result.times):
        rate, fraction = result.rate(engine), result.fraction(engine, limits)
        rows.append((
            name if k == 0 else "",
            engine,
            format_time(result.median(engine)),
            format_spread(result, engine),
            "-" if rate is None else f"{rate / 1e9:.2f} {unit}",
            "-" if fraction is None else f"{fraction:.2f} {w.limit}",
            (limit or "-") if k == 0 else "",
            load if k == 0 else "",
            " ".join(f"{b} {x:.2f}x" for b, x in speedups.get(engine, {}).items()),
        ))
    return rows
