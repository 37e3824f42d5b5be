"""The input generator checked against the task's declared dims and dtypes before anything
is judged (issue 36): one sentence naming the input and the mismatch, exit 2."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.errors import KernelloopError
from kernelloop.task import load_task
from kernelloop.task.inputs_check import check_inputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HEAD = "import torch\n\n\ndef make_inputs(dims, dtype, device, generator, case='random'):\n"
RANDN = "torch.randn({}, generator=generator, device=device).to(dtype)"


def _task(tmp_path: Path, body: str, dtypes: str | None = None) -> Path:
    folder = tmp_path / "t"
    shutil.copytree(
        EXAMPLES / "cpu_task", folder, ignore=shutil.ignore_patterns("candidates", "__pycache__")
    )
    (folder / "inputs.py").write_text(HEAD + body)
    if dtypes:
        toml = folder / "task.toml"
        text = toml.read_text().replace('dtypes = ["float32"]', dtypes, 1)
        fp16 = "float16 = { atol = 1e-2, rtol = 1e-2 }\n"
        text = text.replace("[tolerances]\n", "[tolerances]\n" + fp16)
        text = text.split("\n[e2e]")[0]  # its own tolerances per dtype: not needed here
        toml.write_text(text)
    return folder


def _error(folder: Path) -> str:
    with pytest.raises(KernelloopError) as e:
        check_inputs(load_task(folder))
    return str(e.value)


@pytest.mark.parametrize("name", ["cpu_task", "ln_softmax_dropout", "add_rmsnorm"])
def test_the_examples_pass(name):
    check_inputs(load_task(EXAMPLES / name))


def test_a_generator_that_ignores_dims_is_named(tmp_path):
    body = (
        f"    x = {RANDN.format('(8, 16)')}\n"
        f"    return {{'x': x, 'residual': x.clone(), 'weight': {RANDN.format('(16,)')}}}\n"
    )
    msg = _error(_task(tmp_path, body))
    assert "input `x` (and every other input) keeps shape (8, 16)" in msg, msg
    assert "ignores `dims`" in msg and "\n" not in msg


def test_an_input_transposed_on_one_shape_is_named_with_its_axis(tmp_path):
    body = (
        "    rows, cols = dims['rows'], dims['cols']\n"
        f"    x = {RANDN.format('(rows, cols)')}\n"
        # the longer dim first: (rows, cols) on 2048x16, transposed on 8x16384
        f"    r = {RANDN.format('(max(rows, cols), min(rows, cols))')}\n"
        f"    return {{'x': x, 'residual': r, 'weight': {RANDN.format('(cols,)')}}}\n"
    )
    msg = _error(_task(tmp_path, body))
    assert msg.startswith("input `residual` has shape"), msg
    assert "its axis 0 is 16384, not rows = 8" in msg, msg


def test_one_input_left_fixed_beside_one_that_follows_dims(tmp_path):
    body = (  # the two smallest CPU shapes are 2048x16 and 8x16384
        "    rows, cols = dims['rows'], dims['cols']\n"
        f"    x = {RANDN.format('(rows, cols)')}\n"
        f"    r = {RANDN.format('(2048, 16)')}\n"
        f"    return {{'x': x, 'residual': r, 'weight': {RANDN.format('(cols,)')}}}\n"
    )
    msg = _error(_task(tmp_path, body))
    assert "input `residual` keeps shape (2048, 16)" in msg and "`x`" in msg, msg


def test_an_input_that_ignores_the_dtype_is_named(tmp_path):
    body = (
        "    rows, cols = dims['rows'], dims['cols']\n"
        "    x = torch.randn((rows, cols), generator=generator, device=device)\n"
        "    return {'x': x, 'residual': x.clone(), 'weight': x[0].clone()}\n"
    )
    msg = _error(_task(tmp_path, body, dtypes='dtypes = ["float32", "float16"]'))
    assert "input `x` is float32 when" in msg and "asked for float16" in msg, msg


def test_a_generator_that_raises_or_returns_a_list(tmp_path):
    msg = _error(_task(tmp_path, "    raise ValueError('boom')\n"))
    assert "raised ValueError: boom on dims" in msg, msg
    msg = _error(_task(tmp_path / "b", f"    return [{RANDN.format('(4,)')}]\n"))
    assert "returned list, not a dict" in msg, msg


def test_evaluate_exits_2_with_the_sentence(tmp_path):
    body = (
        f"    x = {RANDN.format('(8, 16)')}\n"
        f"    return {{'x': x, 'residual': x.clone(), 'weight': {RANDN.format('(16,)')}}}\n"
    )
    folder = _task(tmp_path, body)
    done = subprocess.run(
        [sys.executable, "-m", "kernelloop", "evaluate", str(folder), str(folder / "baseline.py")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "ignores `dims`" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_task_show_exits_2_with_the_sentence(tmp_path):
    """`task show` prints the declared shapes as the contract: a generator that does not
    follow them is said first, as run and evaluate say it."""
    body = (
        "    rows, cols = dims['rows'], dims['cols']\n"
        f"    x = {RANDN.format('(rows, cols)')}\n"
        f"    r = {RANDN.format('(max(rows, cols), min(rows, cols))')}\n"
        f"    return {{'x': x, 'residual': r, 'weight': {RANDN.format('(cols,)')}}}\n"
    )
    folder = _task(tmp_path, body)
    done = subprocess.run(
        [sys.executable, "-m", "kernelloop", "task", "show", str(folder), "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "input `residual` has shape" in done.stderr, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") <= 2, done.stdout + done.stderr


def test_evaluate_exits_2_when_the_reference_raises(tmp_path):
    """A setup error (the task's own reference failing) is no verdict on the candidate:
    exit 2, not 1 (rejected)."""
    folder = _task(tmp_path, "")
    (folder / "inputs.py").write_text((EXAMPLES / "cpu_task" / "inputs.py").read_text())
    (folder / "reference.py").write_text(
        "def reference(x, residual, weight, *, eps):\n    raise RuntimeError('the task bug')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelloop",
            "evaluate",
            str(folder),
            str(folder / "baseline.py"),
            "--shapes",
            "2048x16",
            "--no-timing",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the task bug" in done.stdout + done.stderr
