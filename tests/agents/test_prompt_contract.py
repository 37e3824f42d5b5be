"""Acceptance (issue 16): what the built-in llm agent sends over real HTTP carries the
task's contract — the reference source, the tolerances, the shapes with their weights,
the best's % of floor — within the stated token budgets, and a long reference or history
is cut (marked) before it can crowd out the kernel."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from llm_loopback import ModelServer, Reply, good_answer

from kernelloop.agents.llm import make_llm_agent
from kernelloop.agents.llm.prompts import SECTION_BUDGETS, load_prompts
from kernelloop.evaluate.trusted.values.record import Environment, EvaluationRecord, Verdict
from kernelloop.loop.context import agent_context
from kernelloop.loop.state import Best
from kernelloop.objective import floor_pct, shape_rows
from kernelloop.task import load_task
from kernelloop.task.contract import CONTRACT_BUDGET
from kernelloop.task.textbudget import approx_tokens

BENCH = {
    "shapes": [
        {"shape": "16384x8192", "dtype": "bfloat16", "tag": "common", "weight": 0.35,
         "floor_ms": 0.1886, "impls": {"candidate": {"median_ms": 0.344, "pct_of_floor": 54.8},
                                       "baseline": {"median_ms": 1.21, "pct_of_floor": 15.6}}},
        {"shape": "1024x32768", "dtype": "bfloat16", "tag": "long_tail", "weight": 0.05,
         "floor_ms": 0.0471, "impls": {"candidate": {"median_ms": 0.344, "pct_of_floor": 13.7},
                                       "baseline": {"median_ms": 0.344, "pct_of_floor": 13.7}}},
    ]
}  # fmt: skip
GATE = {"shapes": [{"shape": "16384x8192", "speedup_vs_baseline": 3.52},
                   {"shape": "1024x32768", "speedup_vs_baseline": 1.0}]}  # fmt: skip


def h200_record() -> EvaluationRecord:
    env = Environment(
        device="cuda",
        device_name="NVIDIA H200",
        compute_capability="9.0",
        torch="2.11",
        python="3.12",
        sandbox="bwrap",
    )
    return EvaluationRecord(
        task="ln_softmax_dropout",
        task_digest="d",
        candidate="best.py",
        candidate_sha256="0" * 64,
        started_at="2026-11-30T00:00:00",
        wall_s=1.0,
        environment=env,
        timings_count=True,
        verdict=Verdict(accepted=True, category="accepted"),
    )


def best_of(task, source: str) -> Best:
    rows = shape_rows(BENCH, GATE)
    return Best(7, source, h200_record(), 2.9, floor_pct(task, rows), shapes=rows)


def gpu_run(task):
    return SimpleNamespace(device="cuda", shapes=None, dtypes=None)


@pytest.fixture
def server():
    s = ModelServer("openai").start()
    yield s
    s.stop()


def ask(server: ModelServer, ctx) -> str:
    server.script.append(Reply(good_answer()))
    agent = make_llm_agent(
        "openai:gpt-4.1",
        base_url=server.url,
        env={"OPENAI_API_KEY": "sk-test"},
        backoff_base_s=0.001,
        timeout_s=5.0,
    )
    agent.propose(ctx)
    return server.received[-1].prompt_text()


def within_budget(prompt: str, best_source: str) -> tuple[int, int]:
    """(the prompt's estimate, the stated bound): every budgeted section at its budget,
    the kernel in full, and the templates' own words (system + propose + answer format,
    rendered with every placeholder empty)."""
    prompts = load_prompts()
    frame = sum(approx_tokens(prompts.render(n, {})) for n in ("system", "propose"))
    frame += approx_tokens(prompts.render("answer_format", {"entry": "forward"}))
    # directions are the cascade's, not in a propose prompt; the budget line and the
    # best's status line are short fixed sentences (200 tokens of room).
    budgets = sum(v for k, v in SECTION_BUDGETS.items() if k != "directions")
    return approx_tokens(prompt), frame + budgets + approx_tokens(best_source) + 200


def test_the_prompt_carries_the_contract_within_its_budget(server, flagship):
    source = (flagship.folder / "baseline.py").read_text()
    ctx = agent_context(flagship, "No earlier attempts.", best_of(flagship, source), 2, 4,
                        gpu_run(flagship))  # fmt: skip
    prompt = ask(server, ctx)
    reference = (flagship.folder / "reference.py").read_text().strip()
    assert reference in prompt
    for dtype, tol in flagship.spec.tolerances.items():
        assert f"{dtype}: atol={tol.atol:g}, rtol={tol.rtol:g}" in prompt
    for s in flagship.spec.shapes:
        assert f"{s.label} ({', '.join(f'{k}={v}' for k, v in s.dims.items())}): " \
               f"weight {s.weight:g}, {s.tag}" in prompt  # fmt: skip
    # The best's per-shape time and % of floor, and the floor time of the judged device.
    assert "best #7: 0.3440 ms bf16 = 54.8% of floor, 3.52x the baseline" in prompt
    assert "floor 0.1886 ms (bf16, fp16) / 0.3772 ms (fp32)" in prompt
    assert "Judged on: NVIDIA H200; timings count there." in prompt
    assert "need NOT match the baseline" in prompt and "kept value" in prompt
    for case in flagship.spec.suites.extreme:
        assert f"`{case}`" in prompt
    assert "`weight`: shape (cols,), the call's dtype, contiguous" in prompt
    # Round 2 of at most 4: two rounds after this one — true, not off by one.
    assert "round 2 of at most 4; 2 round(s) left after this one" in prompt
    assert source.strip() in prompt  # the kernel in full
    used, bound = within_budget(prompt, source)
    assert used <= bound, (used, bound)


def test_a_long_reference_and_history_are_cut_and_marked_never_the_kernel(
    server, flagship, tmp_path
):
    folder = tmp_path / "task"
    shutil.copytree(flagship.folder, folder, ignore=shutil.ignore_patterns(".kernelloop"))
    ref = folder / "reference.py"
    padding = "".join(f"# note {i}: a very long comment line about the reference\n"
                      for i in range(3000))  # fmt: skip
    ref.write_text(padding + ref.read_text())
    task = load_task(folder)
    source = (folder / "baseline.py").read_text()
    history = "\n".join(f"#{i} r1 rejected [slower] -1.0%: idea {i}" for i in range(4000))
    ctx = agent_context(task, history, best_of(task, source), 1, 3, gpu_run(task))
    prompt = ask(server, ctx)
    assert "the reference section cut here" in prompt
    assert "the history digest cut here" in prompt
    assert source.strip() in prompt
    # What follows the reference in the contract survives its cut.
    assert "need NOT match the baseline" in prompt and "weight 0.35" in prompt
    contract = prompt.split("## The task's contract")[1].split("\n## Rules")[0]
    assert approx_tokens(contract) <= CONTRACT_BUDGET + 20  # + the heading's words
    used, bound = within_budget(prompt, source)
    assert used <= bound, (used, bound)


def test_on_a_cpu_the_prompt_says_up_front_that_timings_do_not_count(server, flagship):
    source = (flagship.folder / "baseline.py").read_text()
    best = Best(1, source, None, 1.0)
    run = SimpleNamespace(device="cpu", shapes=None, dtypes=None)
    ctx = agent_context(flagship, "", best, 3, 3, run)
    prompt = ask(server, ctx)
    head = prompt.split("## The task's contract")[0]
    assert "timings there DO NOT count" in head
    assert "round 3 of at most 3; 0 round(s) left after this one" in head
    # The floors are quoted for the device the task's speed is measured on, named as such.
    assert "Floor times on the NVIDIA H200, not this machine" in prompt
    assert "CPU shapes (small, for machines without a GPU) — judged here" in prompt
