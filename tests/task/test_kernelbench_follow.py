"""How an imported KernelBench model follows the size it is called with
(kernelbench_follow): a size the model's code reads as a module global is set for each
call, on the reference and on a `ModelNew` solution alike; a size that cannot follow a
call stays the problem's own on every shape (upstream level3/33 and level3/28 crashed on
every CPU shape before this)."""

from __future__ import annotations

import json
from pathlib import Path

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem
from kernelloop.task.kernelbench_follow import globals_read
from tests.task.cell_kernel import CELL_KERNEL

EXTRA = Path(__file__).parent / "fixtures" / "kernelbench_extra"
CPU = {"device": "cpu", "timing": False}

GLOBAL_HIDDEN_NEW = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


{KERNEL}

class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.rows = batch_size  # the module global, as the problem's Model reads it
        self.hidden = torch.zeros((batch_size, hidden_size))
        self.cell = nn.Linear(input_size + hidden_size, hidden_size)

    def forward(self, x, initial_hidden):
        assert x.shape[0] == self.rows, (x.shape, self.rows)
        h = {HIDDEN}.to(x.device)
        n_in, n_h = x.shape[1], h.shape[1]
        out = torch.empty((batch_size, n_h), device=x.device, dtype=x.dtype)
        bk, bh = triton.next_power_of_2(max(n_in, n_h)), triton.next_power_of_2(n_h)
        w, b = self.cell.weight, self.cell.bias
        _cell[(x.shape[0],)](x, h, w, b, h, out, n_in, n_h, 1.0, BK=bk, BH=bh, KEEP=False)
        return out


batch_size = 64  # the problem's own; the judge sets it for each call
""".replace("{KERNEL}", CELL_KERNEL)


def test_only_globals_are_read_never_an_attribute_or_a_local_of_the_same_name():
    source = (
        "n = 64\nm = 32\nk = 16\n"
        "class Model:\n"
        "    def __init__(self):\n        self.n = 3\n        self.z = [0] * m\n"
        "    def forward(self, x):\n        k = x.size(0)\n        return self.n + k\n"
        "def get_inputs():\n    return [n]\n"
    )
    assert globals_read(source) >= {"m"}
    assert not globals_read(source) & {"n", "k"}


def test_a_size_read_as_a_module_global_follows_each_call(tmp_path):
    folder = import_problem(EXTRA / "global_hidden.py", tmp_path, ["float32"])
    task = load_task(folder)
    contract = json.loads((folder / "kernelbench.json").read_text())
    assert contract["globals"] == {"batch_size": ["@arg", 0, 0]}
    batches = {s.dims["batch_size"] for s in task.spec.cpu_shapes}
    assert batches - {64}, batches  # a CPU shape at another batch size than the problem's
    rec = evaluate(task, folder / "baseline.py", **CPU)
    assert rec.verdict.accepted, rec.verdict.reasons
    # A solution class reading batch_size as the problem does is built at the call's size.
    good = tmp_path / "model_new.py"
    good.write_text(GLOBAL_HIDDEN_NEW.replace("{HIDDEN}", "initial_hidden"))
    rec = evaluate(task, good, **CPU)
    assert rec.verdict.accepted, rec.verdict.reasons
    # One that ignores the hidden state it is given is wrong.
    ignores = tmp_path / "model_new_ignores.py"
    ignores.write_text(GLOBAL_HIDDEN_NEW.replace("{HIDDEN}", "self.hidden"))
    rec = evaluate(task, ignores, **CPU)
    assert not rec.verdict.accepted and rec.verdict.category == "wrong", rec.verdict


def test_a_size_no_tensor_carries_stays_the_problems_own(tmp_path):
    folder = import_problem(EXTRA / "patch_embedding.py", tmp_path, ["float32"])
    task = load_task(folder)
    shapes = (*task.spec.shapes, *task.spec.cpu_shapes)
    assert all("patch_size" not in s.dims for s in shapes), [s.dims for s in shapes]
    assert any(s.dims["image_size"] < 64 or s.dims["dim"] < 128 for s in task.spec.cpu_shapes)
    rec = evaluate(task, folder / "baseline.py", **CPU)
    assert rec.verdict.accepted, rec.verdict.reasons
