"""A C++ or CUDA C++ source as a candidate (issue 14): `kernelloop evaluate TASK kernel.cu`, or
a model's answer in a ```cuda block.

A task with `language = "cuda"` takes Python modules that build an extension with
`load_inline`; a kernel engineer often has a `.cu` file instead. Such a file is judged as
the Python module it stands for, generated here: the source embedded verbatim as a string
(a raw triple-quoted one where it can be, so the static screen's C++ rules, the fusion
lock's launch-site count and the edit points read it as they read any inline C++), built
with `load_inline(..., functions=None)` — the source binds its own functions with
`PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)` — and an entry function with the baseline's
signature that passes every argument, in the signature's order, to the extension's
function of the entry's name. Everything downstream (screen, sandbox, build folder, compile
budget, judge, timing, the loop's policy checks against the best) sees an ordinary
candidate; nothing of the source runs on the trusted side. Here only text is made (agents
and the evaluation both use it); evaluate/trusted/launch/native_source.py writes the module.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

from kernelloop import pyast
from kernelloop.errors import KernelloopError as UserError
from kernelloop.task.load import Task

CUDA_SUFFIXES = (".cu", ".cuh")
CPP_SUFFIXES = (".cpp", ".cc", ".cxx")


def is_native(path: Path) -> bool:
    return Path(path).suffix.lower() in CUDA_SUFFIXES + CPP_SUFFIXES


def _literal(text: str) -> str:
    """`text` as a Python string literal: raw triple-quoted where that round-trips."""
    for q in ('"""', "'''"):
        if q not in text and not text.endswith(("\\", q[0])):
            lit = f"r{q}{text}{q}"
            try:
                if pyast.literal_eval(lit) == text:
                    return lit
            except (SyntaxError, ValueError):
                pass
    return repr(text)


def looks_native(text: str) -> bool:
    """Whether `text` is C++ source binding its own functions (not a Python module)."""
    if "PYBIND11_MODULE" not in text:
        return False
    try:
        pyast.parse(text)
    except SyntaxError:
        return True
    return False


def entry_args(task: Task) -> tuple[str, list[str]]:
    """The baseline entry's parameter list as written, and its names in order."""
    entry = task.spec.task.entry
    try:
        tree = pyast.parse(task.baseline_path.read_text())
    except (OSError, SyntaxError) as e:
        raise UserError(
            f"the task's baseline could not be read to find `{entry}`'s parameters ({e}); "
            f"fix the baseline, or write the candidate as a Python module with load_inline."
        ) from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            a = node.args
            if a.vararg or a.kwarg:
                break
            names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
            return ast.unparse(a), names
    raise UserError(
        f"a C++ source candidate needs the baseline's `def {entry}(...)` with named "
        f"parameters (no *args/**kwargs) to bind its arguments; write the candidate as a "
        f"Python module with load_inline instead."
    )


def shim_source(task: Task, source: Path) -> str:
    """The Python module that stands for the C++/CUDA source file `source`."""
    return module_text(
        task,
        source.read_text(encoding="utf-8"),
        source.name,
        source.suffix.lower() in CUDA_SUFFIXES,
    )


def module_text(task: Task, text: str, name: str, cuda: bool) -> str:
    """The Python module that stands for the C++ (`cuda`: CUDA C++) source `text`, named
    `name` in its docstring; a source that cannot stand for a candidate of `task` is a
    KernelloopError saying why and what to do."""
    info = task.spec.task
    if info.language != "cuda":
        raise UserError(
            f"{name} is C++ source, but the task's language is {info.language!r}; "
            f'set `language = "cuda"` in task.toml (or give a Python candidate).'
        )
    if task.model_class():
        raise UserError(
            f"{name}: a C++ source cannot stand for a module task's "
            f"`{task.model_class()}` class; inline the source with load_inline in a Python "
            f"candidate that defines the class."
        )
    params, names = entry_args(task)
    return module_for(info.entry, params, names, text, name, cuda)


def module_for(
    entry: str, params: str, names: list[str] | tuple[str, ...], text: str, name: str, cuda: bool
) -> str:
    """The module text itself: `entry(params)` passes `names` in order to the extension's
    function of the same name (agents call this with the parameters their context gives)."""
    if "PYBIND11_MODULE" not in text:
        raise UserError(
            f"{name} does not bind its functions: add `PYBIND11_MODULE("
            f'TORCH_EXTENSION_NAME, m) {{ m.def("{entry}", &{entry}); }}`.'
        )
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    sources = "cpp_sources=[], cuda_sources=[SOURCE]" if cuda else "cpp_sources=[SOURCE]"
    call = ", ".join(names)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)  # nothing of it can leave the docstring
    return (
        f'"""Generated by kernelloop from {name} (sha256 {digest}…): the source\n'
        f"built as a torch extension; `{entry}` passes its arguments in order to the\n"
        f'extension\'s."""\n\n'
        "from torch.utils.cpp_extension import load_inline\n\n"
        f"SOURCE = {_literal(text)}\n\n"
        f'_ext = load_inline(name="kl_src_{digest}", {sources}, functions=None)\n\n\n'
        f"def {entry}({params}):\n"
        f"    return _ext.{entry}({call})\n"
    )


def is_cuda_text(text: str) -> bool:
    """Whether C++ source text needs nvcc (kernels, launches or CUDA headers) or g++ will do."""
    return any(k in text for k in ("__global__", "<<<", "cuda_runtime", "c10/cuda", "ATen/cuda"))


def python_source(task: Task, text: str) -> str:
    """`text` as a candidate module: itself, or — a C++ source in a `cuda` task (an MCP
    client's submission) — the module that stands for it."""
    if task.spec.task.language != "cuda" or not looks_native(text):
        return text
    return module_text(task, text, "candidate.cu", is_cuda_text(text))
