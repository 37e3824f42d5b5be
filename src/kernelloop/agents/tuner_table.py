"""The tuner's rule table (tuner_rules.toml): roles, symptoms and moves, validated on load."""

from __future__ import annotations

import fnmatch
import operator
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelloop.errors import KernelloopError

DEFAULT_TABLE = Path(__file__).with_name("tuner_rules.toml")

_CONDITION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(==|!=|<=|>=|<|>|contains)\s*(.+?)\s*$")
_NUMERIC_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class TunerRulesError(KernelloopError):
    """The tuner's rule table is invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Role(_Strict):
    name: str
    match: list[str] = Field(min_length=1)
    min: int = Field(ge=1)
    max: int = Field(ge=1)
    scale: Literal["pow2", "linear"] = "pow2"

    def matches(self, tunable: str) -> bool:
        return any(fnmatch.fnmatchcase(tunable.upper(), pat.upper()) for pat in self.match)

    def step(self, value: int, direction: Literal["up", "down"]) -> int | None:
        """The neighbouring value in `direction`, or None when it would leave [min, max]."""
        if self.scale == "linear":
            new = value + 1 if direction == "up" else value - 1
        elif direction == "up":
            new = 1 << value.bit_length()  # next power of two above value
        else:
            new = (
                1 << ((value - 1).bit_length() - 1) if value > 1 else 0
            )  # largest power of two below
        return new if self.min <= new <= self.max else None


class Move(_Strict):
    role: str
    step: Literal["up", "down"]


class Rule(_Strict):
    name: str
    when: list[str] = Field(min_length=1)
    moves: list[Move] = Field(min_length=1)
    hypothesis: str
    predicted_effect: str

    @field_validator("when")
    @classmethod
    def _conditions_parse(cls, v: list[str]) -> list[str]:
        for cond in v:
            if not _CONDITION.match(cond):
                raise ValueError(
                    f"condition {cond!r} is not 'METRIC OP VALUE' (OP: == != < <= > >= contains)"
                )
        return v

    @field_validator("hypothesis", "predicted_effect")
    @classmethod
    def _template_formats(cls, v: str) -> str:
        try:
            v.format_map(Missing())
        except (ValueError, IndexError, KeyError, AttributeError) as e:
            raise ValueError(
                f"template {v!r} does not format ({e}); use {{metric_name}} fields only"
            ) from None
        return v

    def fires(self, metrics: dict[str, float | str]) -> bool:
        return all(_holds(cond, metrics) for cond in self.when)


class RuleTable(_Strict):
    roles: list[Role] = Field(min_length=1)
    rules: list[Rule] = Field(default_factory=list)

    def role_of(self, tunable: str) -> Role | None:
        return next((r for r in self.roles if r.matches(tunable)), None)


NOT_MEASURED = "not measured"


class Missing(dict):
    """format_map helper: a metric the profile lacks renders as 'not measured' instead of
    raising (normal on a machine without a GPU profiler)."""

    def __missing__(self, key: str) -> str:
        return NOT_MEASURED


def render(template: str, fields: dict) -> str:
    """A rule's text with the metrics filled in; a missing percentage reads 'not measured',
    not 'not measured%'."""
    return template.format_map(Missing(fields)).replace(NOT_MEASURED + "%", NOT_MEASURED)


def load_table(path: Path) -> RuleTable:
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TunerRulesError(
            f"{path}: not valid TOML ({e}); fix the syntax at that line."
        ) from None
    try:
        table = RuleTable.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise TunerRulesError(f"{path}: field '{where}': {err['msg']}; fix that entry.") from None
    known = {r.name for r in table.roles}
    for i, rule in enumerate(table.rules):
        for move in rule.moves:
            if move.role not in known:
                raise TunerRulesError(
                    f"{path}: rules[{i}] ({rule.name!r}) moves role {move.role!r}, which no "
                    f"[[roles]] entry defines; use one of {sorted(known)}."
                )
    return table


def _holds(condition: str, metrics: dict[str, float | str]) -> bool:
    m = _CONDITION.match(condition)
    assert m is not None  # validated on load
    name, op, raw = m.groups()
    if name not in metrics:
        return False
    actual, wanted = metrics[name], _literal(raw)
    if op == "contains":
        return str(wanted).lower() in str(actual).lower()
    if op in ("==", "!="):
        same = (
            _as_float(actual) == _as_float(wanted)
            if _as_float(actual) is not None and _as_float(wanted) is not None
            else str(actual).lower() == str(wanted).lower()
        )
        return same if op == "==" else not same
    a, w = _as_float(actual), _as_float(wanted)
    return a is not None and w is not None and _NUMERIC_OPS[op](a, w)


def _literal(raw: str) -> float | str:
    raw = raw.strip().strip("'\"")
    return _as_float(raw) if _as_float(raw) is not None else raw  # type: ignore[return-value]


def _as_float(v: float | str) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def binding(metrics: dict[str, float | str]) -> dict[str, float | str]:
    """The metrics as the rules read them: the profiler names an occupancy "limiter" even
    where nothing limits (theoretical occupancy 100%); such a limiter is dropped, as the
    profile's own summary drops it (profile/render.py), so no rule claims "occupancy is
    limited by registers" against a profile that says 100% (issue 47)."""
    theoretical = metrics.get("theoretical_occupancy_pct")
    if isinstance(theoretical, int | float) and theoretical >= 99.5:
        return {k: v for k, v in metrics.items() if k != "occupancy_limiter"}
    return metrics
