"""Every name the task reads, and every input case it declares, checked before a candidate
is judged: a mistake in the task is a setup error (exit 2) naming the task file and line,
never a finding about the candidate (issue 47: an extreme case the task's `inputs.py` did
not know was reported as "the candidate raised … in make_inputs", exit 1; `task show`
accepted a misspelled reference function name).

Runs in check_inputs_apart's child (task/inputs_check.py): the task's code is imported and
called there, never beside a model key.
"""

from __future__ import annotations

import ast
import traceback
from pathlib import Path

from kernelloop import pyast
from kernelloop.errors import TaskError
from kernelloop.task.load import Task


def check_names(task: Task) -> None:
    """The reference and input functions, the baseline's entry and the `[e2e]` model and
    inputs exist under the names task.toml gives them; the first that does not, said with
    the line of task.toml that names it."""
    for field in ("reference", "inputs"):
        try:
            task.load_function(field)
        except TaskError as e:
            raise TaskError(str(e).replace(str(task.toml_path), task.toml_line(field), 1)) from None
    _check_entry(task)
    if task.spec.e2e is not None:
        for field in ("model", "inputs"):
            path, name = task.e2e_file_and_name(field)
            if name not in _top_level_names(path):
                raise TaskError(
                    f"{task.toml_line(field, getattr(task.spec.e2e, field))}: [e2e] {field} "
                    f"names '{name}', which {path.name} does not define; define it or fix the "
                    "name."
                )


def _check_entry(task: Task) -> None:
    path, entry = task.baseline_path, task.spec.task.entry
    if path.suffix != ".py" or task.spec.task.kernelbench:
        return  # a C++/CUDA baseline, or an imported problem's Model: judged by its own checks
    if not path.is_file():
        raise TaskError(
            f"{task.toml_line('baseline')}: task.baseline names {path.name}, which is not in "
            f"{task.folder}; add it or fix the name."
        )
    if entry not in _top_level_names(path):
        raise TaskError(
            f"{task.toml_line('entry')}: task.entry names '{entry}', which the baseline "
            f"{path.name} does not define; define it there or fix the name."
        )


def _top_level_names(path: Path) -> set[str]:
    """The names a Python file defines at its top level (functions, classes, assignments,
    imports), read without running it."""
    try:
        tree = pyast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError) as e:
        raise TaskError(f"{path} could not be read as Python ({e}); fix the file.") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def check_cases(task: Task, make, dims: dict[str, int], dtype: str) -> None:
    """The task's own extreme cases, each made once at `dims` (the smallest CPU shape): a
    case its generator does not know is the task's mistake, said with the generator's
    file and line and the task.toml line that declares the case."""
    import torch

    if task.spec.suites.extreme is None:
        return  # kernelloop's generic cases (task/generic_cases.py), not the task's code
    inputs_path, _ = task.file_and_function("inputs")
    for case in task.spec.suites.extreme:
        g = torch.Generator(device="cpu").manual_seed(0)
        try:
            make(dict(dims), getattr(torch, dtype), "cpu", g, case)
        except Exception as e:  # noqa: BLE001 - the task's code: said, with its error
            raise TaskError(
                f"{_frame(e, inputs_path)} raised {type(e).__name__}: {str(e)[:200]} for the "
                f"extreme case '{case}' that {task.toml_line('extreme', case)} declares "
                f"(dims {dims}, {dtype}); add the case to the generator or fix its name in "
                "task.toml."
            ) from None


def _frame(e: BaseException, path: Path) -> str:
    """`FILE:LINE` of the innermost frame in the task's generator file, else the file."""
    where = str(path)
    for frame in traceback.extract_tb(e.__traceback__):
        if Path(frame.filename).resolve() == path.resolve():
            where = f"{path}:{frame.lineno}"
    return where
