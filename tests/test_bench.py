"""The benchmark suite's machinery on tiny fake workloads: registry, timing, runner, reports.

No timing assertions: only counts, structure and the values the runner derives.
"""

import doctest
import io
import json
import os
import time
import types

import numpy as np
import pytest
from tenalg.bench import (
    against_numpy,
    bench_dense,
    bench_mixed,
    beside_blas,
    chart,
    limits,
    load,
    pools,
    registry,
    report,
    runner,
    timing,
)
from tenalg.bench.registry import Skip, Workload


def fake(name="fake", engines=None, **options):
    engines = engines or {"tenalg": lambda: np.arange(4.0), "numpy": lambda: np.arange(4.0)}
    return Workload(name, options.pop("group", "dense"), lambda: dict(engines), **options)


def timed(times, **options):
    """A Result with given per-engine times, as if measured."""
    return runner.Result(fake(**options), times={e: list(t) for e, t in times.items()})


# -- registry --------------------------------------------------------------------------


def test_workload_rejects_unknown_limit():
    with pytest.raises(ValueError, match="limit 'disk'"):
        fake(limit="disk")


def _modules(monkeypatch, table):
    """Make registry imports of tenalg.bench.NAME return table[NAME] (or raise it)."""

    def import_module(name):
        entry = table[name.rsplit(".", 1)[1]]
        if isinstance(entry, BaseException):
            raise entry
        return types.SimpleNamespace(workloads=lambda: entry)

    monkeypatch.setattr(registry.importlib, "import_module", import_module)


def test_all_workloads_collects_in_order_and_skips_broken_modules(monkeypatch):
    missing = ModuleNotFoundError("no", name="tenalg.bench.bench_b")
    _modules(monkeypatch, {"bench_a": [fake("a1"), fake("a2")], "bench_b": missing,
                           "bench_c": RuntimeError("boom"), "bench_d": [fake("d1")]})
    with pytest.warns(UserWarning, match="bench_c skipped: RuntimeError"):
        found = registry.all_workloads(("bench_a", "bench_b", "bench_c", "bench_d"))
    assert [w.name for w in found] == ["a1", "a2", "d1"]


def test_all_workloads_warns_when_a_module_lacks_a_dependency(monkeypatch):
    _modules(monkeypatch, {"bench_a": ModuleNotFoundError("no torch", name="torch")})
    with pytest.warns(UserWarning, match="bench_a skipped"):
        assert registry.all_workloads(("bench_a",)) == []


def test_all_workloads_rejects_duplicate_names(monkeypatch):
    _modules(monkeypatch, {"bench_a": [fake("x")], "bench_b": [fake("x")]})
    with pytest.raises(ValueError, match="two workloads are named 'x'"):
        registry.all_workloads(("bench_a", "bench_b"))


def test_real_registry_lists_the_dense_workloads():
    names = [w.name for w in registry.all_workloads()]
    assert len(names) == len(set(names))
    assert {w.name for w in bench_dense.workloads()} <= set(names)


def test_select_by_quick_group_and_name():
    ws = [fake("sum-8", quick=True), fake("sum-80"), fake("tt-8", group="tt", quick=True)]
    assert [w.name for w in registry.select(ws, quick=True)] == ["sum-8", "tt-8"]
    assert [w.name for w in registry.select(ws, group="tt")] == ["tt-8"]
    assert [w.name for w in registry.select(ws, only="sum-8")] == ["sum-8"]  # exact wins
    assert [w.name for w in registry.select(ws, only="-8")] == ["sum-8", "sum-80", "tt-8"]
    assert registry.select(ws, only="nothing") == []
    assert [w.name for w in registry.select(ws, quick=True, only="sum-80")] == ["sum-80"]
    # the distributed rows start clusters: in --quick only when --group asks for them
    ws.append(fake("dist-8", group="distributed", quick=True))
    assert [w.name for w in registry.select(ws, quick=True)] == ["sum-8", "tt-8"]
    assert [w.name for w in registry.select(ws, quick=True, group="distributed")] == ["dist-8"]
    assert "dist-8" in [w.name for w in registry.select(ws)]


