"""One snapshot per bundled prompt template, rendered from a fixed context: a change to a
template (or to what fills it) shows up as a reviewed diff of the text a model reads.

To accept an intended change, run
`KERNELLOOP_UPDATE_SNAPSHOTS=1 pytest tests/agents/test_prompt_snapshots.py` and commit
the files under tests/agents/snapshots/.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from llm_loopback import context

from kernelloop.agents.base import Proposal
from kernelloop.agents.llm.agent import feedback_text
from kernelloop.agents.llm.prompts import TEMPLATES, budget_line, context_values, load_prompts

SNAPSHOTS = Path(__file__).parent / "snapshots"
CONTRACT = (
    "### Where it is judged\nCandidates are judged on NVIDIA H200 (cuda, sm_90).\nMARK-CONTRACT"
)


def values(name: str) -> dict[str, object]:
    from dataclasses import replace

    ctx = replace(context(round_index=3), contract=CONTRACT)
    fb = feedback_text(
        [(Proposal(source="", hypothesis="h", direction="one Philox call per 4 elements",
                   predicted_effect="-20% median time", proposal_id=12),
          "rejected [stochastic]: first failing check: stochastic/distinguishable 7x129 "
          "float32: p=0.1: dropped fraction 0.2000 over 903 elements")]
    )  # fmt: skip
    v = context_values(ctx, budget_line(ctx, "model spend so far $0.0120"), fb)
    v["answer_format"] = load_prompts().render("answer_format", {"entry": ctx.entry})
    v["n_candidates"], v["n_directions"] = 2, 6
    v["directions"] = "1. Direction: fuse the passes (difficulty 4)\n   (no draft)"
    v["errors"] = "- no ```python block found"
    return v


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_snapshot(name):
    text = load_prompts().render(name, values(name))
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("KERNELLOOP_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no snapshot {path}; run with KERNELLOOP_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(), f"{name}.md renders differently from {path}"


def test_context_templates_carry_contract_feedback_and_device():
    for name in ("propose", "screen", "final"):
        text = load_prompts().render(name, values(name))
        assert "MARK-CONTRACT" in text and "one Philox call per 4 elements" in text
        assert "Judged on: NVIDIA H200; timings count there." in text
        assert "round 3 of at most 7; 4 round(s) left after this one" in text
