"""The single-model LLM agent, and the ask-parse-retry step the cascade reuses."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.agents.llm.errors import ModelAnswerError
from kernelloop.agents.llm.ledger import CostLedger
from kernelloop.agents.llm.parse import ParsedCandidate, parse_sections
from kernelloop.agents.llm.prompts import (
    SECTION_BUDGETS,
    PromptSet,
    budget_line,
    context_values,
    hypothesis_hint,
    parent_choice,
)
from kernelloop.agents.llm.providers import Provider
from kernelloop.task.textbudget import approx_tokens, clip, fit


@dataclass
class Asker:
    """One model, its ledger and the templates: ask, parse, and retry once on a parse error."""

    provider: Provider
    ledger: CostLedger
    prompts: PromptSet
    last_errors: list[str] = field(default_factory=list)
    unusable: list[ParsedCandidate] = field(default_factory=list)

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
        want: int = 0,
    ) -> list[ParsedCandidate]:
        """The usable candidates of the answer. An answer with none gets one retry that
        quotes every problem; so does one with fewer than `want` usable candidates and
        some unusable sections (the retry asks for those only). The unusable sections of
        the answer the round goes on with are left in `unusable`, each with its problem."""
        system = self.prompts.render("system", values)
        messages = [{"role": "user", "content": user_prompt}]
        errors: list[str] = []
        kept: list[ParsedCandidate] = []
        self.unusable = []
        for attempt in range(2):
            done = self.provider.complete(system, messages)
            self.ledger.record(
                done, context.round_index, stage if attempt == 0 else f"{stage}-retry"
            )
            found, unusable, errors = parse_sections(
                done.text,
                context.best_source,
                context.entry,
                require_source=require_source,
                truncated=done.truncated,
                native=_native(context),
                parents=context.parents,
            )
            self.last_errors = errors
            kept += found
            self.unusable = unusable
            if kept and (len(kept) >= want or not unusable or attempt == 1):
                return kept
            if attempt == 1:
                break
            # The one retry: the model sees its own answer and exactly what was wrong.
            listed = "\n".join(f"- {e}" for e in errors) or "- the answer was empty"
            if kept:
                listed += (
                    f"\n\nThe other {len(kept)} candidate(s) of your answer are being judged as "
                    f"sent; send only {len(unusable)} candidate(s) in place of the unusable "
                    "one(s) above."
                )
            fix = self.prompts.render("fix", {**values, "errors": listed})
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


def feedback_text(outcomes: list[tuple[Proposal, str]], budget_tokens: int = 900) -> str:
    """What became of the agent's candidates of its last round, as the loop told it
    (`observe`), each named by its history id: the verdict with the first failing check,
    the compiler's first lines or the per-shape ratios, and its own compile facts. The
    section's budget is shared so that a short outcome (a refusal) takes only what it
    needs and the long ones split the rest; each is cut at a line with a marker, so the
    last one is never squeezed out. The history digest keeps the older rounds."""
    entries = []
    for i, (prop, outcome) in enumerate(outcomes, start=1):
        name = f"#{prop.proposal_id}" if prop.proposal_id is not None else f"candidate {i}"
        what = clip(prop.direction or prop.hypothesis, 120) or "(no direction given)"
        head = f"{name} ({what})"
        if prop.predicted_effect:
            head += f"; you predicted: {clip(prop.predicted_effect, 160)}"
        entries.append((name, head, outcome))
    shares = _shares(
        [approx_tokens(h) + approx_tokens(o) + 2 for _, h, o in entries], budget_tokens
    )
    lines = []
    for (name, head, outcome), share in zip(entries, shares, strict=True):
        body = fit(outcome, max(share - approx_tokens(head) - 2, 40), f"{name}'s feedback")
        lines.append(f"{head}\n{body}")
    return "\n".join(lines)


def _shares(costs: list[int], budget: int) -> list[int]:
    """Each entry's token share of `budget`: the smallest first, each at most an equal
    split of what is left (so what a short entry does not need goes to the long ones)."""
    shares = [0] * len(costs)
    left, n = budget, len(costs)
    for i in sorted(range(len(costs)), key=lambda i: costs[i]):
        shares[i] = min(costs[i], left // n)
        left, n = left - shares[i], n - 1
    return shares


def to_proposal(c: ParsedCandidate, agent: str, model: str) -> Proposal:
    assert c.source is not None or c.problem
    return Proposal(
        source=c.source or "",
        hypothesis=c.hypothesis,
        predicted_effect=c.predicted_effect,
        direction=c.direction,
        agent=agent,
        model=model,
        parent=c.parent,
        refused=c.problem,
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
        feedback = feedback_text(self.outcomes[self._told :], SECTION_BUDGETS["feedback"])
        self._told = len(self.outcomes)
        values = {
            **self.asker.values(context, self.max_cost_usd, feedback),
            "n_candidates": self.n_candidates,
        }
        prompt = self.asker.prompts.render("propose", values)
        found = self.asker.ask(prompt, context, values, stage="propose", want=self.n_candidates)
        label = self.asker.label
        proposals = [to_proposal(c, self.name, label) for c in found[: self.n_candidates]]
        # Every other candidate of the answer is recorded and refused with its reason,
        # so the model hears what became of it (and the history keeps it).
        over = (
            f"not judged: the answer had more than the {self.n_candidates} candidate(s) asked for"
        )
        proposals += [
            to_proposal(replace(c, problem=over), self.name, label)
            for c in found[self.n_candidates :]
        ]
        proposals += [to_proposal(c, self.name, label) for c in self.asker.unusable]
        return proposals

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