# -- timing ------------------------------------------------------------------------------


def test_measure_interleaves_rounds_and_counts_calls():
    calls = {"a": 0, "b": 0}

    def counter(name):
        def fn():
            calls[name] += 1
        return fn

    times = timing.measure({"a": counter("a"), "b": counter("b")}, budget=0.0, min_rounds=5)
    assert len(times["a"]) == len(times["b"]) == 5
    assert all(t >= 0 for t in times["a"] + times["b"])
    assert calls["a"] >= 5 and calls["b"] >= 5


def test_batch_size_grows_for_fast_functions():
    number, seconds = timing.batch_size(lambda: None, min_batch=1e-4)
    assert number > 1 and number * seconds >= 1e-4
    assert timing.batch_size(lambda: None, min_batch=0.0)[0] == 1


def test_measure_times_slow_functions_once_and_the_others_on():
    def slow():
        time.sleep(0.02)

    times = timing.measure({"slow": slow, "fast": lambda: None}, budget=0.01, min_rounds=50)
    assert len(times["slow"]) == 1  # a call of slow outlasts the budget
    assert len(times["fast"]) >= 50  # calibration and 49 rounds at least


def test_measure_takes_at_least_one_sample_each():
    times = timing.measure({"a": lambda: None, "b": lambda: None}, budget=0.0, min_rounds=1)
    assert len(times["a"]) == len(times["b"]) == 1


# -- runner ------------------------------------------------------------------------------


def test_run_workload_times_every_engine_and_checks():
    result = runner.run_workload(fake(), budget=0.001)
    assert result.check == "ok" and result.errors == {}
    assert sorted(result.times) == ["numpy", "tenalg"]
    assert all(len(t) >= timing.MIN_ROUNDS for t in result.times.values())


def test_run_workload_times_nothing_while_work_it_queued_is_pending(monkeypatch):
    """A first call leaves its plan to the compiling thread, the next queues its kernel:
    the runner calls again until a call queues nothing, then times."""
    from tenalg.kernels import compiler

    monkeypatch.setenv("TENALG_COMPILE", "background")
    calls, pending_when_timed = [], []

    def tenalg():
        calls.append(len(calls))
        if len(calls) <= 2:  # the first two calls queue work; the third and later do not
            compiler.later(("bench test", len(calls)), lambda: time.sleep(0.05))
        elif len(calls) == 4:
            pending_when_timed.append(compiler.pending())
        return np.arange(4.0)

    runner.run_workload(fake(engines={"tenalg": tenalg, "numpy": lambda: np.arange(4.0)}),
                        budget=0.001)
    assert pending_when_timed == [0]


def test_run_workload_gives_a_long_workload_its_own_budget():
    def slow():
        time.sleep(0.01)

    engines = {"tenalg": slow, "numpy": slow}
    assert [len(t) for t in runner.run_workload(fake(engines=engines), budget=0.001,
                                                min_rounds=1).times.values()] == [1, 1]
    times = runner.run_workload(fake(engines=engines, budget=0.05), budget=0.001,
                                min_rounds=1).times  # 10 ms calls fit in 50 ms
    assert all(len(t) > 1 for t in times.values())


def test_run_workload_reports_a_mismatch():
    engines = {"tenalg": lambda: np.ones(3), "numpy": lambda: np.array([1.0, 1.0, 1.5])}
    check = runner.run_workload(fake(engines=engines), budget=0.001).check
    assert check == "mismatch: tenalg differs from numpy by up to 0.5"


def test_run_workload_reports_a_shape_mismatch_and_uses_numpy_as_reference():
    engines = {"tenalg": lambda: np.ones(3), "numpy": lambda: np.ones(3),
               "torch": lambda: np.ones((3, 1))}
    check = runner.run_workload(fake(engines=engines), budget=0.001).check
    assert check == "mismatch: torch shape (3, 1) != numpy (3,)"


