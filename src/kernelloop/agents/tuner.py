"""The built-in tuner: no model, deterministic, rule-driven moves on the task's tunables.

The seed's "pattern library" made explicit: a rule table (tuner_rules.toml) maps
profile symptoms to moves ("occupancy limited by registers -> fewer warps or a smaller
block"); when no rule fires, or its moves are used up, a neighbourhood search steps
each tunable one notch up and down. Each proposal rewrites one module-level literal of
the current best and leaves every other byte as it was, so it is one edit point.

It never proposes a source it has proposed or seen as a best before, prefers to keep
going in a direction that was just accepted, tries directions that failed last, and
returns [] when every neighbour of the current best has been tried. The same contexts
and outcomes always give the same proposals, so it doubles as a test double.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.agents.tuner_table import (
    DEFAULT_TABLE,
    Role,
    Rule,
    RuleTable,
    TunerRulesError,
    load_table,
    render,
)

if TYPE_CHECKING:
    from kernelloop.task.load import Task

Step = Literal["up", "down"]
NEIGHBOURHOOD = "neighbourhood search"


@dataclass(frozen=True)
class TunableLiteral:
    """Where a tunable's integer literal sits in the source (character offsets)."""

    name: str
    value: int
    start: int
    end: int


@dataclass(frozen=True)
class Move:
    tunable: str
    old: int
    new: int
    step: Step
    rule: Rule | None  # None: neighbourhood search


