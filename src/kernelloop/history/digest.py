"""The history digest given back to the agent each round.

Each attempt renders itself (`Attempt.format_for_prompt`); this module only orders them,
most informative first, and keeps the whole under a token budget by shortening the
least informative entries to one line and, past that, naming what was left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from kernelloop.history.models import Attempt

# The estimate lives with the other section budgets (task/textbudget.py); re-exported here.
from kernelloop.task.textbudget import approx_tokens, tokens_by_chars, tokens_by_words

__all__ = ["approx_tokens", "render_digest", "tokens_by_chars", "tokens_by_words"]


def _group(a: Attempt) -> int:
    if a.status in ("refused", "infrastructure"):
        return 3
    if a.accepted and a.objective is not None:
        return 0  # what worked (a correct but unmeasured attempt did not "work" yet)
    return 1 if a.objective is not None else 2  # measured and not good enough / broke


def _ordered(attempts: Sequence[Attempt]) -> list[Attempt]:
    """Most informative first: the largest win, the worst measured failure, the latest
    breakage, then the next of each, round-robin; refused duplicates and proposals lost
    to infrastructure failures last."""

    def effect(a: Attempt) -> float:
        return abs(math.log(a.gain)) if a.gain and a.gain > 0 else 0.0

    groups: list[list[Attempt]] = [[], [], [], []]
    for a in sorted(attempts, key=lambda a: (-effect(a), -a.id)):
        groups[_group(a)].append(a)
    groups[2].sort(key=lambda a: -a.id)
    groups[3].sort(key=lambda a: -a.id)
    out: list[Attempt] = []
    for i in range(max(len(g) for g in groups[:3])):
        out += [g[i] for g in groups[:3] if i < len(g)]
    return out + groups[3]


# In place of the reasons of an attempt the same prompt's feedback section gives in full.
IN_FEEDBACK = "see last round's feedback"


def render_digest(
    attempts: Sequence[Attempt],
    *,
    budget_tokens: int = 1500,
    told_run: int | None = None,
    facts: Mapping[int, str] | None = None,
) -> str:
    """Every attempt gets one line; the most informative get the full form while the
    budget lasts; if even the one-liners do not fit, the least informative are named.
    `told_run`: the run whose latest decided round the agent's feedback section tells in
    full; those attempts' reasons are not said a second time here. `facts`: a candidate's
    compile facts in short, by proposal id, added to its full form (not to a told one's)."""
    decided = ("evaluated", "refused", "infrastructure")
    shown = [a for a in attempts if a.status in decided and a.round > 0]
    told = _told_ids(shown, told_run)
    shown = _without_told(shown, told)
    facts = {k: v for k, v in (facts or {}).items() if k not in told}
    if not shown:
        return "No earlier attempts on this task."
    best = [a for a in attempts if a.was_best and a.objective is not None]
    rounds = len({(a.run_id, a.round) for a in shown})
    header = f"History: {len(shown)} attempts over {rounds} rounds"
    if best:
        header += f"; current best #{best[-1].id} at {best[-1].objective:.3f}x over baseline"
    header += ". Most informative first."
    ordered = _ordered(shown)
    texts = [a.format_for_prompt(compact=True) for a in ordered]
    costs = [approx_tokens(t) + 1 for t in texts]
    limit = budget_tokens - approx_tokens(header) - 40  # 40: room for the "left out" line
    omitted: list[Attempt] = []
    while sum(costs) > limit:
        omitted.insert(0, ordered.pop())
        texts.pop()
        costs.pop()
    for i, a in enumerate(ordered):
        full = a.format_for_prompt()
        if a.id in facts:
            full += f"\n  compile facts (sm_90): {facts[a.id]}"
        extra = approx_tokens(full) + 1 - costs[i]
        if sum(costs) + extra <= limit:
            texts[i], costs[i] = full, costs[i] + extra
    lines = [header, *texts]
    if omitted:
        ids = ", ".join(f"#{a.id}" for a in omitted[:12])
        lines.append(f"({len(omitted)} less informative attempts left out: {ids}.)")
    return "\n".join(lines)


def _told_ids(shown: list[Attempt], told_run: int | None) -> set[int]:
    """The attempts of `told_run`'s latest decided round: the feedback section of the same
    prompt tells them in full."""
    mine = [a.round for a in shown if a.run_id == told_run]
    if told_run is None or not mine:
        return set()
    return {a.id for a in shown if a.run_id == told_run and a.round == max(mine)}


def _without_told(shown: list[Attempt], told: set[int]) -> list[Attempt]:
    """The attempts, the told ones without their reasons (no text said twice)."""

    def brief(a: Attempt) -> Attempt:
        if a.id not in told:
            return a
        if a.status == "refused":
            return replace(a, refused_reason=IN_FEEDBACK)
        if a.status == "infrastructure":
            return replace(a, infra_reason=IN_FEEDBACK)
        return replace(a, reasons=(IN_FEEDBACK,) if a.reasons else ())

    return [brief(a) for a in shown]
