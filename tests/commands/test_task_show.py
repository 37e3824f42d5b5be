"""`kernelloop task show TASK` prints the contract the prompt and the MCP `task` tool
carry (real CLI, real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import FLAGSHIP


def show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "task", "show", str(FLAGSHIP), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_task_show_prints_the_contract_for_the_chosen_device(tmp_path):
    out = show("--device", "cpu", "--workspace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert (FLAGSHIP / "reference.py").read_text().strip() in text
    assert "Timings here DO NOT count" in text
    assert "16384x8192 (rows=16384, cols=8192): weight 0.35, common; floor 0.1886 ms" in text
    assert "bfloat16: atol=1e-05, rtol=0.02" in text
    assert "need NOT match the baseline" in text


def test_task_show_json_gives_each_section(tmp_path):
    out = show("--device", "cpu", "--dtypes", "float32", "--json", "--workspace", str(tmp_path))
    assert out.returncode == 0, out.stderr
    sections = json.loads(out.stdout)
    assert list(sections) == [
        "judging", "interface", "reference", "inputs", "shapes", "numerics", "randomness",
        "end_to_end", "roofline",
    ]  # fmt: skip
    assert "Dtypes judged: float32" in sections["numerics"]
    assert "(float32: atol=2e-05, rtol=1e-05)" in sections["end_to_end"]


def test_task_show_names_the_bound_of_each_shape_on_a_compute_bound_task(tmp_path):
    from tests.conftest import ROOT

    matmul = ROOT / "examples" / "matmul_bias_gelu"
    out = subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "task", "show", str(matmul), "--device", "cpu"]
        + ["--json", "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    sections = json.loads(out.stdout)
    shapes, roof = sections["shapes"], sections["roofline"]
    # 2·4096³ flops at the H200's dense bf16 peak (989.5 TFLOP/s) = 0.1389 ms; M = 16 reads
    # w (8192² bf16) and more at 4.27 TB/s = 0.0316 ms.
    assert "4096x4096x4096 (M=4096, N=4096, K=4096): weight 0.3, common; floor 0.1389 ms " \
        "compute-bound (bf16, fp16)" in shapes  # fmt: skip
    assert "16x8192x8192 (M=16, N=8192, K=8192): weight 0.1, long_tail; floor 0.0316 ms " \
        "memory-bound (bf16, fp16)" in shapes  # fmt: skip
    assert "Minimal flops per call: `2 * M * N * K`" in roof
    assert "Floor time = max(bytes / 4.27 TB/s" in roof
    assert "peak TFLOP/s: bf16 989.5, fp16 989.5" in roof
    # The flagship counts no flops: its contract keeps the memory-floor wording.
    flagship = show("--device", "cpu", "--json", "--workspace", str(tmp_path / "f"))
    text = json.loads(flagship.stdout)["roofline"]
    assert "Floor time = bytes / 4.27 TB/s" in text and "flops" not in text


def test_task_show_spells_out_a_tuple_of_outputs(tmp_path):
    # examples/add_rmsnorm returns (y, h): the brief says so, output by output, from the
    # reference run on the CPU (output_like = "" names no input to copy).
    from tests.conftest import ROOT

    example = str(ROOT / "examples" / "add_rmsnorm")
    out = subprocess.run(
        [sys.executable, "-m", "kernelloop.cli", "task", "show", example]
        + ["--device", "cpu", "--json", "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    interface = json.loads(out.stdout)["interface"]
    assert "Output: a tuple of 2 new, contiguous tensors, in the reference's order" in interface
    assert "- output 0: shape (rows, cols), the call's dtype" in interface
    assert "- output 1: shape (rows, cols), the call's dtype" in interface
    # A one-output task keeps the one-tensor sentence.
    flagship = show("--device", "cpu", "--json", "--workspace", str(tmp_path / "f"))
    assert "Output: a new, contiguous torch.Tensor" in json.loads(flagship.stdout)["interface"]
