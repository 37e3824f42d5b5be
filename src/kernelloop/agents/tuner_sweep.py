"""The tuner's sweep: the cartesian product of each tunable's values within a few notches
of the best's, pruned by the rule table and by compile facts, in a fixed order.

Pruned, with the reason kept for the hypothesis:
- a config that moves a role against a rule that fires (register-limited occupancy wants
  fewer warps: no config with more);
- a config that changes more tunables than the task's `max_edit_points` allows (each
  changed literal is one edit point);
- compile facts: spills (more rows/block or fewer warps give each thread more live data);
  registers (a block of W warps at R registers/thread needs 32*W*R of the SM's 64K);
  shared memory (per-block bytes scaled by the change in stages and block must stay
  within the SM's limit, 227 KiB on sm_90: the largest a block may ask for).
Order: fewest changed tunables first, then fewest notches, then the rule table's
direction first, then the task's tunable order and the values. The same best, metrics
and table always give the same list.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

from kernelloop.agents.tuner_table import Role, RuleTable

Step = Literal["up", "down"]
REGISTERS_PER_SM = 65536
MAX_SHARED_BYTES = 232448  # 227 KiB, the most one block may ask for on sm_90


@dataclass(frozen=True)
class Change:
    tunable: str
    old: int
    new: int
    notches: int  # how many steps of the role's scale from old to new

    @property
    def step(self) -> Step:
        return "up" if self.new > self.old else "down"


@dataclass(frozen=True)
class Config:
    changes: tuple[Change, ...]  # in the task's tunable order

    @property
    def notches(self) -> int:
        return sum(c.notches for c in self.changes)

    def describe(self) -> str:
        return ", ".join(f"{c.tunable} {c.old} -> {c.new}" for c in self.changes)


def values_near(role: Role, value: int, radius: int) -> list[tuple[int, int]]:
    """(value, notches) within `radius` steps of `value` on the role's scale, the value
    itself first (0 notches)."""
    out = [(value, 0)]
    for step in ("up", "down"):
        v = value
        for n in range(1, radius + 1):
            nxt = role.step(v, step)  # type: ignore[arg-type]
            if nxt is None or nxt == v:
                break
            out.append((nxt, n))
            v = nxt
    return out


def fired_directions(table: RuleTable, metrics: dict[str, float | str]) -> dict[str, Step]:
    """Role -> the step the first firing rule that moves it asks for."""
    out: dict[str, Step] = {}
    for rule in table.rules:
        if rule.fires(metrics):
            for m in rule.moves:
                out.setdefault(m.role, m.step)
    return out


def sweep(
    current: dict[str, int],
    table: RuleTable,
    metrics: dict[str, float | str],
    *,
    radius: int = 2,
    max_changed: int = 2,
) -> tuple[list[Config], dict[str, int]]:
    """The pruned, ordered sweep around `current` (tunable -> value, in the task's order),
    and how many configs each prune removed."""
    roles = {t: table.role_of(t) for t in current}
    grids = [values_near(r, v, radius) if (r := roles[t]) else [(v, 0)] for t, v in current.items()]
    wanted = fired_directions(table, metrics)
    pruned: dict[str, int] = {}
    kept: list[tuple[tuple, Config]] = []
    names = list(current)
    for changes in _changed(names, current, grids, max_changed + 1):
        config = Config(changes)
        why = _pruned(config, roles, wanted, metrics, max_changed)
        if why:
            pruned[why] = pruned.get(why, 0) + 1
            continue
        unguided = sum(1 for c in changes if not ((r := roles[c.tunable]) and r.name in wanted))
        order = tuple((names.index(c.tunable), c.new) for c in changes)
        kept.append(((len(changes), config.notches, unguided, order), config))
    return [c for _, c in sorted(kept, key=lambda kc: kc[0])], pruned


def _changed(
    names: list[str], current: dict[str, int], grids: list[list[tuple[int, int]]], most: int
) -> list[tuple[Change, ...]]:
    """Every combination of changes to at most `most` tunables (the cartesian product
    without its all-unchanged point, limited by how many change: a multi-kernel split has
    six or more tunables, and 5^6 points of which only pairs are kept was the slow way);
    one more than the edit-point limit allows, so the prune still counts those it drops."""
    out = []
    for k in range(1, min(most, len(names)) + 1):
        for picked in itertools.combinations(range(len(names)), k):
            moved = [[(v, n) for v, n in grids[i] if n] for i in picked]
            for combo in itertools.product(*moved):
                out.append(
                    tuple(
                        Change(names[i], current[names[i]], v, n)
                        for i, (v, n) in zip(picked, combo, strict=True)
                    )
                )
    return out


def _pruned(
    config: Config,
    roles: dict[str, Role | None],
    wanted: dict[str, Step],
    metrics: dict[str, float | str],
    max_changed: int,
) -> str:
    if len(config.changes) > max_changed:
        return f"more than {max_changed} tunables changed (the task's edit-point limit)"
    for c in config.changes:
        role = roles[c.tunable]
        name = role.name if role else ""
        if name in wanted and wanted[name] != c.step:
            return "against a rule the profile fires"
        if _num(metrics.get("spills")) and (
            (name in ("rows", "block") and c.step == "up") or (name == "warps" and c.step == "down")
        ):
            return "more live data per thread while the kernel spills"
        regs = _num(metrics.get("registers_per_thread"))
        if name == "warps" and c.step == "up" and regs and 32 * c.new * regs > REGISTERS_PER_SM:
            return "the block would not fit the SM's registers at the measured count"
    shared = _num(metrics.get("shared_bytes"))
    if shared:
        scale = 1.0
        for c in config.changes:
            role = roles[c.tunable]
            if role and role.name in ("stages", "block") and c.old > 0:
                scale *= c.new / c.old
        if shared * scale > MAX_SHARED_BYTES:
            return "the block would need more shared memory than an SM has"
    return ""


def _num(v: float | str | None) -> float:
    if isinstance(v, bool) or v is None:
        return 0.0
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0
