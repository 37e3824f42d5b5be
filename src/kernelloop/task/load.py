"""Loading a task folder: `task.toml` validated into a `TaskSpec`, plus the files it names."""

from __future__ import annotations

import ast
import difflib
import json
import operator
import re
import tomllib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from kernelloop import pyast
from kernelloop.errors import TaskError
from kernelloop.task import files
from kernelloop.task.spec import Shape, TaskSpec
from kernelloop.task.workspace import workspace_path

ELEM_SIZES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Task:
    """A validated task: its folder, its spec, and helpers over both."""

    folder: Path
    spec: TaskSpec

    @property
    def name(self) -> str:
        return self.spec.task.name

    @property
    def toml_path(self) -> Path:
        return self.folder / "task.toml"

    @property
    def baseline_path(self) -> Path:
        return self.folder / self.spec.task.baseline

    def toml_line(self, key: str, value: str | None = None) -> str:
        """`task.toml:LINE` of the first line that sets `key` (holding `value` where
        given), for an error that names where the task says it; the bare path where none
        does."""
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for n, line in enumerate(self.toml_path.read_text().splitlines(), start=1):
            if pattern.match(line) and (
                value is None or f'"{value}"' in line or f"'{value}'" in line
            ):
                return f"{self.toml_path}:{n}"
        return str(self.toml_path)

    def draws(self) -> bool:
        """Whether the task's model draws random numbers in its forward (an imported
        KernelBench problem, `"draws": true`; task/draws.py): its candidates get a
        `draw_seed` input and may call torch's random fills."""
        return bool((self.model_class() or {}).get("draws"))

    def model_class(self) -> dict | None:
        """An imported KernelBench task's solution-class contract (`[task] kernelbench`):
        the class name, the forward arguments, the parameter and buffer names and the init
        inputs' template (task/kernelbench_inputs.model_entry); None for other tasks."""
        name = self.spec.task.kernelbench
        if not name:
            return None
        path = self.folder / name
        try:
            spec = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise TaskError(
                f"{path} could not be read ({e}); re-import the problem with "
                "`kernelloop import kernelbench --force`."
            ) from e
        return spec

    def accepts(self, dims: dict[str, int]) -> bool:
        """Whether the task's inputs can be made at `dims`: an imported KernelBench problem
        checks its own sizes when its Model is built (num_channels divisible by num_groups,
        an image a whole number of patches), tried on the meta device; any other task
        takes every size in its ranges."""
        if not self.spec.task.kernelbench:
            return True
        from kernelloop.task.kernelbench_sizes import sizes_ok

        return sizes_ok(self.folder / "problem.py", dims)

    def file_and_function(self, field: str) -> tuple[Path, str]:
        value = getattr(self.spec.task, field)
        file, func = value.split(":", 1)
        return self.folder / file, func

    def load_function(self, field: str) -> Callable[..., Any]:
        """Import a trusted task file (reference or input generator) and return the function."""
        path, func = self.file_and_function(field)
        module = _import_file(path, f"kernelloop_task_{self.name}_{path.stem}")
        fn = getattr(module, func, None)
        if not callable(fn):
            raise TaskError(
                f"{self.toml_line(field)}: task.{field} names '{func}', which {path.name} does not "
                "define; define it or fix the name."
            )
        return fn

    def e2e_file_and_name(self, field: str) -> tuple[Path, str]:
        """`[e2e] model` or `[e2e] inputs` as (file in the task folder, name)."""
        assert self.spec.e2e is not None
        file, name = getattr(self.spec.e2e, field).split(":", 1)
        return self.folder / file, name

    def load_e2e(self) -> tuple[Callable[..., Any], Callable[..., Any]]:
        """The `[e2e]` model and its input generator, from the trusted file's source text."""
        out = []
        for field in ("model", "inputs"):
            path, name = self.e2e_file_and_name(field)
            module = _import_file(path, f"kernelloop_task_{self.name}_{path.stem}_e2e")
            fn = getattr(module, name, None)
            if not callable(fn):
                raise TaskError(
                    f"{self.toml_path}: e2e.{field} names '{name}', which {path.name} does not "
                    "define; define it or fix the name."
                )
            out.append(fn)
        return out[0], out[1]

    def e2e_shapes(self, device: str, selection: str | None = None) -> list[Shape]:
        """The `[e2e]` model's shapes for `device` (`--shapes gpu|cpu|all` pick those lists;
        none without `[e2e]`)."""
        e2e = self.spec.e2e
        if e2e is None:
            return []
        if selection == "gpu":
            return list(e2e.shapes)
        if selection == "cpu":
            return list(e2e.cpu_shapes)
        if selection == "all":
            return [*e2e.cpu_shapes, *e2e.shapes]
        return list(e2e.shapes) if device == "cuda" else list(e2e.cpu_shapes)

    def e2e_dtypes(self, selected: list[str]) -> list[str]:
        """The selected dtypes the `[e2e]` model runs in."""
        e2e = self.spec.e2e
        if e2e is None:
            return []
        own = e2e.dtypes if e2e.dtypes is not None else self.spec.dtypes
        return [d for d in selected if d in own]

    def shapes_for(self, device: str) -> list[Shape]:
        return list(self.spec.shapes) if device == "cuda" else list(self.spec.cpu_shapes)

    def find_shape(self, label: str) -> Shape:
        for s in [*self.spec.shapes, *self.spec.cpu_shapes]:
            if s.label == label:
                return s
        known = ", ".join(s.label for s in [*self.spec.shapes, *self.spec.cpu_shapes])
        raise TaskError(f"shape {label!r} is not in {self.toml_path}; use one of: {known}.")

    def min_bytes(self, shape: Shape, dtype: str) -> float:
        return eval_expr(self.spec.roofline.bytes, {**shape.dims, "elem_size": ELEM_SIZES[dtype]})

    def min_flops(self, shape: Shape, dtype: str) -> float:
        return eval_expr(self.spec.roofline.flops, {**shape.dims, "elem_size": ELEM_SIZES[dtype]})

    def workspace(self, override: str | Path | None = None) -> Path:
        """Where this task's history, versions' state and run summaries live."""
        return workspace_path(self.folder, override)

    def digest(self) -> str:
        """Hash of every entry of the task folder, `__pycache__` included (task/files.py
        says what is left out and why): ties a record to the exact task it ran on."""
        return files.digest(self.folder)


