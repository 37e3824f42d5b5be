"""Typed rows the history hands out, and how each renders itself for a prompt."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from kernelloop.task import words
from kernelloop.task.textbudget import clip

# Rejections that say the *idea* did not pay off. A near-duplicate of one of these is
# refused; after a correctness or tooling failure the agent may retry a fixed variant.
IDEA_REJECTIONS = frozenset(
    {
        "slower",
        "policy",
        "trivial",
        "interface",
        "static",
        "no_kernel",
        "aliasing",
        "mutation",
        "timing",
    }
)


_clip = clip  # (task/textbudget.py: the one way text is cut for a person or a model)

# The one vocabulary of outcomes (task/words.py, docs/loop.md "Outcomes"): feedback, live
# view, history, summary, MCP and report all say these words.
PROMOTED = words.PROMOTED  # judged correct and faster by the gate's margin; the new best
NOT_PROMOTED = words.NOT_PROMOTED  # another candidate of its round gained more
NOT_TIMED = words.NOT_TIMED  # passed every check where timings do not count
REJECTED = words.REJECTED  # + " [category]": failed a check, or the gate's timing test
REFUSED = words.REFUSED  # before evaluation: a rule, or a duplicate
NOT_EVALUATED = words.NOT_EVALUATED  # infrastructure: not the candidate's fault
PENDING = words.PENDING  # proposed, no verdict yet
BASELINE = words.BASELINE  # round 0: the first best by definition
ACCEPTED = PROMOTED  # the gate's pass, as loop/round.py names it


def outcome_word(
    status: str, accepted: bool | None, category: str, measured: bool, promoted: bool
) -> str:
    """The outcome of one candidate in the shared vocabulary. `accepted`/`category`: the
    stored verdict (for a correct candidate never timed, the correctness record's);
    `measured`: whether it was timed (an objective); `promoted`: whether it became the best."""
    if status == "refused":
        return REFUSED
    if status == "infrastructure":
        return NOT_EVALUATED
    if accepted is None:
        return PENDING
    if accepted and not measured:
        return NOT_TIMED
    if accepted:
        return PROMOTED if promoted else NOT_PROMOTED
    return f"{REJECTED} [{category}]" if category else REJECTED


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def _num(x: float) -> str:
    if x == 0 or math.isnan(x):
        return "0" if x == 0 else "nan"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 1:
        return f"{x:.3g}"
    return f"{x:.2g}"


@dataclass(frozen=True)
class Attempt:
    """One proposal with what happened to it: the unit of the history digest and table."""

    id: int
    run_id: int
    round: int
    k: int
    parent_id: int | None
    agent: str
    model: str
    direction: str
    hypothesis: str
    predicted_effect: str
    attribution: str
    diff_summary: str
    edit_points: int | None
    status: str  # proposed | refused | evaluated | infrastructure
    refused_reason: str
    commit_sha: str
    branch: str
    source: str
    # Filled when evaluated. objective and per_shape are speedups over the baseline.
    accepted: bool | None = None
    category: str = ""
    reasons: tuple[str, ...] = ()
    objective: float | None = None
    per_shape: dict[str, float] = field(default_factory=dict)
    metric_deltas: dict[str, tuple[float, float]] = field(default_factory=dict)
    # The parent's measured values, so the effect can be shown as a change.
    parent_objective: float | None = None
    parent_per_shape: dict[str, float] = field(default_factory=dict)
    was_best: bool = False
    cost_usd: float = 0.0
    # Why no verdict could be had through no fault of the candidate (status infrastructure).
    infra_reason: str = ""
    # Whether its record's timings count (False: the CPU's Triton interpreter). The
    # baseline's objective is 1.0 by definition, timed or not: this says which.
    timings_count: bool = True

    @property
    def evaluated(self) -> bool:
        return self.accepted is not None

    @property
    def outcome(self) -> str:
        """This candidate's outcome in the shared vocabulary (`outcome_word`). The
        baseline (round 0) is the first best by definition: "baseline"."""
        if self.round == 0 and self.accepted:
            return BASELINE
        return outcome_word(self.status, self.accepted, self.category, self.measured, self.was_best)

    @property
    def measured(self) -> bool:
        """Timed where timings count: its objective is a measurement (the baseline's 1.0 is
        one only where its record's timings count)."""
        return self.objective is not None and (self.round > 0 or self.timings_count)

    verdict_label = outcome

    @property
    def title(self) -> str:
        """What the candidate tried, in one line: its Direction, else its hypothesis."""
        return self.direction.strip() or self.hypothesis.strip()

    @property
    def gain(self) -> float | None:
        """Objective relative to the parent (1.05 = 5% faster), when both were measured."""
        if self.objective and self.parent_objective:
            return self.objective / self.parent_objective
        return None

    def shape_changes(self) -> dict[str, float]:
        """Per-shape speedup relative to the parent where known, else over the baseline."""
        out = {}
        for shape, s in self.per_shape.items():
            p = self.parent_per_shape.get(shape)
            out[shape] = s / p if p else s
        return out

    def effect_text(self) -> str:
        if not self.measured:
            return "not timed"
        text = f"{self.objective:.3f}x over baseline"
        if self.gain is not None:
            text += f" ({_pct(self.gain)} vs #{self.parent_id})"
        return text

    def _shapes_text(self, limit: int) -> str:
        changes = self.shape_changes()
        if len(changes) > 1 and max(changes.values()) - min(changes.values()) < 0.005:
            return f"all {len(changes)} shapes {_pct(sum(changes.values()) / len(changes))}"
        # The shapes that moved most carry the information; a long-tail loss must show.
        top = sorted(changes.items(), key=lambda kv: -abs(math.log(kv[1])) if kv[1] > 0 else 0)
        return ", ".join(f"{s} {_pct(r)}" for s, r in top[:limit])

    def _metrics_text(self, limit: int) -> str:
        def size(item: tuple[str, tuple[float, float]]) -> float:
            before, after = item[1]
            return abs(after - before) / (abs(before) or 1.0)

        top = sorted(self.metric_deltas.items(), key=size, reverse=True)[:limit]
        return ", ".join(f"{name} {_num(b)}→{_num(a)}" for name, (b, a) in top)

    def headline(self) -> str:
        who = "/".join(x for x in (self.agent, self.model) if x)
        head = f"#{self.id} r{self.round} {self.verdict_label}"
        if self.status == "refused":
            return f"{head}: {_clip(self.refused_reason, 110)} — idea: {_clip(self.title, 70)}"
        if self.status == "infrastructure":
            return (
                f"{head} (an infrastructure failure, not the candidate's fault; may be sent "
                f"again): "
                f"{_clip(self.infra_reason, 90)} — idea: {_clip(self.title, 70)}"
            )
        if self.objective is not None or not self.accepted:
            head += f" {self.effect_text()}"
        return head + (f" by {who}" if who else "")

    def format_for_prompt(self, compact: bool = False) -> str:
        """What changed, the measured effect, the agent's attribution and the verdict."""
        if compact or self.status in ("refused", "infrastructure"):
            if self.status in ("refused", "infrastructure"):
                return self.headline()
            gain = f" {_pct(self.gain)}" if self.gain is not None else ""
            why = f" ({_clip(self.reasons[0], 110)})" if self.reasons and not self.accepted else ""
            # the changed constants if any, else the changed functions: the shortest "what"
            change = self.diff_summary.split("; ")[-1] if self.diff_summary else ""
            change = f" [{_clip(change, 40)}]" if change else ""
            return (
                f"#{self.id} r{self.round} {self.verdict_label}{gain}{why}{change}: "
                f"{_clip(self.title, 70)}"
            )
        lines = [self.headline()]
        if self.diff_summary:
            lines.append(f"  change: {_clip(self.diff_summary, 140)}")
        if self.direction.strip():
            lines.append(f"  direction: {_clip(self.direction, 120)}")
        lines.append(f"  idea: {_clip(self.hypothesis, 160)}")
        measured = self._shapes_text(3)
        pred = _clip(self.predicted_effect, 80) or "none given"
        lines.append(f"  predicted: {pred} | measured: {measured or self.effect_text()}")
        metrics = self._metrics_text(3)
        if self.attribution or metrics:
            attr = _clip(self.attribution, 100) or "none given"
            lines.append(f"  agent's attribution: {attr} | metric deltas: {metrics or 'none'}")
        if self.reasons:
            # Long enough for the first failing check with its worst element (index,
            # expected, got) or a compiler excerpt.
            lines.append(f"  verdict reasons: {_clip('; '.join(self.reasons), 320)}")
        return "\n".join(lines)


def history_row(a: Attempt) -> dict[str, object]:
    """One history row as `kernelloop history --json` prints it and the MCP server's
    `history`, `submit_candidate` and `variant` tools return it: one shape for both.
    objective_vs_baseline and per_shape_vs_baseline are speedups over the baseline;
    gain_vs_parent is the objective relative to the parent's (1.05 = 5% faster)."""
    return {
        "id": a.id,
        "run": a.run_id,
        "round": a.round,
        "k": a.k,
        "parent": a.parent_id,
        "agent": a.agent,
        "model": a.model,
        "direction": a.direction,
        "claim": a.hypothesis,
        "prediction": a.predicted_effect,
        "status": a.status,
        "verdict": a.outcome,  # the outcome word (docs/loop.md, "Outcomes")
        "timed": a.measured,  # its objective is a measurement where timings count
        "accepted": a.accepted,
        "category": a.category,
        "reasons": list(a.reasons),
        "refused_reason": a.refused_reason,
        "infra_reason": a.infra_reason,
        "objective_vs_baseline": a.objective,
        "gain_vs_parent": a.gain,
        "per_shape_vs_baseline": a.per_shape,
        "commit": a.commit_sha or None,
        "branch": a.branch or None,
        "cost_usd": a.cost_usd,
        "was_best": a.was_best,
    }


@dataclass(frozen=True)
class RunOwner:
    """The process running a run, as its row says: pid, host, and the last heartbeat
    (see `kernelloop.history.liveness` for how a live run is told from a crashed one)."""

    pid: int
    host: str
    heartbeat_at: str
    claimed_at: str | None = None  # when its stretch of the run began


@dataclass(frozen=True)
class RunState:
    """What a killed run needs to continue: `kernelloop run --resume` reads this."""

    run_id: int
    task: str
    task_digest: str
    agent: str
    device_name: str
    arch: str
    config_json: str
    completed_rounds: tuple[int, ...]
    next_round: int
    best_proposal_id: int | None
    best_source: str | None
    best_objective: float | None
    best_commit: str
    # Every proposal of this run with its outcome (evaluated or refused): not to be redone.
    attempts: tuple[Attempt, ...]
    # Proposals recorded but never evaluated: the evaluation in flight when the run died.
    in_flight: tuple[Attempt, ...]
    cost_usd: float
    # The process that holds the run (None once it let go, or for runs from before).
    owner: RunOwner | None = None

    @property
    def driver(self) -> str:
        """Who drove the run: "loop" (`kernelloop run`) or "mcp" (an external agent)."""
        try:
            config = json.loads(self.config_json or "{}")
        except ValueError:
            return "loop"
        return str(config.get("driver", "loop")) if isinstance(config, dict) else "loop"

    @property
    def evaluated_ids(self) -> tuple[int, ...]:
        return tuple(a.id for a in self.attempts if a.evaluated)


@dataclass(frozen=True)
class Approval:
    id: int
    task: str
    arch: str
    proposal_id: int | None
    approver: str
    note: str
    created_at: str


@dataclass(frozen=True)
class RunInfo:
    id: int
    task: str
    task_digest: str
    agent: str
    device_name: str
    arch: str
    status: str
    best_proposal_id: int | None
    started_at: str
    finished_at: str | None
    owner: RunOwner | None = None
