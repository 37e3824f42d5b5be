from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from kernelloop.profile import compile_facts_command, triton_compile_facts
from kernelloop.profile.fallback import torch_profiler_timings

BASELINE = Path(__file__).parents[2] / "examples" / "ln_softmax_dropout" / "baseline.py"
DROPOUT_SIG = {
    "s_ptr": "*fp32",
    "r_ptr": "*bf16",
    "out_ptr": "*bf16",
    "n": "i32",
    "p": "fp32",
    "seed": "i32",
    "BLOCK": "constexpr",
}

WIDE = """
import triton
import triton.language as tl


@triton.jit
def _wide_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    s = tl.sum(x * x, axis=0)
    y = tl.exp(x - s) * tl.sin(x) + tl.cos(x * s)
    tl.store(y_ptr + offs, y / tl.sum(y, axis=0))
"""


@pytest.mark.slow
def test_compile_facts_of_the_flagship_dropout_kernel_without_a_gpu():
    f = triton_compile_facts(BASELINE, "_dropout_residual_kernel", DROPOUT_SIG, {"BLOCK": 1024})
    assert f["arch"] == "sm_90"
    assert 16 <= f["n_regs"] <= 128  # 40 with triton 3.6
    assert f["spill_store_bytes"] == 0 and f["spill_load_bytes"] == 0
    assert f["shared_bytes"] == 0 and f["num_warps"] == 4


@pytest.mark.slow
def test_register_cap_shows_up_as_spills(tmp_path):
    src = tmp_path / "wide.py"
    src.write_text(WIDE)
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "BLOCK": "constexpr"}
    cmd = compile_facts_command(src, "_wide_kernel", sig, {"BLOCK": 1024}, num_warps=1) + [
        "--maxnreg",
        "32",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    f = json.loads(r.stdout)
    assert f["n_regs"] == 32
    assert f["spill_store_bytes"] > 0 and f["stack_bytes"] > 0


def test_signature_must_cover_every_parameter():
    from kernelloop.errors import KernelloopError

    with pytest.raises(KernelloopError, match="signature lacks"):
        triton_compile_facts(BASELINE, "_dropout_residual_kernel", {"s_ptr": "*fp32"})
    with pytest.raises(KernelloopError, match="no @triton.jit function"):
        triton_compile_facts(BASELINE, "nope", DROPOUT_SIG)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_torch_profiler_counts_kernels_of_one_call():
    x = torch.randn(1024, 1024, device="cuda")
    timings = torch_profiler_timings(lambda a: torch.softmax(a + 1, dim=-1), x)
    assert sum(t.launches for t in timings) >= 2
    assert all(t.total_us > 0 for t in timings)
