"""A cuda task's model may answer with the C++/CUDA source itself (task/native_source.py):
the answer's ```cuda block becomes the module that stands for it, binding the baseline's
parameters in order; the answer format says so only where it applies; a block that cannot
stand for a candidate comes back as one sentence for the retry; an MCP client's C++
submission is converted the same way."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from llm_loopback import BASE_SOURCE, context

from kernelloop.agents.llm.agent import Asker, _native
from kernelloop.agents.llm.parse import parse_answer
from kernelloop.agents.llm.prompts import load_prompts
from kernelloop.loop.context import native_fields
from kernelloop.task import load_task
from kernelloop.task.native_source import python_source

ROOT = Path(__file__).resolve().parents[2]
CUDA_TASK = ROOT / "examples" / "ln_softmax_dropout_cuda"
PARAMS = (
    "x, residual, weight, bias, *, p, eps, seed",
    ("x", "residual", "weight", "bias", "p", "eps", "seed"),
)
CU = (
    "#include <torch/extension.h>\n"
    "__global__ void k(float* y) { y[threadIdx.x] = 0.f; }\n"
    "torch::Tensor forward(torch::Tensor x, torch::Tensor r, torch::Tensor w, torch::Tensor b,\n"
    "                      double p, double eps, int64_t seed) { return x; }\n"
    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }\n'
)


def answer(block: str, lang: str = "cuda") -> str:
    return (
        "### Candidate 1\nDirection: one fused kernel\n"
        "Hypothesis: three passes become one, 3x less DRAM traffic.\n"
        f"Predicted effect: -60% time\n\n```{lang}\n{block}```\n"
    )


def test_a_cuda_block_becomes_the_module_that_builds_it():
    [c], errors = parse_answer(answer(CU), BASE_SOURCE, "forward", native=PARAMS)
    assert errors == [] and not c.from_diff
    tree = ast.parse(c.source)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    assert fn.name == "forward" and ast.unparse(fn.args) == PARAMS[0]
    assert "cuda_sources=[SOURCE]" in c.source
    assert CU in [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    cpp = CU.replace("__global__ void k(float* y) { y[threadIdx.x] = 0.f; }\n", "")
    [c2], _ = parse_answer(answer(cpp, "cpp"), BASE_SOURCE, "forward", native=PARAMS)
    assert "cpp_sources=[SOURCE]" in c2.source  # plain C++: g++, no nvcc needed


def test_a_cuda_block_that_binds_nothing_is_one_sentence_for_the_retry():
    unbound = CU.replace(
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }\n', ""
    )
    found, errors = parse_answer(answer(unbound), BASE_SOURCE, "forward", native=PARAMS)
    assert found == [] and len(errors) == 1 and "PYBIND11_MODULE(" in errors[0]


def test_outside_a_cuda_task_a_cuda_block_is_not_a_candidate():
    found, errors = parse_answer(answer(CU), BASE_SOURCE, "forward")
    assert found == [] and "no code" in errors[0]


def test_the_answer_format_offers_c_sources_only_to_a_cuda_task():
    task = load_task(CUDA_TASK)
    fields = native_fields(task)
    assert fields == {"native_params": PARAMS[0], "native_names": PARAMS[1]}
    assert native_fields(load_task(ROOT / "examples" / "ln_softmax_dropout")) == {}
    cuda_ctx = replace(context(), language="cuda", **fields)
    assert _native(cuda_ctx) == PARAMS and _native(context()) is None
    asker = Asker(provider=None, ledger=None, prompts=load_prompts())  # renders only
    plain, offered = asker._answer_format(context()), asker._answer_format(cuda_ctx)
    assert "```cuda" not in plain and "```cuda" in offered and PARAMS[0] in offered


def test_an_mcp_submission_of_c_source_is_converted_in_a_cuda_task_only():
    task = load_task(CUDA_TASK)
    module = python_source(task, CU)
    assert "def forward(x, residual, weight, bias, *, p, eps, seed):" in module
    py = task.baseline_path.read_text()
    assert python_source(task, py) == py  # Python stays Python
    flagship = load_task(ROOT / "examples" / "ln_softmax_dropout")
    assert python_source(flagship, CU) == CU  # a triton task's check will refuse it as is
