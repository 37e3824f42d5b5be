"""Cheap model screens, strong model finishes (seed §3.6).

The screen model lists directions with a difficulty and drafts candidates; entries that
are the same idea (same normalized source, or near-identical direction text) are merged,
the merged list is ranked, the 2-3 hardest directions go to the final model, and the
best remaining drafts are proposed as they are. With `n_candidates` (the loop's
`--candidates N`) a round gets at most N: the final model writes the hardest
min(n_final, N) directions and the screen's drafts fill the rest. The ledger prices
every call, so the run summary can set the cascade's spend against the strong model
doing the same calls.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from dataclasses import dataclass, field, replace

from kernelloop import pyast
from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.agents.llm.agent import Asker, feedback_text, to_proposal
from kernelloop.agents.llm.errors import ModelAnswerError
from kernelloop.agents.llm.ledger import CostLedger
from kernelloop.agents.llm.parse import ParsedCandidate
from kernelloop.agents.llm.prompts import PromptSet
from kernelloop.agents.llm.providers import Provider

_STOP = frozenset("the a an to of and for with in on by all its it this that".split())
DEFAULT_DIFFICULTY = 3  # a direction whose difficulty the screen did not state


def source_key(source: str) -> str:
    """Hash of the source with comments and layout normalized away."""
    try:
        text = ast.unparse(pyast.parse(source))
    except SyntaxError:
        text = " ".join(source.split())
    return hashlib.sha256(text.encode()).hexdigest()


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP]


def direction_similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, _words(a), _words(b), autojunk=False).ratio()


@dataclass
class Direction:
    """One idea after merging: the first wording, the first draft, how many proposed it."""

    candidate: ParsedCandidate
    support: int = 1
    order: int = 0
    merged: list[str] = field(default_factory=list)

    @property
    def difficulty(self) -> int:
        return self.candidate.difficulty or DEFAULT_DIFFICULTY


def merge_directions(found: list[ParsedCandidate], similarity: float = 0.7) -> list[Direction]:
    """De-duplicate and merge, then rank: most support first, then the screen's own order."""
    out: list[Direction] = []
    for i, c in enumerate(found):
        key = source_key(c.source) if c.source else None
        for d in out:
            same_code = (
                key is not None and d.candidate.source and source_key(d.candidate.source) == key
            )
            if same_code or direction_similarity(d.candidate.direction, c.direction) >= similarity:
                d.support += 1
                d.merged.append(c.direction)
                keep = d.candidate
                if keep.source is None and c.source is not None:
                    keep = ParsedCandidate(
                        keep.hypothesis, keep.predicted_effect, keep.direction,
                        keep.difficulty, c.source, c.from_diff, c.parent,
                    )  # fmt: skip
                if (c.difficulty or 0) > (keep.difficulty or 0):
                    keep = ParsedCandidate(
                        keep.hypothesis, keep.predicted_effect, keep.direction,
                        c.difficulty, keep.source, keep.from_diff, keep.parent,
                    )  # fmt: skip
                d.candidate = keep
                break
        else:
            out.append(Direction(c, order=i))
    return sorted(out, key=lambda d: (-d.support, d.order))


def split_hard(ranked: list[Direction], n_final: int) -> tuple[list[Direction], list[Direction]]:
    """The `n_final` hardest directions (ties: better ranked first), and the rest in rank order."""
    hard = sorted(ranked, key=lambda d: (-d.difficulty, ranked.index(d)))[:n_final]
    return hard, [d for d in ranked if d not in hard]


def _directions_text(hard: list[Direction]) -> str:
    parts = []
    for i, d in enumerate(hard, start=1):
        c = d.candidate
        lines = [f"### Direction {i}: {c.direction}", f"Difficulty: {d.difficulty}"]
        if d.support > 1:
            lines.append(f"(proposed {d.support} times in screening)")
        lines.append(f"Screening hypothesis: {c.hypothesis}")
        if c.source:
            lines += ["Draft:", "```python", c.source.rstrip("\n"), "```"]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


@dataclass(frozen=True)
class CascadeRound:
    """What the cascade did in one round, for the log and the run summary."""

    round_index: int
    screened: int
    merged: int
    final_directions: list[str]
    drafts_proposed: list[str]
    final_error: str = ""
    refused: int = 0  # candidates of the answers recorded as refused, each with its reason


