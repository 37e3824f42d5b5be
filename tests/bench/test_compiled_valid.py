"""The compiled slot is valid or refused (issue 34): an imported KernelBench problem's own
Model is what compiles, so timed calls on fresh inputs do not recompile; compiling the
whole wrapper recompiles and is refused; a compiled output that differs from eager is
refused. Dynamo's guards are the same under the `eager` backend, which these tests use to
leave inductor's compile time out (the CPU sandboxed path is tests/bench/test_compiled_cpu.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from kernelloop.evaluate.worker.compiled import Compiled, CompileFailed
from kernelloop.task.kernelbench import import_problem
from kernelloop.task.kernelbench_inputs import make

KB = Path(__file__).parents[1] / "task" / "fixtures" / "kernelbench"
SPEC = {"mode": None, "dynamic": False, "backend": "eager", "atol": 2e-2, "rtol": 2e-2}


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def gemm(tmp_path):
    folder = import_problem(KB / "level2" / "12_Gemm_Multiply_LeakyReLU.py", tmp_path, ["float32"])
    dims = {"batch_size": 16, "in_features": 32, "out_features": 24}

    def inputs(seed: int) -> dict:
        g = torch.Generator().manual_seed(seed)
        return make(folder / "problem.py", dims, torch.float32, "cpu", g, "random", draws=False)

    return folder, inputs


def test_the_problems_model_compiles_once_and_timed_calls_do_not_recompile(gemm):
    folder, inputs = gemm
    ref = _module(folder / "reference.py", "kl_test_ref_core")
    torch._dynamo.reset()
    slot = Compiled(ref.reference, SPEC, ref)
    assert slot.what.startswith("the problem's Model")
    with slot.preparing():
        first = slot(**inputs(1))  # compiles, checked against eager
    eager = _module(folder / "reference.py", "kl_test_ref_eager")  # never compiled
    for seed in range(2, 6):  # timed calls: new tensors, the same shapes; a recompile raises
        kw = inputs(seed)
        got = slot(**kw)
        assert torch.allclose(got, eager.reference(**kw), atol=1e-5, rtol=1e-5)
    assert first.shape == got.shape
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1


def test_compiling_the_whole_wrapper_recompiles_on_timed_calls_and_is_refused(gemm):
    folder, inputs = gemm
    ref = _module(folder / "reference.py", "kl_test_ref_wrapper")
    torch._dynamo.reset()
    slot = Compiled(ref.reference, SPEC, None)  # no core given: the wrapper compiles
    with slot.preparing():
        slot(**inputs(1))
    with pytest.raises(CompileFailed) as e:
        for seed in range(2, 6):
            slot(**inputs(seed))
    assert "recompiled during a timed call" in str(e.value)
    assert "refused" in str(e.value)


def test_a_compiled_output_other_than_eager_is_refused(tmp_path):
    src = tmp_path / "ref.py"
    src.write_text(
        "import torch\n\n"
        "def reference(*, x):\n"
        "    if torch.compiler.is_compiling():\n"
        "        return x * 2 + 1\n"
        "    return x * 2\n"
    )
    ref = _module(src, "kl_test_ref_differs")
    torch._dynamo.reset()
    slot = Compiled(ref.reference, SPEC, ref)
    with pytest.raises(CompileFailed) as e, slot.preparing():
        slot(x=torch.ones(8, 8))
    assert "differs from the same reference run eagerly" in str(e.value)
    assert "64 elements off" in str(e.value)
