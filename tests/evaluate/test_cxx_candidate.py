"""C++ candidates (issue 14, `language = "cuda"`): a torch extension built with
`load_inline` in the sandbox, in the candidate's own build folder (shared by its workers:
built once per evaluation), judged like any candidate; a build that fails is a `compile`
rejection whose reason is the compiler's first error line, not ninja's last one.
On the CPU, with g++ (each build of a torch extension takes ~30-60 s on a 2-core box)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task

ROOT = Path(__file__).resolve().parents[2]
CAND = Path(__file__).parent / "cxx" / "rmsnorm_residual_cpu.py"

pytestmark = pytest.mark.skipif(
    shutil.which("c++") is None or shutil.which("ninja") is None,
    reason="needs a C++ compiler and ninja",
)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cxx") / "rmsnorm_cxx"
    shutil.copytree(
        ROOT / "examples" / "cpu_task",
        folder,
        ignore=shutil.ignore_patterns("candidates", "__pycache__"),
    )
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('language = "torch"', 'language = "cuda"'))
    t = load_task(folder)
    assert t.spec.task.language == "cuda"
    return t


def test_a_cpp_extension_candidate_builds_in_the_sandbox_and_is_accepted(task):
    rec = evaluate(task, CAND, device="cpu", timing=False, shapes="256x1024")
    assert rec.verdict.accepted, rec.verdict.reasons
    assert rec.environment.sandbox != "none"
    compile_stage = next(s for s in rec.stages if s.name == "compile")
    assert compile_stage.status == "passed" and compile_stage.seconds > 0
    # Triton's launch hook cannot see C++ launches: not measured, rather than a false 0.
    assert rec.kernel_launches_per_call is None


def test_a_build_error_comes_back_as_the_compilers_first_error_line(task, tmp_path):
    bad = tmp_path / "bad.py"
    src = CAND.read_text()
    bad.write_text(src.replace("double ss = 0.0;", "double ss = 0.0 undefined_symbol_here;"))
    rec = evaluate(task, bad, device="cpu", timing=False, shapes="256x1024")
    assert rec.verdict.category == "compile", rec.verdict.reasons
    (reason,) = rec.verdict.reasons
    assert "Error building extension 'kl_rmsnorm_cpu'" in reason, reason
    assert "main.cpp:" in reason and "error:" in reason and "undefined_symbol_here" in reason
    assert "ninja: build stopped" not in reason and "/home/sandbox" not in reason


def test_a_build_longer_than_the_compile_budget_is_stopped_and_rejected_as_compile(task, tmp_path):
    """rules.compile_budget_s bounds the compile stage: the worker building the extension
    (~30-60 s here) is stopped once the budget has passed, not at the evaluation's limit."""
    import time

    folder = tmp_path / "budget"
    shutil.copytree(task.folder, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("[rules]\n", "[rules]\ncompile_budget_s = 2\n"))
    slow = tmp_path / "slow.py"  # a fresh name: nothing cached from the tests above
    slow.write_text(CAND.read_text().replace("kl_rmsnorm_cpu", "kl_rmsnorm_cpu_budget"))
    t0 = time.monotonic()
    rec = evaluate(load_task(folder), slow, device="cpu", timing=False, shapes="256x1024")
    spent = time.monotonic() - t0
    assert rec.verdict.category == "compile", rec.verdict.reasons
    assert "compile budget of 2 s" in rec.verdict.reasons[0]
    compile_stage = next(s for s in rec.stages if s.name == "compile")
    assert compile_stage.status == "failed" and compile_stage.seconds < 10
    assert spent < 25, spent


def test_a_cpp_source_file_is_judged_as_the_module_that_builds_it(task):
    # The same op as a .cpp file with its own PYBIND11_MODULE: `kernelloop evaluate TASK
    # kernel.cpp` builds it in the sandbox like an inline candidate and accepts it.
    rec = evaluate(task, CAND.with_suffix(".cpp"), device="cpu", timing=False, shapes="256x1024")
    assert rec.verdict.accepted, rec.verdict.reasons
    assert rec.environment.sandbox != "none"
    assert next(s for s in rec.stages if s.name == "compile").status == "passed"
