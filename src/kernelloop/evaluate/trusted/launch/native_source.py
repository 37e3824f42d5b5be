"""A C++/CUDA source file given as a candidate, written as the module that stands for it
(the text: kernelloop.task.native_source, which says how it is judged)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.launch import compile_cache
from kernelloop.task import Task
from kernelloop.task.native_source import is_native, shim_source


def as_module(task: Task, path: Path) -> Path:
    """`path` itself for a Python candidate; for a C++/CUDA source, its generated module
    (in this run's compile-cache root, named by the source's name and the module's hash)."""
    path = Path(path)
    if not is_native(path):
        return path
    try:
        text = shim_source(task, path)
    except OSError as e:
        raise KernelloopError(f"the candidate {path} could not be read ({e.strerror}).") from None
    folder = compile_cache.root() / "sources"
    folder.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256(text.encode()).hexdigest()[:12]
    out = folder / f"{path.stem}_{path.suffix.lstrip('.')}_{h}.py"
    if not out.exists():
        out.write_text(text, encoding="utf-8")
    return out
