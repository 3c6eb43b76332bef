"""The `tenalg` command line: bench end to end on one small workload, explain, --version."""

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

import tenalg as ta
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
    assert f"1/1 {name}" in captured.err  # the progress bar
    lines = captured.out.splitlines()
    assert lines[0].startswith("limits: copy ")
    assert lines[1].split()[:2] == ["workload", "engine"]
    assert lines[3].split()[:2] == [name, "tenalg"]
    assert [line.split()[0] for line in lines[4:6]] == ["tenalg-plan", "numpy"]
    data = json.loads((tmp_path / "bench-results.json").read_text())
    assert data["settings"] == {"quick": True, "only": name, "group": None,
                                "repeat_time_s": 0.01}
    (record,) = data["results"]
    assert record["name"] == name and record["check"] == "ok"
    assert {"tenalg", "tenalg-plan", "numpy"} <= set(record["engines"])
    assert (tmp_path / "bench-results.png").read_bytes()[:4] == b"\x89PNG"


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


def test_bench_needs_a_number_for_repeat_time(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["bench", "--repeat-time", "soon"])
    assert stop.value.code == 2


@pytest.mark.parametrize("args, shapes, dtype", [
    (["ij,jk->ik", "64x32", "32x16", "--dtype", "float32"], [(64, 32), (32, 16)], np.float32),
    (["ij,jk,kl->il", "8x4", "4x6", "6x2"], [(8, 4), (4, 6), (6, 2)], np.float64),
    ([",ij->ij", "()", "2x3", "--dtype", "complex64"], [(), (2, 3)], np.complex64),
    (["ii->i", "5x5", "--dtype", "bfloat16"], [(5, 5)], ta.bfloat16),
])
def test_explain_prints_the_einsum_plan(args, shapes, dtype, capsys):
    assert main(["explain", *args]) == 0
    descriptors = [ta.TensorDescriptor.contiguous(shape, dtype) for shape in shapes]
    expected = ta.einsum_plan(args[0], *descriptors).explain()
    assert capsys.readouterr().out == expected + "\n"


def test_explain_reports_a_bad_expression_and_extents(capsys):
    assert main(["explain", "ij,jk->iq", "64x32", "32x16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tenalg explain: ExpressionError: ") and "'q'" in err
    assert main(["explain", "ij,jk->ik", "2x3", "4x4"]) == 2
    assert capsys.readouterr().err.startswith("tenalg explain: ExtentError: mode 'j'")


def test_explain_reports_a_bad_dtype(capsys):
    assert main(["explain", "ij->ji", "2x3", "--dtype", "int32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tenalg explain: DTypeError: --dtype: dtype int32 is not supported")