def test_compare_tolerance_follows_the_dtype():
    near = {"numpy": np.float32([1000.0]), "tenalg": np.float32([1000.05])}
    assert runner.compare(near) == "ok"  # 5e-5 relative: fine in float32
    assert runner.compare({k: v.astype(np.float64) for k, v in near.items()}) != "ok"
    assert runner.compare({"numpy": np.float16([2.0]), "tenalg": np.float16([2.01])}) == "ok"


def test_compare_widens_bfloat16_and_skips_non_numbers():
    import ml_dtypes

    bf16 = {"numpy": np.ones(3, ml_dtypes.bfloat16), "tenalg": np.float32([1, 1, 1.001])}
    assert runner.compare(bf16) == "ok"
    assert runner.compare({"a": object(), "b": object()}).startswith("not compared: ")


def test_run_workload_keeps_going_when_an_engine_fails():
    def broken():
        raise RuntimeError("no kernel")

    engines = {"tenalg": broken, "numpy": lambda: 1.0}
    result = runner.run_workload(fake(engines=engines), budget=0.001)
    assert result.errors == {"tenalg": "RuntimeError: no kernel"}
    assert list(result.times) == ["numpy"] and result.check == "not compared"


def test_run_workload_records_a_skip():
    def setup():
        raise Skip("tenalg.frob is not there yet")

    result = runner.run_workload(Workload("s", "dense", setup), budget=0.001)
    assert result.check == "skipped: tenalg.frob is not there yet" and result.times == {}


def test_run_workload_survives_a_failing_setup():
    def setup():
        raise ModuleNotFoundError("No module named 'tenalg.frob'")

    result = runner.run_workload(Workload("s", "dense", setup), budget=0.001)
    assert result.check == "setup failed: ModuleNotFoundError: No module named 'tenalg.frob'"
    assert result.times == {} and result.errors == {}


def test_run_workload_without_compare():
    engines = {"tenalg": lambda: 1.0, "numpy": lambda: 2.0}
    result = runner.run_workload(fake(engines=engines, compare=False), budget=0.001)
    assert result.check == "not compared"


def test_rates_fractions_and_speedups():
    result = timed({"tenalg": [1.0, 2.0, 9.0], "tenalg-plan": [1.0], "numpy": [4.0],
                    "torch": [2.0, 8.0]}, limit="copy", bytes=8e9)
    assert result.median("tenalg") == 2.0
    assert result.rate("tenalg") == 4e9
    assert result.fraction("numpy", {"copy": 4e9}) == 0.5
    assert result.speedups() == {"tenalg": {"numpy": 2.0, "torch": 2.5},
                                 "tenalg-plan": {"numpy": 4.0, "torch": 5.0}}


def test_speedups_without_competitors_use_the_first_engine():
    result = timed({"tenalg-contiguous": [2.0], "tenalg-fiber": [1.0]})
    assert result.speedups() == {"tenalg-fiber": {"tenalg-contiguous": 2.0}}
    assert result.rate("tenalg-fiber") is None
    assert result.fraction("tenalg-fiber", {}) is None


class FakeProbes:
    """limits.Probes' interface: a 'read' measurement of 1e9 bytes a call, copies
    measured twice."""

    def __init__(self):
        self.calls = {key: 0 for key in ("read", "copy-1t", "copy-mt")}
        self.fns = {key: (lambda key=key: self.count(key)) for key in self.calls}

    def count(self, key):
        self.calls[key] += 1
        time.sleep(1e-3 if key == "read" else 2e-3)

    in_rounds = staticmethod(limits.Probes.in_rounds)

    def rates(self, times):
        return {key: 1e9 / min(t) for key, t in times.items()}