def find_tunables(source: str, names: list[str] | tuple[str, ...]) -> dict[str, TunableLiteral]:
    """Module-level `NAME = <int>` (or `NAME: int = <int>`) for each requested name.

    A name assigned more than once takes its last assignment, as Python does; names
    without an integer literal are left out (the tuner cannot move them).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    line_starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", source)]
    found: dict[str, TunableLiteral] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id in names):
            continue
        if not (isinstance(value, ast.Constant) and type(value.value) is int):
            found.pop(target.id, None)
            continue
        assert value.end_lineno is not None and value.end_col_offset is not None
        start = _offset(source, line_starts, value.lineno, value.col_offset)
        end = _offset(source, line_starts, value.end_lineno, value.end_col_offset)
        found[target.id] = TunableLiteral(target.id, value.value, start, end)
    return {n: found[n] for n in names if n in found}  # the task's order, not the file's


def _offset(source: str, line_starts: list[int], lineno: int, col_bytes: int) -> int:
    # ast columns count UTF-8 bytes; a non-ASCII comment earlier on the line would
    # otherwise shift the edit.
    start = line_starts[lineno - 1]
    line = source[start : line_starts[lineno] if lineno < len(line_starts) else len(source)]
    return start + len(line.encode()[:col_bytes].decode())


def rewrite(source: str, lit: TunableLiteral, new: int) -> str:
    return source[: lit.start] + str(new) + source[lit.end :]


class TunerAgent:
    name = "tuner"

    def __init__(self, task: Task, per_round: int = 1, rule_table: Path | None = None) -> None:
        if per_round < 1:
            raise TunerRulesError(
                f"per_round is {per_round}; the tuner proposes at least 1 candidate per round."
            )
        self.tunables: tuple[str, ...] = tuple(task.spec.task.tunables)
        self.per_round = per_round
        override = task.folder / "tuner_rules.toml"
        self.table_path = rule_table or (override if override.is_file() else DEFAULT_TABLE)
        self.table: RuleTable = load_table(self.table_path)
        self._seen: set[str] = set()  # digests of every source proposed or seen as a best
        self._moves: dict[str, Move] = {}  # proposal digest -> the move that made it
        self._failed: dict[tuple[str, Step], int] = {}
        self._momentum: tuple[str, Step] | None = None
        self._reverse: tuple[str, Step] | None = None  # the opposite of a move just measured slower
        self.outcomes: list[tuple[Proposal, str]] = []

    def propose(self, context: AgentContext) -> list[Proposal]:
        base = context.best_source
        self._seen.add(_digest(base))
        names = self.tunables or context.tunables
        literals = find_tunables(base, names)
        proposals: list[Proposal] = []
        for move in self._candidate_moves(literals, context.profile_metrics):
            source = rewrite(base, literals[move.tunable], move.new)
            key = _digest(source)
            if key in self._seen:
                continue
            self._seen.add(key)
            self._moves[key] = move
            proposals.append(self._proposal(move, source, context.profile_metrics))
            if len(proposals) == self.per_round:
                break
        return proposals

    def observe(self, proposal: Proposal, outcome: str) -> None:
        """`outcome` starting with "accepted" is a success; anything else a failure."""
        self.outcomes.append((proposal, outcome))
        move = self._moves.get(_digest(proposal.source))
        if move is None:
            return
        direction = (move.tunable, move.step)
        self._reverse = None
        text = outcome.strip().lower()
        if text.startswith("accepted"):
            self._momentum = direction
            self._failed.pop(direction, None)
        else:
            self._failed[direction] = self._failed.get(direction, 0) + 1
            if self._momentum == direction:
                self._momentum = None
            # Measured slower (not wrong, not refused): a launch parameter's time is
            # usually unimodal in it, so the other way from the same value comes next.
            if text.startswith("rejected") and ("slower" in text or re.search(r"speedup \d", text)):
                self._reverse = (move.tunable, "up" if move.step == "down" else "down")

    def _candidate_moves(
        self, literals: dict[str, TunableLiteral], metrics: dict[str, float | str]
    ) -> list[Move]:
        moves: list[Move] = []
        if self._momentum and self._momentum[0] in literals:
            moves += self._moves_for(literals, [self._momentum], None)
        if self._reverse and self._reverse[0] in literals:
            moves += self._moves_for(literals, [self._reverse], None)
        for rule in self.table.rules:
            if rule.fires(metrics):
                for m in rule.moves:
                    targets = [t for t in literals if (r := self._role(t)) and r.name == m.role]
                    moves += self._moves_for(literals, [(t, m.step) for t in targets], rule)
        steps: list[Step] = ["up", "down"]
        moves += self._moves_for(literals, [(t, s) for t in literals for s in steps], None)
        # Directions that failed before go last; sorted() is stable, so order is kept otherwise.
        return sorted(moves, key=lambda mv: self._failed.get((mv.tunable, mv.step), 0))

    def _moves_for(
        self,
        literals: dict[str, TunableLiteral],
        directions: list[tuple[str, Step]],
        rule: Rule | None,
    ) -> list[Move]:
        out = []
        for tunable, step in directions:
            role = self._role(tunable)
            old = literals[tunable].value
            new = role.step(old, step) if role else None
            if new is not None and new != old:
                out.append(Move(tunable, old, new, step, rule))
        return out

    def _role(self, tunable: str) -> Role | None:
        return self.table.role_of(tunable)

    def _proposal(self, move: Move, source: str, metrics: dict[str, float | str]) -> Proposal:
        fields = {
            **{k: _fmt(v) for k, v in metrics.items()},
            "tunable": move.tunable,
            "old": move.old,
            "new": move.new,
        }
        if move.rule is not None:
            hypothesis = render(move.rule.hypothesis, fields)
            predicted = render(move.rule.predicted_effect, fields)
            direction = f"{move.rule.name}: {move.tunable} {move.step}"
        else:
            if self._momentum == (move.tunable, move.step):
                why = "it was just accepted, so the tuner keeps going that way"
            elif self._reverse == (move.tunable, move.step):
                why = (
                    f"the opposite move from {move.old} was just measured slower, "
                    "so this side may be faster"
                )
            else:
                why = "no profile rule calls for another move" + (
                    "" if metrics else " (no profile metrics available)"
                )
            hypothesis = (
                f"Neighbourhood probe: {move.tunable} {move.old} -> {move.new}; {why}. The best "
                "value of a launch parameter depends on the shape mix, so a neighbour may be "
                "faster."
            )
            predicted = "unknown sign; within a few % of the current best"
            direction = f"{NEIGHBOURHOOD}: {move.tunable} {move.step}"
        return Proposal(
            source=source,
            hypothesis=hypothesis,
            predicted_effect=predicted,
            direction=direction,
            agent=self.name,
        )


def _fmt(v: float | str) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()
