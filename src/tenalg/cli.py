"""The ``tenalg`` command: ``tenalg bench`` runs the benchmark suite, ``tenalg explain``
prints what an einsum plan does, ``tenalg compile`` compiles every kernel ahead of time.

    tenalg compile
    tenalg bench --quick
    tenalg bench --only trace-4096x4096-f64 --out results/
    tenalg explain "ij,jk->ik" 64x32 32x16 --dtype float32

>>> parse_shape("64x32"), parse_shape("7"), parse_shape("()")
((64, 32), (7,), ())
"""

import argparse
import os
import sys

import numpy as np

from . import __version__
from .allocation import stand_in
from .backends import ahead
from .descriptors import TensorDescriptor
from .dtypes import storage_type
from .einsum import einsum_plan
from .errors import DTypeError, InputCountError, TenalgError
from .kernels import compiler, jit

# the groups of bench workloads (bench/registry.py's, which this light module can't
# import without the bench package: kept equal by tests/test_cli.py)
GROUPS = ("dense", "einsum", "tt", "symmetric", "mixed", "distributed")


def parse_shape(text):
    """'64x32' -> (64, 32); '()' or 'scalar' -> () (a scalar operand)."""
    if text in ("()", "scalar", ""):
        return ()
    try:
        shape = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"shape {text!r} is not extents joined by 'x' (like 64x32) or '()'"
        ) from None
    if any(n < 0 for n in shape):
        raise argparse.ArgumentTypeError(f"shape {text!r} has a negative extent")
    return shape


def _parser():
    parser = argparse.ArgumentParser(prog="tenalg", description="tensor linear algebra tools")
    parser.add_argument("--version", action="version", version=f"tenalg {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    bench = commands.add_parser("bench", help="run the benchmark suite",
                                description="Time tenalg against NumPy (and torch) side by side.")
    bench.add_argument("--quick", action="store_true",
                       help="only the quick workloads, short budgets (under a minute)")
    bench.add_argument("--only", metavar="NAME",
                       help="one workload by name (else every name containing NAME)")
    bench.add_argument("--group", metavar="G", choices=GROUPS,
                       help=f"one group of workloads: {', '.join(GROUPS)}")
    bench.add_argument("--load", metavar="N", type=int, default=0,
                       help="start N busy processes for the run (stopped at its end): "
                            "how the engines fare on a machine shared with others")
    bench.add_argument("--out", metavar="DIR", default="bench-results",
                       help="where bench-results.json and .png go (default ./bench-results/)")
    bench.add_argument("--repeat-time", metavar="S", type=float, default=None,
                       help="seconds of timing per engine and workload (default 0.5, quick 0.2)")
    bench.add_argument("--list", action="store_true", help="list the workloads and stop")
    bench.add_argument("--no-progress", action="store_true",
                       help="no progress (a bar on a terminal, else a line a step)")

    compile_ = commands.add_parser(
        "compile", help="compile every Numba kernel ahead of time (fills Numba's cache)",
        description="Compile the kernels now, for images and clusters, so that no later "
                    "process compiles: minutes, once per installation and machine.")
    compile_.add_argument("--dtype", metavar="D", action="append",
                          help="only this storage dtype (repeatable; default all six)")
    compile_.add_argument("--jobs", metavar="N", type=int, default=os.cpu_count() or 1,
                          help="processes compiling side by side (default: one a core)")

    explain = commands.add_parser("explain", help="show the plan of an einsum expression",
                                  description="Print tenalg.einsum_plan(EXPR, ...).explain().")
    explain.add_argument("expression", metavar="EXPR",
                         help='like "ij,jk->ik"; one that starts with "-" ("->" of a scalar) '
                              'follows "--": tenalg explain -- "->" "()"')
    explain.add_argument("shapes", metavar="SHAPE", nargs="*", type=parse_shape,
                         help="one per operand, like 64x32 ('()' for a scalar)")
    explain.add_argument("--dtype", default="float64", help="operand dtype (default float64)")
    return parser


