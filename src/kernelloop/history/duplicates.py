"""Duplicate detection before evaluation: refuse ideas already shown not to work.

A candidate is compared with every earlier evaluated proposal of the task, on three
signals: the fingerprint of its normalized source, the similarity of its normalized
change against its parent to the earlier proposal's change against *its* parent, and the
similarity of the hypothesis text. Code is the primary signal: an agent that rewords
and renames (the seed's round-7 failure) still makes the same change.

A refusal says what happened to the earlier one in the outcome words of docs/loop.md
("already judged correct, not timed", "already measured: rejected [slower]"). A kernel
only judged correct where timings do not count (the CPU's interpreter) was never timed:
a run whose timings count (`measured`) evaluates it again instead of refusing it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kernelloop.history.fingerprint import changed_lines, fingerprint
from kernelloop.history.models import IDEA_REJECTIONS, clip, outcome_word

# Same normalized change (lines compared exactly, names erased): the same idea, whatever
# the prose says.
CODE_THRESHOLD = 0.85
# A partly similar change, stated as the same idea.
PARTIAL_CODE_THRESHOLD = 0.6
TEXT_THRESHOLD = 0.5
# A change made only of module-level constants is a point of a parameter search: only
# the identical setting (same fingerprint) is a duplicate, never a neighbouring one.
_CONSTANT_LINE = re.compile(r"^[+-]_ = [-+\w.'\"()]+$")

_STOP = set(
    "a an the to of in on for by and or with from into at as is are be this that it its we "
    "so than then which will would should can could may might more less use using via each "
    "per our their instead also".split()
)


@dataclass(frozen=True)
class PriorProposal:
    """An earlier proposal of the task, as the detector needs it."""

    id: int
    round: int
    hypothesis: str
    fingerprint: str
    change: tuple[str, ...]  # changed_lines(parent source, its source)
    accepted: bool
    category: str
    reasons: tuple[str, ...] = ()
    measured: bool = True  # timed (an objective); False: judged where timings do not count
    was_best: bool = False


@dataclass(frozen=True)
class DuplicateFinding:
    duplicate_of: int
    kind: str  # unchanged | identical | near
    code_similarity: float
    text_similarity: float
    message: str


def _words(text: str) -> list[str]:
    out = []
    for w in re.findall(r"[a-z0-9_]+", text.lower()):
        if w in _STOP:
            continue
        for suffix in ("ing", "es", "ed", "s"):
            if len(w) > len(suffix) + 3 and w.endswith(suffix):
                w = w[: -len(suffix)]
                break
        out.append(w)
    return out


def text_similarity(a: str, b: str) -> float:
    """Word-level similarity of two hypotheses (content words, crude stemming), 0..1."""
    wa, wb = _words(a), _words(b)
    if not wa or not wb:
        return 0.0
    jaccard = len(set(wa) & set(wb)) / len(set(wa) | set(wb))
    return max(jaccard, difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio())


def code_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """Similarity of two normalized changes, line by line, 0..1 (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, list(a), list(b), autojunk=False).ratio()


def is_constant_change(change: Sequence[str]) -> bool:
    return bool(change) and all(_CONSTANT_LINE.match(line) for line in change)


def _outcome(p: PriorProposal) -> str:
    return outcome_word("evaluated", p.accepted, p.category, p.measured, p.was_best)


def _cite(p: PriorProposal) -> str:
    why = f": {p.reasons[0]}" if p.reasons and not p.accepted else ""
    return f"#{p.id} (round {p.round}, {_outcome(p)}{why}; idea: {clip(p.hypothesis, 100)!r})"


def _what_happened(p: PriorProposal) -> str:
    """What became of the earlier identical proposal, in the outcome words."""
    if p.accepted and not p.measured:
        return (
            "it was already judged correct, not timed (timings on that device do not count): "
            "its speed can only be measured where timings count"
        )
    if p.measured:
        return f"it was already measured: {_outcome(p)}"
    return f"it was already judged: {_outcome(p)}"


def find_duplicate(
    source: str,
    hypothesis: str,
    parent_source: str | None,
    prior: Sequence[PriorProposal],
    *,
    parent_id: int | None = None,
    measured: bool = False,
) -> DuplicateFinding | None:
    """Return why `source` should not be evaluated, or None when it is new enough.
    `measured`: the asking run's timings count, so a kernel earlier judged correct but
    never timed is not a duplicate there (it is timed now)."""
    fp = fingerprint(source)
    if parent_source is not None and fingerprint(parent_source) == fp:
        return DuplicateFinding(
            parent_id or 0,
            "unchanged",
            1.0,
            1.0,
            f"no change from its parent #{parent_id} after normalizing names, comments and layout; "
            "propose an actual edit.",
        )
    for p in prior:
        if p.fingerprint == fp:
            if measured and p.accepted and not p.measured:
                continue  # never timed: this run times it
            return DuplicateFinding(
                p.id,
                "identical",
                1.0,
                text_similarity(hypothesis, p.hypothesis),
                f"identical (after renaming/reformatting) to {_cite(p)}; {_what_happened(p)}.",
            )
    if parent_source is None:
        return None
    change = changed_lines(parent_source, source)
    if is_constant_change(change):
        return None
    best: DuplicateFinding | None = None
    for p in prior:
        if p.accepted or p.category not in IDEA_REJECTIONS or is_constant_change(p.change):
            continue
        code = code_similarity(change, p.change)
        text = text_similarity(hypothesis, p.hypothesis)
        if code >= CODE_THRESHOLD or (code >= PARTIAL_CODE_THRESHOLD and text >= TEXT_THRESHOLD):
            if best is None or code + text > best.code_similarity + best.text_similarity:
                best = DuplicateFinding(
                    p.id,
                    "near",
                    code,
                    text,
                    f"near-duplicate of rejected {_cite(p)}: code change similarity {code:.2f}, "
                    f"hypothesis similarity {text:.2f}; propose a different direction.",
                )
    return best
