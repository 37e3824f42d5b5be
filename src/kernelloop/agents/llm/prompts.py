"""Prompt templates: Markdown files with `${placeholders}` (string.Template syntax).

The bundled templates live in `prompts/`; a team can point `prompts_dir` (or put a
`prompts/` folder in the task) at its own copies, file by file: a file found there
replaces the bundled one of the same name, the others stay. A literal dollar sign in a
template is written `$$`.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from kernelloop.agents.base import AgentContext
from kernelloop.agents.llm.errors import PromptTemplateError

TEMPLATES = ("system", "answer_format", "propose", "screen", "final", "fix")

# Every name a template may use; a template may use any subset.
PLACEHOLDERS = frozenset(
    {
        "task_name", "task_description", "language", "entry", "device_name", "round_index",
        "rounds_left", "budget", "rules", "best_id", "best_status", "best_source",
        "profile_summary", "history_digest", "tunables", "n_candidates", "n_directions",
        "directions", "errors", "answer_format",
    }
)  # fmt: skip


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


def context_values(context: AgentContext, budget: str) -> dict[str, object]:
    """The placeholders every context-bearing template can use."""
    if context.best_pct_of_floor:
        floor = ", ".join(f"{k}: {v:.0f}% of floor" for k, v in context.best_pct_of_floor.items())
    else:
        floor = "distance to the roofline floor unknown"
    return {
        "task_name": context.task_name,
        "task_description": context.task_description.strip() or "(no description)",
        "language": context.language,
        "entry": context.entry,
        "device_name": context.device_name or "unknown",
        "round_index": context.round_index,
        "rounds_left": context.rounds_left,
        "budget": budget,
        "rules": context.rules_text.strip() or "(none stated)",
        "best_id": context.best_id,
        "best_status": f"{context.best_objective:.3f}x the baseline's speed; {floor}",
        "best_source": context.best_source.rstrip("\n"),
        "profile_summary": context.profile_summary.strip() or "(no profile available)",
        "history_digest": context.history_digest.strip() or "(nothing tried yet)",
        "tunables": ", ".join(context.tunables) or "(none named)",
    }
