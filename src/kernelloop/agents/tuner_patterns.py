"""The tuner's pattern library (tuner_patterns.toml): structural rewrites of the spots a
task marks in its kernel source with `# kernelloop: spot NAME key=value ...`."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelloop.agents.tuner_table import TunerRulesError, render

DEFAULT_PATTERNS = Path(__file__).with_name("tuner_patterns.toml")
_MARKER = re.compile(
    r"^[ \t]*#[ \t]*kernelloop:[ \t]*spot[ \t]+([\w-]+)((?:[ \t]+\w+=\S+)*)[ \t]*$"
)


class Pattern(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    spots: list[str] = Field(min_length=1)
    needs: list[str] = Field(default_factory=list)
    find: str
    replace: str
    hypothesis: str
    predicted_effect: str

    @field_validator("find")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a regular expression ({e})") from None
        return v


class PatternLibrary(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    patterns: list[Pattern] = Field(default_factory=list)


@dataclass(frozen=True)
class Spot:
    """A marked statement: its name, the marker's key=value pairs, and where the statement
    line sits in the source (character offsets, line ending excluded)."""

    name: str
    params: dict[str, str]
    start: int
    end: int


@dataclass(frozen=True)
class Rewrite:
    pattern: Pattern
    spot: Spot
    source: str  # the whole new source
    fields: dict[str, str]


def load_patterns(path: Path) -> PatternLibrary:
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise TunerRulesError(
            f"{path}: not valid TOML ({e}); fix the syntax at that line."
        ) from None
    try:
        return PatternLibrary.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise TunerRulesError(f"{path}: field '{where}': {err['msg']}; fix that entry.") from None


def find_spots(source: str) -> list[Spot]:
    """Every marked spot, in file order: the statement on the line after each marker."""
    lines = source.splitlines(keepends=True)
    spots, offset = [], 0
    for i, line in enumerate(lines):
        m = _MARKER.match(line.rstrip("\r\n"))
        if m and i + 1 < len(lines):
            start = offset + len(line)
            body = lines[i + 1].rstrip("\r\n")
            params = dict(kv.split("=", 1) for kv in m.group(2).split())
            spots.append(Spot(m.group(1), params, start, start + len(body)))
        offset += len(line)
    return spots


def rewrites(source: str, library: PatternLibrary) -> list[Rewrite]:
    """Each pattern applied to each marked spot it names and matches, in library order then
    file order; one rewrite per (pattern, spot), the rest of the file byte for byte."""
    out = []
    spots = find_spots(source)
    for pattern in library.patterns:
        for spot in spots:
            if spot.name not in pattern.spots or any(n not in spot.params for n in pattern.needs):
                continue
            m = re.match(pattern.find, source[spot.start : spot.end])
            if m is None:
                continue
            fields = {**spot.params, **{k: v or "" for k, v in m.groupdict().items()}}
            new = render(pattern.replace, fields)
            if source[spot.end : spot.end + 2] == "\r\n":  # keep the file's line endings
                new = new.replace("\r\n", "\n").replace("\n", "\r\n")
            out.append(
                Rewrite(pattern, spot, source[: spot.start] + new + source[spot.end :], fields)
            )
    return out