def test_run_workload_times_the_bandwidth_limit_in_its_rounds():
    probes = FakeProbes()
    result = runner.run_workload(fake(limit="read", bytes=1e9), budget=0.02, probes=probes)
    assert sorted(result.times) == ["numpy", "tenalg"]  # the probe is not an engine
    assert list(result.limit_times) == ["read"] and len(result.limit_times["read"]) >= 3
    assert probes.calls["read"] >= 3 and probes.calls["copy-mt"] == 0
    assert result.limit_in_rounds == 1e9 / min(result.limit_times["read"])
    run_limits = {"read": 1e6}  # the run's own limit: used only where none was measured
    assert result.limit(run_limits) == result.limit_in_rounds
    assert result.limit(run_limits, in_rounds=False) == 1e6
    rate = result.rate("tenalg")
    assert result.fraction("tenalg", run_limits) == pytest.approx(rate / result.limit_in_rounds)
    assert result.fraction("tenalg", run_limits, in_rounds=False) == pytest.approx(rate / 1e6)
    copies = runner.run_workload(fake(limit="copy", bytes=1e9), budget=0.02, probes=probes)
    assert sorted(copies.limit_times) == ["copy-1t", "copy-mt"]  # the limit: the better
    assert copies.limit_in_rounds == max(1e9 / min(t) for t in copies.limit_times.values())
    gemm = runner.run_workload(fake(limit="gemm-f64", flops=1e9), budget=0.01, probes=probes)
    assert gemm.limit_times == {} and gemm.limit_in_rounds is None  # the run's peak only


def test_flops_workload_rate():
    result = timed({"tenalg": [0.5]}, limit="gemm-f64", flops=1e9)
    assert result.fraction("tenalg", {"gemm-f64": 4e9}) == 0.5


LIMITS = {"copy-1t": 1e10, "copy-mt": 2e10, "copy": 2e10, "copy-new-1t": 1.5e10,
          "copy-new-mt": 1e10, "copy-new": 1.5e10, "read": 3e10, "gemm-f32": 1e11,
          "gemm-f64": 5e10}


def test_format_table_rows_and_notes():
    ok = timed({"tenalg": [1e-3], "numpy": [3e-3]}, name="w-ok", limit="read", bytes=3e7)
    broken = runner.Result(fake(name="w-bad"), check="skipped: not yet",
                           errors={"torch": "ImportError: x"})
    probed = timed({"tenalg": [1e-3]}, name="w-probed", limit="read", bytes=3e7)
    probed.limit_in_rounds = 1.5e10
    probed.load = {"others_cores": 0.25, "steal_cores": 0.0}
    lines = runner.format_table([ok, probed, broken], LIMITS).splitlines()
    assert lines[0].split() == ["workload", "engine", "median", "rounds", "rate", "of", "limit",
                                "limit", "load", "tenalg", "speed-up"]
    assert lines[2].split() == ["w-ok", "tenalg", "1", "ms", "-", "30.00", "GB/s", "1.00",
                                "read", "30.0", "GB/s,", "run", "-", "numpy", "3.00x"]
    assert lines[3].split() == ["numpy", "3", "ms", "-", "10.00", "GB/s", "0.33", "read"]
    assert lines[4].split() == ["w-probed", "tenalg", "1", "ms", "-", "30.00", "GB/s", "2.00",
                                "read", "15.0", "GB/s", "0.25"]
    assert lines[5].split()[:2] == ["w-bad", "-"]
    assert lines[6:] == ["  ! torch failed: ImportError: x", "  ! skipped: not yet"]


def rounds(result, by_engine):
    """``result`` with per-round samples (round 0 the calibration) and its flat times."""
    result.rounds = {e: [list(r) for r in rs] for e, rs in by_engine.items()}
    result.times = {e: [t for r in rs for t in r] for e, rs in by_engine.items()}
    return result


def test_spread_is_over_round_medians_without_the_calibration():
    result = rounds(timed({}), {"tenalg": [[9.0], [1.0, 1.0, 5.0], [2.0], [3.0, 4.0]],
                                "numpy": [[2.0]]})
    assert result.spread("tenalg") == (1.0, 2.0, 3.5)  # rounds' medians 1, 2, 3.5
    assert result.spread("numpy") == (2.0, 2.0, 2.0)  # one round: the calibration's
    assert result.p95("tenalg") == pytest.approx(np.percentile(result.times["tenalg"], 95))
    assert runner.format_spread(result, "tenalg") == "0.33-1.17"  # median of all: 3
    assert runner.format_spread(result, "numpy") == "-"


