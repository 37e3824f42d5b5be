"""One wording for a verdict, naming the stage that decided it.

`kernelloop bench` once printed a timing failure for a candidate the
static screen had refused (the source never ran, nothing was timed): the headline must
say which stage refused, so a reader knows whether to fix a policy finding, a wrong
result or a slow kernel.
"""

from __future__ import annotations

from kernelloop.task import words

# Categories decided before any candidate code runs.
STATIC = "static"
# Categories the performance gate decides from a benchmark record.
PERFORMANCE = {"timing", "slower", "no_record"}


def stage(category: str) -> str:
    """static screen | policy | performance gate | correctness | judged correct (the
    record's category "accepted", said in the one vocabulary, task/words.py)."""
    if category == "accepted":
        return words.JUDGED_CORRECT
    if category == STATIC:
        return "static screen"
    if category == "policy":
        return "policy"
    if category in PERFORMANCE:
        return "performance gate"
    if category == "internal":
        return "internal"
    return "correctness"


def headline(category: str, accepted: bool) -> str:
    """The verdict's first line, without markup: e.g. "REJECTED at the static screen (policy)"."""
    if accepted:
        return words.JUDGED_CORRECT_HEADLINE
    where = stage(category)
    if where == "static screen":
        return "REJECTED at the static screen (policy)"
    if where == "policy":
        return "REFUSED by the loop's rules (policy)"
    if where == "performance gate":
        return f"REJECTED by the performance gate ({category})"
    if where == "internal":  # the trusted side's failure, not a finding about the candidate
        return "NOT JUDGED: kernelloop's trusted side failed (internal)"
    return f"REJECTED by correctness ({category})"


def rich_headline(category: str, accepted: bool) -> str:
    text = headline(category, accepted)
    return f"[bold green]{text}[/]" if accepted else f"[bold red]{text}[/]"


def without_stage(reason: str) -> str:
    """A reason without the stage prefix the headline already says."""
    return reason.removeprefix("static screen: ")


def print_rejection(console, category: str, reasons: list[str], *, note: str = "") -> None:
    """The headline with the first reason on its line, then the other reasons (at most 10)."""
    from rich.markup import escape

    shown = [escape(without_stage(r)) for r in reasons[:10]]
    first = f": {shown[0]}" if shown else ""
    console.print(f"{rich_headline(category, False)}{escape(note)}{first}")
    for r in shown[1:]:
        console.print(f"  - {r}")
