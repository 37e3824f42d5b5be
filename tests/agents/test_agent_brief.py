"""Acceptance (issue 35): what the built-in agent sends over real HTTP on 127.0.0.1 names
the torch/triton versions, the fp32 precision contract (TF32), the dropped-fraction band
at the GPU's shape beside the CPU's (computed, as the judge computes it), the drawn extra
shape's ranges (read from the plan), the `ModelNew` form of an imported KernelBench task
with keyword-only inputs called so; no "$0.0000" for an unpriced model; no "cite the
profile numbers" where the profile names no bottleneck."""

from __future__ import annotations

import math
import re
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
from llm_loopback import ModelServer, Reply, good_answer
from test_prompt_contract import best_of, gpu_run

from kernelloop.agents.llm import make_llm_agent
from kernelloop.evaluate.trusted.values.compare_mask import binomial_ok
from kernelloop.evaluate.trusted.values.undeclared import undeclared_ranges as unseen_ranges
from kernelloop.loop.context import agent_context, task_contract
from kernelloop.loop.state import Best
from kernelloop.task import load_task
from kernelloop.task.kernelbench import import_problem

KB = Path(__file__).parents[1] / "task" / "fixtures" / "kernelbench"


@pytest.fixture
def server():
    s = ModelServer("openai").start()
    yield s
    s.stop()


def ask(server: ModelServer, ctx, model: str = "openai:gpt-4.1") -> str:
    server.script.append(Reply(good_answer()))
    agent = make_llm_agent(
        model,
        base_url=server.url,
        env={"OPENAI_API_KEY": "sk-test"},
        backoff_base_s=0.001,
        timeout_s=5.0,
    )
    agent.propose(ctx)
    return server.received[-1].prompt_text()


def test_the_brief_names_versions_precision_bands_and_ranges(server, flagship):
    source = (flagship.folder / "baseline.py").read_text()
    ctx = agent_context(flagship, "", best_of(flagship, source), 2, 4, gpu_run(flagship))
    prompt = ask(server, ctx)
    # The judging machine's versions (its record: torch 2.11) and triton's.
    triton = metadata.version("triton")
    assert f"Software (the judging machine's): torch 2.11, triton {triton}" in prompt
    # The precision contract for fp32 (the task's [precision]; the flagship allows no TF32).
    assert not flagship.spec.precision.tf32
    assert "Precision: float32 is computed at full float32 precision; TF32 is not allowed" in prompt
    assert 'input_precision="ieee"' in prompt
    # The dropped-fraction band, computed as the judge's binomial test computes it:
    # ±1.6e-4 at 16384x8192 against ±0.025 at the CPU's 5x1000.
    st, p = flagship.spec.stochastic, flagship.spec.params["p"]
    m = re.search(
        r"by ±([0-9.e-]+) at the GPU's 16384x8192 .* but ±([0-9.e-]+) at the CPU's 5x1000", prompt
    )
    assert m, prompt
    for got, n in ((float(m.group(1)), 16384 * 8192), (float(m.group(2)), 5 * 1000)):
        sd = math.sqrt(n * p * (1 - p))
        band = st.confidence_sigmas * sd / n
        assert got == pytest.approx(band, rel=0.05)
        # At the band's edge the judge's own test still passes, and a little past it fails.
        assert binomial_ok(round(n * (p + band * 0.98)), n, p, st.confidence_sigmas)[0]
        assert not binomial_ok(round(n * (p + band * 1.1)) + 2, n, p, st.confidence_sigmas)[0]
    assert m.group(1).startswith("0.00016") and m.group(2) == "0.025"
    # The extra shape's ranges, as the plan draws them.
    ranges = unseen_ranges(flagship, list(flagship.spec.shapes))
    text = ", ".join(f"{k} in [{lo}, {hi}]" for k, (lo, hi) in ranges.items())
    assert f"The extra shape's ranges: {text}" in prompt
    assert text == "rows in [2, 65536], cols in [129, 32768]"
    # A priced model's spend is a number; the profile here has counters to cite.
    assert "model spend so far $0.0000" in prompt


def test_an_unpriced_model_and_an_unknown_bottleneck_are_said_so(server, flagship):
    source = (flagship.folder / "baseline.py").read_text()
    best = Best(1, source, None, 1.0)
    best.profile_text = (
        "PROFILE baseline.py (no hardware counters)\nBottleneck: unknown — no profiler counters"
    )
    ctx = agent_context(flagship, "", best, 1, 2, SimpleNamespace(device="cpu", shapes=None,
                                                                  dtypes=None))  # fmt: skip
    prompt = ask(server, ctx, model="openai:my-local-model")
    assert "$0.0000" not in prompt
    assert "model spend so far unknown (openai:my-local-model unpriced)" in prompt
    assert "citing the profile numbers that show the bottleneck" not in prompt
    assert "since the profile names no measured bottleneck here" in prompt


def test_an_imported_kernelbench_task_offers_model_new_and_keyword_only_inputs(tmp_path):
    folder = import_problem(KB / "level1" / "19_ReLU.py", tmp_path, ["float32"])
    task = load_task(folder)
    text = task_contract(task, "cpu", None).text()
    assert "define `class ModelNew(nn.Module)`" in text
    assert "Its constructor may keep those constants" in text
    # forward(*, x): its tensor input is keyword-only, never called positional.
    assert "Tensor inputs (keyword-only: pass them by name):" in text
    assert "positional" not in text.split("### Interface")[1].split("###")[0]