def test_a_row_is_suspect_for_its_spread_or_the_load():
    steady = {"tenalg": [[1.0], [1.0], [1.2]], "numpy": [[2.0], [2.0], [2.1]]}
    result = rounds(timed({}), steady)
    result.load = {"others_cores": 0.1, "steal_cores": 0.1}
    assert result.suspect() == []
    result.load = {"others_cores": 0.5, "steal_cores": 0.1}
    assert result.suspect() == ["other processes kept 0.6 cores busy"]
    result.background = 1  # (the meter counts the run's busy processes as its own)
    assert result.suspect() == ["other processes kept 0.6 cores busy"]
    jumpy = rounds(timed({}), {**steady, "numpy": [[2.0], [2.0], [3.1]]})
    assert jumpy.suspect() == ["numpy's rounds spread 1.6x"]
    assert runner.SPREAD_LIMIT < 1.55
    lines = runner.format_table([jumpy], LIMITS).splitlines()
    assert lines[2].startswith("? fake ") and lines[-1] == "  ? suspect: numpy's rounds spread 1.6x"
    assert timed({}).load == {} and rounds(timed({}), steady).suspect() == []  # no meter


def test_run_workload_records_rounds_and_load():
    result = runner.run_workload(fake(), budget=0.01, min_rounds=3)
    for engine, times in result.times.items():
        assert len(result.rounds[engine]) == timing.BLOCKS + 1
        assert [t for r in result.rounds[engine] for t in r] == times
    assert set(result.load) == {"others_cores", "steal_cores", "loadavg_1m"}
    assert result.load["others_cores"] is None or result.load["others_cores"] >= 0


def test_steps_of_a_loop_are_recorded_after_the_warm_up():
    steps = bench_mixed.Steps()

    def loop(engine):
        def fn():
            steps.start(engine)
            time.sleep(timing.MIN_BATCH)  # a batch of one call: a sample a call
            steps.lap(engine, "one")
            steps.lap(engine, "two")
            return np.ones(2)
        return fn

    w = Workload("loop", "mixed", lambda: {"tenalg": loop("tenalg"), "numpy": loop("numpy")},
                 steps=steps)
    result = runner.run_workload(w, budget=0.01, min_rounds=2)
    calls = sum(len(r) for r in result.rounds["tenalg"])  # warm-up call left out
    assert {e: {s: len(t) for s, t in by.items()} for e, by in result.steps.items()} == {
        "tenalg": {"one": calls, "two": calls},
        "numpy": {"one": sum(len(r) for r in result.rounds["numpy"])} | {
            "two": sum(len(r) for r in result.rounds["numpy"])}}
    lines = runner.format_steps(result)
    assert [line.split(":")[0] for line in lines] == ["step one", "step two"]
    assert "tenalg " in lines[0] and "(p95 " in lines[0] and "numpy " in lines[0]


def test_format_time_and_limits():
    assert [runner.format_time(t) for t in (2.5, 0.0123, 4.56e-5, 7e-8)] == [
        "2.5 s", "12.3 ms", "45.6 us", "70 ns"]
    line = runner.format_limits(LIMITS)
    assert line.startswith("limits: copy 20.0 GB/s (1 thread 10.0")
    assert "into a new array (copy-new) 15.0 GB/s" in line


def test_progress_is_a_plain_line_per_step_off_a_terminal():
    stream = io.StringIO()
    results = runner.run([fake("one"), fake("two")], budget=0.001, stream=stream)
    assert [r.workload.name for r in results] == ["one", "two"]
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue() and len(lines) == 2
    assert lines[0].startswith("[1/2] ") and lines[0].endswith(" s one")
    assert lines[1].startswith("[2/2] ") and lines[1].endswith(" s two")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal_redraws_in_place():
    stream = Terminal()
    bar = runner.Progress(None, stream, width=4)
    bar.step("first")  # before the count of steps is known
    bar.total = 2
    bar.step("second")
    bar.done()
    frames = stream.getvalue().split("\r")[1:]
    assert frames[0].startswith("[####] 1/? ") and frames[0].endswith(" s first\x1b[K")
    assert frames[1].startswith("[####] 2/2 ") and frames[1].endswith(" s second\x1b[K\n")


