"""`[e2e]` in task.toml: validated on load, each error one sentence naming the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelloop.errors import TaskError
from kernelloop.task import load_task

CPU_TASK = Path(__file__).resolve().parents[2] / "examples" / "cpu_task"


def _task_with(tmp_path: Path, old: str, new: str) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(CPU_TASK, dst, ignore=shutil.ignore_patterns("__pycache__", ".kernelloop"))
    toml = dst / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new))
    return dst


def test_the_examples_load_their_e2e_model():
    task = load_task(CPU_TASK)
    model, inputs = task.load_e2e()
    assert callable(model) and callable(inputs)
    assert [s.label for s in task.e2e_shapes("cpu")] == ["64x64"]
    assert task.e2e_dtypes(["float32"]) == ["float32"]


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        (
            "tolerances = { float32 = { atol = 2e-5, rtol = 1e-4 } }",
            "tolerances = {}",
            "field '(top level)': Value error, e2e tolerances missing for ['float32']",
        ),
        ('model = "e2e.py:model"', 'model = "e2e:model"', "field 'e2e.model'"),
        ('model = "e2e.py:model"', 'model = "nope.py:model"', "e2e.model names nope.py"),
        ("[e2e]\n", '[e2e]\ndtypes = ["float16"]\n', "e2e.dtypes ['float16'] must be"),
        ("[e2e]\n", "[e2e]\nlayers = 3\n", "unknown field 'layers' in [e2e]; known: model"),
    ],
)
def test_a_bad_e2e_table_is_one_clear_error(tmp_path, old, new, says):
    folder = _task_with(tmp_path, old, new)
    with pytest.raises(TaskError) as e:
        load_task(folder)
    assert says in str(e.value), str(e.value)


def test_a_name_the_e2e_file_does_not_define_is_an_error(tmp_path):
    folder = _task_with(tmp_path, 'model = "e2e.py:model"', 'model = "e2e.py:Block"')
    with pytest.raises(TaskError, match="e2e.model names 'Block', which e2e.py does not define"):
        load_task(folder).load_e2e()


def test_the_contract_tells_agents_about_the_e2e_model():
    from kernelloop.task.contract import render_contract

    text = render_contract(load_task(CPU_TASK)).text()
    assert "### End to end" in text and "float32: atol=2e-05, rtol=0.0001" in text


def test_a_model_is_a_function_of_op_and_inputs_or_a_module_built_on_op():
    import torch

    from kernelloop.task.e2e_model import build

    def op(x):
        return x + 1

    def model(op, x):
        return op(x=op(x=x))

    class Block(torch.nn.Module):
        def __init__(self, op):
            super().__init__()
            self.op = op

        def forward(self, x):
            return self.op(x=self.op(x=x))

    x = torch.zeros(3)
    assert torch.equal(build(model, op)(x=x), x + 2)
    assert torch.equal(build(Block, op)(x=x), x + 2)
