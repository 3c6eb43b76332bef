"""The `tenalg` command line: bench end to end on one small workload, explain, --version."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tenalg as ta
from tenalg import cli
from tenalg.backends import ahead
from tenalg.cli import main, parse_shape


def test_parse_shape():
    assert parse_shape("64x32") == (64, 32)
    assert parse_shape("5") == (5,)
    assert parse_shape("2X3x0") == (2, 3, 0)
    assert parse_shape("()") == parse_shape("scalar") == ()
    with pytest.raises(argparse.ArgumentTypeError, match="'64by32' is not extents"):
        parse_shape("64by32")
    with pytest.raises(argparse.ArgumentTypeError, match="negative"):
        parse_shape("3x-1")


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"tenalg {ta.__version__}"


def test_python_dash_m_runs_the_same_command():
    done = subprocess.run([sys.executable, "-m", "tenalg", "--version"], capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == f"tenalg {ta.__version__}"


def test_bench_one_workload_end_to_end(tmp_path, capsys):
    name = "small-transpose-8x8-f64"
    status = main(["bench", "--quick", "--only", name, "--out", str(tmp_path),
                   "--repeat-time", "0.01"])
    assert status == 0
    captured = capsys.readouterr()
    progress = captured.err.splitlines()  # not a terminal: a plain line a step
    assert "\r" not in captured.err
    assert [line.split(" s ", 1)[1] for line in progress] == [
        "collecting the workloads", "the limits: arrays and kernels",
        "the limits, before the workloads", name, "the limits, after the workloads"]
    assert progress[0].startswith("[1/?] ") and progress[-1].startswith("[5/5] ")
    lines = captured.out.splitlines()
    assert lines[0].startswith("limits: copy ")
    assert lines[1].split()[:2] == ["workload", "engine"]
    assert lines[3].removeprefix("? ").split()[:2] == [name, "tenalg"]  # ?: suspect
    assert [line.split()[0] for line in lines[4:6]] == ["tenalg-plan", "numpy"]
    data = json.loads((tmp_path / "bench-results.json").read_text())
    assert data["settings"] == {"quick": True, "only": name, "group": None,
                                "repeat_time_s": 0.01, "load": 0}
    (record,) = data["results"]
    assert record["name"] == name and record["check"] == "ok"
    assert set(record["load"]) == {"others_cores", "steal_cores", "loadavg_1m"}
    assert isinstance(record["suspect"], list) and record["background_processes"] == 0
    assert lines[-2].endswith("rows suspect (marked ?)")
    assert {"tenalg", "tenalg-plan", "numpy"} <= set(record["engines"])
    assert (tmp_path / "bench-results.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_load_starts_busy_processes_and_stops_them(tmp_path, capsys, monkeypatch):
    from tenalg.bench import load

    seen = []
    busy = load.busy

    def watched(n):
        seen.append(n)
        return busy(n)

    monkeypatch.setattr(load, "busy", watched)
    status = main(["bench", "--quick", "--only", "small-sum-8x8-f64-axis1", "--out",
                   str(tmp_path), "--repeat-time", "0.01", "--no-progress", "--load", "1"])
    assert status == 0 and seen == [1]
    captured = capsys.readouterr()
    assert captured.err == ""  # --no-progress
    assert "1 busy process started by the run" in captured.out
    data = json.loads((tmp_path / "bench-results.json").read_text())
    assert data["settings"]["load"] == 1
    assert data["results"][0]["background_processes"] == 1
    assert main(["bench", "--only", "small", "--load", "-1"]) == 2


def test_bench_groups_are_the_registrys(capsys):
    from tenalg.bench import registry

    from tenalg.cli import GROUPS

    assert GROUPS == registry.GROUPS
    assert main(["bench", "--list", "--group", "mixed"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed and all("(mixed" in line for line in listed)
    with pytest.raises(SystemExit):
        main(["bench", "--group", "no-such-group"])


def test_bench_without_matplotlib_still_writes_the_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    status = main(["bench", "--quick", "--only", "small-sum-8x8-f64-axis1", "--out",
                   str(tmp_path), "--repeat-time", "0.01", "--no-progress"])
    assert status == 0
    assert "no chart: matplotlib is missing" in capsys.readouterr().out
    assert (tmp_path / "bench-results.json").exists()
    assert not (tmp_path / "bench-results.png").exists()


def test_bench_list_and_no_match(capsys):
    assert main(["bench", "--list", "--group", "dense", "--quick"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert "small-sum-8x8-f64-axis1  (dense, quick)" in listed
    assert not any("transpose-8192x8192" in line for line in listed)  # not quick
    assert main(["bench", "--only", "no-such-workload"]) == 2
    assert "no workload matches" in capsys.readouterr().err
    assert main(["bench", "--list", "--group", "tt", "--only", "sym"]) == 2  # as without --list
    assert "no workload matches" in capsys.readouterr().err


def test_a_listing_cut_short_by_its_reader_ends_quietly():
    """tenalg bench --list | head -1 printed a BrokenPipeError traceback.  The reader is
    gone before the first line (reading one line first raced with the listing, which
    could fit the pipe whole before the reader left, on a loaded machine)."""
    read, write = os.pipe()
    os.close(read)
    try:
        listing = subprocess.run([sys.executable, "-m", "tenalg", "bench", "--list"],
                                 stdout=write, stderr=subprocess.PIPE, timeout=120,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        os.close(write)
    assert listing.returncode == 1
    assert listing.stderr == b""


def test_bench_refuses_an_out_it_cannot_write_before_measuring(tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    measured = []
    monkeypatch.setattr(cli, "_measure", lambda *args: measured.append(args))
    assert main(["bench", "--quick", "--only", "small-sum-8x8-f64-axis1", "--out",
                 str(blocker / "results")]) == 2
    assert "cannot write to --out" in capsys.readouterr().err and not measured


def test_compile_says_where_the_kernels_go_and_refuses_a_cache_that_will_not_last(
        capsys, monkeypatch):
    compiled = []
    monkeypatch.setattr(cli.ahead, "compile_all", lambda dtypes, report, jobs: compiled.append(
        (dtypes, jobs)) or 0.0)
    assert main(["compile", "--dtype", "float32", "--jobs", "3"]) == 0
    assert compiled == [(["float32"], 3)]
    assert f"into {cli.jit.cache_location()}" in capsys.readouterr().err
    for place in ("temporary", "none"):  # compiled kernels would not outlive the process
        monkeypatch.setattr(cli.jit, "CACHE_PLACE", place)
        assert main(["compile"]) == 2 and len(compiled) == 1
        assert "set NUMBA_CACHE_DIR" in capsys.readouterr().err


def test_compile_in_two_processes_runs_every_step_once():
    """The steps of ``tenalg compile --jobs 2`` run in a pool of two processes (here mostly
    loading the suite's compiled kernels), each reported once."""
    seen = []
    ahead.compile_all(["float64"], lambda k, n, name, s: seen.append((k, n, name)), 2)
    steps = [name for name, _ in ahead.workloads(["float64"])]
    assert [(k, n) for k, n, _ in seen] == [(k, len(steps)) for k in range(1, len(steps) + 1)]
    assert sorted(name for *_, name in seen) == sorted(steps)


def test_bench_needs_a_number_for_repeat_time(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--repeat-time", "soon"])
    assert stop.value.code == 2
    for seconds in ("-1", "0", "nan"):
        assert main(["bench", "--only", "small-sum", "--repeat-time", seconds]) == 2
        assert "more than 0" in capsys.readouterr().err


@pytest.mark.parametrize("args, shapes, dtype", [
    (["ij,jk->ik", "64x32", "32x16", "--dtype", "float32"], [(64, 32), (32, 16)], np.float32),
    (["ij,jk,kl->il", "8x4", "4x6", "6x2"], [(8, 4), (4, 6), (6, 2)], np.float64),
    ([",ij->ij", "()", "2x3", "--dtype", "complex64"], [(), (2, 3)], np.complex64),
    (["ii->i", "5x5", "--dtype", "bfloat16"], [(5, 5)], ta.bfloat16),
    (["--", "->", "()"], [()], np.float64),  # an expression that starts with "-"
])
def test_explain_prints_the_einsum_plan(args, shapes, dtype, capsys):
    assert main(["explain", *args]) == 0
    descriptors = [ta.TensorDescriptor.contiguous(shape, dtype) for shape in shapes]
    expression = args[1] if args[0] == "--" else args[0]
    expected = ta.einsum_plan(expression, *descriptors).explain()
    assert capsys.readouterr().out == expected + "\n"


def test_explain_reports_a_bad_expression_and_extents(capsys):
    assert main(["explain", "ij,jk->iq", "64x32", "32x16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tenalg explain: ExpressionError: ") and "'q'" in err
    assert main(["explain", "ij,jk->ik", "2x3", "4x4"]) == 2
    assert capsys.readouterr().err.startswith("tenalg explain: ExtentError: mode 'j'")
    assert main(["explain", "ij,jk->ik"]) == 2  # the shapes forgotten
    assert capsys.readouterr().err.strip().endswith("give one SHAPE per operand, like 64x32")


def test_explain_takes_any_numpy_dtype_and_reports_a_bad_one(capsys):
    """--dtype int64 was refused, though einsum plans take integers (NumPy's routine);
    found by a probe of the docs."""
    assert main(["explain", "ij,jk->ik", "2x3", "3x4", "--dtype", "int64"]) == 0
    assert "numpy.einsum(" in capsys.readouterr().out
    assert main(["explain", "ij->ji", "2x3", "--dtype", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tenalg explain: DTypeError: --dtype: 'nonsense' is not a NumPy dtype")
