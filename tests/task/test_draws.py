"""A model that draws random numbers in its forward (task/draws.py): the draws of the
float64 reference are the float32 run's, widened; an imported KernelBench problem that
draws gets a `draw_seed` input that seeds them on both sides (upstream level3/35 LSTM and
level2/66 training-mode Dropout were rejected before this)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.task import load_task
from kernelloop.task.draws import seeded
from kernelloop.task.kernelbench import import_problem
from tests.task.cell_kernel import CELL_KERNEL

EXTRA = Path(__file__).parent / "fixtures" / "kernelbench_extra"
CXX_CELL = Path(__file__).parents[1] / "evaluate" / "cxx" / "draws_cell_cpu.py"
CUDA_CELL = CXX_CELL.with_name("draws_cell_cuda.py")


def _draws(x: torch.Tensor) -> list[torch.Tensor]:
    return [
        torch.randn(3, 5),
        torch.rand(7),
        torch.rand_like(x),
        torch.randn_like(x),
        torch.empty_like(x).normal_(),
        torch.empty_like(x).uniform_(-1, 1),
        torch.bernoulli(torch.full_like(x, 0.3)),
        F.dropout(x, 0.3, True),
        torch.nn.Dropout(0.5)(x),
        torch.normal(torch.zeros(5), torch.ones(5)),
        torch.randint(0, 100, (9,)),
    ]


def test_widened_draws_are_the_float32_draws_in_float64():
    x = torch.rand(64, 8) * 2 - 1
    with seeded(7, "cpu", widen=False):
        narrow = _draws(x)
    with seeded(7, "cpu", widen=True):
        wide = _draws(x.double())
    for i, (a, b) in enumerate(zip(narrow, wide, strict=True)):
        if a.is_floating_point():
            assert b.dtype == torch.float64, (i, b.dtype)
            assert torch.allclose(a.double(), b, rtol=1e-6, atol=1e-7), i
        else:
            assert torch.equal(a, b), i  # an integer draw is left as asked
    # Unwidened, a float64 run draws other numbers: what made the float64 reference wrong.
    with seeded(7, "cpu", widen=False):
        other = torch.randn_like(x.double())
    assert not torch.allclose(other, wide[3])
    # The caller's own generator state is left as it was.
    torch.manual_seed(3)
    before = torch.get_rng_state()
    with seeded(11, "cpu", widen=True):
        torch.randn(10)
    assert torch.equal(before, torch.get_rng_state())


def test_a_dropout_mask_is_the_cpus_on_every_device():
    """Under `seeded`, F.dropout and nn.Dropout draw the mask as the CPU does (bernoulli_ of
    a float32 tensor, scaled): on the CPU bit for bit torch's own dropout, and one
    definition a kernel can reproduce on a GPU, whose fused dropout draws another stream."""
    x = torch.rand(33, 17) * 2 - 1
    torch.manual_seed(9)
    torch_own = F.dropout(x, 0.3, True)
    devices = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    for dev in devices:
        xd = x.to(dev)
        with seeded(9, dev, widen=False):
            ours = F.dropout(xd, 0.3, True)
        with seeded(9, dev, widen=False):
            module = torch.nn.Dropout(0.3)(xd)
        with seeded(9, dev, widen=False):
            mask = torch.empty(33, 17, device=dev).bernoulli_(0.7)
        assert torch.equal(ours, module)
        assert torch.equal(ours, xd * mask.div_(0.7)), dev
        if dev == "cpu":
            assert torch.equal(ours, torch_own)
        with seeded(9, dev, widen=True):
            wide = F.dropout(xd.double(), 0.3, True)
        assert torch.allclose(wide, ours.double(), rtol=1e-6), dev
    with seeded(9, "cpu", widen=False):  # no draw where torch draws none
        assert torch.equal(F.dropout(x, 0.3, False), x)
        assert torch.equal(F.dropout(x, 0.0, True), x)


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_problem_that_draws_gets_a_draw_seed_and_its_baseline_is_accepted(tmp_path):
    folder = import_problem(EXTRA / "draws_in_forward.py", tmp_path, ["float32"])
    assert json.loads((folder / "kernelbench.json").read_text())["draws"] is True
    inputs = _module(folder / "inputs.py", "kl_draws_inputs")
    reference = _module(folder / "reference.py", "kl_draws_reference")
    baseline = _module(folder / "baseline.py", "kl_draws_baseline")
    dims = {"batch_size": 16, "input_size": 32, "hidden_size": 24}
    made = inputs.make_inputs(dims, torch.float32, "cpu", torch.Generator().manual_seed(5))
    assert isinstance(made["draw_seed"], int)
    wide = {k: v.double() if torch.is_tensor(v) else v for k, v in made.items()}
    ref = reference.reference(**wide)
    assert ref.dtype == torch.float64
    assert torch.allclose(baseline.forward(**made).double(), ref, atol=1e-5)
    # The seed is what makes them agree: another draw_seed, another h0 and mask.
    moved = baseline.forward(**{**made, "draw_seed": made["draw_seed"] + 1}).double()
    assert not torch.allclose(moved, ref, atol=1e-2)
    # Judged as any task, timing included (the timed outputs are checked as well).
    rec = evaluate(load_task(folder), folder / "baseline.py", device="cpu", timing=True)
    assert rec.verdict.accepted, rec.verdict.reasons


def test_a_problem_that_does_not_draw_has_no_draw_seed(tmp_path):
    folder = import_problem(EXTRA / "global_hidden.py", tmp_path, ["float32"])
    assert json.loads((folder / "kernelbench.json").read_text())["draws"] is False
    inputs = _module(folder / "inputs.py", "kl_nodraws_inputs")
    dims = {"batch_size": 8, "input_size": 16, "hidden_size": 8}
    made = inputs.make_inputs(dims, torch.float32, "cpu", torch.Generator().manual_seed(5))
    assert "draw_seed" not in made


DRAWS_TRITON = """
import torch
import triton
import triton.language as tl


