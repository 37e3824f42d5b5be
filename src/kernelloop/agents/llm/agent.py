"""The single-model LLM agent, and the ask-parse-retry step the cascade reuses."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.agents.llm.errors import ModelAnswerError
from kernelloop.agents.llm.ledger import CostLedger
from kernelloop.agents.llm.parse import ParsedCandidate, parse_answer
from kernelloop.agents.llm.prompts import (
    PromptSet,
    budget_line,
    context_values,
    hypothesis_hint,
    parent_choice,
)
from kernelloop.agents.llm.providers import Provider
from kernelloop.task.textbudget import clip


@dataclass
class Asker:
    """One model, its ledger and the templates: ask, parse, and retry once on a parse error."""

    provider: Provider
    ledger: CostLedger
    prompts: PromptSet
    last_errors: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.provider.provider}:{self.provider.model}"

    def ask(
        self,
        user_prompt: str,
        context: AgentContext,
        values: dict[str, object],
        *,
        stage: str,
        require_source: bool = True,
    ) -> list[ParsedCandidate]:
        system = self.prompts.render("system", values)
        messages = [{"role": "user", "content": user_prompt}]
        errors: list[str] = []
        for attempt in range(2):
            done = self.provider.complete(system, messages)
            self.ledger.record(
                done, context.round_index, stage if attempt == 0 else f"{stage}-retry"
            )
            found, errors = parse_answer(
                done.text,
                context.best_source,
                context.entry,
                require_source=require_source,
                truncated=done.truncated,
                native=_native(context),
                parents=context.parents,
            )
            self.last_errors = errors
            if found:
                return found
            # The one retry: the model sees its own answer and exactly what was wrong.
            fix = self.prompts.render(
                "fix",
                {
                    **values,
                    "errors": "\n".join(f"- {e}" for e in errors) or "- the answer was empty",
                },
            )
            messages = [
                *messages,
                {"role": "assistant", "content": done.text or "(empty answer)"},
                {"role": "user", "content": fix},
            ]
        raise ModelAnswerError(
            f"{self.label} twice answered in a form kernelloop cannot use ({'; '.join(errors)}); "
            "try a stronger model or adjust the prompt templates (prompts_dir)."
        )

    def _answer_format(self, context: AgentContext) -> str:
        forms = ""
        if _native(context) is not None:
            forms = "\n\n" + (
                "For this task you may instead send the complete C++/CUDA source in a ```cuda "
                f"block: it binds `{context.entry}` itself with `PYBIND11_MODULE("
                f'TORCH_EXTENSION_NAME, m) {{ m.def("{context.entry}", &{context.entry}); }}`'
                f", taking ({context.native_params}) in that order (tensors as torch::Tensor, "
                "floats as double, integers as int64_t). kernelloop builds it with load_inline; "
                "the current best you see next is the Python module that embeds it, and a "
                "diff against that module also works."
            )
        return self.prompts.render(
            "answer_format",
            {
                "entry": context.entry,
                "source_forms": forms,
                "hypothesis_hint": hypothesis_hint(context),
                "parent_choice": parent_choice(context),
            },
        )

    def values(
        self, context: AgentContext, max_cost_usd: float | None, feedback: str = ""
    ) -> dict[str, object]:
        unpriced = self.ledger.unpriced_models()
        if self.ledger.prices.price_for(self.provider.model) is None and self.label not in unpriced:
            unpriced.append(self.label)  # known before its first call: the table lacks it
        if unpriced and not self.ledger.total_usd:
            spent = f"model spend so far unknown ({', '.join(unpriced)} unpriced)"
        else:
            spent = f"model spend so far ${self.ledger.total_usd:.4f}"
            spent += f" (plus unpriced {', '.join(unpriced)})" if unpriced else ""
        if max_cost_usd is not None:
            spent += f" of a ${max_cost_usd:.2f} cap"
        return {
            **context_values(context, budget_line(context, spent), feedback),
            "answer_format": self._answer_format(context),
        }


# One outcome in the feedback section: enough for the first failing check with its worst
# element, a compiler excerpt, or the per-shape ratios.
OUTCOME_CHARS = 900


def feedback_text(outcomes: list[tuple[Proposal, str]]) -> str:
    """What became of the agent's candidates of its last round, as the loop told it
    (`observe`): the verdict with the first failing check, the compiler's first lines or
    the per-shape ratios. The history digest keeps the older rounds."""
    lines = []
    for i, (prop, outcome) in enumerate(outcomes, start=1):
        what = clip(prop.direction or prop.hypothesis, 120)
        text = outcome if len(outcome) <= OUTCOME_CHARS else outcome[: OUTCOME_CHARS - 1] + "…"
        lines.append(f"{i}. {what or '(no direction given)'}\n{text}")
    return "\n".join(lines)


def to_proposal(c: ParsedCandidate, agent: str, model: str) -> Proposal:
    assert c.source is not None
    return Proposal(
        source=c.source,
        hypothesis=c.hypothesis,
        predicted_effect=c.predicted_effect,
        direction=c.direction,
        agent=agent,
        model=model,
        parent=c.parent,
    )


class LLMAgent:
    """One model proposes `n_candidates` candidates per round."""

    name = "llm"
    candidate_profiles = True  # the loop profiles each candidate for its feedback

    def __init__(
        self,
        provider: Provider,
        *,
        ledger: CostLedger,
        prompts: PromptSet,
        n_candidates: int = 1,
        max_cost_usd: float | None = None,
    ) -> None:
        self.asker = Asker(provider, ledger, prompts)
        self.ledger = ledger
        self.n_candidates = n_candidates
        self.max_cost_usd = max_cost_usd
        self.outcomes: list[tuple[Proposal, str]] = []
        self._told = 0  # outcomes already shown in a prompt

    def propose(self, context: AgentContext) -> list[Proposal]:
        feedback = feedback_text(self.outcomes[self._told :])
        self._told = len(self.outcomes)
        values = {
            **self.asker.values(context, self.max_cost_usd, feedback),
            "n_candidates": self.n_candidates,
        }
        prompt = self.asker.prompts.render("propose", values)
        found = self.asker.ask(prompt, context, values, stage="propose")
        return [to_proposal(c, self.name, self.asker.label) for c in found[: self.n_candidates]]

    def observe(self, proposal: Proposal, outcome: str) -> None:
        # The next prompt's feedback section shows the outcomes of the last round in full;
        # the history digest carries every earlier one in short.
        self.outcomes.append((proposal, outcome))

    def cost_summary(self) -> dict[str, object]:
        return self.ledger.summary()


def _native(context: AgentContext) -> tuple[str, tuple[str, ...]] | None:
    """The entry's parameters with which a C++ answer stands for a candidate (cuda tasks)."""
    if context.language != "cuda" or not context.native_names:
        return None
    return context.native_params, context.native_names
