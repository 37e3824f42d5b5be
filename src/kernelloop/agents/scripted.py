"""The scripted agent: replays a folder of candidate files, in name order (tests, demos).

Each candidate `DIR/NN_name.py` carries its claim either in a sidecar `DIR/NN_name.toml`

    hypothesis = "One launch instead of three: intermediates stay in registers."
    predicted_effect = "~3x less DRAM traffic; time toward the roofline floor"
    direction = "fusion"          # optional
    attribution = ""              # optional

or, without a sidecar, in a header of its module docstring:

    \"\"\"Hypothesis: One launch instead of three ...
    Predicted effect: ~3x less DRAM traffic
    Direction: fusion
    \"\"\"

A header line runs on until the next "Key:" line or a blank line. A candidate without a
hypothesis is an error at construction, not a silent empty claim.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelloop import pyast
from kernelloop.agents.base import AgentContext, Proposal
from kernelloop.errors import KernelloopError

_HEADER = re.compile(
    r"^\s*(hypothesis|predicted[ _]effect|direction|attribution)\s*:\s*(.*)$", re.I
)


class ScriptError(KernelloopError):
    """A scripted candidate folder is unusable."""


class _Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hypothesis: str
    predicted_effect: str = ""
    direction: str = ""
    attribution: str = ""


class ScriptedAgent:
    name = "scripted"

    def __init__(self, folder: str | Path, per_round: int = 1) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ScriptError(
                f"{self.folder}: no such folder; point scripted:DIR at a folder of candidate .py "
                "files."
            )
        if per_round < 1:
            raise ScriptError(f"per_round is {per_round}; give at least 1 candidate per round.")
        self.per_round = per_round
        files = sorted(p for p in self.folder.glob("*.py") if not p.name.startswith("_"))
        if not files:
            raise ScriptError(
                f"{self.folder}: no candidate .py files; add e.g. 01_fused.py with a 01_fused.toml "
                "sidecar."
            )
        self.script: list[Proposal] = [_load(p, self.name) for p in files]
        self.files = files
        self._next = 0
        self.outcomes: list[tuple[Proposal, str]] = []

    def propose(self, context: AgentContext) -> list[Proposal]:
        batch = self.script[self._next : self._next + self.per_round]
        self._next += len(batch)
        return batch

    def observe(self, proposal: Proposal, outcome: str) -> None:
        self.outcomes.append((proposal, outcome))


def _load(path: Path, agent: str) -> Proposal:
    source = path.read_text()
    sidecar = path.with_suffix(".toml")
    if sidecar.is_file():
        try:
            raw = tomllib.loads(sidecar.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ScriptError(
                f"{sidecar}: not valid TOML ({e}); fix the syntax at that line."
            ) from None
    else:
        raw = _docstring_header(source, path)
    try:
        claim = _Claim.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        origin = sidecar if sidecar.is_file() else f"{path} (docstring header)"
        raise ScriptError(
            f"{origin}: field '{where}': {err['msg']}; give at least a hypothesis "
            f"(keys: hypothesis, predicted_effect, direction, attribution)."
        ) from None
    return Proposal(source=source, agent=agent, **claim.model_dump())


def _docstring_header(source: str, path: Path) -> dict[str, str]:
    try:
        doc = ast.get_docstring(pyast.parse(source)) or ""
    except SyntaxError:
        # A deliberately broken candidate still needs its claim: read the raw header.
        m = re.match(r'\s*(?:"""|\'\'\')(.*?)(?:"""|\'\'\')', source, re.S)
        doc = m.group(1) if m else ""
    out: dict[str, str] = {}
    key = None
    for line in doc.splitlines():
        m = _HEADER.match(line)
        if m:
            key = m.group(1).lower().replace(" ", "_")
            out[key] = m.group(2).strip()
        elif key and line.strip():
            out[key] = f"{out[key]} {line.strip()}".strip()
        else:
            key = None
    return out
