"""Red team, task files (issue 12, finding 6): a planted `__pycache__/*.pyc` must never run.

Python's import system runs `__pycache__/<name>.<tag>.pyc` in place of `<name>.py` when
its header says so (an unchecked hash-based pyc is never compared with the source). A
copy of the flagship task gets such files for its reference and its input generator;
the test first proves the import system would run them, then that neither the trusted
loader nor the sandboxed worker does, and that the task digest notices them.
"""

from __future__ import annotations

import importlib.util
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from tests.conftest import FLAGSHIP, FUSED
from tests.redteam.harness import SMALL

EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("the planted bytecode ran")
raise RuntimeError("kl-pyc-ran")
"""


def plant_pyc(folder: Path, stem: str, marker: Path) -> Path:
    """Bytecode that the import system runs in place of `folder/stem.py`."""
    src = folder.parent / f"evil_{stem}.py"
    src.write_text(EVIL.format(marker=str(marker)))
    target = Path(importlib.util.cache_from_source(str(folder / f"{stem}.py")))
    target.parent.mkdir(exist_ok=True)
    py_compile.compile(
        str(src),
        cfile=str(target),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    return target


@pytest.fixture
def poisoned(tmp_path):
    task_dir = tmp_path / "task"
    shutil.copytree(FLAGSHIP, task_dir, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    marker = tmp_path / "marker.txt"
    clean_digest = load_task(task_dir).digest()
    for stem in ("reference", "inputs"):
        plant_pyc(task_dir, stem, marker)
    return task_dir, marker, clean_digest


def test_the_planted_bytecode_is_what_the_import_system_would_run(poisoned):
    task_dir, marker, _ = poisoned
    probe = (
        "import importlib.util as u; s = u.spec_from_file_location('r', "
        f"{str(task_dir / 'reference.py')!r}); s.loader.exec_module(u.module_from_spec(s))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "kl-pyc-ran" in run.stderr and marker.read_text() == "the planted bytecode ran"


def test_neither_the_judge_nor_the_worker_runs_a_planted_pyc(poisoned, canary):
    task_dir, marker, clean_digest = poisoned
    task = load_task(task_dir)
    assert task.digest() != clean_digest  # the digest covers __pycache__
    task.load_function("reference")
    task.load_function("inputs")
    assert not marker.exists()
    rec = evaluate(task, FUSED, screen=False, **SMALL)
    assert rec.verdict.category == "accepted", rec.verdict.reasons
    assert not marker.exists()
    assert "kl-pyc-ran" not in rec.model_dump_json()
    assert canary.intact()


def test_the_digest_changes_when_bytecode_is_added_and_loading_writes_none(tmp_path, monkeypatch):
    task_dir = tmp_path / "task"
    shutil.copytree(FLAGSHIP, task_dir, ignore=shutil.ignore_patterns(".kernelloop", "__pycache__"))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    task = load_task(task_dir)
    before = task.digest()
    task.load_function("reference")
    task.load_function("inputs")
    assert not list(task_dir.rglob("__pycache__")), "loading the task wrote bytecode into it"
    assert task.digest() == before
    cache = task_dir / "__pycache__"
    cache.mkdir()
    assert task.digest() != before  # even an empty __pycache__ is a change
    (cache / "inputs.cpython-312.pyc").write_bytes(b"\x00" * 16)
    with_pyc = task.digest()
    assert with_pyc != before
    (cache / "inputs.cpython-312.pyc").write_bytes(b"\x01" * 16)
    assert task.digest() != with_pyc
