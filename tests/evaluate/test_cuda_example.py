"""The CUDA C++ flagship example (issue 14, examples/ln_softmax_dropout_cuda): the flagship
op with a baseline of three CUDA kernels built by `load_inline`. On the CPU: the task loads
as a `cuda` task and its baseline passes the static screen's C++ rules (its CUDA source was
compiled with nvcc 13.0 for sm_90 on 2026-12-01, outside kernelloop). On a GPU: the
baseline is accepted by the full evaluation (built in the sandbox)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.screen.static import screen_source
from kernelloop.task import load_task

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ln_softmax_dropout_cuda"


def test_the_cuda_example_loads_and_its_baseline_passes_the_screen():
    task = load_task(EXAMPLE)
    assert task.spec.task.language == "cuda"
    assert task.spec.stochastic is not None
    assert screen_source(task.baseline_path.read_text(), "cuda") == []


class _Event:
    def __init__(self, gpu: bool, name: str, activity: str = "") -> None:
        self._gpu, self._name, self._activity = gpu, name, activity

    def device_type(self):
        from torch.autograd import DeviceType

        return DeviceType.CUDA if self._gpu else DeviceType.CPU

    def name(self) -> str:
        return self._name

    def activity_type(self) -> str:
        return self._activity


def test_a_calls_gpu_kernels_are_counted_from_its_trace_and_copies_are_not():
    from kernelloop.evaluate.trusted.channel.messages import validate
    from kernelloop.evaluate.worker.calls import count_device_kernels

    trace = [
        _Event(False, "cudaLaunchKernel"),  # the host's side of a launch: not a kernel
        _Event(True, "void layer_norm_kernel<float>(float const*, ...)", "kernel"),
        _Event(True, "softmax_kernel(float*, long)", "kernel"),
        _Event(True, "Memset (Device)", "gpu_memset"),
        _Event(True, "Memcpy DtoD (Device -> Device)"),  # named only (older torch)
        _Event(True, "void dropout_residual_kernel<float>(...)", "kernel"),
    ]
    assert count_device_kernels(trace) == 3
    # The count crosses the channel as a bounded non-negative integer.
    msg = {
        "type": "call",
        "key": "k",
        "id": "c1",
        "ok": True,
        "elapsed_s": 0.1,
        "launches": {},
        "ops": {},
        "tampered": [],
        "threads": 0,
        "out_type": "builtins.NoneType",
        "device_kernels": 3,
    }
    assert validate(msg)["device_kernels"] == 3
    with pytest.raises(ValueError):
        validate({**msg, "device_kernels": -1})


@pytest.mark.gpu
def test_gpu_the_cuda_baseline_builds_in_the_sandbox_and_is_accepted():
    from kernelloop.evaluate.trusted.run import evaluate

    task = load_task(EXAMPLE)
    rec = evaluate(
        task, task.baseline_path, device="cuda", timing=False, shapes="4096x8000,1024x32768"
    )
    assert rec.verdict.accepted, rec.verdict.reasons
    compile_stage = next(s for s in rec.stages if s.name == "compile")
    print(f"compile {compile_stage.seconds:.1f} s; stages {rec.stages}")
    # Its three <<<>>> launches (LayerNorm, softmax, dropout + residual), counted in the
    # profiler's trace of the compile-stage calls: Triton's launch hook cannot see them.
    assert rec.kernel_launches_per_call == 3, rec.kernel_launches_per_call


def _cu_file(folder: Path) -> Path:
    """The example baseline's CUDA source as a `.cu` file binding the entry itself."""
    import ast

    tree = ast.parse((EXAMPLE / "baseline.py").read_text())
    cuda = next(
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CUDA"
    )
    path = folder / "ln_softmax_dropout.cu"
    path.write_text(
        cuda
        + '\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &ln_softmax_dropout); }\n'
    )
    return path


def test_the_cuda_source_as_a_cu_file_passes_the_screen(tmp_path):
    from kernelloop.evaluate.trusted.launch import native_source

    task = load_task(EXAMPLE)
    mod = native_source.as_module(task, _cu_file(tmp_path))
    assert screen_source(mod.read_text(), "cuda") == []
    assert "_ext.forward(x, residual, weight, bias, p, eps, seed)" in mod.read_text()


@pytest.mark.gpu
def test_gpu_the_cuda_baseline_as_a_cu_file_is_accepted(tmp_path):
    # `kernelloop evaluate TASK ln_softmax_dropout.cu` (native_source.py): built with nvcc in
    # the sandbox like the inline baseline, its arguments passed in the baseline's order.
    from kernelloop.evaluate.trusted.run import evaluate

    task = load_task(EXAMPLE)
    rec = evaluate(task, _cu_file(tmp_path), device="cuda", timing=False, shapes="4096x8000")
    assert rec.verdict.accepted, rec.verdict.reasons
    assert rec.kernel_launches_per_call == 3, rec.kernel_launches_per_call