{KERNEL}

def forward(*, x, cell_weight, cell_bias, draw_seed):
    rows, n_in = x.shape
    n_h = cell_weight.shape[0]
    # The model's draws, in its order, from the call's seed: h0, then the dropout mask.
    torch.manual_seed(draw_seed)
    h0 = torch.randn(rows, n_h, device=x.device)
    keep = torch.empty(rows, n_h, device=x.device).bernoulli_(0.75)
    {EXTRA}
    out = torch.empty(rows, n_h, device=x.device, dtype=x.dtype)
    bk, bh = triton.next_power_of_2(max(n_in, n_h)), triton.next_power_of_2(n_h)
    _cell[(rows,)](x, h0, cell_weight, cell_bias, keep, out, n_in, n_h, 1.0 / 0.75,
                   BK=bk, BH=bh, KEEP=True)
    return out
""".replace("{KERNEL}", CELL_KERNEL)


def test_a_triton_candidate_of_a_task_that_draws_may_draw_its_random_numbers(tmp_path):
    from kernelloop.evaluate.trusted.screen.static import screen_source

    folder = import_problem(EXTRA / "draws_in_forward.py", tmp_path, ["float32"])
    task = load_task(folder)
    assert task.draws()
    good = tmp_path / "good.py"
    good.write_text(DRAWS_TRITON.replace("{EXTRA}", ""))
    # The screen allows torch's seeding and random factories only where the task draws.
    assert any("torch.randn" in f.message for f in screen_source(good.read_text(), "triton"))
    assert screen_source(good.read_text(), "triton", draws=True) == []
    rec = evaluate(task, good, device="cpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    # A "random" fill with a tensor of probabilities is a comparison's result: compute,
    # even where (as here, drawn after the model's draws) it changes no output.
    cheat = tmp_path / "bernoulli_of_a_tensor.py"
    p = "torch.full((1,), 1.0, device=x.device)"
    cheat.write_text(
        DRAWS_TRITON.replace("{EXTRA}", f"torch.empty(1, device=x.device).bernoulli_({p})")
    )
    rec = evaluate(task, cheat, device="cpu", timing=False)
    assert not rec.verdict.accepted and rec.verdict.category == "no_kernel", rec.verdict
    assert any("bernoulli_" in r for r in rec.verdict.reasons), rec.verdict.reasons


@pytest.mark.skipif(
    shutil.which("c++") is None or shutil.which("ninja") is None,
    reason="needs a C++ compiler and ninja",
)
def test_a_cpp_candidate_of_a_task_that_draws_may_draw_in_its_host_code(tmp_path):
    from kernelloop.evaluate.trusted.screen.static import screen_source

    folder = import_problem(EXTRA / "draws_in_forward.py", tmp_path, ["float32"], language="cuda")
    task = load_task(folder)
    assert task.draws() and task.spec.task.language == "cuda"
    source = CXX_CELL.read_text()
    # at::randn in C++ is PyTorch compute for a task that does not draw; allowed where it
    # draws, as torch.randn is in Python.
    found = screen_source(source, "cuda")
    refused = {(f.rule, f.message.split(",")[0].split(";")[0]) for f in found}
    assert refused == {("cpp", "C++ calls at::randn"), ("attribute", "uses `torch.manual_seed`")}
    assert screen_source(source, "cuda", draws=True) == []
    rec = evaluate(task, CXX_CELL, device="cpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    # The same kernel drawing its mask before h0 (not the model's order) draws other
    # numbers: rejected, so the draws are what is being judged.
    swapped = tmp_path / "swapped.py"
    swapped.write_text(
        source.replace(
            "auto h0 = at::randn({rows, n_h}, f32);\n  auto keep = at::empty({rows, n_h}, "
            "f32).bernoulli_(0.75);",
            "auto keep = at::empty({rows, n_h}, f32).bernoulli_(0.75);\n  auto h0 = "
            "at::randn({rows, n_h}, f32);",
        ).replace("kl_draws_cell_cpu", "kl_draws_cell_swapped")
    )
    assert swapped.read_text() != source.replace("kl_draws_cell_cpu", "kl_draws_cell_swapped")
    rec = evaluate(task, swapped, device="cpu", timing=False)
    assert not rec.verdict.accepted and rec.verdict.category == "wrong", rec.verdict


@pytest.mark.gpu
def test_gpu_a_problem_that_draws_is_judged_on_the_gpu(tmp_path):
    """On CUDA the draws come from the GPU's generator on both sides: the float64 reference
    (widened float32 draws, the portable dropout mask) and the candidate's own seeded draws
    must agree. (Not timed: at this toy size the baseline's seeded call is host-bound, and
    the trusted clock's run-through check saw 1.5 ms of host work per call beyond its
    events on the H200, past its 0.5 ms allowance: docs/task.md.)"""
    folder = import_problem(EXTRA / "draws_in_forward.py", tmp_path, ["float32"])
    task = load_task(folder)
    good = tmp_path / "good.py"
    good.write_text(DRAWS_TRITON.replace("{EXTRA}", ""))
    rec = evaluate(task, good, device="cuda", shapes="gpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
    rec = evaluate(task, folder / "baseline.py", device="cuda", shapes="gpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons


@pytest.mark.gpu
def test_gpu_a_cuda_candidate_of_a_task_that_draws_is_judged_on_the_gpu(tmp_path):
    """The CUDA C++ cell draws h0 and the mask in its host code on the GPU's generator, as
    the model does; built with nvcc in the sandbox and accepted at the fixture's size."""
    folder = import_problem(EXTRA / "draws_in_forward.py", tmp_path, ["float32"], language="cuda")
    task = load_task(folder)
    rec = evaluate(task, CUDA_CELL, device="cuda", shapes="gpu", timing=False)
    assert rec.verdict.accepted, rec.verdict.reasons
