"""A C++/CUDA source file as a candidate (evaluate/trusted/launch/native_source.py): the module
generated for it embeds the source byte for byte, binds the baseline's parameters in
order, passes the static screen's C++ rules like an inline candidate, and a file that
cannot stand for a candidate is refused in one sentence. (The build itself:
tests/evaluate/test_cxx_candidate.py.)"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from kernelloop.errors import KernelloopError
from kernelloop.evaluate.trusted.launch import native_source as ns
from kernelloop.evaluate.trusted.screen.static import screen_candidate
from kernelloop.task import load_task
from kernelloop.task import native_source as tns

ROOT = Path(__file__).resolve().parents[2]
CPP = Path(__file__).parent / "cxx" / "rmsnorm_residual_cpu.cpp"


def _task(tmp_path, language="cuda"):
    folder = tmp_path / "t"
    shutil.copytree(
        ROOT / "examples" / "cpu_task", folder, ignore=shutil.ignore_patterns("candidates")
    )
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('language = "torch"', f'language = "{language}"'))
    return load_task(folder)


@pytest.mark.parametrize(
    "text",
    ['a """ b', "a ''' b", "both \"\"\" and '''", "ends in a backslash \\", 'ends "', "x\\ny"],
)
def test_the_source_is_embedded_byte_for_byte(text):
    assert ast.literal_eval(tns._literal(text)) == text


def test_the_module_binds_the_baseline_signature_in_order_and_passes_the_screen(tmp_path):
    task = _task(tmp_path)
    mod = ns.as_module(task, CPP)
    src = mod.read_text()
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert fn.name == "forward" and ast.unparse(fn.args) == "x, residual, weight, *, eps"
    assert "_ext.forward(x, residual, weight, eps)" in src
    consts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert CPP.read_text() in consts  # verbatim, as the screen and the build see it
    assert screen_candidate(mod.read_bytes(), "cuda", task.baseline_path.read_bytes()) == []
    assert ns.as_module(task, CPP) == mod  # the same bytes, the same module
    py = ROOT / "examples" / "cpu_task" / "baseline.py"
    assert ns.as_module(task, py) == py  # Python candidates pass through


def test_a_source_that_calls_out_is_refused_by_the_screen(tmp_path):
    task = _task(tmp_path)
    bad = tmp_path / "bad.cu"
    bad.write_text(
        CPP.read_text().replace(
            "#include <cmath>", '#include <cmath>\n#include <cstdlib>\nstatic int r = system("id");'
        )
    )
    found = screen_candidate(ns.as_module(task, bad).read_bytes(), "cuda", b"")
    assert found, "a C++ system() call must be refused"


def test_a_hostile_file_name_or_source_stays_inside_its_string(tmp_path):
    task = _task(tmp_path)
    evil = tmp_path / 'k"""\nimport os\nos.system("id")\n""".cpp'
    evil.write_text('PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n"""\nimport os\n')
    tree = ast.parse(ns.as_module(task, evil).read_text())
    assert not any(isinstance(n, ast.Import) and n.names[0].name == "os" for n in ast.walk(tree))
    assert [type(n).__name__ for n in tree.body] == [
        "Expr",
        "ImportFrom",
        "Assign",
        "Assign",
        "FunctionDef",
    ]


def test_files_that_cannot_stand_for_a_candidate_are_refused_in_one_sentence(tmp_path):
    with pytest.raises(KernelloopError, match='language = "cuda"'):
        ns.as_module(_task(tmp_path / "a", "torch"), CPP)
    task = _task(tmp_path / "b")
    unbound = tmp_path / "unbound.cpp"
    unbound.write_text("torch::Tensor forward(torch::Tensor x) { return x; }\n")
    with pytest.raises(KernelloopError, match="PYBIND11_MODULE"):
        ns.as_module(task, unbound)
    with pytest.raises(KernelloopError, match="could not be read"):
        ns.as_module(task, tmp_path / "missing.cu")
