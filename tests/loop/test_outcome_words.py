"""One vocabulary of outcomes, text cut at words with a mark, rich markup escaped, no
"$0.0000" for an unpriced model, a crash's line in the kernel, and the `Parent:` line
(issue 35). Cheap: no sandbox, no server."""

from __future__ import annotations

import io

from rich.console import Console

from kernelloop.agents.base import Proposal
from kernelloop.agents.llm.parse import parse_answer
from kernelloop.commands.history_cmds import _cost, _verdict_cell
from kernelloop.evaluate.trusted.channel.text import candidate_frame
from kernelloop.history.models import clip, outcome_word
from kernelloop.loop.view import RunView
from tests.loop.test_feedback import attempt

BASE = "def forward(x):\n    return x + 1\n"
OTHER = "def forward(x):\n    y = x * 1\n    return y + 1\n"


def test_one_word_per_outcome():
    assert outcome_word("evaluated", True, "accepted", False, False) == "judged correct, not timed"
    assert outcome_word("evaluated", True, "accepted", True, True) == "promoted"
    assert (
        outcome_word("evaluated", True, "accepted", True, False) == "judged correct, not promoted"
    )
    assert outcome_word("evaluated", False, "slower", True, False) == "rejected [slower]"
    assert outcome_word("refused", None, "", False, False) == "refused"
    assert outcome_word("infrastructure", None, "", False, False) == "not evaluated"
    assert outcome_word("proposed", None, "", False, False) == "pending"
    # The history table says the same words.
    assert "judged correct, not timed" in _verdict_cell(attempt(accepted=True, objective=None))


def test_text_is_cut_at_a_word_with_a_mark():
    text = "fuse layernorm softmax and dropout into a single persistent row kernel"
    cut = clip(text, 30)
    assert cut == "fuse layernorm softmax and…" and len(cut) <= 30
    assert text.startswith(cut[:-1])
    assert clip("short", 30) == "short"
    assert clip("x" * 50, 10) == "x" * 9 + "…"  # one word longer than the room


def test_the_live_view_shows_the_direction_with_brackets_intact():
    out = io.StringIO()
    view = RunView(live_enabled=False)
    view.console = Console(file=out, width=200, color_system=None)
    prop = Proposal(
        BASE, "a long hypothesis that should not be shown", direction="avoid E[x^2]-E[x]^2"
    )
    view.candidate(1, 1, prop, "rejected [wrong]", "mean [0] off by 1e-3")
    printed = out.getvalue()
    assert "avoid E[x^2]-E[x]^2" in printed and "rejected [wrong]" in printed, printed
    assert "a long hypothesis" not in printed
    view.finish({"task": "t", "status": "finished", "reason": "x [y]", "best_proposal_id": 1,
                 "best_objective_vs_baseline": 1.0, "wall_s": 1.0})  # fmt: skip
    table = out.getvalue()
    assert "E[x^2]-E[x]^2" in table and "mean [0] off" in table and "x [y]" in table, table


def test_an_unpriced_model_is_said_so_not_zero_dollars():
    assert _cost(attempt(model="qwen3-coder:30b", cost_usd=0.0)) == "unpriced"
    assert _cost(attempt(model="gpt-4.1", cost_usd=0.0123)) == "$0.0123"
    assert _cost(attempt(model="", agent="tuner", cost_usd=0.0)) == "–"


def test_a_crash_names_the_line_in_the_candidate():
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/site-packages/kernelloop/evaluate/worker/calls.py", '
        "line 10, in run\n    out = fn(**kw)\n"
        '  File "/tmp/kl-1/impl/candidate.py", line 42, in forward\n    _k[(rows,)](x, out)\n'
        '  File "/usr/lib/python3.12/site-packages/triton/runtime/interpreter.py", line 9, '
        "in __call__\n    self.fn(*args)\n"
        '  File "/tmp/kl-1/impl/candidate.py", line 17, in _k\n'
        "    x = tl.load(x_ptr + offs[:, None] * 3)\n"
        "IndexError: index 5 is out of bounds\n"
    )
    assert candidate_frame(tb) == "; at line 17 in «_k»: «x = tl.load(x_ptr + offs[:, None] * 3)»"
    assert candidate_frame("ValueError: no frames") == ""


def test_a_parent_line_bases_a_diff_on_the_named_candidate():
    diff = (
        "```diff\n@@ -1,3 +1,3 @@\n def forward(x):\n-    y = x * 1\n+    y = x * 2\n"
        "     return y + 1\n```"
    )
    answer = f"### Candidate 1\nDirection: scale\nParent: #4\nHypothesis: h\n\n{diff}\n"
    [c], errors = parse_answer(answer, BASE, "forward", parents={"4": OTHER, "7": BASE})
    assert errors == [] and c.parent == "4" and c.from_diff
    assert "y = x * 2" in c.source
    bad = answer.replace("#4", "#9")
    found, errors = parse_answer(bad, BASE, "forward", parents={"4": OTHER})
    assert found == [] and "Parent #9 is not an earlier candidate judged correct" in errors[0]
    assert "#4" in errors[0]
    plain = f"### Candidate 1\nDirection: scale\nHypothesis: h\n\n```python\n{OTHER}```\n"
    [c2], _ = parse_answer(plain, BASE, "forward")
    assert c2.parent == ""