class CascadeAgent:
    name = "llm-cascade"
    candidate_profiles = True  # the loop profiles each candidate for its feedback

    def __init__(
        self,
        screen: Provider,
        final: Provider,
        *,
        ledger: CostLedger,
        prompts: PromptSet,
        n_directions: int = 6,
        n_final: int = 3,
        n_drafts: int = 2,
        similarity: float = 0.7,
        max_cost_usd: float | None = None,
        n_candidates: int | None = None,
    ) -> None:
        self.screen = Asker(screen, ledger, prompts)
        self.final = Asker(final, ledger, prompts)
        self.ledger = ledger
        self.prompts = prompts
        self.n_directions = n_directions
        self.n_final = n_final
        self.n_drafts = n_drafts
        self.similarity = similarity
        self.max_cost_usd = max_cost_usd
        # At most this many proposals a round (None: the n_final finals and n_drafts drafts).
        self.n_candidates = n_candidates
        self.rounds: list[CascadeRound] = []
        self.outcomes: list[tuple[Proposal, str]] = []
        self._told = 0  # outcomes already shown in a prompt

    def propose(self, context: AgentContext) -> list[Proposal]:
        feedback = feedback_text(self.outcomes[self._told :])
        self._told = len(self.outcomes)
        values = {
            **self.screen.values(context, self.max_cost_usd, feedback),
            "n_directions": self.n_directions,
        }
        screened = self.screen.ask(
            self.prompts.render("screen", values), context, values,
            stage="screen", require_source=False,
        )  # fmt: skip
        ranked = merge_directions(screened, self.similarity)
        cap = self.n_candidates
        hard, rest = split_hard(ranked, self.n_final if cap is None else min(self.n_final, cap))
        n_drafts = self.n_drafts if cap is None else max(0, cap - len(hard))
        with_source = [d for d in rest if d.candidate.source]
        drafts = with_source[:n_drafts]
        proposals = [to_proposal(d.candidate, self.name, self.screen.label) for d in drafts]
        # Every other candidate of the two answers is recorded and refused with its reason,
        # so the model hears what became of it and the history keeps it (issue 47 item 1).
        refused = [(c, self.screen.label) for c in self.screen.unusable]
        refused += [
            (replace(d.candidate, problem=f"not judged: ranked below this round's {n_drafts} "
                     "draft(s) of the screen"), self.screen.label)
            for d in with_source[n_drafts:]
        ]  # fmt: skip
        final_error = ""
        if hard:
            values = {**values, "directions": _directions_text(hard)}
            try:
                finals = self.final.ask(
                    self.prompts.render("final", values), context, values, stage="final"
                )
            except ModelAnswerError as e:
                # The strong model's answer was unusable twice; the screen's drafts for the
                # hard directions are still real candidates, so the round is not lost.
                final_error = str(e)
                finals = [d.candidate for d in hard if d.candidate.source]
                if not finals and not proposals:
                    raise
                proposals += [to_proposal(c, self.name, self.screen.label) for c in finals]
            else:
                proposals = [
                    to_proposal(c, self.name, self.final.label) for c in finals[: len(hard)]
                ] + proposals
                over = (
                    f"not judged: the answer had more than the {len(hard)} candidate(s) asked for"
                )
                refused += [
                    (replace(c, problem=over), self.final.label) for c in finals[len(hard) :]
                ]
                refused += [(c, self.final.label) for c in self.final.unusable]
        late: list[Proposal] = []
        if cap is not None and len(proposals) > cap:
            past = f"not judged: past this round's {cap} candidate(s) (--candidates)"
            late = [replace(p, refused=past) for p in proposals[cap:]]
            proposals = proposals[:cap]
        self.rounds.append(
            CascadeRound(
                round_index=context.round_index,
                screened=len(screened),
                merged=len(ranked),
                final_directions=[d.candidate.direction for d in hard],
                drafts_proposed=[d.candidate.direction for d in drafts],
                final_error=final_error,
                refused=len(refused) + len(late),
            )
        )
        return proposals + late + [to_proposal(c, self.name, label) for c, label in refused]

    def observe(self, proposal: Proposal, outcome: str) -> None:
        self.outcomes.append((proposal, outcome))

    def cost_summary(self) -> dict[str, object]:
        return {
            **self.ledger.summary(),
            "cascade": self.ledger.cascade_summary(self.final.provider.model),
        }