def test_run_steps_a_given_progress_and_leaves_it_open():
    stream = io.StringIO()
    bar = runner.Progress(3, stream)
    bar.step("limits")
    results = runner.run([fake("one")], budget=0.001, progress=bar, background=2)
    assert stream.getvalue().splitlines()[1].startswith("[2/3] ")
    assert results[0].background == 2


# -- reports -----------------------------------------------------------------------------


def test_json_report(tmp_path):
    ok = timed({"tenalg": [1e-3, 2e-3, 3e-3], "numpy": [4e-3]}, name="w", limit="read",
               bytes=4e7)
    path = tmp_path / "r.json"
    report.write_json(path, [ok], LIMITS, {"quick": True})
    data = json.loads(path.read_text())
    assert data["settings"] == {"quick": True} and data["limits"] == LIMITS
    assert data["machine"]["versions"]["numpy"] == np.__version__
    (record,) = data["results"]
    assert (record["name"], record["limit"], record["bytes"]) == ("w", "read", 4e7)
    assert record["check"] == "not compared" and record["errors"] == {}
    assert record["engines"]["tenalg"]["median_s"] == 2e-3
    assert record["engines"]["tenalg"]["times_s"] == [1e-3, 2e-3, 3e-3]
    assert record["engines"]["numpy"]["fraction_of_limit"] == pytest.approx(1 / 3)
    assert record["limit_in_rounds"] is None and record["limit_times_s"] == {}
    ok.limit_in_rounds, ok.limit_times = 2e10, {"read": [2e-3]}
    report.write_json(path, [ok], LIMITS, {"quick": True})
    (record,) = json.loads(path.read_text())["results"]
    assert record["limit_in_rounds"] == 2e10 and record["limit_times_s"] == {"read": [2e-3]}
    assert record["engines"]["numpy"]["fraction_of_limit"] == pytest.approx(0.5)
    assert record["engines"]["numpy"]["fraction_of_run_limit"] == pytest.approx(1 / 3)
    assert record["speedup"] == {"tenalg": {"numpy": 2.0}}
    assert record["engines"]["tenalg"]["spread_s"] == {"min": 1e-3, "median": 2e-3, "max": 3e-3}
    assert record["engines"]["tenalg"]["p95_s"] == pytest.approx(2.9e-3)
    assert record["suspect"] == ["tenalg's rounds spread 3.0x"]
    assert record["load"] == {} and record["background_processes"] == 0
    assert record["steps"] == {}


def test_json_report_of_a_loop_and_its_load(tmp_path):
    result = rounds(timed({}, name="loop"), {"tenalg": [[1.0], [1.0]], "numpy": [[2.0], [2.0]]})
    # the run's busy process is its own load: the others kept 0.2 cores busy
    result.load, result.background = {"others_cores": 0.2, "steal_cores": 0.0}, 1
    result.steps = {"tenalg": {"svd": [1.0, 2.0, 3.0]}}
    path = tmp_path / "r.json"
    report.write_json(path, [result], LIMITS, {"load": 1})
    (record,) = json.loads(path.read_text())["results"]
    assert record["load"]["others_cores"] == 0.2 and record["background_processes"] == 1
    assert record["suspect"] == []
    assert record["engines"]["numpy"]["rounds_s"] == [[2.0], [2.0]]
    assert record["steps"] == {"tenalg": {"svd": {"median_s": 2.0, "p95_s": pytest.approx(2.9),
                                                  "count": 3}}}


def _chart_results():
    suspect = rounds(timed({}, name="jumpy"), {"tenalg": [[1.0], [1.0], [3.0]],
                                               "numpy": [[2.0], [2.0], [2.0]]})
    return [
        timed({"tenalg": [1e-3], "numpy": [3e-3]}, name="a", limit="read", bytes=3e7),
        timed({"tenalg": [1e-6], "tenalg-plan": [5e-7], "numpy": [2e-3], "teneva": [1e-8]},
              name="b", group="tt"),  # 2000x and 0.01x: clipped
        timed({"tenalg": [1e-3]}, name="hot", limit="read", bytes=3e8),  # 10x the limit
        runner.Result(fake(name="skipped"), check="skipped: x"),
        suspect,
    ]


