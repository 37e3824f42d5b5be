"""The built-in tuner: no model, deterministic; it searches the task's tunables and
applies structural rewrites where the task marks the spots.

Each round it proposes, best first, up to `per_round` candidates (the loop judges them
all in the round and promotes the best that gained):
1. structural moves from the pattern library (tuner_patterns.toml) at the spots the
   kernel marks with `# kernelloop: spot NAME` ("one Philox call for several elements");
2. single-literal moves: the rule table (tuner_rules.toml) maps profile symptoms to moves
   ("occupancy limited by registers -> fewer warps or a smaller block"), a direction just
   gained is continued, the opposite of one measured slower comes next, and a
   neighbourhood search steps each tunable one notch up and down;
3. the sweep (tuner_sweep.py): the cartesian product of the tunables within two notches,
   pruned by the rule table, the edit-point limit and compile facts (spills, registers,
   shared memory), in a fixed order;
4. where several kernels share a launch parameter (tuner_kernels.py: the flagship's three
   kernels share NUM_WARPS), the same moves and the same sweep over each kernel's own
   copy of it: a joint sweep over every kernel's launch parameters.
Every edit rewrites module-level literals (or one marked statement) and leaves every
other byte as it was.

It never proposes a source it has proposed or seen as a best before, nor one the task's
history already judged (`known`: the loop's own duplicate check, set by `kernelloop run`,
so a second run of the same job spends no round on a refusal), tries directions that
failed last, and returns [] when the library, the neighbours and the sweep of the current
best are used up. Its neighbourhood probes start at a tunable chosen by `seed` (the run's
number), so two runs try different neighbours first; the same seed, contexts and outcomes
always give the same proposals, so it doubles as a test double. Its claims come from the
profile it read: an occupancy "limiter" is cited only where occupancy is below 100%.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.agents.tuner_kernels import Split, per_kernel_names, split_shared
from kernelloop.agents.tuner_literals import TunableLiteral, find_tunables, rewrite
from kernelloop.agents.tuner_patterns import DEFAULT_PATTERNS, Rewrite, load_patterns, rewrites
from kernelloop.agents.tuner_sweep import Change, Config, sweep
from kernelloop.agents.tuner_table import (
    DEFAULT_TABLE,
    Role,
    Rule,
    RuleTable,
    TunerRulesError,
    binding,
    load_table,
    render,
)
from kernelloop.task import words

if TYPE_CHECKING:
    from kernelloop.task.load import Task

Step = Literal["up", "down"]
NEIGHBOURHOOD = "neighbourhood search"


@dataclass(frozen=True)
class Move:
    tunable: str
    old: int
    new: int
    step: Step
    rule: Rule | None  # None: neighbourhood search


class TunerAgent:
    name = "tuner"

    def __init__(
        self,
        task: Task,
        per_round: int = 1,
        rule_table: Path | None = None,
        patterns: Path | None = None,
        radius: int = 2,
    ) -> None:
        if per_round < 1:
            raise TunerRulesError(
                f"per_round is {per_round}; the tuner proposes at least 1 candidate per round."
            )
        self.tunables: tuple[str, ...] = tuple(task.spec.task.tunables)
        self.per_round = per_round
        override = task.folder / "tuner_rules.toml"
        self.table_path = rule_table or (override if override.is_file() else DEFAULT_TABLE)
        self.table: RuleTable = load_table(self.table_path)
        own = task.folder / "tuner_patterns.toml"
        self.patterns_path = patterns or (own if own.is_file() else DEFAULT_PATTERNS)
        self.library = load_patterns(self.patterns_path)
        self.radius = radius
        # Each changed literal is one edit point: a config changes at most this many.
        self.max_changed = max(1, min(2, task.spec.rules.max_edit_points))
        self._seen: set[str] = set()  # digests of every source proposed or seen as a best
        self._moves: dict[str, Move] = {}  # proposal digest -> the move that made it
        self._failed: dict[tuple[str, Step], int] = {}
        self._momentum: tuple[str, Step] | None = None
        self._reverse: tuple[str, Step] | None = None  # the opposite of a move just measured slower
        self.outcomes: list[tuple[Proposal, str]] = []
        # (source, hypothesis, parent id) -> why the history refuses it, or None
        self.known: Callable[[str, str, str], str | None] | None = None
        self.seed = 0
        self.skipped: list[str] = []  # why each source the history knew was not proposed

    def avoid(self, known: Callable[[str, str, str], str | None], seed: int) -> None:
        """Read the task's history before proposing: `known` says why the loop would
        refuse a source (a duplicate of one judged before); `seed` (the run's number)
        varies the order of the neighbourhood probes from run to run."""
        self.known, self.seed = known, seed

    def propose(self, context: AgentContext) -> list[Proposal]:
        base = context.best_source
        self._seen.add(_digest(base))
        names = per_kernel_names(base, self.tunables or context.tunables)
        literals = find_tunables(base, names)
        metrics = binding(context.profile_metrics)
        split = split_shared(
            base,
            {t: lit.value for t, lit in literals.items()},
            {t: lit.end for t, lit in literals.items()},
        )
        ranked = self._ranked(base, literals, metrics)
        if split is not None:
            # Where kernels share launch parameters, their own copies move first (after
            # the structural moves): a shared literal moves every kernel at once.
            ranked = itertools.chain(
                self._ranked(base, {}, metrics),
                self._split_ranked(split, metrics),
                self._ranked(base, literals, metrics, structural=False),
            )
        proposals: list[Proposal] = []
        for source, make in ranked:
            key = _digest(source)
            if key in self._seen:
                continue
            self._seen.add(key)
            proposal = make(key)
            if self.known is not None and (
                why := self.known(source, proposal.hypothesis, context.best_id)
            ):
                self.skipped.append(why)  # judged before, in this run or an earlier one
                continue
            proposals.append(proposal)
            if len(proposals) == self.per_round:
                break
        return proposals

    def _split_ranked(
        self, split: Split, metrics: dict[str, float | str]
    ) -> Iterator[tuple[str, Callable[[str], Proposal]]]:
        """The moves and sweep over every kernel's own launch parameters: each source is the
        split (per-kernel copies of the shared ones) plus a change of at least one copy.
        The split alone (no value changed) is never proposed."""
        literals = find_tunables(split.source, split.tunables)
        copies = {n for names in split.copies.values() for n in names}
        for source, make in self._ranked(split.source, literals, metrics, structural=False):
            if source == split.source:
                continue

            def with_split(key: str, make=make) -> Proposal:
                p = make(key)
                return dataclasses.replace(
                    p,
                    hypothesis=f"{p.hypothesis} Each kernel gets its own copy of the launch "
                    f"parameters it shared ({split.describe()}), so one kernel's launch moves "
                    "without the others'.",
                    direction=f"per-kernel {p.direction}",
                )

            # Only what moves a copy needs the split; the rest the unsplit base proposes.
            changed = [
                n
                for n, lit in literals.items()
                if n in copies and _literal(source, lit) != lit.value
            ]
            if changed:
                yield source, with_split

    def _ranked(
        self,
        base: str,
        literals: dict[str, TunableLiteral],
        metrics: dict[str, float | str],
        structural: bool = True,
    ) -> Iterator[tuple[str, Callable[[str], Proposal]]]:
        """(source, maker of its proposal) in the tuner's order: structural moves, single
        moves, then the sweep; lazily, so a round stops computing once it has enough."""
        for rw in rewrites(base, self.library) if structural else ():
            yield rw.source, lambda _key, rw=rw: self._structural(rw)
        current = {t: lit.value for t, lit in literals.items()}
        configs, pruned = sweep(
            current, self.table, metrics, radius=self.radius, max_changed=self.max_changed
        )
        allowed = {c.changes for c in configs}
        for move in self._candidate_moves(literals, metrics):
            one = (Change(move.tunable, move.old, move.new, 1),)
            if one not in allowed:  # pruned by a rule or a compile fact
                continue
            source = rewrite(base, literals[move.tunable], move.new)

            def make(key: str, move: Move = move, source: str = source) -> Proposal:
                self._moves[key] = move
                return self._proposal(move, source, metrics)

            yield source, make
        n = len(configs)
        for i, config in enumerate(configs, start=1):
            source = base
            for c in sorted(config.changes, key=lambda c: -literals[c.tunable].start):
                source = rewrite(source, literals[c.tunable], c.new)
            yield source, lambda _k, c=config, i=i, s=source: self._swept(c, i, n, pruned, s)

    def observe(self, proposal: Proposal, outcome: str) -> None:
        """An outcome that gained (task/words.py: promoted, or judged correct and faster but
        not promoted) is a success; anything else a failure."""
        self.outcomes.append((proposal, outcome))
        move = self._moves.get(_digest(proposal.source))
        if move is None:
            return
        direction = (move.tunable, move.step)
        self._reverse = None
        text = outcome.strip().lower()
        if words.gained(text):
            self._momentum = direction
            self._failed.pop(direction, None)
        else:
            self._failed[direction] = self._failed.get(direction, 0) + 1
            if self._momentum == direction:
                self._momentum = None
            # Measured slower (not wrong, not refused): a launch parameter's time is
            # usually unimodal in it, so the other way from the same value comes next.
            if text.startswith(words.REJECTED) and (
                "slower" in text or re.search(r"speedup \d", text)
            ):
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
        probes = [(t, s) for t in literals for s in steps]
        if probes:  # the run's seed picks where the probes start (rotated, none dropped)
            cut = self.seed % len(probes)
            probes = probes[cut:] + probes[:cut]
        moves += self._moves_for(literals, probes, None)
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
                why = "it just gained (promoted), so the tuner keeps going that way"
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

    def _structural(self, rw: Rewrite) -> Proposal:
        return Proposal(
            source=rw.source,
            hypothesis=render(rw.pattern.hypothesis, rw.fields),
            predicted_effect=render(rw.pattern.predicted_effect, rw.fields),
            direction=f"pattern: {rw.pattern.name} (spot {rw.spot.name})",
            agent=self.name,
        )

    def _swept(
        self, config: Config, i: int, n: int, pruned: dict[str, int], source: str
    ) -> Proposal:
        cut = "; ".join(f"{k} {why}" for why, k in sorted(pruned.items())) or "none"
        return Proposal(
            source=source,
            hypothesis=(
                f"Sweep config {i} of {n} around the best: {config.describe()}. Launch "
                "parameters interact (warps with rows and block), so a joint change can "
                f"win where single steps did not. Pruned before proposing: {cut}."
            ),
            predicted_effect="unknown sign; its timing against the best decides",
            direction="sweep: " + ", ".join(f"{c.tunable} {c.step}" for c in config.changes),
            agent=self.name,
        )


def _literal(source: str, lit: TunableLiteral) -> int | None:
    """The value now at `lit`'s place in `source` (rewrites keep earlier offsets only when
    lengths match, so it is read back by name)."""
    found = find_tunables(source, [lit.name])
    return found[lit.name].value if lit.name in found else None


def _fmt(v: float | str) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()
