"""Section budgets: a section within budget is unchanged; one over it is cut at a line,
the cut is marked with what was left out, and the result is within the budget."""

from __future__ import annotations

from kernelloop.task.textbudget import approx_tokens, fit


def test_within_budget_is_unchanged():
    text = "a short section\nof two lines"
    assert fit(text, 50, "x") is text


def test_over_budget_is_cut_at_a_line_marked_and_within_budget():
    lines = [f"line {i}: some words about the reference, 1.38x" for i in range(500)]
    text = "\n".join(lines)
    out = fit(text, 300, "the reference section")
    assert approx_tokens(out) <= 300
    kept = out.split("\n")[:-1]
    assert kept == lines[: len(kept)] and len(kept) > 10
    assert out.endswith(
        f"[… the reference section cut here: {500 - len(kept)} more line(s) over this "
        "section's budget of 300 tokens]"
    )


def test_one_long_line_keeps_its_start():
    out = fit("x" * 10_000, 100, "it")
    assert out.startswith("xxxx") and "it cut here" in out and approx_tokens(out) <= 100
