"""Answer parsing and the strict diff applier: liberal about layout, strict about code."""

from __future__ import annotations

import re

import pytest
from llm_loopback import BASE_SOURCE

from kernelloop.agents.llm.parse import parse_answer
from kernelloop.agents.llm.patch import PatchError, apply_diff


def parse(text: str, **kw):
    return parse_answer(text, BASE_SOURCE, "forward", **kw)


def full(old: str, new: str) -> str:
    return f"```python\n{BASE_SOURCE.replace(old, new)}```\n"


def test_heading_style_fields_and_bold_labels_are_read():
    text = (
        "## Hypothesis\nThe kernel is latency bound:\nonly 23% occupancy.\n\n"
        "**Predicted effect:** -12% time\n- **Direction**: more warps\n\n"
        + full("NUM_WARPS = 4", "NUM_WARPS = 8")
    )
    [c], errors = parse(text)
    assert errors == []
    assert c.hypothesis == "The kernel is latency bound: only 23% occupancy."
    assert (c.predicted_effect, c.direction) == ("-12% time", "more warps")
    assert "NUM_WARPS = 8" in c.source and not c.from_diff


def test_the_last_complete_file_wins_over_earlier_snippets():
    text = "Hypothesis: more warps\n```python\nNUM_WARPS = 8\n```\nThe full file:\n" + full(
        "NUM_WARPS = 4", "NUM_WARPS = 8"
    )
    [c], _ = parse(text)
    assert c.source.startswith('"""A toy row kernel')


def test_several_candidates_and_one_broken_one():
    text = (
        "### Candidate 1\nHypothesis: a\n" + full("NUM_WARPS = 4", "NUM_WARPS = 8")
        + "### Candidate 2\nHypothesis: b\n```python\ndef forward(x):\n    return x +\n```\n"
        + "### Candidate 3\nHypothesis: c\n" + full("BLOCK = 1024", "BLOCK = 512")
    )  # fmt: skip
    found, errors = parse(text)
    assert [c.hypothesis for c in found] == ["a", "c"]
    assert errors == ["candidate 2: the candidate is not valid Python (line 2: invalid syntax)"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("no code at all", "no 'Hypothesis:' line"),
        ("Hypothesis: x\nno code", "there is no code"),
        ("Hypothesis: x\n" + full("def forward(x):", "def fwd(x):"), "does not define the entry"),
        ("Hypothesis: x\n```python\n" + BASE_SOURCE + "```\n", "identical to the current best"),
        ("Hypothesis: x\n```python\nimport triton\n", "a code block is never closed"),
    ],
)
def test_unusable_answers_say_why(text, error):
    found, errors = parse(text)
    assert found == [] and len(errors) == 1 and error in errors[0]


def test_a_diff_with_wrong_line_numbers_and_counts_is_applied_at_its_context():
    # Header says line 40 and wrong counts; the context exists once, near the top.
    diff = (
        "--- a/kernel.py\n+++ b/kernel.py\n@@ -40,9 +40,9 @@\n"
        " BLOCK = 1024\n-NUM_WARPS = 4\n+NUM_WARPS = 8\n"
    )
    [c], errors = parse(f"Hypothesis: warps\n```diff\n{diff}```\n")
    assert errors == [] and c.from_diff
    assert c.source == BASE_SOURCE.replace("NUM_WARPS = 4", "NUM_WARPS = 8")


def test_two_hunks_apply_in_order_and_blank_context_lines_may_lose_their_space():
    diff = (
        "@@ -5,3 +5,3 @@\n BLOCK = 1024\n-NUM_WARPS = 4\n+NUM_WARPS = 8\n\n"
        "@@ -17,3 +17,4 @@\n def forward(x):\n     y = x.new_empty(x.shape)\n"
        "+    assert x.is_contiguous()\n"
    )
    out = apply_diff(BASE_SOURCE, diff)
    assert "NUM_WARPS = 8" in out
    assert "    y = x.new_empty(x.shape)\n    assert x.is_contiguous()\n" in out
    assert out.count("\n") == BASE_SOURCE.count("\n") + 1


def test_fuzzy_garbage_is_refused_not_guessed():
    with pytest.raises(PatchError, match=r"hunk 1 .*'NUM_WARPS = 3'"):
        apply_diff(BASE_SOURCE, "@@ -6 +6 @@\n-NUM_WARPS = 3\n+NUM_WARPS = 8\n")
    with pytest.raises(PatchError, match=re.escape("neither ' ', '-' nor '+'")):
        apply_diff(BASE_SOURCE, "@@ -6 +6 @@\n-NUM_WARPS = 4\n+NUM_WARPS = 8\n...rest unchanged\n")
    with pytest.raises(PatchError, match="no '@@"):
        apply_diff(BASE_SOURCE, "-NUM_WARPS = 4\n+NUM_WARPS = 8\n")


def test_a_hunk_may_not_reach_back_before_the_previous_one():
    diff = (
        "@@ -17 +17 @@\n-def forward(x):\n+def forward(x):  # entry\n"
        "@@ -5 +5 @@\n-NUM_WARPS = 4\n+NUM_WARPS = 8\n"
    )
    with pytest.raises(PatchError, match="hunk 2"):
        apply_diff(BASE_SOURCE, diff)


def test_trailing_whitespace_is_the_only_forgiven_difference():
    src = BASE_SOURCE.replace("NUM_WARPS = 4", "NUM_WARPS = 4   ")
    assert "NUM_WARPS = 8" in apply_diff(src, "@@ -6 +6 @@\n-NUM_WARPS = 4\n+NUM_WARPS = 8\n")
    with pytest.raises(PatchError):
        apply_diff(BASE_SOURCE, "@@ -6 +6 @@\n-NUM_WARPS=4\n+NUM_WARPS = 8\n")


def test_a_screen_answer_may_hold_directions_without_code():
    text = "### Candidate 1\nDirection: persistent grid\nDifficulty: 5 (hard)\n"
    [c], errors = parse(text, require_source=False)
    assert (c.direction, c.difficulty, c.source, errors) == ("persistent grid", 5, None, [])