def test_chart_is_a_png(tmp_path):
    path = tmp_path / "chart.png"
    report.write_chart(path, _chart_results(), LIMITS, title="a title " * 40)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_chart_colours_one_per_engine_and_marks_clipped_and_suspect(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures, close = [], plt.close
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to look at it
    results = _chart_results()
    chart.draw(tmp_path / "c.png", results, LIMITS)
    (figure,) = figures
    speedups, fractions = figure.axes
    texts = [t.get_text().strip() for axes in figure.axes for t in axes.texts]
    assert "2000x (clipped) vs numpy" in texts and "0.01x (clipped) vs teneva" in texts
    assert "10.00 tenalg (clipped)" in texts  # a fraction of 10, drawn at the clip
    assert "0.33 numpy" in texts and "3x vs numpy" in texts  # every bar its value
    assert any(t.startswith("no limit") for t in texts)  # no empty row
    labels = {t.get_text(): t.get_color() for t in speedups.get_yticklabels()}
    assert labels["? jumpy"] == "#d62728" and labels["a"] != "#d62728"
    assert "skipped" not in " ".join(labels)
    palette = chart.colours(results)
    assert palette["numpy"] == chart.COLOURS["numpy"]
    assert len(set(palette.values())) == len(palette)  # one colour per engine
    numpy_bars = [p for p in fractions.patches
                  if matplotlib_colour(p) == matplotlib_colour(palette["numpy"])]
    assert numpy_bars and all(p.get_width() <= chart.FRACTION_CLIP for p in fractions.patches)
    assert "Fraction of the limit" in fractions.get_title(loc="left")
    close(figure)


def matplotlib_colour(thing):
    from matplotlib.colors import to_hex

    return to_hex(thing.get_facecolor() if hasattr(thing, "get_facecolor") else thing)


# -- limits and the dense workloads --------------------------------------------------------


def test_measure_limits_gives_every_limit():
    measured = limits.measure_limits(quick=True, budget=0.001)
    assert tuple(measured) == limits.KEYS
    assert all(v > 0 for v in measured.values())
    assert measured["copy"] == max(measured["copy-1t"], measured["copy-mt"])


def test_limits_are_the_best_rate_of_each_measurement():
    probes = limits.Probes(quick=True)
    times = {key: [4.0, 2.0, 3.0] for key in probes.fns}
    times["copy-mt"] = [1.0]
    got = probes.limits(times)
    copy = probes.work["copy-1t"]
    assert got["copy-1t"] == copy / 2 and got["copy-mt"] == got["copy"] == copy
    assert got["read"] == probes.work["read"] / 2 == 64 * 2**20
    assert got["gemm-f32"] == 2 * 1024**3 / 2
    assert probes.in_rounds("copy-new") == ("copy-new-1t", "copy-new-mt")
    assert probes.in_rounds("gemm-f32") == ()


def test_line_reads_probe_sums_one_element_a_line():
    a = np.arange(4096.0)
    assert limits._strided_sum(a, 8, 512) == a[::8].sum()  # 16 parts of 32 lines
    assert limits._strided_sum(a, 16, 32) == a[: 32 * 16 : 16].sum()


def test_read_bytes_counts_cache_lines():
    a = np.empty((4096, 4096))
    assert bench_dense.read_bytes(a) == a.nbytes
    assert bench_dense.read_bytes(np.diagonal(a)) == 4096 * 64  # one line per element
    assert bench_dense.read_bytes(a[:, ::4]) == a.nbytes  # 32-byte steps: every line read
    assert bench_dense.read_bytes(a[:, ::2]) == a.nbytes  # 16-byte steps: likewise
    assert bench_dense.read_bytes(a[:, ::16]) == a.nbytes // 2  # 128-byte steps: 1 line in 2
    assert bench_dense.read_bytes(np.empty(())) == 8


def test_dense_workloads_are_well_formed():
    ws = bench_dense.workloads()
    assert len({w.name for w in ws}) == len(ws)
    for w in ws:
        assert w.group == "dense"
        assert (w.limit is None) == (w.bytes == 0), w.name
    by_name = {w.name: w for w in ws}
    assert by_name["permute-3102-64x64x64x64-f64"].bytes == 2 * 64**4 * 8
    assert by_name["trace-4096x4096-f64"].bytes == 4096 * 64 + 8
    assert by_name["sum-512x512x64-f32-axes02"].bytes == 512 * 512 * 64 * 4 + 512 * 4


@pytest.mark.parametrize("name", ["small-sum-8x8-f64-axis1", "small-transpose-8x8-f64"])
def test_small_dense_workloads_agree_with_numpy(name):
    (workload,) = [w for w in bench_dense.workloads() if w.name == name]
    result = runner.run_workload(workload, budget=0.001)
    assert result.errors == {} and result.check == "ok"
    assert {"tenalg", "tenalg-plan", "numpy"} <= set(result.times)


def test_busy_processes_run_inside_and_stop_after():
    with load.busy(2) as started:
        assert len(started) == 2 and all(p.poll() is None for p in started)
    assert all(p.poll() is not None for p in started)
    with pytest.raises(KeyError), load.busy(1) as started:
        raise KeyError("stops the processes too")
    assert started[0].poll() is not None


def test_cpu_meter_counts_the_others_not_this_process():
    meter = load.CpuMeter()
    sum(range(200000))  # this process's own work is not the others'
    time.sleep(0.05)
    others = meter.read()["others_cores"]
    assert others is None or 0 <= others <= (os.cpu_count() or 1)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_runs_own_processes_are_not_others():
    """The processes the run starts (a LocalCluster's workers, --load's busy ones) count
    as the run's own CPU time while they run (from /proc) and after they end (os.times)."""
    ended = os.times().children_user + os.times().children_system
    with load.busy(1):
        start = load._descendants_cpu()
        deadline = time.monotonic() + 10
        while load._descendants_cpu() - start < 0.05 and time.monotonic() < deadline:
            time.sleep(0.01)
        spun = load._descendants_cpu() - start
    assert spun >= 0.05  # the busy child's time, read while it ran
    # and counted once it ended: each reading truncates user and system time to clock
    # ticks apiece, so the two may differ by two ticks a side (CI saw 0.05 s against 0.07)
    assert os.times().children_user + os.times().children_system - ended >= spun - 4 / load._TICK


def test_mixed_workloads_are_well_formed_and_agree():
    ws = bench_mixed.workloads()
    assert [w.group for w in ws] == ["mixed"] * len(ws) and any(w.quick for w in ws)
    assert {w.name for w in ws} <= {w.name for w in registry.all_workloads()}


def test_round_sweep_matches_a_dense_rounding():
    rng = np.random.default_rng(0)
    cores = [rng.standard_normal(s) for s in ((1, 3, 2), (2, 3, 2), (2, 3, 1))]
    dense = np.einsum("aib,bjc,ckd->ijk", *cores)
    sweep = bench_mixed.round_sweep(bench_mixed.doubled(cores), 2, np)
    assert list(sweep) == ["orthogonalise", "truncate"]
    sweep = bench_mixed.round_sweep(bench_mixed.doubled(cores), 2, np)
    try:
        while True:
            next(sweep)
    except StopIteration as stop:
        rounded = stop.value
    assert [c.shape for c in rounded] == [(1, 3, 2), (2, 3, 2), (2, 3, 1)]
    np.testing.assert_allclose(np.einsum("aib,bjc,ckd->ijk", *rounded), 2 * dense, atol=1e-10)


def test_pools_steps_names():
    times = pools.steps(rounds=1, calls=2, n=4, size=8, gemm_n=16)
    assert all(len(t) == 2 for k, t in times.items() if not k.startswith("gemm"))
    assert set(pools.summary(times)) == set(times)


@pytest.mark.parametrize("module", [registry, timing, runner, report, limits, bench_dense,
                                    beside_blas, against_numpy, chart, load, bench_mixed,
                                    pools])
def test_docstring_examples(module):
    # tests/test_doctests.py leaves tenalg.bench out; its examples run here
    assert doctest.testmod(module).failed == 0