def main(argv=None):
    """Run the command line; returns the exit status (0 on success)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "bench":
            return _bench(args)
        if args.command == "compile":
            return _compile(args)
        return _explain(args)
    except TenalgError as error:
        print(f"tenalg {args.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (tenalg bench --list | head -1): no traceback,
        # and none either from the interpreter's flush of stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _compile(args):
    dtypes = [storage_type(d, "--dtype").name for d in args.dtype] if args.dtype else None
    terminal = sys.stderr.isatty()

    def report(k, n, name, seconds):
        done = round(30 * k / n)
        line = f"[{'#' * done}{'.' * (30 - done)}] {k}/{n} {name}: {seconds:.1f} s"
        print(("\r" + line.ljust(90)) if terminal else line, end="" if terminal else "\n",
              file=sys.stderr, flush=True)

    if compiler.jit_off():
        print("tenalg compile: NUMBA_DISABLE_JIT is set: Numba compiles nothing (tenalg "
              "runs its NumPy code); unset it to compile the kernels", file=sys.stderr)
        return 2
    if jit.CACHE_PLACE in ("temporary", "none"):  # nothing would outlive this process
        print(f"tenalg compile: no writable cache: the kernels would be kept "
              f"{jit.cache_location()}; set NUMBA_CACHE_DIR to a writable folder",
              file=sys.stderr)
        return 2
    jobs = max(args.jobs, 1)
    print(f"compiling tenalg's kernels ({'all dtypes' if dtypes is None else ', '.join(dtypes)})"
          f" into {jit.cache_location()}, {jobs} process{'es' if jobs > 1 else ''}",
          file=sys.stderr, flush=True)
    total = ahead.compile_all(dtypes, report, jobs)
    print(("\n" if terminal else "") + f"compiled in {total:.1f} s", file=sys.stderr)
    return 0


def _explain(args):
    """The plan of an einsum of C-ordered operands of ``--dtype``: any NumPy dtype (an
    integer einsum shows NumPy's own routine), read off stand-ins that allocate nothing."""
    try:
        dtype = np.dtype(args.dtype)
    except TypeError:
        raise DTypeError(f"--dtype: {args.dtype!r} is not a NumPy dtype") from None
    operands = []
    for shape in args.shapes:  # C order: element strides (of any dtype) times the item size
        elements = TensorDescriptor.contiguous(shape, np.float64).strides
        operands.append(stand_in(shape, [s * dtype.itemsize for s in elements], dtype))
    try:
        plan = einsum_plan(args.expression, *operands)
    except InputCountError as error:
        raise InputCountError(f"{error}: give one SHAPE per operand, like 64x32") from None
    print(plan.explain())
    return 0


def _bench(args):
    from .bench import limits, load, registry, report, runner  # Numba, workloads: lazily

    if args.load < 0:
        print("tenalg bench: --load takes a number of processes, 0 or more", file=sys.stderr)
        return 2
    if args.repeat_time is not None and not args.repeat_time > 0:
        print("tenalg bench: --repeat-time takes seconds, more than 0", file=sys.stderr)
        return 2
    # progress from the first second: importing the workloads' modules (torch among them)
    # takes seconds before the count of steps is known
    bar = None if args.no_progress or args.list else runner.Progress(None)
    if bar:
        bar.step("collecting the workloads")
    chosen = registry.select(registry.all_workloads(), quick=args.quick, only=args.only,
                             group=args.group)
    if not chosen:
        print("tenalg bench: no workload matches (see tenalg bench --list)", file=sys.stderr)
        return 2
    if args.list:
        for w in chosen:
            print(f"{w.name}  ({w.group}{', quick' if w.quick else ''})")
        sys.stdout.flush()  # a reader gone shows here, not at the interpreter's exit
        return 0
    try:  # before minutes of measuring, not after
        os.makedirs(args.out, exist_ok=True)
    except OSError as error:
        print(f"tenalg bench: cannot write to --out {args.out}: {error.strerror}",
              file=sys.stderr)
        return 2
    budget = args.repeat_time if args.repeat_time is not None else (0.2 if args.quick else 0.5)
    if bar:  # then the limits' three steps: their arrays and kernels, before and after
        bar.total = len(chosen) + 4
    with load.busy(args.load):
        results, machine_limits = _measure(args, chosen, budget, bar, limits, runner)
    if bar:
        bar.done()
    print(runner.format_limits(machine_limits))
    print(runner.format_table(results, machine_limits))
    loadavg, cores = os.getloadavg()[0], os.cpu_count()
    started = f", {_busy(args.load)} started by the run" if args.load else ""
    suspect = sum(1 for r in results if r.times and r.suspect())
    print(f"load average {loadavg:.2f} (last minute, this run included{started}) on {cores} "
          f"cores; {suspect} of {len(results)} rows suspect (marked ?)")
    settings = {"quick": args.quick, "only": args.only, "group": args.group,
                "repeat_time_s": budget, "load": args.load}
    json_path = os.path.join(args.out, "bench-results.json")
    png_path = os.path.join(args.out, "bench-results.png")
    report.write_json(json_path, results, machine_limits, settings)
    try:
        report.write_chart(png_path, results, machine_limits, _title(settings, cores))
    except ImportError:
        print(f"wrote {json_path}; no chart: matplotlib is missing (pip install 'tenalg[bench]')")
        return 0
    print(f"wrote {json_path} and {png_path}")
    return 0


def _measure(args, chosen, budget, bar, limits, runner):
    """The workloads' results and the machine's limits, measured before and after them
    (each keeps its better value, so that a burst of load from other processes lowers it
    less; the bandwidths are measured in each workload's rounds too, and the table's
    fractions use those)."""
    if bar:
        bar.step("the limits: arrays and kernels")
    probes = limits.Probes(quick=args.quick)
    if bar:
        bar.step("the limits, before the workloads")
    before = limits.measure_limits(budget=min(budget, 0.5), probes=probes)
    # quick: a slow engine is timed once (after its warm-up); else at least 3 times
    results = runner.run(chosen, budget, min_rounds=1 if args.quick else 3,
                         progress=bar or False, probes=probes, background=args.load)
    if bar:
        bar.step("the limits, after the workloads")
    after = limits.measure_limits(budget=min(budget, 0.5), probes=probes)
    return results, {key: max(before[key], after[key]) for key in before}


def _busy(n):
    """'1 busy process', '2 busy processes'."""
    return f"{n} busy process{'es' if n != 1 else ''}"


def _title(settings, cores):
    """The chart's title: what ran, where."""
    chosen = [f"{key} {settings[key]}" for key in ("group", "only") if settings[key]]
    return (f"tenalg bench{' --quick' if settings['quick'] else ''}: "
            f"{', '.join(chosen) or 'all workloads'}; {cores} cores, "
            f"{_busy(settings['load'])} started, "
            f"{settings['repeat_time_s']} s of timing per engine")
