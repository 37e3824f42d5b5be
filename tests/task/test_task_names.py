"""Errors in the task are setup errors (exit 2) with the task file and line, never a
finding about the candidate (issue 47, item 7): an extreme case the task's inputs.py does
not know was reported as "the candidate raised … in make_inputs", exit 1, after the
sandbox had started; `task show` accepted a misspelled reference function name. Each
mistake below is one a careless task author makes; each is shown wrong outside kernelloop
first (the misspelled name is not in the file, the generator raises on the case)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelloop.errors import TaskError
from kernelloop.task import load_task
from kernelloop.task.inputs_check import check_inputs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _task(tmp_path: Path, old: str, new: str) -> Path:
    folder = tmp_path / "t"
    shutil.copytree(
        EXAMPLES / "cpu_task", folder, ignore=shutil.ignore_patterns("candidates", "__pycache__")
    )
    toml = folder / "task.toml"
    assert old in toml.read_text()
    toml.write_text(toml.read_text().replace(old, new, 1))
    return folder


def _line(folder: Path, text: str) -> int:
    lines = (folder / "task.toml").read_text().splitlines()
    return next(n for n, ln in enumerate(lines, start=1) if text in ln)


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "old, new, said",
    [
        ('"reference.py:reference"', '"reference.py:refrence"', "task.reference names 'refrence'"),
        ('"inputs.py:make_inputs"', '"inputs.py:make_input"', "task.inputs names 'make_input'"),
        ('entry = "forward"', 'entry = "forwrd"', "task.entry names 'forwrd'"),
        ('model = "e2e.py:model"', 'model = "e2e.py:modle"', "[e2e] model names 'modle'"),
    ],
)
def test_a_misspelled_name_is_said_with_its_task_toml_line(tmp_path, old, new, said):
    folder = _task(tmp_path, old, new)
    wrong = new.split(":")[-1].split('"')[-2]  # the misspelled name: not in its file
    files = {"refrence": "reference.py", "make_input": "inputs.py", "forwrd": "baseline.py"}
    assert not hasattr(_module(folder / files.get(wrong, "e2e.py")), wrong)
    with pytest.raises(TaskError) as e:
        check_inputs(load_task(folder))
    msg = str(e.value)
    assert said in msg and f"task.toml:{_line(folder, new)}:" in msg, msg
    assert "fix the name" in msg and "\n" not in msg, msg


def test_an_extreme_case_the_generator_does_not_know_is_the_tasks_mistake(tmp_path):
    folder = _task(tmp_path, '"tiny"', '"tinny"')
    make = _module(folder / "inputs.py").make_inputs
    with pytest.raises(ValueError, match="unknown input case 'tinny'"):  # wrong outside too
        make({"rows": 2, "cols": 16}, torch.float32, "cpu", torch.Generator(), "tinny")
    with pytest.raises(TaskError) as e:
        check_inputs(load_task(folder))
    msg = str(e.value)
    raise_line = next(
        n
        for n, ln in enumerate((folder / "inputs.py").read_text().splitlines(), start=1)
        if "raise ValueError" in ln
    )
    assert f"inputs.py:{raise_line} raised ValueError" in msg, msg
    assert f"the extreme case 'tinny' that {folder}/task.toml:{_line(folder, 'tinny')}" in msg
    assert "candidate" not in msg, msg


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, old, new",
    [
        (["evaluate", "{t}", "{t}/baseline.py", "--no-timing"], '"tiny"', '"tinny"'),
        (["task", "show", "{t}", "--device", "cpu"], ":reference", ":refrence"),
    ],
)
def test_the_cli_exits_2_naming_the_task_file(tmp_path, command, old, new):
    folder = _task(tmp_path, old, new)
    args = [a.replace("{t}", str(folder)) for a in command]
    done = subprocess.run(
        [sys.executable, "-m", "kernelloop", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert re.search(r"task\.toml:\d+", done.stderr), done.stderr
    assert "candidate raised" not in done.stdout + done.stderr and "Traceback" not in done.stderr
