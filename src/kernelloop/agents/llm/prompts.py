"""Prompt templates: Markdown files with `${placeholders}` (string.Template syntax).

The bundled templates live in `prompts/`; a team can point `prompts_dir` (or put a
`prompts/` folder in the task) at its own copies, file by file: a file found there
replaces the bundled one of the same name, the others stay. A literal dollar sign in a
template is written `$$`.

Each context section has a token budget (`SECTION_BUDGETS`, estimated by
task/textbudget.py: the larger of chars/4 and words-and-punctuation), so a long
reference, profile or history cannot crowd out the kernel; a section over its budget is
cut at a line and the cut is marked. The current best's source is never cut: the model
must see all of what it edits.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelloop.agents.base import AgentContext
from kernelloop.agents.llm.errors import PromptTemplateError
from kernelloop.task.contract import CONTRACT_BUDGET
from kernelloop.task.textbudget import fit

TEMPLATES = ("system", "answer_format", "propose", "screen", "final", "fix")

# Every name a template may use; a template may use any subset.
PLACEHOLDERS = frozenset(
    {
        "task_name", "task_description", "language", "entry", "device_name", "round_index",
        "rounds_left", "budget", "rules", "best_id", "best_status", "best_source",
        "profile_summary", "history_digest", "tunables", "n_candidates", "n_directions",
        "directions", "errors", "answer_format", "contract", "feedback", "judged_on",
        "source_forms", "hypothesis_hint", "parent_choice",
    }
)  # fmt: skip

# Token budget of each context section (see the module docstring); best_source has none.
SECTION_BUDGETS = {
    "task_description": 300,
    "contract": CONTRACT_BUDGET,
    "rules": 600,
    "profile_summary": 1200,
    "history_digest": 1600,
    "feedback": 900,
    "directions": 3000,
}


@dataclass(frozen=True)
class PromptSet:
    texts: Mapping[str, str]
    origins: Mapping[str, str]  # template name -> file it came from, for error messages

    def render(self, name: str, values: Mapping[str, object]) -> str:
        template = string.Template(self.texts[name])
        try:
            # Known names a caller has no value for render empty, so any template may use
            # any known placeholder; an unknown name is a typo and an error.
            filled = {**dict.fromkeys(PLACEHOLDERS, ""), **{k: str(v) for k, v in values.items()}}
            return template.substitute(filled)
        except KeyError as e:
            known = ", ".join(sorted(PLACEHOLDERS))
            raise PromptTemplateError(
                f"{self.origins[name]} uses ${{{e.args[0]}}}, which kernelloop does not "
                f"provide; use one of: {known}."
            ) from e
        except ValueError as e:
            raise PromptTemplateError(
                f"{self.origins[name]} has a stray '$' ({e}); write a literal dollar as '$$'."
            ) from e


def load_prompts(*folders: str | Path | None) -> PromptSet:
    """Bundled templates, overridden file by file by each existing folder in order."""
    bundled = resources.files("kernelloop.agents.llm").joinpath("prompts")
    texts = {n: bundled.joinpath(f"{n}.md").read_text(encoding="utf-8") for n in TEMPLATES}
    origins = {n: f"the bundled prompt {n}.md" for n in TEMPLATES}
    for folder in folders:
        if folder is None:
            continue
        path = Path(folder)
        if not path.is_dir():
            raise PromptTemplateError(
                f"prompt folder {path} does not exist; fix the path or drop the option."
            )
        for n in TEMPLATES:
            f = path / f"{n}.md"
            if f.is_file():
                texts[n] = f.read_text(encoding="utf-8")
                origins[n] = str(f)
    # Catch a team's typo at start-up, not in round 5.
    prompts = PromptSet(texts, origins)
    for n in TEMPLATES:
        prompts.render(n, {})
    return prompts


def budget_line(context: AgentContext, spent: str) -> str:
    """Where the run stands: this round, the rounds left after it (true at the last round:
    0), and what may end it earlier."""
    last = context.round_index + context.rounds_left - 1
    after = max(context.rounds_left - 1, 0)
    return (
        f"round {context.round_index} of at most {last}; {after} round(s) left after this one "
        "(the stall rule or a cost or time cap can end the run earlier); " + spent
    )


def judged_on(context: AgentContext) -> str:
    if not context.device_name:
        return "Judged on: a device not known yet (see the contract)."
    device = context.device_name
    if context.timings_count:
        return f"Judged on: {device}; timings count there."
    return (
        f"Judged on: {device}; timings there DO NOT count, so this run checks correctness "
        "only and accepts no speedup."
    )


def hypothesis_hint(context: AgentContext) -> str:
    """What a hypothesis can cite: the profile's bottleneck numbers where it names one;
    where it does not ("Bottleneck: unknown", no counters) the facts there are."""
    profile = context.profile_summary
    if profile and "Bottleneck: unknown" not in profile and "no hardware counters" not in profile:
        return "citing the profile numbers that show the bottleneck"
    return (
        "citing what is known (the compile facts: registers, spills, occupancy; the roofline "
        "floor; the shapes), since the profile names no measured bottleneck here"
    )


def parent_choice(context: AgentContext) -> str:
    """The optional `Parent:` line of the answer format, where there is a choice."""
    others = [k for k in context.parents if k != context.best_id]
    if not others:
        return ""
    listed = ", ".join(f"#{k}" for k in others[-12:])
    return (
        "\n\nTo start from an earlier candidate judged correct instead of the current best "
        f"(#{context.best_id}), add a line `Parent: #ID` after the Direction line; you may "
        f"name {listed} (their ids are in the history). A diff is then applied to that "
        "candidate and edit points are counted against it; the gate still compares the "
        "result with the current best."
    )


def fitted(name: str, text: str) -> str:
    return fit(text, SECTION_BUDGETS[name], f"the {name.replace('_', ' ')}")


def context_values(context: AgentContext, budget: str, feedback: str = "") -> dict[str, object]:
    """The placeholders every context-bearing template can use, each within its budget."""
    if not context.timings_count:
        floor = "speed not measured on this device"
    elif context.best_pct_of_floor:
        floor = ", ".join(f"{k}: {v:.0f}% of floor" for k, v in context.best_pct_of_floor.items())
    else:
        floor = "distance to the roofline floor unknown"
    return {
        "task_name": context.task_name,
        "task_description": fitted(
            "task_description", context.task_description.strip() or "(no description)"
        ),
        "language": context.language,
        "entry": context.entry,
        "device_name": context.device_name or "unknown",
        "judged_on": judged_on(context),
        "round_index": context.round_index,
        "rounds_left": context.rounds_left,
        "budget": budget,
        "rules": fitted("rules", context.rules_text.strip() or "(none stated)"),
        "contract": fitted("contract", context.contract.strip() or "(no contract given)"),
        "best_id": context.best_id,
        "best_status": f"{context.best_objective:.3f}x the baseline's speed; {floor}",
        "best_source": context.best_source.rstrip("\n"),
        "profile_summary": fitted(
            "profile_summary", context.profile_summary.strip() or "(no profile available)"
        ),
        "history_digest": fitted(
            "history_digest", context.history_digest.strip() or "(nothing tried yet)"
        ),
        "feedback": fitted(
            "feedback",
            "\n\n".join(t for t in (context.unseen_note.strip(), feedback.strip()) if t)
            or "(no earlier candidates of yours)",
        ),
        "tunables": ", ".join(context.tunables) or "(none named)",
    }