def load_task(folder: str | Path) -> Task:
    folder = Path(folder).resolve()
    toml_path = folder / "task.toml" if folder.is_dir() else folder
    if toml_path.name != "task.toml" or not toml_path.is_file():
        raise TaskError(
            f"{folder}: no task.toml here; point at a task folder or create one with "
            "`kernelloop init NAME`."
        )
    folder = toml_path.parent
    try:
        raw = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TaskError(
            f"{toml_path}: not valid TOML ({e}); fix the syntax at that line."
        ) from None
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            raise TaskError(f"{toml_path}: {_unknown_field(err['loc'])}") from None
        raise TaskError(f"{toml_path}: field '{where}': {err['msg']}.") from None
    task = Task(folder=folder, spec=spec)
    _check_files(task)
    return task


def _unknown_field(loc: tuple) -> str:
    """An unknown key in task.toml as one sentence, with the nearest known key of the same
    table (pydantic says only "Extra inputs are not permitted.")."""
    model: Any = TaskSpec
    for part in loc[:-1]:
        if isinstance(part, str) and model is not None and part in model.model_fields:
            model = _model_in(model.model_fields[part].annotation)
    known = list(model.model_fields) if model is not None else []
    table = ".".join(str(p) for p in loc[:-1] if isinstance(p, str))
    name = str(loc[-1])
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}."
    where = f"[{table}]" if table else "the top level"
    return f"unknown field '{name}' in {where}; {hint}"


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside an annotation (`Rules`, `list[Shape]`, `E2E | None`,
    `dict[str, Tolerance]`), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def _check_files(task: Task) -> None:
    if not task.baseline_path.is_file():
        raise TaskError(
            f"{task.toml_line('baseline')}: task.baseline names {task.spec.task.baseline}, "
            "which does not exist; add the file or fix the path."
        )
    for field in ("reference", "inputs"):
        path, _ = task.file_and_function(field)
        if not path.is_file():
            raise TaskError(
                f"{task.toml_line(field)}: task.{field} names {path.name}, which does not exist; "
                f"add the file or fix the path."
            )
    if task.spec.e2e is not None:
        for field in ("model", "inputs"):
            path, _ = task.e2e_file_and_name(field)
            if not path.is_file():
                raise TaskError(
                    f"{task.toml_line(field, getattr(task.spec.e2e, field))}: e2e.{field} names "
                    f"{path.name}, which does not "
                    "exist; add the file or fix the path."
                )
    for expr_field in ("bytes", "flops"):
        expr = getattr(task.spec.roofline, expr_field)
        shape = task.spec.cpu_shapes[0]
        try:
            eval_expr(expr, {**shape.dims, "elem_size": 2})
        except (ValueError, KeyError, ZeroDivisionError) as e:
            raise TaskError(
                f"{task.toml_path}: field 'roofline.{expr_field}' = {expr!r} cannot be evaluated "
                f"({e}); use arithmetic over the shape's dims and elem_size."
            ) from None


def _import_file(path: Path, name: str) -> ModuleType:
    """Run a trusted task file as a fresh module, from its source text only.

    Never through the import system: `spec_from_file_location` would run a matching
    `__pycache__/*.pyc` instead of the source (anyone who could write there would run
    code in the trusted process, which holds the API keys), and would write one.
    """
    try:
        source = path.read_bytes()
        code = compile(source, str(path), "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError) as e:
        raise TaskError(f"{path}: cannot be loaded as Python source ({e}); fix the file.") from None
    module = ModuleType(name)
    module.__file__ = str(path)
    exec(code, module.__dict__)  # noqa: S102 - the task's own trusted file
    return module


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def eval_expr(expr: str, names: dict[str, float]) -> float:
    """Evaluate an arithmetic expression over named numbers; nothing else is allowed."""

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise KeyError(f"unknown name {node.id!r}; known: {sorted(names)}")
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"unsupported syntax {ast.dump(node)[:40]}")

    try:
        tree = pyast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"syntax error: {e.msg}") from None
    return float(ev(tree))
