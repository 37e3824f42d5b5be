"""The static screen: honest kernels pass, every screened cheat is refused with its reason,
and a refused candidate never starts a worker."""

from pathlib import Path

import pytest

from kernelloop.evaluate.trusted.run import evaluate
from kernelloop.evaluate.trusted.static import screen_source
from tests.conftest import FLAGSHIP, FUSED, ROOT

CANDIDATES = Path(__file__).parent / "candidates"

HONEST = [
    FLAGSHIP / "baseline.py",
    FUSED,
    ROOT / "src/kernelloop/task/template/baseline.py",
    *sorted((ROOT / "tests/agents/fixtures").glob("*.py")),
    CANDIDATES / "shadow" / "candidate.py",
]

# cheat file -> a phrase of the finding that refuses it
SCREENED = {
    "escape_setsid.py": "imports `subprocess`",
    "forge_channel.py": "imports `os`",
    "helper_import.py": "imports `kl_helper`",
    "lazy_subclass.py": "derives from torch.Tensor",
    "lazy_thread.py": "imports `threading`",
    "patch_checker.py": "imports `sys`",
    "patch_timers.py": "assigns to `torch.cuda.synchronize`",
    "read_harness.py": "imports `gc`",
    "read_secrets.py": "imports `os`",
    "torch_compute.py": "uses `torch.nn.functional.layer_norm`",
    "write_cache.py": "imports `os`",
    "side_stream_gpu.py": "uses `torch.cuda.Stream`",
    "event_timer_gpu.py": "uses `torch.cuda.Event.elapsed_time`",
}
# Cheats written only with what honest kernels also use: the runtime gate must catch them.
RUNTIME_ONLY = [
    "stale_empty.py", "trivial_residual.py", "trivial_zeros.py", "nan_wildcard.py", "alias_residual.py",
    "mutate_input.py", "honest_once.py", "tested_shapes_only.py", "one_pass_variance.py", "no_max_softmax.py",
    "hidden_state.py", "cache_by_shape.py", "cache_ignores_seed.py", "persistent_buffer.py", "detect_timing.py", "cheaper_when_timed.py",
    "crash_on_extreme.py", "illegal_address_gpu.py",
]


@pytest.mark.parametrize("path", HONEST, ids=lambda p: p.name)
def test_honest_kernels_pass(path):
    assert screen_source(path.read_text()) == []


@pytest.mark.parametrize("name", sorted(SCREENED))
def test_screened_cheat_refused_with_its_reason(name):
    findings = screen_source((CANDIDATES / name).read_text())
    assert any(SCREENED[name] in f.message for f in findings), [f.render() for f in findings]


@pytest.mark.parametrize("name", RUNTIME_ONLY)
def test_runtime_cheats_pass_the_screen(name):
    # If one of these starts failing the screen, its runtime test no longer proves anything.
    assert screen_source((CANDIDATES / name).read_text()) == []


@pytest.mark.parametrize("src, phrase", [
    ("import torch\nt = torch\n", "as a value"),
    ("import torch\nx = getattr(torch, 'ops')\n", "uses `getattr`"),
    ("import torch as T\nT.cuda.synchronize = None\n", "assigns to `torch.cuda.synchronize`"),
    ("from torch import Tensor\nTensor.clone = None\n", "assigns to `torch.Tensor.clone`"),
    ("def f(x):\n    return x.__class__\n", "`.__class__`"),
    ("def f(g):\n    return g.gi_frame.f_back\n", "frames"),
    ("from . import helper\n", "relative import"),
    ("from torch import *\n", "import *"),
    ("import triton\ntriton.runtime.driver.active\n", "triton.runtime"),
    ("import triton.language as tl\nx = tl._core\n", "private"),
    ("import torch\ndef f(x):\n    return x.numpy()\n", "`.numpy`"),
    ("import torch\ntorch.ops.aten.add\n", "torch.ops"),
    ("__builtins__['open']\n", "`__builtins__`"),
])
def test_rules(src, phrase):
    assert any(phrase in f.message for f in screen_source(src)), [f.render() for f in screen_source(src)]


def test_torch_language_may_compute_but_not_hide_work():
    src = "import torch\ndef f(x):\n    s = torch.cuda.Stream()\n    return torch.softmax(x, -1)\n"
    findings = screen_source(src, language="torch")
    assert [f.line for f in findings] == [3]


def test_refused_candidate_starts_no_worker(flagship):
    rec = evaluate(flagship, CANDIDATES / "patch_timers.py", device="cpu", shapes="7x129", dtypes=["float32"])
    assert rec.verdict.category == "static"
    assert rec.environment.sandbox == "not started"
    assert rec.wall_s < 2
    assert all(r.startswith("static screen: line ") for r in rec.verdict.reasons)


def test_syntax_error_is_a_compile_rejection(flagship, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def forward(:\n")
    rec = evaluate(flagship, bad, device="cpu", shapes="7x129", dtypes=["float32"])
    assert rec.verdict.category == "compile"
