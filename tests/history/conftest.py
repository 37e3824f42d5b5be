from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

TASK_TOML = """
dtypes = ["float32"]

[task]
name = "{name}"
entry = "forward"
baseline = "kernel/baseline.py"

[tolerances]
float32 = {{ atol = 1e-5, rtol = 1e-4 }}

[[shapes]]
dims = {{ rows = 4096, cols = 8000 }}

[[cpu_shapes]]
dims = {{ rows = 9, cols = 100 }}

[roofline]
bytes = "rows * cols * elem_size * 2"
"""


def write_task(folder: Path, name: str = "softmax", baseline: bytes = b"BLOCK = 1024\n") -> Path:
    """A minimal valid task folder; the kernel lives in a subfolder to test paths."""
    (folder / "kernel").mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(TASK_TOML.format(name=name))
    (folder / "kernel" / "baseline.py").write_bytes(baseline)
    (folder / "reference.py").write_text("def reference(x):\n    return x.softmax(-1)\n")
    (folder / "inputs.py").write_text(
        "def make_inputs(shape, dtype, device, gen):\n    return {}\n"
    )
    return folder


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    return write_task(tmp_path / "softmax_task")
